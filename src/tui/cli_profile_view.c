/*
 * cli_profile_view.c - `polytoken profile view` (units:
 * cli_profile_internal.h): a profile, or a session's snapshots merged, as
 * one self-contained interactive flame graph page (HTML).
 *
 * The page is common/pt_flame.h's (pt_flame_html: the HTML, its data and
 * script); this file takes the arguments, reads the profile (or merges the
 * session's snapshots in memory with common/pt_pprof_merge.h, as `profile
 * merge` does), reads the --base profile, and writes the page atomically.
 *
 * Default output: next to the input, with .html for .pb.gz
 * (daemon-profile-X.pb.gz -> daemon-profile-X.html), so the page stays as
 * private as the profile (the profiling/ directories are 0700); for
 * --session, <session>/profiling/session-<process>.html. The path written
 * is printed, absolute.
 */
#include "tui/cli_profile_internal.h"

#include "tui/tui_cli_common.h"
#include "common/pt_flame.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* On one line in error messages (VIEW_USAGE), over two in the help. */
#define VIEW_WHAT "polytoken profile view FILE | --session ID [--process P]"
#define VIEW_OPTS "[-o OUT.html] [--base FILE] [--sample-type T]"
#define VIEW_USAGE "usage: " VIEW_WHAT " " VIEW_OPTS

static void view_help(void) {
  printf("usage: " VIEW_WHAT "\n"
         "                              " VIEW_OPTS "\n"
         "  Writes a self-contained interactive flame graph of a profile: one HTML file\n"
         "  with no network access and no Go needed. Open it in any browser. Zoom with a\n"
         "  click, search by name, filter by label (thread_name, task_kind, session),\n"
         "  switch the sample type; with --base, frames are colored by how much they\n"
         "  grew (red) or shrank (blue) against the base.\n"
         "  FILE              a snapshot (or any pprof file)\n"
         "  --session ID      the session's kept snapshots, merged in memory\n"
         "                    (as `polytoken profile merge --session ID` does)\n"
         "  --process P       with --session: daemon (default), tui or all\n"
         "  -o, --out FILE    where to write the page (replaced atomically; mode 0600);\n"
         "                    default: next to FILE with .html, or for --session\n"
         "                    <session>/profiling/session-<process>.html\n"
         "  --base FILE       compare with this profile (differential mode)\n"
         "  --sample-type T   the sample type shown first (e.g. samples, cpu)\n"
         "Prints the absolute path written. Reads files only: no daemon is needed.\n");
}

/* FILE's default page: FILE without .pb.gz / .pb / .gz, plus .html. */
static char *default_out(const char *file) {
  size_t n = strlen(file);
  static const char *const ext[] = {".pb.gz", ".pprof.gz", ".pb", ".gz", ".pprof"};
  for (size_t i = 0; i < sizeof ext / sizeof ext[0]; i++) {
    size_t e = strlen(ext[i]);
    if (n > e && strcmp(file + n - e, ext[i]) == 0 && file[n - e - 1] != '/') {
      n -= e;
      break;
    }
  }
  char *o = NULL;
  return asprintf(&o, "%.*s.html", (int)n, file) < 0 ? NULL : o;
}

int cli_profile_view_main(int argc, char **argv) {
  const char *out = NULL, *session = NULL, *process = NULL, *base = NULL, *stype = NULL;
  const cli_prof_opt opts[] = {{"--out", "-o", &out, NULL},
                               {"--session", NULL, &session, NULL},
                               {"--process", NULL, &process, NULL},
                               {"--base", NULL, &base, NULL},
                               {"--sample-type", NULL, &stype, NULL}};
  const char *file = NULL;
  size_t npos = 0;
  int rc = cli_prof_args(argc, argv, 3, opts, 5, &file, 1, &npos, "view", VIEW_USAGE);
  if (rc == 1) {
    view_help();
    return 0;
  }
  if (rc) return rc;
  cli_prof_which which = CLI_PROF_DAEMON;
  if (session && file)
    return cli_prof_usage_error("view", VIEW_USAGE, "give FILE or --session ID, not both");
  if (!session && !file) return cli_prof_usage_error("view", VIEW_USAGE, "no profile to view");
  if (process && !session)
    return cli_prof_usage_error("view", VIEW_USAGE, "--process goes with --session");
  if (process && cli_prof_parse_which(process, &which) < 0)
    return cli_prof_usage_error("view", VIEW_USAGE, "--process '%s': expected daemon, tui or all",
                                process);
  rc = 1;
  char *home = NULL, *dir = NULL, *def = NULL, **paths = NULL;
  size_t n = 0;
  pt_pprof *single = NULL, *basep = NULL;
  pt_pprof_merge *m = NULL;
  const pt_pprof *prof = NULL;
  char *html = NULL, title[512], err[512] = "";
  size_t hlen = 0;
  if (session) {
    if (!(home = cli_prof_home()) || !(dir = cli_prof_session_dir(home, session)) ||
        cli_prof_snapshots(dir, which, &paths, &n) < 0)
      goto out;
    if (n == 0) {
      tui_cli_fail("no %s snapshot in %s", process ? process : "daemon", dir);
      goto out;
    }
    if (cli_prof_merge_files(paths, n, &m) < 0) goto out;
    if (pt_pprof_merge_result(m, &prof, err, sizeof err) < 0) {
      tui_cli_fail("cannot merge the snapshots of %s: %s", dir, err);
      goto out;
    }
    snprintf(title, sizeof title, "session %s, %s: %zu snapshot%s merged", session,
             process ? process : "daemon", n, n == 1 ? "" : "s");
    if (!out && asprintf(&def, "%s/session-%s.html", dir, process ? process : "daemon") < 0)
      def = NULL;
  } else {
    if (cli_prof_load(file, &single, err, sizeof err) < 0) {
      tui_cli_fail("cannot read %s: %s", file, err);
      goto out;
    }
    prof = single;
    const char *b = strrchr(file, '/');
    snprintf(title, sizeof title, "%s", b ? b + 1 : file);
    if (!out) def = default_out(file);
  }
  if (!out && !def) {
    tui_cli_fail("out of memory");
    goto out;
  }
  if (base && cli_prof_load(base, &basep, err, sizeof err) < 0) {
    tui_cli_fail("cannot read the base %s: %s", base, err);
    goto out;
  }
  pt_flame_opts o;
  pt_flame_opts_init(&o);
  o.title = title;
  o.sample_type = stype;
  o.base = basep;
  if (base) {
    const char *b = strrchr(base, '/');
    o.base_title = b ? b + 1 : base;
  }
  int r = pt_flame_html(prof, &o, &html, &hlen, err, sizeof err);
  if (r < 0) {
    tui_cli_fail("cannot draw the flame graph: %s", err[0] ? err : strerror(-r));
    goto out;
  }
  char abs[PATH_MAX];
  if (cli_prof_write(out ? out : def, html, hlen, abs, sizeof abs) < 0) goto out;
  printf("%s\n", abs);
  rc = 0;
out:
  free(html);
  pt_pprof_free(single);
  pt_pprof_free(basep);
  pt_pprof_merge_del(m);
  cli_prof_free_paths(paths, n);
  free(def);
  free(dir);
  free(home);
  return rc;
}
