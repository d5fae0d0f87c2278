/*
 * pt_thread_name.h - names of the daemon's and the TUI's threads, so that a
 * profile's thread_name label (read from /proc/self/task/<tid>/comm when a
 * snapshot is written) and tools like top -H tell them apart
 * (docs/profiling.md, "Threads"):
 *
 *   polytokend / polytoken   the main thread, which runs the event loop:
 *                            it keeps the program's name, which ps, pgrep
 *                            -x and the tests look for
 *   pd-worker / tui-worker   libuv's threadpool (responders' model
 *                            building, the snapshot writer, catalog scans
 *                            and fetches; the TUI's feedback upload)
 *   ptcon-server             the task console (named by the library)
 *
 * libuv (1.44) does not name its pool threads, and they are created on the
 * first queued work, from the loop thread, whose name they inherit. Every
 * work callback the programs queue therefore starts with
 * pt_thread_name_once(PT_THREAD_*_WORKER): the first one run on a pool
 * thread names it, the rest cost a thread-local test. Which work a thread
 * ran is the task_kind label's business, not the thread's name.
 *
 * Threads: any; only the calling thread is touched.
 */
#ifndef PT_THREAD_NAME_H
#define PT_THREAD_NAME_H

#define PT_THREAD_DAEMON_WORKER "pd-worker"
#define PT_THREAD_TUI_WORKER "tui-worker"

/* Names the calling thread `name` (at most 15 bytes are kept, as the
 * kernel does) the first time it is called on this thread; later calls on
 * the same thread do nothing, whatever the name. */
void pt_thread_name_once(const char *name);

#endif
