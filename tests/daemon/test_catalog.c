/* test_catalog.c - unit tests of the daemon's artifact catalog (pd_catalog):
 * content and generation as snapshots come and go, persistence, the hash
 * cache, TUI entries per build, fetch, and path-escape attempts. Real files in
 * a temp state root; profiles are real gzip'd pprof files made by
 * tests/mkprofile.py. */
#include "pt_test.h"
#include "pt_config.h"
#include "daemon/pd_catalog.h"
#include "common/pt_base64.h"
#include "common/pt_file.h"
#include "common/pt_gunzip.h"
#include "common/pt_pprof_merge.h"
#include "common/pt_pprof_read.h"
#include "common/pt_sha256.h"
#include "common/pt_snapshot_names.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct fixture {
  char *home;
  char *sdir;
  char *pdir;
} fixture;

static char *cat3(const char *a, const char *b, const char *c) {
  size_t n = strlen(a) + strlen(b) + strlen(c) + 1;
  char *p = malloc(n);
  PT_ASSERT(p);
  snprintf(p, n, "%s%s%s", a, b, c);
  return p;
}

static void fx_init(fixture *f) {
  f->home = pt_tmpdir("catalog");
  char *sessions = cat3(f->home, "/sessions", "");
  PT_ASSERT(mkdir(sessions, 0700) == 0);
  f->sdir = cat3(sessions, "/0123456789ab", "");
  PT_ASSERT(mkdir(f->sdir, 0700) == 0);
  f->pdir = cat3(f->sdir, "/profiling", "");
  PT_ASSERT(mkdir(f->pdir, 0700) == 0);
  free(sessions);
  char *as = cat3(f->home, "/active_session", "");
  pt_write_file(as, "0123456789ab\n", 13);
  free(as);
}

static void fx_fini(fixture *f) {
  pt_rm_rf(f->home);
  free(f->home);
  free(f->sdir);
  free(f->pdir);
}

/* Writes a real gzip'd pprof profile named `name` in the profiling dir. */
static char *write_profile(fixture *f, const char *name, const char *func) {
  char *path = cat3(f->pdir, "/", name);
  char *script = pt_source_path("tests/mkprofile.py");
  char arg[128];
  snprintf(arg, sizeof arg, "%s=25", func);
  char *argv[] = {"python3", script, path, arg, "main=2", NULL};
  char *out = NULL;
  int st = pt_run(argv, &out, 20000);
  PT_ASSERT_MSG(st == 0, "mkprofile.py failed (%d): %s", st, out ? out : "");
  free(out);
  free(script);
  return path;
}

static void file_sha(const char *path, char hex[PT_SHA256_HEX]) {
  size_t len = 0;
  char *d = pt_read_file(path, &len);
  PT_ASSERT(d);
  PT_ASSERT_INT_EQ(pt_sha256_hex(d, len, hex), 0);
  free(d);
}

static const pd_catalog_entry *find_label(pd_catalog *c, const char *label) {
  for (size_t i = 0; i < pd_catalog_count(c); i++)
    if (strcmp(pd_catalog_entry_at(c, i)->label, label) == 0) return pd_catalog_entry_at(c, i);
  return NULL;
}

static size_t count_kind(pd_catalog *c, const char *kind) {
  size_t n = 0;
  for (size_t i = 0; i < pd_catalog_count(c); i++)
    n += strcmp(pd_catalog_entry_at(c, i)->kind, kind) == 0;
  return n;
}

/* Decodes with the same decoder the CLI/TUI use (pt_base64.c), which
 * rejects malformed input. */
static uint8_t *b64dec(const char *s, size_t *len) {
  PT_ASSERT(s != NULL);
  uint8_t *o = NULL;
  PT_ASSERT_INT_EQ(pt_base64_decode(s, strlen(s), &o, len), 0);
  return o;
}

/* Fetches the whole artifact through the IPC method, chunk by chunk. */
static uint8_t *fetch_all(pd_catalog *c, const char *id, size_t *len, const char **code) {
  uint8_t *all = NULL;
  size_t n = 0;
  uint64_t off = 0;
  for (;;) {
    json_t *params = json_pack("{s:s, s:I}", "id", id, "offset", (json_int_t)off);
    json_t *res = NULL;
    char msg[256];
    int r = pd_catalog_call(c, "artifacts.fetch", params, &res, code, msg, sizeof msg);
    json_decref(params);
    if (r < 0) { free(all); return NULL; }
    size_t dl = 0;
    uint8_t *d = b64dec(json_string_value(json_object_get(res, "data_base64")), &dl);
    PT_ASSERT_UINT_EQ(dl, json_integer_value(json_object_get(res, "length")));
    all = realloc(all, n + dl + 1);
    PT_ASSERT(all);
    memcpy(all + n, d, dl);
    n += dl;
    off += dl;
    free(d);
    int eof = json_is_true(json_object_get(res, "eof"));
    json_decref(res);
    if (eof) break;
    PT_ASSERT(dl > 0);
  }
  *len = n;
  return all;
}

PT_TEST(daemon_catalog_generation_tracks_snapshots) {
  fixture f;
  fx_init(&f);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  uint64_t g0 = pd_catalog_generation(c);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 0);

  char *p1 = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  uint64_t g1 = pd_catalog_generation(c);
  PT_ASSERT(g1 > g0);
  const pd_catalog_entry *e = find_label(c, "CPU profile (pprof)");
  PT_ASSERT(e);
  PT_ASSERT_STR_EQ(e->kind, "cpu-profile");
  PT_ASSERT_STR_EQ(e->source, "daemon");
  PT_ASSERT_STR_EQ(e->path, "profiling/" PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz");
  PT_ASSERT_STR_EQ(e->created, "2026-11-29T21:00:00Z");
  char hex[PT_SHA256_HEX];
  file_sha(p1, hex);
  PT_ASSERT_STR_EQ(e->sha256, hex);
  struct stat st;
  PT_ASSERT(stat(p1, &st) == 0);
  PT_ASSERT_UINT_EQ(e->size, st.st_size);
  char id1[17];
  memcpy(id1, e->id, sizeof id1);

  /* No change: same generation, and nothing re-hashed. */
  pd_catalog_stats s0, s1;
  pd_catalog_get_stats(c, &s0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  pd_catalog_get_stats(c, &s1);
  PT_ASSERT_UINT_EQ(pd_catalog_generation(c), g1);
  PT_ASSERT_UINT_EQ(s1.files_hashed, s0.files_hashed);
  PT_ASSERT(s1.cache_hits > s0.cache_hits);
  PT_ASSERT_STR_EQ(find_label(c, "CPU profile (pprof)")->id, id1);

  /* A newer snapshot takes the label; the older one keeps its time. */
  char *p2 = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210500Z-2.pb.gz", "parse_line");
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  uint64_t g2 = pd_catalog_generation(c);
  PT_ASSERT(g2 > g1);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 2);
  e = find_label(c, "CPU profile (pprof)");
  PT_ASSERT(e);
  PT_ASSERT_STR_EQ(e->path, "profiling/" PT_SNAPSHOT_DAEMON_PREFIX "20261129T210500Z-2.pb.gz");
  const pd_catalog_entry *old = find_label(c, "CPU profile (pprof), 2026-11-29 21:00:00 UTC");
  PT_ASSERT(old);
  PT_ASSERT_STR_EQ(old->id, id1); /* same file, same id */
  /* Non-snapshot files and temp files are not listed. */
  char *junk = cat3(f.pdir, "/", "." PT_SNAPSHOT_DAEMON_PREFIX "20261129T211000Z-3.pb.gz.tmp");
  pt_write_file(junk, "x", 1);
  char *other = cat3(f.pdir, "/", "notes.txt");
  pt_write_file(other, "x", 1);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(pd_catalog_generation(c), g2);
  PT_ASSERT_UINT_EQ(pd_catalog_count(c), 3); /* two snapshots and their merge */

  /* Pruning the older one changes the content again. */
  PT_ASSERT(unlink(p1) == 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  uint64_t g3 = pd_catalog_generation(c);
  PT_ASSERT(g3 > g2);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 1);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile-merged"), 0); /* one snapshot: no merge */
  PT_ASSERT(pd_catalog_find(c, id1) == NULL);
  pd_catalog_del(c);

  /* Across a restart: same content keeps the generation; a change goes on
   * from the persisted one, never back. */
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_UINT_EQ(pd_catalog_generation(c), g3);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(pd_catalog_generation(c), g3);
  PT_ASSERT(unlink(p2) == 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT(pd_catalog_generation(c) > g3);
  pd_catalog_stats s2;
  pd_catalog_get_stats(c, &s2);
  PT_ASSERT_INT_EQ(s2.persist_error, 0);
  pd_catalog_del(c);

  free(p1); free(p2); free(junk); free(other);
  fx_fini(&f);
}

PT_TEST(daemon_catalog_damaged_state_never_goes_back) {
  fixture f;
  fx_init(&f);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  char *p = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  uint64_t g = pd_catalog_generation(c);
  pd_catalog_del(c);
  char *cj = cat3(f.home, "/catalog.json", "");
  pt_write_file(cj, "{not json", 9);
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT(pd_catalog_generation(c) > g);
  /* ... and the rewritten file is valid again. */
  json_t *o = json_load_file(cj, 0, NULL);
  PT_ASSERT(o);
  PT_ASSERT_UINT_EQ(json_integer_value(json_object_get(o, "generation")), pd_catalog_generation(c));
  json_decref(o);
  pd_catalog_del(c);
  free(p); free(cj);
  fx_fini(&f);
}

PT_TEST(daemon_catalog_tui_entries_follow_build) {
  fixture f;
  fx_init(&f);
  char *d = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  char *t1 = write_profile(&f, PT_SNAPSHOT_TUI_PREFIX "20261129T210100Z-1.pb.gz", "tui_render");
  char *t2 = write_profile(&f, PT_SNAPSHOT_TUI_PREFIX "20261129T210200Z-2.pb.gz", "tui_render");
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT(find_label(c, "CPU profile (pprof)"));
#if PT_PROFILING
  PT_ASSERT_UINT_EQ(count_kind(c, "tui-cpu-profile"), 2);
  const pd_catalog_entry *e = find_label(c, "TUI CPU profile (pprof)");
  PT_ASSERT(e);
  PT_ASSERT_STR_EQ(e->source, "tui");
  PT_ASSERT_STR_EQ(e->path, "profiling/" PT_SNAPSHOT_TUI_PREFIX "20261129T210200Z-2.pb.gz");
  PT_ASSERT(find_label(c, "TUI CPU profile (pprof), 2026-11-29 21:01:00 UTC"));
#else
  PT_ASSERT_UINT_EQ(count_kind(c, "tui-cpu-profile"), 0);
  PT_ASSERT(find_label(c, "TUI CPU profile (pprof)") == NULL);
#endif
  pd_catalog_del(c);
  free(d); free(t1); free(t2);
  fx_fini(&f);
}

PT_TEST(daemon_catalog_fetch_returns_exact_bytes) {
  fixture f;
  fx_init(&f);
  char *p = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  /* A log bigger than one chunk, to exercise chunked fetch. */
  char *logs = cat3(f.home, "/logs", "");
  PT_ASSERT(mkdir(logs, 0700) == 0);
  char *log = cat3(logs, "/daemon.log", "");
  size_t big = PD_CATALOG_CHUNK_MAX * 2 + 1234;
  char *bigbuf = malloc(big);
  PT_ASSERT(bigbuf);
  for (size_t i = 0; i < big; i++) bigbuf[i] = (char)('a' + (i * 7919) % 26);
  pt_write_file(log, bigbuf, big);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  json_t *res = NULL;
  const char *code = NULL;
  char msg[256];
  PT_ASSERT_INT_EQ(pd_catalog_call(c, "artifacts.list", NULL, &res, &code, msg, sizeof msg), 0);
  PT_ASSERT_INT_EQ(json_integer_value(json_object_get(res, "schema")), PD_CATALOG_SCHEMA);
  PT_ASSERT(json_is_true(json_object_get(res, "changed")));
  json_t *entries = json_object_get(res, "entries");
  PT_ASSERT_UINT_EQ(json_array_size(entries), 2);
  json_int_t gen = json_integer_value(json_object_get(res, "generation"));
  json_decref(res);

  /* Unchanged since the generation the client has: no entries. */
  json_t *params = json_pack("{s:I}", "since_generation", gen);
  PT_ASSERT_INT_EQ(pd_catalog_call(c, "artifacts.list", params, &res, &code, msg, sizeof msg), 0);
  json_decref(params);
  PT_ASSERT(json_is_false(json_object_get(res, "changed")));
  PT_ASSERT(json_object_get(res, "entries") == NULL);
  json_decref(res);

  const pd_catalog_entry *e = find_label(c, "CPU profile (pprof)");
  PT_ASSERT(e);
  size_t len = 0, flen = 0;
  uint8_t *got = fetch_all(c, e->id, &len, &code);
  PT_ASSERT(got);
  char *want = pt_read_file(p, &flen);
  PT_ASSERT_UINT_EQ(len, flen);
  PT_ASSERT_MEM_EQ(got, want, len);
  char hex[PT_SHA256_HEX];
  PT_ASSERT_INT_EQ(pt_sha256_hex(got, len, hex), 0);
  PT_ASSERT_STR_EQ(hex, e->sha256);
  free(got); free(want);

  /* The log is served as the prefix that was listed, even after it grew. */
  e = find_label(c, "Daemon log");
  PT_ASSERT(e);
  PT_ASSERT_UINT_EQ(e->size, big);
  int fd = open(log, O_WRONLY | O_APPEND);
  PT_ASSERT(fd >= 0);
  PT_ASSERT(write(fd, "more\n", 5) == 5);
  close(fd);
  got = fetch_all(c, e->id, &len, &code);
  PT_ASSERT_MSG(got, "fetch failed: %s", code);
  PT_ASSERT_UINT_EQ(len, big);
  PT_ASSERT_MEM_EQ(got, bigbuf, big);
  free(got);

  /* A profile rewritten in place after listing is refused, not served. */
  e = find_label(c, "CPU profile (pprof)");
  char id[17];
  memcpy(id, e->id, sizeof id);
  fd = open(p, O_WRONLY | O_APPEND);
  PT_ASSERT(fd >= 0);
  PT_ASSERT(write(fd, "X", 1) == 1);
  close(fd);
  got = fetch_all(c, id, &len, &code);
  PT_ASSERT(got == NULL);
  PT_ASSERT_STR_EQ(code, "not_found");

  pd_catalog_del(c);
  free(bigbuf); free(log); free(logs); free(p);
  fx_fini(&f);
}

static void expect_fetch_error(pd_catalog *c, json_t *params, const char *want_code) {
  json_t *res = NULL;
  const char *code = NULL;
  char msg[256] = "";
  int r = pd_catalog_call(c, "artifacts.fetch", params, &res, &code, msg, sizeof msg);
  PT_ASSERT_MSG(r < 0, "fetch unexpectedly succeeded");
  PT_ASSERT(res == NULL);
  PT_ASSERT_STR_EQ(code, want_code);
  PT_ASSERT(msg[0] != '\0');
  json_decref(params);
}

PT_TEST(daemon_catalog_fetch_refuses_path_escapes) {
  fixture f;
  fx_init(&f);
  char *p = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  /* A secret outside the catalog, next to the state root. */
  char *secret = cat3(f.home, "/secret.txt", "");
  pt_write_file(secret, "SECRET", 6);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  const pd_catalog_entry *e = find_label(c, "CPU profile (pprof)");
  PT_ASSERT(e);
  char id[17];
  memcpy(id, e->id, sizeof id);

  /* Crafted requests: paths in place of ids, or an extra path parameter. */
  expect_fetch_error(c, json_pack("{s:s}", "id", "../secret.txt"), "not_found");
  expect_fetch_error(c, json_pack("{s:s}", "id", "../../../../etc/passwd"), "not_found");
  expect_fetch_error(c, json_pack("{s:s}", "id", secret), "not_found");
  expect_fetch_error(c, json_pack("{s:s}", "id", "/etc/passwd"), "not_found");
  expect_fetch_error(c, json_pack("{s:s, s:s}", "id", id, "path", "/etc/passwd"), "bad_request");
  expect_fetch_error(c, json_pack("{s:i}", "id", 5), "bad_request");
  expect_fetch_error(c, json_pack("{s:s, s:I}", "id", id, "offset", (json_int_t)1 << 40),
                     "bad_request");

  /* The opener itself. */
  int dfd = open(f.sdir, O_RDONLY | O_DIRECTORY);
  PT_ASSERT(dfd >= 0);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, "../../secret.txt", O_RDONLY), -EINVAL);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, "profiling/../../../secret.txt", O_RDONLY), -EINVAL);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, secret, O_RDONLY), -EINVAL);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, "./profiling", O_RDONLY), -EINVAL);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, "", O_RDONLY), -EINVAL);
  char *lnk = cat3(f.sdir, "/link", "");
  PT_ASSERT(symlink(secret, lnk) == 0);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, "link", O_RDONLY), -ELOOP);
  char *dlnk = cat3(f.sdir, "/dirlink", "");
  PT_ASSERT(symlink(f.home, dlnk) == 0);
  int r = pt_open_beneath(dfd, "dirlink/secret.txt", O_RDONLY);
  PT_ASSERT_MSG(r == -ELOOP || r == -EXDEV, "dirlink: %d", r);
  int ok = pt_open_beneath(dfd, "profiling/" PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", O_RDONLY);
  PT_ASSERT(ok >= 0);
  close(ok);
  close(dfd);

  /* A symlink swapped in after listing, at the listed name. */
  char *moved = cat3(f.home, "/moved.pb.gz", "");
  PT_ASSERT(rename(p, moved) == 0);
  PT_ASSERT(symlink(moved, p) == 0);
  expect_fetch_error(c, json_pack("{s:s}", "id", id), "not_found");
  /* ... and in place of the profiling directory (same file inside). */
  PT_ASSERT(unlink(p) == 0);
  PT_ASSERT(rename(moved, p) == 0);
  char *pdir2 = cat3(f.home, "/elsewhere", "");
  PT_ASSERT(rename(f.pdir, pdir2) == 0);
  PT_ASSERT(symlink(pdir2, f.pdir) == 0);
  expect_fetch_error(c, json_pack("{s:s}", "id", id), "not_found");
  /* Restored: served again, so the refusals above were about the path. */
  PT_ASSERT(unlink(f.pdir) == 0);
  PT_ASSERT(rename(pdir2, f.pdir) == 0);
  size_t len = 0;
  const char *code = NULL;
  uint8_t *got = fetch_all(c, id, &len, &code);
  PT_ASSERT_MSG(got, "fetch after restore failed: %s", code ? code : "?");
  free(got);

  pd_catalog_del(c);
  free(p); free(secret); free(lnk); free(dlnk); free(moved); free(pdir2);
  fx_fini(&f);
}

PT_TEST(daemon_catalog_unknown_method_and_bad_params) {
  fixture f;
  fx_init(&f);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  json_t *res = NULL;
  const char *code = NULL;
  char msg[256];
  PT_ASSERT(pd_catalog_call(c, "artifacts.nope", NULL, &res, &code, msg, sizeof msg) < 0);
  PT_ASSERT_STR_EQ(code, "unknown_method");
  json_t *params = json_pack("{s:s}", "since_generation", "x");
  PT_ASSERT(pd_catalog_call(c, "artifacts.list", params, &res, &code, msg, sizeof msg) < 0);
  PT_ASSERT_STR_EQ(code, "bad_request");
  json_decref(params);
  PT_ASSERT(pd_catalog_call(c, "artifacts.fetch", NULL, &res, &code, msg, sizeof msg) < 0);
  PT_ASSERT_STR_EQ(code, "bad_request");
  pd_catalog_del(c);
  fx_fini(&f);
}

PT_TEST(daemon_catalog_follows_active_session_hook) {
  fixture f;
  fx_init(&f);
  char *p = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  /* A second session, named by the daemon's hook rather than the file. */
  char *s2 = cat3(f.home, "/sessions/bbbbbbbbbbbb", "");
  PT_ASSERT(mkdir(s2, 0700) == 0);
  char *pd2 = cat3(s2, "/profiling", "");
  PT_ASSERT(mkdir(pd2, 0700) == 0);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 1);
  PT_ASSERT_INT_EQ(pd_catalog_set_session(c, s2), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 0);
  /* Back to the file's session when the hook says "none". */
  PT_ASSERT_INT_EQ(pd_catalog_set_session(c, NULL), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 1);
  /* A hostile active_session file cannot point outside sessions/. */
  char *as = cat3(f.home, "/active_session", "");
  pt_write_file(as, "../../etc\n", 10);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 0);
  pd_catalog_del(c);
  free(as); free(pd2); free(s2); free(p);
  fx_fini(&f);
}

PT_TEST(daemon_catalog_state_root_profiles_without_session) {
  fixture f;
  fx_init(&f);
  char *as = cat3(f.home, "/active_session", "");
  PT_ASSERT(unlink(as) == 0);
  char *rootprof = cat3(f.home, "/profiling", "");
  PT_ASSERT(mkdir(rootprof, 0700) == 0);
  char *p = cat3(rootprof, "/" PT_SNAPSHOT_DAEMON_PREFIX "20261129T220000Z-1.pb.gz", "");
  char *script = pt_source_path("tests/mkprofile.py");
  char *argv[] = {"python3", script, p, "hot_spin=5", NULL};
  PT_ASSERT_INT_EQ(pt_run(argv, NULL, 20000), 0);
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  const pd_catalog_entry *e = find_label(c, "CPU profile (pprof)");
  PT_ASSERT(e);
  PT_ASSERT_INT_EQ(e->root, PD_CATALOG_ROOT_STATE);
  PT_ASSERT_STR_EQ(e->path, "profiling/" PT_SNAPSHOT_DAEMON_PREFIX "20261129T220000Z-1.pb.gz");
  uint8_t *d = NULL;
  size_t len = 0;
  PT_ASSERT_INT_EQ(pd_catalog_read(c, e->id, 0, PD_CATALOG_CHUNK_MAX, &d, &len), 0);
  size_t flen = 0;
  char *want = pt_read_file(p, &flen);
  PT_ASSERT_UINT_EQ(len, flen);
  PT_ASSERT_MEM_EQ(d, want, len);
  free(d); free(want);
  /* Once a session is active, its own directory is listed instead. */
  pt_write_file(as, "0123456789ab\n", 13);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 0);
  pd_catalog_del(c);
  free(script); free(p); free(rootprof); free(as);
  fx_fini(&f);
}

/* The daemon log's hash is extended incrementally (only appended bytes are
 * read) and always equals the SHA-256 of the listed prefix, also when a
 * tail is cut back and rewritten with other bytes (telemetry's short-write
 * repair), which must make the catalog hash from the start again. The
 * three-phase refresh gives the same result as the one-shot one. */
static const pd_catalog_entry *find_kind(pd_catalog *c, const char *kind) {
  for (size_t i = 0; i < pd_catalog_count(c); i++)
    if (strcmp(pd_catalog_entry_at(c, i)->kind, kind) == 0) return pd_catalog_entry_at(c, i);
  return NULL;
}

static void file_prefix_sha(const char *path, uint64_t n, char hex[PT_SHA256_HEX]) {
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  PT_ASSERT(fd >= 0);
  size_t got = 0;
  PT_ASSERT_INT_EQ(pt_sha256_fd(fd, (size_t)n, hex, &got), 0);
  PT_ASSERT_UINT_EQ(got, n);
  close(fd);
}

PT_TEST(daemon_catalog_log_hash_incremental) {
  fixture f;
  fx_init(&f);
  char *logs = cat3(f.home, "/logs", "");
  PT_ASSERT(mkdir(logs, 0700) == 0);
  char *log = cat3(logs, "/daemon.log", "");
  int fd = open(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  PT_ASSERT(fd >= 0);
  char block[8192];
  memset(block, 'a', sizeof block);
  for (int i = 0; i < 64; i++) PT_ASSERT(write(fd, block, sizeof block) == (ssize_t)sizeof block);
  pd_catalog *c;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  pd_catalog_job *job;
  PT_ASSERT_INT_EQ(pd_catalog_refresh_begin(c, &job), 0);
  pd_catalog_job *job2;
  PT_ASSERT_INT_EQ(pd_catalog_refresh_begin(c, &job2), -EBUSY); /* one at a time */
  pd_catalog_refresh_work(job);
  PT_ASSERT_INT_EQ(pd_catalog_refresh_end(c, job), 0);
  const pd_catalog_entry *e = find_kind(c, "daemon-log");
  PT_ASSERT(e != NULL);
  PT_ASSERT_UINT_EQ(e->size, 64 * sizeof block);
  char hex[PT_SHA256_HEX];
  file_prefix_sha(log, e->size, hex);
  PT_ASSERT_STR_EQ(e->sha256, hex);
  pd_catalog_stats st0, st1;
  pd_catalog_get_stats(c, &st0);

  /* append 10 bytes: the next refresh reads just those */
  PT_ASSERT(write(fd, "0123456789", 10) == 10);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  pd_catalog_get_stats(c, &st1);
  e = find_kind(c, "daemon-log");
  PT_ASSERT_UINT_EQ(e->size, 64 * sizeof block + 10);
  PT_ASSERT_UINT_EQ(st1.bytes_hashed - st0.bytes_hashed, 10);
  file_prefix_sha(log, e->size, hex);
  PT_ASSERT_STR_EQ(e->sha256, hex);

  /* cut the last 5 bytes back and write 50 other ones: same inode, longer,
   * but the old prefix changed: hashed from the start, still correct */
  struct stat sb;
  PT_ASSERT(fstat(fd, &sb) == 0);
  PT_ASSERT(ftruncate(fd, sb.st_size - 5) == 0);
  char other[50];
  memset(other, 'z', sizeof other);
  PT_ASSERT(write(fd, other, sizeof other) == (ssize_t)sizeof other);
  pd_catalog_get_stats(c, &st0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  pd_catalog_get_stats(c, &st1);
  e = find_kind(c, "daemon-log");
  PT_ASSERT_UINT_EQ(e->size, 64 * sizeof block + 55);
  PT_ASSERT_UINT_EQ(st1.bytes_hashed - st0.bytes_hashed, e->size);
  file_prefix_sha(log, e->size, hex);
  PT_ASSERT_STR_EQ(e->sha256, hex);

  /* unchanged: nothing read, state carried over; then append works again */
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT(write(fd, "tail\n", 5) == 5);
  pd_catalog_get_stats(c, &st0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  pd_catalog_get_stats(c, &st1);
  PT_ASSERT_UINT_EQ(st1.bytes_hashed - st0.bytes_hashed, 5);
  e = find_kind(c, "daemon-log");
  file_prefix_sha(log, e->size, hex);
  PT_ASSERT_STR_EQ(e->sha256, hex);

  /* fetch of the log (offset 0 re-hash) in three phases */
  pd_catalog_read_job *rj;
  PT_ASSERT_INT_EQ(pd_catalog_read_begin(c, e->id, 0, 16, &rj), 0);
  pd_catalog_read_work(rj);
  uint8_t *data;
  size_t len;
  PT_ASSERT_INT_EQ(pd_catalog_read_end(rj, &data, &len), 0);
  PT_ASSERT_UINT_EQ(len, 16);
  PT_ASSERT_MEM_EQ(data, block, 16);
  free(data);
  close(fd);
  pd_catalog_del(c);
  free(log);
  free(logs);
  fx_fini(&f);
}

static pt_pprof *decode_gz(const uint8_t *d, size_t n) {
  uint8_t *raw = NULL;
  size_t rawn = 0;
  PT_ASSERT_INT_EQ(pt_gunzip(d, n, 0, &raw, &rawn), 0);
  pt_pprof *p = NULL;
  PT_ASSERT_INT_EQ(pt_pprof_read(raw, rawn, NULL, &p, NULL, 0), 0);
  free(raw);
  return p;
}

/* Each profile entry carries its window and samples; two or more snapshots
 * are also offered merged: exact bytes (fetched and checked against the
 * listed SHA-256), the sum of the snapshots, the same artifact (id,
 * generation) while they are unchanged, a new one when one is added. */
PT_TEST(daemon_catalog_merged_profiles) {
  fixture f;
  fx_init(&f);
  char *p1 = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210000Z-1.pb.gz", "hot_spin");
  char *p2 = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210100Z-2.pb.gz", "parse_line");
  pd_catalog *c = NULL;
  PT_ASSERT_INT_EQ(pd_catalog_new(&c, f.home), 0);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  const pd_catalog_entry *e = find_label(c, "CPU profile (pprof)");
  PT_ASSERT(e && e->has_profile);
  PT_ASSERT_INT_EQ(e->samples, 27); /* parse_line=25 main=2 */
  PT_ASSERT_INT_EQ(e->duration_ns, 10000000000LL);
  const pd_catalog_entry *m = find_kind(c, "cpu-profile-merged");
  PT_ASSERT(m);
  PT_ASSERT_STR_EQ(m->label, "CPU profile (pprof), 2 kept snapshots merged");
  PT_ASSERT_STR_EQ(m->path, "profiling/daemon-profiles-merged.pb.gz");
  PT_ASSERT_STR_EQ(m->source, "daemon");
  PT_ASSERT(m->blob && m->has_profile);
  PT_ASSERT_INT_EQ(m->samples, 54);
  uint64_t g1 = pd_catalog_generation(c);
  char mid[17];
  memcpy(mid, m->id, sizeof mid);
  char msha[65];
  memcpy(msha, m->sha256, sizeof msha);

  /* fetched: the listed bytes, a profile summing both snapshots */
  size_t n = 0;
  const char *code = NULL;
  uint8_t *d = fetch_all(c, mid, &n, &code);
  PT_ASSERT_MSG(d, "fetch of the merged artifact: %s", code ? code : "?");
  PT_ASSERT_UINT_EQ(n, m->size);
  char hex[PT_SHA256_HEX];
  PT_ASSERT_INT_EQ(pt_sha256_hex(d, n, hex), 0);
  PT_ASSERT_STR_EQ(hex, msha);
  pt_pprof *merged = decode_gz(d, n);
  PT_ASSERT_INT_EQ(pt_pprof_sample_total(merged), 54);
  int windows = 0;
  for (size_t i = 0; i < merged->n_comments; i++)
    windows += strncmp(pt_pprof_string(merged, merged->comments[i]), "merged window ", 14) == 0;
  PT_ASSERT_INT_EQ(windows, 2);
  pt_pprof_free(merged);
  free(d);

  /* the JSON: absolute paths beside the relative ones, the session named */
  json_t *res = NULL;
  char msg[256];
  PT_ASSERT_INT_EQ(pd_catalog_call(c, "artifacts.list", NULL, &res, &code, msg, sizeof msg), 0);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(res, "home")), f.home);
  json_t *sess = json_object_get(res, "session");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sess, "id")), "0123456789ab");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(sess, "dir")), f.sdir);
  size_t i;
  json_t *je;
  int files = 0, built = 0;
  json_array_foreach(json_object_get(res, "entries"), i, je) {
    const char *kind = json_string_value(json_object_get(je, "kind"));
    const char *file = json_string_value(json_object_get(je, "file"));
    if (strcmp(kind, "cpu-profile") == 0) {
      char *want = cat3(f.sdir, "/", json_string_value(json_object_get(je, "path")));
      PT_ASSERT_STR_EQ(file, want);
      PT_ASSERT(json_integer_value(json_object_get(je, "samples")) > 0);
      PT_ASSERT(json_integer_value(json_object_get(je, "duration_ns")) == 10000000000LL);
      free(want);
      files++;
    } else if (strcmp(kind, "cpu-profile-merged") == 0) {
      PT_ASSERT(json_is_true(json_object_get(je, "built")) && !file);
      PT_ASSERT_INT_EQ(json_integer_value(json_object_get(je, "samples")), 54);
      built++;
    }
  }
  PT_ASSERT(files == 2 && built == 1);
  json_decref(res);

  /* unchanged: the same artifact, no new generation */
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(pd_catalog_generation(c), g1);
  PT_ASSERT_STR_EQ(find_kind(c, "cpu-profile-merged")->id, mid);
  /* a third snapshot: a new merged artifact of three */
  char *p3 = write_profile(&f, PT_SNAPSHOT_DAEMON_PREFIX "20261129T210200Z-3.pb.gz", "hot_spin");
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  m = find_kind(c, "cpu-profile-merged");
  PT_ASSERT(m && strcmp(m->id, mid) != 0);
  PT_ASSERT_STR_EQ(m->label, "CPU profile (pprof), 3 kept snapshots merged");
  PT_ASSERT_INT_EQ(m->samples, 81);
  PT_ASSERT(pd_catalog_generation(c) > g1);
  /* the old id is gone: fetching it says not_found */
  d = fetch_all(c, mid, &n, &code);
  PT_ASSERT(!d && strcmp(code, "not_found") == 0);
  /* a snapshot that is not a profile: listed, no window, no merge */
  pt_write_file(p3, "not a profile", 13);
  PT_ASSERT_INT_EQ(pd_catalog_refresh(c), 0);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile"), 3);
  PT_ASSERT_UINT_EQ(count_kind(c, "cpu-profile-merged"), 0);
  pd_catalog_del(c);
  free(p1);
  free(p2);
  free(p3);
  fx_fini(&f);
}
