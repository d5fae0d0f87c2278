/*
 * pt_thread_name.h - names of the daemon's and the TUI's threads, so that a
 * profile's thread_name label (the name a thread had when each sample was
 * taken: the sampler's handler reads it) and tools like top -H tell them
 * apart (docs/profiling.md, "Threads"):
 *
 *   polytokend / polytoken   the main thread, which runs the event loop:
 *                            it keeps the program's name, which ps, pgrep
 *                            -x and the tests look for
 *   pd-responder             a daemon pool thread building the built-in
 *                            responder's model (a turn's CPU-heavy part)
 *   pd-catalog               a daemon pool thread scanning, hashing or
 *                            reading artifacts for the catalog
 *   pd-writer                the daemon's session store writer thread
 *                            (session.json rewrites; daemon/pd_writer.h)
 *   pd-snapshot              a daemon pool thread writing a profile
 *                            snapshot (the profiler's own work: it never
 *                            shows in a profile, but does in top -H)
 *   pd-pool                  a daemon pool thread between jobs (libuv's
 *                            own queueing and signalling)
 *   tui-upload               the TUI's pool thread sending feedback
 *   tui-pool                 a TUI pool thread between jobs
 *   ptcon-server             the task console (named by the library)
 *   ptprof-consumer          the sampler's own thread (named by the library)
 *   ptprof-io                the sampler's /proc reader (named by the library)
 *
 * libuv (1.44) does not name its pool threads, and they are created on the
 * first queued work, from the loop thread, whose name they inherit. A pool
 * thread serves every kind of job in turn, so each work callback the
 * programs queue starts with PT_THREAD_JOB(PT_THREAD_<job>, PT_THREAD_<pool>):
 * the thread carries the name of the job while it runs, and a sample taken
 * in a job carries that job's name; when the callback returns, the thread
 * takes its pool's name, so libuv's own work between jobs (taking the next
 * one, signalling the loop) is not put under the last job (a snapshot
 * writer's never shows in a profile: docs/profiling.md, "Threads").
 *
 * Threads: any; only the calling thread is touched.
 */
#ifndef PT_THREAD_NAME_H
#define PT_THREAD_NAME_H

#define PT_THREAD_DAEMON_RESPONDER "pd-responder"
#define PT_THREAD_DAEMON_CATALOG "pd-catalog"
#define PT_THREAD_DAEMON_SNAPSHOT "pd-snapshot"
#define PT_THREAD_TUI_UPLOAD "tui-upload"
#define PT_THREAD_DAEMON_POOL "pd-pool"
#define PT_THREAD_TUI_POOL "tui-pool"

/* Names the calling thread `name` (at most 15 bytes are kept, as the
 * kernel does) unless it already has that name from an earlier call on
 * this thread: one system call when the kind of job changes, none
 * otherwise. */
void pt_thread_name_job(const char *name);

typedef struct pt_thread_job_scope {
  const char *idle;
} pt_thread_job_scope;
static inline pt_thread_job_scope pt_thread_job_scope_begin(const char *name, const char *idle) {
  pt_thread_name_job(name);
  pt_thread_job_scope s = {idle};
  return s;
}
static inline void pt_thread_job_scope_end(pt_thread_job_scope *s) { pt_thread_name_job(s->idle); }

#define PT_THREAD_CAT_(a, b) a##b
#define PT_THREAD_CAT(a, b) PT_THREAD_CAT_(a, b)
/* First statement of a pool job's work callback: the thread is named
 * `name` until the callback's scope ends (early returns included: the
 * cleanup attribute), then `idle`, its pool's name. Cleanup runs in reverse
 * order of declaration, so anything declared after it (a PD_POLL, a
 * PD_LABEL) ends first, under the job's name. */
#define PT_THREAD_JOB(name, idle)                                                       \
  __attribute__((cleanup(pt_thread_job_scope_end), unused)) pt_thread_job_scope         \
  PT_THREAD_CAT(pt_thread_job_, __LINE__) = pt_thread_job_scope_begin((name), (idle))

#endif
