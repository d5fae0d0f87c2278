#!/usr/bin/env bash
# Resizing the terminal (tmux resize-window -> SIGWINCH) relayouts: the
# status bar spans the new width and the scrollback is re-wrapped.
. "$(dirname "$0")/tui_lib.sh"

id=$("$PT" new --name "resize test") || fail "new"
tui_start
run_in_pane "$PT attach $id; echo EXIT=\$?"
wait_screen "resize test ($id)"
long="one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen six"
T send-keys -l "$long"
T send-keys Enter
wait_screen "you> one two"
wait_screen "[connected]"
wait_screen "Enter send"
# At 100 columns the 92-character message fits on one line.
screen | grep -qF "you> $long" || { dump_screen; fail "message not on one line at width 100"; }

T resize-window -x 50 -y 20
# Status line: "[connected]" now ends at column 49 (one space margin).
wait_screen_re "^.{38}\[connected\] ?$"
[ "$(screen | wc -l)" -eq 20 ] || { dump_screen; fail "screen is not 20 rows"; }
# Re-wrapped: no line wider than 50, the message spans several lines.
[ "$(screen | awk '{ if (length($0) > 50) n++ } END { print n+0 }')" -eq 0 ] ||
  { dump_screen; fail "a line is wider than 50"; }
wait_screen_re "^you> one two three four five six seven eight nine$"
wait_screen_re "^     ten eleven"
# Input line and hint line are on the last two rows.
screen | sed -n 19p | grep -q "^>" || { dump_screen; fail "input line not on row 19"; }
# The key bar keeps whole items only (at 50 columns: "Enter send  F3
# feedback  F2 /sessions  F10 /quit", the rest dropped, none cut).
screen | sed -n 20p | grep -qE '^ Enter send  F3 feedback  F2 /sessions  F10 /quit *$' ||
  { dump_screen; fail "the key bar at 50 columns is not whole items"; }

# Scrollback: two more turns overflow the 17-row view; PgUp shows older
# lines and a "more below" marker, PgDn goes back to the newest.
for msg in "second message" "third message"; do
  T send-keys -l "$msg"
  T send-keys Enter
  wait_screen "you> $msg"
  wait_screen "Enter send"
done
wait_screen_gone "you> one two three"
T send-keys PPage
wait_screen "more lines below (PgDn)"
wait_screen "you> one two three"
T send-keys NPage
wait_screen_gone "more lines below"
wait_screen "you> third message"

T resize-window -x 100 -y 30
wait_screen "you> third message"
wait_screen_re "^.{88}\[connected\] ?$"
T send-keys F10
wait_screen "EXIT=0"
echo ok
