/* Unit tests for the state-root module (src/common/pt_home.c) and the
 * directory helpers it rests on (src/common/pt_file.c): where the root is
 * found, that an overlong one is refused rather than cut, that created
 * directories are 0700 under any umask, that an existing open root of ours
 * is tightened (and reported), that a root another user can write to or
 * replace is refused with the exact reason (writable directories, foreign
 * owners, symlinks on the way, sticky ancestors allowed), and that
 * pt_mkdir_beneath never follows a symlink. Each test runs in its own
 * forked child (environment, umask, uid). */
#include "pt_test.h"
#include "common/pt_file.h"
#include "common/pt_home.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/wait.h>
#include <sys/stat.h>
#include <unistd.h>

static mode_t mode_of(const char *p) {
  struct stat st;
  PT_ASSERT(lstat(p, &st) == 0);
  return st.st_mode & 07777;
}

PT_TEST(common_home_resolve_order_and_limit) {
  char *h = NULL, err[256];
  setenv("HOME", "/home/u", 1);
  unsetenv("POLYTOKEN_HOME");
  unsetenv("XDG_STATE_HOME");
  PT_ASSERT_INT_EQ(pt_home_resolve(NULL, &h, err, sizeof err), 0);
  PT_ASSERT_STR_EQ(h, "/home/u/.local/state/polytoken");
  free(h);
  setenv("XDG_STATE_HOME", "/xdg", 1);
  PT_ASSERT_INT_EQ(pt_home_resolve(NULL, &h, err, sizeof err), 0);
  PT_ASSERT_STR_EQ(h, "/xdg/polytoken");
  free(h);
  setenv("POLYTOKEN_HOME", "/pt", 1);
  PT_ASSERT_INT_EQ(pt_home_resolve(NULL, &h, err, sizeof err), 0);
  PT_ASSERT_STR_EQ(h, "/pt");
  free(h);
  PT_ASSERT_INT_EQ(pt_home_resolve("/given", &h, err, sizeof err), 0);
  PT_ASSERT_STR_EQ(h, "/given");
  free(h);
  PT_ASSERT_INT_EQ(pt_home_resolve("", &h, err, sizeof err), -EINVAL);
  /* exactly at the limit is fine; one byte over is refused, never cut */
  char *longp = malloc(PT_HOME_MAX + 2);
  PT_ASSERT(longp);
  memset(longp, 'a', PT_HOME_MAX + 1);
  longp[0] = '/';
  longp[PT_HOME_MAX] = '\0';
  PT_ASSERT_INT_EQ(pt_home_resolve(longp, &h, err, sizeof err), 0);
  PT_ASSERT_INT_EQ((int)strlen(h), PT_HOME_MAX);
  free(h);
  longp[PT_HOME_MAX] = 'a';
  longp[PT_HOME_MAX + 1] = '\0';
  PT_ASSERT_INT_EQ(pt_home_resolve(longp, &h, err, sizeof err), -ENAMETOOLONG);
  PT_ASSERT(h == NULL);
  PT_ASSERT_MSG(strstr(err, "over the limit of 3840") != NULL, "%s", err);
  /* the XDG suffix counts too */
  longp[PT_HOME_MAX - 5] = '\0';
  setenv("POLYTOKEN_HOME", "", 1);
  setenv("XDG_STATE_HOME", longp, 1);
  PT_ASSERT_INT_EQ(pt_home_resolve(NULL, &h, err, sizeof err), -ENAMETOOLONG);
  PT_ASSERT_MSG(strstr(err, "XDG_STATE_HOME") != NULL, "%s", err);
  unsetenv("XDG_STATE_HOME");
  unsetenv("HOME");
  PT_ASSERT_INT_EQ(pt_home_resolve(NULL, &h, err, sizeof err), -ENOENT);
  free(longp);
}

PT_TEST(common_home_prepare_modes_whatever_the_umask) {
  char *dir = pt_tmpdir("home");
  char p[4096];
  umask(0);
  snprintf(p, sizeof p, "%s/a/b/root", dir);
  mode_t was = 0;
  PT_ASSERT_INT_EQ(pt_home_prepare(p, PT_HOME_CREATE | PT_HOME_TIGHTEN, &was, NULL, 0), 0);
  PT_ASSERT(was == (mode_t)-1);
  PT_ASSERT_INT_EQ(mode_of(p), 0700);
  snprintf(p, sizeof p, "%s/a", dir);
  PT_ASSERT_INT_EQ(mode_of(p), 0700); /* umask 0 did not widen it */
  /* an existing root of ours, 0755: tightened and reported */
  snprintf(p, sizeof p, "%s/open", dir);
  PT_ASSERT(mkdir(p, 0755) == 0);
  PT_ASSERT(chmod(p, 0755) == 0);
  PT_ASSERT_INT_EQ(pt_home_prepare(p, PT_HOME_CREATE | PT_HOME_TIGHTEN, &was, NULL, 0), 0);
  PT_ASSERT_INT_EQ((int)was, 0755);
  PT_ASSERT_INT_EQ(mode_of(p), 0700);
  PT_ASSERT_INT_EQ(pt_home_prepare(p, PT_HOME_CREATE | PT_HOME_TIGHTEN, &was, NULL, 0), 0);
  PT_ASSERT(was == (mode_t)-1); /* nothing to do the second time */
  /* a file where the root should be */
  snprintf(p, sizeof p, "%s/file", dir);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);
  PT_ASSERT(fd >= 0);
  close(fd);
  char err[256];
  PT_ASSERT(pt_home_prepare(p, PT_HOME_CREATE | PT_HOME_TIGHTEN, &was, err, sizeof err) < 0);
  free(dir);
}

#define HINT "; use a directory that nobody else can write to or replace (docs/daemon.md, \"State root\")"

/* pt_home_prepare(path, flags) must fail with `code` and exactly the
 * message "the state root <path> is not safe: <what>" + HINT. */
static void expect_unsafe(const char *path, unsigned flags, const char *what) {
  char err[2048], want[2048];
  PT_ASSERT_INT_EQ(pt_home_prepare(path, flags, NULL, err, sizeof err), -EPERM);
  snprintf(want, sizeof want, "the state root %s is not safe: %s" HINT, path, what);
  PT_ASSERT_STR_EQ(err, want);
}

static char *mkdir_mode(const char *dir, const char *name, mode_t mode) {
  char *p = malloc(PATH_MAX);
  PT_ASSERT(p);
  snprintf(p, PATH_MAX, "%s/%s", dir, name);
  PT_ASSERT(mkdir(p, 0700) == 0);
  PT_ASSERT(chmod(p, mode) == 0);
  return p;
}

PT_TEST(common_home_refuses_what_others_can_write) {
  char *tmp = pt_tmpdir("unsafe"), dir[PATH_MAX], p[PATH_MAX + 64], what[2 * PATH_MAX];
  PT_ASSERT(realpath(tmp, dir)); /* messages name real paths */
  umask(022);
  /* the root itself, writable by others / by its group / sticky */
  char *open_root = mkdir_mode(dir, "open", 0777);
  snprintf(what, sizeof what, "%s is writable by others (mode 0777)", open_root);
  expect_unsafe(open_root, PT_HOME_CREATE | PT_HOME_TIGHTEN, what);
  PT_ASSERT_INT_EQ(mode_of(open_root), 0777); /* refused, not "repaired" */
  char *group_root = mkdir_mode(dir, "group", 0770);
  snprintf(what, sizeof what, "%s is writable by its group (mode 0770)", group_root);
  expect_unsafe(group_root, 0, what);
  char *sticky_root = mkdir_mode(dir, "sticky", 01777);
  snprintf(what, sizeof what, "%s is writable by others (mode 1777)", sticky_root);
  expect_unsafe(sticky_root, 0, what);
  /* an ancestor writable by others: refused before anything is created
   * below it, with or without PT_HOME_CREATE */
  snprintf(p, sizeof p, "%s/new/home", open_root);
  snprintf(what, sizeof what, "%s is writable by others (mode 0777)", open_root);
  expect_unsafe(p, PT_HOME_CREATE, what);
  expect_unsafe(p, 0, what);
  snprintf(p, sizeof p, "%s/new", open_root);
  PT_ASSERT(access(p, F_OK) != 0);
  /* a sticky ancestor (as /tmp) is fine: others cannot replace ours */
  snprintf(p, sizeof p, "%s/home", sticky_root);
  mode_t was;
  PT_ASSERT_INT_EQ(pt_home_prepare(p, PT_HOME_CREATE | PT_HOME_TIGHTEN, &was, NULL, 0), 0);
  PT_ASSERT_INT_EQ(mode_of(p), 0700);
  /* a symlink on the way is judged by where it sits and where it leads:
   * a link in a private directory to a root below an open one ... */
  char *priv = mkdir_mode(dir, "priv", 0700);
  snprintf(p, sizeof p, "%s/root", open_root);
  PT_ASSERT(mkdir(p, 0700) == 0);
  char link[PATH_MAX + 64];
  snprintf(link, sizeof link, "%s/link", priv);
  PT_ASSERT(symlink(p, link) == 0);
  snprintf(what, sizeof what, "%s is writable by others (mode 0777)", open_root);
  expect_unsafe(link, PT_HOME_CREATE, what);
  /* ... and a link planted in an open directory, to a private root */
  char target[PATH_MAX + 64];
  snprintf(target, sizeof target, "%s/real", priv);
  PT_ASSERT(mkdir(target, 0700) == 0);
  snprintf(link, sizeof link, "%s/link", open_root);
  PT_ASSERT(symlink(target, link) == 0);
  expect_unsafe(link, 0, what);
  /* the same private root reached without the open directory is fine */
  PT_ASSERT_INT_EQ(pt_home_prepare(target, 0, NULL, NULL, 0), 0);
  /* a missing root below safe directories: -ENOENT without CREATE */
  snprintf(p, sizeof p, "%s/missing/home", priv);
  char err[1024];
  PT_ASSERT_INT_EQ(pt_home_prepare(p, 0, NULL, err, sizeof err), -ENOENT);
  PT_ASSERT(access(p, F_OK) != 0);
  /* a relative root is judged from the working directory up */
  PT_ASSERT(chdir(open_root) == 0);
  snprintf(what, sizeof what, "%s is writable by others (mode 0777)", open_root);
  char rel_want[4 * PATH_MAX];
  PT_ASSERT_INT_EQ(pt_home_prepare("rel/home", PT_HOME_CREATE, NULL, err, sizeof err), -EPERM);
  snprintf(rel_want, sizeof rel_want, "the state root rel/home is not safe: %s" HINT, what);
  PT_ASSERT_STR_EQ(err, rel_want);
  PT_ASSERT(chdir(priv) == 0);
  PT_ASSERT_INT_EQ(pt_home_prepare("rel/home", PT_HOME_CREATE, NULL, err, sizeof err), 0);
  PT_ASSERT_INT_EQ(mode_of("rel"), 0700);
  free(open_root);
  free(group_root);
  free(sticky_root);
  free(priv);
  pt_rm_rf(tmp);
  free(tmp);
}

/* Runs pt_home_prepare(path, flags) as uid `uid` in a child; returns its
 * result, the message in err. */
static int prepare_as(uid_t uid, const char *path, unsigned flags, char *err, size_t errlen) {
  int pfd[2];
  PT_ASSERT(pipe(pfd) == 0);
  pid_t pid = fork();
  PT_ASSERT(pid >= 0);
  if (pid == 0) {
    close(pfd[0]);
    if (setresgid(uid, uid, uid) != 0 || setresuid(uid, uid, uid) != 0) _exit(99);
    char e[1024] = "";
    int r = pt_home_prepare(path, flags, NULL, e, sizeof e);
    ssize_t w = write(pfd[1], &r, sizeof r);
    w = write(pfd[1], e, strlen(e) + 1);
    (void)w;
    _exit(0);
  }
  close(pfd[1]);
  int r = 1;
  PT_ASSERT(read(pfd[0], &r, sizeof r) == (ssize_t)sizeof r);
  ssize_t n = read(pfd[0], err, errlen - 1);
  err[n > 0 ? n : 0] = '\0';
  close(pfd[0]);
  int st;
  PT_ASSERT(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0);
  return r;
}

PT_TEST(common_home_refuses_foreign_owners) {
  if (geteuid() != 0) PT_SKIP("needs root to make directories of other users");
  /* below /tmp itself (root, sticky), so another uid can reach it */
  char base[] = "/tmp/pt-home-owners-XXXXXX";
  PT_ASSERT(mkdtemp(base));
  PT_ASSERT(chmod(base, 0755) == 0);
  char dir[PATH_MAX], p[PATH_MAX + 64], what[4 * PATH_MAX], err[1024];
  PT_ASSERT(realpath(base, dir));
  const uid_t a = 4242, b = 4343; /* no passwd entries: "uid N" */
  /* A's root below root-owned directories: fine */
  snprintf(p, sizeof p, "%s/a-home", dir);
  PT_ASSERT(mkdir(p, 0700) == 0 && chown(p, a, a) == 0);
  PT_ASSERT_INT_EQ(prepare_as(a, p, 0, err, sizeof err), 0);
  /* ... below a root-owned sticky directory: fine; below a root-owned
   * open one: refused */
  char *sticky = mkdir_mode(dir, "sticky", 01777), *open = mkdir_mode(dir, "open", 0777);
  snprintf(p, sizeof p, "%s/a-home", sticky);
  PT_ASSERT_INT_EQ(prepare_as(a, p, PT_HOME_CREATE, err, sizeof err), 0);
  snprintf(p, sizeof p, "%s/a-home", open);
  PT_ASSERT_INT_EQ(prepare_as(a, p, PT_HOME_CREATE, err, sizeof err), -EPERM);
  snprintf(what, sizeof what, "the state root %s is not safe: %s is writable by others (mode 0777)" HINT, p, open);
  PT_ASSERT_STR_EQ(err, what);
  /* B's directory above A's root, even closed: B can replace what is in it */
  char *bdir = mkdir_mode(dir, "b-dir", 0755);
  PT_ASSERT(chown(bdir, b, b) == 0);
  snprintf(p, sizeof p, "%s/a-home", bdir);
  PT_ASSERT(mkdir(p, 0700) == 0 && chown(p, a, a) == 0);
  PT_ASSERT_INT_EQ(prepare_as(a, p, 0, err, sizeof err), -EPERM);
  snprintf(what, sizeof what, "the state root %s is not safe: %s is owned by another user (uid 4343)" HINT, p, bdir);
  PT_ASSERT_STR_EQ(err, what);
  /* B's 0777 directory (the shared directory of issue 21) */
  PT_ASSERT(chmod(bdir, 0777) == 0);
  PT_ASSERT_INT_EQ(prepare_as(a, p, 0, err, sizeof err), -EPERM);
  snprintf(what, sizeof what, "the state root %s is not safe: %s is owned by another user (uid 4343) and writable by others (mode 0777)" HINT, p, bdir);
  PT_ASSERT_STR_EQ(err, what);
  /* a root that is B's, even private: not A's */
  snprintf(p, sizeof p, "%s/b-home", dir);
  PT_ASSERT(mkdir(p, 0700) == 0 && chown(p, b, b) == 0 && chmod(p, 0755) == 0);
  PT_ASSERT_INT_EQ(prepare_as(a, p, PT_HOME_TIGHTEN, err, sizeof err), -EPERM);
  snprintf(what, sizeof what, "the state root %s is not safe: %s is owned by another user (uid 4343)" HINT, p, p);
  PT_ASSERT_STR_EQ(err, what);
  PT_ASSERT_INT_EQ(mode_of(p), 0755); /* not ours to change */
  free(sticky);
  free(open);
  free(bdir);
  pt_rm_rf(base);
}

PT_TEST(common_mkdir_beneath_never_follows_links) {
  char *dir = pt_tmpdir("beneath");
  char p[4200], out[4096];
  umask(0); /* created modes must still be exactly 0700 */
  int dfd = open(dir, O_RDONLY | O_DIRECTORY);
  PT_ASSERT(dfd >= 0);
  int fd = pt_mkdir_beneath(dfd, "x/y/z", 0700);
  PT_ASSERT(fd >= 0);
  close(fd);
  snprintf(p, sizeof p, "%s/x/y", dir);
  PT_ASSERT_INT_EQ(mode_of(p), 0700);
  /* a symlinked component, pointing outside: refused, nothing created there */
  snprintf(out, sizeof out, "%s-outside", dir);
  PT_ASSERT(mkdir(out, 0700) == 0);
  snprintf(p, sizeof p, "%s/link", dir);
  PT_ASSERT(symlink(out, p) == 0);
  PT_ASSERT_INT_EQ(pt_mkdir_beneath(dfd, "link/sub", 0700), -ELOOP);
  snprintf(p, sizeof p, "%s/sub", out);
  PT_ASSERT(access(p, F_OK) != 0);
  PT_ASSERT_INT_EQ(pt_open_beneath(dfd, "link", O_RDONLY | O_DIRECTORY), -ELOOP);
  PT_ASSERT_INT_EQ(pt_mkdir_beneath(dfd, "../escape", 0700), -EINVAL);
  close(dfd);
  rmdir(out);
  free(dir);
}
