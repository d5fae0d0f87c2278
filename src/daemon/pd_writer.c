/*
 * pd_writer.c - see pd_writer.h.
 *
 * DESIGN. A FIFO of jobs under `mu`: rewrites, each due `delay_ms` after
 * its first put (so rewrites' due times are in queue order), and calls,
 * due when queued. The thread takes the first job in queue order that is
 * due (every job while `hurry` > 0 or at `stop`), else waits for the
 * head's due time (every job not due is a rewrite, and the head's is the
 * earliest); it marks the job started (so puts no longer coalesce into
 * it), runs it without the lock, then unlinks it, counts it done and
 * signals `idle`. Calls keep their order among themselves (each is due
 * when queued, so the first due job is the oldest call), rewrites theirs
 * unless a flush hurries them. put appends,
 * or replaces the bytes of a queued job of the same path that has not
 * started. flush raises `hurry` and waits for `done` to reach the number
 * of puts made so far (`queued`). del sets `stop` after a flush; the
 * thread exits when it sees `stop` with an empty queue.
 */
#include "daemon/pd_writer.h"
#include "daemon/pd_log.h"
#include "common/pt_file.h"
#include "common/pt_thread_name.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct job {
  void (*fn)(void *);     /* a call: fn(arg); else a rewrite of path */
  void *arg;
  char *path;
  void *data;
  size_t len;
  mode_t mode;
  int started;
  struct timespec due;    /* CLOCK_MONOTONIC */
  struct job *next;
} job;

struct pd_writer {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t work;    /* a job was queued, or stop */
  pthread_cond_t idle;    /* a job finished */
  job *head, *tail;
  uint64_t queued, done;  /* puts accepted / jobs finished (coalesced puts count as done) */
  int delay_ms;
  int hurry;              /* flushes waiting: write without waiting for due times */
  int stop;
};

static int due_now(const job *j) {
  struct timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return now.tv_sec > j->due.tv_sec || (now.tv_sec == j->due.tv_sec && now.tv_nsec >= j->due.tv_nsec);
}

static void job_free(job *j) {
  if (!j) return;
  free(j->path);
  free(j->data);
  free(j);
}

static void *writer_main(void *arg) {
  pd_writer *w = arg;
  pt_thread_name_job(PD_WRITER_THREAD);
  pthread_mutex_lock(&w->mu);
  for (;;) {
    while (!w->head && !w->stop) pthread_cond_wait(&w->work, &w->mu);
    if (!w->head) break;   /* stop, and nothing left */
    job *j = w->head, *prev = NULL;
    if (!w->hurry && !w->stop)
      for (; j && !j->fn && !due_now(j); prev = j, j = j->next) {}
    if (!j) {
      /* nothing due: woken early by a put, a call, a flush or del, or the
       * head's time came; look again */
      (void)pthread_cond_timedwait(&w->work, &w->mu, &w->head->due);
      continue;
    }
    j->started = 1;
    pthread_mutex_unlock(&w->mu);
    if (j->fn) {
      j->fn(j->arg);
    } else {
      int r = pt_write_atomic(j->path, j->data, j->len, j->mode);
      if (r < 0) pd_warn("writing %s: %s (the file is as it was)", j->path, strerror(-r));
    }
    pthread_mutex_lock(&w->mu);
    /* only this thread unlinks, and puts only append: prev is still j's */
    if (prev) prev->next = j->next;
    else w->head = j->next;
    if (w->tail == j) w->tail = prev;
    w->done++;
    pthread_cond_broadcast(&w->idle);
    job_free(j);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int pd_writer_new(int delay_ms, pd_writer **out) {
  *out = NULL;
  pd_writer *w = calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  w->delay_ms = delay_ms > 0 ? delay_ms : 0;
  int r;
  pthread_condattr_t ca;
  if ((r = pthread_mutex_init(&w->mu, NULL)) != 0) goto fail_free;
  if ((r = pthread_condattr_init(&ca)) != 0) goto fail_mu;
  (void)pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  r = pthread_cond_init(&w->work, &ca);
  pthread_condattr_destroy(&ca);
  if (r != 0) goto fail_mu;
  if ((r = pthread_cond_init(&w->idle, NULL)) != 0) goto fail_work;
  if ((r = pthread_create(&w->th, NULL, writer_main, w)) != 0) goto fail_idle;
  *out = w;
  return 0;

fail_idle:
  pthread_cond_destroy(&w->idle);
fail_work:
  pthread_cond_destroy(&w->work);
fail_mu:
  pthread_mutex_destroy(&w->mu);
fail_free:
  free(w);
  return -r;
}

/* Appends j (its due time set) to the queue and wakes the thread. */
static void enqueue(pd_writer *w, job *j) {
  pthread_mutex_lock(&w->mu);
  if (w->tail) w->tail->next = j;
  else w->head = j;
  w->tail = j;
  w->queued++;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
}

int pd_writer_put(pd_writer *w, const char *path, const void *data, size_t len, mode_t mode) {
  void *copy = malloc(len ? len : 1);
  if (!copy) return -ENOMEM;
  memcpy(copy, data, len);
  pthread_mutex_lock(&w->mu);
  for (job *j = w->head; j; j = j->next)
    if (!j->fn && !j->started && strcmp(j->path, path) == 0) {
      free(j->data);
      j->data = copy;
      j->len = len;
      j->mode = mode;
      w->queued++;
      w->done++;           /* this put is served by the queued job */
      pthread_mutex_unlock(&w->mu);
      return 0;
    }
  pthread_mutex_unlock(&w->mu);
  job *j = calloc(1, sizeof *j);
  char *p = strdup(path);
  if (!j || !p) {
    free(j);
    free(p);
    free(copy);
    return -ENOMEM;
  }
  j->path = p;
  j->data = copy;
  j->len = len;
  j->mode = mode;
  clock_gettime(CLOCK_MONOTONIC, &j->due);
  j->due.tv_sec += w->delay_ms / 1000;
  j->due.tv_nsec += (long)(w->delay_ms % 1000) * 1000000L;
  if (j->due.tv_nsec >= 1000000000L) {
    j->due.tv_sec++;
    j->due.tv_nsec -= 1000000000L;
  }
  enqueue(w, j);
  return 0;
}

int pd_writer_call(pd_writer *w, void (*fn)(void *arg), void *arg) {
  job *j = calloc(1, sizeof *j);
  if (!j) return -ENOMEM;
  j->fn = fn;
  j->arg = arg;
  clock_gettime(CLOCK_MONOTONIC, &j->due);
  enqueue(w, j);
  return 0;
}

void pd_writer_flush(pd_writer *w) {
  pthread_mutex_lock(&w->mu);
  uint64_t want = w->queued;
  w->hurry++;
  pthread_cond_signal(&w->work);
  while (w->done < want) pthread_cond_wait(&w->idle, &w->mu);
  w->hurry--;
  pthread_mutex_unlock(&w->mu);
}

void pd_writer_del(pd_writer *w) {
  if (!w) return;
  pd_writer_flush(w);
  pthread_mutex_lock(&w->mu);
  w->stop = 1;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
  pthread_join(w->th, NULL);
  pthread_cond_destroy(&w->idle);
  pthread_cond_destroy(&w->work);
  pthread_mutex_destroy(&w->mu);
  free(w);
}
