#!/usr/bin/env bash
# guest_fifo_test.sh - no file can hang the program (issue 21, item 3):
# anyone who can write beside a binary can name a FIFO in its
# .gnu_debuglink. Two binaries, stripped of their debug sections with a
# .gnu_debuglink whose file is then replaced by a FIFO (nobody ever writes
# to it):
#   1. tests/prof/guest_sig (with .eh_frame_hdr): the symbolizer looks for
#      the debug file at the final dump (PTPROF_SYMCACHE=off, so it opens
#      the objects). Before: it opened the FIFO blocking and the program
#      never exited.
#   2. tests/prof/guest_sig_noehf (no .eh_frame_hdr, its CFI only in
#      .debug_frame): the unwind tables' reader looks for .debug_frame
#      before main. Before: the program hung before main.
# Each ("work 200": 200 ms of CPU), preloaded, must print and exit as
# unprofiled and write its snapshot. `timeout` (guest_lib.sh) only keeps a hang from
# hanging the suite: a hang shows as exit code 124, unlike the
# unprofiled run's.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
prof_require guest_sig
command -v objcopy >/dev/null || skip "objcopy (binutils) not installed"
command -v mkfifo >/dev/null || skip "mkfifo not installed"
prof_workdir guest-fifo

# fifo_binary SRC DIR: DIR/prog, SRC stripped, its debug link naming the
# FIFO DIR/prog.debug.
fifo_binary() {
  mkdir -p "$2"
  cp "$1" "$2/prog"
  objcopy --only-keep-debug "$2/prog" "$2/prog.debug"
  objcopy --strip-debug --add-gnu-debuglink="$2/prog.debug" "$2/prog"
  rm "$2/prog.debug"
  mkfifo "$2/prog.debug"
  readelf -S "$2/prog" | grep -c '\.gnu_debuglink' >/dev/null || fail "no .gnu_debuglink in $2/prog"
  [ -p "$2/prog.debug" ] || fail "$2/prog.debug is not a FIFO"
}

fifo_binary "$PROG" "$WORK/a"
fifo_binary "$PT_BUILD_PROF/tests/prof/guest_sig_noehf" "$WORK/b"
readelf -l "$WORK/b/prog" | grep -c GNU_EH_FRAME >/dev/null && fail "guest_sig_noehf has an .eh_frame_hdr"

for c in a b; do
  guest_run "$c-u" "$WORK/$c-u" -- "$WORK/$c/prog" work 200
  [ "$(cat "$WORK/$c-u.rc")" = 0 ] || fail "$c: exited $(cat "$WORK/$c-u.rc") unprofiled"
  guest_run "$c-p" "$WORK/$c-p" PTPROF_DIR="$WORK/prof-$c" PTPROF_SYMCACHE=off LD_PRELOAD="$LIB" \
    -- "$WORK/$c/prog" work 200
  [ "$(cat "$WORK/$c-p.rc")" = 124 ] && fail "$c: the preloaded program hung (timeout)"
  guest_same "$c-u" "$c-p" "$WORK/$c-u" "$WORK/$c-p"
  guest_profile "$WORK/prof-$c" >/dev/null
  note "$c: the same output and exit code as unprofiled, snapshot written, the FIFO never opened"
done
echo ok
