#!/usr/bin/env bash
# The main job on a fresh machine: install what is missing, build the
# development profiling binary, start the normal local workflow with it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
just profile-build
exec just run-cli "$@"
