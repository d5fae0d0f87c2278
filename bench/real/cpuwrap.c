/*
 * cpuwrap - runs one command and reports the CPU its whole process tree used
 * (the bench's "real CPU" of a profiled program; bench/real/real.py).
 *
 *   cpuwrap OUT [NAME=VALUE]... -- CMD [ARG]...
 *
 * Sets the NAME=VALUE pairs in the child only (so LD_PRELOAD profiles the
 * program, not this wrapper), execs CMD, waits for it with wait4 and writes
 * "user_s sys_s\n" to OUT: the child's CPU plus that of every descendant it
 * waited for (gcc's cc1 and as). Why a wrapper: under `perf record` the
 * process tree also contains perf itself, whose CPU belongs in the overhead
 * figure but not in the completeness denominator.
 * Exit status: the child's (128 + signal if it was killed); 2 on usage or
 * setup errors, with a message on stderr.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv) {
  if (argc < 4) goto usage;
  int sep = 0;
  for (int i = 2; i < argc; i++)
    if (!strcmp(argv[i], "--")) { sep = i; break; }
  if (!sep || sep + 1 >= argc) goto usage;

  pid_t pid = fork();
  if (pid < 0) { perror("cpuwrap: fork"); return 2; }
  if (pid == 0) {
    for (int i = 2; i < sep; i++) {
      char *eq = strchr(argv[i], '=');
      if (!eq) { fprintf(stderr, "cpuwrap: not NAME=VALUE: %s\n", argv[i]); _exit(2); }
      *eq = '\0';
      if (setenv(argv[i], eq + 1, 1)) { perror("cpuwrap: setenv"); _exit(2); }
    }
    execvp(argv[sep + 1], argv + sep + 1);
    fprintf(stderr, "cpuwrap: exec %s: %s\n", argv[sep + 1], strerror(errno));
    _exit(127);
  }
  int st;
  struct rusage ru;
  while (wait4(pid, &st, 0, &ru) < 0)
    if (errno != EINTR) { perror("cpuwrap: wait4"); return 2; }
  FILE *f = fopen(argv[1], "w");
  if (!f) { perror("cpuwrap: open OUT"); return 2; }
  fprintf(f, "%.6f %.6f\n", ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6,
          ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6);
  if (fclose(f)) { perror("cpuwrap: write OUT"); return 2; }
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return WEXITSTATUS(st);

usage:
  fprintf(stderr, "usage: cpuwrap OUT [NAME=VALUE]... -- CMD [ARG]...\n");
  return 2;
}
