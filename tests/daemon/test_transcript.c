/* Unit tests for one session's transcript file (src/daemon/pd_transcript.c),
 * on real files in a temporary directory: durable appends, injected and real
 * full disks, the size cap, the in-memory history. */
#include "pt_test.h"
#include "pt_config.h"
#include "daemon/pd_transcript.h"
#include "common/pt_file.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

static char *join(const char *a, const char *b) {
  size_t n = strlen(a) + strlen(b) + 2;
  char *p = malloc(n);
  snprintf(p, n, "%s/%s", a, b);
  return p;
}

/* A new, empty transcript file in dir (as a new session has). */
static pd_transcript *new_transcript(const char *dir, char **path) {
  *path = join(dir, "transcript.jsonl");
  pd_transcript *t = NULL;
  PT_ASSERT_INT_EQ(pd_transcript_new(*path, 0, &t), 0);
  PT_ASSERT_INT_EQ(pd_transcript_create(*path), 0);
  return t;
}

PT_TEST(daemon_transcript_create_append_read) {
  char *dir = pt_tmpdir("tr");
  char *tp;
  pd_transcript *t = new_transcript(dir, &tp);
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(tp, &sb), 0);
  PT_ASSERT_UINT_EQ(sb.st_size, 0);
  PT_ASSERT_UINT_EQ(sb.st_mode & 0777, 0600);
  PT_ASSERT_INT_EQ(pd_transcript_create(tp), -EEXIST); /* never over an existing file */
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 1, "user", "hello", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 1, "assistant", "hi there", "cancelled"), 0);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 1);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 2, "user", "bad \xff utf-8", NULL), -EINVAL);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 1);
  json_t *tr;
  int maxt;
  char err[256];
  PT_ASSERT_INT_EQ(pd_transcript_read(tp, &tr, &maxt, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(maxt, 1);
  PT_ASSERT_UINT_EQ(json_array_size(tr), 2);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(tr, 1), "text")), "hi there");
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(tr, 1), "status")),
                   "cancelled");
  json_decref(tr);
  /* a handle on an existing file starts from the turn count it is given */
  pd_transcript_del(t);
  PT_ASSERT_INT_EQ(pd_transcript_new(tp, maxt, &t), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 2, "user", "again", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 2);
  pd_transcript_del(t);
  /* damage: a last line without newline */
  FILE *f = fopen(tp, "a");
  fputs("{\"turn_id\":3,", f);
  fclose(f);
  PT_ASSERT_INT_EQ(pd_transcript_read(tp, NULL, NULL, err, sizeof err), -EBADMSG);
  PT_ASSERT(strstr(err, "no newline") != NULL);
  free(tp);
  pt_rm_rf(dir);
}

PT_TEST(daemon_transcript_injected_enospc_leaves_file_intact) {
  char *dir = pt_tmpdir("fault");
  char *tp;
  pd_transcript *t = new_transcript(dir, &tp);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 1, "user", "kept line", NULL), 0);
  size_t n0;
  char *before = pt_read_file(tp, &n0);
  /* the first append in the process (after install) passes, then ENOSPC */
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
  setenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE", "ENOSPC:1", 1);
  pd_transcript_install_fault_hook();
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 1, "assistant", "passes", NULL), 0);
  size_t n1;
  char *mid = pt_read_file(tp, &n1);
  PT_ASSERT(n1 > n0);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 2, "user", "a long line that is cut half way by the fault", NULL),
                   -ENOSPC);
  size_t n2;
  char *after = pt_read_file(tp, &n2);
  PT_ASSERT_UINT_EQ(n2, n1);
  PT_ASSERT_MEM_EQ(after, mid, n1);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 1); /* the failed turn is not counted */
  /* still a valid transcript */
  int maxt;
  char err[128];
  PT_ASSERT_INT_EQ(pd_transcript_read(tp, NULL, &maxt, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(maxt, 1);
  pt_append_set_fault(NULL);
  free(before);
  free(mid);
  free(after);
  pd_transcript_del(t);
  free(tp);
  pt_rm_rf(dir);
}

/* A real full disk: a 64 KiB tmpfs in a private mount namespace (root
 * only; skipped elsewhere). */
PT_TEST(daemon_transcript_real_enospc_on_tmpfs) {
  if (unshare(CLONE_NEWNS) != 0) PT_SKIP("cannot unshare a mount namespace (not root?)");
  if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) != 0) PT_SKIP("cannot make mounts private");
  char *dir = pt_tmpdir("tmpfs");
  if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) PT_SKIP("cannot mount tmpfs");
  char *tp;
  pd_transcript *t = new_transcript(dir, &tp);
  static char big[8192];
  memset(big, 'x', sizeof big - 1);
  int r = 0, i;
  for (i = 1; i < 1000 && r == 0; i++) r = pd_transcript_append(t, i, "user", big, NULL);
  PT_ASSERT_INT_EQ(r, -ENOSPC);
  size_t n;
  char *data = pt_read_file(tp, &n);
  PT_ASSERT(n > 0);
  PT_ASSERT(data[n - 1] == '\n'); /* no partial line */
  int maxt;
  char err[128];
  PT_ASSERT_INT_EQ(pd_transcript_read(tp, NULL, &maxt, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(maxt, i - 2); /* every successful append, none of the failed */
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), i - 2);
  free(data);
  pd_transcript_del(t);
  umount(dir);
  free(tp);
  pt_rm_rf(dir);
}

/* A transcript must never grow past what the loader accepts
 * (PD_TRANSCRIPT_MAX): an append that would cross it fails with -EFBIG,
 * leaves the file as it was, and the loader still accepts the file.
 * Without the cap the append succeeded and the next start skipped the
 * session as damaged. */
PT_TEST(daemon_transcript_append_capped_at_loader_limit) {
  char *dir = pt_tmpdir("trcap");
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
  char *tpath = join(dir, "transcript.jsonl");
  pt_write_file(tpath, buf, total);
  free(buf);
  pd_transcript *t;
  PT_ASSERT_INT_EQ(pd_transcript_new(tpath, 1, &t), 0);
  /* Any entry is longer than 40 bytes: refused, nothing written. */
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 2, "user", "one more question", NULL), -EFBIG);
  struct stat sb;
  PT_ASSERT_INT_EQ(stat(tpath, &sb), 0);
  PT_ASSERT_UINT_EQ((uint64_t)sb.st_size, total);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 1);
  pd_transcript_del(t);
  /* The file is still loadable (what the store's loader checks). */
  int maxt = 0;
  char err[128];
  PT_ASSERT_MSG(pd_transcript_read(tpath, NULL, &maxt, err, sizeof err) == 0,
                "the transcript no longer loads: %s", err);
  PT_ASSERT_INT_EQ(maxt, 1);
  free(tpath);
  pt_rm_rf(dir);
}

/* The in-memory transcript (pd_transcript_history) always equals what
 * pd_transcript_read returns for the file: loaded once, then extended by
 * successful appends only; a failed append leaves it equal to the file. */
static int history_matches_file(pd_transcript *t, const char *tp) {
  json_t *mem = NULL, *disk = NULL;
  char err[128];
  int ok = pd_transcript_history(t, &mem, err, sizeof err) == 0 &&
           pd_transcript_read(tp, &disk, NULL, err, sizeof err) == 0 && json_equal(mem, disk);
  json_decref(disk);
  return ok;
}

PT_TEST(daemon_transcript_history_follows_appends) {
  char *dir = pt_tmpdir("history");
  char *tp = join(dir, "transcript.jsonl");
  pd_transcript *t;
  PT_ASSERT_INT_EQ(pd_transcript_new(tp, 0, &t), 0);
  json_t *h = NULL;
  char err[128];
  PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0); /* no file yet: empty */
  PT_ASSERT_UINT_EQ(json_array_size(h), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 1, "user", "hello", NULL), 0);
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 1, "assistant", "hi there", "cancelled"), 0);
  PT_ASSERT(history_matches_file(t, tp));
  PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 2);
  /* The copy is not re-read: bytes added behind the daemon's back are not
   * seen (the daemon is the only writer of a transcript). */
  FILE *f = fopen(tp, "a");
  PT_ASSERT(f != NULL);
  fputs("{\"turn_id\":2,\"role\":\"user\",\"text\":\"x\",\"ts\":\"t\"}\n", f);
  fclose(f);
  PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 2);
  /* a failed append drops the copy; the next call reloads the file */
  if (!PT_FAULT_INJECTION) PT_SKIP("built without -Dfault_injection");
  setenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE", "ENOSPC:0", 1);
  pd_transcript_install_fault_hook();
  PT_ASSERT_INT_EQ(pd_transcript_append(t, 3, "user", "lost", NULL), -ENOSPC);
  pt_append_set_fault(NULL);
  PT_ASSERT(history_matches_file(t, tp));
  PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 3);
  pd_transcript_del(t);
  free(tp);
  pt_rm_rf(dir);
}

/* Appends queued on a writer (the daemon's turns): written on the writer's
 * thread, in order, each all or nothing; the loop's copy and turn count
 * change only at the commit; one append at a time. */
typedef struct {
  sem_t done;
  char thread[16];
} async_probe;

static void async_done(void *ctx) {
  async_probe *p = ctx;
  (void)pthread_getname_np(pthread_self(), p->thread, sizeof p->thread);
  sem_post(&p->done);
}

PT_TEST(daemon_transcript_async_append_on_the_writer) {
  char *dir = pt_tmpdir("trasync");
  char *tp;
  pd_transcript *t = new_transcript(dir, &tp);
  pd_writer *w;
  PT_ASSERT_INT_EQ(pd_writer_new(0, &w), 0);
  async_probe p;
  sem_init(&p.done, 0, 0);
  pd_transcript_entry e[2] = {{1, "user", "hello", NULL}, {1, "assistant", "hi", "cancelled"}};
  PT_ASSERT_INT_EQ(pd_transcript_append_async(t, w, e, 2, async_done, &p), 0);
  /* pending until committed, even once written */
  PT_ASSERT_INT_EQ(pd_transcript_append_async(t, w, e, 1, async_done, &p), -EBUSY);
  sem_wait(&p.done);
  PT_ASSERT_STR_EQ(p.thread, PD_WRITER_THREAD);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 0);
  PT_ASSERT_INT_EQ(pd_transcript_commit(t), 0);
  PT_ASSERT_INT_EQ(pd_transcript_commit(t), -EINVAL); /* nothing pending */
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 1);
  PT_ASSERT(history_matches_file(t, tp));
  json_t *h = NULL;
  char err[128];
  PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 2);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(h, 1), "status")), "cancelled");
  /* nothing queued on bad text: no done, nothing pending */
  pd_transcript_entry bad = {2, "user", "\xff\xfe", NULL};
  PT_ASSERT_INT_EQ(pd_transcript_append_async(t, w, &bad, 1, async_done, &p), -EINVAL);
  PT_ASSERT_INT_EQ(pd_transcript_commit(t), -EINVAL);
  /* each entry on its own: one that cannot be written does not keep the
   * next out (a turn's error entry after a reply it could not save) */
  pd_transcript_entry mixed[2] = {{2, "assistant", "\xff\xfe", "incomplete"}, {2, "error", "oops", NULL}};
  PT_ASSERT_INT_EQ(pd_transcript_append_async(t, w, mixed, 2, async_done, &p), 0);
  sem_wait(&p.done);
  PT_ASSERT_INT_EQ(pd_transcript_commit(t), -EINVAL);
  PT_ASSERT_INT_EQ(pd_transcript_turns(t), 2);
  PT_ASSERT(history_matches_file(t, tp));
  PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0);
  PT_ASSERT_UINT_EQ(json_array_size(h), 3);
  PT_ASSERT_STR_EQ(json_string_value(json_object_get(json_array_get(h, 2), "role")), "error");
  if (PT_FAULT_INJECTION) {
    /* the second of two fails: the first stays written, the copy follows
     * the file, the turn count the entry written */
    setenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE", "ENOSPC:1", 1);
    pd_transcript_install_fault_hook();
    pd_transcript_entry two[2] = {{3, "user", "kept", NULL}, {4, "user", "lost", NULL}};
    PT_ASSERT_INT_EQ(pd_transcript_append_async(t, w, two, 2, async_done, &p), 0);
    sem_wait(&p.done);
    PT_ASSERT_INT_EQ(pd_transcript_commit(t), -ENOSPC);
    pt_append_set_fault(NULL);
    unsetenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE");
    PT_ASSERT_INT_EQ(pd_transcript_turns(t), 3);
    PT_ASSERT(history_matches_file(t, tp));
    PT_ASSERT_INT_EQ(pd_transcript_history(t, &h, err, sizeof err), 0);
    PT_ASSERT_UINT_EQ(json_array_size(h), 4);
  }
  pd_writer_del(w);
  pd_transcript_del(t);
  sem_destroy(&p.done);
  free(tp);
  pt_rm_rf(dir);
}
