/* Unit tests for the session store and transcript (src/daemon/pd_sessions.c),
 * on real files in a temporary state root. */
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
  PT_ASSERT_INT_EQ(pd_on_active_session(hook, NULL), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 0);
  pd_session *a, *b;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, NULL, &a), 0);
  PT_ASSERT_STR_EQ(a->name, "Session 1");
  PT_ASSERT_UINT_EQ(strlen(a->id), 12);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "second", &b), 0);
  PT_ASSERT(strcmp(a->id, b->id) != 0);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "", &b), -EINVAL);
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "bad\nname", &b), -EINVAL);
  PT_ASSERT_INT_EQ(pd_sessions_rename(st, a, "renamed"), 0);
  /* directories made with the session */
  char *prof = join(a->dir, "profiling");
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(prof, &sb), 0);
  PT_ASSERT(S_ISDIR(sb.st_mode));
  /* transcript entries and turn counting */
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 1, "user", "hello", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 1, "assistant", "hi there", NULL), 0);
  PT_ASSERT_INT_EQ(a->turns, 1);
  PT_ASSERT_INT_EQ(pd_sessions_set_active(st, a), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 1);
  PT_ASSERT_STR_EQ(g_hook_dir, a->dir);
  char ida[13];
  memcpy(ida, a->id, sizeof ida);
  pd_sessions_del(st);

  /* reopen: everything is back, newest first, active restored */
  g_hook_calls = 0;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  PT_ASSERT_INT_EQ(g_hook_calls, 1); /* fired at load for the active session */
  PT_ASSERT_UINT_EQ(pd_sessions_count(st), 2);
  pd_session *ra = pd_sessions_find(st, ida);
  PT_ASSERT(ra != NULL);
  PT_ASSERT_STR_EQ(ra->name, "renamed");
  PT_ASSERT_INT_EQ(ra->turns, 1);
  PT_ASSERT(pd_sessions_active(st) == ra);
  PT_ASSERT_INT_EQ(pd_sessions_touch(st, ra), 0);
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

PT_TEST(daemon_transcript_injected_enospc_leaves_file_intact) {
  char *home = pt_tmpdir("fault");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "f", &a), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 1, "user", "kept line", NULL), 0);
  char *tp = join(a->dir, "transcript.jsonl");
  size_t n0;
  char *before = pt_read_file(tp, &n0);
  /* the first append in the process (after install) passes, then ENOSPC */
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
  setenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE", "ENOSPC:1", 1);
  pd_transcript_install_fault_hook();
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 1, "assistant", "passes", NULL), 0);
  size_t n1;
  char *mid = pt_read_file(tp, &n1);
  PT_ASSERT(n1 > n0);
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 2, "user", "a long line that is cut half way by the fault", NULL),
                   -ENOSPC);
  size_t n2;
  char *after = pt_read_file(tp, &n2);
  PT_ASSERT_UINT_EQ(n2, n1);
  PT_ASSERT_MEM_EQ(after, mid, n1);
  PT_ASSERT_INT_EQ(a->turns, 1); /* the failed turn is not counted */
  /* still a valid transcript */
  int maxt;
  char err[128];
  PT_ASSERT_INT_EQ(pd_transcript_read(tp, NULL, &maxt, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(maxt, 1);
  pt_append_set_fault(NULL);
  free(before);
  free(mid);
  free(after);
  pd_sessions_del(st);
  pt_rm_rf(home);
}

/* A real full disk: a 64 KiB tmpfs in a private mount namespace (root
 * only; skipped elsewhere). */
PT_TEST(daemon_transcript_real_enospc_on_tmpfs) {
  if (unshare(CLONE_NEWNS) != 0) PT_SKIP("cannot unshare a mount namespace (not root?)");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) PT_SKIP("cannot make mounts private");
  char *home = pt_tmpdir("tmpfs");
  if (mount("tmpfs", home, "tmpfs", 0, "size=64k") != 0) PT_SKIP("cannot mount tmpfs");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "full", &a), 0);
  char *tp = join(a->dir, "transcript.jsonl");
  static char big[8192];
  memset(big, 'x', sizeof big - 1);
  int r = 0, i;
  for (i = 1; i < 1000 && r == 0; i++) r = pd_transcript_append(a, i, "user", big, NULL);
  PT_ASSERT_INT_EQ(r, -ENOSPC);
  size_t n;
  char *data = pt_read_file(tp, &n);
  PT_ASSERT(n > 0);
  PT_ASSERT(data[n - 1] == '\n'); /* no partial line */
  int maxt;
  char err[128];
  PT_ASSERT_INT_EQ(pd_transcript_read(tp, NULL, &maxt, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(maxt, i - 2); /* every successful append, none of the failed */
  free(data);
  pd_sessions_del(st);
  umount(home);
  pt_rm_rf(home);
}

/* A transcript must never grow past what the loader accepts
 * (PD_TRANSCRIPT_MAX): an append that would cross it fails with -EFBIG,
 * leaves the file as it was, and the session still loads afterwards.
 * Without the cap the append succeeded and the next start skipped the
 * session as damaged. */
PT_TEST(daemon_transcript_append_capped_at_loader_limit) {
  char *home = pt_tmpdir("trcap");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "big", &a), 0);
  char id[PD_SESSION_ID_LEN + 1];
  memcpy(id, a->id, sizeof id);
  /* One valid entry whose line leaves 40 bytes below the limit. */
  static const char head[] = "{\"turn_id\":1,\"role\":\"user\",\"text\":\"";
  static const char tail[] = "\",\"ts\":\"2026-11-29T21:42:31.727Z\"}\n";
  size_t total = PD_TRANSCRIPT_MAX - 40;
  size_t textlen = total - (sizeof head - 1) - (sizeof tail - 1);
  char *buf = malloc(total);
  PT_ASSERT(buf != NULL);
  memcpy(buf, head, sizeof head - 1);
  memset(buf + sizeof head - 1, 'x', textlen);
  memcpy(buf + sizeof head - 1 + textlen, tail, sizeof tail - 1);
  char *tpath = join(a->dir, "transcript.jsonl");
  pt_write_file(tpath, buf, total);
  free(buf);
  a->turns = 1;
  /* Any entry is longer than 40 bytes: refused, nothing written. */
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 2, "user", "one more question", NULL), -EFBIG);
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(tpath, &sb), 0);
  PT_ASSERT_UINT_EQ((uint64_t)sb.st_size, total);
  PT_ASSERT_INT_EQ(a->turns, 1);
  pd_sessions_del(st);
  /* The session is still loadable. */
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *ra = pd_sessions_find(st, id);
  PT_ASSERT_MSG(ra != NULL, "session %s no longer loads", id);
  PT_ASSERT_INT_EQ(ra->turns, 1);
  pd_sessions_del(st);
  free(tpath);
  pt_rm_rf(home);
}

/* The in-memory transcript (pd_session_history) always equals what
 * pd_transcript_read returns for the file: loaded once, then extended by
 * successful appends only; a failed append leaves it equal to the file. */
static int history_matches_file(pd_session *s) {
  json_t *mem = NULL, *disk = NULL;
  char err[128];
  char *tp = join(s->dir, "transcript.jsonl");
  int ok = pd_session_history(s, &mem, err, sizeof err) == 0 &&
           pd_transcript_read(tp, &disk, NULL, err, sizeof err) == 0 && json_equal(mem, disk);
  json_decref(disk);
  free(tp);
  return ok;
}

PT_TEST(daemon_session_history_follows_appends) {
  char *home = pt_tmpdir("history");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *a;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "h", &a), 0);
  json_t *h = NULL;
  char err[128];
  PT_ASSERT_INT_EQ(pd_session_history(a, &h, err, sizeof err), 0); /* no file yet: empty */
  PT_ASSERT_UINT_EQ(json_array_size(h), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 1, "user", "hello", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 1, "assistant", "hi there", "cancelled"), 0);
  PT_ASSERT(history_matches_file(a));
  PT_ASSERT_INT_EQ(pd_session_history(a, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 2);
  /* The copy is not re-read: bytes added behind the daemon's back are not
   * seen (the daemon is the only writer of a transcript). */
  char *tp = join(a->dir, "transcript.jsonl");
  FILE *f = fopen(tp, "a");
  PT_ASSERT(f != NULL);
  fputs("{\"turn_id\":2,\"role\":\"user\",\"text\":\"x\",\"ts\":\"t\"}\n", f);
  fclose(f);
  PT_ASSERT_INT_EQ(pd_session_history(a, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 2);
  /* a failed append drops the copy; the next call reloads the file */
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
  setenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE", "ENOSPC:0", 1);
  pd_transcript_install_fault_hook();
  PT_ASSERT_INT_EQ(pd_transcript_append(a, 3, "user", "lost", NULL), -ENOSPC);
  pt_append_set_fault(NULL);
  PT_ASSERT(history_matches_file(a));
  PT_ASSERT_INT_EQ(pd_session_history(a, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 3);
  free(tp);
  pd_sessions_del(st);
}
