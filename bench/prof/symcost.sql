CREATE TABLE t(a INTEGER PRIMARY KEY, b TEXT, c REAL);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c WHERE x<40000) INSERT INTO t SELECT x, printf('row %d %s', x, hex(randomblob(8))), x*1.5 FROM c;
CREATE INDEX tb ON t(b);
SELECT count(*), sum(length(b)), avg(c) FROM t WHERE b LIKE '%A%';
SELECT b FROM t ORDER BY c DESC LIMIT 3;
