#!/usr/bin/env bash
# own_work_test.sh - the profiler's own work and the blind window stay out
# of the user's profile, counted in its comments; threads carry their names.
# Runs tests/prof/ownwork_prog (linked with the library, like the daemon) with
# an empty symbol cache, so its first dump, made on an application thread
# ("dumper", as the daemon's libuv worker runs the snapshot writer), opens
# libc's compressed debug info and then writes its uncompressed copy after
# sampling resumed (the issue saw ptprof_dump -> do_dump ->
# ptp_debugcache_make -> dc_copy_elf -> elf_compress -> inflate in users'
# profiles). Read back with `go tool pprof`:
#   - no sample's stack holds a function of the profiler (ptprof_*, ptp_*,
#     the pthread_create trampoline every thread starts in included (its
#     frame is left out: start_thread calls the start routine, as
#     unprofiled), do_dump, dump_*, dc_*, elf_*, inflate*, dwfl_*,
#     dwarf_*) and none is "[lost: during dump]"; the "poller" thread,
#     200 ms of status reads and ptprof_set_dir calls before the dumper
#     starts, included (their entry code ran before the own-work mark:
#     runtime/ptp_own_text.h);
#   - the comments report the profiler's own work: > 0 ms CPU in all, and
#     samples dropped on application threads (the dumper's symbolization
#     and debug copy) > 0;
#   - the dump held in its blind window while the burner used 100 ms of
#     CPU: the next snapshot's blind-window comment counts >= 70 of those
#     (~100 at 999 Hz) and the drop comment's dumping= agrees with it;
#   - names: the thread that renamed itself and exited before any dump
#     ("gone-early") has its samples in gone_work; the burner, renamed after
#     start ("burner") and renamed again after the first dump
#     ("burner-late"), has each name on the samples of its time (names are
#     read at each sample): none of the first snapshot's is "burner-late",
#     and the second has "burner-late" (its first samples, taken before
#     the rename while the first dump finished, may still say "burner");
#   - as user nobody when this runs as root at perf_event_paranoid 2 (the
#     perf engine limited to user mode, as for a developer's daemon): the
#     same, and the first dump's 100 ms of kernel-mode own work (read(2)
#     after sampling resumed; periods that end in the kernel send no
#     signal) is counted as the profiler's, not put under the dumper's
#     "[lost: kernel mode]" (~100 samples there before; its own waits
#     leave a few).
# The debug copy must exist (libc6-dbg, installed by scripts/setup.sh);
# skips (77) only without go.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require ownwork_prog
prof_workdir own-work

LIBC_DBG=$(ls /usr/lib/debug/.build-id/*/*.debug 2>/dev/null | head -1 || true)
[ -n "$LIBC_DBG" ] || skip "no separate debug files (libc6-dbg) installed"

# check_run DIR LABEL: every check above on the run whose output is DIR/out.txt.
check_run() {
  local D=$1 L=$2 i
  cat "$D/out.txt"
  mapfile -t SNAPS < <(sed -n 's/^snapshot //p' "$D/out.txt")
  [ "${#SNAPS[@]}" -eq 4 ] || fail "$L: expected 4 snapshots, got ${#SNAPS[@]}"
  ls "$D/cache/debug/"*.debug >/dev/null 2>&1 || fail "$L: no debug-file copy was made (the heavy work this test needs)"
  "$VALIDATE" "${SNAPS[@]}" >"$D/validate.txt" 2>&1 || { cat "$D/validate.txt" >&2; fail "$L: ptprof-validate rejected a snapshot"; }

  # --- no profiler frame, no blind-window sample ---
  for i in "${!SNAPS[@]}"; do
    go tool pprof -traces "${SNAPS[$i]}" >"$D/traces$i.txt" 2>&1 || { cat "$D/traces$i.txt" >&2; fail "$L: go tool pprof -traces failed"; }
    # the stacks only: from the first separator on (the comments come before)
    sed -n '/^-----------+/,$p' "$D/traces$i.txt" >"$D/stacks$i.txt"
    [ -s "$D/stacks$i.txt" ] || [ "$i" -eq 3 ] || fail "$L: snapshot $i has no samples"
  done
  cat "$D"/stacks*.txt >"$D/stacks.txt"
  local re='(^|[[:space:]])(ptprof_[A-Za-z_]*|ptp_[A-Za-z_]*|do_dump|dump_[a-z_]+|dc_[a-z_]+|elf_[a-z_]+|inflate[A-Za-z_]*|dwfl_[a-z_]+|dwarf_[a-z_]+|kernel_hook)([[:space:]]|$)'
  grep -E "$re" "$D/stacks.txt" >"$D/leaks.txt" || true
  if [ -s "$D/leaks.txt" ]; then
    sort "$D/leaks.txt" | uniq -c | sort -rn | head -20 >&2
    fail "$L: profiler functions in the user's samples"
  fi
  grep -q 'start_thread' "$D/stacks.txt" ||
    fail "$L: no thread-start frame at all: the stacks were not read (check the parser)"
  if grep -F '[lost: during dump]' "$D/stacks.txt"; then fail "$L: a blind-window sample"; fi

  # --- comments: the profiler's own work and the blind window, counted ---
  local own_ms=0 own_n=0 app_ms=0 line ms n a
  for i in "${!SNAPS[@]}"; do
    go tool pprof -comments "${SNAPS[$i]}" >"$D/comments$i.txt" 2>&1 || fail "$L: go tool pprof -comments failed"
    line=$(grep "^profiler's own work in this window and the blind window before it: " "$D/comments$i.txt") ||
      { cat "$D/comments$i.txt" >&2; fail "$L: snapshot $i: no own-work comment"; }
    ms=$(sed -E 's/.*before it: ([0-9.]+) ms CPU .*/\1/' <<<"$line")
    n=$(sed -E 's/.*; ([0-9]+) samples? dropped on application threads.*/\1/' <<<"$line")
    a=$(sed -E "s/.*by the threads' clocks \(([0-9.]+) ms on application threads.*/\1/" <<<"$line")
    own_ms=$(python3 -c "print('%.1f' % ($own_ms + $ms))"); own_n=$((own_n + n))
    app_ms=$(python3 -c "print('%.1f' % ($app_ms + $a))")
  done
  note "$L: own work in all snapshots: $own_ms ms CPU, $app_ms ms of it on application threads by their clocks, $own_n samples dropped there"
  # by the clocks, the application threads' own work holds what the 999 Hz
  # samples dropped there say (a period each, give or take one a section)
  python3 -c "import sys; sys.exit(0 if $app_ms >= 0.8 * $own_n * 1.001 else 1)" ||
    fail "$L: own work on application threads $app_ms ms by their clocks, $own_n samples of 1.001 ms dropped there"
  # the first dump's kernel work alone is 100 ms: ~100 expirations at 999 Hz
  [ "$own_n" -ge 70 ] || fail "$L: the dumper's own work (symbolization, debug copy, kernel work) counted $own_n expirations"
  # the dump held in its blind window is the second; the third snapshot counts it
  local blind bn dn
  blind=$(grep '^blind window before this one: ' "$D/comments2.txt") || fail "$L: no blind-window comment"
  note "$L: third snapshot: $blind"
  bn=$(sed -E 's/.*\): ([0-9]+) samples? .*/\1/' <<<"$blind")
  dn=$(sed -nE 's/^dropped samples: .* dumping=([0-9]+) .*/\1/p' "$D/comments2.txt")
  [ "$bn" = "$dn" ] || fail "$L: blind-window count $bn, dumping=$dn in the drop comment"
  [ "$bn" -ge 70 ] || fail "$L: the blind window of a held dump (100 ms of burner CPU at 999 Hz) counted $bn expirations"
  grep -q '^blind window before this one: none' "$D/comments0.txt" || fail "$L: the first snapshot names a blind window"

  # --- names ---
  pp() { local out=$1; shift; go tool pprof -sample_index=samples "$@" >"$D/$out.txt" 2>&1 || { cat "$D/$out.txt" >&2; fail "$L: go tool pprof $* failed"; }; }
  pp gone -tagfocus='thread_name=^gone-early$' -top -nodefraction=0 "${SNAPS[@]}"
  grep -qw gone_work "$D/gone.txt" || { cat "$D/gone.txt" >&2; fail "$L: the exited thread's samples are not named gone-early"; }
  pp gone_fn -focus='^gone_work$' -tags "${SNAPS[@]}"
  if grep -A3 'thread_name:' "$D/gone_fn.txt" | grep -v 'gone-early' | grep -E '^ +[0-9.]+ \('; then
    cat "$D/gone_fn.txt" >&2; fail "$L: gone_work under another thread name"
  fi
  pp burner1 -tags "${SNAPS[0]}"
  grep -qE '\): burner$' "$D/burner1.txt" || { cat "$D/burner1.txt" >&2; fail "$L: first snapshot: no thread_name burner"; }
  pp burner2 -tags "${SNAPS[1]}"
  grep -qE '\): burner-late$' "$D/burner2.txt" || { cat "$D/burner2.txt" >&2; fail "$L: second snapshot: no thread_name burner-late"; }
  if grep -qE '\): burner-late$' "$D/burner1.txt"; then fail "$L: first snapshot: the later name burner-late"; fi

  # --- the dumper's kernel time inside its own work is not the program's ---
  pp dumper -tagfocus='thread_name=^dumper$' -top -nodefraction=0 "${SNAPS[@]}"
  local kl
  kl=$(awk '$NF == "mode]" && $(NF-1) == "kernel" { print $1; found = 1 } END { if (!found) print 0 }' "$D/dumper.txt")
  note "$L: dumper: $kl samples under [lost: kernel mode]"
  [ "$kl" -lt 40 ] || { cat "$D/dumper.txt" >&2; fail "$L: the profiler's kernel time under the dumper's [lost: kernel mode] ($kl)"; }
}

mkdir -p "$WORK/root"
PTPROF_SYMCACHE="$WORK/root/cache" "$PROG" "$WORK/root/snap" >"$WORK/root/out.txt" 2>&1 ||
  { cat "$WORK/root/out.txt" >&2; fail "ownwork_prog failed"; }
check_run "$WORK/root" "$(id -un)"

paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 3)
if [ "$(id -u)" -eq 0 ] && [ "$paranoid" -eq 2 ] && command -v setpriv >/dev/null; then
  nb=$(id -u nobody 2>/dev/null || echo 65534)
  # $WORK's parents may be private to root (a checkout below a 0700 home):
  # nobody runs a copy of the program from a directory of its own in /tmp
  nbdir=$(mktemp -d /tmp/ptow-nobody.XXXXXX)
  trap 'rm -rf "$nbdir"; prof_cleanup' EXIT
  chmod 755 "$nbdir"
  cp "$PROG" "$nbdir/" && chmod 755 "$nbdir/$(basename "$PROG")"
  mkdir -m 700 "$nbdir/run" && chown "$nb" "$nbdir/run"
  setpriv --reuid="$nb" --regid="$nb" --clear-groups env PTPROF_SYMCACHE="$nbdir/run/cache" \
    "$nbdir/$(basename "$PROG")" "$nbdir/run/snap" >"$nbdir/run/out.txt" 2>&1 ||
    { cat "$nbdir/run/out.txt" >&2; fail "ownwork_prog as nobody failed"; }
  go tool pprof -comments "$(sed -n 's/^snapshot //p' "$nbdir/run/out.txt" | head -1)" 2>/dev/null |
    grep -c '^sampler engine: perf_event task-clock per thread (user mode only' >/dev/null ||
    fail "nobody at perf_event_paranoid 2: the engine is not the user-mode-only perf engine"
  check_run "$nbdir/run" nobody
else
  note "not root at perf_event_paranoid 2: the user-mode-only leg is not run"
fi
echo ok
