#!/usr/bin/env bash
# libFuzzer over the console's sans-I/O gRPC layer (HTTP/2 via nghttp2, gRPC
# framing, the Instrument service, queues, budget, time-outs) with ASan and
# UBSan, for PT_FUZZ_SECONDS (tests/fuzz_lib.sh) from the committed seeds (tests/console/
# fuzz_grpc_seeds/, made with python3-h2 by fuzz_grpc_seeds.py), with
# bounded memory. Any crash, leak or memory limit fails. Skips (77) when
# clang's libFuzzer is missing.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../fuzz_lib.sh"
fuzz_require
# The protobuf writer the encoder uses lives in src/prof (found by what it
# defines, not by its file name); so do the sample labels the poll seam
# sets (ptp_labels.c, which reads ptp_producer.c's ptp_g_shared; the label
# block itself is signal/ptp_label_set.c's).
pbsrc=$(grep -l '^void ptp_pb_buf_init' "$PT_SRC"/src/prof/*/*.c | head -n 1)
[ -n "$pbsrc" ] || fail "cannot find the ptp_pb_buf writer in src/prof"
C="$PT_SRC/src/console"
fuzz_build fuzz_grpc \
  "$PT_SRC/tests/console/fuzz_grpc.c" "$C/ptcon_grpc.c" "$C/ptcon_agg.c" "$C/ptcon_encode.c" \
  "$C/ptcon_hdrhist.c" "$C/ptcon_instrument.c" "$C/ptcon_request.c" "$C/ptcon_bucket.c" \
  "$C/ptcon_initstate.c" "$pbsrc" \
  "$PT_SRC/src/prof/runtime/ptp_labels.c" "$PT_SRC/src/prof/signal/ptp_producer.c" \
  "$PT_SRC/src/prof/signal/ptp_label_set.c" "$PT_SRC/src/prof/ptp_alloc.c" \
  -lnghttp2 -lpthread
# bounded memory: libFuzzer takes the last value of a flag
fuzz_run fuzz_grpc "$PT_SRC/tests/console/fuzz_grpc_seeds" -max_len=4096 -rss_limit_mb=1024 \
  -malloc_limit_mb=256
