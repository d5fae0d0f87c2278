/*
 * test_perfmap_file.c - the perf map file's driver (symbols/ptp_perfmap_file.c):
 * incremental reads (appends, a partial last line completed later), a file
 * rewritten in place or replaced (read again, earlier ranges kept), and
 * every refusal (missing, symlink, FIFO, directory, another owner, 1 GiB
 * sparse) leaving the names read before as they were.
 */
#include "pt_test.h"
#include "prof/symbols/ptp_perfmap_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void tmpdir(char *dir, size_t cap) {
  const char *t = getenv("TMPDIR");
  snprintf(dir, cap, "%s/ptt-perfmap.XXXXXX", t && *t ? t : "/tmp");
  PT_ASSERT(mkdtemp(dir));
}

static void write_file(const char *path, const char *mode, const char *text) {
  FILE *fp = fopen(path, mode);
  PT_ASSERT(fp);
  PT_ASSERT(fputs(text, fp) >= 0);
  PT_ASSERT(fclose(fp) == 0);
}

static const char *name(ptp_perfmap_file *f, uint64_t a) {
  const char *n = ptp_perfmap_file_lookup(f, a, NULL, NULL);
  return n ? n : "(none)";
}

PT_TEST(prof_perfmap_file_incremental) {
  char dir[PATH_MAX], path[PATH_MAX + 16];
  tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/perf-1.map", dir);
  ptp_perfmap_file *f;
  PT_ASSERT_INT_EQ(ptp_perfmap_file_new(&f, path), 0);
  ptp_perfmap_file_info in;
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -ENOENT);
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_INT_EQ(in.state, PTP_PERFMAP_MISSING);
  PT_ASSERT_STR_EQ(ptp_perfmap_file_state_name(in.state, in.err), "not found");
  /* The runtime starts writing: two lines and half of a third. */
  write_file(path, "w", "1000 100 first\n2000 100 second\n3000 100 thi");
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x1000), "first");
  PT_ASSERT_STR_EQ(name(f, 0x2050), "second");
  PT_ASSERT_STR_EQ(name(f, 0x3000), "(none)");
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_INT_EQ(in.state, PTP_PERFMAP_READ);
  PT_ASSERT_UINT_EQ(in.bytes, strlen("1000 100 first\n2000 100 second\n"));
  /* It finishes the line and moves code: 0x1000 is another function now. */
  write_file(path, "a", "rd\n1000 80 moved\n");
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x3000), "third");
  PT_ASSERT_STR_EQ(name(f, 0x1000), "moved");
  PT_ASSERT_STR_EQ(name(f, 0x1090), "first");
  /* Nothing new: nothing read. */
  ptp_perfmap_file_get_info(f, &in);
  uint64_t before = in.bytes;
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_UINT_EQ(in.bytes, before);
  PT_ASSERT_UINT_EQ(in.restarts, 0);
  /* Rewritten in place, the same size, other bytes (a runtime that dumps
   * its whole map again): read from the start; 0x3000 is no longer listed
   * but keeps the name it had in the windows before. */
  {
    struct stat st;
    PT_ASSERT(stat(path, &st) == 0);
    char *t = malloc((size_t)st.st_size + 1);
    PT_ASSERT(t);
    memset(t, ' ', (size_t)st.st_size);
    t[st.st_size] = 0;
    const char *nw = "1000 100 again\n4000 100 fourth\n";
    memcpy(t, nw, strlen(nw));
    t[st.st_size - 1] = '\n';
    int fd = open(path, O_WRONLY);
    PT_ASSERT(fd >= 0);
    PT_ASSERT(pwrite(fd, t, (size_t)st.st_size, 0) == st.st_size);
    close(fd);
    free(t);
  }
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x1000), "again");
  PT_ASSERT_STR_EQ(name(f, 0x4000), "fourth");
  PT_ASSERT_STR_EQ(name(f, 0x3000), "third");
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_UINT_EQ(in.restarts, 1);
  /* Replaced by another file (rename): read from the start too. */
  char other[PATH_MAX + 16];
  snprintf(other, sizeof other, "%s/new.map", dir);
  write_file(other, "w", "5000 100 fifth\n");
  PT_ASSERT(rename(other, path) == 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x5000), "fifth");
  PT_ASSERT_STR_EQ(name(f, 0x4000), "fourth");
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_UINT_EQ(in.restarts, 2);
  /* Truncated: shorter than what was read. */
  write_file(path, "w", "6000 1 x\n");
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x6000), "x");
  /* Deleted: the names stay. */
  PT_ASSERT(unlink(path) == 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -ENOENT);
  PT_ASSERT_STR_EQ(name(f, 0x5000), "fifth");
  ptp_perfmap_file_del(f);
  rmdir(dir);
}

PT_TEST(prof_perfmap_file_refused) {
  char dir[PATH_MAX], path[PATH_MAX + 16], real[PATH_MAX + 16];
  tmpdir(dir, sizeof dir);
  snprintf(path, sizeof path, "%s/perf-2.map", dir);
  snprintf(real, sizeof real, "%s/elsewhere.map", dir);
  ptp_perfmap_file *f;
  PT_ASSERT_INT_EQ(ptp_perfmap_file_new(&f, path), 0);
  write_file(path, "w", "1000 100 kept\n");
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x1000), "kept");
  ptp_perfmap_file_info in;
  /* A symlink (to a valid map): not followed. */
  write_file(real, "w", "1000 100 hostile\n2000 100 hostile2\n");
  PT_ASSERT(unlink(path) == 0);
  PT_ASSERT(symlink(real, path) == 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -ELOOP);
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_INT_EQ(in.state, PTP_PERFMAP_REFUSED);
  PT_ASSERT_STR_EQ(ptp_perfmap_file_state_name(in.state, in.err), "refused: a symlink");
  PT_ASSERT_STR_EQ(name(f, 0x1000), "kept");
  PT_ASSERT_STR_EQ(name(f, 0x2000), "(none)");
  /* A FIFO: never blocks, refused. */
  PT_ASSERT(unlink(path) == 0);
  PT_ASSERT(mkfifo(path, 0600) == 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -EINVAL);
  PT_ASSERT_STR_EQ(name(f, 0x1000), "kept");
  /* A directory. */
  PT_ASSERT(unlink(path) == 0);
  PT_ASSERT(mkdir(path, 0700) == 0);
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -EINVAL);
  PT_ASSERT(rmdir(path) == 0);
  /* 1 GiB, sparse: refused before a byte is read. */
  int fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0600);
  PT_ASSERT(fd >= 0);
  PT_ASSERT(write(fd, "3000 100 big\n", 13) == 13);
  PT_ASSERT(ftruncate(fd, (off_t)1 << 30) == 0);
  close(fd);
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -EFBIG);
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_STR_EQ(ptp_perfmap_file_state_name(in.state, in.err), "refused: larger than 256 MiB");
  PT_ASSERT_STR_EQ(name(f, 0x3000), "(none)");
  PT_ASSERT(unlink(path) == 0);
  /* Another owner (root can make one; others skip this part). */
  if (geteuid() == 0) {
    write_file(path, "w", "4000 100 theirs\n");
    PT_ASSERT(chown(path, 65534, 65534) == 0);
    PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), -EPERM);
    ptp_perfmap_file_get_info(f, &in);
    PT_ASSERT_STR_EQ(ptp_perfmap_file_state_name(in.state, in.err), "refused: owned by another user");
    PT_ASSERT_STR_EQ(name(f, 0x4000), "(none)");
    PT_ASSERT(unlink(path) == 0);
  } else {
    printf("# not root: the other-owner case is not made\n");
  }
  /* Garbage around a good line: only the good line names anything. */
  write_file(path, "w", "\x01\x02 garbage\n5000 100 good\nffffffffffffffff ffffffff huge\n\n\n");
  PT_ASSERT_INT_EQ(ptp_perfmap_file_update(f), 0);
  PT_ASSERT_STR_EQ(name(f, 0x5000), "good");
  PT_ASSERT_STR_EQ(name(f, 0x1000), "kept");
  ptp_perfmap_file_get_info(f, &in);
  PT_ASSERT_UINT_EQ(in.map.bad, 4);
  PT_ASSERT(unlink(path) == 0);
  PT_ASSERT(unlink(real) == 0);
  ptp_perfmap_file_del(f);
  rmdir(dir);
}

PT_TEST(prof_perfmap_file_default_path) {
  ptp_perfmap_file *f;
  PT_ASSERT_INT_EQ(ptp_perfmap_file_new(&f, NULL), 0);
  ptp_perfmap_file_info in;
  ptp_perfmap_file_get_info(f, &in);
  char want[64];
  snprintf(want, sizeof want, "/tmp/perf-%ld.map", (long)getpid());
  PT_ASSERT_STR_EQ(in.path, want);
  PT_ASSERT_INT_EQ(in.state, PTP_PERFMAP_UNREAD);
  ptp_perfmap_file_del(f);
}
