# tests/fuzz_lib.sh - shared steps of the libFuzzer tests (*_fuzz_test.sh):
# builds one harness with clang -fsanitize=fuzzer,address,undefined against
# the real sources, runs it for a fixed time (PT_FUZZ_SECONDS, default 12:
# fifteen targets in the suite, a smoke run from the seeds; set it higher,
# e.g. 600, for a real search on demand, with PT_FUZZ_SEED=0 for a random
# libFuzzer seed instead of the fixed 1) from the committed seeds, and fails on any crash, leak, sanitizer report
# or timeout, printing the reproducer. Source it after tests/lib.sh.
# Not a test itself (no _test.sh suffix).

PT_FUZZ_SECONDS="${PT_FUZZ_SECONDS:-12}"
PT_FUZZ_SEED="${PT_FUZZ_SEED:-1}"

# fuzz_require: skips (77) when clang or its libFuzzer runtime is missing.
fuzz_require() {
  command -v clang >/dev/null || skip "clang is not installed"
  FUZZ_DIR=$(mktemp -d "$TMPDIR/fuzz.XXXXXX")
  echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' \
    >"$FUZZ_DIR/probe.c"
  clang -fsanitize=fuzzer "$FUZZ_DIR/probe.c" -o "$FUZZ_DIR/probe" >/dev/null 2>&1 ||
    skip "clang's libFuzzer (-fsanitize=fuzzer) is not available"
}

# fuzz_build OUT SOURCES... [-- EXTRA CLANG ARGS]: compiles the harness and
# the code under test with the fuzzer and both sanitizers. The generated
# pt_config.h comes from the dev build (PT_PROFILING=0, fault injection on).
fuzz_build() {
  local out=$1; shift
  [ -f "$PT_BUILD_DEV/pt_config.h" ] || fail "no $PT_BUILD_DEV/pt_config.h: build dev first"
  clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
    -D_GNU_SOURCE -std=gnu11 -I"$PT_BUILD_DEV" -I"$PT_SRC" -I"$PT_SRC/src" -I"$PT_SRC/include" \
    "$@" -o "$FUZZ_DIR/$out" || fail "could not build the $out harness"
}

# fuzz_run BIN SEEDS_DIR [LIBFUZZER ARGS...]: runs BIN for PT_FUZZ_SECONDS
# from a scratch copy of the seeds (the committed seeds are never written).
fuzz_run() {
  local bin=$1 seeds=$2; shift 2
  local corpus="$FUZZ_DIR/corpus-$bin" log="$FUZZ_DIR/log-$bin"
  mkdir -p "$corpus" "$FUZZ_DIR/crash"
  cp "$seeds"/* "$corpus"/
  if ! "$FUZZ_DIR/$bin" -max_total_time="$PT_FUZZ_SECONDS" -timeout=10 -rss_limit_mb=2048 \
       -seed="$PT_FUZZ_SEED" -print_final_stats=1 -artifact_prefix="$FUZZ_DIR/crash/" "$@" "$corpus" \
       >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    for a in "$FUZZ_DIR"/crash/*; do
      [ -f "$a" ] || continue
      echo "reproducer $(basename "$a") (base64):" >&2
      head -c 4096 "$a" | base64 >&2
    done
    fail "$bin: the fuzzer found a crash"
  fi
  grep -q '^Done [0-9]* runs' "$log" || { tail -n 20 "$log" >&2; fail "$bin: the fuzzer did not finish"; }
  note "$bin: $(grep '^Done' "$log"), $(grep -c . <(ls "$corpus")) corpus inputs"
}
