#!/usr/bin/env bash
# `polytoken attach ID` opens the conversation screen directly, with the
# session's transcript, following turns other clients send; an unknown ID is one error line, no curses screen.
. "$(dirname "$0")/tui_lib.sh"

id=$("$PT" new --name "attach test") || fail "new"
timeout 120 "$PT" send --session "$id" "remember the word marmalade" >/dev/null || fail "send"
tui_start
run_in_pane "$PT attach $id; echo EXIT=\$?"
wait_screen "attach test ($id)"
wait_screen "you> remember the word marmalade"
wait_screen "bot> "
wait_screen "[connected]"
# attach made it the daemon's active session.
"$PT" daemon status | grep -q "active session: $id" || fail "not the active session"
# A turn sent by another client to this session shows up here, with its
# user text (reloaded from the transcript when the turn ends).
timeout 120 "$PT" send --session "$id" "message from another client" >/dev/null || fail "second send"
wait_screen "you> message from another client"
[ "$(screen | grep -c '^bot> ')" -eq 2 ] || { dump_screen; fail "expected two replies"; }
T send-keys F10
wait_screen "EXIT=0"
run_in_pane "clear; $PT attach 0123456789ab; echo EXIT2=\$?"
wait_screen "EXIT2=1"
screen | grep -q '^polytoken: attach 0123456789ab: ' || { dump_screen; fail "no one-line error"; }
[ "$(screen | grep -c 'polytoken:')" -eq 1 ] || { dump_screen; fail "more than one error line"; }
[ "$(alt_screen)" = 0 ] || fail "alternate screen on after a failed attach"
echo ok
