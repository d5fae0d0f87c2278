#!/usr/bin/env bash
# cficache_test.sh - the persistent unwind-table cache in real processes:
# tests/prof/nofp_prog (no frame pointers in the executable or its library)
# profiled in preload mode at 999 Hz, four runs on one cache directory:
#   1. empty cache: the profile says 0 tables read from the cache; .cfi
#      files appear (0600, in a 0700 directory), one per object with a
#      build id, the program's among them;
#   2. warm: at least 4 tables read from the cache (the program, its
#      library, libc, ld.so), and the stacks are as complete as when built;
#   3. every .cfi file corrupted (one byte flipped; the program's own cut
#      one row short): 0 read, tables built again, stacks still complete,
#      the files rewritten;
#   4. warm again: the rewritten files are read.
# "Complete": < 5 % of the sampled CPU under [truncated], and >= 95 % of the
# CPU in nofp_hot reaches main or start_thread.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require nofp_prog

prof_workdir cficache
export XDG_CACHE_HOME="$WORK/cache"
unset PTPROF_SYMCACHE
CDIR="$XDG_CACHE_HOME/ptprof/symbols/unwind"

# run N: profiles nofp_prog, checks completeness, prints the number of
# tables read from the table cache.
run() {
  local out="$WORK/out$1" prof line
  env PTPROF_DIR="$out" PTPROF_PREFIX=cfic- PTPROF_HZ=999 LD_PRELOAD="$LIB" \
    "$PROG" 0.2 >"$WORK/run$1.txt" 2>&1 || { cat "$WORK/run$1.txt" >&2; fail "run $1: nofp_prog failed"; }
  prof=$(ls "$out"/cfic-*.pb.gz 2>/dev/null | head -1)
  [ -n "$prof" ] || fail "run $1: no snapshot written"
  go tool pprof -comments "$prof" >"$WORK/comments$1.txt" 2>&1 || fail "run $1: go tool pprof rejected $prof"
  go tool pprof -symbolize=none -traces "$prof" >"$WORK/traces$1.txt" 2>&1 || fail "run $1: no traces"
  # total ms, ms under [truncated], ms in nofp_hot, of those ms reaching an entry
  read -r total trunc hot rooted < <(awk '
    function ms(v, u) { u = v; sub(/[0-9.]+/, "", u); sub(/[a-z]+$/, "", v)
                        return (u == "s") ? v * 1000 : (u == "us") ? v / 1000 : v }
    function flush() { if (have) { t += val; if (fr ~ /\[truncated\]/) x += val
                         if (fr ~ /^;nofp_hot;/) { h += val; if (fr ~ /;(main|start_thread);/) r += val } }
                       have = 0; fr = "" }
    /^-+\+-+/ { flush(); next }
    /^ *thread_name:/ { next }
    !have && $1 ~ /^[0-9.]+(ms|s|us)$/ { val = ms($1); have = 1; $1 = ""; sub(/^ +/, ""); fr = ";" $0 ";"; next }
    have { sub(/^ +/, ""); fr = fr $0 ";" }
    END { flush(); printf "%.1f %.1f %.1f %.1f\n", t, x, h, r }' "$WORK/traces$1.txt")
  note "run $1: $trunc of $total ms truncated, $rooted of $hot ms in nofp_hot reach an entry" >&2
  awk -v h="$hot" 'BEGIN { exit !(h >= 100) }' || fail "run $1: too few samples in nofp_hot ($hot ms)"
  awk -v t="$total" -v x="$trunc" 'BEGIN { exit !(x < 0.05 * t) }' || fail "run $1: $trunc of $total ms truncated"
  awk -v h="$hot" -v r="$rooted" 'BEGIN { exit !(r >= 0.95 * h) }' || fail "run $1: only $rooted of $hot ms reach an entry"
  line=$(grep -m1 '^unwind tables:' "$WORK/comments$1.txt") || fail "run $1: no unwind tables comment"
  sed -nE 's/.* ([0-9]+) read from the table cache.*/\1/p' <<<"$line"
}

n1=$(run 1)
[ "$n1" = 0 ] || fail "run 1 (empty cache): $n1 tables read from the cache"
ls "$CDIR"/*.cfi >/dev/null 2>&1 || fail "run 1 left no .cfi file in $CDIR"
[ "$(stat -c %a "$CDIR")" = 700 ] || fail "$CDIR has mode $(stat -c %a "$CDIR")"
for f in "$CDIR"/*.cfi; do [ "$(stat -c %a "$f")" = 600 ] || fail "$f has mode $(stat -c %a "$f")"; done
bid=$(readelf -n "$PROG" | sed -nE 's/.*Build ID: ([0-9a-f]+).*/\1/p')
[ -n "$bid" ] || fail "nofp_prog has no build id"
[ -f "$CDIR/$bid.cfi" ] || fail "no cache file for nofp_prog ($bid)"
nfiles=$(ls "$CDIR"/*.cfi | wc -l)
note "run 1: $nfiles cache files"

n2=$(run 2)
[ "$n2" -ge 4 ] || fail "run 2 (warm): only ${n2:-no} tables read from the cache"

# The program's own file is cut one row short (its header then disagrees
# with its size: refused without a fault, rebuilt); every other one gets a
# byte flipped.
for f in "$CDIR"/*.cfi; do
  sz=$(stat -c %s "$f")
  if [ "$f" = "$CDIR/$bid.cfi" ]; then truncate -s $((sz - 24)) "$f"; continue; fi
  off=$((sz - 7))
  b=$(od -An -tu1 -j "$off" -N1 "$f" | tr -d ' ')
  printf "$(printf '\\%03o' $(( (b ^ 0x20) & 255 )))" | dd of="$f" bs=1 seek="$off" conv=notrunc status=none
done
n3=$(run 3)
[ "$n3" = 0 ] || fail "run 3 (corrupt files): $n3 tables read from the cache"

n4=$(run 4)
[ "$n4" -ge 4 ] || fail "run 4 (rewritten): only ${n4:-no} tables read from the cache"
note "tables read from the cache: $n1, $n2, $n3 (corrupt), $n4"
echo "ok"
