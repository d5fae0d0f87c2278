/* pd_transcript.c - one session's transcript file. See pd_transcript.h.
 *
 * Invariant: when `history` is not NULL it equals the file's entries
 * exactly; anything uncertain (a failed append, out of memory while
 * extending it) drops it, and the next pd_transcript_history reads the
 * file again. */
#include "pt_config.h"
#include "daemon/pd_transcript.h"
#include "daemon/pd_log.h"
#include "common/pt_file.h"
#include "common/pt_jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

static int valid_role(const char *r) {
  return strcmp(r, "user") == 0 || strcmp(r, "assistant") == 0 || strcmp(r, "error") == 0;
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
  if (len > 0 && data[len - 1] != '\n') {
    snprintf(err, errlen, "last line is incomplete (no newline)");
    free(data);
    return -EBADMSG;
  }
  json_t *arr = NULL;
  if (out && !(arr = json_array())) {
    snprintf(err, errlen, "out of memory");
    free(data);
    return -ENOMEM;
  }
  int maxt = 0, lineno = 0;
  r = 0;
  for (char *p = data; p < data + len;) {
    char *nl = memchr(p, '\n', (size_t)(data + len - p));
    lineno++;
    json_t *e = NULL;
    char perr[160];
    json_int_t tid = 0;
    const char *role = NULL, *text = NULL, *ts = NULL;
    if (pt_jsonl_parse(p, (size_t)(nl - p), &e, perr, sizeof perr) != 0) {
      snprintf(err, errlen, "line %d: %s", lineno, perr);
      r = -EBADMSG;
      break;
    }
    if (json_unpack(e, "{s:I, s:s, s:s, s:s}", "turn_id", &tid, "role", &role, "text", &text,
                    "ts", &ts) != 0 ||
        tid <= 0 || tid > INT_MAX || !valid_role(role)) {
      snprintf(err, errlen, "line %d: bad entry (needs turn_id>0, role, text, ts)", lineno);
      json_decref(e);
      r = -EBADMSG;
      break;
    }
    if (tid > maxt) maxt = (int)tid;
    if (arr && json_array_append_new(arr, e) != 0) {
      snprintf(err, errlen, "out of memory");
      r = -ENOMEM;
      break;
    }
    if (!arr) json_decref(e);
    p = nl + 1;
  }
  free(data);
  if (r < 0) {
    json_decref(arr);
    return r;
  }
  if (out) *out = arr;
  if (max_turn) *max_turn = maxt;
  return 0;
}

int pd_transcript_append(pd_transcript *t, int turn_id, const char *role, const char *text,
                         const char *status) {
  char ts[32];
  pd_time_rfc3339(ts, sizeof ts);
  json_t *e = json_pack("{s:i, s:s, s:s, s:s}", "turn_id", turn_id, "role", role, "text", text,
                        "ts", ts);
  if (!e) return -EINVAL; /* text not valid UTF-8 */
  if (status) json_object_set_new(e, "status", json_string(status));
  char *line;
  size_t len;
  int r = pt_jsonl_dump(e, PD_TRANSCRIPT_MAX, &line, &len);
  if (r < 0) {
    json_decref(e);
    return r == PT_JSONL_EOVERSIZE ? -EFBIG : r;
  }
  if (t->fd < 0) {
    t->fd = open(t->path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
    if (t->fd < 0) {
      r = -errno;
      json_decref(e);
      free(line);
      return r;
    }
  }
  /* Never grow the transcript past what pd_transcript_read accepts. */
  struct stat tst;
  if (fstat(t->fd, &tst) != 0) {
    r = -errno;
  } else if ((uint64_t)tst.st_size + len > PD_TRANSCRIPT_MAX) {
    r = -EFBIG;
  } else {
    r = pt_append_durable(t->fd, t->path, line, len);
  }
  free(line);
  if (r == 0 && turn_id > t->turns) t->turns = turn_id;
  /* Keep the in-memory copy equal to the file (see the invariant). */
  if (t->history && (r < 0 || json_array_append(t->history, e) != 0)) {
    json_decref(t->history);
    t->history = NULL;
  }
  json_decref(e);
  return r;
}

int pd_transcript_history(pd_transcript *t, json_t **out, char *err, size_t errlen) {
  *out = NULL;
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
