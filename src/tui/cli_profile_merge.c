/*
 * cli_profile_merge.c - `polytoken profile merge` (units:
 * cli_profile_internal.h): several interval snapshots into one pprof file.
 *
 * The merge itself is common/pt_pprof_merge.h (samples with the same stack
 * and labels summed, entities deduplicated, comments naming each window);
 * this file takes the arguments, picks the files and writes the result
 * with common/pt_pprof_write.h and pt_gzip.h, atomically.
 */
#include "tui/cli_profile_internal.h"

#include "common/pt_gzip.h"
#include "common/pt_pprof_write.h"
#include "tui/tui_cli_common.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The two forms: on one line in error messages (MERGE_USAGE), one a line
 * in the help. */
#define MERGE_FILES "polytoken profile merge FILE... -o OUT"
#define MERGE_SESSION "merge --session ID [--process P] -o OUT"
#define MERGE_USAGE "usage: " MERGE_FILES " | " MERGE_SESSION

static void merge_help(void) {
  printf("usage: " MERGE_FILES "\n"
         "       polytoken profile " MERGE_SESSION "\n"
         "  Merges interval snapshots into one pprof profile (gzip'd protobuf, read by\n"
         "  `go tool pprof` and `polytoken profile view`): samples with the same stack\n"
         "  and labels are summed, labels are kept, and the comments name every window\n"
         "  merged (file, start, length, samples). The profile starts at the earliest\n"
         "  window and covers them all. Profiles with different sample or period types\n"
         "  are refused.\n"
         "  FILE...         snapshot files (any pprof files)\n"
         "  --session ID    every snapshot kept in that session's profiling/ directory\n"
         "  --process P     with --session: daemon (default), tui or all\n"
         "  -o, --out OUT   the file to write (replaced atomically; mode 0600)\n"
         "Prints the absolute path written. Reads files only: no daemon is needed.\n");
}

int cli_profile_merge_main(int argc, char **argv) {
  const char *out = NULL, *session = NULL, *process = NULL;
  const cli_prof_opt opts[] = {{"--out", "-o", &out, NULL},
                               {"--session", NULL, &session, NULL},
                               {"--process", NULL, &process, NULL}};
  const char **files = calloc((size_t)argc, sizeof *files);
  if (!files) {
    tui_cli_fail("out of memory");
    return 1;
  }
  size_t nfiles = 0;
  int rc = cli_prof_args(argc, argv, 3, opts, 3, files, (size_t)argc, &nfiles, "merge", MERGE_USAGE);
  if (rc == 1) merge_help();
  rc = rc == 1 ? -1 : rc; /* -1: done, exit 0 */
  cli_prof_which which = CLI_PROF_DAEMON;
  if (!rc && !out) rc = cli_prof_usage_error("merge", MERGE_USAGE, "-o OUT is required");
  if (!rc && session && nfiles)
    rc = cli_prof_usage_error("merge", MERGE_USAGE, "give FILE... or --session ID, not both");
  if (!rc && !session && !nfiles)
    rc = cli_prof_usage_error("merge", MERGE_USAGE, "no profile to merge");
  if (!rc && process && !session)
    rc = cli_prof_usage_error("merge", MERGE_USAGE, "--process goes with --session");
  if (!rc && process && cli_prof_parse_which(process, &which) < 0)
    rc = cli_prof_usage_error("merge", MERGE_USAGE, "--process '%s': expected daemon, tui or all",
                              process);
  if (rc) {
    free(files);
    return rc < 0 ? 0 : rc;
  }

  char **paths = (char **)files;
  size_t n = nfiles;
  char **owned = NULL;
  char *home = NULL, *dir = NULL;
  pt_pprof_merge *m = NULL;
  uint8_t *pb = NULL, *gz = NULL;
  if (session) {
    if (!(home = cli_prof_home()) || !(dir = cli_prof_session_dir(home, session)) ||
        cli_prof_snapshots(dir, which, &owned, &n) < 0) {
      rc = 1;
      goto out;
    }
    if (n == 0) {
      tui_cli_fail("no %s snapshot in %s", process ? process : "daemon", dir);
      rc = 1;
      goto out;
    }
    paths = owned;
  }
  if (cli_prof_merge_files(paths, n, &m) < 0) {
    rc = 1;
    goto out;
  }
  const pt_pprof *res = NULL;
  size_t pbn = 0, gzn = 0;
  char err[512] = "";
  int r = pt_pprof_merge_result(m, &res, err, sizeof err);
  if (r == 0) r = pt_pprof_write(res, &pb, &pbn, err, sizeof err);
  if (r == 0 && (r = pt_gzip(pb, pbn, &gz, &gzn)) < 0) snprintf(err, sizeof err, "%s", strerror(-r));
  char abs[PATH_MAX];
  if (r < 0) {
    tui_cli_fail("cannot build the merged profile: %s", err);
    rc = 1;
  } else if (cli_prof_write(out, gz, gzn, abs, sizeof abs) < 0) {
    rc = 1;
  } else {
    /* the path alone on stdout (scripts take it); what was merged on stderr */
    printf("%s\n", abs);
    fflush(stdout);
    int64_t ns = pt_pprof_sample_total(res);
    fprintf(stderr, "merged %zu window%s: %" PRId64 " sample%s, %.3f s of CPU, %zu stack%s\n", n,
            n == 1 ? "" : "s", ns, ns == 1 ? "" : "s", (double)cli_prof_cpu_ns(res) / 1e9,
            res->n_samples, res->n_samples == 1 ? "" : "s");
  }
out:
  free(pb);
  free(gz);
  pt_pprof_merge_del(m);
  cli_prof_free_paths(owned, owned ? n : 0);
  free(dir);
  free(home);
  free(files);
  return rc;
}
