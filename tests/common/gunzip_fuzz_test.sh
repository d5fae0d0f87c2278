#!/usr/bin/env bash
# libFuzzer over the reading of untrusted profile files
# (src/common/pt_gunzip.c with zlib and its output cap, and the summary of
# src/common/pt_pprof_summary.c over pt_pprof_read.c), pt_gunzip checked
# against a one-shot zlib inflate, for PT_FUZZ_SECONDS (15) from the seeds in
# tests/common/fuzz_seeds/gunzip. Any crash or disagreement fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_gunzip "$PT_SRC/tests/common/fuzz_gunzip.c" \
  "$PT_SRC/src/common/pt_gunzip.c" "$PT_SRC/src/common/pt_pprof_read.c" \
  "$PT_SRC/src/common/pt_pprof_summary.c" "$PT_SRC/src/common/pt_alloc.c" -lz
fuzz_run fuzz_gunzip "$PT_SRC/tests/common/fuzz_seeds/gunzip" -max_len=65536
