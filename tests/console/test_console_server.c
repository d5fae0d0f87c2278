/* Unit tests of the server's lifecycle: bind from the environment, a taken
 * port (one log line, error returned), a refused non-loopback address, one
 * server per process, restart, and an HTTP/2 SETTINGS answer to the preface.
 * The full protocol is exercised by tests/console/console_grpc_test.sh. */
#include "pt_test.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/pt_console_env.h"
#include "ptprof_console.h"

typedef struct logcap {
  int n;
  int last_level;
  char last[256];
} logcap;

static void cap_log(int level, const char *line, void *user_data) {
  logcap *c = user_data;
  c->n++;
  c->last_level = level;
  snprintf(c->last, sizeof c->last, "%s", line);
}

static int listen_any(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  PT_ASSERT(bind(fd, (struct sockaddr *)&a, sizeof a) == 0);
  PT_ASSERT(listen(fd, 1) == 0);
  socklen_t l = sizeof a;
  getsockname(fd, (struct sockaddr *)&a, &l);
  *port = ntohs(a.sin_port);
  return fd;
}

PT_TEST(console_server_port_taken_logs_one_line) {
  uint16_t port;
  int fd = listen_any(&port);
  char bind[64];
  snprintf(bind, sizeof bind, "127.0.0.1:%u", (unsigned)port);
  setenv("PTCON_TEST_BIND", bind, 1);
  logcap c = {0};
  ptcon_server *s = NULL;
  PT_ASSERT_INT_EQ(pt_console_start(&s, "PTCON_TEST_BIND", "127.0.0.1:1", cap_log, &c),
                   -EADDRINUSE);
  PT_ASSERT(s == NULL);
  PT_ASSERT_INT_EQ(c.n, 1);
  PT_ASSERT(strstr(c.last, "task console disabled") != NULL);
  PT_ASSERT_INT_EQ(c.last_level, PTCON_LOG_ERROR);
  PT_ASSERT(strstr(c.last, bind) != NULL);
  PT_ASSERT(strstr(c.last, "in use") != NULL);
  /* The instrumentation keeps working without a server. */
  uint64_t t = ptcon_task_spawn("no-console", "task", __FILE__, __LINE__, NULL, 0);
  PT_ASSERT(t != 0);
  ptcon_task_poll_begin(t);
  ptcon_task_poll_end(t);
  ptcon_task_end(t);
  close(fd);
}

PT_TEST(console_server_refuses_non_loopback) {
  setenv("PTCON_TEST_BIND", "0.0.0.0:0", 1);
  unsetenv("POLYTOKEN_CONSOLE_ALLOW_REMOTE");
  logcap c = {0};
  ptcon_server *s = NULL;
  PT_ASSERT_INT_EQ(pt_console_start(&s, "PTCON_TEST_BIND", "127.0.0.1:0", cap_log, &c),
                   -EPERM);
  PT_ASSERT_INT_EQ(c.n, 1);
  PT_ASSERT(strstr(c.last, "non-loopback") != NULL);
  setenv("PTCON_TEST_BIND", "not-an-address", 1);
  PT_ASSERT_INT_EQ(pt_console_start(&s, "PTCON_TEST_BIND", "127.0.0.1:0", cap_log, &c),
                   -EINVAL);
  PT_ASSERT_INT_EQ(c.n, 2);
}

PT_TEST(console_server_one_per_process_and_restart) {
  unsetenv("PTCON_TEST_BIND");   /* -> the default below */
  logcap c = {0};
  ptcon_server *s = NULL, *s2 = NULL;
  PT_ASSERT_INT_EQ(pt_console_start(&s, "PTCON_TEST_BIND", "127.0.0.1:0", cap_log, &c), 0);
  PT_ASSERT(ptcon_server_port(s) != 0);
  PT_ASSERT(strstr(c.last, "listening") != NULL);
  PT_ASSERT_INT_EQ(c.last_level, PTCON_LOG_INFO);
  PT_ASSERT_INT_EQ(pt_console_start(&s2, "PTCON_TEST_BIND", "127.0.0.1:0", cap_log, &c),
                   -EBUSY);
  uint64_t t = ptcon_task_spawn("across-restart", "task", __FILE__, __LINE__, NULL, 0);
  ptcon_task_poll_begin(t);
  ptcon_task_poll_end(t);
  ptcon_server_del(s);
  ptcon_task_end(t);   /* no consumer now: the slot is reaped at once */
  ptcon_instrument_stats is;
  ptcon_instrument_get_stats(&is);
  PT_ASSERT_UINT_EQ(is.live_tasks, 0);
  PT_ASSERT_INT_EQ(pt_console_start(&s2, "PTCON_TEST_BIND", "127.0.0.1:0", cap_log, &c), 0);
  ptcon_server_del(s2);
  ptcon_server_del(NULL);
}

PT_TEST(console_server_answers_http2_preface) {
  ptcon_server_options o;
  ptcon_server_options_init(&o);
  o.bind = "127.0.0.1:0";
  ptcon_server *s;
  PT_ASSERT_INT_EQ(ptcon_server_new(&s, &o), 0);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(ptcon_server_port(s)),
                          .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  PT_ASSERT(connect(fd, (struct sockaddr *)&a, sizeof a) == 0);
  static const char pre[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0";
  PT_ASSERT(write(fd, pre, sizeof pre - 1) == (ssize_t)(sizeof pre - 1));
  uint8_t hdr[9];
  size_t got = 0;
  while (got < sizeof hdr) {
    ssize_t n = read(fd, hdr + got, sizeof hdr - got);
    PT_ASSERT(n > 0);
    got += (size_t)n;
  }
  PT_ASSERT_UINT_EQ(hdr[3], 4);   /* the server's first frame: SETTINGS */
  PT_ASSERT_UINT_EQ(hdr[4], 0);   /* not an ACK */
  close(fd);
  ptcon_server_del(s);
}
