/* tui_review.c - the attachment review text (see tui_review.h). */
#include "tui/tui_review.h"

#include "common/pt_fmt.h"
#include "common/pt_pprof_summary.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char tui_review_notice[] =
    "Attachments are sent raw and unsanitized, exactly as shown here. A CPU profile can "
    "contain symbolized stack frames with build-machine paths and internal symbol names; "
    "a log or telemetry file contains what the daemon recorded. Review them before sending "
    "(docs/feedback.md).";

static const char *jstr(json_t *o, const char *k) {
  json_t *v = json_object_get(o, k);
  return json_is_string(v) ? json_string_value(v) : "";
}

typedef struct sbuf {
  char *s;
  size_t n, cap;
  int oom;
} sbuf;

static void sb_printf(sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void sb_printf(sbuf *b, const char *fmt, ...) {
  if (b->oom) return;
  va_list ap;
  va_start(ap, fmt);
  char tmp[1024];
  int k = vsnprintf(tmp, sizeof tmp, fmt, ap);
  va_end(ap);
  if (k < 0) return;
  size_t len = (size_t)k < sizeof tmp ? (size_t)k : sizeof tmp - 1;
  if (b->n + len + 1 > b->cap) {
    size_t cap = (b->cap ? b->cap * 2 : 1024) + len;
    char *s = realloc(b->s, cap);
    if (!s) { b->oom = 1; return; }
    b->s = s;
    b->cap = cap;
  }
  memcpy(b->s + b->n, tmp, len);
  b->n += len;
  b->s[b->n] = '\0';
}

int tui_review_is_profile(const char *kind) {
  return strcmp(kind, "cpu-profile") == 0 || strcmp(kind, "tui-cpu-profile") == 0 ||
         strcmp(kind, "cpu-profile-merged") == 0 || strcmp(kind, "tui-cpu-profile-merged") == 0;
}

const char *tui_review_window(json_t *entry, char *buf, size_t n) {
  json_t *s = json_object_get(entry, "samples"), *d = json_object_get(entry, "duration_ns");
  if (!json_is_integer(s) || !json_is_integer(d)) {
    snprintf(buf, n, "%s", "");
    return buf;
  }
  long long k = (long long)json_integer_value(s);
  snprintf(buf, n, "%.1f s, %lld sample%s", (double)json_integer_value(d) / 1e9, k,
           k == 1 ? "" : "s");
  return buf;
}

char *tui_review_describe(json_t *entry, const uint8_t *data, size_t len) {
  sbuf b = {0};
  char size[32];
  pt_fmt_size(len, size, sizeof size);
  const char *kind = jstr(entry, "kind");
  sb_printf(&b, "%s\n", jstr(entry, "label"));
  sb_printf(&b, "  kind:    %s (from the %s)\n", kind, jstr(entry, "source"));
  if (json_is_true(json_object_get(entry, "built")))
    sb_printf(&b, "  file:    %s (built by the daemon from the kept snapshots; no such file)\n",
              jstr(entry, "path"));
  else
    sb_printf(&b, "  file:    %s\n", *jstr(entry, "file") ? jstr(entry, "file") : jstr(entry, "path"));
  sb_printf(&b, "  size:    %s (%zu bytes)\n", size, len);
  sb_printf(&b, "  created: %s\n", jstr(entry, "created"));
  sb_printf(&b, "  sha256:  %s\n", jstr(entry, "sha256"));
  if (tui_review_is_profile(kind)) {
    pt_pprof_summary s;
    int r = pt_pprof_summarize(data, len, 5, &s);
    if (r == 0) {
      double dur = (double)s.duration_ns / 1e9;
      double cpu = (double)s.samples * (double)s.period / 1e9;
      sb_printf(&b, "  samples: %" PRId64 " (%.2f s of CPU) in %zu stacks\n", s.samples, cpu,
                s.n_stacks);
      sb_printf(&b, "  duration: %.2f s\n", dur);
      int snapshot = !strstr(kind, "-merged");
      if (snapshot && (s.samples < TUI_REVIEW_FEW_SAMPLES || s.duration_ns < TUI_REVIEW_SHORT_NS))
        sb_printf(&b,
                  "  note: this snapshot is nearly empty (%" PRId64 " sample%s in %.2f s): a\n"
                  "  snapshot covers only the time since the one before it. The picker also\n"
                  "  offers the session's kept snapshots merged into one profile:\n"
                  "  \"%s, N kept snapshots merged\".\n",
                  s.samples, s.samples == 1 ? "" : "s", dur,
                  strncmp(kind, "tui-", 4) == 0 ? "TUI CPU profile (pprof)" : "CPU profile (pprof)");
      sb_printf(&b, "  top functions (flat: samples in the function itself; cum: with callees):\n");
      sb_printf(&b, "      flat  flat%%     cum  function\n");
      for (size_t i = 0; i < s.n_top; i++) {
        double pct = s.samples ? 100.0 * (double)s.top[i].flat / (double)s.samples : 0.0;
        sb_printf(&b, "    %6" PRId64 " %5.1f%% %7" PRId64 "  %s\n", s.top[i].flat, pct,
                  s.top[i].cum, s.top[i].name);
      }
      if (s.n_top == 0) sb_printf(&b, "    (no samples)\n");
      pt_pprof_summary_clear(&s);
    } else {
      sb_printf(&b, "  (cannot decode this profile: %s)\n",
                r == -EFBIG ? "too large" : "not a valid gzip'd pprof file");
    }
  } else {
    /* Logs and telemetry: the last lines give an idea of the content. */
    size_t start = len, lines = 0;
    while (start > 0 && lines < 4) {
      start--;
      if (data[start] == '\n' && start + 1 < len) lines++;
    }
    if (lines == 4) start++;
    sb_printf(&b, "  last lines:\n");
    size_t i = start;
    while (i < len) {
      size_t j = i;
      while (j < len && data[j] != '\n') j++;
      char line[160];
      size_t k = 0;
      for (size_t x = i; x < j && k < sizeof line - 1; x++)
        line[k++] = (data[x] >= 0x20 && data[x] < 0x7f) ? (char)data[x] : '?';
      line[k] = '\0';
      sb_printf(&b, "    %s\n", line);
      i = j + 1;
    }
  }
  if (tui_review_is_profile(kind))
    sb_printf(&b, "  Sent raw and unsanitized: can contain symbolized stack frames with\n"
                  "  build-machine paths and internal symbol names.\n");
  else
    sb_printf(&b, "  Sent raw and unsanitized: everything the daemon recorded in it\n"
                  "  (paths, session ids, client names, metrics).\n");
  if (b.oom) { free(b.s); return NULL; }
  return b.s;
}
