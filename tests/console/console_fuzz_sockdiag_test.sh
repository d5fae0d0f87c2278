#!/usr/bin/env bash
# libFuzzer with ASan and UBSan over the parsers of the kernel's socket
# table that decide which user a console connection belongs to
# (src/console/ptcon_sockdiag.c: the NETLINK_SOCK_DIAG answer and the
# /proc/net/tcp{,6} line), from the committed seeds
# (tests/console/fuzz_sockdiag_seeds/, made by fuzz_sockdiag_seeds.py), for
# PT_FUZZ_SECONDS (tests/fuzz_lib.sh). Skips (77) when clang's libFuzzer is missing.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/../fuzz_lib.sh"
fuzz_require
fuzz_build fuzz_sockdiag "$PT_SRC/tests/console/fuzz_sockdiag.c" "$PT_SRC/src/console/ptcon_sockdiag.c"
fuzz_run fuzz_sockdiag "$PT_SRC/tests/console/fuzz_sockdiag_seeds" -max_len=1024
