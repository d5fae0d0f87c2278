# tests/prof/guest_lib.sh - shared part of the "harmless guest" tests
# (guest_*_test.sh, issue 21): a program runs once unprofiled and once
# preloaded with libptprof.so, each in a fresh directory of its own, and
# what it did must be the same byte for byte: its stdout, its stderr, its
# exit code and every file it left in its directory. Source it after
# prof_lib.sh (prof_require, prof_workdir).

# engines_here: the engines this machine can run ("timer", and "perf" when
# perf_event_open is allowed: root or perf_event_paranoid <= 2).
engines_here() {
  local paranoid
  paranoid=$(cat /proc/sys/kernel/perf_event_paranoid 2>/dev/null || echo 3)
  if [ "$(id -u)" -eq 0 ] || [ "$paranoid" -le 2 ]; then echo timer perf; else echo timer; fi
}

# guest_run NAME DIR [ENV=VALUE...] -- CMD ARGS...: runs CMD in DIR (made
# empty first, holding only what $GUEST_SEED lists: files copied in), with
# stdout, stderr and the exit code saved in $WORK (NAME.out, NAME.err,
# NAME.rc); ENV assignments apply to CMD only (not to `timeout`, which
# would otherwise be profiled too). $GUEST_NOFILE, when set, is CMD's
# `ulimit -n`. `timeout 60` guards against a hang (a hang then shows as
# exit code 124; no assertion relies on it).
guest_run() {
  local name=$1 dir=$2; shift 2
  local envs=()
  while [ $# -gt 0 ] && [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  rm -rf "$dir"
  mkdir -p "$dir"
  local f
  for f in ${GUEST_SEED:-}; do cp "$f" "$dir/"; done
  local rc=0
  (
    if [ -n "${GUEST_NOFILE:-}" ]; then ulimit -n "$GUEST_NOFILE" || exit 125; fi
    cd "$dir" && exec timeout 60 env "${envs[@]}" "$@" >"$WORK/$name.out" 2>"$WORK/$name.err"
  ) || rc=$?
  echo "$rc" >"$WORK/$name.rc"
}

# guest_same NAME_U NAME_P DIR_U DIR_P: fails unless the two runs printed
# the same (stdout and stderr), exited with the same code and left the same
# files (names and bytes).
guest_same() {
  local u=$1 p=$2 du=$3 dp=$4 what
  for what in out err rc; do
    if ! cmp -s "$WORK/$u.$what" "$WORK/$p.$what"; then
      echo "--- unprofiled $what:" >&2; head -c 2000 "$WORK/$u.$what" >&2
      echo "--- preloaded $what:" >&2; head -c 2000 "$WORK/$p.$what" >&2
      fail "$p: its $what differs from the unprofiled run's"
    fi
  done
  if ! diff -r "$du" "$dp" >"$WORK/$p.diff" 2>&1; then
    head -20 "$WORK/$p.diff" >&2
    fail "$p: the files it left differ from the unprofiled run's"
  fi
}

# guest_profile DIR: the snapshot written in DIR (fails when there is none).
guest_profile() {
  local f
  f=$(find "$1" -maxdepth 1 -name '*.pb.gz' 2>/dev/null | sort | tail -1)
  [ -n "$f" ] || fail "no snapshot in $1"
  echo "$f"
}

# guest_ms PROFILE FRAME: milliseconds of CPU whose stack holds FRAME
# (cumulative; 0 when absent), per go tool pprof.
guest_ms() {
  go tool pprof -symbolize=none -top -cum -nodecount=1000 -unit=ms "$1" 2>/dev/null |
    awk -v f="$2" 'substr($0, length($0) - length(f)) == " " f && $4 ~ /ms$|^0$/ {
                     v = $4; sub(/ms$/, "", v); print v; found = 1; exit }
                   END { if (!found) print 0 }'
}

# guest_total_ms PROFILE: all sampled CPU in ms.
guest_total_ms() {
  go tool pprof -symbolize=none -top -nodecount=1 -unit=ms "$1" 2>/dev/null |
    sed -n 's/.*Total samples = \([0-9.]*\)ms.*/\1/p' | head -1
}
