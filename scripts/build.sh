#!/usr/bin/env bash
# scripts/build.sh VARIANT [extra meson args]
# VARIANT: dev | release | profile | asan. Configures build/VARIANT once
# (reconfigures when the options change) and builds it. Records the variant
# in build/.last-variant so `just run-cli` uses the build made most recently.
set -euo pipefail
cd "$(dirname "$0")/.."
v="${1:?usage: build.sh dev|release|profile|asan}"; shift || true
case "$v" in
  dev)     opts=(-Dbuildtype=debugoptimized -Dprofiling=false) ;;
  release) opts=(-Dbuildtype=release -Dprofiling=false -Db_ndebug=true) ;;
  profile) opts=(-Dbuildtype=debugoptimized -Dprofiling=true) ;;
  asan)    opts=(-Dbuildtype=debug -Dprofiling=true -Db_sanitize=address,undefined -Db_lundef=false) ;;
  *) echo "build.sh: unknown variant $v (dev|release|profile|asan)" >&2; exit 2 ;;
esac
[ "${PT_WERROR:-0}" = 1 ] && opts+=(-Dwerror=true) || opts+=(-Dwerror=false)
dir="build/$v"
if [ -f "$dir/build.ninja" ]; then
  meson configure "$dir" "${opts[@]}" "$@" >/dev/null
else
  rm -rf "$dir"
  meson setup "$dir" "${opts[@]}" "$@" >/dev/null
fi
ninja -C "$dir" >/dev/null || ninja -C "$dir"
[ "$v" = asan ] || echo "$v" > build/.last-variant
echo "built $dir"
