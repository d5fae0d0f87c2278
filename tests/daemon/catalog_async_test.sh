#!/usr/bin/env bash
# catalog_async_test.sh - artifacts.list does its file work off the daemon's
# event-loop thread:
#  1. with a 512 MiB (sparse) daemon log, a list is in flight (its refresh has
#     started) while a second client's daemon.status is answered; the list's
#     reply comes after (order of replies, not timing);
#  2. the listed log's sha256 equals sha256 of the listed prefix, also after
#     the log grew, and the second refresh hashes only the appended bytes
#     (incremental hashing; the daemon's debug line reports the count);
#  3. lists sent while a refresh runs are coalesced into one next refresh
#     that answers all of them;
#  4. fetch (whose offset-0 re-check runs on the threadpool) still returns
#     exactly the listed bytes.
set -euo pipefail
. "$(dirname "$0")/catalog_lib.sh"
B=$PT_BUILD_DEV
[ -x "$B/polytokend" ] || fail "no daemon in $B"
pt_home
export POLYTOKEN_DEBUG=1
start_daemon "$B"
LOG=$POLYTOKEN_HOME/logs/daemon.log
wait_for 20 test -s "$LOG" || fail "no daemon log"
# A hole appended to the daemon's own (O_APPEND) log: 512 MiB of zeros that
# cost no disk, but must be read and hashed by a refresh.
truncate -s +512M "$LOG"

python3 - "$POLYTOKEN_HOME" "$CAT_DIR" <<'EOF' || fail "see above"
import hashlib, json, os, re, select, socket, subprocess, sys, time
home, catdir = sys.argv[1], sys.argv[2]
sys.path.insert(0, catdir)
from catalog_client import Client
log = os.path.join(home, "logs", "daemon.log")

def die(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)

def send(c, method, params=None):
    rid = c.next_id
    c.next_id += 1
    c.s.sendall((json.dumps({"id": rid, "method": method, "params": params or {}}) + "\n").encode())
    return rid

def recv(c, rid):
    while True:
        while b"\n" not in c.buf:
            chunk = c.s.recv(1 << 20)
            if not chunk:
                die("connection closed by the daemon")
            c.buf += chunk
        line, c.buf = c.buf.split(b"\n", 1)
        obj = json.loads(line)
        if obj.get("id") == rid:
            return obj

def pending(c):
    """True when no byte of a reply has arrived on c yet."""
    if c.buf:
        return False
    r, _, _ = select.select([c.s], [], [], 0)
    return not r

def log_text():
    # The daemon mirrors its log to stderr (daemon.out), which has no holes.
    with open(os.path.join(home, "daemon.out"), "rb") as f:
        return f.read().decode("utf-8", "replace")

def wait_log(pattern, what):
    end = time.time() + 120
    while time.time() < end:
        m = re.findall(pattern, log_text())
        if m:
            return m
        time.sleep(0.01)
    die("daemon never logged " + what)

def n_started():
    return len(re.findall(r"catalog: refresh (\d+) started", log_text()))

def prefix_sha(size):
    h = hashlib.sha256()
    with open(log, "rb") as f:
        left = size
        while left:
            b = f.read(min(left, 1 << 22))
            if not b:
                die("log shorter than listed")
            h.update(b)
            left -= len(b)
    return h.hexdigest()

def log_entry(reply):
    if "result" not in reply:
        die("list failed: %r" % reply)
    es = [e for e in reply["result"]["entries"] if e["kind"] == "daemon-log"]
    if len(es) != 1:
        die("daemon log not listed once: %r" % reply)
    return es[0]

a, b = Client(home), Client(home)

# 1. status answered while the list's refresh runs
base = n_started()
rid = send(a, "artifacts.list")
wait_log(r"catalog: refresh %d started" % (base + 1), "the refresh start")
st = b.call("daemon.status")
if "result" not in st:
    die("daemon.status failed: %r" % st)
if not pending(a):
    die("the list was answered before daemon.status: the loop thread did the refresh")
e1 = log_entry(recv(a, rid))
if e1["size"] < (512 << 20):
    die("listed log size %d does not include the 512 MiB appended" % e1["size"])
if prefix_sha(e1["size"]) != e1["sha256"]:
    die("listed sha256 of the log differs from sha256 of its first %d bytes" % e1["size"])
print("# status answered during the list; log sha256 ok (%d bytes)" % e1["size"])

# 2. incremental: grow the log by another 512 MiB; the next refresh reads only
#    the bytes appended since the last one.
subprocess.check_call(["truncate", "-s", "+512M", log])
base = n_started()
e2 = log_entry(a.call("artifacts.list"))
done = wait_log(r"catalog: refresh %d done: 1 calls, [^\n]*?, (\d+) bytes hashed" % (base + 1),
                "the second refresh's end")
hashed = int(done[-1])
grown = e2["size"] - e1["size"]
if prefix_sha(e2["size"]) != e2["sha256"]:
    die("incremental sha256 of the log differs from sha256 of its first %d bytes" % e2["size"])
if hashed >= e2["size"] or hashed < grown:
    die("second refresh hashed %d bytes; the log grew by %d to %d" % (hashed, grown, e2["size"]))
print("# incremental: hashed %d bytes for a %d-byte log (grew %d)" % (hashed, e2["size"], grown))

# 3. coalescing: while refresh N runs, three more lists share refresh N+1.
subprocess.check_call(["truncate", "-s", "+512M", log])
c, d = Client(home), Client(home)
base = n_started()
r0 = send(a, "artifacts.list")
wait_log(r"catalog: refresh %d started" % (base + 1), "the refresh start")
rids = [(b, send(b, "artifacts.list")), (c, send(c, "artifacts.list")),
        (d, send(d, "artifacts.list", {"since_generation": 0}))]
first = recv(a, r0)
replies = [recv(x, r) for x, r in rids]
for rep in [first] + replies:
    if "result" not in rep:
        die("coalesced list failed: %r" % rep)
lines = re.findall(r"catalog: refresh (\d+) done: (\d+) calls", log_text())
mine = [(int(n), int(k)) for n, k in lines if int(n) > base]
if mine != [(base + 1, 1), (base + 2, 3)]:
    die("expected refresh %d for 1 call and %d for 3 calls, log has %r" % (base + 1, base + 2, mine))
gens = {r["result"]["generation"] for r in replies}
if len(gens) != 1:
    die("coalesced lists got different generations: %r" % gens)
print("# 4 lists, 2 refreshes (1 + 3 coalesced)")
EOF

# 4. fetch of a small artifact (runs the offset-0 re-hash on the threadpool)
PDIR=$POLYTOKEN_HOME/profiling
mkdir -p "$PDIR"
mkprofile "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" hot_spin=30 main=1
L=$(ipc artifacts.list)
ID=$(jget "$L" "[e['id'] for e in j['result']['entries'] if e['kind']=='cpu-profile'][0]")
ipc --fetch "$ID" "$TMPDIR/got" >/dev/null || fail "fetch $ID failed"
cmp "$TMPDIR/got" "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" || fail "fetched bytes differ"
# the log is over the fetch cap: a clear error, and the daemon goes on
LID=$(jget "$L" "[e['id'] for e in j['result']['entries'] if e['kind']=='daemon-log'][0]")
R=$(ipc artifacts.fetch "{\"id\":\"$LID\"}" || true)
[ "$(jget "$R" "j['error']['code']")" = io_error ] || fail "oversized fetch: $R"
ipc daemon.status >/dev/null || fail "daemon stopped answering"
echo "ok"
