/* pd_settings.c - the daemon's settings from the environment. See
 * pd_settings.h. */
#include "daemon/pd_settings.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "common/pt_env.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* The integer settings: name, default, range, and where the value goes. */
typedef enum { INT_FIELD, SIZE_FIELD } field_kind;
static const struct {
  const char *name;
  long long dflt, min, max;
  field_kind kind;
  size_t offset;
} ints[] = {
    {"POLYTOKEN_IPC_OUTBUF_MAX", (long long)PD_IPC_OUTBUF_MAX, 1024, 1 << 30, SIZE_FIELD,
     offsetof(pd_settings, ipc_outbuf_max)},
    {"POLYTOKEN_TELEMETRY_INTERVAL_MS", PD_TELEMETRY_INTERVAL_MS_DEFAULT, 10, 24 * 3600 * 1000,
     INT_FIELD, offsetof(pd_settings, telemetry_interval_ms)},
    {"POLYTOKEN_RESPONDER_DELAY_MS", -1, 0, 60000, INT_FIELD,
     offsetof(pd_settings, responder.delay_ms)},
    {"POLYTOKEN_RESPONDER_TIMEOUT_MS", PD_RESP_TIMEOUT_MS_DEFAULT, 1, 24 * 3600 * 1000, INT_FIELD,
     offsetof(pd_settings, responder.timeout_ms)},
};

int pd_settings_load(pd_settings *s) {
  memset(s, 0, sizeof *s);
  for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
    char err[256];
    long long v = pt_env_int(ints[i].name, ints[i].dflt, ints[i].min, ints[i].max, err, sizeof err);
    if (err[0]) pd_warn("%s", err);
    char *field = (char *)s + ints[i].offset;
    if (ints[i].kind == SIZE_FIELD) *(size_t *)field = (size_t)v;
    else *(int *)field = (int)v;
  }
  const char *cmd = getenv("POLYTOKEN_RESPONDER_CMD");
  if (cmd && *cmd) {
    if (!(s->cmd_copy = strdup(cmd))) {
      pd_settings_clear(s);
      return -ENOMEM;
    }
    s->responder.cmd = s->cmd_copy;
  }
  return 0;
}

void pd_settings_clear(pd_settings *s) {
  free(s->cmd_copy);
  memset(s, 0, sizeof *s);
}
