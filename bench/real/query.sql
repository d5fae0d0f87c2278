-- bench/real/query.sql - the sqlite3 shell's workload in the real-program
-- bench (Debian's /usr/bin/sqlite3 :memory: < query.sql): inserts through a
-- recursive CTE, builds an index, runs grouping, join and sort queries.
CREATE TABLE t(id INTEGER PRIMARY KEY, k INTEGER, s TEXT);
WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 150000)
INSERT INTO t(k, s) SELECT (i * 7919) % 10007, printf('v%08d', (i * 104729) % 99991) FROM n;
CREATE INDEX t_k ON t(k);
SELECT count(*), sum(length(s)) FROM (SELECT k, group_concat(s) AS s FROM t GROUP BY k);
SELECT count(*) FROM t a JOIN t b ON a.k = b.k AND a.id < b.id WHERE a.id % 97 = 0;
SELECT s FROM t ORDER BY s DESC LIMIT 1 OFFSET 1000;
SELECT k, count(*) FROM t WHERE s LIKE '%77%' GROUP BY k ORDER BY 2 DESC LIMIT 3;
