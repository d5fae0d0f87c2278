/*
 * pd_resp_exec.c - the external responder: runs $POLYTOKEN_RESPONDER_CMD
 * per turn via `/bin/sh -c`, writes {"session","messages":[{"role","text"}]}
 * plus a newline to its stdin (then closes stdin), and streams its stdout
 * back as deltas, chunk by chunk.
 *
 * The child runs in its own session/process group (UV_PROCESS_DETACHED =
 * setsid), so cancel and timeout kill the whole group (kill(-pid, SIGKILL)),
 * including anything the shell started.
 *
 * Outcome, decided once the process has exited and both output pipes hit
 * EOF (or a short grace period after exit, in case a grandchild that left
 * the group keeps a pipe open):
 *   cancelled -> PD_RESP_CANCELLED
 *   no stdout for POLYTOKEN_RESPONDER_TIMEOUT_MS -> error "timed out"
 *   more than PD_REPLY_MAX bytes -> error "reply too long"
 *   killed by a signal / non-zero exit -> error with the stderr tail
 *   exit 0 -> PD_RESP_OK
 * Stdout bytes are repaired to valid UTF-8 (invalid bytes become U+FFFD;
 * a sequence split across reads is carried over).
 */
#include "daemon/pd_responder.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_log.h"
#include "common/pt_jsonl.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERRTAIL 400
#define EXIT_GRACE_MS 1000

typedef struct execr {
  pt_task task; /* "responder.exec" */
  uv_process_t proc;
  uv_pipe_t in, out, err;
  uv_timer_t timer;
  uv_write_t wreq;
  char *input;
  size_t input_len;
  pd_resp_sink sink;
  int timeout_ms;
  int open_handles;
  int exited, out_eof, err_eof, in_closed;
  int64_t exit_status;
  int term_signal;
  int cancelled, timed_out, too_long, done_called;
  size_t total_out;
  unsigned char carry[4];
  size_t ncarry;
  char errtail[ERRTAIL + 1];
  size_t nerr;
} execr;

static void on_closed(uv_handle_t *h) {
  execr *e = h->data;
  if (--e->open_handles > 0) return;
  PD_TASK_END(&e->task);
  free(e->input);
  free(e);
}

static void close_h(execr *e, uv_handle_t *h) {
  if (!uv_is_closing(h)) uv_close(h, on_closed);
}

static void kill_group(execr *e) {
  if (!e->exited && e->proc.pid > 0) kill(-e->proc.pid, SIGKILL);
}

static const char *strsig(int sig) {
  const char *s = sigabbrev_np(sig);
  return s ? s : "?";
}

static void finish(execr *e) {
  if (e->done_called) return;
  e->done_called = 1;
  uv_timer_stop(&e->timer);
  pd_task_disarm(&e->task);
  char msg[600];
  pd_resp_status st = PD_RESP_OK;
  /* trim the stderr tail to its last line(s) without trailing newlines */
  while (e->nerr > 0 && (e->errtail[e->nerr - 1] == '\n' || e->errtail[e->nerr - 1] == '\r'))
    e->nerr--;
  e->errtail[e->nerr] = 0;
  for (size_t i = 0; i < e->nerr; i++)
    if (e->errtail[i] == '\n') e->errtail[i] = ' ';
  const char *sep = e->nerr ? ": " : "";
  if (e->cancelled) {
    st = PD_RESP_CANCELLED;
  } else if (e->timed_out) {
    st = PD_RESP_ERROR;
    snprintf(msg, sizeof msg, "responder timed out: no output for %d ms (killed)", e->timeout_ms);
  } else if (e->too_long) {
    st = PD_RESP_ERROR;
    snprintf(msg, sizeof msg, "responder reply exceeded %zu bytes (killed)", PD_REPLY_MAX);
  } else if (e->term_signal) {
    st = PD_RESP_ERROR;
    snprintf(msg, sizeof msg, "responder crashed: killed by signal %d (SIG%s)%s%s", e->term_signal,
             strsig(e->term_signal), sep, e->errtail);
  } else if (e->exit_status > 128 && e->exit_status < 128 + 65) {
    /* the shell reports a command killed by signal N as 128+N */
    int sig = (int)e->exit_status - 128;
    st = PD_RESP_ERROR;
    snprintf(msg, sizeof msg, "responder crashed: killed by signal %d (SIG%s)%s%s", sig,
             strsig(sig), sep, e->errtail);
  } else if (e->exit_status != 0) {
    st = PD_RESP_ERROR;
    snprintf(msg, sizeof msg, "responder failed: exit status %lld%s%s",
             (long long)e->exit_status, sep, e->errtail);
  }
  /* make sure nothing of the group survives a failed or cancelled turn */
  if (st != PD_RESP_OK) kill_group(e);
  e->sink.done(e->sink.ctx, st, st == PD_RESP_ERROR ? msg : NULL);
  close_h(e, (uv_handle_t *)&e->timer);
  close_h(e, (uv_handle_t *)&e->out);
  close_h(e, (uv_handle_t *)&e->err);
  close_h(e, (uv_handle_t *)&e->in);
  if (e->exited) close_h(e, (uv_handle_t *)&e->proc);
  /* else: exit_cb closes the process handle when the killed child is reaped */
}

static void maybe_finish(execr *e) {
  if (e->exited && e->out_eof && e->err_eof) finish(e);
}

static void timer_cb(uv_timer_t *t) {
  execr *e = t->data;
  PD_POLL(&e->task);
  pd_task_wake(&e->task);
  if (e->done_called) return;
  if (e->exited) {
    /* grace period after exit ran out: a grandchild holds a pipe open */
    e->out_eof = e->err_eof = 1;
    finish(e);
    return;
  }
  if (e->cancelled) {
    /* cancel path: the group was killed; waiting for the exit */
    return;
  }
  pd_warn("exec responder pid %d: no output for %d ms, killing", e->proc.pid, e->timeout_ms);
  e->timed_out = 1;
  kill_group(e);
}

static void exit_cb(uv_process_t *p, int64_t status, int sig) {
  execr *e = p->data;
  PD_POLL(&e->task);
  pd_task_wake(&e->task);
  e->exited = 1;
  e->exit_status = status;
  e->term_signal = sig;
  pd_debug("exec responder pid %d exited: status %lld signal %d", p->pid, (long long)status, sig);
  if (e->done_called) {
    close_h(e, (uv_handle_t *)p);
    return;
  }
  if (!(e->out_eof && e->err_eof)) {
    uv_timer_start(&e->timer, timer_cb, EXIT_GRACE_MS, 0);
    pd_task_arm(&e->task);
  }
  maybe_finish(e);
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
  (void)h;
  static char slab[65536]; /* loop thread only; consumed before the next read */
  (void)suggested;
  *buf = uv_buf_init(slab, sizeof slab);
}

/* Length of a valid UTF-8 sequence starting at p (n bytes available):
 * >0 valid length, 0 incomplete (need more), -1 invalid first byte. */
static int utf8_seq(const unsigned char *p, size_t n) {
  unsigned char c = p[0];
  int len;
  unsigned min;
  if (c < 0x80) return 1;
  if (c >= 0xc2 && c <= 0xdf) { len = 2; min = 0x80; }
  else if (c >= 0xe0 && c <= 0xef) { len = 3; min = 0x800; }
  else if (c >= 0xf0 && c <= 0xf4) { len = 4; min = 0x10000; }
  else return -1;
  unsigned cp = c & (0x3f >> (len - 1));
  for (int i = 1; i < len; i++) {
    if ((size_t)i >= n) return 0;
    if ((p[i] & 0xc0) != 0x80) return -1;
    cp = (cp << 6) | (p[i] & 0x3f);
  }
  if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return -1;
  return len;
}

/* Emits the valid UTF-8 of carry+data as one delta; keeps an incomplete
 * tail in carry (unless at_eof, when it becomes U+FFFD). */
static void emit_utf8(execr *e, const char *data, size_t n, int at_eof) {
  size_t total = e->ncarry + n;
  unsigned char *in = malloc(total + 1);
  char *out = malloc(total * 3 + 4);
  if (!in || !out) {
    free(in);
    free(out);
    return;
  }
  memcpy(in, e->carry, e->ncarry);
  memcpy(in + e->ncarry, data, n);
  e->ncarry = 0;
  size_t o = 0;
  for (size_t i = 0; i < total;) {
    int l = utf8_seq(in + i, total - i);
    if (l > 0) {
      memcpy(out + o, in + i, (size_t)l);
      o += (size_t)l;
      i += (size_t)l;
    } else if (l == 0 && !at_eof) {
      memcpy(e->carry, in + i, total - i);
      e->ncarry = total - i;
      break;
    } else {
      memcpy(out + o, "\xef\xbf\xbd", 3); /* U+FFFD */
      o += 3;
      i++;
      if (l == 0) break; /* incomplete at EOF: one replacement */
    }
  }
  if (o > 0) e->sink.delta(e->sink.ctx, out, o);
  free(in);
  free(out);
}

static void out_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  execr *e = s->data;
  PD_POLL(&e->task);
  pd_task_wake(&e->task);
  if (e->done_called) return;
  if (nread > 0) {
    e->total_out += (size_t)nread;
    if (e->total_out > PD_REPLY_MAX) {
      e->too_long = 1;
      kill_group(e);
      uv_read_stop(s);
      e->out_eof = 1;
      maybe_finish(e);
      return;
    }
    emit_utf8(e, buf->base, (size_t)nread, 0);
    if (e->done_called) return;
    /* output resets the hang timer */
    if (!e->exited && !e->cancelled) uv_timer_start(&e->timer, timer_cb, (uint64_t)e->timeout_ms, 0);
  } else if (nread < 0) {
    if (e->ncarry) emit_utf8(e, "", 0, 1);
    uv_read_stop(s);
    pd_task_disarm(&e->task);
    e->out_eof = 1;
    maybe_finish(e);
  }
}

static void err_read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
  execr *e = s->data;
  PD_POLL(&e->task);
  pd_task_wake(&e->task);
  if (nread > 0) {
    /* keep the last ERRTAIL bytes for the error message; log each chunk */
    size_t n = (size_t)nread;
    const char *p = buf->base;
    if (n >= ERRTAIL) {
      memcpy(e->errtail, p + n - ERRTAIL, ERRTAIL);
      e->nerr = ERRTAIL;
    } else {
      if (e->nerr + n > ERRTAIL) {
        size_t drop = e->nerr + n - ERRTAIL;
        memmove(e->errtail, e->errtail + drop, e->nerr - drop);
        e->nerr -= drop;
      }
      memcpy(e->errtail + e->nerr, p, n);
      e->nerr += n;
    }
    pd_info("exec responder stderr: %.*s", (int)(n > 300 ? 300 : n), p);
  } else if (nread < 0) {
    uv_read_stop(s);
    e->err_eof = 1;
    if (!e->done_called) maybe_finish(e);
  }
}

static void write_cb(uv_write_t *w, int status) {
  execr *e = w->data;
  PD_POLL(&e->task);
  /* EPIPE when the command does not read its stdin: not an error */
  if (status < 0 && status != UV_EPIPE && status != UV_ECANCELED)
    pd_warn("exec responder: writing stdin: %s", uv_strerror(status));
  close_h(e, (uv_handle_t *)&e->in);
}

static int exec_start(uv_loop_t *loop, const pd_resp_request *req, const pd_resp_sink *sink,
                      void **handle) {
  const char *cmd = req->settings ? req->settings->cmd : NULL;
  if (!cmd || !*cmd) return -EINVAL;
  execr *e = calloc(1, sizeof *e);
  if (!e) return -ENOMEM;
  e->sink = *sink;
  e->timeout_ms = req->settings->timeout_ms > 0 ? req->settings->timeout_ms
                                                : PD_RESP_TIMEOUT_MS_DEFAULT;
  json_t *msgs = json_array();
  size_t i;
  json_t *m;
  json_array_foreach(req->messages, i, m) {
    json_array_append_new(msgs, json_pack("{s:O, s:O}", "role", json_object_get(m, "role"),
                                          "text", json_object_get(m, "text")));
  }
  json_t *doc = json_pack("{s:s, s:i, s:o}", "session", req->session, "turn_id", req->turn_id,
                          "messages", msgs);
  int r = doc ? pt_jsonl_dump(doc, (size_t)1 << 30, &e->input, &e->input_len) : -ENOMEM;
  json_decref(doc);
  if (r < 0) {
    free(e);
    return r;
  }
  uv_pipe_init(loop, &e->in, 0);
  uv_pipe_init(loop, &e->out, 0);
  uv_pipe_init(loop, &e->err, 0);
  uv_timer_init(loop, &e->timer);
  e->in.data = e->out.data = e->err.data = e->timer.data = e->proc.data = e->wreq.data = e;
  e->open_handles = 4;

  char *args[] = {"/bin/sh", "-c", (char *)cmd, NULL};
  uv_stdio_container_t stdio[3];
  stdio[0].flags = UV_CREATE_PIPE | UV_READABLE_PIPE;
  stdio[0].data.stream = (uv_stream_t *)&e->in;
  stdio[1].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[1].data.stream = (uv_stream_t *)&e->out;
  stdio[2].flags = UV_CREATE_PIPE | UV_WRITABLE_PIPE;
  stdio[2].data.stream = (uv_stream_t *)&e->err;
  uv_process_options_t opt;
  memset(&opt, 0, sizeof opt);
  opt.file = "/bin/sh";
  opt.args = args;
  opt.exit_cb = exit_cb;
  opt.flags = UV_PROCESS_DETACHED; /* own process group: kill(-pid) reaches all */
  opt.cwd = req->cwd; /* where the user started us, not the state root */
  opt.stdio = stdio;
  opt.stdio_count = 3;
  PD_TASK_START(&e->task, "responder.exec");
  r = uv_spawn(loop, &e->proc, &opt);
  if (r < 0) {
    pd_error("exec responder: cannot spawn /bin/sh: %s", uv_strerror(r));
    /* uv_spawn leaves the process handle closable too */
    e->done_called = 1;
    e->open_handles = 5;
    close_h(e, (uv_handle_t *)&e->proc);
    close_h(e, (uv_handle_t *)&e->in);
    close_h(e, (uv_handle_t *)&e->out);
    close_h(e, (uv_handle_t *)&e->err);
    close_h(e, (uv_handle_t *)&e->timer);
    return r;
  }
  e->open_handles = 5;
  pd_info("exec responder pid %d started for session %s turn %d", e->proc.pid, req->session,
          req->turn_id);
  uv_buf_t b = uv_buf_init(e->input, (unsigned)e->input_len);
  r = uv_write(&e->wreq, (uv_stream_t *)&e->in, &b, 1, write_cb);
  if (r < 0) close_h(e, (uv_handle_t *)&e->in);
  uv_read_start((uv_stream_t *)&e->out, alloc_cb, out_read_cb);
  uv_read_start((uv_stream_t *)&e->err, alloc_cb, err_read_cb);
  uv_timer_start(&e->timer, timer_cb, (uint64_t)e->timeout_ms, 0);
  pd_task_arm(&e->task);
  *handle = e;
  return 0;
}

static void exec_cancel(void *handle) {
  execr *e = handle;
  if (e->done_called || e->cancelled) return;
  e->cancelled = 1;
  pd_info("exec responder pid %d: cancelled, killing its process group", e->proc.pid);
  kill_group(e);
  /* done follows from exit_cb / EOF (later callbacks), as the contract says */
}

const pd_responder_vt pd_resp_exec = {"exec", exec_start, exec_cancel};
