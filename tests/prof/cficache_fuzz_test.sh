#!/usr/bin/env bash
# libFuzzer over the unwind-table cache's file checks (ptp_cficache_parse,
# the I/O-free core of ptp_cficache_load in src/prof/unwind/ptp_cficache.c):
# a cache file is anything a process of the user left on disk, and the
# table it yields is walked by the signal handler. Runs for PT_FUZZ_SECONDS
# from the seeds in tests/prof/fuzz_seeds/cficache: tables given as rules
# and rows, whose file image the harness makes (so every mutation meets a
# right header and checksum and reaches the row checks), and such images
# as raw bytes (made by ptp_cficache_image from the same tables). The
# harness checks every accepted table as the walker relies on it (sorted,
# disjoint, non-empty rows inside the object's range, naming rules of the
# table, kinds known, within the limit), the walker's lookup at each row's
# ends, and that the table written again reads back the same
# (tests/prof/unwind/fuzz_cficache.c). Any crash, sanitizer report or
# mismatch fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
S="$PT_SRC/src/prof"
fuzz_build fuzz_cficache "$PT_SRC/tests/prof/unwind/fuzz_cficache.c" \
  "$S/unwind/ptp_cficache.c" "$S/signal/ptp_unwind.c" "$S/signal/ptp_xrange.c" \
  "$S/cache/ptp_cachefile.c" "$S/cache/ptp_crc.c" "$S/symbols/ptp_symcache.c" \
  "$S/symbols/ptp_strarena.c" "$S/symbols/ptp_elfnote.c" "$S/output/ptp_snapstore.c" \
  "$S/ptp_alloc.c" -lz
fuzz_run fuzz_cficache "$PT_SRC/tests/prof/fuzz_seeds/cficache" -max_len=65536
