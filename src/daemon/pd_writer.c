/*
 * pd_writer.c - see pd_writer.h.
 *
 * DESIGN. A FIFO of jobs under `mu`. The thread takes the head (marking it
 * started, so puts no longer coalesce into it), writes it without the
 * lock, then removes it, counts it done and signals `idle`. put appends,
 * or replaces the bytes of a queued job of the same path that has not
 * started. flush waits for `done` to reach the number of puts made so far
 * (`queued`). del sets `stop` after a flush; the thread exits when it sees
 * `stop` with an empty queue.
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

typedef struct job {
  char *path;
  void *data;
  size_t len;
  mode_t mode;
  int started;
  struct job *next;
} job;

struct pd_writer {
  pthread_t th;
  pthread_mutex_t mu;
  pthread_cond_t work;    /* a job was queued, or stop */
  pthread_cond_t idle;    /* a job finished */
  job *head, *tail;
  uint64_t queued, done;  /* puts accepted / jobs finished (coalesced puts count as done) */
  int stop;
};

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
    job *j = w->head;
    j->started = 1;
    pthread_mutex_unlock(&w->mu);
    int r = pt_write_atomic(j->path, j->data, j->len, j->mode);
    if (r < 0) pd_warn("writing %s: %s (the file is as it was)", j->path, strerror(-r));
    pthread_mutex_lock(&w->mu);
    w->head = j->next;
    if (!w->head) w->tail = NULL;
    w->done++;
    pthread_cond_broadcast(&w->idle);
    job_free(j);
  }
  pthread_mutex_unlock(&w->mu);
  return NULL;
}

int pd_writer_new(pd_writer **out) {
  *out = NULL;
  pd_writer *w = calloc(1, sizeof *w);
  if (!w) return -ENOMEM;
  int r;
  if ((r = pthread_mutex_init(&w->mu, NULL)) != 0) goto fail_free;
  if ((r = pthread_cond_init(&w->work, NULL)) != 0) goto fail_mu;
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

int pd_writer_put(pd_writer *w, const char *path, const void *data, size_t len, mode_t mode) {
  void *copy = malloc(len ? len : 1);
  if (!copy) return -ENOMEM;
  memcpy(copy, data, len);
  pthread_mutex_lock(&w->mu);
  for (job *j = w->head; j; j = j->next)
    if (!j->started && strcmp(j->path, path) == 0) {
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
  pthread_mutex_lock(&w->mu);
  if (w->tail) w->tail->next = j;
  else w->head = j;
  w->tail = j;
  w->queued++;
  pthread_cond_signal(&w->work);
  pthread_mutex_unlock(&w->mu);
  return 0;
}

void pd_writer_flush(pd_writer *w) {
  pthread_mutex_lock(&w->mu);
  uint64_t want = w->queued;
  while (w->done < want) pthread_cond_wait(&w->idle, &w->mu);
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
