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
 *   tui-upload               the TUI's pool thread sending feedback
 *   ptcon-server             the task console (named by the library)
 *   ptprof-consumer          the sampler's own thread (named by the library)
 *   ptprof-io                the sampler's /proc reader (named by the library)
 *
 * libuv (1.44) does not name its pool threads, and they are created on the
 * first queued work, from the loop thread, whose name they inherit. A pool
 * thread serves every kind of job in turn, so each work callback the
 * programs queue starts with pt_thread_name_job(PT_THREAD_*): the thread
 * carries the name of the job it runs, and a sample taken in a job carries
 * that job's name. Between jobs a thread keeps the name of its last one.
 *
 * Threads: any; only the calling thread is touched.
 */
#ifndef PT_THREAD_NAME_H
#define PT_THREAD_NAME_H

#define PT_THREAD_DAEMON_RESPONDER "pd-responder"
#define PT_THREAD_DAEMON_CATALOG "pd-catalog"
#define PT_THREAD_DAEMON_SNAPSHOT "pd-snapshot"
#define PT_THREAD_TUI_UPLOAD "tui-upload"

/* Names the calling thread `name` (at most 15 bytes are kept, as the
 * kernel does) unless it already has that name from an earlier call on
 * this thread: one system call when the kind of job changes, none
 * otherwise. */
void pt_thread_name_job(const char *name);

#endif
