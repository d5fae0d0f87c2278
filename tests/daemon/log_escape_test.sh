#!/usr/bin/env bash
# log_escape_test.sh - issue 21 item 6 (logs): strings from outside reach
# logs/daemon.log and the daemon's stderr escaped, never raw: a state root
# path, a directory name in sessions/ and an IPC client's hello name, each
# holding ESC sequences and newlines. Every line of both stays one line
# that starts with a time stamp (nothing forged), holds no ESC byte, and
# says exactly what the escaping rule (pt_escape.h) gives. The CLI's error
# line about a root with such a name is escaped too.
source "$(dirname "$0")/daemon_lib.sh"
# the state root, named by someone who likes terminals
export POLYTOKEN_HOME=$T/h$'\e[31m\n'x
mkdir -p "$POLYTOKEN_HOME/sessions/bad"$'\e[2J\n'"2026-01-01T00:00:00.000Z ERROR forged"
start_daemon
python3 - <<'PY' || fail "hello failed"
import os
from ipc_client import Client
c = Client(os.environ["POLYTOKEN_HOME"])
r = c.call("hello", {"protocol": 1, "client": "evil\x1b]0;owned\x07\nWARN forged"})
assert "result" in r, r
PY
kill -TERM "$PD_PID"; wait_gone "$PD_PID"
LOG=$POLYTOKEN_HOME/logs/daemon.log
# what pt_escape gives, by an independent implementation
esc() { python3 -c '
import sys
s = sys.argv[1].encode("utf-8", "surrogateescape")
out = ""
for b in s:
    if b == 0x5c: out += "\\\\"
    elif b == 10: out += "\\n"
    elif b == 13: out += "\\r"
    elif b == 9: out += "\\t"
    elif b < 0x20 or b == 0x7f: out += "\\x%02x" % b
    else: out += chr(b)
print(out)' "$1"; }
home_real=$(cd "$POLYTOKEN_HOME" && pwd -P)
# (client 1 is start_daemon's readiness probe)
for f in "$LOG" "$T/daemon.out"; do
  ! grep -q $'\e' "$f" || fail "$f holds a raw ESC"
  bad=$(grep -vE '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9:.]{12}Z (DEBUG|INFO|WARN|ERROR) ' "$f" | grep -v '^polytokend: stopped$')
  [ -z "$bad" ] || fail "$f has lines that are not log lines: $bad"
  for want in \
    "INFO polytokend $("$PD_BIN" --version | cut -d' ' -f2) starting (pid $PD_PID, home $(esc "$home_real"))" \
    "WARN session $(esc "bad"$'\e[2J\n'"2026-01-01T00:00:00.000Z ERROR forged") skipped: not a session id (expected 12 lowercase hex characters)" \
    "INFO client 2: hello from evil?]0;owned??WARN forged"; do
    grep -qxF -- "$want" <(cut -d' ' -f2- "$f") || { echo "want: $want"; fail "not in $f"; }
  done
done
# the IPC core's own rule keeps the hello name printable ASCII ('?'); the
# log's rule is the one for everything else: checked above for the path
# and the directory name, whose escapes show in the file
grep -qF 'home '"$T"'/h\x1b[31m\nx)' "$LOG" || fail "the path is not escaped as expected"

# the CLI's error line: an open directory with such a name
O=$T/o$'\e[5m'
mkdir -m 0777 "$O"
POLYTOKEN_HOME=$O "$PT_BUILD_DEV/polytoken" daemon start >/dev/null 2>"$T/cli.err" && fail "open root accepted"
want="polytoken: the state root $T/o\\x1b[5m is not safe: $T/o\\x1b[5m is writable by others (mode 0777); use a directory that nobody else can write to or replace (docs/daemon.md, \"State root\")"
[ "$(cat "$T/cli.err")" = "$want" ] || { echo "want: $want"; echo "got:  $(cat -v "$T/cli.err")"; fail "CLI line not escaped"; }
echo PASS
