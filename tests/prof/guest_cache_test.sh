#!/usr/bin/env bash
# guest_cache_test.sh - no file can kill the program (issue 21, item 3): a
# preloaded program reads its unwind tables from the persistent cache
# (warmed by a first run), then, while it runs, every table file is
# truncated to nothing in place (`: > file`, what any process of our uid
# can do). Its output and exit code must be the unprofiled ones and the
# snapshot written with its CPU: the tables are copies in memory, not
# mappings of the files. Before: SIGBUS (2 of 2 runs), the signal
# handler reading rows of a mapping whose pages the truncation took away.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/guest_lib.sh"
prof_require guest_fds
prof_workdir guest-cache

export PTPROF_SYMCACHE="$WORK/symbols"
# the first run fills the cache (tables written by its consumer and at stop)
guest_run warm "$WORK/warm" PTPROF_DIR="$WORK/prof-warm" LD_PRELOAD="$LIB" -- "$PROG" closefrom 50
n=$(find "$PTPROF_SYMCACHE/unwind" -name '*.cfi' | wc -l)
[ "$n" -ge 3 ] || fail "the first run left $n table files in the cache"

# waitfile: burns CPU until ./flag exists (made by the test), then 300 ms
guest_run tr-u "$WORK/tr-u" -- "$PROG" waitfile flag 300 &
upid=$!
wait_for 20 test -d "$WORK/tr-u" || fail "the unprofiled program did not start"
touch "$WORK/tr-u/flag"
wait "$upid" || true

guest_run tr-p "$WORK/tr-p" PTPROF_DIR="$WORK/prof-tr" LD_PRELOAD="$LIB" -- "$PROG" waitfile flag 300 &
ppid=$!
# the program has started (its constructor read the tables) once its
# snapshot directory exists
wait_for 20 test -d "$WORK/prof-tr" || fail "the preloaded program did not start"
for f in "$PTPROF_SYMCACHE"/unwind/*.cfi; do : >"$f"; done
touch "$WORK/tr-p/flag"
wait "$ppid" || true
[ "$(cat "$WORK/tr-p.rc")" = 135 ] && fail "the preloaded program died of SIGBUS"
guest_same tr-u tr-p "$WORK/tr-u" "$WORK/tr-p"
t=$(guest_total_ms "$(guest_profile "$WORK/prof-tr")")
awk -v t="$t" 'BEGIN { exit !(t >= 150) }' || fail "$t ms sampled of 300 after the truncation"
note "$n table files truncated under the running program: same output and exit code, $t ms sampled"
echo ok
