/*
 * cli_profile_files.c - the files `polytoken profile` works on (units:
 * cli_profile_internal.h): the state root, session directories, snapshot
 * names, loading and merging profiles, atomic output.
 *
 * DESIGN
 *  - Only files: the commands that read profiles (list, merge, view) work
 *    with no daemon running and in every build; nothing here connects.
 *  - Snapshot names are the daemon's and the TUI's
 *    ("<prefix>yyyymmddThhmmssZ-<seq>.pb.gz", common/pt_snapshot_names.h),
 *    so sorting the names sorts each process's windows by time; a mixed
 *    list is sorted by the name after the prefix.
 *  - A session id becomes a path component: only plain names are taken.
 */
#include "tui/cli_profile_internal.h"

#include "common/pt_file.h"
#include "common/pt_gunzip.h"
#include "common/pt_home.h"
#include "common/pt_snapshot_names.h"
#include "tui/tui_cli_common.h"

#include <ctype.h>
#include <stdarg.h>
#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- arguments ---- */

int cli_prof_usage_error(const char *cmd, const char *usage, const char *fmt, ...) {
  char what[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(what, sizeof what, fmt, ap);
  va_end(ap);
  tui_cli_fail("profile %s: %s (%s)", cmd, what, usage);
  return 2;
}

int cli_prof_args(int argc, char **argv, int first, const cli_prof_opt *opts, size_t n_opts,
                  const char **pos, size_t max_pos, size_t *n_pos, const char *cmd,
                  const char *usage) {
  *n_pos = 0;
  for (int i = first; i < argc; i++)
    if (strcmp(argv[i], "--") == 0) break;
    else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) return 1;
  int only_pos = 0;
  for (int i = first; i < argc; i++) {
    const char *a = argv[i];
    if (!only_pos && strcmp(a, "--") == 0) {
      only_pos = 1;
      continue;
    }
    if (only_pos || a[0] != '-') {
      if (*n_pos == max_pos)
        return max_pos ? cli_prof_usage_error(cmd, usage, "unexpected argument '%s'", a)
                       : cli_prof_usage_error(cmd, usage, "takes no argument ('%s')", a);
      pos[(*n_pos)++] = a;
      continue;
    }
    const cli_prof_opt *o = NULL;
    const char *val = NULL;
    for (size_t k = 0; k < n_opts && !o; k++) {
      size_t nl = strlen(opts[k].name);
      if (strcmp(a, opts[k].name) == 0 || (opts[k].alias && strcmp(a, opts[k].alias) == 0))
        o = &opts[k];
      else if (opts[k].val && strncmp(a, opts[k].name, nl) == 0 && a[nl] == '=') {
        o = &opts[k];
        val = a + nl + 1;
      }
    }
    if (!o) return cli_prof_usage_error(cmd, usage, "unknown option '%s'", a);
    if (!o->val) {
      if (*o->flag) return cli_prof_usage_error(cmd, usage, "%s is given twice", o->name);
      *o->flag = 1;
      continue;
    }
    if (*o->val) return cli_prof_usage_error(cmd, usage, "%s is given twice", o->name);
    if (!val) {
      if (i + 1 >= argc) return cli_prof_usage_error(cmd, usage, "%s needs a value", a);
      val = argv[++i];
    }
    if (!*val) return cli_prof_usage_error(cmd, usage, "%s needs a value", o->name);
    *o->val = val;
  }
  return 0;
}

/* ---- files ---- */

int cli_prof_parse_which(const char *s, cli_prof_which *out) {
  if (strcmp(s, "daemon") == 0) *out = CLI_PROF_DAEMON;
  else if (strcmp(s, "tui") == 0) *out = CLI_PROF_TUI;
  else if (strcmp(s, "all") == 0) *out = CLI_PROF_ALL;
  else return -EINVAL;
  return 0;
}

char *cli_prof_home(void) {
  char why[256], *home = NULL;
  if (pt_home_resolve(NULL, &home, why, sizeof why) < 0) {
    tui_cli_fail("%s", why);
    return NULL;
  }
  if (home[0] == '/') return home;
  /* a relative POLYTOKEN_HOME: the paths printed are absolute all the same */
  char abs[PATH_MAX];
  int r = cli_prof_abspath(home, abs, sizeof abs);
  free(home);
  if (r < 0 || !(home = strdup(abs))) {
    tui_cli_fail("cannot make the state root's path absolute: %s", strerror(r < 0 ? -r : ENOMEM));
    return NULL;
  }
  return home;
}

/* Ids become path components: letters, digits, '-' and '_' only. */
static int plain_id(const char *id) {
  if (!*id || strlen(id) > 64) return 0;
  for (const char *c = id; *c; c++)
    if (!isalnum((unsigned char)*c) && *c != '-' && *c != '_') return 0;
  return 1;
}

int cli_prof_active_session(const char *home, char *id, size_t idlen) {
  char path[PATH_MAX];
  if (snprintf(path, sizeof path, "%s/active_session", home) >= (int)sizeof path) return -ENOENT;
  char *buf = NULL;
  size_t n = 0;
  if (pt_read_all(path, 4096, &buf, &n) < 0) return -ENOENT;
  char got[80] = "";
  /* JSON {"id": ...} or the bare id, as the daemon's catalog reads it */
  if (buf[0] == '{') {
    json_t *o = json_loads(buf, 0, NULL);
    json_t *v = o ? json_object_get(o, "id") : NULL;
    if (json_is_string(v)) snprintf(got, sizeof got, "%s", json_string_value(v));
    json_decref(o);
  } else {
    size_t k = 0;
    for (size_t i = 0; i < n && k < sizeof got - 1 && !isspace((unsigned char)buf[i]); i++)
      got[k++] = buf[i];
    got[k] = 0;
  }
  free(buf);
  if (!plain_id(got)) return -ENOENT;
  snprintf(id, idlen, "%s", got);
  return 0;
}

char *cli_prof_session_dir(const char *home, const char *id) {
  if (!plain_id(id)) {
    tui_cli_fail("'%s' is not a session id (see polytoken sessions)", id);
    return NULL;
  }
  char sdir[PATH_MAX];
  snprintf(sdir, sizeof sdir, "%s/sessions/%s", home, id);
  struct stat st;
  if (stat(sdir, &st) != 0 || !S_ISDIR(st.st_mode)) {
    tui_cli_fail("no session %s in %s/sessions (see polytoken sessions)", id, home);
    return NULL;
  }
  char *dir = NULL;
  if (asprintf(&dir, "%s/profiling", sdir) < 0) {
    tui_cli_fail("out of memory");
    return NULL;
  }
  return dir;
}

const char *cli_prof_process(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  if (strncmp(base, PT_SNAPSHOT_DAEMON_PREFIX, strlen(PT_SNAPSHOT_DAEMON_PREFIX)) == 0)
    return "daemon";
  if (strncmp(base, PT_SNAPSHOT_TUI_PREFIX, strlen(PT_SNAPSHOT_TUI_PREFIX)) == 0) return "tui";
  return NULL;
}

/* The part of a snapshot's name after its prefix: its time and sequence. */
static const char *after_prefix(const char *path) {
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  const char *pr = cli_prof_process(base);
  if (!pr) return base;
  return base + strlen(pr[0] == 'd' ? PT_SNAPSHOT_DAEMON_PREFIX : PT_SNAPSHOT_TUI_PREFIX);
}

static int by_time(const void *a, const void *b) {
  const char *x = *(char *const *)a, *y = *(char *const *)b;
  int c = strcmp(after_prefix(x), after_prefix(y));
  return c ? c : strcmp(x, y);
}

void cli_prof_free_paths(char **paths, size_t n) {
  for (size_t i = 0; i < n; i++) free(paths[i]);
  free(paths);
}

int cli_prof_snapshots(const char *dir, cli_prof_which which, char ***paths, size_t *n) {
  *paths = NULL;
  *n = 0;
  DIR *d = opendir(dir);
  if (!d) {
    if (errno == ENOENT) return 0;
    int e = -errno;
    tui_cli_fail("cannot read %s: %s", dir, strerror(-e));
    return e;
  }
  char **v = NULL;
  size_t nv = 0, cap = 0;
  int r = 0;
  struct dirent *de;
  size_t slen = strlen(PT_SNAPSHOT_SUFFIX);
  while ((de = readdir(d))) {
    const char *pr = cli_prof_process(de->d_name);
    size_t len = strlen(de->d_name);
    if (!pr || len <= slen || strcmp(de->d_name + len - slen, PT_SNAPSHOT_SUFFIX) != 0) continue;
    if (!((pr[0] == 'd' && (which & CLI_PROF_DAEMON)) || (pr[0] == 't' && (which & CLI_PROF_TUI))))
      continue;
    if (nv == cap) {
      cap = cap ? cap * 2 : 16;
      char **nvv = realloc(v, cap * sizeof *v);
      if (!nvv) { r = -ENOMEM; break; }
      v = nvv;
    }
    if (asprintf(&v[nv], "%s/%s", dir, de->d_name) < 0) { r = -ENOMEM; break; }
    struct stat st;
    if (stat(v[nv], &st) != 0 || !S_ISREG(st.st_mode)) {
      free(v[nv]);
      continue;
    }
    nv++;
  }
  closedir(d);
  if (r < 0) {
    cli_prof_free_paths(v, nv);
    tui_cli_fail("out of memory");
    return r;
  }
  if (nv > 1) qsort(v, nv, sizeof *v, by_time);
  *paths = v;
  *n = nv;
  return 0;
}

int cli_prof_load(const char *path, pt_pprof **out, char *err, size_t errlen) {
  *out = NULL;
  char *data = NULL;
  size_t len = 0;
  int r = pt_read_all(path, CLI_PROF_MAX_FILE, &data, &len);
  if (r < 0) {
    if (r == -EFBIG) snprintf(err, errlen, "larger than %zu MiB", CLI_PROF_MAX_FILE >> 20);
    else if (r == -EINVAL) snprintf(err, errlen, "not a regular file");
    else snprintf(err, errlen, "%s", strerror(-r));
    return r;
  }
  uint8_t *raw = (uint8_t *)data;
  size_t rawn = len;
  if (pt_is_gzip(raw, len)) {
    r = pt_gunzip((uint8_t *)data, len, 0, &raw, &rawn);
    if (r < 0) {
      free(data);
      snprintf(err, errlen, "%s", r == -EFBIG ? "over 256 MiB once decompressed"
                                  : r == -ENOMEM ? "out of memory"
                                                 : "damaged gzip data");
      return r;
    }
  }
  char why[256] = "";
  r = pt_pprof_read(raw, rawn, NULL, out, why, sizeof why);
  if (r < 0) snprintf(err, errlen, "not a pprof profile: %s", why);
  if (raw != (uint8_t *)data) free(raw);
  free(data);
  return r;
}

int cli_prof_merge_files(char *const *paths, size_t n, pt_pprof_merge **out) {
  *out = NULL;
  pt_pprof_merge *m = NULL;
  int r = pt_pprof_merge_new(&m);
  if (r < 0) {
    tui_cli_fail("out of memory");
    return r;
  }
  for (size_t i = 0; i < n; i++) {
    pt_pprof *p = NULL;
    char err[512];
    r = cli_prof_load(paths[i], &p, err, sizeof err);
    if (r < 0) {
      tui_cli_fail("cannot read %s: %s", paths[i], err);
      break;
    }
    const char *base = strrchr(paths[i], '/');
    r = pt_pprof_merge_add(m, p, base ? base + 1 : paths[i], err, sizeof err);
    pt_pprof_free(p);
    if (r < 0) {
      tui_cli_fail("cannot merge %s: %s", paths[i], err);
      break;
    }
  }
  if (r < 0) {
    pt_pprof_merge_del(m);
    return r;
  }
  *out = m;
  return 0;
}

int cli_prof_abspath(const char *path, char *abs, size_t abslen) {
  if (path[0] == '/') {
    if (snprintf(abs, abslen, "%s", path) >= (int)abslen) return -ENAMETOOLONG;
    return 0;
  }
  char cwd[PATH_MAX];
  if (!getcwd(cwd, sizeof cwd)) return -errno;
  const char *p = path;
  while (p[0] == '.' && p[1] == '/') p += 2; /* "./x" -> "x" */
  if (snprintf(abs, abslen, "%s/%s", strcmp(cwd, "/") ? cwd : "", p) >= (int)abslen)
    return -ENAMETOOLONG;
  return 0;
}

int cli_prof_write(const char *path, const void *data, size_t len, char *abs, size_t abslen) {
  int r = cli_prof_abspath(path, abs, abslen);
  if (r < 0) {
    tui_cli_fail("cannot write %s: %s", path, strerror(-r));
    return r;
  }
  r = pt_write_atomic(abs, data, len, 0600);
  if (r < 0) {
    tui_cli_fail("cannot write %s: %s (nothing was written)", abs, strerror(-r));
    return r;
  }
  return 0;
}

int64_t cli_prof_cpu_ns(const pt_pprof *p) {
  for (size_t k = 0; k < p->n_sample_types; k++) {
    if (strcmp(pt_pprof_string(p, p->sample_types[k].type), "cpu") != 0 ||
        strcmp(pt_pprof_string(p, p->sample_types[k].unit), "nanoseconds") != 0)
      continue;
    int64_t t = 0;
    for (size_t i = 0; i < p->n_samples; i++)
      if (__builtin_add_overflow(t, p->samples[i].values[k], &t)) return INT64_MAX;
    return t;
  }
  int64_t s = pt_pprof_sample_total(p), t;
  if (__builtin_mul_overflow(s, p->period > 0 ? p->period : 0, &t)) return INT64_MAX;
  return t;
}

int cli_prof_coverage(const pt_pprof *p, int64_t *program_ns, int *pct) {
  static const char key[] = "process CPU since ", mid[] = "the program's ";
  for (size_t i = 0; i < p->n_comments; i++) {
    const char *c = pt_pprof_string(p, p->comments[i]);
    if (strncmp(c, key, sizeof key - 1) != 0) continue;
    const char *m = strstr(c, mid);
    double g;
    int n, used = 0;
    if (!m || sscanf(m + sizeof mid - 1, "%lf ms: %*f ms in the samples above (pseudo-frames "
                     "included, %d %%)%n", &g, &n, &used) != 2 || used == 0 ||
        !(g >= 0 && g < 1e12) || n < 0)
      return -ENOENT;
    *program_ns = (int64_t)(g * 1e6);
    *pct = n;
    return 0;
  }
  return -ENOENT;
}

void cli_prof_engine(const pt_pprof *p, char *out, size_t outlen) {
  static const char key[] = "sampler engine: ";
  snprintf(out, outlen, "%s", "");
  for (size_t i = 0; i < p->n_comments; i++) {
    const char *c = pt_pprof_string(p, p->comments[i]);
    if (strncmp(c, key, sizeof key - 1) != 0) continue;
    c += sizeof key - 1;
    /* "perf_event task-clock per thread, 99 Hz; ..." -> the first clause */
    size_t n = strcspn(c, ",;");
    snprintf(out, outlen, "%.*s", (int)n, c);
    return;
  }
}
