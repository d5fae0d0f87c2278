#!/usr/bin/env bash
# libFuzzer over the console's sans-I/O gRPC layer (HTTP/2 via nghttp2, gRPC
# framing, the Instrument service, queues, budget, time-outs) with ASan and
# UBSan, for PT_FUZZ_SECONDS (default 15) from the committed seeds (tests/console/
# fuzz_grpc_seeds/, made with python3-h2 by fuzz_grpc_seeds.py), with
# bounded memory. Any crash, leak or memory limit fails. Skips (77) when
# clang's libFuzzer is missing.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
command -v clang >/dev/null || skip "clang is not installed"
dir=$(mktemp -d "$TMPDIR/fuzz.XXXXXX")
echo 'int LLVMFuzzerTestOneInput(const unsigned char *d, unsigned long n) { (void)d; (void)n; return 0; }' >"$dir/probe.c"
clang -fsanitize=fuzzer "$dir/probe.c" -o "$dir/probe" >/dev/null 2>&1 ||
  skip "clang's libFuzzer (-fsanitize=fuzzer) is not available"
# The protobuf writer the encoder uses lives in src/prof (found by what it
# defines, not by its file name); so do the sample labels the poll seam
# sets (ptp_labels.c, which reads ptp_producer.c's ptp_g_shared; the label
# block itself is signal/ptp_label_set.c's).
pbsrc=$(grep -l '^void ptp_pb_buf_init' "$PT_SRC"/src/prof/*/*.c | head -n 1)
[ -n "$pbsrc" ] || fail "cannot find the ptp_pb_buf writer in src/prof"
C="$PT_SRC/src/console"
clang -g -O1 -std=c11 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -D_GNU_SOURCE -I"$PT_SRC/src" -I"$PT_SRC/include" \
  "$PT_SRC/tests/console/fuzz_grpc.c" "$C/ptcon_grpc.c" "$C/ptcon_agg.c" "$C/ptcon_encode.c" \
  "$C/ptcon_hdrhist.c" "$C/ptcon_instrument.c" "$C/ptcon_request.c" "$C/ptcon_bucket.c" \
  "$C/ptcon_initstate.c" "$pbsrc" \
  "$PT_SRC/src/prof/runtime/ptp_labels.c" "$PT_SRC/src/prof/signal/ptp_producer.c" \
  "$PT_SRC/src/prof/signal/ptp_label_set.c" \
  -lnghttp2 -lpthread -o "$dir/fuzz_grpc"
mkdir -p "$dir/corpus"
cp "$PT_SRC"/tests/console/fuzz_grpc_seeds/* "$dir/corpus/"
"$dir/fuzz_grpc" -max_total_time=30 -max_len=4096 -seed=1 -rss_limit_mb=1024 -malloc_limit_mb=256 \
  -timeout=10 "$dir/corpus" >"$dir/log" 2>&1 ||
  { tail -40 "$dir/log" >&2; fail "fuzzer found a crash (or a memory/time limit)"; }
grep -q "^Done [0-9]* runs" "$dir/log" || { tail -20 "$dir/log" >&2; fail "fuzzer did not finish"; }
note "$(grep '^Done' "$dir/log")"
