/*
 * pd_writer.h - ordered background disk work (rewrites of small files,
 * durable appends), so the event loop never waits for a disk.
 *
 * A session's session.json is rewritten twice a turn (last_activity), each
 * time with pt_write_atomic: a temporary file, fsync, rename, fsync of the
 * directory. On the loop thread that was a fifth of the daemon's CPU in a
 * 20-turn session and stalled every reply stream behind the disk. A
 * writer owns one thread ("pd-writer", so profiles and top -H show that
 * work apart) that performs queued rewrites in order.
 *
 * Semantics: each put copies path and bytes; the file is rewritten
 * atomically (pt_write_atomic) `delay_ms` later (pd_writer_new), or at
 * once when a flush asks. A put for a path whose earlier put has not
 * started yet replaces that one's bytes in place, keeping its place and
 * time (only the newest content of a file matters; order among paths is
 * kept): a turn's two touches of session.json, half a second apart, make
 * one write.
 * A failed rewrite is logged (pd_warn, with the path and the error) and
 * leaves the file as it was.
 * A call (pd_writer_call) runs a function of the caller's on the writer's
 * thread as soon as the thread gets to it, calls in the order queued; a
 * rewrite still waiting for its delay does not hold a call up. Transcript
 * appends use it (pd_transcript_append_async): their fdatasync was a
 * tenth of the loop's CPU and stalled every client behind the disk.
 * pd_writer_flush and pd_writer_del return once everything put or called
 * before has been written, has failed or has run.
 *
 * Threads: put, flush and del from any one thread at a time (the loop);
 * the writes happen on the writer's thread. Errors: 0 or -errno.
 */
#ifndef PD_WRITER_H
#define PD_WRITER_H

#include <stddef.h>
#include <sys/types.h>

#define PD_WRITER_THREAD "pd-writer"

typedef struct pd_writer pd_writer;

/* Starts a writer and its thread; each put is written delay_ms after it
 * is queued (0: as soon as the thread gets to it). 0, -ENOMEM or the
 * pthread error. */
int pd_writer_new(int delay_ms, pd_writer **out);

/* Queues an atomic rewrite of path with len bytes of data (both copied)
 * and the given mode. 0, or -ENOMEM (nothing queued). */
int pd_writer_put(pd_writer *w, const char *path, const void *data, size_t len, mode_t mode);

/* Queues fn(arg), to run on the writer's thread without delay, after the
 * calls queued before it. fn owns the job's outcome (it must report it to
 * whoever waits, e.g. through uv_async_send: it runs on another thread).
 * 0, or -ENOMEM (nothing queued, fn never runs). */
int pd_writer_call(pd_writer *w, void (*fn)(void *arg), void *arg);

/* Writes every rewrite queued so far now (their delay cut short) and
 * waits until each is done (written or failed). */
void pd_writer_flush(pd_writer *w);

/* Flushes, stops the thread and frees the writer. NULL is a no-op. */
void pd_writer_del(pd_writer *w);

#endif
