/* Unit tests for the state-root module (src/common/pt_home.c) and the
 * directory helpers it rests on (src/common/pt_file.c): where the root is
 * found, that an overlong one is refused rather than cut, that created
 * directories are 0700 under any umask, that an existing open root of ours
 * is tightened (and reported), and that pt_mkdir_beneath never follows a
 * symlink. Each test runs in its own forked child (environment, umask). */
#include "pt_test.h"
#include "common/pt_file.h"
#include "common/pt_home.h"

#include <errno.h>
#include <fcntl.h>
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
  PT_ASSERT_INT_EQ(pt_home_prepare(p, &was, NULL, 0), 0);
  PT_ASSERT(was == (mode_t)-1);
  PT_ASSERT_INT_EQ(mode_of(p), 0700);
  snprintf(p, sizeof p, "%s/a", dir);
  PT_ASSERT_INT_EQ(mode_of(p), 0700); /* umask 0 did not widen it */
  /* an existing root of ours, 0755: tightened and reported */
  snprintf(p, sizeof p, "%s/open", dir);
  PT_ASSERT(mkdir(p, 0755) == 0);
  PT_ASSERT(chmod(p, 0755) == 0);
  PT_ASSERT_INT_EQ(pt_home_prepare(p, &was, NULL, 0), 0);
  PT_ASSERT_INT_EQ((int)was, 0755);
  PT_ASSERT_INT_EQ(mode_of(p), 0700);
  PT_ASSERT_INT_EQ(pt_home_prepare(p, &was, NULL, 0), 0);
  PT_ASSERT(was == (mode_t)-1); /* nothing to do the second time */
  /* a file where the root should be */
  snprintf(p, sizeof p, "%s/file", dir);
  int fd = open(p, O_WRONLY | O_CREAT, 0600);
  PT_ASSERT(fd >= 0);
  close(fd);
  char err[256];
  PT_ASSERT(pt_home_prepare(p, &was, err, sizeof err) < 0);
  free(dir);
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
