/* Unit tests for the IPC core's libuv driver (src/daemon/pd_ipc_uv.c) on a
 * real loop and a real Unix socket in a temporary directory: the socket's
 * mode, bytes both ways, EOF, the close of everything with done called,
 * stop accepting, and a loop left with no handle open. */
#include "pt_test.h"
#include "daemon/pd_ipc_uv.h"
#include "common/pt_version.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

static void m_echo(pd_call *call, json_t *params, void *ctx) {
  (void)ctx;
  pd_call_reply(call, json_pack("{s:O}", "params", params));
}

static int connect_to(const char *path) {
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  PT_ASSERT(fd >= 0);
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  snprintf(sa.sun_path, sizeof sa.sun_path, "%s", path);
  if (connect(fd, (struct sockaddr *)&sa, sizeof sa) != 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  PT_ASSERT_INT_EQ(fcntl(fd, F_SETFL, O_NONBLOCK), 0);
  return fd;
}

/* Runs the loop and reads fd until EOF; returns what was read. */
static char *read_to_eof(uv_loop_t *loop, int fd) {
  size_t cap = 65536, len = 0;
  char *buf = malloc(cap);
  for (int spins = 0; spins < 200000; spins++) {
    uv_run(loop, UV_RUN_NOWAIT);
    ssize_t n = read(fd, buf + len, cap - len - 1);
    if (n == 0) {
      buf[len] = 0;
      return buf;
    }
    if (n > 0) len += (size_t)n;
    else PT_ASSERT_MSG(errno == EAGAIN, "read: %s", strerror(errno));
    if (n < 0) usleep(100);
  }
  PT_ASSERT_MSG(0, "no EOF from the driver; got %zu bytes", len);
  return NULL;
}

static int g_done;
static void on_done(void *ctx) {
  (void)ctx;
  g_done++;
}

PT_TEST(daemon_ipc_uv_serves_a_unix_socket) {
  char *dir = pt_tmpdir("ipcuv");
  char path[512];
  snprintf(path, sizeof path, "%s/daemon.sock", dir);
  uv_loop_t loop;
  PT_ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  pd_ipc_uv *s = NULL;
  PT_ASSERT_INT_EQ(pd_ipc_uv_new(&s, &loop, NULL), 0);
  pd_ipc *ipc = pd_ipc_uv_core(s);
  PT_ASSERT_INT_EQ(pd_ipc_register_method(ipc, "echo", m_echo, NULL), 0);
  /* a leftover socket file is replaced */
  PT_ASSERT_INT_EQ(close(open(path, O_WRONLY | O_CREAT, 0644)), 0);
  PT_ASSERT_INT_EQ(pd_ipc_uv_listen(s, path), 0);
  struct stat st;
  PT_ASSERT_INT_EQ(stat(path, &st), 0);
  PT_ASSERT(S_ISSOCK(st.st_mode));
  PT_ASSERT_UINT_EQ(st.st_mode & 0777, 0600);

  /* requests in, replies out, then EOF both ways */
  int fd = connect_to(path);
  PT_ASSERT(fd >= 0);
  const char req[] = "{\"id\":1,\"method\":\"hello\",\"params\":{\"protocol\":1}}\n"
                     "{\"id\":2,\"method\":\"echo\",\"params\":{\"x\":[1,\"y\"]}}\n";
  PT_ASSERT_INT_EQ(write(fd, req, sizeof req - 1), (ssize_t)(sizeof req - 1));
  PT_ASSERT_INT_EQ(shutdown(fd, SHUT_WR), 0);
  char *got = read_to_eof(&loop, fd);
  char want[512];
  snprintf(want, sizeof want,
           "{\"id\":1,\"result\":{\"protocol\":1,\"version\":\"%s\",\"profiling\":%s,\"pid\":%ld}}\n"
           "{\"id\":2,\"result\":{\"params\":{\"x\":[1,\"y\"]}}}\n",
           pt_version(), pt_is_profiling_build() ? "true" : "false", (long)getpid());
  PT_ASSERT_STR_EQ(got, want);
  free(got);
  close(fd);
  for (int i = 0; i < 100 && pd_ipc_client_count(ipc) > 0; i++) uv_run(&loop, UV_RUN_NOWAIT);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 0);

  /* an idle client is closed by close_all; done follows its close */
  fd = connect_to(path);
  PT_ASSERT(fd >= 0);
  for (int i = 0; i < 100 && pd_ipc_client_count(ipc) == 0; i++) uv_run(&loop, UV_RUN_NOWAIT);
  PT_ASSERT_UINT_EQ(pd_ipc_client_count(ipc), 1);
  pd_ipc_uv_stop_accepting(s);
  PT_ASSERT(stat(path, &st) != 0 && errno == ENOENT);
  PT_ASSERT(connect_to(path) < 0);
  pd_ipc_uv_close_all(s, 60000, on_done, NULL);
  PT_ASSERT_INT_EQ(g_done, 0); /* from a later callback */
  got = read_to_eof(&loop, fd);
  PT_ASSERT_STR_EQ(got, "");
  free(got);
  for (int i = 0; i < 100 && g_done == 0; i++) uv_run(&loop, UV_RUN_NOWAIT);
  PT_ASSERT_INT_EQ(g_done, 1);
  close(fd);

  /* with nobody left, close_all is done at once */
  pd_ipc_uv_close_all(s, 60000, on_done, NULL);
  PT_ASSERT_INT_EQ(g_done, 2);
  pd_ipc_uv_close(s);
  uv_run(&loop, UV_RUN_DEFAULT);
  pd_ipc_uv_del(s);
  PT_ASSERT_INT_EQ(uv_loop_close(&loop), 0); /* no handle left behind */
  pt_rm_rf(dir);
}

PT_TEST(daemon_ipc_uv_listen_errors) {
  uv_loop_t loop;
  PT_ASSERT_INT_EQ(uv_loop_init(&loop), 0);
  pd_ipc_uv *s = NULL;
  PT_ASSERT_INT_EQ(pd_ipc_uv_new(&s, &loop, NULL), 0);
  char longp[200];
  memset(longp, 'a', sizeof longp - 1);
  longp[0] = '/';
  longp[sizeof longp - 1] = 0;
  PT_ASSERT_INT_EQ(pd_ipc_uv_listen(s, longp), -ENAMETOOLONG);
  PT_ASSERT(pd_ipc_uv_listen(s, "/nonexistent-dir/daemon.sock") < 0);
  pd_ipc_uv_close(s); /* never listening: nothing to close */
  uv_run(&loop, UV_RUN_DEFAULT);
  pd_ipc_uv_del(s);
  PT_ASSERT_INT_EQ(uv_loop_close(&loop), 0);
}
