#!/usr/bin/env bash
# The whole test suite: what `just test` and `.ci/run` run.
#  1. installs what is missing (scripts/setup.sh)
#  2. builds dev, release and profile with -Werror, and an ASan+UBSan
#     profiling variant
#  3. runs the unit-test binary of dev, profile and asan
#  4. runs every integration test tests/*/*_test.sh (one at a time)
# and ends with the line "N passed, N failed, N skipped".
# PT_TEST_FILTER=substr limits integration tests to matching paths;
# PT_SKIP_ASAN=1 skips the sanitizer variant (for quick local runs).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PT_SRC=$ROOT PT_BUILD_DEV=$ROOT/build/dev PT_BUILD_PROF=$ROOT/build/profile \
       PT_BUILD_RELEASE=$ROOT/build/release PT_BUILD_ASAN=$ROOT/build/asan
passed=0 failed=0 skipped=0
failures=()

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

variants=(dev release profile)
[ "${PT_SKIP_ASAN:-0}" = 1 ] || variants+=(asan)
for v in "${variants[@]}"; do
  if PT_WERROR=1 bash scripts/build.sh "$v"; then
    echo "ok - build $v"; passed=$((passed + 1))
  else
    echo "not ok - build $v"; failed=$((failed + 1)); failures+=("build $v")
  fi
done
# Keep `just run-cli` pointing at the profiling build after a test run.
[ -x build/profile/polytoken ] && echo profile > build/.last-variant

add_counts() { # parses "N passed, N failed, N skipped" from a runner's output
  local line
  line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$1" | tail -n 1)
  if [ -z "$line" ]; then
    failed=$((failed + 1)); failures+=("$2 (no summary line)"); return
  fi
  local p f s
  p=$(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')
  f=$(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')
  s=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
  passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
  [ "$f" = 0 ] || failures+=("$2: $(grep -E '^not ok' "$1" | sed 's/^not ok - //' | tr '\n' ';')")
}

for v in dev profile asan; do
  bin=build/$v/tests/unit-tests
  [ -x "$bin" ] || continue
  echo "== unit tests ($v)"
  log=$(mktemp)
  env ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allow_user_segv_handler=1 \
      UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      PT_VARIANT=$v "$bin" 2>&1 | sed "s/^/[$v] /" | tee "$log" | grep -vE '^\[[a-z]+\] ok - '
  sed -i -E 's/^\[[a-z]+\] //' "$log"
  add_counts "$log" "unit tests ($v)"
  rm -f "$log"
done

echo "== integration tests"
shopt -s nullglob
for t in tests/*/*_test.sh; do
  [ -n "${PT_TEST_FILTER:-}" ] && [[ "$t" != *"$PT_TEST_FILTER"* ]] && continue
  tmp=$(mktemp -d /tmp/pt-it.XXXXXX)
  log=$tmp/log
  start=$(date +%s)
  TMPDIR=$tmp timeout -k 10 "${PT_TEST_TIMEOUT:-300}" bash "$t" >"$log" 2>&1
  rc=$?
  secs=$(( $(date +%s) - start ))
  case $rc in
    0) echo "ok - $t (${secs}s)"; passed=$((passed + 1)) ;;
    77) echo "skip - $t: $(tail -n 1 "$log")"; skipped=$((skipped + 1)) ;;
    *) echo "not ok - $t (exit $rc, ${secs}s)"; failed=$((failed + 1)); failures+=("$t")
       tail -n 40 "$log" | sed 's/^/    | /' ;;
  esac
  rm -rf "$tmp"
done

if [ "${#failures[@]}" -gt 0 ]; then
  echo "== failures"
  printf '  %s\n' "${failures[@]}"
fi
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
