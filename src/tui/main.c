/*
 * main.c - entry point of `polytoken`: the TUI (no arguments, or `attach ID`)
 * or a scriptable subcommand (tui_cli.c).
 *
 * The profiling build plugs in here and only here (inside #if PT_PROFILING):
 * tui_profiling_init before the loop runs, the "conversation screen reached"
 * hook and the after-teardown "final profile" slot (see docs/tui.md).
 */
#include "pt_config.h"
#include "common/pt_client.h"
#include "tui/tui_app.h"
#include "tui/tui_cli.h"

#if PT_PROFILING
#include "tui/tui_profiling.h"
#endif

#include <locale.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#if PT_PROFILING
static void on_reached(const char *session_id, const char *session_dir, void *ud) {
  (void)ud;
  tui_profiling_conversation_reached(session_id, session_dir);
}

static void after_teardown(void *ud) {
  (void)ud;
  tui_profiling_after_teardown();
}
#endif

/* Runs the TUI; attach_id NULL opens the picker. Returns the exit code. */
static int run_tui(const char *attach_id) {
  if (!isatty(STDIN_FILENO) || !isatty(STDOUT_FILENO)) {
    tui_cli_fail("the TUI needs a terminal (stdin and stdout must be a tty); see polytoken --help "
                 "for the scriptable commands");
    return 1;
  }
  /* Connect (starting the daemon if needed) before curses takes the
   * terminal, so a failure is one plain line on stderr. */
  pt_client *c = tui_cli_client_new("polytoken-tui");
  if (!c) return 1;
  pt_client_error err;
  if (pt_client_connect(c, 1, 15000, &err) < 0) {
    tui_cli_fail("%s", err.message);
    pt_client_del(c);
    return 1;
  }
#if PT_PROFILING
  tui_profiling_daemon_status(c); /* its console's state, before the app owns c */
#endif
  json_t *attached = NULL;
  if (attach_id) {
    if (pt_client_call(c, "sessions.attach", json_pack("{s:s}", "id", attach_id), 15000, &attached,
                       &err) < 0) {
      tui_cli_fail("attach %s: %s", attach_id, err.message);
      pt_client_del(c);
      return 1;
    }
  }
  tui_app *app = tui_app_new(c); /* owns c from here */
  if (!app) {
    json_decref(attached);
    tui_cli_fail("out of memory");
    return 1;
  }
  if (attached) {
    int rc = tui_app_start_attached(app, attached);
    json_decref(attached);
    if (rc < 0) {
      tui_cli_fail("attach %s: the daemon's reply has no session", attach_id);
      tui_app_del(app);
      return 1;
    }
  }
#if PT_PROFILING
  tui_app_set_hooks(app, on_reached, after_teardown, NULL);
  tui_app_set_self_dump(app, tui_profiling_dump_now, NULL);
  tui_profiling_init(tui_app_loop(app));
  {
    char notice[1024], short_notice[64];
    if (tui_profiling_notice(notice, sizeof notice, short_notice, sizeof short_notice))
      tui_app_set_notice(app, notice, short_notice);
  }
#endif
  char errbuf[256];
  int rc = tui_app_run(app, errbuf, sizeof errbuf);
  tui_app_del(app);
  if (rc < 0) {
    tui_cli_fail("%s", errbuf);
    return 1;
  }
  return rc;
}

int main(int argc, char **argv) {
  setlocale(LC_ALL, "");
  signal(SIGPIPE, SIG_IGN);
  if (argc == 1) return run_tui(NULL);
  if (strcmp(argv[1], "attach") == 0) {
    if (argc == 3 && (strcmp(argv[2], "--help") == 0 || strcmp(argv[2], "-h") == 0)) {
      printf("usage: polytoken attach ID\n"
             "  Opens the conversation screen of session ID (see polytoken sessions).\n");
      return 0;
    }
    if (argc != 3) {
      tui_cli_fail("usage: polytoken attach ID");
      return 2;
    }
    return run_tui(argv[2]);
  }
  return tui_cli_main(argc, argv);
}
