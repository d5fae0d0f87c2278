/*
 * cli_profile_internal.h - what the units of `polytoken profile` share
 * (not a public interface: only src/tui/cli_profile*.c include it; the
 * public one is cli_profile.h).
 *
 * Units, each calling only the ones listed before it:
 *   cli_profile_files.c  the commands' argument parser; the state root,
 *                        session directories, snapshot files, loading and
 *                        merging profiles, writing an output file
 *                        atomically
 *   cli_profile_merge.c  `profile merge`
 *   cli_profile_view.c   `profile view` (the page: common/pt_flame.h)
 *   cli_profile.c        the group: help, `list`, `dump`, dispatch
 *
 * Every function that fails prints its one line (tui_cli_fail) itself and
 * returns a negative code; the command returns 1 then. Arguments are the
 * commands' business: a usage error is exit 2 with one line that ends with
 * the command's usage.
 * Threads: main thread only. Reads files only: no daemon is contacted
 * (except by `dump`, in cli_profile.c, which never starts one).
 */
#ifndef CLI_PROFILE_INTERNAL_H
#define CLI_PROFILE_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "common/pt_pprof_merge.h"
#include "common/pt_pprof_read.h"

/* Largest snapshot file read (gzip'd bytes); the decoders cap the rest. */
#define CLI_PROF_MAX_FILE ((size_t)256 << 20)

/* One option of a command: "--name VALUE", "--name=VALUE" or, with
 * alias, "-o VALUE"; a flag (val NULL) is "--name" alone. */
typedef struct cli_prof_opt {
  const char *name;  /* "--session" */
  const char *alias; /* "-o", or NULL */
  const char **val;  /* where the value goes (NULL for a flag) */
  int *flag;         /* set to 1 for a flag */
} cli_prof_opt;

/* Strict arguments: argv[first..] are options of opts (n_opts of them),
 * each at most once, or positional arguments (into pos, at most max_pos;
 * "--" ends the options). Returns 0, 1 when --help/-h was given (nothing
 * else checked), or 2 after printing "polytoken: profile CMD: <what>
 * (usage: ...)" for an unknown option, a missing value, an option given
 * twice or a positional argument too many. */
int cli_prof_args(int argc, char **argv, int first, const cli_prof_opt *opts, size_t n_opts,
                  const char **pos, size_t max_pos, size_t *n_pos, const char *cmd,
                  const char *usage);

/* Prints "polytoken: profile CMD: <fmt...> (USAGE)" and returns 2. */
int cli_prof_usage_error(const char *cmd, const char *usage, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Which snapshots of a directory: by the process that wrote them. */
typedef enum {
  CLI_PROF_DAEMON = 1, /* daemon-profile-*.pb.gz */
  CLI_PROF_TUI = 2,    /* tui-profile-*.pb.gz */
  CLI_PROF_ALL = 3,
} cli_prof_which;

/* "daemon" / "tui" / "all" -> *out; 0, or -EINVAL (no line printed). */
int cli_prof_parse_which(const char *s, cli_prof_which *out);

/* The state root (pt_home_resolve), malloc'd; NULL after printing why. */
char *cli_prof_home(void);

/* The active session's id (<home>/active_session, as the daemon keeps it)
 * into id (at least 80 bytes); 0 when there is one, -ENOENT when none. */
int cli_prof_active_session(const char *home, char *id, size_t idlen);

/* "<home>/sessions/<id>/profiling", malloc'd, after checking that id is a
 * plain name and that the session exists; NULL after printing why. The
 * profiling directory itself may be missing (no snapshot yet). */
char *cli_prof_session_dir(const char *home, const char *id);

/* The snapshot files of `which` in dir (absolute paths when dir is),
 * oldest first (by the time and sequence in their names). A missing
 * directory is an empty list. 0 with *paths (free with cli_prof_free_paths)
 * or a negative code after printing why. */
int cli_prof_snapshots(const char *dir, cli_prof_which which, char ***paths, size_t *n);
void cli_prof_free_paths(char **paths, size_t n);

/* The process a snapshot's file name says ("daemon", "tui"), or NULL. */
const char *cli_prof_process(const char *path);

/* Reads and decodes the profile at path (gzip'd or not): 0 with *out (free
 * with pt_pprof_free), or a negative code with err saying why (no line
 * printed: the caller decides whether a bad file is fatal). */
int cli_prof_load(const char *path, pt_pprof **out, char *err, size_t errlen);

/* Loads each of paths and adds it to a new merge (window names: the file
 * names). 0 with *out (free with pt_pprof_merge_del), or a negative code
 * after printing which file failed and why. */
int cli_prof_merge_files(char *const *paths, size_t n, pt_pprof_merge **out);

/* The absolute form of path (cwd prepended to a relative one; no symlink
 * resolved) into abs; 0 or -ENAMETOOLONG / -errno of getcwd. */
int cli_prof_abspath(const char *path, char *abs, size_t abslen);

/* Writes data to path atomically (temporary, fsync, rename, fsync of the
 * directory), mode 0600, and puts its absolute path into abs. 0, or a
 * negative code after printing why (the old file, if any, is untouched). */
int cli_prof_write(const char *path, const void *data, size_t len, char *abs, size_t abslen);

/* Sampled CPU of a profile in ns: the values of the "cpu" sample type in
 * nanoseconds, else samples x period. */
int64_t cli_prof_cpu_ns(const pt_pprof *p);

/* The engine the profile's "sampler engine: ..." comment names (its first
 * clause, e.g. "perf_event task-clock per thread"), or "" when none. */
void cli_prof_engine(const pt_pprof *p, char *out, size_t outlen);

/* What the profile's coverage comment ("process CPU since ...: ...; the
 * program's G ms: S ms in the samples above (pseudo-frames included, N
 * %) ...", written by libptprof since fbb1799) says: the program's CPU
 * over the window in ns and the share of it the samples hold, in per
 * cent. 0, or -ENOENT when the profile has no such comment (older
 * snapshots, other writers) or it does not parse. */
int cli_prof_coverage(const pt_pprof *p, int64_t *program_ns, int *pct);

/* `profile merge` and `profile view` (argv as given to polytoken). */
int cli_profile_merge_main(int argc, char **argv);
int cli_profile_view_main(int argc, char **argv);

#endif
