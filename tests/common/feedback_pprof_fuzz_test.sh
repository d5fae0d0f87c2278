#!/usr/bin/env bash
# libFuzzer over the feedback review screen's profile reader
# (src/common/pt_feedback_pprof.c: gzip/DEFLATE + pprof summary), checked
# against zlib, for PT_FUZZ_SECONDS (30) from the seeds in
# tests/common/fuzz_seeds/feedback_pprof. Any crash or disagreement fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_feedback_pprof "$PT_SRC/tests/common/fuzz_feedback_pprof.c" \
  "$PT_SRC/src/common/pt_feedback_pprof.c" -lz
fuzz_run fuzz_feedback_pprof "$PT_SRC/tests/common/fuzz_seeds/feedback_pprof" -max_len=65536
