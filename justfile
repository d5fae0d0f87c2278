# Polytoken tasks. `just --list` shows them.

# normal development build (build/dev)
build:
    bash scripts/build.sh dev

# release build (build/release): no profiling code
release:
    bash scripts/build.sh release

# development profiling build (build/profile): sampler, task console
profile-build:
    bash scripts/build.sh profile

# the normal local workflow (TUI, auto-starting the daemon) from the build made most recently
run-cli *ARGS:
    #!/usr/bin/env bash
    set -euo pipefail
    v=$(cat build/.last-variant 2>/dev/null || true)
    if [ -z "$v" ] || [ ! -x "build/$v/polytoken" ]; then
      echo "run-cli: no build yet; run 'just build', 'just release' or 'just profile-build' first" >&2; exit 1
    fi
    exec "build/$v/polytoken" {{ARGS}}

# the whole test suite (same as .ci/run); ends with "N passed, N failed"
test:
    bash scripts/test.sh

# unit tests of one variant only (dev|profile|asan), optional test name/filter args
unit VARIANT="profile" *ARGS="":
    bash scripts/build.sh {{VARIANT}} && build/{{VARIANT}}/tests/unit-tests {{ARGS}}

# a short scripted demo: daemon, a session, turns, a profile dump, pprof top and tags, its flame graph page
demo:
    bash scripts/demo.sh

# benchmarks (on demand; results go to docs/performance.md)
bench:
    bash bench/run-all.sh

# a long run of the profiling daemon and TUI: memory, descriptors, threads, snapshot files (MINUTES=, default 30)
soak:
    bash scripts/build.sh profile && bash bench/soak/run.sh build/profile

# the daemon-overhead bench alone: 20-turn sessions, normal vs profiling daemon (PAIRS=, CONFIGS=)
bench-daemon:
    bash scripts/build.sh dev && bash scripts/build.sh profile && bash bench/daemon/run.sh build/dev build/profile
