#!/usr/bin/env bash
# A scripted tour of the profiling build, in a throw-away state root:
# start the daemon, create a session, run a few turns, ask for a profile
# dump, and read it back with go tool pprof.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/build.sh profile
B=build/profile
export POLYTOKEN_HOME=$(mktemp -d /tmp/polytoken-demo.XXXXXX)
export POLYTOKEN_RESPONDER_DELAY_MS=${POLYTOKEN_RESPONDER_DELAY_MS:-2}
trap '$B/polytoken daemon stop >/dev/null 2>&1 || true' EXIT
echo "state root: $POLYTOKEN_HOME"
$B/polytoken daemon start
sid=$($B/polytoken new --name demo)
echo "session: $sid"
for q in "hello there" "tell me about profiling" "what does a sampler do"; do
  echo "> $q"
  $B/polytoken send --session "$sid" "$q"
  echo
done
path=$($B/polytoken profile dump)
echo "profile: $path"
go tool pprof -symbolize=none -nodefraction=0 -top "$path" | head -n 25
$B/polytoken daemon stop
# No session was attached (that is what the TUI does), so the daemon's
# snapshots went to the state root's profiling/ directory.
echo "snapshots (the manual one and the final one written at shutdown):"
ls -l "$POLYTOKEN_HOME/profiling/"
