/*
 * pd_catalog_ipc.c - the catalog's daemon glue (see pd_catalog_ipc.h).
 * Handlers reply synchronously: a refresh stats a handful of files and hashes
 * only new or changed ones; a fetch reads at most one 512 KiB chunk.
 */
#include "daemon/pd_catalog_ipc.h"

#include "daemon/pd_catalog.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "daemon/pd_shutdown.h"
#include "daemon/pd_store.h"

#include <errno.h>
#include <inttypes.h>
#include <stddef.h>
#include <string.h>

static pd_catalog *g_catalog; /* loop thread only */
static int g_persist_logged;

static void on_method(pd_call *call, json_t *params, void *ctx) {
  pd_catalog *c = ctx;
  json_t *result = NULL;
  const char *code = "internal";
  char msg[512];
  if (!c) {
    pd_call_error(call, "shutting_down", "the artifact catalog is closed");
    return;
  }
  int r = pd_catalog_call(c, pd_call_method(call), params, &result, &code, msg, sizeof msg);
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
  if (r < 0) {
    pd_call_error(call, code, "%s", msg);
    return;
  }
  pd_call_reply(call, result);
}

static void on_active(const char *session_dir, void *ctx) {
  (void)ctx;
  if (g_catalog && pd_catalog_set_session(g_catalog, session_dir) < 0)
    pd_log(PD_LOG_WARN, "catalog: out of memory setting the active session");
}

static void on_shutdown(void *ctx) {
  (void)ctx;
  pd_catalog_del(g_catalog);
  g_catalog = NULL;
  /* Late requests (none should come: clients are closed before the "state"
   * slot) get `shutting_down` instead of touching freed memory. */
  pd_ipc_register_method("artifacts.list", on_method, NULL);
  pd_ipc_register_method("artifacts.fetch", on_method, NULL);
}

int pd_catalog_install(const char *home) {
  if (g_catalog) return -EALREADY;
  int r = pd_catalog_new(&g_catalog, home);
  if (r < 0) return r;
  if ((r = pd_ipc_register_method("artifacts.list", on_method, g_catalog)) < 0 ||
      (r = pd_ipc_register_method("artifacts.fetch", on_method, g_catalog)) < 0 ||
      (r = pd_on_active_session(on_active, NULL)) < 0 ||
      (r = pd_shutdown_register(PD_SHUTDOWN_STATE, "artifact catalog", on_shutdown, NULL)) < 0) {
    pd_log(PD_LOG_WARN, "catalog: cannot install: %s", strerror(-r));
    return r;
  }
  pd_log(PD_LOG_INFO, "catalog: generation %" PRIu64 " (schema %d)",
         pd_catalog_generation(g_catalog), PD_CATALOG_SCHEMA);
  return 0;
}
