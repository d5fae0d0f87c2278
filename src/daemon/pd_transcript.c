/* pd_transcript.c - one session's transcript file. See pd_transcript.h.
 *
 * Invariant: when `history` is not NULL it equals the file's entries
 * exactly, but for a pending append's (added at its commit); anything
 * uncertain (a failed append, out of memory while extending it) drops it,
 * and the next pd_transcript_history reads the file again (never while an
 * append is pending). */
#include "pt_config.h"
#include "daemon/pd_transcript.h"
#include "daemon/pd_transcript_parse.h"
#include "daemon/pd_log.h"
#include "common/pt_file.h"
#include "common/pt_jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct pd_transcript {
  char *path;
  int fd;          /* O_APPEND, opened lazily; -1 when closed */
  int turns;       /* highest turn_id */
  json_t *history; /* the entries, or NULL = not loaded (see the invariant) */
  struct batch *pending; /* an append queued or under way, until committed */
};

int pd_transcript_new(const char *path, int turns, pd_transcript **out) {
  *out = NULL;
  pd_transcript *t = calloc(1, sizeof *t);
  if (!t) return -ENOMEM;
  t->path = strdup(path);
  if (!t->path) {
    free(t);
    return -ENOMEM;
  }
  t->fd = -1;
  t->turns = turns;
  *out = t;
  return 0;
}

void pd_transcript_del(pd_transcript *t) {
  if (!t) return;
  if (t->pending) {
    /* a caller's bug (turns keep their session until their append is
     * committed): the writer still uses t, so it is left, not freed */
    pd_error("transcript %s freed with an append pending: kept", t->path);
    return;
  }
  if (t->fd >= 0) close(t->fd);
  json_decref(t->history);
  free(t->path);
  free(t);
}

int pd_transcript_turns(const pd_transcript *t) { return t->turns; }

int pd_transcript_create(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return -errno;
  int r = fsync(fd) == 0 ? 0 : -errno;
  close(fd);
  return r;
}

int pd_transcript_read(const char *path, json_t **out, int *max_turn, char *err, size_t errlen) {
  char *data = NULL;
  size_t len = 0;
  if (out) *out = NULL;
  if (max_turn) *max_turn = 0;
  int r = pt_read_all(path, PD_TRANSCRIPT_MAX, &data, &len);
  if (r < 0) {
    snprintf(err, errlen, "%s", strerror(-r));
    return r;
  }
  r = pd_transcript_parse(data, len, out, max_turn, err, errlen);
  free(data);
  return r;
}

/* A queued append: the lines and entries made on the loop, the outcome
 * set on the thread that writes (before `done` runs), read on the loop by
 * pd_transcript_commit. */
typedef struct batch {
  size_t n;
  json_t *e[PD_TRANSCRIPT_BATCH_MAX];      /* NULL: not valid UTF-8 */
  char *line[PD_TRANSCRIPT_BATCH_MAX];     /* NULL: no line (see res) */
  size_t len[PD_TRANSCRIPT_BATCH_MAX];
  int res[PD_TRANSCRIPT_BATCH_MAX];        /* each entry's outcome: 0 written, or -errno */
  pd_transcript *t;
  void (*done)(void *);
  void *ctx;
} batch;

static void batch_free(batch *b) {
  for (size_t i = 0; i < b->n; i++) {
    json_decref(b->e[i]);
    free(b->line[i]);
  }
  free(b);
}

/* The disk work: on the writer's thread (or the caller's, without one).
 * Touches only t->fd and t->path of the transcript (see the header). */
static void batch_write(void *arg) {
  batch *b = arg;
  pd_transcript *t = b->t;
  int open_err = 0;
  if (t->fd < 0) {
    t->fd = open(t->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (t->fd < 0) open_err = -errno;
  }
  /* Each entry on its own, as separate appends would be: one that fails
   * (a reply over the size limit) does not keep the next (the error
   * entry saying so) out. */
  for (size_t i = 0; i < b->n; i++) {
    if (!b->line[i]) continue;   /* failed when it was made */
    int r = open_err;
    if (r == 0) {
      /* Never grow the transcript past what pd_transcript_read accepts. */
      struct stat tst;
      if (fstat(t->fd, &tst) != 0) r = -errno;
      else if ((uint64_t)tst.st_size + b->len[i] > PD_TRANSCRIPT_MAX) r = -EFBIG;
      else r = pt_append_durable(t->fd, t->path, b->line[i], b->len[i]);
    }
    b->res[i] = r;
  }
  b->done(b->ctx);   /* last: b may be committed (and freed) from here on */
}

int pd_transcript_append_async(pd_transcript *t, pd_writer *w, const pd_transcript_entry *ent,
                               size_t n, void (*done)(void *ctx), void *ctx) {
  if (n < 1 || n > PD_TRANSCRIPT_BATCH_MAX) return -EINVAL;
  if (t->pending) return -EBUSY;
  /* Written on another thread: load the in-memory copy now, while no
   * append is under way (read later, the file could hold half a line of
   * this one). A failure here is pd_transcript_history's to report later. */
  if (w && !t->history) {
    json_t *h;
    char err[160];
    (void)pd_transcript_history(t, &h, err, sizeof err);
  }
  batch *b = calloc(1, sizeof *b);
  if (!b) return -ENOMEM;
  char ts[32];
  pd_time_rfc3339(ts, sizeof ts);
  b->n = n;
  size_t lines = 0;
  int r = 0;
  for (size_t i = 0; i < n; i++) {
    json_t *e = b->e[i] = json_pack("{s:i, s:s, s:s, s:s}", "turn_id", ent[i].turn_id, "role",
                                    ent[i].role, "text", ent[i].text, "ts", ts);
    if (!e) r = -EINVAL; /* text not valid UTF-8 */
    else if (ent[i].status && json_object_set_new(e, "status", json_string(ent[i].status)) != 0)
      r = -ENOMEM;
    else if ((r = pt_jsonl_dump(e, PD_TRANSCRIPT_MAX, &b->line[i], &b->len[i])) < 0)
      r = r == PT_JSONL_EOVERSIZE ? -EFBIG : r;
    b->res[i] = r;
    if (r == 0) lines++;
  }
  if (lines == 0) {   /* nothing to write: the (first) entry's error, nothing queued */
    r = b->res[0];
    batch_free(b);
    return r;
  }
  b->t = t;
  b->done = done;
  b->ctx = ctx;
  t->pending = b;
  if (!w) {
    batch_write(b);
    return 0;
  }
  r = pd_writer_call(w, batch_write, b);
  if (r < 0) {
    t->pending = NULL;
    batch_free(b);
  }
  return r;
}

int pd_transcript_commit(pd_transcript *t) {
  batch *b = t->pending;
  if (!b) return -EINVAL;
  t->pending = NULL;
  int r = 0, ok = 1;
  for (size_t i = 0; i < b->n; i++) {
    if (b->res[i] < 0) {
      if (!r) r = b->res[i];
      ok = 0;
      continue;
    }
    int tid = (int)json_integer_value(json_object_get(b->e[i], "turn_id"));
    if (tid > t->turns) t->turns = tid;
    if (ok && t->history) ok = json_array_append(t->history, b->e[i]) == 0;
  }
  /* Keep the in-memory copy equal to the file (see the invariant): after
   * any failure, the next pd_transcript_history reads the file again. */
  if (!ok && t->history) {
    json_decref(t->history);
    t->history = NULL;
  }
  batch_free(b);
  return r;
}

static void no_op(void *ctx) { (void)ctx; }

int pd_transcript_append(pd_transcript *t, int turn_id, const char *role, const char *text,
                         const char *status) {
  pd_transcript_entry e = {turn_id, role, text, status};
  int r = pd_transcript_append_async(t, NULL, &e, 1, no_op, NULL);
  return r < 0 ? r : pd_transcript_commit(t);
}

int pd_transcript_history(pd_transcript *t, json_t **out, char *err, size_t errlen) {
  *out = NULL;
  if (!t->history && t->pending) {
    snprintf(err, errlen, "an append is being written; try again");
    return -EBUSY;
  }
  if (!t->history) {
    json_t *tr = NULL;
    int r = pd_transcript_read(t->path, &tr, NULL, err, errlen);
    if (r == -ENOENT) {
      tr = json_array();
      r = tr ? 0 : -ENOMEM;
      if (r < 0) snprintf(err, errlen, "out of memory");
    }
    if (r < 0) return r;
    t->history = tr;
  }
  *out = t->history;
  return 0;
}

#if PT_FAULT_INJECTION
/* Test builds only (-Dfault_injection=true): a release daemon contains
 * neither this code nor the variable's name. */
static int g_fault_errno, g_fault_skip, g_fault_seen;

static int transcript_fault(const char *path) {
  (void)path;
  if (!g_fault_errno) return 0;
  if (g_fault_seen++ < g_fault_skip) return 0;
  return g_fault_errno;
}

void pd_transcript_install_fault_hook(void) {
  const char *v = getenv("POLYTOKEN_FAULT_TRANSCRIPT_WRITE");
  if (!v || !*v) return;
  char name[32];
  int skip = 0;
  if (sscanf(v, "%31[A-Z]:%d", name, &skip) < 1) return;
  if (strcmp(name, "ENOSPC") == 0) g_fault_errno = ENOSPC;
  else if (strcmp(name, "EIO") == 0) g_fault_errno = EIO;
  else if (strcmp(name, "EDQUOT") == 0) g_fault_errno = EDQUOT;
  else return;
  g_fault_skip = skip < 0 ? 0 : skip;
  g_fault_seen = 0;
  pt_append_set_fault(transcript_fault);
  pd_warn("fault injection: transcript appends fail with %s after %d append(s)", name,
          g_fault_skip);
}
#else
void pd_transcript_install_fault_hook(void) {}
#endif
