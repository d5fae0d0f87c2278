#!/usr/bin/env bash
# libFuzzer over the perf map reader's core (src/prof/symbols/ptp_perfmap.c:
# bytes of /tmp/perf-PID.map in, named ranges out), for PT_FUZZ_SECONDS (15)
# from the seeds in tests/prof/fuzz_seeds/perfmap. The harness feeds the map
# in chunks as the file reader does and checks the ranges (sorted, disjoint,
# names valid UTF-8), that chunked and whole feeds agree, and a model (each
# line parsed alone, the last entry covering an address names it). Any
# crash, sanitizer report or mismatch fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_perfmap "$PT_SRC/tests/prof/symbols/fuzz_perfmap.c" \
  "$PT_SRC/src/prof/symbols/ptp_perfmap.c" "$PT_SRC/src/prof/ptp_alloc.c"
fuzz_run fuzz_perfmap "$PT_SRC/tests/prof/fuzz_seeds/perfmap" -max_len=12288
