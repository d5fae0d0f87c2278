#!/usr/bin/env bash
# Installs what Polytoken needs to build, run and test, and nothing twice:
# Debian packages that are missing, and `just` from the npm package rust-just.
# Safe to run again; prints one line per thing it installs.
set -euo pipefail

PKGS=(
  gcc make pkg-config meson ninja-build      # toolchain and build
  libuv1-dev libjansson-dev libncurses-dev   # daemon and TUI
  libcurl4-openssl-dev libssl-dev            # feedback upload, SHA-256
  zlib1g-dev libdw-dev libelf-dev libnghttp2-dev   # profiling build
  golang-go graphviz                         # go tool pprof reads our profiles back
  dwz libc6-dbg binutils                     # symbolizer tests: dwz multifiles, separate debug info
  tmux python3 procps psmisc                 # TUI and process-level tests
  clang libclang-rt-14-dev                   # fuzz target (libFuzzer)
  google-perftools linux-perf                # bench/ comparisons only
  sqlite3 xz-utils python3.11                # bench/real: Debian programs without frame pointers
  nodejs npm                                 # gRPC test client, rust-just
  python3-h2                                 # hostile HTTP/2 clients of the console tests (tests/console/h2_hostile.py)
  chromium                                   # a real browser for the flame graph page's test (tests/common/flame_browser_test.sh)
)

SUDO=""
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO="sudo"; else
    echo "setup: not root and no sudo; install these yourself: ${PKGS[*]}" >&2
  fi
fi

missing=()
for p in "${PKGS[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    # node/npm may come from elsewhere (nodesource, nvm): accept the commands.
    case "$p" in
      nodejs) command -v node >/dev/null 2>&1 && continue ;;
      npm) command -v npm >/dev/null 2>&1 && continue ;;
    esac
    missing+=("$p")
  fi
done
if [ "${#missing[@]}" -gt 0 ]; then
  echo "setup: installing Debian packages: ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

if ! command -v just >/dev/null 2>&1; then
  echo "setup: installing just (npm rust-just)"
  $SUDO npm install -g --silent rust-just >/dev/null
fi
