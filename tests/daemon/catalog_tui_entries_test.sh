#!/usr/bin/env bash
# catalog_tui_entries_test.sh - TUI profile snapshots enter the catalog only
# when the serving daemon is a profiling build: listed by the profiling
# daemon (labelled "TUI CPU profile (pprof)"), absent from a normal daemon on
# the same state root, and back after restarting with the profiling build
# (the brief's "restart the daemon with the profiling build, then reopen the
# attachment picker").
set -euo pipefail
. "$(dirname "$0")/catalog_lib.sh"
[ -x "$PT_BUILD_DEV/polytokend" ] || fail "no normal daemon in $PT_BUILD_DEV"
[ -x "$PT_BUILD_PROF/polytokend" ] || skip "no profiling build in $PT_BUILD_PROF"
pt_home

tui_entries() { jget "$(ipc artifacts.list)" "len([e for e in j['result']['entries'] if e['kind']=='tui-cpu-profile'])"; }
tui_label() { jget "$(ipc artifacts.list)" "[e['label'] for e in j['result']['entries'] if e['kind']=='tui-cpu-profile' and e['source']=='tui'][0]"; }
is_profiling() { jget "$(ipc daemon.status)" "j['result']['profiling']"; }

start_daemon "$PT_BUILD_DEV"
new_active_session "$PT_BUILD_DEV"
[ "$(is_profiling)" = False ] || fail "dev daemon claims profiling"
mkprofile "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" hot_spin=3 main=1
mkprofile "$PDIR/tui-profile-20261129T210100Z-1.pb.gz" tui_render=4 main=1
[ "$(tui_entries)" = 0 ] || fail "a normal daemon listed TUI snapshots"
jget "$(ipc artifacts.list)" "[e['label'] for e in j['result']['entries']]" | grep -c "'CPU profile (pprof)'" >/dev/null ||
  fail "daemon snapshot missing from the normal daemon's catalog"
stop_pid "$DAEMON_PID"

start_daemon "$PT_BUILD_PROF"
[ "$(is_profiling)" = True ] || fail "profiling daemon does not say so"
[ "$(tui_entries)" = 1 ] || fail "the profiling daemon does not list the TUI snapshot"
[ "$(tui_label)" = "TUI CPU profile (pprof)" ] || fail "TUI label: $(tui_label)"
ID=$(jget "$(ipc artifacts.list)" "[e['id'] for e in j['result']['entries'] if e['kind']=='tui-cpu-profile'][0]")
ipc --fetch "$ID" "$TMPDIR/tui.pb.gz" >/dev/null || fail "fetch of the TUI snapshot"
cmp "$TMPDIR/tui.pb.gz" "$PDIR/tui-profile-20261129T210100Z-1.pb.gz" || fail "TUI snapshot bytes differ"
# A real snapshot from the profiling daemon becomes "CPU profile (pprof)",
# and the review text decodes it.
DUMP=$("$PT_BUILD_PROF/polytoken" profile dump) || fail "profile dump failed"
NEWEST=$(jget "$(ipc artifacts.list)" "[e['path'] for e in j['result']['entries'] if e['label']=='CPU profile (pprof)'][0]")
[ "$NEWEST" = "profiling/$(basename "$DUMP")" ] || fail "newest label on $NEWEST, dumped $DUMP"
"$PT_BUILD_PROF/polytoken" feedback show cpu-profile >"$TMPDIR/show" || fail "feedback show failed"
grep -q '^  samples: [0-9]' "$TMPDIR/show" && grep -q '^  duration: [0-9]' "$TMPDIR/show" &&
  grep -q 'raw and unsanitized' "$TMPDIR/show" || { cat "$TMPDIR/show" >&2; fail "review text of a real snapshot"; }
stop_pid "$DAEMON_PID"

# Back to a normal daemon: gone again.
start_daemon "$PT_BUILD_DEV"
[ "$(tui_entries)" = 0 ] || fail "TUI snapshots listed again by a normal daemon"
echo ok
