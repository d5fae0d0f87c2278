/*
 * cli_profile.c - the `polytoken profile` command group (see cli_profile.h;
 * units: cli_profile_internal.h): its help and dispatch, `list` and
 * `dump`. `merge` and `view` have files of their own.
 *
 * DESIGN
 *  - list, merge and view read files only (the state root's session
 *    directories): they work in every build and with no daemon running.
 *  - dump is the one that talks to the daemon, and it never starts one: a
 *    dump of a daemon started for it would be an empty window.
 *  - Strict arguments (cli_prof_args): an unknown option or an argument
 *    too many is exit 2 with one line ending in the usage.
 */
#include "tui/cli_profile.h"

#include "tui/cli_profile_internal.h"
#include "tui/tui_cli_common.h"
#include "common/pt_client.h"
#include "common/pt_fmt.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#define CALL_TIMEOUT_MS 60000
#define LIST_USAGE "usage: polytoken profile list [--session ID | --all] [--json]"
#define DUMP_USAGE "usage: polytoken profile dump"

void cli_profile_usage(void) {
  printf("usage: polytoken profile COMMAND [ARGS]\n"
         "\n"
         "CPU profile snapshots of the profiling build (docs/profiling.md). Each snapshot\n"
         "is one interval of one process (daemon or TUI), a gzip'd pprof file in the\n"
         "session's profiling/ directory.\n"
         "\n"
         "commands:\n"
         "  list [--session ID | --all] [--json]\n"
         "                  the snapshots: process, window, samples, CPU, coverage,\n"
         "                  engine, path\n"
         "  dump            ask the running daemon for a snapshot now; prints its path\n"
         "  merge FILE... -o OUT | merge --session ID [--process P] -o OUT\n"
         "                  several windows as one pprof file (read by go tool pprof)\n"
         "  view FILE | --session ID [-o OUT.html] [--base FILE]\n"
         "                  an interactive flame graph page (HTML, no Go needed)\n"
         "\n"
         "`polytoken profile COMMAND --help` says more. list, merge and view read files\n"
         "only and work in every build; dump needs a running profiling daemon and never\n"
         "starts one.\n");
}

/* ---- list ---- */

static void list_help(void) {
  printf("%s\n"
         "  Lists CPU profile snapshots, oldest first: the process that wrote each\n"
         "  (daemon or tui), its window (start in UTC, length), samples, sampled CPU,\n"
         "  the share of the program's CPU the samples hold (COVER, from the snapshot's\n"
         "  own \"process CPU\" comment; - when it has none), the sampling engine, and\n"
         "  its absolute path.\n"
         "  (default)      the active session's snapshots; with no active session,\n"
         "                 those in $POLYTOKEN_HOME/profiling/ (where the daemon writes\n"
         "                 until a session is attached)\n"
         "  --session ID   that session's snapshots\n"
         "  --all          every session's, and $POLYTOKEN_HOME/profiling/'s\n"
         "  --json         {home, lists: [{session, active, dir, snapshots: [{process,\n"
         "                 path, start, time_nanos, duration_nanos, samples, cpu_nanos,\n"
         "                 program_cpu_nanos?, coverage_pct?, engine, error?}]}]}\n"
         "Reads files only: no daemon is needed.\n",
         LIST_USAGE);
}

typedef struct block {
  char *session; /* NULL: the state root's profiling/ */
  int active;
  char *dir;
  int fallback; /* the state root's profiling/ (session NULL) */
} block;

/* "perf_event task-clock per thread" -> "perf_event", and so on. */
static const char *short_engine(const char *e) {
  if (!*e) return "?";
  if (strncmp(e, "perf_event", 10) == 0) return strstr(e, "user mode only") ? "perf_event(user)" : "perf_event";
  if (strstr(e, "timer")) return "timer";
  return e;
}

/* A snapshot of a block, read: its profile, or why it cannot be read. */
typedef struct snap_row {
  const char *path;   /* borrowed from the block's path list */
  pt_pprof *p;        /* NULL: unreadable (err says why) */
  char err[512];
  size_t ord;         /* its place by file name (the time it was written) */
} snap_row;

/* Oldest window first: by window start, then by when it was written (two
 * processes' windows interleave, and a file's name is its end); files
 * that cannot be read last, in name order. */
static int by_start(const void *a, const void *b) {
  const snap_row *x = a, *y = b;
  if (!x->p != !y->p) return x->p ? -1 : 1;
  if (x->p && x->p->time_nanos != y->p->time_nanos) return x->p->time_nanos < y->p->time_nanos ? -1 : 1;
  return x->ord < y->ord ? -1 : x->ord > y->ord;
}

/* One block: a header line and a row per snapshot, or its JSON. */
static int list_block(const block *b, json_t *jlists) {
  char **paths = NULL;
  size_t n = 0;
  if (cli_prof_snapshots(b->dir, CLI_PROF_ALL, &paths, &n) < 0) return -1;
  snap_row *rows = calloc(n ? n : 1, sizeof *rows);
  if (!rows) {
    cli_prof_free_paths(paths, n);
    tui_cli_fail("out of memory");
    return -1;
  }
  for (size_t i = 0; i < n; i++) {
    rows[i].path = paths[i];
    rows[i].ord = i;
    if (cli_prof_load(paths[i], &rows[i].p, rows[i].err, sizeof rows[i].err) < 0) rows[i].p = NULL;
  }
  if (n > 1) qsort(rows, n, sizeof *rows, by_start);
  json_t *jsnaps = jlists ? json_array() : NULL;
  if (!jlists) {
    if (b->session)
      printf("session %s%s: %s\n", b->session, b->active ? " (active)" : "", b->dir);
    else
      printf("%s: %s (where the daemon writes while no session is attached)\n",
             b->active ? "no session is active" : "outside sessions", b->dir);
    if (n == 0) printf("  no snapshots\n");
    else
      printf("%-7s %-23s %10s %8s %10s %5s  %-16s %s\n", "PROCESS", "START (UTC)", "LENGTH",
             "SAMPLES", "CPU", "COVER", "ENGINE", "FILE");
  }
  for (size_t i = 0; i < n; i++) {
    const pt_pprof *p = rows[i].p;
    const char *path = rows[i].path, *proc = cli_prof_process(path);
    if (!p) {
      if (jsnaps)
        json_array_append_new(jsnaps, json_pack("{s:s, s:s, s:s}", "process", proc, "path", path,
                                                "error", rows[i].err));
      else
        printf("%-7s %-23s %10s %8s %10s %5s  %-16s %s (cannot read: %s)\n", proc, "?", "?", "?",
               "?", "?", "?", path, rows[i].err);
      continue;
    }
    char start[64], engine[160];
    int64_t samples = pt_pprof_sample_total(p), cpu = cli_prof_cpu_ns(p), program = 0;
    int pct = 0, has_cov = cli_prof_coverage(p, &program, &pct) == 0;
    cli_prof_engine(p, engine, sizeof engine);
    if (jsnaps) {
      pt_fmt_utc_ms(p->time_nanos, 1, "?", start, sizeof start);
      json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I, s:s}", "process", proc, "path",
                            path, "start", start, "time_nanos", (json_int_t)p->time_nanos,
                            "duration_nanos", (json_int_t)p->duration_nanos, "samples",
                            (json_int_t)samples, "cpu_nanos", (json_int_t)cpu, "engine", engine);
      if (o && has_cov) {
        json_object_set_new(o, "program_cpu_nanos", json_integer((json_int_t)program));
        json_object_set_new(o, "coverage_pct", json_integer(pct));
      }
      json_array_append_new(jsnaps, o);
    } else {
      pt_fmt_utc_ms(p->time_nanos, 0, "?", start, sizeof start);
      char len[32], cpus[32], cov[16];
      snprintf(len, sizeof len, "%.2f s", (double)p->duration_nanos / 1e9);
      snprintf(cpus, sizeof cpus, "%.3f s", (double)cpu / 1e9);
      if (has_cov) snprintf(cov, sizeof cov, "%d %%", pct);
      else snprintf(cov, sizeof cov, "-");
      printf("%-7s %-23s %10s %8" PRId64 " %10s %5s  %-16s %s\n", proc, start, len, samples, cpus,
             cov, short_engine(engine), path);
    }
  }
  if (jlists)
    json_array_append_new(jlists, json_pack("{s:s?, s:b, s:s, s:o}", "session", b->session, "active",
                                            b->active, "dir", b->dir, "snapshots", jsnaps));
  for (size_t i = 0; i < n; i++) pt_pprof_free(rows[i].p);
  free(rows);
  cli_prof_free_paths(paths, n);
  return 0;
}

static int by_name(const void *a, const void *b) {
  const block *x = a, *y = b;
  return strcmp(x->session ? x->session : "", y->session ? y->session : "");
}

static int cmd_list(int argc, char **argv) {
  const char *session = NULL;
  int all = 0, json = 0;
  const cli_prof_opt opts[] = {{"--session", NULL, &session, NULL},
                               {"--all", NULL, NULL, &all},
                               {"--json", NULL, NULL, &json}};
  size_t npos = 0;
  int rc = cli_prof_args(argc, argv, 3, opts, 3, NULL, 0, &npos, "list", LIST_USAGE);
  if (rc == 1) {
    list_help();
    return 0;
  }
  if (rc) return rc;
  if (session && all) return cli_prof_usage_error("list", LIST_USAGE, "--session and --all exclude each other");
  char *home = cli_prof_home();
  if (!home) return 1;
  char active[80] = "";
  int has_active = cli_prof_active_session(home, active, sizeof active) == 0;
  block *bl = NULL;
  size_t nb = 0;
  rc = 1;
  char *fallback = NULL;
  if (asprintf(&fallback, "%s/profiling", home) < 0) fallback = NULL;
  if (!fallback) goto oom;
  if (session) {
    char *dir = cli_prof_session_dir(home, session);
    if (!dir) goto out;
    bl = calloc(1, sizeof *bl);
    if (!bl) { free(dir); goto oom; }
    bl[0] = (block){strdup(session), has_active && strcmp(active, session) == 0, dir, 0};
    nb = 1;
  } else if (all) {
    char sroot[PATH_MAX];
    snprintf(sroot, sizeof sroot, "%s/sessions", home);
    DIR *d = opendir(sroot);
    struct dirent *de;
    size_t cap = 0;
    while (d && (de = readdir(d))) {
      if (de->d_name[0] == '.') continue;
      char *dir = NULL;
      struct stat st;
      if (asprintf(&dir, "%s/%s/profiling", sroot, de->d_name) < 0) { closedir(d); goto oom; }
      dir[strlen(dir) - strlen("/profiling")] = 0;
      int is_dir = stat(dir, &st) == 0 && S_ISDIR(st.st_mode);
      dir[strlen(dir)] = '/';
      if (!is_dir) { free(dir); continue; }
      if (nb == cap) {
        cap = cap ? cap * 2 : 16;
        block *nbl = realloc(bl, cap * sizeof *bl);
        if (!nbl) { free(dir); closedir(d); goto oom; }
        bl = nbl;
      }
      bl[nb++] = (block){strdup(de->d_name), has_active && strcmp(active, de->d_name) == 0, dir, 0};
    }
    if (d) closedir(d);
    if (nb > 1) qsort(bl, nb, sizeof *bl, by_name);
    block *nbl = realloc(bl, (nb + 1) * sizeof *bl);
    if (!nbl) goto oom;
    bl = nbl;
    bl[nb++] = (block){NULL, !has_active, strdup(fallback), 1};
  } else {
    bl = calloc(1, sizeof *bl);
    if (!bl) goto oom;
    if (has_active) {
      char *dir = cli_prof_session_dir(home, active);
      if (!dir) goto out;
      bl[0] = (block){strdup(active), 1, dir, 0};
    } else {
      bl[0] = (block){NULL, 1, strdup(fallback), 1};
    }
    nb = 1;
  }
  for (size_t i = 0; i < nb; i++)
    if (!bl[i].dir || (!bl[i].session && !bl[i].fallback)) goto oom;
  json_t *root = json ? json_pack("{s:s, s:[]}", "home", home, "lists") : NULL;
  if (json && !root) goto oom;
  rc = 0;
  for (size_t i = 0; i < nb && rc == 0; i++) {
    if (!json && i) printf("\n");
    if (list_block(&bl[i], root ? json_object_get(root, "lists") : NULL) < 0) rc = 1;
  }
  if (root && rc == 0) {
    char *s = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (s) printf("%s\n", s);
    else rc = 1;
    free(s);
  }
  json_decref(root);
  goto out;
oom:
  tui_cli_fail("out of memory");
  rc = 1;
out:
  for (size_t i = 0; i < nb; i++) {
    free(bl[i].session);
    free(bl[i].dir);
  }
  free(bl);
  free(fallback);
  free(home);
  return rc;
}

/* ---- dump ---- */

static int cmd_dump(int argc, char **argv) {
  size_t npos = 0;
  int rc = cli_prof_args(argc, argv, 3, NULL, 0, NULL, 0, &npos, "dump", DUMP_USAGE);
  if (rc == 1) {
    printf("%s\n"
           "  Asks the running daemon for a CPU profile snapshot now (the window since its\n"
           "  previous snapshot) and prints the absolute path of the file once written.\n"
           "  Never starts a daemon: with none running it fails (exit 1). The daemon must\n"
           "  be a profiling build (just run-cli, or build/profile/polytoken).\n",
           DUMP_USAGE);
    return 0;
  }
  if (rc) return rc;
  pt_client *c = tui_cli_client_new("polytoken-cli");
  if (!c) return 1;
  pt_client_error err;
  if (pt_client_connect(c, 0, CALL_TIMEOUT_MS, &err) < 0) {
    if (strcmp(err.code, "not_running") == 0)
      tui_cli_fail("no daemon is running (start one with `polytoken daemon start`, from the "
                   "profiling build: just run-cli); nothing was dumped");
    else
      tui_cli_fail("%s", err.message);
    pt_client_del(c);
    return 1;
  }
  json_t *res = NULL;
  rc = 1;
  if (pt_client_call(c, "profile.dump", NULL, CALL_TIMEOUT_MS, &res, &err) < 0) {
    if (strcmp(err.code, "not_profiling") == 0)
      tui_cli_fail("this daemon is not a profiling build: stop it (polytoken daemon stop) and "
                   "start the profiling one (just run-cli, or build/profile/polytoken daemon "
                   "start)");
    else
      tui_cli_fail("profile dump: %s", err.message);
  } else {
    const char *path = json_string_value(json_object_get(res, "path"));
    if (!path || path[0] != '/') {
      tui_cli_fail("the daemon's profile.dump reply has no absolute path");
    } else {
      printf("%s\n", path);
      rc = 0;
    }
  }
  json_decref(res);
  pt_client_del(c);
  return rc;
}

/* ---- the group ---- */

int cli_profile_main(int argc, char **argv) {
  if (argc < 3) {
    cli_profile_usage();
    return 2;
  }
  const char *sub = argv[2];
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
    cli_profile_usage();
    return 0;
  }
  if (strcmp(sub, "list") == 0) return cmd_list(argc, argv);
  if (strcmp(sub, "dump") == 0) return cmd_dump(argc, argv);
  if (strcmp(sub, "merge") == 0) return cli_profile_merge_main(argc, argv);
  if (strcmp(sub, "view") == 0) return cli_profile_view_main(argc, argv);
  tui_cli_fail("profile: unknown command '%s' (expected list, dump, merge or view; see polytoken "
               "profile --help)",
               sub);
  return 2;
}
