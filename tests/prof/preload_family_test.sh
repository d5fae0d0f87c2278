#!/usr/bin/env bash
# preload_family_test.sh - bounded preload output under exec churn and
# private files (tests/prof/execchurn fork+execs itself, every child under
# the preload writes "<prefix>pid<PID>-..." snapshots):
#   1. PTPROF_KEEP_TOTAL bounds the family (PTPROF_PREFIX and its pid<N>-
#      children) to exactly that many files after 40 children run 4 at a
#      time (so several processes prune at once); the oldest (a dead child's
#      file with an old mtime) goes first, the root's final snapshot stays;
#      another family (a prefix that merely starts with ours), an unrelated
#      prefix and a temp file being written are untouched; go tool pprof
#      reads the kept files;
#   2. the default total is 64;
#   3. umask 022 and 000: snapshots 0600, a created PTPROF_DIR 0700, no
#      warning; an existing 0755 PTPROF_DIR gets one warning on stderr.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
prof_require execchurn

prof_workdir preload-family

count_family() { # DIR PREFIX: snapshots of the family
  find "$1" -maxdepth 1 -type f -regextype posix-extended \
    -regex ".*/$2(pid[0-9]+-)?[0-9]{8}T[0-9]{6}Z-[0-9]+\.pb\.gz" | wc -l
}

# ---- 1. PTPROF_KEEP_TOTAL, neighbours untouched ---------------------------
D="$WORK/fam"
mkdir -m 700 "$D"
for f in churn-x-20200101T000000Z-000001.pb.gz other-20200101T000000Z-000001.pb.gz \
         .churn-pid1-20200101T000000Z-000001.pb.gz.tmp; do
  echo "$f" >"$D/$f"
done
echo dead >"$D/churn-pid1-20300101T000000Z-000001.pb.gz"
touch -d '2001-01-01' "$D/churn-pid1-20300101T000000Z-000001.pb.gz"
PTPROF_DIR="$D" PTPROF_PREFIX=churn- PTPROF_KEEP_TOTAL=10 LD_PRELOAD="$LIB" \
  "$PROG" parent 40 4 5 >"$WORK/churn.txt" 2>&1 || { cat "$WORK/churn.txt" >&2; fail "execchurn failed"; }
n=$(count_family "$D" churn-)
[ "$n" -eq 10 ] || { ls -la "$D" >&2; fail "family holds $n files, want PTPROF_KEEP_TOTAL=10"; }
[ ! -e "$D/churn-pid1-20300101T000000Z-000001.pb.gz" ] || fail "the oldest family file was kept"
roots=("$D"/churn-2*.pb.gz)
[ ${#roots[@]} -eq 1 ] && [ -f "${roots[0]}" ] || { ls -la "$D" >&2; fail "the root's final snapshot is missing"; }
for f in churn-x-20200101T000000Z-000001.pb.gz other-20200101T000000Z-000001.pb.gz \
         .churn-pid1-20200101T000000Z-000001.pb.gz.tmp; do
  [ "$(cat "$D/$f")" = "$f" ] || fail "$f was touched"
done
for f in "$D"/churn-*.pb.gz; do
  case "$f" in */churn-x-*) continue ;; esac
  go tool pprof -symbolize=none -raw "$f" >/dev/null 2>"$WORK/pp.txt" || { cat "$WORK/pp.txt" >&2; fail "go tool pprof rejected $f"; }
done
! grep -q "ptprof: warning" "$WORK/churn.txt" || fail "a 0700 PTPROF_DIR was warned about"
note "PTPROF_KEEP_TOTAL=10 after 40 exec'd children: $n files, neighbours untouched"

# ---- 2. default total --------------------------------------------------------
D="$WORK/def"
PTPROF_DIR="$D" LD_PRELOAD="$LIB" "$PROG" parent 70 4 1 >"$WORK/def.txt" 2>&1 \
  || { cat "$WORK/def.txt" >&2; fail "execchurn failed"; }
n=$(count_family "$D" profile-)
[ "$n" -eq 64 ] || fail "default total: $n files, want 64"
note "default PTPROF_KEEP_TOTAL: 71 processes, $n files"

# ---- 3. modes whatever the umask ---------------------------------------------
for m in 022 000; do
  D="$WORK/umask$m/a/b"
  ( umask "$m"; PTPROF_DIR="$D" LD_PRELOAD="$LIB" "$PROG" parent 2 1 1 ) >"$WORK/u$m.txt" 2>&1 \
    || { cat "$WORK/u$m.txt" >&2; fail "execchurn failed (umask $m)"; }
  for f in "$D"/*.pb.gz; do
    [ "$(stat -c %a "$f")" = 600 ] || fail "umask $m: $f has mode $(stat -c %a "$f")"
  done
  for d in "$WORK/umask$m/a" "$D"; do
    [ "$(stat -c %a "$d")" = 700 ] || fail "umask $m: $d has mode $(stat -c %a "$d")"
  done
  ! grep -q "ptprof: warning" "$WORK/u$m.txt" || fail "umask $m: warned about our own 0700 directory"
done
D="$WORK/open"
mkdir "$D"; chmod 755 "$D"
PTPROF_DIR="$D" LD_PRELOAD="$LIB" "$PROG" parent 3 1 1 >"$WORK/open.txt" 2>&1 || fail "execchurn failed"
[ "$(grep -c "ptprof: warning: PTPROF_DIR $D has mode 0755" "$WORK/open.txt")" -eq 1 ] \
  || { cat "$WORK/open.txt" >&2; fail "want exactly one warning for a 0755 PTPROF_DIR"; }
note "modes: files 0600, directories 0700 with umask 022 and 000; a 0755 directory warned once"
exit 0
