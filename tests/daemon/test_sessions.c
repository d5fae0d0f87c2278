/* Unit tests for the daemon's session store (src/daemon/pd_sessions.c), on
 * real files in a temporary state root. The transcript file itself has its
 * own tests (test_transcript.c). */
#include "pt_test.h"
#include "pt_config.h"
#include "daemon/pd_sessions.h"
#include "common/pt_file.h"

#include <errno.h>
#include <sched.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

static int g_hook_calls;
static char g_hook_dir[4096];
static void hook(const char *dir, void *ctx) {
  (void)ctx;
  g_hook_calls++;
  snprintf(g_hook_dir, sizeof g_hook_dir, "%s", dir ? dir : "(null)");
}

PT_TEST(daemon_sessions_create_rename_persist_active) {
  char *home = pt_tmpdir("store");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  PT_ASSERT_INT_EQ(pd_sessions_on_active(st, hook, NULL), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 0);
  pd_session *a, *b;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, NULL, &a), 0);
  PT_ASSERT_STR_EQ(a->name, "Session 1");
  PT_ASSERT_UINT_EQ(strlen(a->id), 12);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "second", &b), 0);
  PT_ASSERT(strcmp(a->id, b->id) != 0);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "", &b), -EINVAL);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "bad\nname", &b), -EINVAL);
  PT_ASSERT_INT_EQ(pd_session_rename(a, "renamed"), 0);
  /* directories made with the session */
  char *prof = join(a->dir, "profiling");
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(prof, &sb), 0);
  PT_ASSERT(S_ISDIR(sb.st_mode));
  /* transcript entries and turn counting */
  PT_ASSERT_INT_EQ(pd_transcript_append(a->transcript, 1, "user", "hello", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(a->transcript, 1, "assistant", "hi there", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_turns(a->transcript), 1);
  PT_ASSERT_INT_EQ(pd_sessions_set_active(st, a), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 1);
  PT_ASSERT_STR_EQ(g_hook_dir, a->dir);
  char ida[13];
  memcpy(ida, a->id, sizeof ida);
  pd_sessions_del(st);

  /* reopen: everything is back, newest first, active restored */
  g_hook_calls = 0;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 0); /* callbacks belong to the store they were set on */
  PT_ASSERT_INT_EQ(pd_sessions_on_active(st, hook, NULL), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 1); /* fired at once for the loaded active session */
  PT_ASSERT_UINT_EQ(pd_sessions_count(st), 2);
  pd_session *ra = pd_sessions_find(st, ida);
  PT_ASSERT(ra != NULL);
  PT_ASSERT_STR_EQ(ra->name, "renamed");
  PT_ASSERT_INT_EQ(pd_transcript_turns(ra->transcript), 1);
  PT_ASSERT(pd_sessions_active(st) == ra);
  PT_ASSERT_INT_EQ(pd_session_touch(ra), 0);
  json_t *l = pd_sessions_list_json(st);
  json_t *first = json_array_get(json_object_get(l, "sessions"), 0);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(first, "id")), ida);
  PT_ASSERT_INT_EQ(json_array_size(json_object_get(l, "skipped")), 0);
  json_decref(l);
  json_t *tr;
  char *tpath = join(ra->dir, "transcript.jsonl");
  char err[256];
  PT_ASSERT_INT_EQ(pd_transcript_read(tpath, &tr, NULL, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(tr), 2);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(tr, 1), "text")), "hi there");
  json_decref(tr);
  /* delete the active session: gone from disk, no active session */
  char *dir = strdup(ra->dir);
  PT_ASSERT_INT_EQ(pd_sessions_delete(st, ra), 0);
  PT_ASSERT(stat(dir, &sb) != 0);
  PT_ASSERT(pd_sessions_active(st) == NULL);
  PT_ASSERT_STR_EQ(g_hook_dir, "(null)");
  pd_sessions_del(st);
  pt_rm_rf(home);
}

PT_TEST(daemon_sessions_damaged_session_skipped_untouched) {
  char *home = pt_tmpdir("damaged");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a, *b, *c;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "good", &a), 0);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "bad json", &b), 0);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "bad transcript", &c), 0);
  char *bj = join(b->dir, "session.json");
  char *ct = join(c->dir, "transcript.jsonl");
  char idb[13], idc[13];
  memcpy(idb, b->id, 13);
  memcpy(idc, c->id, 13);
  pd_sessions_del(st);
  const char junk[] = "{\"name\": \"bad json\", \"created\": ";
  pt_write_file(bj, junk, sizeof junk - 1);
  const char half[] = "{\"turn_id\":1,\"role\":\"user\",\"text\":\"x\",\"ts\":\"2026-01-01T00:00:00Z\"}\n{\"turn_id\":2,";
  pt_write_file(ct, half, sizeof half - 1);

  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  PT_ASSERT_UINT_EQ(pd_sessions_count(st), 1);
  PT_ASSERT(pd_sessions_find(st, idb) == NULL);
  json_t *l = pd_sessions_list_json(st);
  json_t *sk = json_object_get(l, "skipped");
  PT_ASSERT_UINT_EQ(json_array_size(sk), 2);
  int seen_b = 0, seen_c = 0;
  for (size_t i = 0; i < 2; i++) {
    const char *id = json_string_value(json_object_get(json_array_get(sk, i), "id"));
    const char *e = json_string_value(json_object_get(json_array_get(sk, i), "error"));
    if (strcmp(id, idb) == 0) seen_b = strstr(e, "session.json") != NULL;
    if (strcmp(id, idc) == 0) seen_c = strstr(e, "transcript.jsonl") != NULL;
  }
  PT_ASSERT(seen_b && seen_c);
  json_decref(l);
  /* a new session never reuses a skipped id, and the files are untouched */
  pd_session *d;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, NULL, &d), 0);
  pd_sessions_del(st);
  size_t n;
  char *got = pt_read_file(bj, &n);
  PT_ASSERT_UINT_EQ(n, sizeof junk - 1);
  PT_ASSERT_MEM_EQ(got, junk, n);
  free(got);
  got = pt_read_file(ct, &n);
  PT_ASSERT_UINT_EQ(n, sizeof half - 1);
  PT_ASSERT_MEM_EQ(got, half, n);
  free(got);
  pt_rm_rf(home);
}

/* Active-session callbacks live on the store handle: two stores (two state
 * roots) do not see each other's changes; the table has a fixed size. */
static int g_calls_a, g_calls_b;
static void hook_a(const char *dir, void *ctx) { (void)dir; (void)ctx; g_calls_a++; }
static void hook_b(const char *dir, void *ctx) { (void)dir; *(int *)ctx += 1; g_calls_b++; }

PT_TEST(daemon_sessions_active_callbacks_per_store) {
  char *h1 = pt_tmpdir("store1"), *h2 = pt_tmpdir("store2");
  pd_sessions *s1, *s2;
  PT_ASSERT_INT_EQ(pd_sessions_open(h1, &s1), 0);
  PT_ASSERT_INT_EQ(pd_sessions_open(h2, &s2), 0);
  int ctx_b = 0;
  PT_ASSERT_INT_EQ(pd_sessions_on_active(s1, hook_a, NULL), 0);
  PT_ASSERT_INT_EQ(pd_sessions_on_active(s2, hook_b, &ctx_b), 0);
  PT_ASSERT_INT_EQ(pd_sessions_on_active(s2, NULL, NULL), -EINVAL);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(s1, "one", &a), 0);
  PT_ASSERT_INT_EQ(pd_sessions_set_active(s1, a), 0);
  PT_ASSERT_INT_EQ(g_calls_a, 1);
  PT_ASSERT_INT_EQ(g_calls_b, 0);
  PT_ASSERT_INT_EQ(pd_sessions_set_active(s1, a), 0); /* no change: no call */
  PT_ASSERT_INT_EQ(g_calls_a, 1);
  /* the ctx given at registration comes back */
  pd_session *b;
  PT_ASSERT_INT_EQ(pd_sessions_create(s2, "two", &b), 0);
  PT_ASSERT_INT_EQ(pd_sessions_set_active(s2, b), 0);
  PT_ASSERT_INT_EQ(ctx_b, 1);
  PT_ASSERT_INT_EQ(g_calls_a, 1);
  /* a full table refuses, and a refused callback is never called */
  for (int i = 1; i < PD_SESSIONS_MAX_LISTENERS; i++)
    PT_ASSERT_INT_EQ(pd_sessions_on_active(s1, hook_a, NULL), 0);
  PT_ASSERT_INT_EQ(g_calls_a, 1 + PD_SESSIONS_MAX_LISTENERS - 1); /* each fired at once */
  PT_ASSERT_INT_EQ(pd_sessions_on_active(s1, hook_b, &ctx_b), -ENOSPC);
  PT_ASSERT_INT_EQ(ctx_b, 1);
  pd_sessions_del(s1);
  pd_sessions_del(s2);
  pt_rm_rf(h1);
  pt_rm_rf(h2);
}

/* Rename and touch act on the session record alone and write its
 * session.json; a failed write keeps the old name. */
PT_TEST(daemon_session_rename_touch_write_session_json) {
  char *home = pt_tmpdir("rename");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "before", &a), 0);
  PT_ASSERT_INT_EQ(pd_session_rename(a, "after"), 0);
  char *sj = join(a->dir, "session.json");
  size_t n;
  char *got = pt_read_file(sj, &n);
  PT_ASSERT(strstr(got, "\"after\"") != NULL);
  free(got);
  PT_ASSERT_INT_EQ(pd_session_rename(a, "x\x01y"), -EINVAL);
  PT_ASSERT_STR_EQ(a->name, "after");
  char was[32];
  memcpy(was, a->last_activity, sizeof was);
  /* session.json cannot be written (its directory is gone from under the
   * record, which even root cannot write through): the old name stays */
  char *real_dir = a->dir;
  a->dir = join(home, "no-such-dir");
  PT_ASSERT_INT_EQ(pd_session_rename(a, "lost"), -ENOENT);
  PT_ASSERT_STR_EQ(a->name, "after");
  free(a->dir);
  a->dir = real_dir;
  PT_ASSERT_INT_EQ(pd_session_touch(a), 0);
  PT_ASSERT(strcmp(a->last_activity, was) >= 0);
  pd_sessions_flush(st);   /* the touch is written by the store's writer thread */
  got = pt_read_file(sj, &n);
  PT_ASSERT(strstr(got, a->last_activity) != NULL);
  free(got);
  free(sj);
  pd_sessions_del(st);
  pt_rm_rf(home);
}

/* Lists the names in dir, sorted, joined by spaces ("" when empty). */
static char *names_in(const char *dir) {
  char *cmd = NULL, *out = NULL;
  PT_ASSERT(asprintf(&cmd, "ls -A '%s' | LC_ALL=C sort | tr '\\n' ' '", dir) > 0);
  char *argv[] = {"sh", "-c", cmd, NULL};
  PT_ASSERT_INT_EQ(pt_run(argv, &out, 10000), 0);
  free(cmd);
  return out;
}

static int cmp_str(const void *a, const void *b) {
  return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The names, sorted as LC_ALL=C sort does, joined as names_in does. */
static char *sorted(const char *a, const char *b, const char *c, const char *d, const char *e) {
  const char *v[5] = {a, b, c, d, e};
  size_t n = 0;
  while (n < 5 && v[n]) n++;
  qsort(v, n, sizeof *v, cmp_str);
  static char buf[512];
  buf[0] = '\0';
  for (size_t i = 0; i < n; i++) {
    strcat(buf, v[i]);
    strcat(buf, " ");
  }
  return buf;
}

static void mkdirs(const char *home, const char *rel) {
  char *p = join(home, rel);
  PT_ASSERT_INT_EQ(pt_mkdir_p(p, 0700), 0);
  free(p);
}

static void put(const char *home, const char *rel, const char *text) {
  char *p = join(home, rel);
  pt_write_file(p, text, strlen(text));
  free(p);
}

#define SJ(name) "{\"name\": \"" name "\", \"created\": \"2026-01-02T03:04:05.000Z\", " \
                 "\"last_activity\": \"2026-01-02T03:04:05.000Z\"}\n"

/* What a killed daemon leaves in sessions/ is repaired at the next open:
 * finished when complete, quarantined when not, deletions finished; a
 * damaged session with the user's data stays and is skipped; a second
 * open has nothing left to do. */
PT_TEST(daemon_sessions_repair_at_open) {
  char *home = pt_tmpdir("repair");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "kept", &a), 0);
  char ida[13];
  memcpy(ida, a->id, sizeof ida);
  char *sdir = join(home, "sessions");
  /* a create leaves no temporary behind */
  char *ls = names_in(sdir);
  char want[256];
  snprintf(want, sizeof want, "%s ", ida);
  PT_ASSERT_STR_EQ(ls, want);
  free(ls);
  pd_sessions_del(st);
  /* complete but never renamed: finished */
  mkdirs(home, "sessions/.create-aaaaaaaaaaaa/profiling");
  put(home, "sessions/.create-aaaaaaaaaaaa/transcript.jsonl", "");
  put(home, "sessions/.create-aaaaaaaaaaaa/session.json", SJ("finished"));
  /* killed before session.json: quarantined */
  mkdirs(home, "sessions/.create-bbbbbbbbbbbb/profiling");
  put(home, "sessions/.create-bbbbbbbbbbbb/transcript.jsonl", "");
  /* complete, but its id is taken: quarantined, never over the other */
  char rel[128];
  snprintf(rel, sizeof rel, "sessions/.create-%s", ida);
  mkdirs(home, rel);
  snprintf(rel, sizeof rel, "sessions/.create-%s/session.json", ida);
  put(home, rel, SJ("usurper"));
  /* what an older daemon left in place (issue 21): quarantined */
  mkdirs(home, "sessions/dddddddddddd/profiling");
  put(home, "sessions/dddddddddddd/transcript.jsonl", "");
  mkdirs(home, "sessions/eeeeeeeeeeee");
  put(home, "sessions/eeeeeeeeeeee/.session.json.tmp.123", "{\"na");
  /* no session.json but a saved turn: the user's data, skipped, untouched */
  mkdirs(home, "sessions/ffffffffffff");
  const char turn[] = "{\"turn_id\":1,\"role\":\"user\",\"text\":\"x\",\"ts\":\"2026-01-01T00:00:00Z\"}\n";
  put(home, "sessions/ffffffffffff/transcript.jsonl", turn);
  /* an unfinished deletion: finished */
  mkdirs(home, "sessions/.deleted-111111111111/profiling");
  put(home, "sessions/.deleted-111111111111/transcript.jsonl", turn);

  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  const pd_sessions_repair *rp = pd_sessions_repaired(st);
  PT_ASSERT_UINT_EQ(rp->completed, 1);
  PT_ASSERT_UINT_EQ(rp->quarantined, 4);
  PT_ASSERT_UINT_EQ(rp->deletions_finished, 1);
  PT_ASSERT_UINT_EQ(rp->failed, 0);
  PT_ASSERT_UINT_EQ(pd_sessions_count(st), 2);
  PT_ASSERT_STR_EQ(pd_sessions_find(st, ida)->name, "kept");
  PT_ASSERT_STR_EQ(pd_sessions_find(st, "aaaaaaaaaaaa")->name, "finished");
  json_t *l = pd_sessions_list_json(st);
  json_t *sk = json_object_get(l, "skipped");
  PT_ASSERT_UINT_EQ(json_array_size(sk), 1);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(sk, 0), "id")), "ffffffffffff");
  json_decref(l);
  pd_sessions_del(st);
  ls = names_in(sdir);
  PT_ASSERT_STR_EQ(ls, sorted("aaaaaaaaaaaa", ida, "ffffffffffff", NULL, NULL));
  free(ls);
  char *qdir = join(home, "quarantine/sessions");
  ls = names_in(qdir);
  char cida[32];
  snprintf(cida, sizeof cida, "create-%s", ida);
  PT_ASSERT_STR_EQ(ls, sorted(cida, "create-bbbbbbbbbbbb", "dddddddddddd", "eeeeeeeeeeee", NULL));
  free(ls);
  /* moved whole: the half-written temporary is still there to look at */
  char *tmpf = join(qdir, "eeeeeeeeeeee/.session.json.tmp.123");
  char *got = pt_read_file(tmpf, NULL);
  PT_ASSERT_STR_EQ(got, "{\"na");
  free(got);
  free(tmpf);
  char *tr = join(sdir, "ffffffffffff/transcript.jsonl");
  got = pt_read_file(tr, NULL);
  PT_ASSERT_STR_EQ(got, turn);
  free(got);
  free(tr);
  /* the next open finds nothing to repair; a quarantined name taken twice
   * gets a suffix */
  mkdirs(home, "sessions/dddddddddddd");
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  rp = pd_sessions_repaired(st);
  PT_ASSERT_UINT_EQ(rp->quarantined, 1);
  PT_ASSERT_UINT_EQ(rp->completed + rp->deletions_finished + rp->failed, 0);
  pd_sessions_del(st);
  ls = names_in(qdir);
  PT_ASSERT_STR_EQ(ls, sorted(cida, "create-bbbbbbbbbbbb", "dddddddddddd", "dddddddddddd.2", "eeeeeeeeeeee"));
  free(ls);
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  rp = pd_sessions_repaired(st);
  PT_ASSERT_UINT_EQ(rp->completed + rp->quarantined + rp->deletions_finished + rp->failed, 0);
  pd_sessions_del(st);
  free(qdir);
  free(sdir);
  pt_rm_rf(home);
}
