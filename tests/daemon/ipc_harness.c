/* ipc_harness.c - the unit tests' driver of the IPC core (ipc_harness.h). */
#include "ipc_harness.h"
#include "pt_test.h"
#include "common/pt_version.h"

#include <errno.h>

static int th_send(pd_conn *c, const char *data, size_t len, void *cd) {
  th_conn *tc = cd;
  PT_ASSERT(tc->c == NULL || tc->c == c);
  PT_ASSERT_MSG(tc->close_calls == 0, "send after close");
  PT_ASSERT_MSG(len > 0 && data[len - 1] == '\n', "send of a partial line");
  if (tc->send_error) return tc->send_error;
  if (tc->outlen + len + 1 > tc->outcap) {
    size_t n = tc->outcap ? tc->outcap : 1024;
    while (n < tc->outlen + len + 1) n *= 2;
    /* plain realloc: the harness's memory is not the core's */
    char *p = realloc(tc->out, n);
    PT_ASSERT(p != NULL);
    tc->out = p;
    tc->outcap = n;
  }
  memcpy(tc->out + tc->outlen, data, len);
  tc->outlen += len;
  tc->out[tc->outlen] = 0;
  tc->unsent += len;
  return 0;
}

static void th_stop(pd_conn *c, void *cd) {
  th_conn *tc = cd;
  (void)c;
  PT_ASSERT_MSG(tc->close_calls == 0, "stop_reading after close");
  tc->stop_calls++;
}

static void th_close(pd_conn *c, void *cd) {
  th_conn *tc = cd;
  (void)c;
  tc->close_calls++;
  PT_ASSERT_MSG(tc->close_calls == 1, "close asked twice");
}

static void th_logcb(int level, const char *msg, void *ud) {
  th_log *l = ud;
  static const char *names[] = {"ERROR", "WARN", "INFO", "DEBUG"};
  PT_ASSERT(level >= 0 && level <= 3);
  PT_ASSERT_MSG(strchr(msg, '\n') == NULL, "log line with a newline: %s", msg);
  int n = snprintf(l->text + l->len, sizeof l->text - l->len, "%s %s\n", names[level], msg);
  if (n > 0 && l->len + (size_t)n < sizeof l->text) l->len += (size_t)n;
}

const pd_ipc_callbacks th_callbacks = {th_send, th_stop, th_close};

void th_options(pd_ipc_options *o, th_log *log) {
  if (!o->pid) o->pid = 4242;
  if (log) {
    o->log = th_logcb;
    o->log_user_data = log;
  }
}

pd_ipc *th_core(pd_ipc_options *o, th_log *log) {
  pd_ipc_options d;
  if (!o) {
    pd_ipc_options_init(&d);
    o = &d;
  }
  th_options(o, log);
  pd_ipc *ipc = NULL;
  PT_ASSERT_INT_EQ(pd_ipc_new(&ipc, o, &th_callbacks), 0);
  return ipc;
}

int th_open(pd_ipc *ipc, th_conn *tc, uint64_t now) {
  return pd_ipc_conn_open(ipc, tc, now, &tc->c);
}

int th_feed(th_conn *tc, const char *s, uint64_t now) {
  return pd_conn_recv(tc->c, s, strlen(s), now);
}

void th_flush(th_conn *tc, uint64_t now) {
  size_t n = tc->unsent;
  tc->unsent = 0;
  pd_conn_sent(tc->c, n, now);
}

const char *th_take(th_conn *tc) {
  const char *p = tc->out ? tc->out + tc->taken : "";
  tc->taken = tc->outlen;
  return p;
}

void th_conn_free(th_conn *tc) {
  free(tc->out);
  memset(tc, 0, sizeof *tc);
}

const char *th_hello_reply(int id) {
  static char buf[256];
  snprintf(buf, sizeof buf,
           "{\"id\":%d,\"result\":{\"protocol\":1,\"version\":\"%s\",\"profiling\":%s,\"pid\":4242}}\n",
           id, pt_version(), pt_is_profiling_build() ? "true" : "false");
  return buf;
}
