/*
 * pt_fmt.h - sizes, ages and times as people read them, for the artifact
 * pickers of the TUI and the CLI ("12.3 KiB", "5 min ago") and profile
 * windows.
 *
 * Threads: reentrant; no allocation; never fails (output truncated to cap).
 */
#ifndef PT_FMT_H
#define PT_FMT_H

#include <stddef.h>
#include <stdint.h>

/* "512 B", "2.0 KiB", "3.5 MiB" (binary units, one decimal). */
void pt_fmt_size(uint64_t n, char *out, size_t cap);

/* Unix time ns (UTC) to milliseconds: "2026-12-03 10:47:27.588", or with
 * rfc3339 != 0 "2026-12-03T10:47:27.588Z"; `unknown` when ns <= 0. Used
 * for profile windows (the CLI's list, the merge's comments). */
void pt_fmt_utc_ms(int64_t ns, int rfc3339, const char *unknown, char *out, size_t cap);

/* "42 s ago", "2 min ago", "5 h ago", "3 d ago" for unix second t relative
 * to now (a time in the future counts as 0 s ago). */
void pt_fmt_age(int64_t t, int64_t now, char *out, size_t cap);

#endif
