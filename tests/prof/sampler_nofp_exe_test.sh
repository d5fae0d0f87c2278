#!/usr/bin/env bash
# sampler_nofp_exe_test.sh - a program with no frame pointers anywhere
# (tests/prof/nofp_prog: the executable and its library libptt_nofp built
# with -fomit-frame-pointer, rbp loaded with junk in both), profiled in
# preload mode at 999 Hz. The main program's and the library's unwind tables
# are built before the first sample, so every sample counts, no warm-up:
#   - of the CPU sampled in nofp_hot (the callback at the bottom), >= 95 %
#     sits under a stack that goes through the library (ptt_nofp_outer) and
#     reaches the thread's entry: main and __libc_start_call_main (or
#     __libc_start_main) on the main thread, nofp_worker and start_thread on
#     the "nofp-worker" thread; < 5 % of all sampled CPU is [truncated];
#   - no stack of the worker contains main and no stack of the main thread
#     contains start_thread (a guessed or mixed-up stack would).
# Before the main program got its own tables, every one of these samples was
# cut at the first frame in nofp_prog (frame pointers were assumed there).
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require nofp_prog

prof_workdir sampler-nofp-exe

env PTPROF_DIR="$WORK/out" PTPROF_PREFIX=nofp- PTPROF_HZ=999 LD_PRELOAD="$LIB" \
  "$PROG" 0.5 >"$WORK/run.txt" 2>&1 || { cat "$WORK/run.txt" >&2; fail "nofp_prog failed under the sampler"; }
prof=$(ls "$WORK/out"/nofp-*.pb.gz 2>/dev/null | head -1)
[ -n "$prof" ] || fail "no snapshot written"
go tool pprof -symbolize=none -traces "$prof" >"$WORK/traces.txt" 2>&1 ||
  { cat "$WORK/traces.txt" >&2; fail "go tool pprof rejected $prof"; }

# One line per sample record: thread, value in ms, and its frames, leaf
# first, each followed by ';'.
awk '
  function flush() { if (have) print thr "\t" v "\t" fr ";"; have = 0; fr = ""; thr = "" }
  /^-+\+-+/ { flush(); inrec = 1; next }
  inrec && /^ *thread_name:/ { sub(/^ *thread_name: */, ""); thr = $0; next }
  inrec && !have && $1 ~ /^[0-9.]+(ms|s|us)$/ {
    v = $1; u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
    v = (u == "s") ? v * 1000 : (u == "us") ? v / 1000 : v; have = 1
    $1 = ""; sub(/^ +/, ""); fr = $0; next }
  have { sub(/^ +/, ""); fr = fr ";" $0 }
  END { flush() }' "$WORK/traces.txt" >"$WORK/records.tsv"
[ -s "$WORK/records.tsv" ] || { head -40 "$WORK/traces.txt" >&2; fail "no samples in the profile"; }

# share THREAD ROOT_RE: ms sampled with leaf nofp_hot on THREAD, and of
# those the ms whose stack has ptt_nofp_outer and matches ROOT_RE (matching
# with grep -E).
sum_ms() { awk -F'\t' '{ s += $2 } END { printf "%.1f\n", s }'; }
share() {
  local hot ok
  grep -E "^$1	[^	]*	nofp_hot[ ;]" "$WORK/records.tsv" >"$WORK/hot.tsv" || true
  hot=$(sum_ms <"$WORK/hot.tsv")
  ok=$({ grep ';ptt_nofp_outer;' "$WORK/hot.tsv" | grep -E "$2" || true; } | sum_ms)
  echo "$hot $ok"
}
read -r mhot mok < <(share nofp_prog ';main;(.*;)?__libc_start(_call)?_main;')
read -r whot wok < <(share nofp-worker ';nofp_worker;(.*;)?start_thread;')
read -r total trunc < <(awk -F'\t' '{ t += $2; if ($3 ~ /\[truncated\]/) x += $2 } END { printf "%.1f %.1f\n", t, x }' "$WORK/records.tsv")
note "main thread: $mok of $mhot ms in nofp_hot reach main and the libc entry"
note "worker: $wok of $whot ms in nofp_hot reach nofp_worker and start_thread"
note "all: $trunc of $total ms [truncated]"
awk -v h="$mhot" -v w="$whot" 'BEGIN { exit !(h >= 200 && w >= 200) }' ||
  fail "too few samples to judge (main $mhot ms, worker $whot ms in nofp_hot)"
awk -v h="$mhot" -v o="$mok" 'BEGIN { exit !(o >= 0.95 * h) }' ||
  { grep -m5 '^nofp_prog' "$WORK/records.tsv" >&2; fail "main thread: only $mok of $mhot ms reach main"; }
awk -v h="$whot" -v o="$wok" 'BEGIN { exit !(o >= 0.95 * h) }' ||
  { grep -m5 '^nofp-worker' "$WORK/records.tsv" >&2; fail "worker: only $wok of $whot ms reach start_thread"; }
awk -v t="$total" -v x="$trunc" 'BEGIN { exit !(x < 0.05 * t) }' || fail "$trunc of $total ms truncated"
if grep -qE '^nofp-worker	.*;main;' "$WORK/records.tsv"; then
  fail "a worker stack contains main"
fi
if grep -qE '^nofp_prog	.*;start_thread;' "$WORK/records.tsv"; then
  fail "a main-thread stack contains start_thread"
fi
echo "ok"
