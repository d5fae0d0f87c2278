#!/usr/bin/env bash
# catalog_escape_test.sh - issue 9 item 4 with the real daemon and CLI:
#  (1) sessions/<active id> replaced by a symlink to a directory elsewhere
#      holding profiling/*.pb.gz: nothing of it is listed or fetched, and
#      `polytoken feedback send --attach cpu-profile` bundles nothing of it;
#  (2) a profile that is a hard link to a file outside the state root, and
#      (as root) one owned by another user: not listed;
#  (3) an in-place edit that keeps size and mtime, made between two chunks
#      of a chunked fetch: the later chunk is refused (not_found), at an
#      offset past the first block and with or without an offset-0 fetch;
#  (4) feedback/outbox planted as a symlink: `feedback send` fails with a
#      clear error and writes nothing through it.
set -euo pipefail
. "$(dirname "$0")/catalog_lib.sh"
B=$PT_BUILD_DEV
CLI=${POLYTOKEN_CLI:-$B/polytoken}
[ -x "$B/polytokend" ] || fail "no daemon in $B"
export POLYTOKEN_DAEMON=$B/polytokend
pt_home
start_daemon "$B"
new_active_session "$B"
OUT=$(mktemp -d "$TMPDIR/outside.XXXXXX")

list() { ipc artifacts.list; }
profiles() { jget "$(list)" "sorted(e['path'] for e in j['result']['entries'] if e['kind']=='cpu-profile')"; }

# (1) a symlinked session directory
mkprofile "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" hot_spin=30 main=1
[ "$(profiles)" = "['profiling/daemon-profile-20261129T210000Z-1.pb.gz']" ] || fail "own profile not listed: $(profiles)"
mkdir -p "$OUT/elsewhere/profiling"
mkprofile "$OUT/elsewhere/profiling/daemon-profile-20261129T220000Z-9.pb.gz" secret_function=50 main=1
SDIR=$POLYTOKEN_HOME/sessions/$SID
mv "$SDIR" "$OUT/real-session"
ln -s "$OUT/elsewhere" "$SDIR"
[ "$(profiles)" = "[]" ] || fail "profiles listed through a symlinked session directory: $(profiles)"
if "$CLI" feedback send --message "x" --attach cpu-profile >"$OUT/fb1.out" 2>&1; then
  fail "feedback send bundled a profile through the symlink: $(cat "$OUT/fb1.out")"
fi
if grep -rqa secret_function "$POLYTOKEN_HOME/feedback" 2>/dev/null; then fail "foreign profile bundled"; fi
rm "$SDIR"
mv "$OUT/real-session" "$SDIR"
[ "$(profiles)" = "['profiling/daemon-profile-20261129T210000Z-1.pb.gz']" ] || fail "not listed after restore: $(profiles)"

# (2) a hard link to a file outside, and a file of another user
ln "$OUT/elsewhere/profiling/daemon-profile-20261129T220000Z-9.pb.gz" "$PDIR/daemon-profile-20261129T220000Z-9.pb.gz"
[ "$(profiles)" = "['profiling/daemon-profile-20261129T210000Z-1.pb.gz']" ] || fail "hard-linked file listed: $(profiles)"
rm "$PDIR/daemon-profile-20261129T220000Z-9.pb.gz"
if [ "$(id -u)" = 0 ] && id nobody >/dev/null 2>&1; then
  mkprofile "$PDIR/daemon-profile-20261129T230000Z-7.pb.gz" other_user=5 main=1
  chown nobody "$PDIR/daemon-profile-20261129T230000Z-7.pb.gz"
  [ "$(profiles)" = "['profiling/daemon-profile-20261129T210000Z-1.pb.gz']" ] || fail "another user's file listed: $(profiles)"
  rm "$PDIR/daemon-profile-20261129T230000Z-7.pb.gz"
else
  note "not root: the other-owner case is skipped"
fi

# (3) in-place edits between chunks (a 300 KiB artifact: 5 blocks of 64 KiB)
BIG=$PDIR/daemon-profile-20261130T000000Z-3.pb.gz
head -c 307200 /dev/urandom >"$BIG"
python3 - "$POLYTOKEN_HOME" "$BIG" "$CAT_DIR" <<'PY'
import base64, json, os, sys
sys.path.insert(0, sys.argv[3])
from catalog_client import Client
home, big = sys.argv[1], sys.argv[2]
c = Client(home)
def entry():
    es = c.call("artifacts.list")["result"]["entries"]
    return [e for e in es if e["path"].endswith(os.path.basename(big))][0]
def edit_keep_mtime(off):
    st = os.stat(big)
    with open(big, "r+b") as f:
        f.seek(off); b = f.read(1); f.seek(off); f.write(bytes([b[0] ^ 0xff]))
    os.utime(big, ns=(st.st_atime_ns, st.st_mtime_ns))
    st2 = os.stat(big)
    assert st2.st_size == st.st_size and st2.st_mtime_ns == st.st_mtime_ns
def fetch(i, off, length=None):
    p = {"id": i, "offset": off}
    if length: p["length"] = length
    return c.call("artifacts.fetch", p)
orig = open(big, "rb").read()
# a: first chunk read (offset 0, 10 bytes), then an edit far behind it,
#    then the next chunk (offset 10): refused
e = entry()
r = fetch(e["id"], 0, 10)
assert base64.b64decode(r["result"]["data_base64"]) == orig[:10], r
edit_keep_mtime(200000)
r = fetch(e["id"], 10)
assert r.get("error", {}).get("code") == "not_found", "edited bytes served from offset 10: %s" % str(r)[:300]
# b: a fresh listing (new content hash) and a fetch that starts past the
#    first block without any offset-0 fetch, then an edit, then the next chunk
e = entry()
cur = open(big, "rb").read()
r = fetch(e["id"], 70000, 1000)
assert base64.b64decode(r["result"]["data_base64"]) == cur[70000:71000], str(r)[:300]
edit_keep_mtime(150000)
r = fetch(e["id"], 71000)
assert r.get("error", {}).get("code") == "not_found", "edited bytes served at 71000: %s" % str(r)[:300]
# c: unchanged file: a chunked fetch in odd-sized pieces gives exactly the bytes
e = entry()
cur = open(big, "rb").read()
got = b""
while len(got) < len(cur):
    r = fetch(e["id"], len(got), 50000)
    assert "result" in r, str(r)[:300]
    got += base64.b64decode(r["result"]["data_base64"])
assert got == cur
print("chunk checks ok")
PY

# (4) feedback/outbox planted as a symlink
mkdir -p "$POLYTOKEN_HOME/feedback" "$OUT/trap"
ln -s "$OUT/trap" "$POLYTOKEN_HOME/feedback/outbox"
if "$CLI" feedback send --message "trap" --attach cpu-profile >"$OUT/fb2.out" 2>&1; then
  fail "feedback send wrote through a symlinked outbox: $(cat "$OUT/fb2.out")"
fi
grep -q "symlink or non-directory is in the way" "$OUT/fb2.out" || fail "unclear error: $(cat "$OUT/fb2.out")"
[ -z "$(ls -A "$OUT/trap")" ] || fail "something was written through the link: $(ls -A "$OUT/trap")"
rm "$POLYTOKEN_HOME/feedback/outbox"
"$CLI" feedback send --message "fine" --attach cpu-profile >"$OUT/fb3.out" || fail "feedback send after removing the link"
ipc daemon.status >/dev/null || fail "daemon.status at the end"
echo "ok"
