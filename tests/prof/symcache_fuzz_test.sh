#!/usr/bin/env bash
# libFuzzer over the symbol cache's file reader (src/prof/symbols/
# ptp_symcache.c, format 5: headers and indexes read at open, blocks read
# and checked as lookups need them), for PT_FUZZ_SECONDS (15) from the
# seeds in tests/prof/fuzz_seeds/symcache (real files the profiler wrote,
# one of two segments, behind a control byte). The harness can recompute
# the checksums of a mutated file so that mutations reach the checks behind
# them, reads each input lazily and whole, and checks that the two agree
# wherever the whole check passes, then appends and reads back
# (tests/prof/symbols/fuzz_symcache.c). Any crash, sanitizer report or
# mismatch fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
S="$PT_SRC/src/prof"
fuzz_build fuzz_symcache "$PT_SRC/tests/prof/symbols/fuzz_symcache.c" \
  "$S/symbols/ptp_symcache.c" "$S/symbols/ptp_strarena.c" "$S/cache/ptp_cachefile.c" \
  "$S/cache/ptp_crc.c" "$S/output/ptp_snapstore.c" "$S/ptp_alloc.c" -lz
fuzz_run fuzz_symcache "$PT_SRC/tests/prof/fuzz_seeds/symcache" -max_len=131072
