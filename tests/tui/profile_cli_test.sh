#!/usr/bin/env bash
# `polytoken profile` (profiling build) with real clients:
#  - arguments are strict: unknown options, missing values and arguments
#    too many are exit 2 with one exact line ending in the usage; --help of
#    the group and of each command exits 0;
#  - `profile dump` with no daemon fails (exit 1, one line) and starts
#    none: no process, no socket; with one, it prints the absolute path of
#    a valid snapshot;
#  - `profile list --json`: every snapshot with its absolute path, window
#    and sample count (the count go tool pprof sees), and the coverage its
#    "process CPU" comment states (as go reads the comment); a snapshot
#    without that comment shows "-";
#  - `profile merge`: go tool pprof reads the merged file, and its -top and
#    -tags are exactly those of go tool pprof merging the same files
#    itself; its comments name each window and sum the windows' threads'
#    CPU lines into one (each name's CPU and samples); --session merges a session's
#    snapshots; profiles of other sample types are refused;
#  - thread names: the daemon's threads are named (>= 3 distinct names in
#    /proc: the loop, the pool, the console) and every thread_name in its
#    snapshots is one of them.
: "${PT_SRC:=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
: "${PT_BUILD_PROF:=$PT_SRC/build/profile}"
[ -x "$PT_BUILD_PROF/polytoken" ] || { echo "no profiling build at $PT_BUILD_PROF"; exit 77; }
PT_TUI_BIN=$PT_BUILD_PROF/polytoken
. "$(dirname "$0")/tui_lib.sh"
command -v go >/dev/null || skip "go (golang-go) not installed"
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port) POLYTOKEN_PROFILE_HZ=999
export POLYTOKEN_RESPONDER_DELAY_MS=0

"$PT" --version | grep -q "(profiling build)" || fail "not a profiling build: $("$PT" --version)"

# usage_error WANT ARGS...: exit 2, nothing on stdout, exactly WANT on stderr.
usage_error() {
  local want=$1 out rc; shift
  out=$("$PT" "$@" 2>"$TMPDIR/err"); rc=$?
  [ $rc -eq 2 ] || fail "polytoken $*: exit $rc, not 2"
  [ -z "$out" ] || fail "polytoken $*: stdout: $out"
  [ "$(cat "$TMPDIR/err")" = "$want" ] || fail "polytoken $*: stderr '$(cat "$TMPDIR/err")', not '$want'"
}
U_DUMP="(usage: polytoken profile dump)"
U_LIST="(usage: polytoken profile list [--session ID | --all] [--json])"
U_MERGE="(usage: polytoken profile merge FILE... -o OUT | merge --session ID [--process P] -o OUT)"
U_VIEW="(usage: polytoken profile view FILE | --session ID [--process P] [-o OUT.html] [--base FILE] [--sample-type T])"
usage_error "polytoken: profile dump: takes no argument ('junk') $U_DUMP" profile dump junk
usage_error "polytoken: profile dump: unknown option '--out' $U_DUMP" profile dump --out X
usage_error "polytoken: profile list: unknown option '--bogus' $U_LIST" profile list --bogus
usage_error "polytoken: profile list: --session needs a value $U_LIST" profile list --session
usage_error "polytoken: profile list: --session and --all exclude each other $U_LIST" profile list --session x --all
usage_error "polytoken: profile list: --json is given twice $U_LIST" profile list --json --json
usage_error "polytoken: profile merge: -o OUT is required $U_MERGE" profile merge a.pb.gz
usage_error "polytoken: profile merge: no profile to merge $U_MERGE" profile merge -o x.pb.gz
usage_error "polytoken: profile merge: give FILE... or --session ID, not both $U_MERGE" profile merge --session x a.pb.gz -o y
usage_error "polytoken: profile merge: --process 'x': expected daemon, tui or all $U_MERGE" profile merge --session s --process x -o y
usage_error "polytoken: profile view: unexpected argument 'b.pb.gz' $U_VIEW" profile view a.pb.gz b.pb.gz
usage_error "polytoken: profile view: no profile to view $U_VIEW" profile view
usage_error "polytoken: profile: unknown command 'frob' (expected list, dump, merge or view; see polytoken profile --help)" profile frob
"$PT" profile >/dev/null; [ $? -eq 2 ] || fail "profile alone: not exit 2"
"$PT" profile --help | head -1 | grep -qx "usage: polytoken profile COMMAND \[ARGS\]" || fail "profile --help"
for sub in list dump merge view; do
  "$PT" profile $sub --help | head -1 | grep -q "^usage: polytoken profile $sub" || fail "profile $sub --help"
done

# No daemon: dump fails and starts none.
out=$("$PT" profile dump 2>"$TMPDIR/err"); rc=$?
[ $rc -eq 1 ] && [ -z "$out" ] || fail "dump without a daemon: exit $rc, stdout '$out'"
[ "$(cat "$TMPDIR/err")" = "polytoken: no daemon is running (start one with \`polytoken daemon start\`, from the profiling build: just run-cli); nothing was dumped" ] ||
  fail "dump without a daemon said: $(cat "$TMPDIR/err")"
[ ! -e "$POLYTOKEN_HOME/daemon.sock" ] || fail "dump created a daemon socket"
pgrep -f "polytokend --home $POLYTOKEN_HOME" >/dev/null && fail "dump started a daemon"
"$PT" daemon status >/dev/null; [ $? -eq 3 ] || fail "a daemon runs after dump"
"$PT" profile list >"$TMPDIR/list0" || fail "list with nothing"
grep -qxF "no session is active: $POLYTOKEN_HOME/profiling (where the daemon writes while no session is attached)" "$TMPDIR/list0" &&
  grep -qx "  no snapshots" "$TMPDIR/list0" || fail "empty list: $(cat "$TMPDIR/list0")"

# A profiling daemon; three windows with turns in them.
"$PT" daemon start >/dev/null || fail "daemon start"
id=$("$PT" new) || fail "new"
text=$(python3 -c 'print(" ".join("w%d" % (i % 700) for i in range(20000)))')
files=()
for k in 1 2 3; do
  "$PT" send --session "$id" "$text $k" >/dev/null || fail "send $k"
  p=$("$PT" profile dump) || fail "dump $k"
  case $p in "$POLYTOKEN_HOME/profiling/daemon-profile-"*.pb.gz) ;; *) fail "dump printed '$p'" ;; esac
  [ -s "$p" ] && gzip -t "$p" || fail "dump $k: not a gzip file: $p"
  files+=("$p")
done

# Thread names: the daemon's, and those in its snapshots.
pid=$(daemon_pid)
names=$(cat /proc/"$pid"/task/*/comm | sort -u)
note "daemon threads: $(echo $names)"
for n in polytokend pd-writer ptcon-server ptprof-consumer pd-pool; do
  printf '%s\n' "$names" | grep -qx "$n" || fail "no thread named $n in the daemon: $(echo $names)"
done
# Every job is over (each send and dump returned after its job ended): a
# pool thread carries a job's name only while the job runs, so libuv's work
# between jobs is never put under the snapshot writer (or the responder).
for n in pd-snapshot pd-responder pd-catalog; do
  printf '%s\n' "$names" | grep -qx "$n" && fail "an idle pool thread is still named $n: $(echo $names)"
done
go tool pprof -sample_index=samples -tags "${files[@]}" 2>/dev/null >"$TMPDIR/tags"
python3 - "$TMPDIR/tags" "$names" <<'PY' || fail "thread names in the snapshots"
import os, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/prof")
import pprof_tags
seen = set(pprof_tags.tags(open(sys.argv[1]).read()).get("thread_name", {}))
print("thread_name values:", sorted(seen))
# Names as the threads had them when sampled: the loop, and the pool thread
# that built the responder's model for the long turns above; possibly the
# store's writer (session.json), the console and libuv's pool between jobs
# (the snapshot writer's CPU is the profiler's own: never a sample).
known = {"polytokend", "pd-responder", "pd-catalog", "pd-writer", "ptcon-server", "pd-pool"}
assert {"polytokend", "pd-responder"} <= seen <= known, seen
PY

# list --json: the three windows, absolute paths, go's sample counts.
"$PT" profile list --json >"$TMPDIR/list.json" || fail "list --json"
for f in "${files[@]}"; do
  n=$(go tool pprof -sample_index=samples -top -nodefraction=0 "$f" 2>/dev/null |
      sed -n 's/^Showing nodes accounting for .* of \([0-9]*\) total$/\1/p')
  [ -n "$n" ] || n=0 # an empty window: go prints no total
  go tool pprof -comments "$f" >"$TMPDIR/comments.txt" 2>/dev/null || fail "go tool pprof -comments $f"
  python3 - "$TMPDIR/list.json" "$f" "$n" "$POLYTOKEN_HOME" "$TMPDIR/comments.txt" <<'PY' || fail "list --json for $f"
import json, sys
d = json.load(open(sys.argv[1]))
assert d["home"] == sys.argv[4], d["home"]
snaps = [s for l in d["lists"] for s in l["snapshots"]]
s = [s for s in snaps if s["path"] == sys.argv[2]]
assert len(s) == 1, (sys.argv[2], snaps)
s = s[0]
assert s["process"] == "daemon" and s["path"].startswith("/"), s
assert s["samples"] == int(sys.argv[3]), (s, sys.argv[3])
assert s["time_nanos"] > 0 and s["duration_nanos"] > 0 and s["engine"], s
# coverage: what the snapshot's own "process CPU" comment says, as go reads it
import re
line = [l for l in open(sys.argv[5]) if l.startswith("process CPU since ")]
assert len(line) == 1, line
m = re.search(r"the program's ([0-9.]+) ms: [0-9.]+ ms in the samples above \(pseudo-frames included, ([0-9]+) %\)", line[0])
assert m, line[0]
assert s["coverage_pct"] == int(m.group(2)), (s, line[0])
assert abs(s["program_cpu_nanos"] - float(m.group(1)) * 1e6) <= 1e5, (s, line[0])
PY
done
"$PT" profile list | grep -c '^daemon ' | grep -qx 3 || fail "list: not three rows: $("$PT" profile list)"

# merge: what go tool pprof makes of the three files, in one file.
out=$("$PT" profile merge "${files[@]}" -o "$TMPDIR/m.pb.gz" 2>"$TMPDIR/err") || fail "merge: $(cat "$TMPDIR/err")"
[ "$out" = "$TMPDIR/m.pb.gz" ] || fail "merge printed '$out'"
top() { go tool pprof -top -nodefraction=0 -sample_index="$1" "${@:2}" 2>/dev/null | sed -n '/^Showing nodes/,$p'; }
for si in samples cpu; do
  top $si "$TMPDIR/m.pb.gz" >"$TMPDIR/ours"
  top $si "${files[@]}" >"$TMPDIR/gos"
  [ -s "$TMPDIR/ours" ] || fail "go tool pprof -top of the merged file is empty"
  diff "$TMPDIR/ours" "$TMPDIR/gos" >&2 || fail "-top -sample_index=$si of the merged file differs from go's own merge"
done
go tool pprof -sample_index=samples -tags "$TMPDIR/m.pb.gz" 2>/dev/null | diff - "$TMPDIR/tags" >&2 || fail "-tags of the merged file differs"
grep -q ' thread_name: Total' "$TMPDIR/tags" && grep -q ' task_kind: Total' "$TMPDIR/tags" || fail "labels missing: $(cat "$TMPDIR/tags")"
go tool pprof -comments "$TMPDIR/m.pb.gz" 2>/dev/null >"$TMPDIR/comments"
for i in 1 2 3; do
  b=$(basename "${files[$((i - 1))]}")
  grep -q "^merged window $i of 3: $b, start 20[0-9-]*T[0-9:.]*Z, length [0-9.]* s, [0-9]* samples\?$" "$TMPDIR/comments" ||
    fail "no comment for window $i ($b): $(cat "$TMPDIR/comments")"
done
[ "$(grep -c '^sampler engine: ' "$TMPDIR/comments")" -ge 1 ] || fail "inputs' comments not kept"
# the windows' threads' CPU lines, summed into one: each name's CPU and
# samples are the sums of the three windows' lines
python3 - "$TMPDIR/comments" <<'PY' || fail "the merged threads' CPU line"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
merged = [l for l in lines if l.startswith("threads' CPU over the 3 windows merged")]
wins = [l for l in lines if l.startswith("threads' CPU since")]
assert len(merged) == 1 and len(wins) == 3, (merged, wins)
ent = re.compile(r"[:,] (\S+) ([0-9]+\.[0-9]) ms \((?:[0-9]+ threads, )?([0-9]+) samples?")
want = {}
for w in wins:
    for name, ms, smp in ent.findall(w.split("; a name with")[0]):
        c, s = want.get(name, (0, 0))
        want[name] = (c + round(float(ms) * 10), s + int(smp))
got = {name: (round(float(ms) * 10), int(smp)) for name, ms, smp in ent.findall(merged[0])}
assert got == want, (got, want)
print("merged threads' CPU:", merged[0].split("samples:", 1)[1])
PY

# merge --session: the session's snapshots (copied there: the CLI's turns
# do not attach a session, so the daemon wrote to the state root's).
mkdir -p "$POLYTOKEN_HOME/sessions/$id/profiling"
cp "${files[@]}" "$POLYTOKEN_HOME/sessions/$id/profiling/"
"$PT" profile merge --session "$id" -o "$TMPDIR/s.pb.gz" >/dev/null 2>&1 || fail "merge --session"
top samples "$TMPDIR/s.pb.gz" | diff - <(top samples "$TMPDIR/m.pb.gz") >&2 || fail "merge --session differs from merging the files"
"$PT" profile list --session "$id" | grep -c '^daemon ' | grep -qx 3 || fail "list --session"
# list: oldest window first, whatever the file names say (a name is the
# time the file was written, the window's end; a TUI's long window written
# after a daemon's short one started before it), a damaged file last.
o=$POLYTOKEN_HOME/sessions/order/profiling
mkdir -p "$o"
python3 "$PT_SRC/tests/mkprofile.py" "$o/daemon-profile-20261129T210100Z-000002.pb.gz" --time-s 1796000050 --duration-ms 10000 hot=1
python3 "$PT_SRC/tests/mkprofile.py" "$o/tui-profile-20261129T210200Z-000001.pb.gz" --time-s 1796000000 --duration-ms 120000 hot=1
python3 "$PT_SRC/tests/mkprofile.py" "$o/daemon-profile-20261129T210300Z-000003.pb.gz" --time-s 1796000060 --duration-ms 120000 hot=1
echo junk >"$o/daemon-profile-20261129T205900Z-000001.pb.gz"
"$PT" profile list --session order >"$TMPDIR/order" || fail "list --session order"
got=$(awk 'NR > 2 { print $NF == "read:" ? "x" : $0 }' "$TMPDIR/order" | grep -o 'profile-[0-9TZ]*-[0-9]*' | tr '\n' ' ')
[ "$got" = "profile-20261129T210200Z-000001 profile-20261129T210100Z-000002 profile-20261129T210300Z-000003 profile-20261129T205900Z-000001 " ] ||
  fail "list order: $got ($(cat "$TMPDIR/order"))"
tail -n 1 "$TMPDIR/order" | grep -q "(cannot read: " || fail "the damaged file is not last: $(cat "$TMPDIR/order")"
# snapshots without the coverage comment (other writers, older versions): "-"
awk 'NR > 2 && !/cannot read/ { print $9 }' "$TMPDIR/order" | sort -u | grep -qx -- '-' ||
  fail "no '-' coverage for snapshots without the comment: $(cat "$TMPDIR/order")"
out=$("$PT" profile merge --session 000000000000 -o "$TMPDIR/x.pb.gz" 2>&1); [ $? -eq 1 ] || fail "merge of an unknown session"
[ "$out" = "polytoken: no session 000000000000 in $POLYTOKEN_HOME/sessions (see polytoken sessions)" ] || fail "unknown session: $out"

# Other sample types: refused, nothing written.
python3 "$PT_SRC/tests/mkprofile.py" "$TMPDIR/wall.pb.gz" --sample-type wall/nanoseconds hot=3
out=$("$PT" profile merge "${files[0]}" "$TMPDIR/wall.pb.gz" -o "$TMPDIR/bad.pb.gz" 2>&1); rc=$?
[ $rc -eq 1 ] || fail "merging other sample types: exit $rc"
[ "$out" = "polytoken: cannot merge $TMPDIR/wall.pb.gz: different sample types: samples/count,wall/nanoseconds, not samples/count,cpu/nanoseconds as in the first profile" ] ||
  fail "other sample types: $out"
[ ! -e "$TMPDIR/bad.pb.gz" ] || fail "a refused merge wrote a file"
# view: the flame graph page (common/pt_flame.h).
"$PT" profile view "${files[0]}" -o "$TMPDIR/v.html" >"$TMPDIR/vout" 2>"$TMPDIR/verr" ||
  fail "view failed: $(cat "$TMPDIR/verr")"
[ "$(cat "$TMPDIR/vout")" = "$TMPDIR/v.html" ] || fail "view printed '$(cat "$TMPDIR/vout")'"
grep -qi '<html' "$TMPDIR/v.html" || fail "view wrote no page"
out=$("$PT" profile view --session "$id" --base "${files[0]}") || fail "view --session --base"
[ "$out" = "$POLYTOKEN_HOME/sessions/$id/profiling/session-daemon.html" ] || fail "view --session wrote '$out'"
grep -qF "session $id, daemon: 3 snapshots merged" "$out" || fail "the session page has no title"
cp "${files[1]}" "$TMPDIR/one.pb.gz"
out=$(cd "$TMPDIR" && "$PT" profile view one.pb.gz) || fail "view with the default output"
[ "$out" = "$TMPDIR/one.html" ] && [ -s "$TMPDIR/one.html" ] || fail "view's default output: '$out'"
echo ok
