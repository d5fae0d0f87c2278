#!/usr/bin/env bash
# libFuzzer over what the daemon does with a client's bytes: the IPC framer,
# hello and the request envelope (the sans-I/O core pd_ipc.c, driven
# directly: no daemon, no socket), and the parameter decoding of every
# method (the real methods registered on that core; tests/daemon/fuzz_ipc.c).
# PT_FUZZ_SECONDS (15) from tests/daemon/fuzz_seeds/ipc; any crash,
# sanitizer report, malformed reply, unprintable log line or connection held
# after the client left fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
srcs=()
for f in "$PT_SRC"/src/daemon/*.c "$PT_SRC"/src/common/*.c; do
  # pt_flame*.c: the flame graph page (not the daemon's; needs the
  # build's generated pt_flame_assets.c)
  case "$(basename "$f")" in main.c|pd_profiling.c|pt_flame*.c) continue ;; esac
  srcs+=("$f")
done
# shellcheck disable=SC2046
fuzz_build fuzz_ipc "$PT_SRC/tests/daemon/fuzz_ipc.c" "${srcs[@]}" \
  $(pkg-config --cflags --libs libuv jansson libcurl libcrypto zlib) -lm -lpthread
fuzz_run fuzz_ipc "$PT_SRC/tests/daemon/fuzz_seeds/ipc" -max_len=16384 \
  -dict="$PT_SRC/tests/daemon/fuzz_ipc.dict"
