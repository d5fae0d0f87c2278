#!/usr/bin/env bash
# The profiling TUI, driven in tmux: its task console serves from the start,
# the sampler does NOT run in the session picker, starts when the
# conversation screen is reached, writes tui-profile-* snapshots into the
# session's profiling/ directory beside the daemon's, and writes a final one
# after the terminal is restored on quit.
export PT_TUI_BIN=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytoken
export POLYTOKEN_DAEMON=${PT_BUILD_PROF:-$(cd "$(dirname "$0")/../.." && pwd)/build/profile}/polytokend
. "$(dirname "$0")/../tui/tui_lib.sh"
VALIDATE=$PT_BUILD_PROF/tools/ptprof-validate
export POLYTOKEN_PROFILE_INTERVAL=1 POLYTOKEN_PROFILE_HZ=999
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
tui_port=$(free_port)
export POLYTOKEN_CONSOLE_TUI_BIND=127.0.0.1:$tui_port

id=$("$PT" new --name "profiled") || fail "new"
dir=$POLYTOKEN_HOME/sessions/$id/profiling
tui_start
run_in_pane "$PT; echo EXIT=\$?"
wait_screen "Polytoken - sessions"
tpid=$(pgrep -P "$(T display -p '#{pane_pid}')" -x polytoken) || fail "no TUI process"

# In the picker: console up, no SIGPROF-driven sampling, no TUI snapshot.
wait_for 10 bash -c "source '$PT_SRC/tests/lib.sh'; listening_ports $tpid | grep -qx $tui_port" ||
  fail "TUI console not listening on $tui_port"
# A state, not the absence of files after a fixed wait: no sampler means no
# SIGPROF handler (installed by the sampler's start; checked again below,
# where it must be there).
sig_caught "$tpid" 27 && fail "the TUI's sampler runs in the picker (SIGPROF handler installed)"
ls "$dir" 2>/dev/null | grep -q '^tui-profile-' && fail "a TUI snapshot was written while in the picker"
picker_left_ns=$(date +%s%N)

# Attach: the conversation screen; turns until a periodic TUI snapshot and
# a periodic daemon snapshot of the (now active) session are both there.
# An interval in which a process sampled nothing writes no file
# (docs/profiling.md), so the test keeps both busy (999 Hz, a turn a round)
# rather than waiting on an idle TUI.
T send-keys Enter
wait_screen "profiled ($id)"
both() { ls "$dir" | grep -q '^tui-profile-.*\.pb\.gz$' && ls "$dir" | grep -q '^daemon-profile-'; }
for round in $(seq 1 15); do
  T send-keys -l "hello profiler $round"
  T send-keys Enter
  wait_for 3 both && break
done
if ! both; then
  # what the TUI showed and said, and whether it was alive and sampling
  dump_screen
  echo "---- tui.log ----" >&2; tail -20 "$POLYTOKEN_HOME/logs/tui.log" >&2 2>/dev/null
  echo "---- TUI threads (state, CPU ticks) ----" >&2
  for t in /proc/$tpid/task/*; do
    echo "$(cat "$t/comm" 2>/dev/null) $(awk '{print $3, $14, $15}' "$t/stat" 2>/dev/null)" >&2
  done
  grep -E '^(SigCgt|SigBlk|SigPnd|ShdPnd)' "/proc/$tpid/status" >&2 2>/dev/null
  fail "no periodic TUI and daemon snapshots in $dir after 15 turns: $(ls "$dir")"
fi
sig_caught "$tpid" 27 || fail "the TUI samples without a SIGPROF handler?"
first=$(ls "$dir" | grep '^tui-profile-' | sort | head -1)
python3 - "$dir/$first" "$picker_left_ns" <<'PY' || fail "TUI window starts in the picker"
import os, sys
sys.path.insert(0, os.path.join(os.environ["PT_SRC"], "tests/profiling"))
from pprof_fields import fields
f = fields(sys.argv[1])
# The first window starts when the conversation screen is reached, which
# is after we left the picker (allow 200 ms for clock reading order).
assert f["time_nanos"] >= int(sys.argv[2]) - 200_000_000, (f, sys.argv[2])
PY

# Quit: the terminal is restored, then the final snapshot is written.
newest_before=$(ls "$dir" | grep '^tui-profile-' | sort | tail -1)
T send-keys F10
wait_screen "EXIT=0"
[ "$(alt_screen)" = 0 ] || fail "terminal not restored"
wait_for 10 bash -c "! kill -0 $tpid" || fail "TUI did not exit"
newest=$(ls "$dir" | grep '^tui-profile-' | sort | tail -1)
[ "$newest" != "$newest_before" ] || fail "no final TUI snapshot after quit"
grep -q "profiling: final snapshot $dir/$newest" "$POLYTOKEN_HOME/logs/tui.log" ||
  fail "tui.log does not record the final snapshot: $(cat "$POLYTOKEN_HOME/logs/tui.log")"

# Daemon and TUI snapshots share the directory; every file is valid.
ls "$dir" | grep -q '^daemon-profile-' || fail "no daemon snapshots beside the TUI's"
for f in "$dir"/*.pb.gz; do
  "$VALIDATE" "$f" || fail "ptprof-validate rejects $f"
  go tool pprof -symbolize=none -nodefraction=0 -top "$f" >/dev/null 2>&1 || fail "pprof rejects $f"
done
go tool pprof -symbolize=none -nodefraction=0 -tagfocus=thread_name=polytoken -top "$dir"/tui-profile-*.pb.gz | head -20
echo ok
