#!/usr/bin/env bash
# guest_fds_test.sh - the program's descriptors are the program's (issue
# 21, item 1): tests/prof/guest_fds run unprofiled and preloaded (each
# engine this machine has) must print, exit and leave files byte for byte
# the same (guest_lib.sh):
#   1. closefrom: close_range(3, ~0U, 0) at start, then a (fd 3), b (fd 4)
#      and a fopen'd report (fd 5) whose 100 lines stdio writes at exit,
#      after every atexit handler (the preload's final dump among them).
#      Before: the library wrote "\1" to fd 4 (its wake pipe's old number)
#      and closed fd 5 (its perf event's old number): report empty, b one
#      stray byte. Also: a snapshot with the program's CPU; under perf the
#      range close went around our event (no comment that it was closed).
#      closeloop: the same after close(2) on every number to the limit:
#      our event is closed, reopened, and the comment says so.
#   2. reuse: close_range, then read a 10000-byte input through fd 3 (the
#      consumer used to read its wake-ups from that number) in 100-byte
#      reads while burning CPU; the copy must be whole.
#   3. many: close_range, then 900 fopen'd files under `ulimit -n 1024`:
#      their numbers run through the library's range (above 768), each
#      file's buffered line flushed by exit; perf only (timers hold no
#      descriptor).
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
prof_require guest_fds
prof_workdir guest-fds

for e in $(engines_here); do
  # 1. closefrom (close_range), then closeloop (close on every number)
  for how in closefrom closeloop; do
    guest_run "$how-$e-u" "$WORK/$how-$e-u" -- "$PROG" $how 300
    guest_run "$how-$e-p" "$WORK/$how-$e-p" PTPROF_DIR="$WORK/prof-$how-$e" PTPROF_ENGINE=$e \
      LD_PRELOAD="$LIB" -- "$PROG" $how 300
    [ "$(cat "$WORK/$how-$e-u.rc")" = 0 ] || fail "$how exited $(cat "$WORK/$how-$e-u.rc") unprofiled"
    guest_same "$how-$e-u" "$how-$e-p" "$WORK/$how-$e-u" "$WORK/$how-$e-p"
    [ "$(wc -c <"$WORK/$how-$e-p/report")" -eq 3700 ] || fail "$how ($e): report is not whole"
    prof=$(guest_profile "$WORK/prof-$how-$e")
    total=$(guest_total_ms "$prof")
    awk -v t="$total" 'BEGIN { exit !(t >= 150) }' || fail "$how ($e): $total ms sampled of 300"
    if [ "$e" = perf ]; then
      closed=$(go tool pprof -comments "$prof" 2>/dev/null |
        grep -c "the program closed 1 of the sampler's perf event descriptors" || true)
      # close_range closes around our numbers (the program never held
      # them): the event stays. close(2) on our number closes it: noticed,
      # reopened, said.
      if [ $how = closefrom ] && [ "$closed" != 0 ]; then
        fail "closefrom (perf): close_range closed our descriptor (it must close around it)"
      fi
      if [ $how = closeloop ] && [ "$closed" = 0 ]; then
        fail "closeloop (perf): the snapshot does not say the program closed our descriptor"
      fi
    fi
    note "$how ($e): same output, files and exit code; $total ms sampled"
  done

  # 2. reuse
  head -c 10000 /dev/urandom >"$WORK/input"
  GUEST_SEED="$WORK/input" guest_run "ru-$e-u" "$WORK/ru-$e-u" -- "$PROG" reuse 300
  GUEST_SEED="$WORK/input" guest_run "ru-$e-p" "$WORK/ru-$e-p" PTPROF_DIR="$WORK/prof-ru-$e" \
    PTPROF_ENGINE=$e LD_PRELOAD="$LIB" -- "$PROG" reuse 300
  guest_same "ru-$e-u" "ru-$e-p" "$WORK/ru-$e-u" "$WORK/ru-$e-p"
  cmp -s "$WORK/input" "$WORK/ru-$e-p/copy" || fail "reuse ($e): the copy is not the input"
  guest_profile "$WORK/prof-ru-$e" >/dev/null
  note "reuse ($e): 10000 bytes read through fd 3, same as unprofiled"
done

# 3. many (perf: its descriptors live at 768.. under this limit)
if engines_here | grep -c perf >/dev/null; then
  GUEST_NOFILE=1024 guest_run many-u "$WORK/many-u" -- "$PROG" many 900 300
  GUEST_NOFILE=1024 guest_run many-p "$WORK/many-p" PTPROF_DIR="$WORK/prof-many" PTPROF_ENGINE=perf \
    LD_PRELOAD="$LIB" -- "$PROG" many 900 300
  [ "$(cat "$WORK/many-u.rc")" = 0 ] || fail "many exited $(cat "$WORK/many-u.rc") unprofiled"
  guest_same many-u many-p "$WORK/many-u" "$WORK/many-p"
  guest_profile "$WORK/prof-many" >/dev/null
  note "many (perf): 900 files through the library's descriptor range, same as unprofiled"
fi
echo ok
