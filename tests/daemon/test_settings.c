/* Unit tests for the daemon's settings (src/daemon/pd_settings.c): every
 * knob read from the environment once, strictly (common/pt_env.h), with
 * its default when unset, empty or rejected, and one log warning per
 * rejected value. Each test runs in its own forked child, so the
 * environment changes stay local to it. */
#include "pt_test.h"
#include "daemon/pd_ipc.h"
#include "daemon/pd_log.h"
#include "daemon/pd_settings.h"

static const char *knobs[] = {"POLYTOKEN_IPC_OUTBUF_MAX", "POLYTOKEN_TELEMETRY_INTERVAL_MS",
                              "POLYTOKEN_RESPONDER_DELAY_MS", "POLYTOKEN_RESPONDER_TIMEOUT_MS",
                              "POLYTOKEN_RESPONDER_CMD"};

PT_TEST(daemon_settings_defaults) {
  for (size_t i = 0; i < sizeof knobs / sizeof knobs[0]; i++) unsetenv(knobs[i]);
  setenv("POLYTOKEN_RESPONDER_CMD", "", 1); /* empty = unset */
  pd_settings s;
  PT_ASSERT_INT_EQ(pd_settings_load(&s), 0);
  PT_ASSERT_UINT_EQ(s.ipc_outbuf_max, PD_IPC_OUTBUF_MAX);
  PT_ASSERT_INT_EQ(s.telemetry_interval_ms, PD_TELEMETRY_INTERVAL_MS_DEFAULT);
  PT_ASSERT_INT_EQ(s.responder.delay_ms, -1);
  PT_ASSERT_INT_EQ(s.responder.timeout_ms, PD_RESP_TIMEOUT_MS_DEFAULT);
  PT_ASSERT(s.responder.cmd == NULL);
  PT_ASSERT(pd_responder_pick(&s.responder) == &pd_resp_builtin);
  pd_settings_clear(&s);
}

PT_TEST(daemon_settings_from_environment) {
  setenv("POLYTOKEN_IPC_OUTBUF_MAX", "65536", 1);
  setenv("POLYTOKEN_TELEMETRY_INTERVAL_MS", "10", 1);  /* the minimum */
  setenv("POLYTOKEN_RESPONDER_DELAY_MS", "0", 1);
  setenv("POLYTOKEN_RESPONDER_TIMEOUT_MS", "86400000", 1); /* the maximum */
  setenv("POLYTOKEN_RESPONDER_CMD", "cat", 1);
  pd_settings s;
  PT_ASSERT_INT_EQ(pd_settings_load(&s), 0);
  PT_ASSERT_UINT_EQ(s.ipc_outbuf_max, 65536);
  PT_ASSERT_INT_EQ(s.telemetry_interval_ms, 10);
  PT_ASSERT_INT_EQ(s.responder.delay_ms, 0);
  PT_ASSERT_INT_EQ(s.responder.timeout_ms, 86400000);
  PT_ASSERT_STR_EQ(s.responder.cmd, "cat");
  PT_ASSERT(pd_responder_pick(&s.responder) == &pd_resp_exec);
  /* a copy: later changes of the environment do not reach it */
  setenv("POLYTOKEN_RESPONDER_CMD", "something else", 1);
  PT_ASSERT_STR_EQ(s.responder.cmd, "cat");
  pd_settings_clear(&s);
  PT_ASSERT(s.responder.cmd == NULL);
}

/* Junk, out of range, trailing garbage: the default, and one warning each
 * in the daemon log naming the variable and the accepted range. */
PT_TEST(daemon_settings_rejected_values_logged) {
  char *dir = pt_tmpdir("settings");
  size_t n = strlen(dir) + 16;
  char *log = malloc(n);
  snprintf(log, n, "%s/daemon.log", dir);
  PT_ASSERT_INT_EQ(pd_log_open(log), 0);
  setenv("POLYTOKEN_IPC_OUTBUF_MAX", "1023", 1);          /* below 1024 */
  setenv("POLYTOKEN_TELEMETRY_INTERVAL_MS", "10abc", 1);
  setenv("POLYTOKEN_RESPONDER_DELAY_MS", "-1", 1);        /* -1 is the default, not a value */
  setenv("POLYTOKEN_RESPONDER_TIMEOUT_MS", " 300", 1);
  unsetenv("POLYTOKEN_RESPONDER_CMD");
  pd_settings s;
  PT_ASSERT_INT_EQ(pd_settings_load(&s), 0);
  PT_ASSERT_UINT_EQ(s.ipc_outbuf_max, PD_IPC_OUTBUF_MAX);
  PT_ASSERT_INT_EQ(s.telemetry_interval_ms, PD_TELEMETRY_INTERVAL_MS_DEFAULT);
  PT_ASSERT_INT_EQ(s.responder.delay_ms, -1);
  PT_ASSERT_INT_EQ(s.responder.timeout_ms, PD_RESP_TIMEOUT_MS_DEFAULT);
  pd_settings_clear(&s);
  pd_log_close();
  size_t len;
  char *text = pt_read_file(log, &len);
  PT_ASSERT(text != NULL);
  static const char *want[] = {
      "WARN ignoring POLYTOKEN_IPC_OUTBUF_MAX=1023 (expected an integer from 1024 to 1073741824)",
      "WARN ignoring POLYTOKEN_TELEMETRY_INTERVAL_MS=10abc (expected an integer from 10 to 86400000)",
      "WARN ignoring POLYTOKEN_RESPONDER_DELAY_MS=-1 (expected an integer from 0 to 60000)",
      "WARN ignoring POLYTOKEN_RESPONDER_TIMEOUT_MS= 300 (expected an integer from 1 to 86400000)"};
  for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
    PT_ASSERT_MSG(strstr(text, want[i]) != NULL, "missing \"%s\" in:\n%s", want[i], text);
  free(text);
  free(log);
  pt_rm_rf(dir);
}
