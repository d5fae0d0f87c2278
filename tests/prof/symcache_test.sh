#!/usr/bin/env bash
# symcache_test.sh - the persistent symbol cache end to end, under the
# preload (PTPROF_SYMCACHE=<dir>), profiles read by `go tool pprof`:
#   1. miss then hit: a program built here (cc -g) is profiled twice; the
#      second profile says its addresses came from the cache, its hot
#      function is still on top; the cache file is 0600 in a 0700 dir;
#   2. a rebuilt binary at the same path (new build id): its new function
#      name shows, never the old cached one; a second cache file appears;
#   3. a corrupt cache file: ignored (right names), rewritten valid;
#   4. tests/prof/hotprog with a warm cache against PTPROF_SYMCACHE=off:
#      every function seen in both has the same file and start line, and
#      inlined_work is still an inline frame under inline_host;
#   5. a program of three compile units, each run spending its time in
#      another one: a run after the first opens no object (its CU was never
#      sampled, but the first run's miss cached the whole program), with
#      the names and lines of a run without the cache;
#   6. every cache file the runs above wrote (appended to, rewritten) reads
#      back under an independent reader of the documented format
#      (tests/prof/symbols/symcache_format.py: layout, every checksum).
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require hotprog
command -v cc >/dev/null || skip "no C compiler"

prof_workdir symcache
SC="$WORK/cache/symbols"
PP=(go tool pprof -symbolize=none -nodefraction=0 -sample_index=samples)

cat >"$WORK/prog.c" <<'C'
#include <stdint.h>
#include <stdlib.h>
#include <time.h>
static volatile uint64_t sink;
static double cpu_s(void) {
  struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return (double)t.tv_sec + t.tv_nsec / 1e9;
}
__attribute__((noinline)) void HOT(double s) {
  uint64_t x = 1; double end = cpu_s() + s;
  while (cpu_s() < end) for (int i = 0; i < 20000; i++) x = x * 6364136223846793005ULL + 1;
  sink = x;
}
int main(int argc, char **argv) { HOT(argc > 1 ? atof(argv[1]) : 0.3); return 0; }
C
build() { cc -O1 -g -fno-omit-frame-pointer -Wl,--build-id -DHOT="$1" -o "$WORK/bin/prog" "$WORK/prog.c"; }
mkdir -p "$WORK/bin"
profile() { # TAG [extra env...]: profiles prog into $WORK/$TAG, prints the file
  local tag=$1; shift
  env "$@" PTPROF_DIR="$WORK/$tag" PTPROF_HZ=499 LD_PRELOAD="$LIB" "$WORK/bin/prog" 0.3 \
    >"$WORK/$tag.out" 2>&1 || { cat "$WORK/$tag.out" >&2; fail "prog failed ($tag)"; }
  local f=("$WORK/$tag"/profile-*.pb.gz)
  [ -f "${f[0]}" ] || fail "no profile ($tag)"
  echo "${f[0]}"
}
top_fn() { "${PP[@]}" -top "$1" 2>/dev/null | awk '/ flat +flat% +sum%/ {h=1; next} h && NF {print $NF; exit}'; }
symline() { go tool pprof -comments "$1" 2>/dev/null | grep '^symbols:' || true; }
bid() { readelf -n "$1" | awk '/Build ID/ {print $3}'; }

# ---- 1. miss, then hit ------------------------------------------------------
build hot_alpha
id1=$(bid "$WORK/bin/prog")
P1=$(profile r1 PTPROF_SYMCACHE="$SC")
[ "$(top_fn "$P1")" = hot_alpha ] || fail "cold: top is $(top_fn "$P1")"
[ -f "$SC/$id1.sym" ] || { ls -la "$SC" >&2; fail "no cache file for build id $id1"; }
[ "$(stat -c %a "$SC/$id1.sym")" = 600 ] || fail "cache file mode $(stat -c %a "$SC/$id1.sym")"
[ "$(stat -c %a "$SC")" = 700 ] && [ "$(stat -c %a "$WORK/cache")" = 700 ] || fail "cache dirs not 0700"
P2=$(profile r2 PTPROF_SYMCACHE="$SC")
s2=$(symline "$P2")
[[ "$s2" =~ ([0-9]+)\ from\ the\ symbol\ cache ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] \
  || fail "warm run: no addresses from the cache: '$s2'"
[ "$(top_fn "$P2")" = hot_alpha ] || fail "warm: top is $(top_fn "$P2")"
note "cold: $(symline "$P1")"
note "warm: $s2"

# ---- 2. rebuilt binary, new build id -------------------------------------------
build hot_beta
id2=$(bid "$WORK/bin/prog")
[ "$id1" != "$id2" ] || fail "the rebuild kept build id $id1"
P3=$(profile r3 PTPROF_SYMCACHE="$SC")
[ "$(top_fn "$P3")" = hot_beta ] || fail "rebuilt: top is $(top_fn "$P3")"
! "${PP[@]}" -top "$P3" 2>/dev/null | grep -c hot_alpha >/dev/null || fail "the old build's name leaked into the rebuilt one"
[ -f "$SC/$id2.sym" ] && [ -f "$SC/$id1.sym" ] || { ls -la "$SC" >&2; fail "want one cache file per build id"; }
note "rebuilt binary: $id1 -> $id2, top hot_beta"

# ---- 3. corrupt cache file --------------------------------------------------
printf 'PTPSYMC\ngarbage garbage' >"$SC/$id2.sym"
P4=$(profile r4 PTPROF_SYMCACHE="$SC")
[ "$(top_fn "$P4")" = hot_beta ] || fail "corrupt cache: top is $(top_fn "$P4")"
[ "$(stat -c %s "$SC/$id2.sym")" -gt 200 ] || fail "the corrupt cache file was not rewritten"
P5=$(profile r5 PTPROF_SYMCACHE="$SC")
[[ "$(symline "$P5")" =~ ([0-9]+)\ from\ the\ symbol\ cache ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] \
  || fail "the rewritten cache file is not used: $(symline "$P5")"
note "corrupt file ignored and rebuilt"

# ---- 4. same names, files, start lines, inline frames as without the cache --------
HP="$PT_BUILD_PROF/tests/prof/hotprog"
hot() { # TAG CACHE
  env PTPROF_DIR="$WORK/$1" PTPROF_PREFIX=hot- PTPROF_HZ=999 PTPROF_SYMCACHE="$2" LD_PRELOAD="$LIB" \
    "$HP" 1 >"$WORK/$1.out" 2>&1 || { cat "$WORK/$1.out" >&2; fail "hotprog failed ($1)"; }
  local f=("$WORK/$1"/hot-*.pb.gz)
  go tool pprof -raw "${f[0]}" 2>/dev/null >"$WORK/$1.raw" || fail "go tool pprof -raw failed ($1)"
  "${PP[@]}" -traces "${f[0]}" >"$WORK/$1.traces" 2>&1 || fail "go tool pprof -traces failed ($1)"
  symline "${f[0]}" >"$WORK/$1.sym"
}
hot h-off off
hot h-fill "$WORK/hcache"
hot h-warm "$WORK/hcache"
grep -q "off)" "$WORK/h-off.sym" || fail "PTPROF_SYMCACHE=off not reported: $(cat "$WORK/h-off.sym")"
[[ "$(cat "$WORK/h-warm.sym")" =~ ([0-9]+)\ from\ the\ symbol\ cache ]] && [ "${BASH_REMATCH[1]}" -gt 0 ] \
  || fail "hotprog warm run: nothing from the cache: $(cat "$WORK/h-warm.sym")"
grep -q "inlined_work (inline)" "$WORK/h-warm.traces" || fail "warm cache: inlined_work not inline"
python3 - "$WORK/h-off.raw" "$WORK/h-warm.raw" <<'PY' || fail "function identity differs with the cache"
import re, os, sys
# Keyed by (object, function): a name can exist in two objects (libc's
# clock_gettime and the vDSO's), and two runs sample different PCs.
def funcs(path):
    out, inl, inloc = {}, False, False
    sec, maps, locs = None, {}, []
    for line in open(path):
        if line.startswith("Locations"): sec = "loc"; continue
        if line.startswith("Mappings"): sec = "map"; continue
        if sec == "map":
            m = re.match(r"^\s*(\d+): \S+ (\S+)", line)
            if m: maps[m.group(1)] = os.path.basename(m.group(2))
            continue
        if sec != "loc": continue
        lm = re.match(r"^\s*\d+: 0x[0-9a-f]+ M=(\d+) ", line)
        body = line[lm.end():].rstrip() if lm else line.strip()
        if lm: inloc, mid = [], lm.group(1)
        m = re.match(r"^(\S+) (\S*):\d+ s=(\d+)", body.strip())
        if m:
            locs.append((mid, m.group(1), m.group(2), m.group(3)))
            inloc.append(m.group(1))
            if inloc[-2:] == ["inlined_work", "inline_host"]: inl = True
    for mid, fn, file, start in locs:
        out.setdefault((maps.get(mid, mid), fn), set()).add((file, start))
    return out, inl
a, ia = funcs(sys.argv[1]); b, ib = funcs(sys.argv[2])
common = set(a) & set(b)
# Static functions of one name in several files of an object (libc has
# many) give several (file, start line) pairs, of which a run sees those it
# sampled: they must then share one; a single pair on each side must match.
bad = [f for f in common if not (a[f] & b[f]) or (len(a[f]) == 1 == len(b[f]) and a[f] != b[f])]
print(f"# functions: {len(a)} without cache, {len(b)} with, {len(common)} in both, {len(bad)} differ")
if len(common) < 3 or bad or not (ia and ib): sys.exit(f"differ: {bad[:5]}, inline {ia} {ib}")
PY
note "hotprog: $(cat "$WORK/h-warm.sym")"

# ---- 5. compile units never sampled before: nothing opened -----------------------
# Each unit's loop calls nothing (no libc samples, whose CUs libc6-dbg's
# size keeps out of a whole fill); a sample in libc's start or exit code
# could still open libc, so a second unit is tried before failing.
mkdir -p "$WORK/cu"
for u in alpha beta gamma; do
  cat >"$WORK/cu/$u.c" <<C
#include <stdint.h>
volatile uint64_t sink_$u;
__attribute__((noinline)) void work_$u(uint64_t n) {
  uint64_t x = 1;
  for (uint64_t i = 0; i < n; i++) x = x * 6364136223846793005ULL + i;
  sink_$u = x;
}
C
done
cat >"$WORK/cu/main.c" <<'C'
#include <stdint.h>
#include <stdlib.h>
void work_alpha(uint64_t), work_beta(uint64_t), work_gamma(uint64_t);
int main(int argc, char **argv) {
  uint64_t n = strtoull(argv[2], NULL, 10);
  switch (argv[1][0]) { case 'a': work_alpha(n); break; case 'b': work_beta(n); break; default: work_gamma(n); }
  return 0;
}
C
cc -O1 -g -Wl,--build-id -o "$WORK/bin/cuprog" "$WORK/cu/main.c" "$WORK/cu/alpha.c" "$WORK/cu/beta.c" \
  "$WORK/cu/gamma.c" || fail "cannot build the three-unit program"
cu_run() { # TAG CACHE WHICH: profiles cuprog; prints the profile
  env PTPROF_DIR="$WORK/$1" PTPROF_HZ=499 PTPROF_SYMCACHE="$2" LD_PRELOAD="$LIB" "$WORK/bin/cuprog" "$3" \
    200000000 >"$WORK/$1.out" 2>&1 || { cat "$WORK/$1.out" >&2; fail "cuprog failed ($1)"; }
  local f=("$WORK/$1"/profile-*.pb.gz)
  [ -f "${f[0]}" ] || fail "no profile ($1)"
  echo "${f[0]}"
}
opened() { [[ "$(symline "$1")" =~ ([0-9]+)\ objects\ opened ]] && echo "${BASH_REMATCH[1]}"; }
CC5="$WORK/cucache"
C1=$(cu_run cu-a "$CC5" a)
[ "$(top_fn "$C1")" = work_alpha ] || fail "three units, first run: top is $(top_fn "$C1")"
[ "$(opened "$C1")" -ge 1 ] || fail "the first run opened nothing: $(symline "$C1")"
w=beta
C2=$(cu_run cu-b "$CC5" b)
if [ "$(opened "$C2")" != 0 ]; then
  note "run of work_beta opened objects ($(symline "$C2")); trying work_gamma"
  w=gamma
  C2=$(cu_run cu-c "$CC5" c)
fi
[ "$(opened "$C2")" = 0 ] || fail "a run sampling a unit never sampled before opened objects: $(symline "$C2")"
[ "$(top_fn "$C2")" = "work_$w" ] || fail "three units, warm run: top is $(top_fn "$C2")"
C3=$(cu_run cu-off off "${w:0:1}")
# same function, file and line of every location as without the cache
locs() { go tool pprof -raw "$1" 2>/dev/null | awk '/^Locations/ {l=1; next} /^Mappings/ {l=0} l' |
  grep -oE 'work_[a-z]+ [^ ]+:[0-9]+ s=[0-9]+' | sort -u; }
locs "$C2" >"$WORK/cu-warm.locs"; locs "$C3" >"$WORK/cu-off.locs"
[ -s "$WORK/cu-warm.locs" ] || fail "no work_$w location in the warm run"
comm -13 "$WORK/cu-off.locs" "$WORK/cu-warm.locs" | grep -q . &&
  fail "locations of the cache not in an uncached run: $(comm -13 "$WORK/cu-off.locs" "$WORK/cu-warm.locs" | head -3)"
note "three units: $(symline "$C2")"

# ---- 6. the files, read by an independent reader of the format -----------------
if [ "$(python3 -c 'import sys; print(open("/proc/cpuinfo").read().count(" sse4_2"))' 2>/dev/null || echo 0)" = 0 ]; then
  note "part 6 skipped: no SSE4.2 here, the files use zlib's CRC-32 (the reader checks CRC-32C files)"
else
  files=()
  for d in "$WORK"/*/ "$SC"/; do for f in "$d"*.sym; do [ -f "$f" ] && files+=("$f"); done; done
  [ "${#files[@]}" -ge 3 ] || fail "want 3+ cache files to read back, found ${#files[@]}"
  python3 "$(dirname "${BASH_SOURCE[0]}")/symbols/symcache_format.py" "${files[@]}" >"$WORK/format.out" 2>&1 \
    || { cat "$WORK/format.out" >&2; fail "a cache file does not read back under the documented format"; }
  note "format: ${#files[@]} files read back by an independent reader, every checksum right"
fi
exit 0
