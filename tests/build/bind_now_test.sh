#!/usr/bin/env bash
# The profiling build resolves every symbol at load time (-Wl,-z,now in
# meson.build): libptprof.so and every program that links the sampler carry
# DT_FLAGS BIND_NOW and DT_FLAGS_1 NOW, so the SIGPROF handler can never
# enter the dynamic linker's lazy resolver. Checked with readelf; the
# normal build is the control (it does not ask for it), so the check can
# fail in both directions.
source "$(dirname "$0")/../lib.sh"
command -v readelf >/dev/null || skip "readelf missing"

bind_now() { # FILE: 0 when both flags are set
  local d; d=$(readelf -d "$1") || fail "readelf cannot read $1"
  grep -Eq '\(FLAGS\)[[:space:]]+.*BIND_NOW' <<<"$d" && grep -Eq '\(FLAGS_1\)[[:space:]]+Flags:.* NOW' <<<"$d"
}

for f in "$PT_BUILD_PROF/libptprof.so" "$PT_BUILD_PROF/polytokend" "$PT_BUILD_PROF/polytoken" \
         "$PT_BUILD_PROF/tests/unit-tests"; do
  [ -e "$f" ] || fail "missing $f (build profile first)"
  bind_now "$f" || { readelf -d "$f" | grep -i flags >&2; fail "$f is not linked with -z now"; }
  note "$f: BIND_NOW, NOW"
done
# Control: the toolchain does not add it on its own here, so the flags above
# come from our link arguments (a default that changes shows up here).
if bind_now "$PT_BUILD_DEV/polytokend"; then
  note "the toolchain links with -z now by default; the check above proves less"
fi
echo ok
