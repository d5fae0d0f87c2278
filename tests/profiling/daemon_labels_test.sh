#!/usr/bin/env bash
# daemon_labels_test.sh - task and session labels in a real daemon snapshot:
# a profiling polytokend (999 Hz, built-in responder), a session created and
# three long turns sent with the CLI (`polytoken new`, `polytoken send`),
# then `polytoken profile dump`; read with `go tool pprof -tags`. Asserts:
#   - every task_kind value is a task name the daemon spawns (pd_*.c), and
#     the model job (responder.builtin.model) is among them;
#   - task_loc values are src/daemon/*.c:LINE and task values numbers;
#   - the session label is the session's id, and its samples are the
#     session's work (responder.builtin.model or turn);
#   - with -tagfocus=task_kind=responder.builtin.model the hot functions are
#     the model builder's (pd_ngram.c), not the IPC's.
# Skips (77) only without go.
source "$(dirname "$0")/../lib.sh"
B=$PT_BUILD_PROF
[ -x "$B/polytokend" ] || fail "no profiling build at $B"
command -v go >/dev/null || skip "go (golang-go) not installed"
pt_home
export POLYTOKEN_PROFILE_HZ=999 POLYTOKEN_RESPONDER_DELAY_MS=1
export POLYTOKEN_CONSOLE_DAEMON_BIND=127.0.0.1:$(free_port)
start_daemon "$B"
sid=$("$B/polytoken" new --name labels) || fail "polytoken new"
text=$(python3 -c 'import random; random.seed(7); w="alpha beta gamma delta fox dog quick lazy brown jumps".split(); print(" ".join(random.choice(w) + str(random.randrange(400)) for _ in range(12000)))')
for i in 1 2 3; do
  "$B/polytoken" send --session "$sid" "$text $i" >/dev/null || fail "polytoken send $i"
done
dump=$("$B/polytoken" profile dump) || fail "polytoken profile dump"
[ -s "$dump" ] || fail "no dump at $dump"
PP=(go tool pprof -sample_index=samples)
"${PP[@]}" -tags "$dump" >"$TMPDIR/tags.txt" 2>&1 || { cat "$TMPDIR/tags.txt" >&2; fail "pprof -tags"; }
"${PP[@]}" -tagfocus=session="$sid" -tags "$dump" >"$TMPDIR/tags_s.txt" 2>&1 || fail "pprof -tagfocus=session"
"${PP[@]}" -tagfocus=task_kind=responder.builtin.model -top -nodefraction=0 "$dump" >"$TMPDIR/top_m.txt" 2>&1 ||
  fail "pprof -tagfocus=task_kind"
names=$(grep -ho 'PD_TASK_START([^,]*, "[^"]*")\|pt_task_spawn([^,]*, "[^"]*"' "$PT_SRC"/src/daemon/*.c |
  sed 's/.*"\([^"]*\)".*/\1/' | sort -u | tr '\n' ' ')
python3 - "$TMPDIR" "$sid" "$names" <<'PY' || fail "see above"
import os, re, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/prof")
import pprof_tags
work, sid, names = sys.argv[1], sys.argv[2], set(sys.argv[3].split())
def tags(n): return pprof_tags.tags(open(f"{work}/{n}.txt").read())
bad = []
def check(c, msg):
    print(("ok   " if c else "FAIL ") + msg)
    if not c: bad.append(msg)
t = tags("tags")
kinds = t.get("task_kind", {})
check(kinds and set(kinds) <= names, f"task_kind {sorted(kinds)} are daemon task names")
check("responder.builtin.model" in kinds, "the model job's CPU is labelled")
check(all(re.fullmatch(r"src/daemon/[a-z_]+\.c:\d+", l) for l in t.get("task_loc", {})) and t.get("task_loc"),
      f"task_loc {sorted(t.get('task_loc', {}))}")
check(all(v.isdigit() for v in t.get("task", {})) and sum(t.get("task", {}).values()) == sum(kinds.values()),
      "task numbers label the same samples as task_kind")
check(set(t.get("session", {})) == {sid}, f"session label {t.get('session')} is {sid}")
ts = tags("tags_s")
check(set(ts.get("task_kind", {})) <= {"responder.builtin.model", "turn"},
      f"session samples are the session's work: {ts.get('task_kind')}")
top = open(f"{work}/top_m.txt").read()
check("ctx_add" in top or "pd_ngram" in top or "intern" in top, "model job's stacks are the n-gram builder's")
sys.exit(1 if bad else 0)
PY
"$B/polytoken" daemon stop >/dev/null || fail "daemon stop"
