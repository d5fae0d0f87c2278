# tests/prof/prof_lib.sh - shared prologue of the preload-based profiler
# tests (source it; not a test itself). After `prof_require PROGRAM`:
# LIB (libptprof.so), PROG (tests/prof/PROGRAM), VALIDATE (ptprof-validate)
# exist, and `go` is installed (else the test skips).
set -euo pipefail
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${PT_BUILD_PROF:=$PT_SRC/build/profile}"
export PT_BUILD_PROF
# shellcheck source=../lib.sh
source "$PT_SRC/tests/lib.sh"

prof_require() {
  LIB="$PT_BUILD_PROF/libptprof.so"
  PROG="$PT_BUILD_PROF/tests/prof/$1"
  VALIDATE="$PT_BUILD_PROF/tools/ptprof-validate"
  [ -f "$LIB" ] || fail "no $LIB (build with -Dprofiling=true)"
  [ -x "$PROG" ] || fail "no $PROG"
  [ -x "$VALIDATE" ] || fail "no $VALIDATE"
  nm -D --defined-only "$LIB" | grep -cw ptprof_new >/dev/null || fail "libptprof.so does not export ptprof_new"
  command -v go >/dev/null || skip "go (golang-go) not installed"
}

# prof_workdir TAG: a private WORK directory, and an EXIT trap that kills
# every pid in PIDS (as a process group first, for runs started with setsid,
# so their forked children go too), removes WORK and runs lib.sh's cleanup.
prof_workdir() {
  WORK=$(mktemp -d "$TMPDIR/$1.XXXXXX")
  PIDS=()
  trap prof_cleanup EXIT
}
prof_cleanup() {
  local p
  for p in "${PIDS[@]}"; do kill -KILL -- -"$p" 2>/dev/null || kill -KILL "$p" 2>/dev/null || true; done
  rm -rf "$WORK"
  pt_cleanup
}
