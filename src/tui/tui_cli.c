/* tui_cli.c - scriptable subcommands (see tui_cli.h). */
#include "tui/tui_cli.h"
#include "tui/cli_feedback.h"
#include "tui/cli_profile.h"
#include "tui/tui_cli_common.h"
#include "tui/tui_text.h"
#include "common/pt_client.h"
#include "common/pt_home.h"
#include "common/pt_version.h"
#include "pt_config.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define CALL_TIMEOUT_MS 15000
#define STOP_WAIT_MS 30000

void tui_cli_usage(void) {
  printf("usage: polytoken [COMMAND] [ARGS]\n"
         "\n"
         "Without a command, opens the terminal UI (session picker).\n"
         "\n"
         "commands:\n"
         "  attach ID                    open a session's conversation screen\n"
         "  daemon start|stop|status     control the daemon polytokend\n"
         "  sessions [--json]            list sessions\n"
         "  new [--name NAME]            create a session, print its id\n"
         "  send --session ID TEXT...    send a message, print the streamed reply\n"
         "  profile list|dump|merge|view  CPU profile snapshots: list, dump now, merge,\n"
         "                               flame graph page (see polytoken profile --help)\n"
         "  artifacts [--json]           list the daemon's diagnostic artifacts\n"
         "  feedback send|show ...       send feedback with attachments, or review one\n"
         "  --version                    print the version\n"
         "  --help                       this help; COMMAND --help for a command's help\n"
         "\n"
         "State root: $POLYTOKEN_HOME\n"
         "(default ${XDG_STATE_HOME:-~/.local/state}/polytoken).\n"
         "The daemon is started on demand (except by `daemon stop`, `daemon status` and\n"
         "`profile`, whose commands read files or need a running daemon).\n");
}

static int is_help(const char *a) { return strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0; }

/* Connects (autostart as given). Prints the failure line itself. */
static pt_client *connect_or_fail(int autostart, int *not_running) {
  pt_client *c = tui_cli_client_new("polytoken-cli");
  if (!c) return NULL;
  pt_client_error err;
  int rc = pt_client_connect(c, autostart, CALL_TIMEOUT_MS, &err);
  if (rc < 0) {
    if (not_running && strcmp(err.code, "not_running") == 0) *not_running = 1;
    else tui_cli_fail("%s", err.message);
    pt_client_del(c);
    return NULL;
  }
  return c;
}

/* Calls a method; prints the failure line itself. Returns the result or NULL. */
static json_t *call_or_fail(pt_client *c, const char *method, json_t *params) {
  json_t *res = NULL;
  pt_client_error err;
  if (pt_client_call(c, method, params, CALL_TIMEOUT_MS, &res, &err) < 0) {
    tui_cli_fail("%s", err.message);
    return NULL;
  }
  return res;
}

static void print_json(json_t *j) {
  char *s = json_dumps(j, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
  if (s) {
    printf("%s\n", s);
    free(s);
  }
}

/* ---- daemon ---- */

/* The profiling daemon's part of daemon.status ("profile", docs/ipc.md):
 * where snapshots go, the engine and rate, the console's address, or why
 * the console is off and which setting would let it listen. */
static void print_profile_status(json_t *prof) {
  if (!json_is_object(prof)) return;
  const char *dir = json_string_value(json_object_get(prof, "dir"));
  long long hz = json_integer_value(json_object_get(prof, "hz"));
  long long ivl = json_integer_value(json_object_get(prof, "interval_ms"));
  printf("profiling directory: %s\n", dir ? dir : "?");
  printf("sampler: %s engine, %lld Hz, a snapshot every %.3g s with samples, keeping %lld%s\n",
         json_string_value(json_object_get(prof, "engine")) ?: "?", hz, (double)ivl / 1000.0,
         json_integer_value(json_object_get(prof, "keep")),
         json_is_false(json_object_get(prof, "running")) ? " (stopped)" : "");
  json_t *con = json_object_get(prof, "console");
  const char *bind = json_string_value(json_object_get(con, "bind"));
  const char *setting = json_string_value(json_object_get(con, "setting"));
  if (json_is_true(json_object_get(con, "listening")))
    printf("console: %s (tokio-console http://%s)\n",
           json_string_value(json_object_get(con, "address")) ?: "?",
           json_string_value(json_object_get(con, "address")) ?: "?");
  else if (con)
    printf("console: not listening on %s: %s (%s)\n", bind ? bind : "?",
           json_string_value(json_object_get(con, "error")) ?: "?",
           json_string_value(json_object_get(con, "hint")) ?: setting ?: "");
}

static void daemon_usage(void) {
  printf("usage: polytoken daemon start|stop|status [--json]\n"
         "  start    start polytokend if it is not running\n"
         "  stop     ask polytokend to shut down and wait until it has\n"
         "  status   show pid, version, uptime, sessions (and, for a profiling\n"
         "           daemon, its profiling directory, engine, rate and console);\n"
         "           exit 3 and print \"not running\" when it is not running\n"
         "  A profiling daemon's start and status also say whether its task console\n"
         "  listens, and if not, why.\n");
}

/* After daemon.stop: waits until the daemon is gone for good, i.e. it closed
 * our connection, its socket refuses, and its process has ended (it holds
 * the daemon lock until then, so a `daemon start` right after would
 * otherwise meet "already running"). Bounded by STOP_WAIT_MS in all.
 * pid comes from the hello reply, read BEFORE daemon.stop: the daemon may
 * close the connection right after its reply, which drops the client's copy
 * of the hello result. */
static int wait_gone(pt_client *c, pid_t pid) {
  json_t *ev = NULL;
  pt_client_error err;
  while (pt_client_next_event(c, STOP_WAIT_MS, &ev, &err) == 0) json_decref(ev);
  if (strcmp(err.code, "timeout") == 0) return -ETIMEDOUT;
  pt_client *probe = pt_client_new(pt_client_home_dir(c), "polytoken-cli");
  if (!probe) return -ENOMEM;
  int refused = 0;
  for (int i = 0; i < STOP_WAIT_MS / 20; i++) {
    if (!refused) {
      refused = pt_client_connect(probe, 0, 1000, &err) < 0 && strcmp(err.code, "not_running") == 0;
      pt_client_close(probe);
    }
    if (refused && (pid <= 0 || pt_client_pid_gone(pid))) {
      pt_client_del(probe);
      return 0;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  pt_client_del(probe);
  return -ETIMEDOUT;
}

static int cmd_daemon(int argc, char **argv) {
  if (argc < 3 || is_help(argv[2])) {
    daemon_usage();
    return argc < 3 ? 2 : 0;
  }
  const char *sub = argv[2];
  int json = 0;
  for (int i = 3; i < argc; i++) {
    if (is_help(argv[i])) { daemon_usage(); return 0; }
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else { tui_cli_fail("daemon %s: unexpected argument '%s'", sub, argv[i]); return 2; }
  }
  if (strcmp(sub, "start") == 0) {
    int not_running = 0;
    pt_client *c = connect_or_fail(0, &not_running);
    int started = 0;
    if (!c && !not_running) return 1;
    if (!c) {
      c = connect_or_fail(1, NULL);
      if (!c) return 1;
      started = 1;
    }
    long long pid = json_integer_value(json_object_get(pt_client_hello_result(c), "pid"));
    printf(started ? "polytokend started (pid %lld)\n" : "polytokend already running (pid %lld)\n", pid);
    /* A profiling daemon: where it writes and whether its console listens
     * (a port in use is otherwise only in its log). */
    json_t *st = NULL;
    pt_client_error err;
    if (pt_client_call(c, "daemon.status", NULL, CALL_TIMEOUT_MS, &st, &err) == 0)
      print_profile_status(json_object_get(st, "profile"));
    json_decref(st);
    pt_client_del(c);
    return 0;
  }
  if (strcmp(sub, "stop") == 0 || strcmp(sub, "status") == 0) {
    int stop = sub[1] == 't' && sub[2] == 'o';
    int not_running = 0;
    pt_client *c = connect_or_fail(0, &not_running);
    if (!c && not_running) {
      if (json && !stop) printf("{\"running\": false}\n");
      else printf("not running\n");
      return stop ? 0 : 3;
    }
    if (!c) return 1;
    if (stop) {
      pid_t pid = (pid_t)json_integer_value(json_object_get(pt_client_hello_result(c), "pid"));
      json_t *res = call_or_fail(c, "daemon.stop", NULL);
      if (!res) { pt_client_del(c); return 1; }
      json_decref(res);
      int rc = wait_gone(c, pid);
      pt_client_del(c);
      if (rc < 0) {
        tui_cli_fail("the daemon did not stop within %d s", STOP_WAIT_MS / 1000);
        return 1;
      }
      printf("stopped\n");
      return 0;
    }
    json_t *st = call_or_fail(c, "daemon.status", NULL);
    pt_client_del(c);
    if (!st) return 1;
    if (json) {
      json_object_set_new(st, "running", json_true());
      print_json(st);
    } else {
      json_t *active = json_object_get(st, "active_session");
      printf("running (pid %lld)\n", json_integer_value(json_object_get(st, "pid")));
      printf("version: %s\n", json_string_value(json_object_get(st, "version")) ?: "?");
      printf("profiling: %s\n", json_is_true(json_object_get(st, "profiling")) ? "yes" : "no");
      print_profile_status(json_object_get(st, "profile"));
      printf("uptime: %.1f s\n", (double)json_integer_value(json_object_get(st, "uptime_ms")) / 1000.0);
      printf("sessions: %lld\n", json_integer_value(json_object_get(st, "sessions")));
      printf("active session: %s\n", json_is_string(active) ? json_string_value(active) : "none");
      printf("clients: %lld\n", json_integer_value(json_object_get(st, "clients")));
    }
    json_decref(st);
    return 0;
  }
  tui_cli_fail("daemon: unknown action '%s' (expected start, stop or status)", sub);
  return 2;
}

/* ---- sessions / new ---- */

static int cmd_sessions(int argc, char **argv) {
  int json = 0;
  for (int i = 2; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: polytoken sessions [--json]\n"
             "  Lists sessions, most recently active first. --json prints the daemon's\n"
             "  reply {\"sessions\":[...],\"skipped\":[...]} as JSON.\n");
      return 0;
    }
    if (strcmp(argv[i], "--json") == 0) json = 1;
    else { tui_cli_fail("sessions: unexpected argument '%s'", argv[i]); return 2; }
  }
  pt_client *c = connect_or_fail(1, NULL);
  if (!c) return 1;
  json_t *res = call_or_fail(c, "sessions.list", NULL);
  pt_client_del(c);
  if (!res) return 1;
  if (json) {
    print_json(res);
  } else {
    json_t *list = json_object_get(res, "sessions");
    size_t i;
    json_t *s;
    time_t now = time(NULL);
    if (json_array_size(list) == 0) printf("no sessions\n");
    else printf("%-12s  %-16s  %5s  %s\n", "ID", "LAST ACTIVITY", "TURNS", "NAME");
    json_array_foreach(list, i, s) {
      const char *last = json_string_value(json_object_get(s, "last_activity"));
      char when[32] = "?";
      time_t t;
      if (last && tui_parse_rfc3339(last, &t) == 0) tui_reltime(t, now, when, sizeof when);
      printf("%-12s  %-16s  %5lld  %s\n", json_string_value(json_object_get(s, "id")) ?: "?", when,
             json_integer_value(json_object_get(s, "turns")),
             json_string_value(json_object_get(s, "name")) ?: "?");
    }
    json_array_foreach(json_object_get(res, "skipped"), i, s) {
      fprintf(stderr, "skipped damaged session %s: %s\n",
              json_string_value(json_object_get(s, "id")) ?: "?",
              json_string_value(json_object_get(s, "error")) ?: "?");
    }
  }
  json_decref(res);
  return 0;
}

static int cmd_new(int argc, char **argv) {
  const char *name = NULL;
  for (int i = 2; i < argc; i++) {
    if (is_help(argv[i])) {
      printf("usage: polytoken new [--name NAME]\n  Creates a session and prints its id.\n");
      return 0;
    }
    if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) name = argv[++i];
    else if (strncmp(argv[i], "--name=", 7) == 0) name = argv[i] + 7;
    else { tui_cli_fail("new: unexpected argument '%s'", argv[i]); return 2; }
  }
  /* JSON carries UTF-8 only: say so instead of silently using the
   * default name (json_string would return NULL). */
  json_t *jname = name ? json_string(name) : NULL;
  if (name && !jname) {
    tui_cli_fail("new: the name is not valid UTF-8");
    return 2;
  }
  json_t *p = json_object();
  if (jname) json_object_set_new(p, "name", jname);
  pt_client *c = connect_or_fail(1, NULL);
  if (!c) {
    json_decref(p);
    return 1;
  }
  json_t *res = call_or_fail(c, "sessions.create", p);
  pt_client_del(c);
  if (!res) return 1;
  const char *id = json_string_value(json_object_get(json_object_get(res, "session"), "id"));
  if (!id) {
    tui_cli_fail("the daemon's reply has no session id");
    json_decref(res);
    return 1;
  }
  printf("%s\n", id);
  json_decref(res);
  return 0;
}

/* ---- send ---- */

static volatile sig_atomic_t send_interrupted;
static void on_sigint(int sig) { (void)sig; send_interrupted = 1; }

static int cmd_send(int argc, char **argv) {
  const char *session = NULL;
  char *text = NULL;
  size_t tlen = 0;
  FILE *tf = open_memstream(&text, &tlen);
  if (!tf) { tui_cli_fail("out of memory"); return 1; }
  int words = 0;
  for (int i = 2; i < argc; i++) {
    if (is_help(argv[i])) {
      fclose(tf);
      free(text);
      printf("usage: polytoken send --session ID TEXT...\n"
             "  Sends TEXT (the remaining arguments joined by spaces) to the session and\n"
             "  prints the reply as it streams in. Exits non-zero if the turn fails or is\n"
             "  cancelled (Ctrl-C cancels the turn).\n");
      return 0;
    }
    if (strcmp(argv[i], "--session") == 0 && i + 1 < argc) session = argv[++i];
    else if (strncmp(argv[i], "--session=", 10) == 0) session = argv[i] + 10;
    else if (strcmp(argv[i], "--") == 0) {
      for (i++; i < argc; i++) fprintf(tf, "%s%s", words++ ? " " : "", argv[i]);
    } else fprintf(tf, "%s%s", words++ ? " " : "", argv[i]);
  }
  fclose(tf);
  if (!session) { tui_cli_fail("send: --session ID is required"); free(text); return 2; }
  if (!words || !*text) { tui_cli_fail("send: no text given"); free(text); return 2; }
  /* NULL when the session or the text is not valid UTF-8 (JSON carries
   * UTF-8 only); sending no params would get a misleading reply. */
  json_t *params = json_pack("{s:s, s:s}", "session", session, "text", text);
  free(text);
  if (!params) { tui_cli_fail("send: the session id and the text must be valid UTF-8"); return 2; }
  pt_client *c = connect_or_fail(1, NULL);
  if (!c) { json_decref(params); return 1; }
  json_t *res = call_or_fail(c, "turn.send", params);
  if (!res) { pt_client_del(c); return 1; }
  char turn_id[128];
  pt_client_id_str(json_object_get(res, "turn_id"), turn_id, sizeof turn_id);
  json_decref(res);

  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, &old);
  int rc = 1, cancel_sent = 0, last_nl = 1;
  for (;;) {
    if (send_interrupted && !cancel_sent) {
      cancel_sent = 1;
      json_t *r = NULL;
      pt_client_error e;
      pt_client_call(c, "turn.cancel", json_pack("{s:s}", "session", session), CALL_TIMEOUT_MS, &r, &e);
      json_decref(r);
    }
    json_t *ev = NULL;
    pt_client_error err;
    int r = pt_client_next_event(c, 200, &ev, &err);
    if (r == -ETIMEDOUT) continue;
    if (r < 0) {
      if (!last_nl) putchar('\n');
      tui_cli_fail("lost the connection to the daemon before the reply finished");
      break;
    }
    const char *name = json_string_value(json_object_get(ev, "event"));
    json_t *p = json_object_get(ev, "params");
    char tidbuf[128];
    const char *tid = pt_client_id_str(json_object_get(p, "turn_id"), tidbuf, sizeof tidbuf) == 0
                        ? tidbuf : NULL;
    const char *sid = json_string_value(json_object_get(p, "session"));
    int mine = name && tid && sid && strcmp(sid, session) == 0 && (!*turn_id || strcmp(tid, turn_id) == 0);
    if (mine && strcmp(name, "turn.delta") == 0) {
      const char *t = json_string_value(json_object_get(p, "text"));
      if (t && *t) {
        fputs(t, stdout);
        fflush(stdout);
        last_nl = t[strlen(t) - 1] == '\n';
      }
    } else if (mine && strcmp(name, "turn.done") == 0) {
      const char *status = json_string_value(json_object_get(p, "status"));
      const char *error = json_string_value(json_object_get(p, "error"));
      if (!last_nl) putchar('\n');
      fflush(stdout);
      if (status && strcmp(status, "ok") == 0) rc = 0;
      else if (status && strcmp(status, "cancelled") == 0) { tui_cli_fail("the turn was cancelled"); rc = 130; }
      else tui_cli_fail("the turn failed: %s", error ? error : "unknown error");
      json_decref(ev);
      break;
    }
    json_decref(ev);
  }
  sigaction(SIGINT, &old, NULL);
  pt_client_del(c);
  return rc;
}

int tui_cli_main(int argc, char **argv) {
  if (argc < 2) { tui_cli_usage(); return 2; }
  const char *cmd = argv[1];
  if (is_help(cmd) || strcmp(cmd, "help") == 0) { tui_cli_usage(); return 0; }
  if (strcmp(cmd, "--version") == 0 || strcmp(cmd, "-V") == 0) {
    printf("polytoken %s%s\n", pt_version(), pt_is_profiling_build() ? " (profiling build)" : "");
    return 0;
  }
  if (strcmp(cmd, "daemon") == 0) return cmd_daemon(argc, argv);
  if (strcmp(cmd, "sessions") == 0) return cmd_sessions(argc, argv);
  if (strcmp(cmd, "new") == 0) return cmd_new(argc, argv);
  if (strcmp(cmd, "send") == 0) return cmd_send(argc, argv);
  if (strcmp(cmd, "profile") == 0) return cli_profile_main(argc, argv);
  if (strcmp(cmd, "artifacts") == 0) return cli_artifacts_main(argc, argv);
  if (strcmp(cmd, "feedback") == 0) return cli_feedback_main(argc, argv);
  if (cmd[0] == '-') tui_cli_fail("unknown option '%s' (try polytoken --help)", cmd);
  else tui_cli_fail("unknown command '%s' (try polytoken --help)", cmd);
  return 2;
}
