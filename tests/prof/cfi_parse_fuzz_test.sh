#!/usr/bin/env bash
# libFuzzer over the CFI parser's .debug_frame reader and the compact table
# it makes (src/prof/unwind/ptp_cfi_parse.c; the table the signal handler
# walks with, src/prof/signal/ptp_unwind.h), for PT_FUZZ_SECONDS from the
# seeds in tests/prof/fuzz_seeds/cfi_parse (a compiler's .debug_frame, long
# ranges, many rules, addresses past 4 GiB). The harness checks every table
# as the walker relies on it (sorted, disjoint rows naming rules of the
# table, kinds known, within the limit), the walker's lookup at each row's
# ends, and that a second parse gives the same bytes. Any crash, sanitizer
# report or mismatch fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_cfi_parse "$PT_SRC/tests/prof/unwind/fuzz_cfi_parse.c" \
  "$PT_SRC/src/prof/unwind/ptp_cfi_parse.c" "$PT_SRC/src/prof/signal/ptp_unwind.c" \
  "$PT_SRC/src/prof/signal/ptp_xrange.c" \
  "$PT_SRC/src/prof/ptp_alloc.c"
fuzz_run fuzz_cfi_parse "$PT_SRC/tests/prof/fuzz_seeds/cfi_parse" -max_len=65536
