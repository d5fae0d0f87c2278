#!/usr/bin/env bash
# feedback_upload_test.sh - `polytoken feedback send` end to end: the bundle
# in the outbox holds the message and each attachment byte for byte with a
# manifest; POSTed as multipart form data (libcurl) to a loopback HTTP server
# (tests/feedback/feedback_server.py):
#   ok          sent at once, moved to feedback/sent/<id> with status "sent"
#   fail-first  500 then 200: retried, then marked sent (2 requests)
#   hang        never answers: each attempt times out, the bundle stays in
#               the outbox with status "failed" and the error recorded
# The CLI binary is $POLYTOKEN_CLI when set (default: the build's polytoken).
set -euo pipefail
. "$(dirname "$0")/../daemon/catalog_lib.sh"
FB_DIR=$PT_SRC/tests/feedback
B=$PT_BUILD_DEV
CLI=${POLYTOKEN_CLI:-$B/polytoken}
[ -x "$B/polytokend" ] || fail "no daemon in $B"
export POLYTOKEN_DAEMON=$B/polytokend
pt_home
start_daemon "$B"
new_active_session "$B"
mkprofile "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" hot_spin=30 main=1
PROF=$PDIR/daemon-profile-20261129T210000Z-1.pb.gz

# start_server MODE: starts the server, sets SRV_OUT and URL.
start_server() {
  SRV_OUT=$(mktemp -d "$TMPDIR/srv.XXXXXX")
  python3 "$FB_DIR/feedback_server.py" "$1" "$SRV_OUT/port" "$SRV_OUT" 2>"$SRV_OUT/log" &
  SRV_PID=$!
  PT_PIDS+=("$SRV_PID")
  wait_for 20 test -s "$SRV_OUT/port" || fail "server did not start"
  URL="http://127.0.0.1:$(cat "$SRV_OUT/port")/feedback"
}
bundle_dir() { sed -n 's/^bundle: //p' "$1"; }
status_of() { python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print(s["state"], s["attempts"], s["http_status"])' "$1/status.json"; }

# --- no URL: the bundle stays in the outbox, complete
unset POLYTOKEN_FEEDBACK_URL
"$CLI" feedback send --message "first report" --attach cpu-profile --attach daemon-log >"$TMPDIR/o0" ||
  fail "send without URL failed: $(cat "$TMPDIR/o0")"
D0=$(bundle_dir "$TMPDIR/o0")
case "$D0" in "$POLYTOKEN_HOME"/feedback/outbox/*) ;; *) fail "bundle not in the outbox: $D0" ;; esac
[ "$(cat "$D0/message.txt")" = "first report" ] || fail "message.txt"
cmp "$D0/01-daemon-profile-20261129T210000Z-1.pb.gz" "$PROF" || fail "attachment bytes differ"
python3 - "$D0" <<'PY' || fail "manifest does not describe the files"
import hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert [a["kind"] for a in m["attachments"]] == ["cpu-profile", "daemon-log"], m
for a in m["attachments"]:
    data = open(os.path.join(d, a["file"]), "rb").read()
    assert len(data) == a["size"] and hashlib.sha256(data).hexdigest() == a["sha256"], a
    assert len(a["id"]) == 16
assert m["attachments"][0]["label"] == "CPU profile (pprof)"
PY
[ ! -e "$D0/status.json" ] || fail "status.json without an upload"
grep -q 'upload: skipped' "$TMPDIR/o0" || fail "no 'skipped' line"

# --- ok
start_server ok
POLYTOKEN_FEEDBACK_URL=$URL "$CLI" feedback send --message "ok report" --attach cpu-profile >"$TMPDIR/o1" ||
  fail "send to ok server failed: $(cat "$TMPDIR/o1")"
D1=$(bundle_dir "$TMPDIR/o1")
S1=$POLYTOKEN_HOME/feedback/sent/$(basename "$D1")
[ ! -e "$D1" ] && [ -d "$S1" ] || fail "bundle not moved to sent/"
[ "$(status_of "$S1")" = "sent 1 200" ] || fail "status: $(status_of "$S1")"
[ "$(wc -l <"$SRV_OUT/requests")" = 1 ] || fail "expected one request"
cmp "$SRV_OUT/1/attachment-01-daemon-profile-20261129T210000Z-1.pb.gz" "$PROF" || fail "server got other bytes"
[ "$(cat "$SRV_OUT/1/message-message.txt")" = "ok report" ] || fail "server message part"
cmp "$SRV_OUT/1/manifest-manifest.json" "$S1/manifest.json" || fail "server manifest part"
stop_pid "$SRV_PID"

# --- fail-first: 500, then 200 on the retry
start_server fail-first
POLYTOKEN_FEEDBACK_URL=$URL POLYTOKEN_FEEDBACK_BACKOFF_MS=50 \
  "$CLI" feedback send --message "retry report" --attach cpu-profile >"$TMPDIR/o2" ||
  fail "send to fail-first server failed: $(cat "$TMPDIR/o2")"
D2=$(bundle_dir "$TMPDIR/o2")
S2=$POLYTOKEN_HOME/feedback/sent/$(basename "$D2")
[ -d "$S2" ] || fail "retried bundle not in sent/"
[ "$(status_of "$S2")" = "sent 2 200" ] || fail "status: $(status_of "$S2")"
[ "$(cut -d' ' -f2 "$SRV_OUT/requests" | tr '\n' ' ')" = "500 200 " ] || fail "requests: $(cat "$SRV_OUT/requests")"
grep -q 'after 2 attempts' "$TMPDIR/o2" || fail "CLI did not report 2 attempts"
stop_pid "$SRV_PID"

# --- hang: never answers; bounded tries, stays in the outbox with the error
start_server hang
set +e
POLYTOKEN_FEEDBACK_URL=$URL POLYTOKEN_FEEDBACK_TIMEOUT_MS=500 POLYTOKEN_FEEDBACK_TRIES=2 \
  POLYTOKEN_FEEDBACK_BACKOFF_MS=50 \
  "$CLI" feedback send --message "hang report" --attach cpu-profile >"$TMPDIR/o3" 2>"$TMPDIR/e3"
rc=$?
set -e
[ "$rc" != 0 ] || fail "send to a hanging server succeeded"
[ "$(wc -l <"$TMPDIR/e3")" = 1 ] || fail "expected one error line: $(cat "$TMPDIR/e3")"
grep -q '^polytoken: upload failed after 2 attempts' "$TMPDIR/e3" || fail "error line: $(cat "$TMPDIR/e3")"
D3=$(bundle_dir "$TMPDIR/o3")
[ -d "$D3" ] || fail "failed bundle left the outbox"
case "$D3" in "$POLYTOKEN_HOME"/feedback/outbox/*) ;; *) fail "failed bundle not in outbox: $D3" ;; esac
[ "$(status_of "$D3")" = "failed 2 0" ] || fail "status: $(status_of "$D3")"
python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert "imeout" in s["error"] or "timed out" in s["error"], s' \
  "$D3/status.json" || fail "error not recorded: $(cat "$D3/status.json")"
cmp "$D3/01-daemon-profile-20261129T210000Z-1.pb.gz" "$PROF" || fail "failed bundle lost its attachment"
# (an attempt that timed out before its headers were read is not counted
# by the server, so only bound it)
N=$(cat "$SRV_OUT/requests" 2>/dev/null | wc -l)
[ "$N" -le 2 ] || fail "more attempts than allowed reached the server: $N"
echo ok
