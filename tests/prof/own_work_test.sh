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
#   - no sample's stack holds a function of the profiler (ptprof_*, ptp_*
#     but the pthread_create trampoline every thread starts in, do_dump,
#     dump_*, dc_*, elf_*, inflate*, dwfl_*, dwarf_*) and none is
#     "[lost: during dump]";
#   - the comments report the profiler's own work: > 0 ms CPU in all, and
#     samples dropped on application threads (the dumper's symbolization
#     and debug copy) > 0;
#   - the dump held in its blind window while the burner used 100 ms of
#     CPU: the next snapshot's blind-window comment counts >= 70 of those
#     (~100 at 999 Hz) and the drop comment's dumping= agrees with it;
#   - names: the thread that renamed itself and exited before any dump
#     ("gone-early") has its samples in gone_work; the burner, renamed after
#     start ("burner") and renamed again after the first dump
#     ("burner-late"), has each name in the snapshots of its time.
# The debug copy must exist (libc6-dbg, installed by scripts/setup.sh);
# skips (77) only without go.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require ownwork_prog
prof_workdir own-work

LIBC_DBG=$(ls /usr/lib/debug/.build-id/*/*.debug 2>/dev/null | head -1 || true)
[ -n "$LIBC_DBG" ] || skip "no separate debug files (libc6-dbg) installed"

PTPROF_SYMCACHE="$WORK/cache" "$PROG" "$WORK/snap" >"$WORK/out.txt" 2>&1 ||
  { cat "$WORK/out.txt" >&2; fail "ownwork_prog failed"; }
cat "$WORK/out.txt"
mapfile -t SNAPS < <(sed -n 's/^snapshot //p' "$WORK/out.txt")
[ "${#SNAPS[@]}" -eq 4 ] || fail "expected 4 snapshots, got ${#SNAPS[@]}"
ls "$WORK/cache/debug/"*.debug >/dev/null 2>&1 || fail "no debug-file copy was made (the heavy work this test needs)"
"$VALIDATE" "${SNAPS[@]}" >"$WORK/validate.txt" 2>&1 || { cat "$WORK/validate.txt" >&2; fail "ptprof-validate rejected a snapshot"; }

# --- no profiler frame, no blind-window sample ---
for i in "${!SNAPS[@]}"; do
  go tool pprof -traces "${SNAPS[$i]}" >"$WORK/traces$i.txt" 2>&1 || { cat "$WORK/traces$i.txt" >&2; fail "go tool pprof -traces failed"; }
  # the stacks only: from the first separator on (the comments come before)
  sed -n '/^-----------+/,$p' "$WORK/traces$i.txt" >"$WORK/stacks$i.txt"
  [ -s "$WORK/stacks$i.txt" ] || [ "$i" -eq 3 ] || fail "snapshot $i has no samples"
done
cat "$WORK"/stacks*.txt >"$WORK/stacks.txt"
PROFILER_RE='(^|[[:space:]])(ptprof_[A-Za-z_]*|ptp_[A-Za-z_]*|do_dump|dump_[a-z_]+|dc_[a-z_]+|elf_[a-z_]+|inflate[A-Za-z_]*|dwfl_[a-z_]+|dwarf_[a-z_]+)([[:space:]]|$)'
grep -E "$PROFILER_RE" "$WORK/stacks.txt" | grep -v 'ptp_thread_trampoline' >"$WORK/leaks.txt" || true
if [ -s "$WORK/leaks.txt" ]; then
  sort "$WORK/leaks.txt" | uniq -c | sort -rn | head -20 >&2
  fail "profiler functions in the user's samples"
fi
grep -c 'ptp_thread_trampoline' "$WORK/stacks.txt" >/dev/null ||
  fail "no thread-start frame at all: the stacks were not read (check the parser)"
if grep -F '[lost: during dump]' "$WORK/stacks.txt"; then fail "a blind-window sample"; fi

# --- comments: the profiler's own work and the blind window, counted ---
own_ms=0; own_n=0
for i in "${!SNAPS[@]}"; do
  go tool pprof -comments "${SNAPS[$i]}" >"$WORK/comments$i.txt" 2>&1 || fail "go tool pprof -comments failed"
  line=$(grep "^profiler's own work in this window and the blind window before it: " "$WORK/comments$i.txt") ||
    { cat "$WORK/comments$i.txt" >&2; fail "snapshot $i: no own-work comment"; }
  ms=$(sed -E 's/.*before it: ([0-9.]+) ms CPU .*/\1/' <<<"$line")
  n=$(sed -E 's/.*CPU \(([0-9]+) samples? .*/\1/' <<<"$line")
  own_ms=$(python3 -c "print($own_ms + $ms)"); own_n=$((own_n + n))
done
echo "# own work in all snapshots: $own_ms ms CPU, $own_n samples dropped on application threads"
python3 -c "import sys; sys.exit(0 if $own_ms > 0 else 1)" || fail "no own-work CPU reported"
[ "$own_n" -gt 0 ] || fail "the dumper's own work (symbolization, debug copy) was not counted"
# the dump held in its blind window is the second; the third snapshot counts it
blind=$(grep '^blind window before this one: ' "$WORK/comments2.txt") || fail "no blind-window comment"
echo "# third snapshot: $blind"
bn=$(sed -E 's/.*\): ([0-9]+) samples? .*/\1/' <<<"$blind")
dn=$(sed -nE 's/^dropped samples: .* dumping=([0-9]+) .*/\1/p' "$WORK/comments2.txt")
[ "$bn" = "$dn" ] || fail "blind-window count $bn, dumping=$dn in the drop comment"
[ "$bn" -ge 70 ] || fail "the blind window of a held dump (100 ms of burner CPU at 999 Hz) counted $bn expirations"
grep -q '^blind window before this one: none' "$WORK/comments0.txt" || fail "the first snapshot names a blind window"

# --- names ---
pp() { local out=$1; shift; go tool pprof -sample_index=samples "$@" >"$WORK/$out.txt" 2>&1 || { cat "$WORK/$out.txt" >&2; fail "go tool pprof $* failed"; }; }
pp gone -tagfocus='thread_name=^gone-early$' -top -nodefraction=0 "${SNAPS[@]}"
grep -qw gone_work "$WORK/gone.txt" || { cat "$WORK/gone.txt" >&2; fail "the exited thread's samples are not named gone-early"; }
pp gone_fn -focus='^gone_work$' -tags "${SNAPS[@]}"
grep -A3 'thread_name:' "$WORK/gone_fn.txt" | grep -v 'gone-early' | grep -E '^ +[0-9.]+ \(' &&
  { cat "$WORK/gone_fn.txt" >&2; fail "gone_work under another thread name"; }
pp burner1 -tags "${SNAPS[0]}"
grep -qE '\): burner$' "$WORK/burner1.txt" || { cat "$WORK/burner1.txt" >&2; fail "first snapshot: no thread_name burner"; }
pp burner2 -tags "${SNAPS[1]}"
grep -qE '\): burner-late$' "$WORK/burner2.txt" || { cat "$WORK/burner2.txt" >&2; fail "second snapshot: no thread_name burner-late"; }
if grep -qE '\): burner$' "$WORK/burner2.txt"; then fail "second snapshot: the old name burner"; fi
echo ok
