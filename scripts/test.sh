#!/usr/bin/env bash
# The whole test suite: what `just test` and `.ci/run` run.
#  1. installs what is missing (scripts/setup.sh)
#  2. builds dev, release and profile with -Werror, an ASan+UBSan
#     profiling variant and a ThreadSanitizer profiling variant (tsan)
#  3. runs the unit-test binary of dev, profile and asan, and the unit tests
#     of the lock-free code in tsan (TSAN_UNIT below)
#  4. runs every integration test tests/*/*_test.sh, one at a time, but
#     the *fuzz*_test.sh among them, which run libFuzzer (most for
#     PT_FUZZ_SECONDS each): those come last, one per CPU at a time
#  5. runs the integration tests that drive the lock-free code again against
#     the tsan build (TSAN_IT below), and the daemon, TUI and CLI tests that
#     feed hostile or damaged input again against the asan build (ASAN_IT
#     below; any sanitizer report of any process fails the test)
# and ends with the line "N passed, N failed, N skipped".
# PT_TEST_FILTER=substr limits integration tests to matching paths;
# PT_SKIP_ASAN=1 / PT_SKIP_TSAN=1 skip a sanitizer variant (quick local runs).
set -uo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
export PT_SRC=$ROOT PT_BUILD_DEV=$ROOT/build/dev PT_BUILD_PROF=$ROOT/build/profile \
       PT_BUILD_RELEASE=$ROOT/build/release PT_BUILD_ASAN=$ROOT/build/asan \
       PT_BUILD_TSAN=$ROOT/build/tsan
passed=0 failed=0 skipped=0
suite_start=$(date +%s)
failures=()

bash scripts/setup.sh || { echo "setup failed"; echo "0 passed, 1 failed"; exit 1; }

variants=(dev release profile)
[ "${PT_SKIP_ASAN:-0}" = 1 ] || variants+=(asan)
[ "${PT_SKIP_TSAN:-0}" = 1 ] || variants+=(tsan)
for v in "${variants[@]}"; do
  start=$(date +%s)
  if PT_WERROR=1 bash scripts/build.sh "$v"; then
    echo "# build $v: $(( $(date +%s) - start ))s"
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

# ---- ThreadSanitizer stage -------------------------------------------------
# TSan checks the lock-free code: the sampler's per-thread sample rings,
# thread-record Treiber stack, tid map and handler grace counters (prof_),
# the console's event rings, task-slot Treiber stack and aggregator
# (console_). What it can and cannot see of the SIGPROF handler is written
# in docs/architecture.md ("Checked by tools"). A report fails the run
# (halt_on_error=1); the only suppressions are in tests/tsan.supp, each with
# its reason.
TSAN_ENV=("TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1:history_size=4:suppressions=$ROOT/tests/tsan.supp"
          PT_SANITIZER=thread)
TSAN_UNIT='^(prof_sampler_|prof_snapstore_|console_agg_|console_server_)'
# Unit tests left out under TSan, each for a written reason:
#  - TSan delivers an asynchronous signal only at the thread's next
#    intercepted call or blocking syscall, with the ucontext of the moment it
#    arrived: by then the stack has moved on, so tests that check the frames
#    of each sample cannot hold (prof_sampler_unwind_fp_chain,
#    prof_sampler_nofp_cap).
#  - TSan replaces malloc/free with its own, so no sample has a libc malloc
#    leaf (prof_sampler_malloc_caller).
TSAN_UNIT_SKIP='^(prof_sampler_unwind_fp_chain|prof_sampler_nofp_cap|prof_sampler_malloc_caller)$'
# Integration tests that drive the same code in whole programs (sampler
# preloaded into a churning workload, the console over gRPC).
TSAN_IT=(tests/prof/sampler_stress_test.sh tests/prof/sampler_preload_test.sh
         tests/console/console_grpc_test.sh tests/console/console_split_test.sh)
tsan_bin=build/tsan/tests/unit-tests
if [ "${PT_SKIP_TSAN:-0}" != 1 ] && [ -x "$tsan_bin" ]; then
  echo "== unit tests (tsan)"
  start=$(date +%s)
  log=$(mktemp)
  mapfile -t names < <("$tsan_bin" --list | grep -E "$TSAN_UNIT" | grep -vE "$TSAN_UNIT_SKIP")
  env "${TSAN_ENV[@]}" PT_VARIANT=tsan "$tsan_bin" "${names[@]}" 2>&1 | sed "s/^/[tsan] /" |
    tee "$log" | grep -vE '^\[[a-z]+\] ok - '
  sed -i -E 's/^\[[a-z]+\] //' "$log"
  add_counts "$log" "unit tests (tsan)"
  rm -f "$log"
  echo "# unit tests (tsan): ${#names[@]} tests, $(( $(date +%s) - start ))s"
fi

SAN_LOGS=0   # 1: it_exec sends every process's ASan/UBSan report to a file and fails on one

# it_exec DIR TEST [env...]: runs one integration test with DIR (fresh) as
# its TMPDIR; leaves its output in DIR/log and "rc secs" in DIR/result.
# Prints nothing and counts nothing, so several may run at once.
it_exec() {
  local dir=$1 t=$2; shift 2
  local start rc san=()
  if [ "$SAN_LOGS" = 1 ]; then
    # log_path: a report of a daemon whose stderr the test never reads
    # (daemon.out) still fails the test; abort_on_error makes the process
    # die visibly as well
    mkdir "$dir/san"
    san=("ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:allow_user_segv_handler=1:log_path=$dir/san/asan"
         "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1:log_path=$dir/san/ubsan")
  fi
  start=$(date +%s)
  env TMPDIR="$dir" "${san[@]}" "$@" timeout -k 10 "${PT_TEST_TIMEOUT:-300}" bash "$t" >"$dir/log" 2>&1
  rc=$?
  if [ "$SAN_LOGS" = 1 ] && [ -n "$(ls -A "$dir/san")" ]; then
    { echo "sanitizer reports:"; head -n 30 "$dir"/san/*; } >>"$dir/log"
    rc=1
  fi
  echo "$rc $(( $(date +%s) - start ))" >"$dir/result"
}

# it_report DIR LABEL: prints and counts the result it_exec left in DIR,
# then removes DIR.
it_report() {
  local dir=$1 label=$2 rc secs
  read -r rc secs <"$dir/result" 2>/dev/null || { rc=1; secs=0; echo "no result" >>"$dir/log"; }
  case $rc in
    0) echo "ok - $label (${secs}s)"; passed=$((passed + 1)) ;;
    77) echo "skip - $label: $(tail -n 1 "$dir/log")"; skipped=$((skipped + 1)) ;;
    *) echo "not ok - $label (exit $rc, ${secs}s)"; failed=$((failed + 1)); failures+=("$label")
       tail -n 40 "$dir/log" | sed 's/^/    | /' ;;
  esac
  rm -rf "$dir"
}

run_it() { # run_it LABEL TEST [env...]: one integration test, counted
  local label=$1 t=$2 dir; shift 2
  dir=$(mktemp -d /tmp/pt-it.XXXXXX)
  it_exec "$dir" "$t" "$@"
  it_report "$dir" "$label"
}

echo "== integration tests"
shopt -s nullglob
fuzz_tests=()
for t in tests/*/*_test.sh; do
  [ -n "${PT_TEST_FILTER:-}" ] && [[ "$t" != *"$PT_TEST_FILTER"* ]] && continue
  case $t in *fuzz*_test.sh) fuzz_tests+=("$t"); continue ;; esac
  run_it "$t" "$t"
done
# The libFuzzer tests last, one per CPU at a time (at most 4): each runs a
# fixed time or number of inputs on one CPU and asserts nothing about time,
# so running them side by side changes no result and halves their share of
# the suite on the 2-CPU CI machine. Every other test runs alone: several
# measure CPU or wall time.
fuzz_jobs=$(nproc 2>/dev/null || echo 1)
[ "$fuzz_jobs" -gt 4 ] && fuzz_jobs=4
if [ "${#fuzz_tests[@]}" -gt 0 ]; then
  start_all=$(date +%s)
  for ((i = 0; i < ${#fuzz_tests[@]}; i += fuzz_jobs)); do
    batch=("${fuzz_tests[@]:i:fuzz_jobs}") dirs=()
    for t in "${batch[@]}"; do
      d=$(mktemp -d /tmp/pt-it.XXXXXX)
      dirs+=("$d")
      it_exec "$d" "$t" &
    done
    wait
    for k in "${!batch[@]}"; do it_report "${dirs[$k]}" "${batch[$k]}"; done
  done
  echo "# fuzz tests: ${#fuzz_tests[@]}, $fuzz_jobs at a time, $(( $(date +%s) - start_all ))s"
fi


if [ "${PT_SKIP_TSAN:-0}" != 1 ] && [ -x "$tsan_bin" ]; then
  echo "== integration tests under ThreadSanitizer (build/tsan)"
  start_all=$(date +%s)
  for t in "${TSAN_IT[@]}"; do
    [ -n "${PT_TEST_FILTER:-}" ] && [[ "$t" != *"$PT_TEST_FILTER"* ]] && continue
    run_it "tsan: $t" "$t" "${TSAN_ENV[@]}" PT_BUILD_PROF="$PT_BUILD_TSAN"
  done
  echo "# integration tests (tsan): $(( $(date +%s) - start_all ))s"
fi

# ---- AddressSanitizer stage (integration) ----------------------------------
# The unit tests run under ASan+UBSan above; these whole-program tests run
# the daemon, the TUI and the CLI built with them (build/asan: profiling
# on, so sampler, console and snapshot writer run too) on the paths that
# parse what others wrote: hostile IPC input, damaged and half-written
# session files, a full disk, the artifact catalog, profile list/merge/view.
# Each passes with both builds pointing at build/asan (the tests that check
# a build without profiling, e.g. tests/tui/cli_test.sh, are not here).
ASAN_IT=(tests/daemon/bad_input_test.sh tests/daemon/crash_repair_test.sh
         tests/daemon/damaged_session_test.sh tests/daemon/full_disk_test.sh
         tests/daemon/catalog_ipc_test.sh tests/daemon/catalog_escape_test.sh
         tests/daemon/exec_responder_test.sh tests/daemon/lifecycle_test.sh
         tests/profiling/daemon_profiling_test.sh tests/profiling/tui_profiling_test.sh
         tests/tui/profile_cli_test.sh tests/tui/tui_input_test.sh)
if [ "${PT_SKIP_ASAN:-0}" != 1 ] && [ -x build/asan/polytokend ]; then
  echo "== integration tests under AddressSanitizer (build/asan)"
  start_all=$(date +%s)
  SAN_LOGS=1
  for t in "${ASAN_IT[@]}"; do
    [ -n "${PT_TEST_FILTER:-}" ] && [[ "$t" != *"$PT_TEST_FILTER"* ]] && continue
    run_it "asan: $t" "$t" PT_BUILD_DEV="$PT_BUILD_ASAN" PT_BUILD_PROF="$PT_BUILD_ASAN" PT_SANITIZER=address
  done
  SAN_LOGS=0
  echo "# integration tests (asan): $(( $(date +%s) - start_all ))s"
fi

if [ "${#failures[@]}" -gt 0 ]; then
  echo "== failures"
  printf '  %s\n' "${failures[@]}"
fi
echo "# suite: $(( $(date +%s) - suite_start ))s"
echo "$passed passed, $failed failed, $skipped skipped"
[ "$failed" = 0 ]
