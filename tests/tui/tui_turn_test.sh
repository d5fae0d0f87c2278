#!/usr/bin/env bash
# TUI conversation screen: attach from the picker, send a message, the reply
# streams in and lands in the scrollback; status line and hints; input
# history; F2 back to the picker.
. "$(dirname "$0")/tui_lib.sh"

id=$("$PT" new --name "turn test") || fail "new"
tui_start
run_in_pane "$PT; echo EXIT=\$?"
wait_screen "turn test"
T send-keys Enter
wait_screen "turn test ($id)"
wait_screen "[connected]"
wait_screen "F2 /sessions"
wait_screen "F10 /quit"

T send-keys -l "hello from the terminal ui"
wait_input "hello from the terminal ui"
T send-keys Enter
wait_screen "you> hello from the terminal ui"
wait_screen "bot> "
# Streaming ends: status back to connected, input line empty again.
wait_screen "[connected]"
wait_screen "Enter send"
wait_input ""
# The reply on screen is the one the daemon stored in the transcript.
tr="$POLYTOKEN_HOME/sessions/$id/transcript.jsonl"
wait_for 20 test -s "$tr" || fail "no transcript file at $tr"
reply=$(python3 - "$tr" <<'PY'
import json, sys
texts = [json.loads(l).get("text", "") for l in open(sys.argv[1]) if l.strip()]
roles = [json.loads(l).get("role") for l in open(sys.argv[1]) if l.strip()]
a = [t for t, r in zip(texts, roles) if r == "assistant"]
print(" ".join(a[-1].split())[:30] if a else "")
PY
)
[ -n "$reply" ] || fail "no assistant text in the transcript"
first_words=$(echo "$reply" | cut -d' ' -f1-3)
wait_screen "$first_words"
note "reply starts: $first_words"

# History: Up recalls the sent line; Ctrl-U clears it.
T send-keys Up
wait_input "hello from the terminal ui"
T send-keys C-u
wait_input ""
# Editing: type, move left, insert, Ctrl-W deletes a word.
T send-keys -l "abc xyz"
T send-keys Left Left Left
T send-keys -l "Q"
wait_input "abc Qxyz"
T send-keys End C-w
wait_input "abc"
T send-keys C-u

# F2: back to the picker, which shows the turn count.
T send-keys F2
wait_screen "Polytoken - sessions"
screen | grep -F "turn test" | grep -qE ' 1  [0-9a-f]{12}' || { dump_screen; fail "turn count not 1"; }
T send-keys q
wait_screen "EXIT=0"
echo ok
