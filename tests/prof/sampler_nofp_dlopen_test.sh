#!/usr/bin/env bash
# sampler_nofp_dlopen_test.sh - libraries without frame pointers, loaded
# with dlopen and used at once (tests/prof/nofp_dlopen: four libraries,
# each called right after its dlopen returns, 0.15 s of CPU each; the
# program and the libraries built with -fomit-frame-pointer, rbp loaded
# with junk), profiled in preload mode at 999 Hz:
#   - not one sample whose stack goes through a dlopen'ed library (its
#     functions ptt_nofp_outer / nofp_mid, or the callback dl_hot they call)
#     is [truncated]: the dlopen interposer built the library's unwind
#     table in the calling thread before dlopen returned;
#   - >= 95 % of that CPU reaches main and __libc_start_call_main (or
#     __libc_start_main), and there are enough samples to judge (>= 300 ms).
#   - the same program loading the libraries by bare name, found only
#     through its own DT_RUNPATH, still loads them under the preload: the
#     interposer leaves caller-dependent dlopen calls to glibc untouched.
# Before the interposer, the first samples in each library (until the
# consumer thread had rebuilt the table set) were cut at the library.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/sampler_nofp_records.sh"
prof_require nofp_dlopen
LIBDIR="$PT_BUILD_PROF/tests/prof"
for k in 0 1 2 3; do [ -f "$LIBDIR/libptt_nofp_dl$k.so" ] || fail "no $LIBDIR/libptt_nofp_dl$k.so"; done

prof_workdir sampler-nofp-dlopen

env PTPROF_DIR="$WORK/out" PTPROF_PREFIX=nofpdl- PTPROF_HZ=999 LD_PRELOAD="$LIB" \
  "$PROG" "$LIBDIR" 4 0.15 >"$WORK/run.txt" 2>&1 ||
  { cat "$WORK/run.txt" >&2; fail "nofp_dlopen failed under the sampler"; }
prof=$(ls "$WORK/out"/nofpdl-*.pb.gz 2>/dev/null | head -1)
[ -n "$prof" ] || fail "no snapshot written"
go tool pprof -symbolize=none -traces "$prof" >"$WORK/traces.txt" 2>&1 ||
  { cat "$WORK/traces.txt" >&2; fail "go tool pprof rejected $prof"; }

nofp_records "$WORK/traces.txt" "$WORK/records.tsv"
[ -s "$WORK/records.tsv" ] || { head -40 "$WORK/traces.txt" >&2; fail "no samples in the profile"; }

sum_ms() { awk -F'\t' '{ s += $1 } END { printf "%.1f\n", s }'; }
grep -E '	(.*;)?(ptt_nofp_outer|nofp_mid|dl_hot);' "$WORK/records.tsv" >"$WORK/lib.tsv" || true
lib=$(sum_ms <"$WORK/lib.tsv")
trunc=$({ grep -F '[truncated]' "$WORK/lib.tsv" || true; } | sum_ms)
rooted=$({ grep -E ';dl_drive;main;(.*;)?__libc_start(_call)?_main;' "$WORK/lib.tsv" || true; } | sum_ms)
note "through the dlopen'ed libraries: $lib ms, $trunc ms [truncated], $rooted ms reach main"
awk -v l="$lib" 'BEGIN { exit !(l >= 300) }' || fail "too few samples to judge ($lib ms through the libraries)"
awk -v t="$trunc" 'BEGIN { exit !(t == 0) }' ||
  { grep -F -m5 '[truncated]' "$WORK/lib.tsv" >&2; fail "$trunc ms through a dlopen'ed library truncated"; }
awk -v l="$lib" -v r="$rooted" 'BEGIN { exit !(r >= 0.95 * l) }' ||
  { grep -v ';main;' "$WORK/lib.tsv" | head -5 >&2; fail "only $rooted of $lib ms reach main"; }

env PTPROF_DIR="$WORK/out2" PTPROF_PREFIX=nofpdl- PTPROF_HZ=99 LD_PRELOAD="$LIB" \
  "$PROG" - 4 0.01 >"$WORK/run2.txt" 2>&1 ||
  { cat "$WORK/run2.txt" >&2; fail "dlopen by name (the program's RUNPATH) failed under the preload"; }
echo "ok"
