#!/usr/bin/env bash
# A short, bounded libFuzzer run (20000 inputs) over the console's request
# decoding, with ASan and UBSan. Skips (77) when clang's libFuzzer is missing.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
command -v clang >/dev/null || skip "clang is not installed"
dir=$(mktemp -d "$TMPDIR/fuzz.XXXXXX")
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$dir/probe.c"
clang -fsanitize=fuzzer "$dir/probe.c" -o "$dir/probe" >/dev/null 2>&1 ||
  skip "clang's libFuzzer (-fsanitize=fuzzer) is not available"
clang -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -D_GNU_SOURCE -I"$PT_SRC/src" -I"$PT_SRC/include" \
  "$PT_SRC/tests/console/fuzz_request.c" "$PT_SRC/src/console/ptcon_request.c" -o "$dir/fuzz_request"
# Seeds: the known-good requests of console-protocol.md, one per method.
mkdir -p "$dir/corpus"
printf '\x01\x00\x00\x00\x00\x00' >"$dir/corpus/updates"
printf '\x02\x00\x00\x00\x00\x04\x0a\x02\x08\x01' >"$dir/corpus/details"
printf '\x03\x00\x00\x00\x00\x00' >"$dir/corpus/state"
printf '\x04\x00\x00\x00\x00\x02\x08\x01' >"$dir/corpus/pause"
"$dir/fuzz_request" -runs=20000 -max_len=8192 -seed=1 "$dir/corpus" >"$dir/log" 2>&1 ||
  { tail -40 "$dir/log" >&2; fail "fuzzer found a crash"; }
grep -q "Done 20000 runs" "$dir/log" || { tail -20 "$dir/log" >&2; fail "fuzzer did not complete its runs"; }
note "$(grep 'Done' "$dir/log")"
