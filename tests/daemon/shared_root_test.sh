#!/usr/bin/env bash
# shared_root_test.sh - issue 21 item 4 with real processes and a second
# local user B (made with useradd; the test runs as root, as CI does):
#  1. B makes a 0777 directory; A's POLYTOKEN_HOME points into it. The
#     daemon (polytokend --home), the CLI (daemon start, send) and the TUI
#     refuse it with the exact reason, exit 1, and create nothing in it.
#  2. A's own root, but B's listener in place of daemon.sock: refused by
#     the socket file's owner (lstat), and, with the file made A's, by the
#     listener's user (SO_PEERCRED), before a single byte of A's text
#     reaches B (B's listener records what it received: nothing).
set -u
. "$(dirname "$0")/../tui/tui_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root: makes a second user with useradd (CI runs as root)"
command -v useradd >/dev/null && command -v runuser >/dev/null || skip "useradd/runuser missing"
[ -x /usr/bin/python3 ] || skip "B's listener needs /usr/bin/python3"
export POLYTOKEN_DAEMON=$PT_BUILD_DEV/polytokend
[ -x "$POLYTOKEN_DAEMON" ] || fail "no dev daemon at $POLYTOKEN_DAEMON"

B=ptb$$
BD=
LPID=
cleanup() {
  [ -n "$LPID" ] && kill "$LPID" 2>/dev/null
  tui_cleanup
  [ -n "$BD" ] && rm -rf "$BD"
  userdel "$B" 2>/dev/null
  return 0
}
trap cleanup EXIT
useradd --system --no-create-home --shell /usr/sbin/nologin "$B" || fail "useradd $B"
BUID=$(id -u "$B")
# A /tmp-like directory (root's, sticky, writable by all) below /tmp,
# since this test's TMPDIR is private to root: B makes its directories
# there, as it would in /tmp
BD=$(mktemp -d /tmp/pt-b.XXXXXX)
chmod 1777 "$BD"
runuser -u "$B" -- mkdir -m 0700 "$BD/b" || fail "B cannot make its directory"
hint='; use a directory that nobody else can write to or replace (docs/daemon.md, "State root")'

# ---- 1. the shared 0777 directory ----
runuser -u "$B" -- mkdir -m 0777 "$BD/shared" || fail "B cannot make its directory"
H=$BD/shared/a
want="the state root $H is not safe: $BD/shared is owned by another user (uid $BUID, $B) and writable by others (mode 0777)$hint"

# expect_refused WHAT PREFIX CMD...: exit status 1, stderr exactly the reason
expect_refused() {
  local what=$1 prefix=$2 rc; shift 2
  "$@" >"$TMPDIR/out" 2>"$TMPDIR/err"; rc=$?
  [ "$rc" = 1 ] || { cat "$TMPDIR/err"; fail "$what: exit status $rc, not 1"; }
  printf '%s: %s\n' "$prefix" "$want" | cmp -s - "$TMPDIR/err" ||
    { echo "want: $prefix: $want"; echo "got:  $(cat "$TMPDIR/err")"; fail "$what: not the exact reason"; }
  [ ! -s "$TMPDIR/out" ] || fail "$what: wrote to stdout: $(cat "$TMPDIR/out")"
}
# (bounded: a daemon that accepted the root would run until stopped)
expect_refused "polytokend --home" polytokend timeout -k 5 20 "$POLYTOKEN_DAEMON" --home "$H"
expect_refused "daemon start" polytoken env POLYTOKEN_HOME="$H" "$PT" daemon start
expect_refused "send" polytoken env POLYTOKEN_HOME="$H" "$PT" send --session 0123456789ab "A's secret"
[ -z "$(ls -A "$BD/shared")" ] || fail "something was created in B's directory: $(ls -A "$BD/shared")"
# the TUI: before curses, one line on stderr, exit 1
tui_start
run_in_pane "POLYTOKEN_HOME='$H' $PT 2>'$TMPDIR/tui.err'; echo TUI\"\"EXIT=\$?"
wait_screen "TUIEXIT="
screen | grep -qF "TUIEXIT=1" || { dump_screen; fail "TUI: exit status is not 1"; }
printf 'polytoken: %s\n' "$want" | cmp -s - "$TMPDIR/tui.err" ||
  fail "TUI: not the exact reason: $(cat "$TMPDIR/tui.err")"
[ -z "$(ls -A "$BD/shared")" ] || fail "the TUI created something in B's directory"
note "shared root refused by daemon, CLI and TUI"

# A's own directory, open to everyone: refused too (never silently fixed)
mkdir -m 0777 "$TMPDIR/open"
want="the state root $TMPDIR/open is not safe: $TMPDIR/open is writable by others (mode 0777)$hint"
expect_refused "own 0777 root" polytoken env POLYTOKEN_HOME="$TMPDIR/open" "$PT" daemon start
[ "$(stat -c %a "$TMPDIR/open")" = 777 ] || fail "the refused root was changed"

# ---- 2. B's listener in place of daemon.sock ----
H2=$TMPDIR/home2
mkdir -m 0700 "$H2"
# B's listener: accepts, records per connection how many bytes arrived
runuser -u "$B" -- /usr/bin/python3 -c '
import os, socket, sys
d = sys.argv[1] + "/b"
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.bind(d + "/l.sock"); s.listen(8)
open(d + "/pid.tmp", "w").write("%d\n" % os.getpid()); os.rename(d + "/pid.tmp", d + "/pid")
n = 0
while True:
    c, _ = s.accept(); n += 1; got = b""
    while True:
        b = c.recv(65536)
        if not b: break
        got += b
    c.close()
    with open(d + "/log", "a") as f: f.write("conn %d: %d bytes %r\n" % (n, len(got), got))
' "$BD" &
LPID=$!
wait_for 20 test -s "$BD/b/pid" || fail "B's listener did not start"
mv "$BD/b/l.sock" "$H2/daemon.sock" || fail "cannot put B's socket in place"
# the socket file is B's: refused before connecting
want="$H2/daemon.sock is owned by another user (uid $BUID), not by you; not connecting to it"
expect_refused "send to B's socket file" polytoken env POLYTOKEN_HOME="$H2" "$PT" send --session 0123456789ab "A's secret"
expect_refused "daemon start with B's socket file" polytoken env POLYTOKEN_HOME="$H2" "$PT" daemon start
[ ! -e "$BD/b/log" ] || fail "B's listener saw a connection: $(cat "$BD/b/log")"
# the file made A's: the listener is still B's process
chown root "$H2/daemon.sock"
want="the process listening on $H2/daemon.sock (pid $(cat "$BD/b/pid")) runs as another user (uid $BUID), not as you; nothing was sent to it"
expect_refused "send to B's listener" polytoken env POLYTOKEN_HOME="$H2" "$PT" send --session 0123456789ab "A's secret"
wait_for 20 test -s "$BD/b/log" || fail "B's listener never saw the connection"
[ "$(cat "$BD/b/log")" = "conn 1: 0 bytes b''" ] || fail "B received: $(cat "$BD/b/log")"
note "B's socket refused before any byte was sent"
echo PASS
