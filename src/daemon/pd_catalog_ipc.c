/*
 * pd_catalog_ipc.c - the catalog's daemon glue (see pd_catalog_ipc.h).
 *
 * DESIGN (threads and locking)
 *  - `artifacts.list`: the refresh (directory scans and SHA-256 of new or
 *    changed files, which for a large daemon log is tens of MiB) runs on the
 *    libuv threadpool (uv_queue_work). The call is answered asynchronously
 *    from the after-work callback on the loop thread.
 *  - One refresh at a time. A list arriving while a refresh runs is queued
 *    for the NEXT refresh (it must see files written before it asked, which
 *    the running scan may have missed); every call queued meanwhile shares
 *    that one next refresh and all get its result. So N concurrent lists
 *    cost at most two refreshes.
 *  - `artifacts.fetch`: parameter checks and the entry lookup run on the
 *    loop thread; opening, the verification (a whole-range re-hash the
 *    first time, up to 64 MiB; the chunk's blocks afterwards) and the chunk
 *    read run on the threadpool on a copy of the listed entry
 *    (pd_catalog_read_job), so a refresh that replaces the list meanwhile
 *    does not matter. The block digests it learns are kept on the loop
 *    thread (pd_catalog_read_keep in fetch_done).
 *  - The worker touches only its job (and, for a refresh, the catalog's
 *    hash cache, frozen while the job is in flight: pd_catalog.h). All other
 *    state here (g_catalog, the queues) is loop-thread only: no locks.
 *  - Units of work (pd_loop.h): each refresh is a "catalog.refresh" task
 *    with a "catalog.refresh.work" blocking task for its threadpool part;
 *    each fetch a "catalog.fetch" task with "catalog.fetch.work".
 *  - Shutdown: the catalog is freed by the "state" step; if a refresh is in
 *    flight then, freeing is deferred to its after-work callback (the
 *    loop keeps running until queued work completes).
 */
#include "daemon/pd_catalog_ipc.h"
#include "common/pt_thread_name.h"

#include "daemon/pd_catalog.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"
#include "daemon/pd_shutdown.h"
#include "daemon/pd_sessions.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

typedef struct list_waiter {
  pd_call *call;
  int64_t since;
  struct list_waiter *next;
} list_waiter;

typedef struct refresh_op {
  uv_work_t work;
  pt_task task;      /* "catalog.refresh" */
  pt_task work_task; /* "catalog.refresh.work" (blocking) */
  pd_catalog_job *job;
  list_waiter *waiters; /* answered when this refresh ends */
  size_t n_waiters;
  pd_catalog_stats before; /* for the per-refresh debug line */
} refresh_op;

typedef struct fetch_op {
  uv_work_t work;
  pt_task task;      /* "catalog.fetch" */
  pt_task work_task; /* "catalog.fetch.work" (blocking) */
  pd_call *call;
  pd_catalog_read_job *job;
} fetch_op;

/* All loop thread only. */
static uv_loop_t *g_loop;
static pd_catalog *g_catalog;      /* NULL after shutdown */
static pd_catalog *g_closing;      /* freed when the running refresh ends */
static refresh_op *g_running;      /* the refresh in flight, or NULL */
static list_waiter *g_next;        /* lists waiting for the next refresh */
static list_waiter **g_next_tail = &g_next;
static int g_persist_logged;

static void start_refresh(void);

static void log_persist(pd_catalog *c) {
  pd_catalog_stats st;
  pd_catalog_get_stats(c, &st);
  if (st.persist_error && !g_persist_logged) {
    /* Once: the catalog keeps working in memory; only restarts could then
     * see an older generation. */
    pd_log(PD_LOG_WARN, "catalog: cannot persist catalog.json: %s", strerror(-st.persist_error));
    g_persist_logged = 1;
  } else if (!st.persist_error) {
    g_persist_logged = 0;
  }
}

static void answer_waiters(list_waiter *w, pd_catalog *c, int refresh_err) {
  while (w) {
    list_waiter *next = w->next;
    if (!c) {
      pd_call_error(w->call, "shutting_down", "the artifact catalog is closed");
    } else {
      json_t *result = NULL;
      const char *code = "internal";
      char msg[512];
      if (pd_catalog_list_result(c, w->since, refresh_err, &result, &code, msg, sizeof msg) < 0)
        pd_call_error(w->call, code, "%s", msg);
      else
        pd_call_reply(w->call, result);
    }
    free(w);
    w = next;
  }
}

/* Threadpool thread: only the job is touched. */
static void refresh_work(uv_work_t *w) {
  PT_THREAD_JOB(PT_THREAD_DAEMON_CATALOG, PT_THREAD_DAEMON_POOL);
  refresh_op *op = w->data;
  pd_catalog_refresh_work(op->job);
  pd_task_wake(&op->task);
}

static void refresh_done(uv_work_t *w, int status) {
  refresh_op *op = w->data;
  PD_TASK_END(&op->work_task);
  PD_POLL(&op->task);
  pd_task_disarm(&op->task);
  pd_catalog *c = g_catalog ? g_catalog : g_closing;
  /* Nothing cancels catalog work; should it ever not have run, run it
   * here rather than swap in an empty list. */
  if (status == UV_ECANCELED) pd_catalog_refresh_work(op->job);
  int r = pd_catalog_refresh_end(c, op->job);
  {
    /* Tests read this line (POLYTOKEN_DEBUG=1): one refresh per line, how
     * many list calls it answers (coalescing) and how many bytes it read
     * to hash (incremental hashing of append-only files). */
    pd_catalog_stats st;
    pd_catalog_get_stats(c, &st);
    pd_debug("catalog: refresh %" PRIu64 " done: %zu calls, generation %" PRIu64 ", %" PRIu64
             " files hashed, %" PRIu64 " bytes hashed, %" PRIu64 " cached, result %d",
             st.refreshes, op->n_waiters, pd_catalog_generation(c),
             st.files_hashed - op->before.files_hashed, st.bytes_hashed - op->before.bytes_hashed,
             st.cache_hits - op->before.cache_hits, r);
  }
  g_running = NULL;
  if (g_catalog) log_persist(g_catalog);
  answer_waiters(op->waiters, g_catalog, r);
  PD_TASK_END(&op->task);
  free(op);
  if (g_closing) {
    pd_catalog_del(g_closing);
    g_closing = NULL;
  }
  if (g_catalog && g_next) start_refresh();
  else if (!g_catalog) {
    list_waiter *late = g_next;
    g_next = NULL;
    g_next_tail = &g_next;
    answer_waiters(late, NULL, 0);
  }
}

/* Starts a refresh for everyone in g_next (loop thread; none running). */
static void start_refresh(void) {
  list_waiter *w = g_next;
  g_next = NULL;
  g_next_tail = &g_next;
  refresh_op *op = calloc(1, sizeof *op);
  if (op) pd_catalog_get_stats(g_catalog, &op->before);
  int r = op ? pd_catalog_refresh_begin(g_catalog, &op->job) : -ENOMEM;
  if (r < 0) {
    free(op);
    answer_waiters(w, g_catalog, r);
    return;
  }
  op->waiters = w;
  for (list_waiter *x = w; x; x = x->next) op->n_waiters++;
  op->work.data = op;
  PD_TASK_START(&op->task, "catalog.refresh");
  pt_task_spawn(&op->work_task, "catalog.refresh.work", "blocking");
  r = uv_queue_work(g_loop, &op->work, refresh_work, refresh_done);
  if (r < 0) {
    /* No threadpool work possible: refresh here rather than fail. */
    PD_TASK_END(&op->work_task);
    pd_catalog_refresh_work(op->job);
    r = pd_catalog_refresh_end(g_catalog, op->job);
    log_persist(g_catalog);
    answer_waiters(op->waiters, g_catalog, r);
    PD_TASK_END(&op->task);
    free(op);
    return;
  }
  pd_task_arm(&op->task);
  g_running = op;
  pd_debug("catalog: refresh %" PRIu64 " started: %zu calls", op->before.refreshes + 1,
           op->n_waiters);
}

static void on_list(pd_call *call, json_t *params) {
  int64_t since = -1;
  const char *code = "internal";
  char msg[512];
  if (pd_catalog_list_params(params, &since, &code, msg, sizeof msg) < 0) {
    pd_call_error(call, code, "%s", msg);
    return;
  }
  list_waiter *w = calloc(1, sizeof *w);
  if (!w) {
    pd_call_error(call, "internal", "out of memory");
    return;
  }
  w->call = call;
  w->since = since;
  *g_next_tail = w;
  g_next_tail = &w->next;
  if (!g_running) start_refresh();
}

/* Threadpool thread: only the read job is touched. */
static void fetch_work(uv_work_t *w) {
  PT_THREAD_JOB(PT_THREAD_DAEMON_CATALOG, PT_THREAD_DAEMON_POOL);
  fetch_op *op = w->data;
  pd_catalog_read_work(op->job);
  pd_task_wake(&op->task);
}

static void fetch_done(uv_work_t *w, int status) {
  fetch_op *op = w->data;
  PD_TASK_END(&op->work_task);
  PD_POLL(&op->task);
  pd_task_disarm(&op->task);
  json_t *result = NULL;
  const char *code = "internal";
  char msg[512];
  /* Nothing cancels catalog work (see refresh_done). */
  if (status == UV_ECANCELED) pd_catalog_read_work(op->job);
  if (g_catalog) pd_catalog_read_keep(g_catalog, op->job);
  if (pd_catalog_fetch_end(op->job, &result, &code, msg, sizeof msg) < 0) {
    pd_call_error(op->call, code, "%s", msg);
  } else {
    pd_call_reply(op->call, result);
  }
  PD_TASK_END(&op->task);
  free(op);
}

static void on_fetch(pd_call *call, json_t *params) {
  const char *code = "internal";
  char msg[512];
  pd_catalog_read_job *job = NULL;
  if (pd_catalog_fetch_begin(g_catalog, params, &job, &code, msg, sizeof msg) < 0) {
    pd_call_error(call, code, "%s", msg);
    return;
  }
  fetch_op *op = calloc(1, sizeof *op);
  if (!op) {
    json_t *res = NULL;
    pd_catalog_read_work(job); /* cheapest correct way to release it */
    pd_catalog_fetch_end(job, &res, &code, msg, sizeof msg);
    json_decref(res);
    pd_call_error(call, "internal", "out of memory");
    return;
  }
  op->call = call;
  op->job = job;
  op->work.data = op;
  PD_TASK_START(&op->task, "catalog.fetch");
  pt_task_spawn(&op->work_task, "catalog.fetch.work", "blocking");
  int r = uv_queue_work(g_loop, &op->work, fetch_work, fetch_done);
  if (r < 0) {
    PD_TASK_END(&op->work_task);
    pd_catalog_read_work(job);
    pd_catalog_read_keep(g_catalog, job);
    json_t *result = NULL;
    if (pd_catalog_fetch_end(job, &result, &code, msg, sizeof msg) < 0)
      pd_call_error(call, code, "%s", msg);
    else
      pd_call_reply(call, result);
    PD_TASK_END(&op->task);
    free(op);
    return;
  }
  pd_task_arm(&op->task);
}

static void on_method(pd_call *call, json_t *params, void *ctx) {
  (void)ctx;
  if (!g_catalog) {
    pd_call_error(call, "shutting_down", "the artifact catalog is closed");
    return;
  }
  const char *m = pd_call_method(call);
  if (params && !json_is_object(params)) {
    pd_call_error(call, "bad_request", "params must be an object");
    return;
  }
  if (strcmp(m, "artifacts.list") == 0)
    on_list(call, params);
  else if (strcmp(m, "artifacts.fetch") == 0)
    on_fetch(call, params);
  else
    pd_call_error(call, "unknown_method", "unknown method %s", m);
}

static void on_active(const char *session_dir, void *ctx) {
  (void)ctx;
  if (g_catalog && pd_catalog_set_session(g_catalog, session_dir) < 0)
    pd_log(PD_LOG_WARN, "catalog: out of memory setting the active session");
}

static void on_shutdown(void *ctx) {
  (void)ctx;
  if (g_running) g_closing = g_catalog; /* freed by refresh_done */
  else pd_catalog_del(g_catalog);
  g_catalog = NULL;
  /* Lists queued for a next refresh will not get one. */
  list_waiter *w = g_next;
  g_next = NULL;
  g_next_tail = &g_next;
  answer_waiters(w, NULL, 0);
  /* Late requests (none should come: clients are closed before the "state"
   * slot) get `shutting_down` instead of touching freed memory. */
}

int pd_catalog_install(uv_loop_t *loop, const char *home, pd_ipc *ipc, pd_sessions *sessions) {
  if (g_catalog) return -EALREADY;
  g_loop = loop;
  int r = pd_catalog_new(&g_catalog, home);
  if (r < 0) return r;
  if ((r = pd_ipc_register_method(ipc, "artifacts.list", on_method, NULL)) < 0 ||
      (r = pd_ipc_register_method(ipc, "artifacts.fetch", on_method, NULL)) < 0 ||
      (r = pd_sessions_on_active(sessions, on_active, NULL)) < 0 ||
      (r = pd_shutdown_register(PD_SHUTDOWN_STATE, "artifact catalog", on_shutdown, NULL)) < 0) {
    pd_log(PD_LOG_WARN, "catalog: cannot install: %s", strerror(-r));
    return r;
  }
  pd_log(PD_LOG_INFO, "catalog: generation %" PRIu64 " (schema %d)",
         pd_catalog_generation(g_catalog), PD_CATALOG_SCHEMA);
  return 0;
}
