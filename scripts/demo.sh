#!/usr/bin/env bash
# A scripted tour of the profiling build, in a throw-away state root:
# start the daemon, create a session, run a few turns, ask for a profile
# dump, read it back with go tool pprof (top functions, CPU by thread and by
# task) and write its flame graph page.
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
# Three short turns are a few ms of CPU: at 99 samples per CPU-second that
# is no sample at all. Ten turns on a long text give the profile something
# to show (the built-in responder builds its model from the whole
# transcript on every turn).
echo "(ten more turns, each with a 20,000-word message, to give the profile CPU to show)"
long=$(python3 -c 'print(" ".join("w%d" % (i % 700) for i in range(20000)))')
for i in $(seq 1 10); do $B/polytoken send --session "$sid" "$long $i" >/dev/null; done
path=$($B/polytoken profile dump)
echo "profile: $path"
go tool pprof -symbolize=none -nodefraction=0 -top "$path" | head -n 25
echo "where the CPU went, by thread and by kind of task:"
go tool pprof -symbolize=none -tags "$path" 2>/dev/null |
  sed -n '/^ thread_name:/,/^$/p;/^ task_kind:/,/^$/p'
echo "an interactive flame graph of it (any browser, no network):"
$B/polytoken profile view "$path"
$B/polytoken daemon stop
# No session was attached (that is what the TUI does), so the daemon's
# snapshots went to the state root's profiling/ directory.
echo "the directory: the manual snapshot, its page, and the final snapshot written at shutdown:"
ls -l "$POLYTOKEN_HOME/profiling/"
