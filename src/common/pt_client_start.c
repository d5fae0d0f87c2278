/*
 * pt_client_start.c - finding and starting the daemon: the state root, the
 * polytokend executable, the socket connect and the auto-start (see
 * pt_client_start.h; the IPC calls are pt_client.c).
 *
 * DESIGN
 *  - Nothing here knows the protocol: it hands pt_client_connect a
 *    connected O_NONBLOCK socket or an error with a message for the user.
 *  - Auto-start spawns polytokend detached (double fork, setsid) and polls
 *    its socket every 20 ms until POLYTOKEN_START_TIMEOUT_MS. The daemon's
 *    fatal startup error comes back through a pipe (fd DAEMON_ERROR_FD),
 *    so the reason reaches the user even when the disk is full.
 *  - Start races: a daemon of ours that exits because another one holds
 *    the lock (daemon.lock names it) is waited for, then started again.
 *  - Threads: any thread; touches only its arguments, the file system and
 *    the processes it starts.
 */
#include "common/pt_client_start.h"

#include "common/pt_client.h"
#include "common/pt_env.h"
#include "common/pt_file.h"
#include "common/pt_home.h" /* pt_home_resolve, pt_home_prepare */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static int64_t start_now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

char *pt_client_home(void) {
  char *h = NULL;
  return pt_home_resolve(NULL, &h, NULL, 0) == 0 ? h : NULL;
}

static int is_exec_file(const char *p) {
  struct stat st;
  return stat(p, &st) == 0 && S_ISREG(st.st_mode) && access(p, X_OK) == 0;
}

char *pt_client_find_daemon(void) {
  const char *env = getenv("POLYTOKEN_DAEMON");
  if (env && *env) return is_exec_file(env) ? strdup(env) : NULL;
  char self[PATH_MAX];
  ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
  if (n > 0) {
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash) {
      *slash = '\0';
      char *cand = NULL;
      if (asprintf(&cand, "%s/polytokend", self) >= 0) {
        if (is_exec_file(cand)) return cand;
        free(cand);
      }
    }
  }
  const char *path = getenv("PATH");
  if (!path) return NULL;
  char *copy = strdup(path);
  if (!copy) return NULL;
  char *save = NULL;
  for (char *dir = strtok_r(copy, ":", &save); dir; dir = strtok_r(NULL, ":", &save)) {
    char *cand = NULL;
    if (asprintf(&cand, "%s/polytokend", *dir ? dir : ".") < 0) break;
    if (is_exec_file(cand)) { free(copy); return cand; }
    free(cand);
  }
  free(copy);
  return NULL;
}

/* 1 if pid is gone or a zombie (its parent, init or a subreaper, may not have
 * reaped it yet). */
int pt_client_pid_gone(pid_t pid) {
  if (kill(pid, 0) != 0 && errno == ESRCH) return 1;
  char path[64], buf[256];
  snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 1;
  buf[n] = '\0';
  char *rp = strrchr(buf, ')');
  return rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
}

static int sock_path(const char *home, struct sockaddr_un *sa) {
  memset(sa, 0, sizeof *sa);
  sa->sun_family = AF_UNIX;
  int n = snprintf(sa->sun_path, sizeof sa->sun_path, "%s/daemon.sock", home);
  return (n < 0 || (size_t)n >= sizeof sa->sun_path) ? -ENAMETOOLONG : 0;
}

/* One connect attempt, with the checks of docs/ipc.md "Whose socket is
 * it": the socket file must be ours (lstat: a stranger's file there is
 * refused; a non-socket of ours is junk nobody listens on, which the
 * daemon replaces), and the process that accepted must run as our user
 * (SO_PEERCRED), checked before a single byte is sent. Returns a connected
 * fd, -ENOENT / -ECONNREFUSED (nothing listens), -EPERM with err filled
 * ("unsafe_socket") when a check fails, or another negative errno. */
static int try_connect(const char *home, pt_client_error *err) {
  struct sockaddr_un sa;
  int rc = sock_path(home, &sa);
  if (rc < 0) return rc;
  uid_t me = geteuid();
  struct stat st;
  if (lstat(sa.sun_path, &st) != 0) return -errno;
  if (st.st_uid != me) {
    pt_client_error_set(err, "unsafe_socket",
                        "%s is owned by another user (uid %u), not by you; not connecting to it",
                        sa.sun_path, (unsigned)st.st_uid);
    return -EPERM;
  }
  /* a file, a symlink (never followed): nothing of ours listens there */
  if (!S_ISSOCK(st.st_mode)) return -ECONNREFUSED;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return -errno;
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  struct ucred cr;
  socklen_t crlen = sizeof cr;
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &crlen) != 0) {
    int e = errno;
    close(fd);
    pt_client_error_set(err, "unsafe_socket", "cannot tell who listens on %s (%s); not sending anything",
                        sa.sun_path, strerror(e));
    return -EPERM;
  }
  if (cr.uid != me) {
    close(fd);
    pt_client_error_set(err, "unsafe_socket",
                        "the process listening on %s (pid %ld) runs as another user (uid %u), not as "
                        "you; nothing was sent to it",
                        sa.sun_path, (long)cr.pid, (unsigned)cr.uid);
    return -EPERM;
  }
  int fl = fcntl(fd, F_GETFL);
  fcntl(fd, F_SETFL, fl | O_NONBLOCK);
  return fd;
}

/* The descriptor number the daemon gets its startup-error pipe on
 * (`polytokend --error-fd 3`, see docs/daemon.md). */
#define DAEMON_ERROR_FD 3

/* Spawns polytokend detached. Double fork so the daemon is never our child
 * (no zombie in a long-running TUI); the grandchild pid comes back through a
 * pipe. *errfd_out receives the read end (O_NONBLOCK, caller closes) of a
 * second pipe whose write end the daemon holds as fd DAEMON_ERROR_FD: it
 * writes its fatal startup error there and closes it once it listens, so
 * the reason reaches us even when nothing can be written to the disk.
 * Returns the daemon pid or a negative errno with err filled. */
static pid_t spawn_daemon(const char *home, const char *log_path, int *errfd_out,
                          pt_client_error *err) {
  *errfd_out = -1;
  char *exe = pt_client_find_daemon();
  if (!exe) {
    pt_client_error_set(err, "daemon_start_failed",
            "cannot find polytokend (set POLYTOKEN_DAEMON or put it on PATH)");
    return -ENOENT;
  }
  /* Not fatal: on a full or read-only disk the daemon still starts (or
   * says why it cannot through the error pipe); its stderr then goes
   * nowhere. */
  int logfd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (logfd < 0) logfd = open("/dev/null", O_WRONLY | O_CLOEXEC);
  int pfd[2], efd[2] = {-1, -1};
  if (pipe2(pfd, O_CLOEXEC) != 0 || pipe2(efd, O_CLOEXEC) != 0) {
    int e = errno;
    pt_client_error_set(err, "daemon_start_failed", "pipe: %s", strerror(e));
    if (efd[0] < 0) { close(pfd[0]); close(pfd[1]); }
    if (logfd >= 0) close(logfd);
    free(exe);
    return -e;
  }
  char errfd_arg[16];
  snprintf(errfd_arg, sizeof errfd_arg, "%d", DAEMON_ERROR_FD);
  pid_t mid = fork();
  if (mid < 0) {
    int e = errno;
    pt_client_error_set(err, "daemon_start_failed", "fork: %s", strerror(e));
    close(pfd[0]); close(pfd[1]); close(efd[0]); close(efd[1]);
    if (logfd >= 0) close(logfd);
    free(exe);
    return -e;
  }
  if (mid == 0) {
    /* Intermediate child: new session, fork the daemon, report, exit. Only
     * async-signal-safe calls from here on (we may be a threaded process). */
    setsid();
    pid_t d = fork();
    if (d == 0) {
      int devnull = open("/dev/null", O_RDONLY | O_CLOEXEC);
      if (devnull >= 0) dup2(devnull, 0); /* dup2 clears CLOEXEC on fd 0 */
      if (logfd >= 0) {
        dup2(logfd, 1);
        dup2(logfd, 2);
      }
      /* efd[1] is >= 3 (0-2 are taken), so dup2 never clobbers 0-2;
       * dup2 onto itself would keep CLOEXEC, hence the fcntl. */
      if (efd[1] == DAEMON_ERROR_FD) fcntl(efd[1], F_SETFD, 0);
      else dup2(efd[1], DAEMON_ERROR_FD);
      /* Default signal dispositions and an empty signal mask for the
       * daemon: the mask survives exec, and a TUI thread that blocked
       * SIGTERM/SIGINT would otherwise hand the daemon a mask in which
       * its shutdown signals never arrive. */
      signal(SIGPIPE, SIG_DFL);
      signal(SIGINT, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      sigprocmask(SIG_SETMASK, &none, NULL);
      char *argv[] = {exe, (char *)"--home", (char *)home, (char *)"--error-fd", errfd_arg, NULL};
      execv(exe, argv);
      static const char msg[] = "polytoken: exec polytokend failed\n";
      ssize_t w = write(2, msg, sizeof msg - 1);
      w = write(DAEMON_ERROR_FD, msg, sizeof msg - 1);
      (void)w;
      _exit(127);
    }
    ssize_t w = write(pfd[1], &d, sizeof d);
    (void)w;
    _exit(d < 0 ? 1 : 0);
  }
  close(pfd[1]);
  close(efd[1]);
  if (logfd >= 0) close(logfd);
  free(exe);
  pid_t daemon_pid = -1;
  ssize_t r;
  do r = read(pfd[0], &daemon_pid, sizeof daemon_pid); while (r < 0 && errno == EINTR);
  close(pfd[0]);
  int st;
  while (waitpid(mid, &st, 0) < 0 && errno == EINTR) {}
  if (r != (ssize_t)sizeof daemon_pid || daemon_pid <= 0) {
    close(efd[0]);
    pt_client_error_set(err, "daemon_start_failed", "could not fork polytokend");
    return -ECHILD;
  }
  fcntl(efd[0], F_SETFL, fcntl(efd[0], F_GETFL) | O_NONBLOCK);
  *errfd_out = efd[0];
  return daemon_pid;
}

/* Reads what the daemon wrote to its error pipe so far (non-blocking)
 * into buf (NUL-terminated, at most cap - 1 bytes kept). Returns 1 at EOF
 * (the daemon closed it: listening, or exited), else 0. */
static int read_daemon_errors(int fd, char *buf, size_t cap, size_t *len) {
  for (;;) {
    char tmp[512];
    ssize_t n = read(fd, tmp, sizeof tmp);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return 0; /* EAGAIN: nothing more yet */
    if (n == 0) return 1;
    size_t room = cap - 1 - *len;
    size_t k = (size_t)n < room ? (size_t)n : room;
    memcpy(buf + *len, tmp, k);
    *len += k;
    buf[*len] = '\0';
  }
}

/* The first non-empty line of the daemon's startup errors, in line (cap
 * bytes), or "" if it wrote none. */
static void first_line(const char *text, char *line, size_t cap) {
  while (*text == '\n') text++;
  size_t n = strcspn(text, "\n");
  if (n >= cap) n = cap - 1;
  memcpy(line, text, n);
  line[n] = '\0';
}

/* The pid recorded in $home/daemon.lock if that process is still alive,
 * else 0. The daemon writes its pid there after taking the lock and empties
 * the file just before it exits, so a live pid here is a daemon that holds
 * (or is about to release) the lock. Reading never takes the lock, so it
 * cannot make a starting daemon fail. */
static pid_t lock_holder(const char *home) {
  char path[PATH_MAX], buf[32];
  if (snprintf(path, sizeof path, "%s/daemon.lock", home) >= (int)sizeof path) return 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = '\0';
  long v = strtol(buf, NULL, 10);
  if (v <= 0 || v > INT_MAX) return 0;
  return pt_client_pid_gone((pid_t)v) ? 0 : (pid_t)v;
}

static int start_timeout_ms(void) {
  /* Strict (pt_env.h): "10abc" is not 10. The client has no log of its own;
   * a bad value falls back to the default. */
  return (int)pt_env_int("POLYTOKEN_START_TIMEOUT_MS", 10000, 1, INT_MAX - 1, NULL, 0);
}

typedef struct start_state {
  int errfd;           /* read end of the current daemon's error pipe, or -1 */
  char errors[2048];   /* what that daemon wrote to it */
  size_t errors_len;
} start_state;

/* (Re)spawns and starts watching the new daemon's error pipe. */
static pid_t start_one(const char *home, const char *log_path, start_state *ss, pt_client_error *err) {
  if (ss->errfd >= 0) close(ss->errfd);
  ss->errors_len = 0;
  ss->errors[0] = '\0';
  return spawn_daemon(home, log_path, &ss->errfd, err);
}

static int autostart(const char *home, int *fd_out, pt_client_error *err) {
  char *logs = NULL, *log_path = NULL;
  int rc;
  /* The root exists and passed pt_home_prepare (pt_client_start_connect);
   * one that others may read is tightened by the daemon, which logs that
   * it did. */
  if (asprintf(&logs, "%s/logs", home) < 0) return -ENOMEM;
  if (asprintf(&log_path, "%s/daemon.stderr", logs) < 0) { free(logs); return -ENOMEM; }
  rc = pt_mkdir_p(logs, 0700);
  free(logs);
  if (rc < 0) {
    pt_client_error_set(err, "daemon_start_failed", "cannot create the log directory: %s", strerror(-rc));
    free(log_path);
    return rc;
  }
  start_state ss = {.errfd = -1};
  /* The home goes to the daemon as --home (no setenv: the process
   * environment is not ours to change, and other threads may read it). */
  pid_t pid = start_one(home, log_path, &ss, err);
  if (pid < 0) { free(log_path); return pid; }
  int limit = start_timeout_ms();
  int64_t deadline = start_now_ms() + limit;
  int dead_checks = 0;
  for (;;) {
    int fd = try_connect(home, err);
    if (fd >= 0) { *fd_out = fd; rc = 0; goto out; }
    if (fd == -EPERM) { rc = fd; goto out; }
    if (ss.errfd >= 0) read_daemon_errors(ss.errfd, ss.errors, sizeof ss.errors, &ss.errors_len);
    pid_t holder = pt_client_pid_gone(pid) ? lock_holder(home) : 0;
    if (holder > 0 && holder != pid) {
      /* Ours exited because another daemon holds the lock: one that is
       * still stopping (its socket is gone, its process not yet: `daemon
       * stop` then Ctrl-R), or one that another client is starting. Wait
       * until that one listens or is gone; if gone, start ours again. */
      while (!pt_client_pid_gone(holder) && start_now_ms() < deadline) {
        fd = try_connect(home, err);
        if (fd >= 0) { *fd_out = fd; rc = 0; goto out; }
        if (fd == -EPERM) { rc = fd; goto out; }
        struct timespec ts = {0, 20 * 1000 * 1000};
        nanosleep(&ts, NULL);
      }
      if (start_now_ms() < deadline) {
        pid = start_one(home, log_path, &ss, err);
        if (pid < 0) { rc = pid; goto out; }
        dead_checks = 0;
        continue;
      }
    }
    /* A daemon that exited may have lost a start race to another one that
     * is about to listen: allow a few more attempts before giving up. */
    if (pt_client_pid_gone(pid) && ++dead_checks > 25) {
      char line[400];
      if (ss.errfd >= 0) read_daemon_errors(ss.errfd, ss.errors, sizeof ss.errors, &ss.errors_len);
      first_line(ss.errors, line, sizeof line);
      if (line[0])
        pt_client_error_set(err, "daemon_start_failed", "polytokend exited during startup: %s (log: %s)",
                            line, log_path);
      else
        pt_client_error_set(err, "daemon_start_failed",
                            "polytokend exited during startup without saying why; see %s", log_path);
      rc = -ECHILD;
      goto out;
    }
    if (start_now_ms() >= deadline) {
      pt_client_error_set(err, "daemon_start_failed",
              "polytokend did not open its socket within %d ms; see %s", limit, log_path);
      rc = -ETIMEDOUT;
      goto out;
    }
    struct timespec ts = {0, 20 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
out:
  if (ss.errfd >= 0) close(ss.errfd);
  free(log_path);
  return rc;
}

int pt_client_start_connect(const char *home, int autostart_daemon, pt_client_error *err) {
  /* The state root first (pt_home.h): a root another user can write to
   * or replace is refused before anything in it is used. Without
   * autostart a missing root just means "not running". */
  char why[sizeof err->message];
  int fd = pt_home_prepare(home, autostart_daemon ? PT_HOME_CREATE : 0, NULL, why, sizeof why);
  if (fd == -ENOENT && !autostart_daemon) {
    pt_client_error_set(err, "not_running", "the daemon is not running");
    return fd;
  }
  if (fd < 0) {
    pt_client_error_set(err, fd == -EPERM ? "unsafe_state_root" : "connect_failed", "%s", why);
    return fd;
  }
  fd = try_connect(home, err);
  if (fd == -ENAMETOOLONG) {
    pt_client_error_set(err, "connect_failed", "socket path too long: %s/daemon.sock", home);
    return fd;
  }
  if (fd == -EPERM) return fd;
  if (fd < 0 && (fd == -ENOENT || fd == -ECONNREFUSED)) {
    if (!autostart_daemon) {
      pt_client_error_set(err, "not_running", "the daemon is not running");
      return fd;
    }
    int rc = autostart(home, &fd, err);
    if (rc < 0) return rc;
  } else if (fd < 0) {
    pt_client_error_set(err, "connect_failed", "cannot connect to %s/daemon.sock: %s", home, strerror(-fd));
    return fd;
  }
  return fd;
}
