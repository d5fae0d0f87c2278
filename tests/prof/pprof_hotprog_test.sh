#!/usr/bin/env bash
# pprof_hotprog_test.sh - end to end: profile tests/prof/hotprog with the
# preloaded sampler (LD_PRELOAD=libptprof.so, PTPROF_* environment), then
# read the final snapshot back with `go tool pprof -symbolize=none
# -nodefraction=0` and with tools/ptprof-validate, and check what hotprog is
# built to show:
#   - hot_spin is the top flat entry;
#   - inlined_work appears marked "(inline)" under inline_host;
#   - the time spent inside malloc/free (libc leaves) sits under alloc_heavy
#     (at least 90 % of it: the unwinder must get from libc back to the
#     caller);
#   - the thread_name label lets -tagfocus select the main thread.
# Skips (77) only when go is missing.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require hotprog

prof_workdir pprof-hotprog

# 999 Hz for enough samples in 3 CPU seconds; final snapshot at exit.
env PTPROF_DIR="$WORK/snap" PTPROF_PREFIX="hotprog-" PTPROF_HZ=999 PTPROF_KEEP=4 \
  LD_PRELOAD="$LIB" "$PROG" 3 >"$WORK/out.txt" 2>&1 &
PIDS+=($!)
wait "${PIDS[0]}" || { cat "$WORK/out.txt" >&2; fail "hotprog failed under the preloaded sampler"; }
PIDS=()

shopt -s nullglob
files=("$WORK"/snap/hotprog-*.pb.gz)
[ ${#files[@]} -ge 1 ] || { cat "$WORK/out.txt" >&2; fail "no snapshot written in $WORK/snap"; }
F="${files[-1]}"
note "snapshot: $F"

"$VALIDATE" --summary "$F" >"$WORK/validate.txt" 2>&1 || { cat "$WORK/validate.txt" >&2; fail "ptprof-validate rejected the snapshot"; }
cat "$WORK/validate.txt"

PP=(go tool pprof -symbolize=none -nodefraction=0 -sample_index=samples)
"${PP[@]}" -top "$F" >"$WORK/top.txt" 2>&1 || { cat "$WORK/top.txt" >&2; fail "go tool pprof -top failed"; }
"${PP[@]}" -traces "$F" >"$WORK/traces.txt" 2>&1 || { cat "$WORK/traces.txt" >&2; fail "go tool pprof -traces failed"; }

# hot_spin: the first entry of -top (the table starts after the "flat" header)
first=$(awk '/ flat +flat% +sum%/ {hdr=1; next} hdr && NF {print $NF; exit}' "$WORK/top.txt")
[ "$first" = "hot_spin" ] || { cat "$WORK/top.txt" >&2; fail "top entry is '$first', want hot_spin"; }

grep -q "inlined_work (inline)" "$WORK/traces.txt" || { head -60 "$WORK/traces.txt" >&2; fail "inlined_work not marked (inline)"; }

# malloc time under alloc_heavy, from the traces
python3 - "$WORK/traces.txt" <<'EOF' || fail "malloc/free time not under alloc_heavy"
import re, sys
blocks = open(sys.argv[1]).read().split("-----------+-")
alloc = under = 0
inline_ok = False
for b in blocks:
    frames, value = [], None
    for line in b.splitlines():
        if not line.strip() or re.match(r"^\s*\w+:\s", line) or line.startswith("File:") \
           or line.startswith("Type:") or line.startswith("Time:") or line.startswith("Duration:"):
            continue
        m = re.match(r"^\s*(\d+)\s+(\S.*)$", line)
        if value is None and m:
            value, frames = int(m.group(1)), [m.group(2).strip()]
        elif value is not None:
            frames.append(line.strip())
    if value is None:
        continue
    leaf = frames[0].replace(" (inline)", "")
    if re.search(r"malloc|free|_int_|tcache|unlink_chunk|consolidate|arena|sysmalloc", leaf):
        alloc += value
        if any(f.startswith("alloc_heavy") for f in frames):
            under += value
    if frames[0].startswith("inlined_work (inline)") and len(frames) > 1 and frames[1].startswith("inline_host"):
        inline_ok = True
print(f"# malloc-family samples: {alloc}, under alloc_heavy: {under}"
      f" ({100.0 * under / alloc if alloc else 0:.1f} %)")
if alloc == 0:
    sys.exit("no samples in malloc/free at all")
if under < 0.9 * alloc:
    sys.exit("less than 90 % of malloc time is attributed to alloc_heavy")
if not inline_ok:
    sys.exit("no stack inlined_work (inline) <- inline_host")
EOF

# thread label: focusing on the named main thread keeps hot_spin
"${PP[@]}" -top -tagfocus=thread_name=hotprog-main "$F" >"$WORK/tag.txt" 2>&1 || fail "tagfocus failed"
grep -q " hot_spin$" "$WORK/tag.txt" || { cat "$WORK/tag.txt" >&2; fail "thread_name label missing"; }

note "ok: hot_spin on top, inline marked, malloc under alloc_heavy"
exit 0
