#!/usr/bin/env bash
# TUI input that used to be lost (issue 9, items 9 and 10), typed and pasted
# through a real tmux pane into a real daemon; what arrived is read back from
# the session's transcript:
#  - invalid UTF-8 bytes become U+FFFD and the text after them is kept;
#  - a 100 KB pasted line arrives whole (it used to be cut to 64 KiB);
#  - a paste longer than one IPC line allows is cut at the cap AND the
#    screen says how many bytes were not inserted; the rest is sent;
#  - a line that fits but is too long once JSON-escaped is not sent, the
#    screen says so and the text stays in the input line;
#  - the picker's name prompt says what it refused too.
. "$(dirname "$0")/tui_lib.sh"

# Must match INPUT_MAX_BYTES / PROMPT_MAX_BYTES in src/tui/tui_app_internal.h.
INPUT_MAX=$((1048576 - 256))
PROMPT_MAX=200

id=$("$PT" new --name "input test") || fail "new"
tr="$POLYTOKEN_HOME/sessions/$id/transcript.jsonl"
data="$POLYTOKEN_HOME/paste"

# user_text N: the text of the N-th user entry of the transcript (1-based),
# as UTF-8 bytes on stdout; fails while there is no such entry.
user_text() {
  python3 - "$tr" "$1" <<'PY'
import json, sys
users = [json.loads(l)["text"] for l in open(sys.argv[1], encoding="utf-8")
         if l.strip() and json.loads(l).get("role") == "user"]
n = int(sys.argv[2])
if len(users) < n:
    sys.exit(1)
sys.stdout.buffer.write(users[n - 1].encode("utf-8"))
PY
}
# wait_user N FILE: waits until user entry N exists, then compares it with FILE.
wait_user() {
  wait_for "$WAIT_S" user_text "$1" || { dump_screen; fail "user message $1 never reached the daemon"; }
  user_text "$1" >"$data.got"
  cmp -s "$data.got" "$2" ||
    fail "user message $1: daemon got $(wc -c <"$data.got") bytes, expected $(wc -c <"$2") ($(cmp "$data.got" "$2" 2>&1 | head -c 200))"
}
# paste FILE: pastes FILE's bytes as they are (a terminal paste).
paste() { T load-buffer "$1"; T paste-buffer -d; }

tui_start
run_in_pane "$PT attach $id; echo EXIT=\$?"
wait_screen "input test ($id)"
wait_screen "[connected]"

# 1. "a", two invalid bytes, "(b": each bad byte is one U+FFFD, "(b" kept.
printf 'a\xff\xfe(b' >"$data"
paste "$data"
wait_input "$(printf 'a\xef\xbf\xbd\xef\xbf\xbd(b')"
T send-keys Enter
printf 'a\xef\xbf\xbd\xef\xbf\xbd(b' >"$data.want"
wait_user 1 "$data.want"
wait_screen "(b"
wait_screen "Enter send"
# A truncated sequence, then an overlong one, then a valid é and a tab,
# then typed text: U+FFFD for each maximal bad part, nothing else changed
# (the tab is kept, drawn as a space).
printf 'x\xe2\x82y\xc0\xafz\xc3\xa9\tt' >"$data"
paste "$data"
T send-keys -l " ok"
wait_input "$(printf 'x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbdz\xc3\xa9 t ok')"
T send-keys Enter
printf 'x\xef\xbf\xbdy\xef\xbf\xbd\xef\xbf\xbdz\xc3\xa9\tt ok' >"$data.want"
wait_user 2 "$data.want"
wait_screen "Enter send"

# 2. A 100 KB line arrives whole; the input line shows its end before Enter.
python3 -c 'import sys; sys.stdout.write("0123456789 abcdefghijklmnopqrstuvwxyz " * 2640 + "END-OF-PASTE")' >"$data"
[ "$(wc -c <"$data")" -ge 100000 ] || fail "test data too short"
paste "$data"
wait_screen "END-OF-PASTE"
# A line longer than the screen shows its size against the cap.
wait_screen "line $(wc -c <"$data")/$INPUT_MAX B"
screen | grep -q "Line full" && { dump_screen; fail "a 100 KB line was refused"; }
T send-keys Enter
wait_user 3 "$data"
wait_input ""
wait_screen "Enter send"
note "100 KB paste arrived whole ($(wc -c <"$data") bytes)"

# 3. More than one IPC line allows: the first INPUT_MAX bytes are kept, the
# screen says how many were not, and Enter sends what was kept.
extra=5000
python3 -c "import sys; sys.stdout.write('y' * ($INPUT_MAX - 3) + 'END' + 'z' * $extra)" >"$data"
head -c "$INPUT_MAX" "$data" >"$data.want"
paste "$data"
wait_screen "Line full: $extra bytes not inserted (the line holds at most $INPUT_MAX bytes)" 60
wait_screen "yyyEND"
T send-keys Enter
wait_user 4 "$data.want"
wait_screen_gone "Line full" 60
wait_screen "Enter send" 60

# 4. Fits the line but not one IPC line once escaped (each '"' takes two
# bytes in JSON): not sent, the screen says so, the text stays.
python3 -c 'import sys; sys.stdout.write("\"" * 600000)' >"$data"
paste "$data"
wait_screen '> """"""""""' 60
T send-keys Enter
wait_screen "the message was not sent: JSON-escaped it takes 1200002 bytes" 60
input_line | grep -q '^> """"""""""' || { dump_screen; fail "the text left the input line"; }
user_text 5 >/dev/null && fail "an oversize message was sent"
"$PT" daemon status >/dev/null || fail "daemon not running after the oversize attempt"
# Shortened, it goes (the text was never lost: Ctrl-W and retype not needed).
T send-keys C-u
wait_input ""
T send-keys -l 'short "quoted" text'
T send-keys Enter
printf 'short "quoted" text' >"$data.want"
wait_user 5 "$data.want"
wait_screen "Enter send"

# 5. The picker's name prompt (200 bytes) says what it refused.
T send-keys F2
wait_screen "Polytoken - sessions"
T send-keys n
wait_screen "New session name:"
python3 -c "import sys; sys.stdout.write('n' * ($PROMPT_MAX + 50))" >"$data"
paste "$data"
wait_screen "Line full: 50 bytes not inserted (the line holds at most $PROMPT_MAX bytes)"
T send-keys Escape
wait_screen_gone "New session name:"
T send-keys q
wait_screen "EXIT=0"
echo ok
