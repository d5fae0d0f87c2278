#!/usr/bin/env bash
# Smoke run of the real-program bench (bench/real/run.sh --quick) on one
# small program (xz): the Markdown table it prints has every column and a
# row per profiler, and libptprof, gperftools and perf (fp and DWARF) each
# left a profile that its reader (go tool pprof, perf script) parses into
# samples. No timing assertions: the figures themselves belong to
# docs/performance.md. Skips (77) only when perf record is not permitted.
source "$(dirname "$0")/../lib.sh"

[ -f "$PT_BUILD_PROF/libptprof.so" ] || fail "no $PT_BUILD_PROF/libptprof.so (build profile first)"
command -v perf >/dev/null || skip "perf is not installed"
perf record -q -F 99 --call-graph dwarf -o "$TMPDIR/probe.data" -- true >/dev/null 2>&1 \
  || skip "perf record is not permitted here (perf_event_paranoid $(cat /proc/sys/kernel/perf_event_paranoid))"

out=$TMPDIR/real
PROGRAMS=xz KEEP=1 OUT=$out bash "$PT_SRC/bench/real/run.sh" --quick "$PT_BUILD_PROF" \
  >"$TMPDIR/table.md" 2>"$TMPDIR/run.err"
rc=$?
[ $rc = 0 ] || { cat "$TMPDIR/run.err" >&2; fail "run.sh --quick exited $rc"; }
cat "$TMPDIR/table.md"

header='| program | profiler | CPU ratio (95 % CI) | completeness | rooted | named | leaf TVD vs perf-dwarf | split error | in steps |'
grep -qxF "$header" "$TMPDIR/table.md" || fail "table header missing or changed"
grep -qE '^\| xz \| none: [0-9.]+ s CPU, mean of 2 runs \|' "$TMPDIR/table.md" || fail "no baseline row"
for t in libptprof gperftools perf-fp perf-dwarf; do
  row=$(grep -E "^\| xz \| $t \|" "$TMPDIR/table.md") || fail "no row for $t"
  # 9 columns: the ratio with its CI, completeness, rooted and named shares
  # as percentages, the TVD a number (perf-dwarf, the reference, has none).
  [ "$(echo "$row" | awk -F'|' '{print NF - 2}')" = 9 ] || fail "row for $t has not 9 columns: $row"
  echo "$row" | grep -qE "^\| xz \| $t \| [0-9]+\.[0-9]{3} ± [0-9]+\.[0-9]{3} \| [0-9.]+ % \| [0-9.]+ % \| [0-9.]+ % \| ([0-9]\.[0-9]{3}|-) \|" \
    || fail "row for $t is malformed: $row"
done

# Each profiler's own files read back by a real reader, with samples in it.
last=$out/last
snap=$(ls "$last"/xz-libptprof/snap/*.pb.gz 2>/dev/null | head -n 1)
[ -n "$snap" ] || fail "libptprof wrote no snapshot"
n=$(go tool pprof -raw "$snap" | grep -cE '^ +[0-9]+ +[0-9]+: [0-9 ]+$')
[ "$n" -gt 0 ] || fail "go tool pprof read no samples from $snap"
[ -f "$last/xz-gperftools/g.prof" ] || fail "gperftools wrote no profile"
n=$(go tool pprof -raw -symbolize=none "$last/xz-gperftools/g.prof" | grep -cE '^ +[0-9]+ +[0-9]+: [0-9 ]+$')
[ "$n" -gt 0 ] || fail "go tool pprof read no samples from gperftools' profile"
for t in perf-fp perf-dwarf; do
  n=$(perf script -F comm,period -i "$last/xz-$t/perf.data" 2>/dev/null | grep -c '^ *xz ')
  [ "$n" -gt 0 ] || fail "perf script read no xz samples from $t's perf.data"
done
# The driver's own pooled counts agree that every profiler sampled.
python3 - "$out/results.json" <<'PY' || fail "results.json lacks samples for a profiler"
import json, sys
s = json.load(open(sys.argv[1]))["summary"]["xz"]
bad = [t for t in ("libptprof", "gperftools", "perf-fp", "perf-dwarf")
       if not (s[t]["samples"] > 0 and s[t]["files"] >= 2 and s[t]["pairs"] == 2)]
print("profilers without samples:", bad) if bad else None
sys.exit(1 if bad else 0)
PY
echo "ok: table and profiles of libptprof, gperftools, perf-fp and perf-dwarf"
