#!/usr/bin/env bash
# libFuzzer over the transcript checks (pd_transcript_parse, the I/O-free
# core of pd_transcript_read in src/daemon/pd_transcript_parse.c), which
# every daemon start applies to every session's transcript.jsonl, for
# PT_FUZZ_SECONDS from tests/daemon/fuzz_seeds/transcript (turns with
# escapes and a status, a last line without its newline, turn ids at their
# bounds). The harness checks the result and its reason, that every entry
# accepted has the fields the daemon relies on, and that the entries
# written back as the daemon writes them read back equal
# (tests/daemon/fuzz_transcript.c). Any crash, sanitizer report or
# mismatch fails.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$PT_SRC/tests/fuzz_lib.sh"
fuzz_require
# shellcheck disable=SC2046
fuzz_build fuzz_transcript "$PT_SRC/tests/daemon/fuzz_transcript.c" \
  "$PT_SRC/src/daemon/pd_transcript_parse.c" "$PT_SRC/src/common/pt_jsonl.c" \
  "$PT_SRC/src/common/pt_alloc.c" $(pkg-config --cflags --libs jansson)
fuzz_run fuzz_transcript "$PT_SRC/tests/daemon/fuzz_seeds/transcript" -max_len=4096
