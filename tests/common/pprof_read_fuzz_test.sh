#!/usr/bin/env bash
# libFuzzer over the pprof reader (src/common/pt_pprof_read.c) and the
# summary on it (pt_pprof_summary.c), the writer and the merge on what it
# reads (pt_pprof_write.c, pt_pprof_merge.c), for PT_FUZZ_SECONDS (15) from real
# snapshots of this project (tests/common/fuzz_seeds/pprof_read). Any crash,
# sanitizer report, leak or broken invariant fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_pprof_read "$PT_SRC/tests/common/fuzz_pprof_read.c" \
  "$PT_SRC/src/common/pt_pprof_read.c" "$PT_SRC/src/common/pt_pprof_summary.c" \
  "$PT_SRC/src/common/pt_gunzip.c" "$PT_SRC/src/common/pt_alloc.c" \
  "$PT_SRC/src/common/pt_pprof_write.c" "$PT_SRC/src/common/pt_pprof_merge.c" "$PT_SRC/src/common/pt_threadcpu_line.c" "$PT_SRC/src/common/pt_fmt.c" \
  -I"$PT_SRC/tests/common" -lz
fuzz_run fuzz_pprof_read "$PT_SRC/tests/common/fuzz_seeds/pprof_read" -max_len=65536
