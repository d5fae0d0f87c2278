#!/usr/bin/env bash
# What the SIGPROF handler runs lives in src/prof/signal/ and calls nothing
# else (CONTRIBUTING.md, "src/prof: one folder per execution context"):
#  1. the objects compiled from src/prof/signal/*.c (found through
#     build/profile's compile_commands.json, as call_loops_test.sh does)
#     reference, per `nm`, only symbols that (a) signal/'s own objects
#     define, or (b) are on ALLOWED below: async-signal-safe calls (POSIX's
#     list, restricted to what the handler needs) and the plain Linux
#     system calls and toolchain symbols named there, each with its reason;
#  2. their sources include only signal/ headers and output/ptp_window.h
#     (the sample vocabulary: types, flags, drop causes), so no inline
#     function of another folder can be compiled into them unseen by nm;
#  3. every signal/*.c says at its top that it is an async-signal-safe file.
# Controls: a throwaway object calling malloc, and one calling a function of
# another folder (unwind/'s ptp_cfi_refresh), each checked together with the
# real objects, must be reported; so a check that sees nothing cannot pass.
source "$(dirname "$0")/../lib.sh"
command -v nm >/dev/null || skip "nm missing"
command -v cc >/dev/null || skip "cc missing"

# name: why it may be called (or referenced) from the handler
ALLOWED=(
  "clock_gettime: POSIX async-signal-safe (the thread's CPU clock, the vDSO monotonic clock)"
  "syscall: a bare system call in glibc, no lock or allocation (futex FUTEX_WAKE_PRIVATE: the consumer's wake-up without a descriptor; prctl PR_GET_NAME: the thread's name at the sample; rt_sigprocmask, rt_sigaction and tgkill: a program's SIGPROF handed to its own disposition, src/prof/signal/ptp_sigstate.c; process_vm_readv: a JIT leaf's code bytes read without faulting, src/prof/signal/ptp_unwind.c)"
  "getpid: POSIX async-signal-safe (tgkill's process id when SIGPROF's default action is taken for the program; process_vm_readv's own process)"
  "fstat64: fstat (POSIX async-signal-safe) under its glibc name: the perf event's descriptor still names our event before the ioctl"
  "ioctl: a bare system call in glibc, no lock or allocation (PERF_EVENT_IOC_ID and _PERIOD on the thread's own event)"
  "gettid: a bare system call in glibc (which thread a perf signal came to)"
  "__errno_location: errno's address (TLS), read and restored by the handler"
  "memcpy: POSIX async-signal-safe (struct copies the compiler may emit)"
  "memset: POSIX async-signal-safe (zeroing the compiler may emit)"
  "__stack_chk_fail: the stack protector's abort (only on a smashed stack)"
  "_GLOBAL_OFFSET_TABLE_: the linker's GOT symbol in PIC code, not a call"
)
allowed_names() { printf '%s\n' "${ALLOWED[@]}" | sed 's/:.*//'; }

work=$(mktemp -d "$TMPDIR/signal-safety.XXXXXX")
trap 'rm -rf "$work"' EXIT

b="$PT_BUILD_PROF"
[ -f "$b/compile_commands.json" ] || fail "missing $b/compile_commands.json (build profile first)"

# objects: lines "OBJECT SOURCE" for the src/prof/signal/*.c the build
# compiles now (one object per source: the shared and static libraries may
# share it).
python3 - "$b" "$PT_SRC" >"$work/objects" <<'EOF'
import json, os, sys
build, root = sys.argv[1], os.path.realpath(sys.argv[2])
seen = {}
for e in json.load(open(os.path.join(build, "compile_commands.json"))):
    src = os.path.relpath(os.path.realpath(os.path.join(e["directory"], e["file"])), root)
    if src.startswith("src/prof/signal/") and src.endswith(".c"):
        seen.setdefault(src, os.path.join(e["directory"], e["output"]))
for src, obj in sorted(seen.items()):
    print(obj, src)
EOF
nobj=$(wc -l <"$work/objects")
nsrc=$(ls "$PT_SRC"/src/prof/signal/*.c | wc -l)
[ "$nobj" -eq "$nsrc" ] || fail "$nobj objects for $nsrc sources in src/prof/signal (rebuild profile)"

# violations OBJECT...: prints "OBJECT: symbol" for every undefined symbol
# that is neither defined by one of the OBJECTs nor allowed.
violations() {
  local o
  for o in "$@"; do nm -g --defined-only "$o" | awk 'NF == 3 { print $3 }'; done | sort -u >"$work/defined"
  allowed_names | sort -u >"$work/allowed"
  for o in "$@"; do
    nm -g --undefined-only "$o" | awk '{ print $NF }' | sort -u |
      comm -23 - "$work/defined" | comm -23 - "$work/allowed" | sed "s|^|$(basename "$o"): |"
  done
}

mapfile -t objs < <(cut -d' ' -f1 "$work/objects")
for o in "${objs[@]}"; do [ -f "$o" ] || fail "missing object $o (build profile first)"; done

# --- controls: the check must see a forbidden call ---
printf '#include <stdlib.h>\nvoid *ptt_ctl_alloc(void);\nvoid *ptt_ctl_alloc(void) { return malloc(64); }\n' >"$work/ctl_malloc.c"
printf 'int ptp_cfi_refresh(void);\nint ptt_ctl_other(void);\nint ptt_ctl_other(void) { return ptp_cfi_refresh(); }\n' >"$work/ctl_other.c"
for c in malloc other; do
  cc -O2 -c -o "$work/ctl_$c.o" "$work/ctl_$c.c" || fail "cannot compile the $c control"
done
violations "${objs[@]}" "$work/ctl_malloc.o" >"$work/ctl1"
grep -q '^ctl_malloc.o: malloc$' "$work/ctl1" || { cat "$work/ctl1" >&2; fail "the check missed malloc in the control"; }
violations "${objs[@]}" "$work/ctl_other.o" >"$work/ctl2"
grep -q '^ctl_other.o: ptp_cfi_refresh$' "$work/ctl2" ||
  { cat "$work/ctl2" >&2; fail "the check missed a call into unwind/ in the control"; }
note "controls: $(cat "$work/ctl1" "$work/ctl2" | tr '\n' ';')"

# --- 1. the real objects ---
violations "${objs[@]}" >"$work/out"
if [ -s "$work/out" ]; then
  cat "$work/out" >&2
  fail "src/prof/signal calls what a signal handler may not (or code of another folder)"
fi
used=$(for o in "${objs[@]}"; do nm -g --undefined-only "$o" | awk '{ print $NF }'; done | sort -u |
       comm -12 - <(allowed_names | sort -u) | tr '\n' ' ')
note "$nobj objects of src/prof/signal; external symbols used: $used"

# --- 2. includes ---
bad=$(grep -Hn '^#include "' "$PT_SRC"/src/prof/signal/*.[ch] |
      grep -v '"prof/signal/[a-z_]*\.h"' | grep -v '"prof/output/ptp_window\.h"' || true)
[ -z "$bad" ] || { echo "$bad" >&2; fail "signal/ includes a header of another folder"; }

# --- 3. the header line ---
for f in "$PT_SRC"/src/prof/signal/*.c; do
  head -15 "$f" | grep -q 'ASYNC-SIGNAL-SAFE FILE' || fail "$f does not say ASYNC-SIGNAL-SAFE FILE at its top"
done
echo ok
