/* pt_fmt.c - sizes and ages for pickers (see pt_fmt.h). */
#include "common/pt_fmt.h"

#include <inttypes.h>
#include <stdio.h>
#include <time.h>

void pt_fmt_size(uint64_t n, char *out, size_t cap) {
  if (n < 1024) snprintf(out, cap, "%" PRIu64 " B", n);
  else if (n < (1u << 20)) snprintf(out, cap, "%.1f KiB", (double)n / 1024.0);
  else snprintf(out, cap, "%.1f MiB", (double)n / (1024.0 * 1024.0));
}

void pt_fmt_age(int64_t t, int64_t now, char *out, size_t cap) {
  int64_t d = now - t;
  if (d < 0) d = 0;
  if (d < 60) snprintf(out, cap, "%" PRId64 " s ago", d);
  else if (d < 3600) snprintf(out, cap, "%" PRId64 " min ago", d / 60);
  else if (d < 86400) snprintf(out, cap, "%" PRId64 " h ago", d / 3600);
  else snprintf(out, cap, "%" PRId64 " d ago", d / 86400);
}

void pt_fmt_utc_ms(int64_t ns, int rfc3339, const char *unknown, char *out, size_t cap) {
  if (cap == 0) return;
  if (ns <= 0) {
    snprintf(out, cap, "%s", unknown);
    return;
  }
  time_t t = (time_t)(ns / 1000000000);
  struct tm tm;
  gmtime_r(&t, &tm);
  size_t n = strftime(out, cap, rfc3339 ? "%Y-%m-%dT%H:%M:%S" : "%Y-%m-%d %H:%M:%S", &tm);
  snprintf(out + n, cap - n, ".%03d%s", (int)(ns % 1000000000 / 1000000), rfc3339 ? "Z" : "");
}
