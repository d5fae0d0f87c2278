#!/usr/bin/env bash
# bench/tui/paste_once.sh BIN SIZE - one measurement for bench/tui/run.sh:
# a real tmux pane runs `BIN attach` against a real daemon (BIN's own
# polytokend), SIZE bytes of one line (words of ASCII, no newline) are
# pasted with `tmux load-buffer` + `paste-buffer`, Enter follows at once,
# and the time until the daemon's transcript holds the user message is
# printed with the number of bytes that arrived:
#   "ms=<milliseconds> bytes=<bytes received>"
set -u
BIN=$1 SIZE=$2
PT_SRC=$(cd "$(dirname "$0")/../.." && pwd)
PT_TUI_BIN=$BIN
: "${TMPDIR:=/tmp}"
export TMPDIR
# shellcheck source=../../tests/tui/tui_lib.sh
. "$PT_SRC/tests/tui/tui_lib.sh"
id=$("$PT" new --name bench) || fail "new"
tr="$POLYTOKEN_HOME/sessions/$id/transcript.jsonl"
python3 -c "import sys; n=$SIZE; sys.stdout.write(('abcdefghi ' * (n // 10 + 1))[:n])" >"$POLYTOKEN_HOME/paste"
tui_start
run_in_pane "$PT attach $id"
wait_screen "[connected]"
T load-buffer "$POLYTOKEN_HOME/paste"
t0=$(date +%s%N)
T paste-buffer -d
T send-keys Enter
end=$((SECONDS + 300))
until grep -q '"role":"user"' "$tr" 2>/dev/null; do
  [ $SECONDS -ge $end ] && fail "no user message after 300 s"
  sleep 0.01
done
t1=$(date +%s%N)
bytes=$(python3 -c 'import json,sys
for l in open(sys.argv[1]):
    j = json.loads(l)
    if j.get("role") == "user": print(len(j["text"].encode())); break' "$tr")
echo "ms=$(( (t1 - t0) / 1000000 )) bytes=$bytes"
