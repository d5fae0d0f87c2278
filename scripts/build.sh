#!/usr/bin/env bash
# scripts/build.sh VARIANT [extra meson args]
# VARIANT: dev | release | profile | asan | tsan. Configures build/VARIANT
# once (reconfigures when the options change) and builds it. Records the
# variant in build/.last-variant so `just run-cli` uses the build made most
# recently (not for the sanitizer variants).
# The test variants (dev, profile, asan, tsan) get -Dfault_injection=true
# (POLYTOKEN_FAULT_* honoured); release never does.
# tsan: the profiling build under ThreadSanitizer (gcc -fsanitize=thread);
# see docs/architecture.md "Checked by tools" for what it covers.
set -euo pipefail
cd "$(dirname "$0")/.."
v="${1:?usage: build.sh dev|release|profile|asan|tsan}"; shift || true
case "$v" in
  dev)     opts=(-Dbuildtype=debugoptimized -Dprofiling=false -Dfault_injection=true) ;;
  release) opts=(-Dbuildtype=release -Dprofiling=false -Db_ndebug=true -Dfault_injection=false) ;;
  profile) opts=(-Dbuildtype=debugoptimized -Dprofiling=true -Dfault_injection=true) ;;
  asan)    opts=(-Dbuildtype=debug -Dprofiling=true -Db_sanitize=address,undefined -Db_lundef=false
                 -Dfault_injection=true) ;;
  tsan)    opts=(-Dbuildtype=debugoptimized -Dprofiling=true -Db_sanitize=thread -Db_lundef=false
                 -Dfault_injection=true) ;;
  *) echo "build.sh: unknown variant $v (dev|release|profile|asan|tsan)" >&2; exit 2 ;;
esac
[ "${PT_WERROR:-0}" = 1 ] && opts+=(-Dwerror=true) || opts+=(-Dwerror=false)
dir="build/$v"
if [ -f "$dir/build.ninja" ]; then
  # An option added to meson_options.txt since the directory was set up is
  # unknown to `meson configure` until meson regenerates: reconfigure then.
  meson configure "$dir" "${opts[@]}" "$@" >/dev/null 2>&1 ||
    meson setup --reconfigure "$dir" "${opts[@]}" "$@" >/dev/null
else
  rm -rf "$dir"
  meson setup "$dir" "${opts[@]}" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null || ninja -C "$dir"
case "$v" in asan|tsan) ;; *) echo "$v" > build/.last-variant ;; esac
echo "built $dir"
