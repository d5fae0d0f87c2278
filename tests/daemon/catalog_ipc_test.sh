#!/usr/bin/env bash
# catalog_ipc_test.sh - the daemon's artifact catalog over real IPC: content
# and generation follow snapshots being written and pruned, the newest daemon
# snapshot is "CPU profile (pprof)", fetch returns exactly the file's bytes,
# path-escape attempts (.., absolute paths, extra path params, a symlink
# swapped in after listing) fail cleanly and the daemon keeps serving.
# The CLI binary is $POLYTOKEN_CLI when set (default: the build's polytoken).
set -euo pipefail
. "$(dirname "$0")/catalog_lib.sh"
B=$PT_BUILD_DEV
CLI=${POLYTOKEN_CLI:-$B/polytoken}
[ -x "$B/polytokend" ] || fail "no daemon in $B"
pt_home
start_daemon "$B"
new_active_session "$B"

list() { ipc artifacts.list "${1:-{\}}"; }
count_kind() { jget "$1" "len([e for e in j['result']['entries'] if e['kind']=='$2'])"; }
gen() { jget "$1" "j['result']['generation']"; }

L0=$(list)
G0=$(gen "$L0")
[ "$(count_kind "$L0" cpu-profile)" = 0 ] || fail "profiles listed before any was written"
[ "$(count_kind "$L0" daemon-log)" = 1 ] || fail "daemon log not listed: $L0"

mkprofile "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" hot_spin=30 main=1
L1=$(list)
G1=$(gen "$L1")
[ "$G1" -gt "$G0" ] || fail "generation did not increase ($G0 -> $G1)"
ID1=$(jget "$L1" "[e['id'] for e in j['result']['entries'] if e['label']=='CPU profile (pprof)'][0]")
P1=$(jget "$L1" "[e['path'] for e in j['result']['entries'] if e['id']=='$ID1'][0]")
[ "$P1" = profiling/daemon-profile-20261129T210000Z-1.pb.gz ] || fail "path $P1"

# fetch: byte for byte
ipc --fetch "$ID1" "$TMPDIR/got1" >/dev/null || fail "fetch $ID1 failed"
cmp "$TMPDIR/got1" "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz" || fail "fetched bytes differ"
[ "$(sha256sum <"$TMPDIR/got1" | cut -d' ' -f1)" = \
  "$(jget "$L1" "[e['sha256'] for e in j['result']['entries'] if e['id']=='$ID1'][0]")" ] ||
  fail "sha256 differs from the catalog's"

# a newer snapshot takes the label; the older keeps its time
mkprofile "$PDIR/daemon-profile-20261129T210500Z-2.pb.gz" parse_line=5 main=1
L2=$(list)
G2=$(gen "$L2")
[ "$G2" -gt "$G1" ] || fail "generation did not increase on a new snapshot"
[ "$(count_kind "$L2" cpu-profile)" = 2 ] || fail "expected 2 profiles: $L2"
NEWEST=$(jget "$L2" "[e['path'] for e in j['result']['entries'] if e['label']=='CPU profile (pprof)'][0]")
[ "$NEWEST" = profiling/daemon-profile-20261129T210500Z-2.pb.gz ] || fail "newest label on $NEWEST"
jget "$L2" "[e['label'] for e in j['result']['entries'] if e['id']=='$ID1'][0]" |
  grep -qx 'CPU profile (pprof), 2026-11-29 21:00:00 UTC' || fail "older label wrong"

# the CLI shows the same catalog
"$CLI" artifacts | grep -c 'CPU profile (pprof)$' >/dev/null || fail "polytoken artifacts misses the label"
"$CLI" artifacts --json | python3 -c 'import json,sys; j=json.load(sys.stdin); assert j["schema"]==1 and j["entries"]' ||
  fail "polytoken artifacts --json"

# pruning
rm "$PDIR/daemon-profile-20261129T210000Z-1.pb.gz"
L3=$(list)
[ "$(gen "$L3")" -gt "$G2" ] || fail "generation did not increase on prune"
[ "$(count_kind "$L3" cpu-profile)" = 1 ] || fail "pruned snapshot still listed"
R=$(ipc artifacts.fetch "{\"id\":\"$ID1\"}" || true)
[ "$(jget "$R" "j['error']['code']")" = not_found ] || fail "fetch of a pruned id: $R"

# since_generation: an up-to-date client gets changed=false and no entries
# (the daemon log may grow between two lists; then changed must be true).
G3=$(gen "$L3")
L4=$(list "{\"since_generation\":$G3}")
if [ "$(gen "$L4")" = "$G3" ]; then
  [ "$(jget "$L4" "j['result']['changed']")" = False ] || fail "changed should be false: $L4"
  [ "$(jget "$L4" "'entries' in j['result']")" = False ] || fail "entries should be omitted: $L4"
else
  [ "$(jget "$L4" "j['result']['changed']")" = True ] || fail "changed should be true: $L4"
fi

# path escapes
echo SECRET-CONTENT >"$POLYTOKEN_HOME/secret.txt"
for bad in '../secret.txt' '../../../../etc/passwd' '/etc/passwd' "$POLYTOKEN_HOME/secret.txt" ''; do
  R=$(ipc artifacts.fetch "{\"id\":\"$bad\"}" || true)
  [ "$(jget "$R" "j['error']['code']")" = not_found ] || fail "id '$bad' not refused: $R"
done
ID2=$(jget "$L3" "[e['id'] for e in j['result']['entries'] if e['label']=='CPU profile (pprof)'][0]")
R=$(ipc artifacts.fetch "{\"id\":\"$ID2\",\"path\":\"/etc/passwd\"}" || true)
[ "$(jget "$R" "j['error']['code']")" = bad_request ] || fail "path param not refused: $R"
R=$(ipc artifacts.fetch "{\"path\":\"../secret.txt\"}" || true)
[ "$(jget "$R" "j['error']['code']")" = bad_request ] || fail "path-only request not refused: $R"
# a symlink swapped in after listing, at the listed name
P2=$PDIR/daemon-profile-20261129T210500Z-2.pb.gz
mv "$P2" "$TMPDIR/real.pb.gz"
ln -s "$POLYTOKEN_HOME/secret.txt" "$P2"
R=$(ipc artifacts.fetch "{\"id\":\"$ID2\"}" || true)
[ "$(jget "$R" "j['error']['code']")" = not_found ] || fail "symlink swap not refused: $R"
case "$R" in *U0VDUkVU*|*SECRET*) fail "secret leaked: $R" ;; esac
# ... and a symlinked profiling directory holding the same file
rm "$P2"; mv "$TMPDIR/real.pb.gz" "$P2"
mv "$PDIR" "$TMPDIR/profiling.real"
ln -s "$TMPDIR/profiling.real" "$PDIR"
R=$(ipc artifacts.fetch "{\"id\":\"$ID2\"}" || true)
[ "$(jget "$R" "j['error']['code']")" = not_found ] || fail "symlinked dir not refused: $R"
rm "$PDIR"; mv "$TMPDIR/profiling.real" "$PDIR"
ipc --fetch "$ID2" "$TMPDIR/got2" >/dev/null || fail "fetch after restore failed"
cmp "$TMPDIR/got2" "$P2" || fail "bytes differ after restore"

# the daemon is still fine
ipc daemon.status >/dev/null || fail "daemon.status after the escapes"

# generation survives a restart and never goes back
GB=$(gen "$(list)")
stop_pid "$DAEMON_PID"
start_daemon "$B"
GA=$(gen "$(list)")
[ "$GA" -ge "$GB" ] || fail "generation went back across a restart ($GB -> $GA)"
echo "ok"
