#!/usr/bin/env bash
# labels_preload_test.sh - ptprof_labels_push/_pop in preload mode: an
# unmodified-but-for-labels program (tests/prof/labels_preload, linked
# against libptprof.so) under LD_PRELOAD + PTPROF_DIR. Reads the final
# snapshot with go tool pprof and asserts: the label mode=preload exists;
# -tagfocus=mode=preload keeps labelled() and not unlabelled(); -tagignore
# keeps unlabelled() and not labelled(). Skips (77) only without go.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require labels_preload
prof_workdir labels-preload

env PTPROF_DIR="$WORK/snap" PTPROF_PREFIX="lp-" PTPROF_HZ=499 LD_PRELOAD="$LIB" "$PROG" 400 \
  >"$WORK/out.txt" 2>&1 || { cat "$WORK/out.txt" >&2; fail "labels_preload failed"; }
shopt -s nullglob
files=("$WORK"/snap/lp-*.pb.gz)
[ ${#files[@]} -ge 1 ] || { cat "$WORK/out.txt" >&2; fail "no snapshot in $WORK/snap"; }
F="${files[-1]}"
PP=(go tool pprof -sample_index=samples -nodefraction=0)
"${PP[@]}" -tags "$F" >"$WORK/tags.txt" 2>&1 || { cat "$WORK/tags.txt" >&2; fail "pprof -tags"; }
"${PP[@]}" -tagfocus=mode=preload -top "$F" >"$WORK/in.txt" 2>&1 || fail "pprof -tagfocus"
"${PP[@]}" -tagignore=mode=preload -top "$F" >"$WORK/out_top.txt" 2>&1 || fail "pprof -tagignore"
grep -A1 '^ mode: Total' "$WORK/tags.txt" | grep -c ': preload$' >/dev/null || { cat "$WORK/tags.txt" >&2; fail "no mode=preload label"; }
n=$(awk '/^ mode: Total/ {print int($3)}' "$WORK/tags.txt")
[ "$n" -ge 50 ] || fail "only $n samples labelled mode=preload for 400 ms at 499 Hz"
grep -qw labelled "$WORK/in.txt" && ! grep -qw unlabelled "$WORK/in.txt" ||
  { cat "$WORK/in.txt" >&2; fail "-tagfocus=mode=preload: want labelled() only"; }
grep -qw unlabelled "$WORK/out_top.txt" && ! grep -qw labelled "$WORK/out_top.txt" ||
  { cat "$WORK/out_top.txt" >&2; fail "-tagignore=mode=preload: want unlabelled() only"; }
note "$n samples labelled mode=preload in preload mode"
