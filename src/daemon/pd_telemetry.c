/* pd_telemetry.c - periodic metrics. See pd_telemetry.h. */
#include "daemon/pd_telemetry.h"
#include "daemon/pd_log.h"
#include "daemon/pd_loop.h"
#include "common/pt_file.h"
#include "common/pt_jsonl.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

static struct {
  int fd;
  int open;
  uv_timer_t timer;
  pt_task task; /* "timer.telemetry" */
  pd_telemetry_source src;
  uint64_t start_ms;
  uv_loop_t *loop;
} g = {.fd = -1};

static long rss_kb(void) {
  /* current RSS: /proc/self/statm field 2 (pages) */
  FILE *f = fopen("/proc/self/statm", "re");
  long pages = 0, size = 0;
  if (f) {
    if (fscanf(f, "%ld %ld", &size, &pages) != 2) pages = 0;
    fclose(f);
  }
  return pages * (sysconf(_SC_PAGESIZE) / 1024);
}

static void write_line(const char *event) {
  if (g.fd < 0) return;
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  char ts[32];
  pd_time_rfc3339(ts, sizeof ts);
  json_t *j = json_pack(
      "{s:s, s:s, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "ts", ts, "event", event,
      "uptime_ms", (json_int_t)(uv_now(g.loop) - g.start_ms), "sessions",
      (json_int_t)g.src.sessions(), "turns_total", (json_int_t)g.src.turns_total(),
      "turns_running", (json_int_t)g.src.turns_running(), "clients",
      (json_int_t)g.src.clients(), "cpu_user_ms",
      (json_int_t)(ru.ru_utime.tv_sec * 1000 + ru.ru_utime.tv_usec / 1000), "cpu_sys_ms",
      (json_int_t)(ru.ru_stime.tv_sec * 1000 + ru.ru_stime.tv_usec / 1000), "rss_kb",
      (json_int_t)rss_kb(), "maxrss_kb", (json_int_t)ru.ru_maxrss);
  char *line;
  size_t len;
  if (j && pt_jsonl_dump(j, 0, &line, &len) == 0) {
    /* One whole line or nothing: a short write (disk full) is cut back so
     * the next line does not continue a broken one. */
    struct stat st;
    off_t before = fstat(g.fd, &st) == 0 ? st.st_size : -1;
    ssize_t w = write(g.fd, line, len);
    if (w != (ssize_t)len) {
      pd_warn("telemetry: write failed: %s", w < 0 ? strerror(errno) : "short write");
      if (w > 0 && before >= 0 && ftruncate(g.fd, before) != 0)
        pd_warn("telemetry: cannot cut back a partial line: %s", strerror(errno));
    }
    free(line);
  }
  json_decref(j);
}

static void tick(uv_timer_t *t) {
  (void)t;
  PD_POLL(&g.task);
  pd_task_wake(&g.task);
  write_line("tick");
}

int pd_telemetry_start(uv_loop_t *loop, const char *dir, int interval_ms,
                       const pd_telemetry_source *src) {
  int r = pt_mkdir_p(dir, 0700);
  if (r < 0) return r;
  char path[4096];
  snprintf(path, sizeof path, "%s/telemetry.jsonl", dir);
  g.fd = open(path, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
  if (g.fd < 0) return -errno;
  g.src = *src;
  g.loop = loop;
  g.start_ms = uv_now(loop);
  uint64_t interval = interval_ms > 0 ? (uint64_t)interval_ms : 10000;
  uv_timer_init(loop, &g.timer);
  /* the timer alone does not keep the loop alive */
  uv_unref((uv_handle_t *)&g.timer);
  PD_TASK_START(&g.task, "timer.telemetry");
  uv_timer_start(&g.timer, tick, interval, interval);
  pd_task_arm(&g.task);
  g.open = 1;
  write_line("start");
  return 0;
}

static void on_closed(uv_handle_t *h) {
  (void)h;
  PD_TASK_END(&g.task);
}

void pd_telemetry_close(void) {
  if (!g.open) return;
  g.open = 0;
  write_line("close");
  uv_timer_stop(&g.timer);
  pd_task_disarm(&g.task);
  uv_close((uv_handle_t *)&g.timer, on_closed);
  fsync(g.fd);
  close(g.fd);
  g.fd = -1;
}
