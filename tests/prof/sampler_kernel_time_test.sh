#!/usr/bin/env bash
# sampler_kernel_time_test.sh - CPU a thread spends in the kernel is never
# put under a stack the thread did not have, and is not hidden either.
# sampler_prog kernel: thread "kern" spends about half its CPU inside
# read(2) (kern_read -> read, kernel time) and half in user code
# (kern_user). Per engine:
#  - timer engine: the kernel time is under the real stack through
#    kern_read (a CPU-time timer's signal arrives on the return to user
#    mode, at the syscall's user stack);
#  - perf engine able to count kernel time (CAP_PERFMON, or
#    perf_event_paranoid <= 1): the same, and no [lost: kernel mode];
#  - perf engine limited to user mode (exclude_kernel, paranoid 2 without
#    the capability; checked as user nobody when this runs as root): the
#    snapshot says "user mode only" and the kernel time is under
#    [lost: kernel mode], not under kern_read or kern_user.
# Shares are of the kern thread's sampled CPU; each half is ~1 s at 99 Hz
# (~99 samples, binomial sd ~5 pp), so the 35 % floor is 3 sd below the
# expected 50 %, and the 10 % ceiling 8 sd above 0 for a share that should
# be exactly 0 but for one period at each phase edge.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require sampler_prog
prof_workdir sampler-kernel

paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 3)

# share FILE NAME COLUMN: the percentage (without %) in COLUMN (2 = flat%,
# 5 = cum%) of pprof's -top line for NAME among the kern thread's samples,
# 0 when it has no line.
share() {
  go tool pprof -symbolize=none -tagfocus=thread_name=kern -nodecount=200 -top "$1" 2>/dev/null \
    | awk -v n="$2" -v c="$3" '
        { name = $0; sub(/^ *[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +[^ ]+ +/, "", name); sub(/ \(inline\)$/, "", name) }
        name == n { v = $c; sub(/%$/, "", v); print v; found = 1; exit }
        END { if (!found) print 0 }'
}

# run ENGINE DIR [CMD-PREFIX...]: one run, its snapshot path on stdout.
run() {
  local e=$1 d=$2
  shift 2
  [ -d "$d" ] || { mkdir -p "$d"; chmod 700 "$d"; }
  "$@" env PTPROF_DIR="$d" PTPROF_PREFIX=kt- PTPROF_HZ=99 PTPROF_ENGINE="$e" \
    XDG_CACHE_HOME="$d/cache" LD_PRELOAD="${RUN_LIB:-$LIB}" "${RUN_PROG:-$PROG}" kernel 1 >"$d/out.txt" 2>"$d/err.txt" \
    || { cat "$d/err.txt" >&2; fail "$e: run failed"; }
  shopt -s nullglob
  local f=("$d"/kt-*.pb.gz)
  shopt -u nullglob
  [ ${#f[@]} -eq 1 ] || { cat "$d/err.txt" >&2; fail "$e: expected one snapshot, got ${#f[@]}"; }
  go tool pprof -comments "${f[0]}" >"$d/comments.txt" 2>&1 || fail "$e: go tool pprof -comments failed"
  echo "${f[0]}"
}

# expect_real FILE LABEL: kernel time under kern_read, nothing lost.
expect_real() {
  local rd lost user
  rd=$(share "$1" kern_read 5)
  lost=$(share "$1" "[lost: kernel mode]" 2)
  user=$(share "$1" kern_user 5)
  note "$2: kern_read ${rd} %, kern_user ${user} %, [lost: kernel mode] ${lost} % ($(cat "$(dirname "$1")/out.txt"))"
  awk -v r="$rd" 'BEGIN { exit !(r >= 35) }' || fail "$2: kernel time not under kern_read (${rd} %)"
  awk -v u="$user" 'BEGIN { exit !(u >= 35) }' || fail "$2: user time not under kern_user (${user} %)"
  awk -v l="$lost" 'BEGIN { exit !(l <= 10) }' || fail "$2: ${lost} % under [lost: kernel mode]"
}

# expect_lost FILE LABEL: kernel time under [lost: kernel mode], said so.
expect_lost() {
  local rd lost user d
  d=$(dirname "$1")
  grep -q '^sampler engine: perf_event task-clock per thread (user mode only' "$d/comments.txt" \
    || { cat "$d/comments.txt" >&2; fail "$2: the snapshot does not say it samples user mode only"; }
  rd=$(share "$1" kern_read 5)
  lost=$(share "$1" "[lost: kernel mode]" 2)
  user=$(share "$1" kern_user 5)
  note "$2: kern_read ${rd} %, kern_user ${user} %, [lost: kernel mode] ${lost} % ($(cat "$d/out.txt"))"
  awk -v l="$lost" 'BEGIN { exit !(l >= 35) }' || fail "$2: kernel time not under [lost: kernel mode] (${lost} %)"
  awk -v r="$rd" 'BEGIN { exit !(r <= 10) }' || fail "$2: ${rd} % under kern_read, whose kernel time cannot be seen"
  awk -v u="$user" 'BEGIN { exit !(u >= 35) }' || fail "$2: user time not under kern_user (${user} %)"
}

f=$(run timer "$WORK/timer")
expect_real "$f" timer

if [ "$paranoid" -le 2 ]; then
  f=$(run perf "$WORK/perf")
  if grep -q '^sampler engine: perf_event task-clock per thread (user mode only' "$WORK/perf/comments.txt"; then
    expect_lost "$f" "perf (user mode only)"
  else
    expect_real "$f" "perf (kernel time counted)"
  fi
  # As root, the same run without privileges must fall back to user mode
  # only where paranoid 2 asks for it, and say so.
  if [ "$(id -u)" -eq 0 ] && [ "$paranoid" -eq 2 ] && command -v setpriv >/dev/null; then
    nb=$(id -u nobody 2>/dev/null || echo 65534)
    # $WORK's parents are private to root: nobody gets its own directory
    # in /tmp (removed with the others by the EXIT trap).
    nbdir=$(mktemp -d /tmp/ptk-nobody.XXXXXX)
    trap 'rm -rf "$nbdir"; prof_cleanup' EXIT
    chown "$nb" "$nbdir"
    # The checkout itself may be private too (a clone below a 0700 home):
    # nobody runs copies of the program and the library from its directory.
    mkdir "$nbdir/bin"
    cp "$PROG" "$LIB" "$nbdir/bin/"
    chmod 755 "$nbdir/bin" "$nbdir/bin/"*
    mkdir -m 700 "$nbdir/run" && chown "$nb" "$nbdir/run"
    f=$(RUN_PROG="$nbdir/bin/$(basename "$PROG")" RUN_LIB="$nbdir/bin/$(basename "$LIB")" \
        run perf "$nbdir/run" setpriv --reuid="$nb" --regid="$nb" --clear-groups)
    expect_lost "$f" "perf as nobody"
  fi
else
  note "perf_event_paranoid=$paranoid: perf engine not available here"
fi
note "kernel time: ok"
exit 0
