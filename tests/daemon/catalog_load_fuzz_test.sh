#!/usr/bin/env bash
# libFuzzer over the artifact catalog's loader of catalog.json
# (src/daemon/pd_catalog.c via pd_catalog_new, with the other catalog units; tests/daemon/fuzz_catalog_load.c)
# for PT_FUZZ_SECONDS (15) from tests/daemon/fuzz_seeds/catalog_json. Any
# crash, sanitizer report or wrongly loaded generation fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
# shellcheck disable=SC2046
fuzz_build fuzz_catalog_load "$PT_SRC/tests/daemon/fuzz_catalog_load.c" \
  "$PT_SRC/src/daemon/pd_catalog.c" "$PT_SRC/src/daemon/pd_catalog_fetch.c" \
  "$PT_SRC/src/daemon/pd_catalog_hash.c" "$PT_SRC/src/daemon/pd_catalog_json.c" \
  "$PT_SRC/src/daemon/pd_catalog_scan.c" "$PT_SRC/src/daemon/pd_catalog_profile.c" \
  "$PT_SRC/src/common/pt_file.c" "$PT_SRC/src/common/pt_sha256.c" \
  "$PT_SRC/src/common/pt_write_all.c" "$PT_SRC/src/common/pt_alloc.c" \
  "$PT_SRC/src/common/pt_gunzip.c" "$PT_SRC/src/common/pt_gzip.c" \
  "$PT_SRC/src/common/pt_pprof_read.c" "$PT_SRC/src/common/pt_pprof_write.c" \
  "$PT_SRC/src/common/pt_pprof_merge.c" "$PT_SRC/src/common/pt_threadcpu_line.c" "$PT_SRC/src/common/pt_fmt.c" \
  $(pkg-config --cflags --libs jansson libcrypto zlib)
fuzz_run fuzz_catalog_load "$PT_SRC/tests/daemon/fuzz_seeds/catalog_json" -max_len=4096
