#!/usr/bin/env bash
# libFuzzer over the GNU build-id note reader (src/prof/symbols/ptp_elfnote.c, the
# one the symbolizer and the unwind tables share), for PT_FUZZ_SECONDS (15)
# from the seeds in tests/prof/fuzz_seeds/elfnote. Any crash, out-of-bounds
# read or a found id that is not where a build-id note puts it fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_elfnote "$PT_SRC/tests/prof/symbols/fuzz_elfnote.c" "$PT_SRC/src/prof/symbols/ptp_elfnote.c"
fuzz_run fuzz_elfnote "$PT_SRC/tests/prof/fuzz_seeds/elfnote" -max_len=4096
