#!/usr/bin/env bash
# labels_agree_test.sh - CPU per task: the sampler's task labels against the
# task console's busy time, on tests/prof/labels_work (two console tasks,
# A burning 4 ms of CPU per poll, B 2 ms, 1 ms outside any poll; sampler and
# console in one process). Read with the real clients: `go tool pprof`
# (-tags, -tagfocus, -tagroot, -focus, -tagignore) on the snapshot, and the real gRPC
# client tests/console/console_client.js (busy mode) on the console.
# Asserts:
#   - the snapshot's task labels name the console's tasks: task = the
#     console's task.id, task_kind = task.name, task_loc = spawn file:line;
#     -tagfocus=task=<A's id> keeps only A's samples and stacks (burn_a);
#     -tagroot=task_kind makes labels.A and labels.B root frames holding
#     exactly their samples;
#   - every sample under burn_a carries task_kind labels.A (and B's under
#     burn_b); no sample under burn_outside carries a task label; the user
#     label phase=hot is on burn_a_hot's samples only;
#   - agreement: A's share of the task samples, n_A / (n_A + n_B), is within
#     4 binomial standard deviations, sqrt(r (1 - r) / (n_A + n_B)), of the
#     console's busy share r = busy_A / (busy_A + busy_B), and of the CPU
#     share the program measured itself (about 2/3);
#   - no invented CPU: n_A periods are not more than A's busy time plus 4
#     standard deviations of the count (sqrt(n_A) periods), same for B.
# No wall-clock limit is asserted. Skips (77) only without go or node/npm.
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
# shellcheck source=../console/console_lib.sh
source "$PT_SRC/tests/console/console_lib.sh"
prof_require labels_work
console_npm
prof_workdir labels-agree

ROUNDS=300
env LW_DIR="$WORK/snap" LW_PORTFILE="$WORK/port" LW_DONE="$WORK/done.json" LW_ROUNDS=$ROUNDS \
  LW_HZ=499 "$PROG" >"$WORK/out.txt" 2>&1 &
PIDS+=($!)
wait_for 300 test -s "$WORK/port" || { cat "$WORK/out.txt" >&2; fail "labels_work did not finish its workload"; }
kill -0 "${PIDS[0]}" 2>/dev/null || { cat "$WORK/out.txt" >&2; fail "labels_work died"; }
ADDR="127.0.0.1:$(cat "$WORK/port")"
cat "$WORK/done.json"
SNAP=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["snapshot"])' "$WORK/done.json")
[ -s "$SNAP" ] || fail "no snapshot at $SNAP"

node "$CONSOLE_DIR/console_client.js" busy "$ADDR" "labels.A=$ROUNDS" "labels.B=$ROUNDS" \
  >"$WORK/console.json" 2>"$WORK/console.err" || { cat "$WORK/console.err" >&2; fail "console client failed"; }
cat "$WORK/console.json"

"$VALIDATE" "$SNAP" >"$WORK/validate.txt" 2>&1 || { cat "$WORK/validate.txt" >&2; fail "ptprof-validate rejected the snapshot"; }

PP=(go tool pprof -sample_index=samples)
pp() { # pp NAME ARGS...: go tool pprof ARGS SNAP > WORK/NAME.txt
  local name=$1; shift
  "${PP[@]}" "$@" "$SNAP" >"$WORK/$name.txt" 2>&1 || { cat "$WORK/$name.txt" >&2; fail "go tool pprof $* failed"; }
}
ID_A=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["labels.A"]["id"])' "$WORK/console.json")
ID_B=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["labels.B"]["id"])' "$WORK/console.json")
pp tags -tags
pp tags_a -tagfocus=task=$ID_A -tags
pp top_a -tagfocus=task=$ID_A -top -nodefraction=0
pp tags_burn_a -focus='^burn_a$' -tags
pp tags_burn_b -focus='^burn_b$' -tags
pp tags_outside -focus='^burn_outside$' -tags
pp tags_hot -tagfocus=phase=hot -tags
pp top_hot -tagfocus=phase=hot -top -nodefraction=0
pp top_notask -tagignore=task_kind=. -top -nodefraction=0
pp top_root -tagroot=task_kind -top -nodefraction=0

python3 - "$WORK" "$ID_A" "$ID_B" <<'EOF' || fail "see above"
import json, math, os, re, sys
sys.path.insert(0, os.environ["PT_SRC"] + "/tests/prof")
import pprof_tags
work, id_a, id_b = sys.argv[1], sys.argv[2], sys.argv[3]
done = json.load(open(f"{work}/done.json"))
con = json.load(open(f"{work}/console.json"))
def read(n): return open(f"{work}/{n}.txt").read()
def tags(n): return pprof_tags.tags(read(n))
def top_funcs(n):
    fs, hdr = set(), False
    for line in read(n).splitlines():
        if re.search(r"flat\s+flat%\s+sum%", line): hdr = True; continue
        if hdr and line.strip(): fs.add(line.split(None, 5)[5].replace(" (inline)", ""))
    return fs
bad = []
def check(cond, msg):
    print(("ok   " if cond else "FAIL ") + msg)
    if not cond: bad.append(msg)

t = tags("tags")
ka = t.get("task_kind", {})
n_a, n_b = ka.get("labels.A", 0), ka.get("labels.B", 0)
check(set(ka) == {"labels.A", "labels.B"}, f"task_kind values {sorted(ka)} are the console's names")
check(t.get("task", {}).get(id_a) == n_a and t.get("task", {}).get(id_b) == n_b,
      f"task numbers {t.get('task')} are the console's task.id {id_a}/{id_b}")
locs = sorted(t.get("task_loc", {}))
check(len(locs) == 2 and all(re.fullmatch(r"tests/prof/labels_work\.c:\d+", l) for l in locs),
      f"task_loc {locs} is the spawn file:line")
ta = tags("tags_a")
check(set(ta.get("task_kind", {})) == {"labels.A"}, f"-tagfocus=task={id_a} keeps labels.A only: {ta.get('task_kind')}")
fa = top_funcs("top_a")
check("burn_a" in fa and "burn_b" not in fa and "burn_outside" not in fa, f"-tagfocus=task={id_a} stacks: {sorted(fa)}")
tb = tags("tags_burn_a")
check(set(tb.get("task_kind", {})) == {"labels.A"} and
      sum(tb["task_kind"].values()) == sum(tb.get("thread_id", {}).values()),
      f"every burn_a sample is labels.A: {tb.get('task_kind')} of {tb.get('thread_id')}")
tb = tags("tags_burn_b")
check(set(tb.get("task_kind", {})) == {"labels.B"} and
      sum(tb["task_kind"].values()) == sum(tb.get("thread_id", {}).values()),
      f"every burn_b sample is labels.B: {tb.get('task_kind')}")
to = tags("tags_outside")
check(sum(to.get("thread_id", {}).values()) > 0 and "task" not in to and "task_kind" not in to,
      f"burn_outside samples ({sum(to.get('thread_id', {}).values())}) carry no task label: keys {sorted(to)}")
th = tags("tags_hot")
fh = top_funcs("top_hot")
check(set(th.get("task_kind", {})) == {"labels.A"} and "burn_a_hot" in fh and "burn_b" not in fh
      and "burn_a" not in fh, f"phase=hot: task {th.get('task_kind')}, stacks {sorted(fh)}")
fn = top_funcs("top_notask")
check("burn_outside" in fn and not ({"burn_a", "burn_b", "burn_a_hot"} & fn),
      f"samples without a task label: {sorted(fn)}")

def cum(n, name):
    for line in read(n).splitlines():
        f = line.split(None, 5)
        if len(f) == 6 and f[5] == name and f[3].replace(".", "").isdigit(): return float(f[3])
    return None
check(cum("top_root", "labels.A") == n_a and cum("top_root", "labels.B") == n_b,
      f"-tagroot=task_kind: root frames labels.A {cum('top_root', 'labels.A')} and labels.B {cum('top_root', 'labels.B')} hold their samples")

# agreement
N = n_a + n_b
period = done["period_ns"]
busy_a, busy_b = int(con["labels.A"]["busy_ns"]), int(con["labels.B"]["busy_ns"])
r = busy_a / (busy_a + busy_b)
c = done["cpu_a_ns"] / (done["cpu_a_ns"] + done["cpu_b_ns"])
p = n_a / N if N else 0
for name, ref in (("console busy", r), ("measured CPU", c)):
    sd = math.sqrt(ref * (1 - ref) / N) if N else 1
    check(N >= 200 and abs(p - ref) <= 4 * sd,
          f"A's share: sampler {p:.4f} ({n_a:.0f}/{N:.0f}) vs {name} {ref:.4f}: |diff| {abs(p - ref):.4f} <= 4 sd {4 * sd:.4f}")
for name, n, busy in (("A", n_a, busy_a), ("B", n_b, busy_b)):
    cpu = n * period
    check(cpu <= busy + 4 * math.sqrt(n) * period,
          f"{name}: sampled {cpu / 1e6:.1f} ms <= console busy {busy / 1e6:.1f} ms + 4 sd ({4 * math.sqrt(n) * period / 1e6:.1f} ms)")
print(f"figures: n_A={n_a:.0f} n_B={n_b:.0f} sampled_A_ms={n_a * period / 1e6:.1f} sampled_B_ms={n_b * period / 1e6:.1f} "
      f"busy_A_ms={busy_a / 1e6:.1f} busy_B_ms={busy_b / 1e6:.1f} cpu_A_ms={done['cpu_a_ns'] / 1e6:.1f} cpu_B_ms={done['cpu_b_ns'] / 1e6:.1f}")
sys.exit(1 if bad else 0)
EOF
note "sampler and console agree on CPU per task"
