#!/usr/bin/env bash
# No two source files call each other, directly or around a loop
# (CONTRIBUTING.md "How the code is laid out"). The file-level call graph is
# derived from the built objects of build/dev and build/profile: for every
# object of src/{daemon,tui,common,prof,console}, `nm` lists the global
# symbols it defines and the ones it leaves undefined; file A depends on
# file B when A leaves undefined a symbol that B defines (a call, or a
# reference to B's data or vtable). Any strongly connected component of
# more than one file is a loop and fails the test, with the symbols that
# close it.
# KNOWN_LOOPS: loops tolerated by exact file set (a loop with one more or
# one other file fails), each with the reason; none today, keep it that way.
KNOWN_LOOPS=(
)
# Control: two throwaway objects that call each other must be reported as a
# loop by the same detector, so a detector that sees nothing cannot pass.
source "$(dirname "$0")/../lib.sh"
command -v nm >/dev/null || skip "nm missing"
command -v cc >/dev/null || skip "cc missing"

work=$(mktemp -d "$TMPDIR/call-loops.XXXXXX")
trap 'rm -rf "$work"' EXIT

# symbols OBJECT SOURCE: lines "SOURCE D sym" / "SOURCE U sym" for OBJECT.
symbols() {
  nm -g "$1" | awk -v src="$2" '
    NF == 2 && $1 == "U" { print src, "U", $2; next }
    NF == 3 && $2 ~ /^[TDBRVWGSuiC]$/ { print src, "D", $3 }'
}

# objects BUILD_DIR: lines "OBJECT SOURCE" for every object the build
# compiles now from src/{daemon,tui,common,prof,console} (from meson's
# compile_commands.json, so a stale object of a removed file is not read).
objects() {
  python3 - "$1" "$PT_SRC" <<'EOF'
import json, os, sys
build, root = sys.argv[1], os.path.realpath(sys.argv[2])
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    src = os.path.relpath(os.path.realpath(os.path.join(e["directory"], e["file"])), root)
    parts = src.split(os.sep)
    if len(parts) >= 3 and parts[0] == "src" and parts[1] in ("daemon", "tui", "common", "prof", "console"):
        print(os.path.join(e["directory"], e["output"]), src)
EOF
}

# loops SYMFILE [KNOWN...]: prints each loop (its files, then the edges
# inside it with the symbols that make them); exit status 1 when there is a
# loop whose sorted file list is not one of KNOWN.
loops() {
  python3 - "$@" <<'EOF'
import sys, collections
known = set(sys.argv[2:])
defs = collections.defaultdict(set)   # symbol -> files defining it
undef = collections.defaultdict(set)  # file -> symbols it needs
for line in open(sys.argv[1]):
    src, kind, sym = line.split()
    (defs[sym].add(src) if kind == "D" else undef[src].add(sym))
edges = collections.defaultdict(dict)  # a -> {b: [symbols]}
for a, syms in undef.items():
    for s in sorted(syms):
        for b in defs.get(s, ()):
            if b != a:
                edges[a].setdefault(b, []).append(s)
files = sorted(set(edges) | {b for a in edges for b in edges[a]} | set(undef))
# Tarjan's strongly connected components (iterative: no recursion limit).
index, low, onstack, stack, comps, n = {}, {}, set(), [], [], 0
for root in files:
    if root in index: continue
    work = [(root, iter(sorted(edges[root])))]
    index[root] = low[root] = n; n += 1; stack.append(root); onstack.add(root)
    while work:
        v, it = work[-1]
        for w in it:
            if w not in index:
                index[w] = low[w] = n; n += 1; stack.append(w); onstack.add(w)
                work.append((w, iter(sorted(edges[w]))))
                break
            if w in onstack: low[v] = min(low[v], index[w])
        else:
            work.pop()
            if work: low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                c = []
                while True:
                    w = stack.pop(); onstack.discard(w); c.append(w)
                    if w == v: break
                if len(c) > 1: comps.append(sorted(c))
bad = 0
for c in comps:
    tolerated = " ".join(c) in known
    bad += not tolerated
    print("%sloop of %d files: %s" % ("known " if tolerated else "", len(c), " ".join(c)))
    for a in c:
        for b in sorted(edges[a]):
            if b in c:
                print("  %s -> %s  (%s)" % (a, b, " ".join(edges[a][b][:4])))
for k in sorted(known - {" ".join(c) for c in comps}):
    print("known loop no longer there (remove it from KNOWN_LOOPS): " + k)
sys.exit(1 if bad else 0)
EOF
}

# --- control: a loop the detector must see ---
mkdir -p "$work/ctl/src/tui/x.a.p"
printf 'int ctl_b(int);\nint ctl_a(int n) { return n ? ctl_b(n - 1) : 0; }\n' >"$work/ctl/a.c"
printf 'int ctl_a(int);\nint ctl_b(int n) { return n ? ctl_a(n - 1) : 1; }\n' >"$work/ctl/b.c"
cc -c -o "$work/ctl/src/tui/x.a.p/ctl_a.c.o" "$work/ctl/a.c" || fail "cannot compile the control"
cc -c -o "$work/ctl/src/tui/x.a.p/ctl_b.c.o" "$work/ctl/b.c" || fail "cannot compile the control"
: >"$work/ctl.syms"
symbols "$work/ctl/src/tui/x.a.p/ctl_a.c.o" src/tui/ctl_a.c >>"$work/ctl.syms"
symbols "$work/ctl/src/tui/x.a.p/ctl_b.c.o" src/tui/ctl_b.c >>"$work/ctl.syms"
if loops "$work/ctl.syms" >"$work/ctl.out"; then
  fail "the detector missed the control loop ctl_a.c <-> ctl_b.c"
fi
grep -q 'src/tui/ctl_a.c -> src/tui/ctl_b.c' "$work/ctl.out" || { cat "$work/ctl.out" >&2; fail "control loop reported wrongly"; }
note "control: $(head -1 "$work/ctl.out")"

# --- the real objects ---
: >"$work/all.syms"
nobj=0
for b in "$PT_BUILD_DEV" "$PT_BUILD_PROF"; do
  [ -d "$b" ] || fail "missing $b (build dev and profile first)"
  [ -f "$b/compile_commands.json" ] || fail "missing $b/compile_commands.json"
  while read -r o src; do
    [ -f "$o" ] || fail "missing object $o (build $b first)"
    symbols "$o" "$src" >>"$work/all.syms"
    nobj=$((nobj + 1))
  done < <(objects "$b")
done
[ "$nobj" -ge 40 ] || fail "only $nobj objects found in $PT_BUILD_DEV and $PT_BUILD_PROF"
nfiles=$(cut -d' ' -f1 "$work/all.syms" | sort -u | wc -l)
note "$nobj objects, $nfiles source files"
for d in daemon tui common prof console; do
  grep -q "^src/$d/" "$work/all.syms" || fail "no object of src/$d seen"
done
if ! loops "$work/all.syms" "${KNOWN_LOOPS[@]}" >"$work/out"; then
  cat "$work/out" >&2
  fail "source files call each other in a loop"
fi
grep '^known\|^known loop' "$work/out" | while read -r l; do note "$l"; done
echo ok
