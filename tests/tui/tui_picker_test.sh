#!/usr/bin/env bash
# TUI session picker in tmux: lists sessions with name and last activity;
# n creates a session, r renames, d deletes after y/n confirmation; q quits.
. "$(dirname "$0")/tui_lib.sh"

id1=$("$PT" new --name "alpha session") || fail "new"
id2=$("$PT" new --name "beta session") || fail "new"
tui_start
run_in_pane "$PT; echo EXIT=\$?"
wait_screen "Polytoken - sessions"
wait_screen "alpha session"
wait_screen "beta session"
screen | grep -F "alpha session" | grep -qF "just now" || { dump_screen; fail "no relative time"; }
screen | grep -qF "$id1" || { dump_screen; fail "id not listed"; }
wait_screen "[connected]"
wait_screen "n new  r rename  d delete  Enter attach"

# n: new session with a name typed at the prompt.
T send-keys n
wait_screen "New session name:"
T send-keys -l "gamma from picker"
T send-keys Enter
wait_screen "gamma from picker"
"$PT" sessions --json | grep -q '"gamma from picker"' || fail "created session not in sessions --json"
# The new session is selected (marked with '>').
screen | grep -E '^>' | grep -qF "gamma from picker" || { dump_screen; fail "new session not selected"; }

# r: rename the selected session (prompt prefilled; Ctrl-U clears it).
T send-keys r
wait_screen "Rename to: gamma from picker"
T send-keys C-u
T send-keys -l "delta renamed"
T send-keys Enter
wait_screen "delta renamed"
wait_screen_gone "gamma from picker"
"$PT" sessions --json | grep -q '"delta renamed"' || fail "rename not persisted"

# d then n: nothing deleted.
T send-keys d
wait_screen 'Delete session "delta renamed"? (y/n)'
T send-keys n
wait_screen_gone "(y/n)"
"$PT" sessions --json | grep -q '"delta renamed"' || fail "deleted although answered n"
# d then y: deleted.
T send-keys d
wait_screen "(y/n)"
T send-keys y
wait_screen "Session deleted."
wait_screen_gone "delta renamed"
! "$PT" sessions --json | grep -q '"delta renamed"' || fail "session still listed by the daemon"

# Navigation then q quits with exit code 0.
T send-keys Down Up
T send-keys q
wait_screen "EXIT=0"
[ "$(alt_screen)" = 0 ] || fail "alternate screen still on"
echo ok
