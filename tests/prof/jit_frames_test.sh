#!/usr/bin/env bash
# jit_frames_test.sh - frames in JIT code: tests/prof/jitprog generates
# frame-pointer code at run time (three levels calling back into C, and a
# loop in generated code), its C side without frame pointers, and writes a
# perf map as a runtime does. Preloaded at 999 Hz (jit_lib.sh, jit_check.py),
# after the warm-up window:
#   - >= 95 % of the CPU in the C callback reaches main through exactly the
#     three generated frames, and >= 95 % of the CPU in the generated loop
#     reaches main through its two; < 5 % of all [truncated];
#   - the split between the three paths (two through JIT code, one plain
#     C) matches jitprog's own CPU clock within 4 sigma + 3 pp;
#   - good: every generated frame carries the map's name, in a "[jit]"
#     mapping; overlap: later lines win (a wrong name over the whole code
#     first, a renamed loop last); none: the same stacks, no names, the
#     comment says "not found".
# Before the walker stepped through JIT code, every such sample ended at
# its first generated frame, [truncated].
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/jit_lib.sh"
prof_require jitprog
prof_workdir jit-frames

jit_run good "$JIT_A" "$JIT_B" "read"
jit_run overlap "$JIT_A" "JIT:leafloop-v2,JIT:entry" "read"
jit_run none none "" "not found"
echo "ok"
