#!/usr/bin/env bash
# The profiling daemon end to end: periodic daemon-profile-* snapshots in the
# active session's profiling/ directory while it works, none for idle
# intervals, retention, `polytoken profile dump`,
# contiguous interval windows, the daemon's own work visible in the profile,
# and the final snapshot written at shutdown before telemetry and the log
# close. Every snapshot is read back by go tool pprof and ptprof-validate.
source "$(dirname "$0")/../lib.sh"
B=$PT_BUILD_PROF
VALIDATE=$B/tools/ptprof-validate
pt_home
export POLYTOKEN_PROFILE_INTERVAL=1 POLYTOKEN_PROFILE_KEEP=3 POLYTOKEN_RESPONDER_DELAY_MS=1
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
start_daemon "$B"

# A session, attached (so it is the active session), with CPU-heavy turns.
sid=$(python3 - "$POLYTOKEN_HOME" <<'PY'
import os, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/daemon")
from ipc_client import Client
c = Client(sys.argv[1]); c.hello()
sid = c.ok("sessions.create", {"name": "prof"})["session"]["id"]
c.ok("sessions.attach", {"id": sid})
print(sid)
PY
) || fail "driving the daemon failed"
dir=$POLYTOKEN_HOME/sessions/$sid/profiling

# Load: CPU-heavy turns one after another until $TMPDIR/load.stop exists.
# An interval in which nothing was sampled writes no file (below), so the
# periodic snapshots are watched while the daemon works.
load() {
  python3 - "$POLYTOKEN_HOME" "$sid" "$TMPDIR/load.stop" <<'PY'
import os, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/daemon")
from ipc_client import Client
c = Client(sys.argv[1]); c.hello()
text = "the quick brown fox jumps over the lazy dog " * 200
i = 0
while not os.path.exists(sys.argv[3]):
    t = c.ok("turn.send", {"session": sys.argv[2], "text": text + str(i)})["turn_id"]
    c.wait_turn(sys.argv[2], t, timeout=120)
    i += 1
PY
}
load &
load_pid=$!
PT_PIDS+=("$load_pid")

# Periodic snapshots arrive every second; retention keeps 3.
wait_for 30 bash -c "[ \$(ls '$dir' 2>/dev/null | grep -c '^daemon-profile-.*\.pb\.gz$') -ge 3 ]" ||
  fail "fewer than 3 periodic snapshots in $dir: $(ls "$dir")"
# Two more periodic snapshots (a readiness marker, not a fixed wait): dumps
# are serialized, so the first one's pruning is done when the second
# appears, and with keep 3 it removed the oldest snapshot seen before.
snaps() { ls "$dir" | grep '^daemon-profile-.*\.pb\.gz$' | sort; }
before=$(snaps)
oldest=$(ls -tr "$dir" | grep '^daemon-profile-.*\.pb\.gz$' | head -1)
two_new() { [ "$(comm -13 <(echo "$before") <(snaps) | wc -l)" -ge 2 ]; }
wait_for 60 two_new || fail "no further periodic snapshots in $dir: $(ls "$dir")"
[ ! -e "$dir/$oldest" ] || fail "retention: the oldest snapshot $oldest is still there: $(ls "$dir")"
# Outside a dump's instant between its rename and its pruning, at most 3.
le3() { [ "$(snaps | wc -l)" -le 3 ]; }
wait_for 10 le3 || fail "retention: $(snaps | wc -l) daemon snapshots kept, want <= 3"
ls -a "$dir" | grep -q '\.tmp' && fail "temp file left visible in $dir"

# Idle: an interval in which nothing was sampled writes no file, so the
# snapshots with samples stay among the kept ones. Four intervals of an
# idle daemon (its last turn over) add at most one snapshot (the interval
# that held the last turn's tail); without the rule they added four.
touch "$TMPDIR/load.stop"
wait "$load_pid" || fail "the load driver failed"
sleep 1.2
idle_before=$(snaps)
sleep 4.2
new_idle=$(comm -13 <(echo "$idle_before") <(snaps) | wc -l)
note "idle: $new_idle periodic snapshots in 4.2 s"
[ "$new_idle" -le 1 ] || fail "an idle daemon wrote $new_idle periodic snapshots in 4.2 s: $(snaps)"

# A manual dump lands in the same directory and names itself.
path=$("$B/polytoken" profile dump) || fail "polytoken profile dump failed"
[[ "$path" == "$dir/daemon-profile-"*.pb.gz ]] || fail "dump path $path not in $dir"
[ -s "$path" ] || fail "dump $path is empty"

# Validate every snapshot, with our validator and go tool pprof.
for f in "$dir"/daemon-profile-*.pb.gz; do
  "$VALIDATE" "$f" || fail "ptprof-validate rejects $f"
  go tool pprof -symbolize=none -nodefraction=0 -top "$f" >/dev/null 2>&1 ||
    fail "go tool pprof rejects $f"
done

# Stop: the final snapshot is logged before telemetry and the log close.
"$B/polytoken" daemon stop >/dev/null || fail "daemon stop failed"
wait_for 30 bash -c "! kill -0 $DAEMON_PID" || fail "daemon did not exit"
log=$POLYTOKEN_HOME/logs/daemon.log
final_line=$(grep -n 'profiling: final snapshot ' "$log" | head -1 | cut -d: -f1)
[ -n "$final_line" ] || { tail -20 "$log"; fail "no final snapshot in the log"; }
final=$(grep -o 'profiling: final snapshot .*' "$log" | head -1 | sed 's/profiling: final snapshot //')
[ -f "$final" ] || fail "final snapshot $final missing"
"$VALIDATE" "$final" || fail "final snapshot invalid"
tel_line=$(grep -n -i 'shutdown: .*telemetry' "$log" | head -1 | cut -d: -f1)
log_line=$(grep -n -i 'shutdown: .*log' "$log" | tail -1 | cut -d: -f1)
[ -n "$tel_line" ] && [ -n "$log_line" ] || { tail -30 "$log"; fail "shutdown steps not logged"; }
[ "$final_line" -lt "$tel_line" ] || fail "final snapshot (line $final_line) after telemetry close (line $tel_line)"
[ "$final_line" -lt "$log_line" ] || fail "final snapshot after log close"

# Windows are contiguous intervals: each starts where the previous ended plus
# the blind period (never overlapping, never rolled over), and the daemon's
# own CPU work (the built-in responder) shows up in them.
python3 - "$dir" "$(grep -c 'profiling: wrote' "$log")" <<'PY' || fail "window check failed"
import glob, os, subprocess, sys
sys.path.insert(0, os.path.join(os.environ["PT_SRC"], "tests/profiling"))
from pprof_fields import fields
d = sys.argv[1]
wins = sorted((fields(f)["time_nanos"], fields(f)["duration_nanos"], f)
              for f in glob.glob(os.path.join(d, "daemon-profile-*.pb.gz")))
assert len(wins) >= 3, wins
for (t0, d0, f0), (t1, d1, f1) in zip(wins, wins[1:]):
    assert d0 > 0 and d1 > 0
    gap = t1 - (t0 + d0)
    # The next window starts after this one ends: the gap is the blind
    # period of the dump in between (encode + write), never negative.
    assert 0 <= gap < 5_000_000_000, (f0, f1, gap)
PY

# The daemon's own work shows up: restart without periodic dumps (the active
# session is kept across restarts), run CPU-heavy turns, dump by hand; the
# built-in responder's functions carry samples in that window.
export POLYTOKEN_PROFILE_INTERVAL=3600 POLYTOKEN_PROFILE_HZ=999
start_daemon "$B"
python3 - "$POLYTOKEN_HOME" "$sid" <<'PY' || fail "turns after restart failed"
import os, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/daemon")
from ipc_client import Client
c = Client(sys.argv[1]); c.hello()
sid = sys.argv[2]
text = "a profiler samples the stack of every thread at a fixed rate " * 400
for i in range(8):
    t = c.ok("turn.send", {"session": sid, "text": text + str(i)})["turn_id"]
    c.wait_turn(sid, t, timeout=120)
PY
path=$("$B/polytoken" profile dump) || fail "second manual dump failed"
[[ "$path" == "$dir/"* ]] || fail "after restart the dump went to $path, not the active session"
top=$(go tool pprof -symbolize=none -nodefraction=0 -top "$path" 2>&1)
echo "$top" | head -25
echo "$top" | grep -Eq ' pd_[a-z_]+' || fail "no daemon function (pd_*) in the profile of a busy daemon"
echo "$top" | grep -Eq 'Total samples = [1-9]' || fail "no samples while the daemon worked"

# Deleting the active session sends later snapshots back to the state
# root's profiling/ directory (never to a path built from a missing session).
python3 - "$POLYTOKEN_HOME" "$sid" <<'PY' || fail "deleting the session failed"
import os, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/daemon")
from ipc_client import Client
c = Client(sys.argv[1]); c.hello()
c.ok("sessions.delete", {"id": sys.argv[2]})
PY
path=$("$B/polytoken" profile dump) || fail "dump after deleting the active session failed"
[[ "$path" == "$POLYTOKEN_HOME/profiling/daemon-profile-"*.pb.gz ]] ||
  fail "after deleting the active session the dump went to $path"
"$VALIDATE" "$path" || fail "fallback snapshot invalid"
echo ok
