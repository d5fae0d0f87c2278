#!/usr/bin/env bash
# libFuzzer over the symbolizer's .debug_aranges reader
# (src/prof/symbols/ptp_aranges.c), for PT_FUZZ_SECONDS (15) from the seeds in
# tests/prof/fuzz_seeds/aranges. Any crash, out-of-bounds read, or an
# accepted entry that breaks the reader's stated bounds fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_aranges "$PT_SRC/tests/prof/symbols/fuzz_aranges.c" "$PT_SRC/src/prof/symbols/ptp_aranges.c" \
  "$PT_SRC/src/prof/ptp_alloc.c"
fuzz_run fuzz_aranges "$PT_SRC/tests/prof/fuzz_seeds/aranges" -max_len=4096
