#!/usr/bin/env bash
# libFuzzer over the reading of snapshots' threads' CPU comments by
# `polytoken profile merge` (src/common/pt_threadcpu_line.c): no crash, a
# refused line leaves the sum as it was, quoted names read back, for
# PT_FUZZ_SECONDS (12) from the seeds in tests/common/fuzz_seeds/threadcpu_line.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_threadcpu_line "$PT_SRC/tests/common/fuzz_threadcpu_line.c" \
  "$PT_SRC/src/common/pt_threadcpu_line.c" "$PT_SRC/src/common/pt_alloc.c"
fuzz_run fuzz_threadcpu_line "$PT_SRC/tests/common/fuzz_seeds/threadcpu_line" -max_len=4096
