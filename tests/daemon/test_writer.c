/*
 * test_writer.c - pd_writer (src/daemon/pd_writer.c): session.json
 * rewrites off the loop, in order, the newest content of a file winning;
 * a failed rewrite leaves what was there and the next ones still run;
 * del writes everything queued; the thread is named for profiles.
 */
#include "pt_test.h"
#include "daemon/pd_sessions.h"
#include "daemon/pd_writer.h"
#include "common/pt_file.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char *path_in(const char *dir, const char *name) {
  char *p = NULL;
  PT_ASSERT(asprintf(&p, "%s/%s", dir, name) > 0);
  return p;
}

static char *slurp(const char *path) {
  size_t n;
  return pt_read_file(path, &n);
}

/* 1 if a thread of this process is named `name` now. */
static int thread_named(const char *name) {
  DIR *d = opendir("/proc/self/task");
  if (!d) return 0;
  struct dirent *e;
  int found = 0;
  while (!found && (e = readdir(d))) {
    char p[300], comm[32] = "";
    snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(p, "r");
    if (!f) continue;
    if (fgets(comm, sizeof comm, f)) comm[strcspn(comm, "\n")] = 0;
    fclose(f);
    found = strcmp(comm, name) == 0;
  }
  closedir(d);
  return found;
}

PT_TEST(daemon_writer_newest_content_wins_in_order) {
  char *dir = pt_tmpdir("writer");
  char *a = path_in(dir, "a.json"), *b = path_in(dir, "b.json");
  pd_writer *w;
  PT_ASSERT_INT_EQ(pd_writer_new(0, &w), 0);
  char buf[64];
  for (int i = 0; i < 200; i++) {
    int n = snprintf(buf, sizeof buf, "a %d\n", i);
    PT_ASSERT_INT_EQ(pd_writer_put(w, a, buf, (size_t)n, 0600), 0);
    if (i == 100) PT_ASSERT_INT_EQ(pd_writer_put(w, b, "b\n", 2, 0600), 0);
  }
  pd_writer_flush(w);
  char *got = slurp(a);
  PT_ASSERT_STR_EQ(got, "a 199\n");
  free(got);
  got = slurp(b);
  PT_ASSERT_STR_EQ(got, "b\n");
  free(got);
  /* the thread carries its name (profiles' thread_name, top -H) */
  int named = 0;
  for (int i = 0; i < 100 && !(named = thread_named(PD_WRITER_THREAD)); i++) usleep(10000);
  PT_ASSERT(named);
  pd_writer_del(w);
  PT_ASSERT(!thread_named(PD_WRITER_THREAD));
  free(a);
  free(b);
  pt_rm_rf(dir);
  free(dir);
}

PT_TEST(daemon_writer_failure_keeps_file_and_goes_on) {
  char *dir = pt_tmpdir("writer-fail");
  char *missing = path_in(dir, "no-such-dir/x.json"), *ok = path_in(dir, "ok.json");
  pd_writer *w;
  PT_ASSERT_INT_EQ(pd_writer_new(0, &w), 0);
  PT_ASSERT_INT_EQ(pd_writer_put(w, ok, "old\n", 4, 0600), 0);
  pd_writer_flush(w);
  PT_ASSERT_INT_EQ(pd_writer_put(w, missing, "lost\n", 5, 0600), 0);
  PT_ASSERT_INT_EQ(pd_writer_put(w, ok, "new\n", 4, 0600), 0);
  pd_writer_del(w);   /* del writes what is queued */
  PT_ASSERT(access(missing, F_OK) != 0);
  char *got = slurp(ok);
  PT_ASSERT_STR_EQ(got, "new\n");
  free(got);
  free(missing);
  free(ok);
  pt_rm_rf(dir);
  free(dir);
}

/* A touch queued on the writer never lands on top of a later rename. */
PT_TEST(daemon_sessions_touch_then_rename_keeps_the_name) {
  char *home = pt_tmpdir("touch-rename");
  pd_sessions *st;
  PT_ASSERT_INT_EQ(pd_sessions_open(home, &st), 0);
  pd_session *s;
  PT_ASSERT_INT_EQ(pd_sessions_create(st, "first", &s), 0);
  PT_ASSERT(s->writer != NULL);
  for (int i = 0; i < 20; i++) {
    PT_ASSERT_INT_EQ(pd_session_touch(s), 0);
    char name[32];
    snprintf(name, sizeof name, "name-%d", i);
    PT_ASSERT_INT_EQ(pd_session_rename(s, name), 0);
  }
  PT_ASSERT_INT_EQ(pd_session_touch(s), 0);
  pd_sessions_flush(st);
  char *sj = path_in(s->dir, "session.json");
  char *got = slurp(sj);
  PT_ASSERT(got && strstr(got, "\"name-19\"") && strstr(got, s->last_activity));
  free(got);
  free(sj);
  pd_sessions_del(st);
  pt_rm_rf(home);
  free(home);
}

/* With a delay, a second put inside it makes no second write: the file
 * appears once, with the newest text, and not before the delay. */
PT_TEST(daemon_writer_delay_coalesces) {
  char *dir = pt_tmpdir("writer-delay");
  char *a = path_in(dir, "a.json");
  pd_writer *w;
  PT_ASSERT_INT_EQ(pd_writer_new(400, &w), 0);
  PT_ASSERT_INT_EQ(pd_writer_put(w, a, "one\n", 4, 0600), 0);
  PT_ASSERT_INT_EQ(pd_writer_put(w, a, "two\n", 4, 0600), 0);
  usleep(100 * 1000);
  PT_ASSERT(access(a, F_OK) != 0);          /* not due yet: nothing written */
  char *got = NULL;
  for (int i = 0; i < 1000 && access(a, F_OK) != 0; i++) usleep(10 * 1000);
  got = slurp(a);
  PT_ASSERT(got != NULL);
  PT_ASSERT_STR_EQ(got, "two\n");          /* written once, the newest text */
  free(got);
  /* a flush writes at once, whatever the delay */
  PT_ASSERT_INT_EQ(pd_writer_put(w, a, "three\n", 6, 0600), 0);
  pd_writer_flush(w);
  got = slurp(a);
  PT_ASSERT_STR_EQ(got, "three\n");
  free(got);
  pd_writer_del(w);
  free(a);
  pt_rm_rf(dir);
  free(dir);
}

/* Calls (the transcript's durable appends) run as soon as the thread gets
 * to them, in the order queued, and a rewrite waiting for its delay does
 * not hold them up; flush still writes that rewrite. */
typedef struct {
  const char *waiting;   /* the delayed rewrite's path */
  int order[50];
  int n;
  int rewrite_seen;      /* the file existed when a call ran */
} call_probe;

static call_probe g_probe;

static void probe_call(void *arg) {
  int i = (int)(intptr_t)arg;
  g_probe.order[g_probe.n++] = i;   /* only the writer's thread runs calls */
  if (access(g_probe.waiting, F_OK) == 0) g_probe.rewrite_seen = 1;
}

PT_TEST(daemon_writer_calls_run_in_order_past_a_waiting_rewrite) {
  char *dir = pt_tmpdir("writer-call");
  char *a = path_in(dir, "a.json");
  pd_writer *w;
  PT_ASSERT_INT_EQ(pd_writer_new(60000, &w), 0); /* the rewrite waits a minute */
  memset(&g_probe, 0, sizeof g_probe);
  g_probe.waiting = a;
  PT_ASSERT_INT_EQ(pd_writer_put(w, a, "a\n", 2, 0600), 0);
  for (int i = 0; i < 50; i++) PT_ASSERT_INT_EQ(pd_writer_call(w, probe_call, (void *)(intptr_t)i), 0);
  /* the calls finish without the rewrite: wait for them, not for a flush */
  for (int i = 0; i < 500 && __atomic_load_n(&g_probe.n, __ATOMIC_ACQUIRE) < 50; i++) usleep(10000);
  PT_ASSERT_INT_EQ(__atomic_load_n(&g_probe.n, __ATOMIC_ACQUIRE), 50);
  for (int i = 0; i < 50; i++) PT_ASSERT_INT_EQ(g_probe.order[i], i);
  PT_ASSERT_INT_EQ(g_probe.rewrite_seen, 0);
  PT_ASSERT(access(a, F_OK) != 0);
  pd_writer_flush(w);
  char *got = slurp(a);
  PT_ASSERT_STR_EQ(got, "a\n");
  free(got);
  pd_writer_del(w);
  free(a);
  pt_rm_rf(dir);
  free(dir);
}
