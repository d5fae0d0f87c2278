#!/usr/bin/env bash
# The console serves its own user, and no client keeps it busy (issue 21,
# item 5), with real processes:
#  1. a second user, made here with useradd, connects with real clients
#     (grpc-js, and nghttp2's in console_reconnect) to console_demo: refused,
#     not one byte received (not even the HTTP/2 SETTINGS); the console's
#     own user is served; the refusal is logged with the other user's uid;
#  2. the opt-out lets the other user in: ptcon_server_options'
#     allow_other_users (console_demo), and POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS=1
#     in the profiling daemon, which refuses the other user without it;
#  3. the hostile reconnect loop (console_reconnect: two loops of connect,
#     WatchUpdates, read the first bytes, close; 3000 retained tasks) runs
#     while a real client (grpc-js) gets its Updates, task details, pause and
#     resume, and the app loop keeps ticking; the loop's calls waited their
#     turn (logged) and none failed. No wall-clock assertion: the exact
#     rates are unit-tested on made-up moments (test_console_grpc.c).
# Needs root to create the second user (CI runs as root); skips otherwise.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/console_lib.sh"
[ "$(id -u)" = 0 ] || skip "needs root to create a second user with useradd (CI runs as root)"
command -v useradd >/dev/null && command -v userdel >/dev/null || skip "useradd/userdel not installed"
command -v setpriv >/dev/null || skip "setpriv (util-linux) not installed"
console_npm
RECONNECT="$PT_BUILD_PROF/tests/console/console_reconnect"
[ -x "$RECONNECT" ] || skip "no profiling build at $PT_BUILD_PROF (console_reconnect missing)"

# ---- the second user, and what it may run ----------------------------------
OTHER="ptcon-$$-$RANDOM"
useradd --system --no-create-home --user-group --shell /usr/sbin/nologin "$OTHER" ||
  fail "useradd $OTHER"
# The checkout may be private (0700): the other user runs copies.
SHARE=$(mktemp -d /tmp/ptcon-users.XXXXXX)
cleanup_users() {
  pt_cleanup
  userdel "$OTHER" 2>/dev/null || true
  rm -rf "$SHARE"
}
trap cleanup_users EXIT
mkdir -p "$SHARE/tests/console" "$SHARE/proto"
cp "$RECONNECT" "$SHARE/console_reconnect"
cp "$CONSOLE_DIR/console_client.js" "$SHARE/tests/console/"
cp -r "$CONSOLE_DIR/node_modules" "$SHARE/tests/console/"
cp -r "$PT_SRC/proto/console" "$SHARE/proto/"
chmod -R a+rX "$SHARE"
ouid=$(id -u "$OTHER")
as_other() { setpriv --reuid="$ouid" --regid="$(id -g "$OTHER")" --clear-groups -- env HOME=/ "$@"; }
as_other true || fail "cannot run as $OTHER"
OCLIENT="$SHARE/tests/console/console_client.js"

# ---- 1. another user is refused, ours is served ----------------------------
console_demo_start
out=$(as_other node "$OCLIENT" refused "$DEMO_ADDR") || { echo "$out" >&2; fail "grpc-js of $OTHER was not refused"; }
note "$OTHER with grpc-js: $out"
res=$(as_other "$SHARE/console_reconnect" "$DEMO_ADDR" 3x 1 watch)
note "$OTHER with nghttp2: $res"
# silent: the connection closed before a single byte (console_reconnect.c)
[ "$res" = "iterations 3 served 0 status 0 silent 3 errors 0" ] ||
  fail "$OTHER got bytes of the protocol: $res"
node "$CONSOLE_DIR/console_client.js" names "$DEMO_ADDR" demo.ticker || fail "our own user was not served"
res=$("$RECONNECT" "$DEMO_ADDR" 3x 1 watch)
[ "$res" = "iterations 3 served 3 status 0 silent 0 errors 0" ] || fail "our own nghttp2 client: $res"
console_demo_stop
grep -c "refused a connection of uid $ouid (this console serves uid 0 only)" "$DEMO_OUT" >/dev/null ||
  { cat "$DEMO_OUT" >&2; fail "no log line naming uid $ouid"; }
grep -c "for uid 0 only" "$DEMO_OUT" >/dev/null || fail "the listening line does not say whom it serves"

# ---- 2. the opt-out ----------------------------------------------------------
console_demo_start PTCON_DEMO_ALLOW_OTHER_USERS=1
as_other node "$OCLIENT" names "$DEMO_ADDR" demo.ticker || fail "allow_other_users: $OTHER not served"
res=$(as_other "$SHARE/console_reconnect" "$DEMO_ADDR" 2x 1 watch)
[ "$res" = "iterations 2 served 2 status 0 silent 0 errors 0" ] || fail "allow_other_users: $res"
console_demo_stop
grep -c "for every user" "$DEMO_OUT" >/dev/null || fail "the listening line does not say it serves every user"

# The profiling daemon: refused by default, served with the documented
# setting (src/common/pt_console_env.h).
pt_home
dport=$(free_port)
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$dport
start_daemon "$PT_BUILD_PROF"
wait_for 20 grep -q "task console listening" "$POLYTOKEN_HOME/logs/daemon.log" ||
  fail "the daemon's console did not start"
as_other node "$OCLIENT" refused "127.0.0.1:$dport" || fail "daemon: $OTHER was not refused"
node "$CONSOLE_DIR/console_client.js" names "127.0.0.1:$dport" ipc.accept || fail "daemon: our user not served"
wait_for 20 grep -q "refused a connection of uid $ouid" "$POLYTOKEN_HOME/logs/daemon.log" ||
  fail "daemon: no log line naming uid $ouid"
stop_pid "$DAEMON_PID"
export POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS=1
start_daemon "$PT_BUILD_PROF"
wait_for 20 grep -q "for every user" "$POLYTOKEN_HOME/logs/daemon.log" ||
  fail "POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS=1: the daemon's console does not serve every user"
as_other node "$OCLIENT" names "127.0.0.1:$dport" ipc.accept ||
  fail "POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS=1: $OTHER not served by the daemon"
stop_pid "$DAEMON_PID"
unset POLYTOKEN_CONSOLE_DAEMON_BIND POLYTOKEN_CONSOLE_ALLOW_OTHER_USERS

# ---- 3. the reconnect loop -----------------------------------------------------
console_demo_start PTCON_DEMO_ENDED=3000 PTCON_DEMO_RETENTION_MS=600000
wait_for 20 test -s "$DEMO_PROGRESS" || fail "demo loop did not start"
counts="$TMPDIR/loop.counts"
"$RECONNECT" "$DEMO_ADDR" 0 2 watch "$counts" >"$TMPDIR/loop.out" 2>&1 &
LOOP_PID=$!
PT_PIDS+=("$LOOP_PID")
served() { awk '{print $4}' "$counts" 2>/dev/null || echo 0; }
# The loop has taken every token a new connection's allowance and the
# watch rate give, and its calls wait their turn.
wait_for 30 grep -q "wait their turn" "$DEMO_OUT" || { cat "$DEMO_OUT" >&2; fail "the loop's calls never waited"; }
before=$(served)
node "$CONSOLE_DIR/console_client.js" generic "$DEMO_ADDR" demo.ticker demo.fixed ||
  fail "a real client was not served during the reconnect loop"
kill -0 "$LOOP_PID" || fail "the reconnect loop stopped"
during=$(served)
[ "$during" -gt "$before" ] || fail "the loop made no progress while the real client ran ($before -> $during)"
console_demo_alive
kill -TERM "$LOOP_PID"
wait "$LOOP_PID" || true
cat "$TMPDIR/loop.out"
read -r _ it _ sv _ rf _ si _ er <"$TMPDIR/loop.out"
note "reconnect loop: $it iterations, $sv served, $rf ended with an error status, $si silent, $er errors"
[ "$rf" = 0 ] && [ "$si" = 0 ] && [ "$er" = 0 ] || fail "calls of our own reconnect loop failed"
console_demo_stop
