#!/usr/bin/env bash
# sampler_nofp_debugframe_test.sh - a library without frame pointers whose
# only CFI is .debug_frame (built with -fno-asynchronous-unwind-tables
# -fno-unwind-tables, linked without .eh_frame_hdr; rbp clobbered), loaded
# with dlopen by tests/prof/nofp_dlopen and called at once, profiled in
# preload mode at 999 Hz, three ways:
#   1. the library as built (.debug_frame in the object itself);
#   2. stripped of its debug sections, with a separate debug file found
#      through its .gnu_debuglink (next to it, and in its .debug/);
#   3. control: stripped, no debug file;
#   4. stripped, with a debug file next to it that names another build id
#      (one byte of its NT_GNU_BUILD_ID changed): refused, as in 3.
# 1 and 2: >= 95 % of the CPU through the library reaches main and
# __libc_start_call_main (or __libc_start_main), < 5 % is [truncated], and
# the profile says no object was left unwalked. 3 and 4: the same stacks
# stop at the library (>= 50 % of that CPU [truncated]: it has neither CFI
# nor frame pointers), which shows the debug file is what 2 used, and that
# a debug file of another build is never used (its CFI would be another
# object's: a guessed caller).
# (/usr/lib/debug/.build-id/xx/yyyy.debug is the other place looked in; a
# test does not write there.)
source "$(dirname "${BASH_SOURCE[0]}")/prof_lib.sh"
source "$(dirname "${BASH_SOURCE[0]}")/sampler_nofp_records.sh"
prof_require nofp_dlopen
SRCLIB="$PT_BUILD_PROF/tests/prof/libptt_nofp_dbgframe.so"
[ -f "$SRCLIB" ] || fail "no $SRCLIB"
command -v objcopy >/dev/null || skip "objcopy (binutils) not installed"
readelf -S "$SRCLIB" | grep -c '\.debug_frame' >/dev/null || fail "$SRCLIB has no .debug_frame"
readelf -l "$SRCLIB" | grep -c 'GNU_EH_FRAME' >/dev/null && fail "$SRCLIB has an .eh_frame_hdr"

prof_workdir sampler-nofp-debugframe
export XDG_CACHE_HOME="$WORK/cache"     # the table cache must not answer for the file

# case NAME DIR: profiles nofp_dlopen loading DIR/libptt_nofp_dl0.so;
# prints "ms-through-library ms-truncated ms-reaching-main" and saves the
# profile's comments.
case_run() {
  local out="$WORK/out-$1"
  env PTPROF_DIR="$out" PTPROF_PREFIX=dbgf- PTPROF_HZ=999 PTPROF_SYMCACHE=off LD_PRELOAD="$LIB" \
    "$PROG" "$2" 1 0.4 >"$WORK/run-$1.txt" 2>&1 ||
    { cat "$WORK/run-$1.txt" >&2; fail "$1: nofp_dlopen failed under the sampler"; }
  local prof
  prof=$(ls "$out"/dbgf-*.pb.gz 2>/dev/null | head -1)
  [ -n "$prof" ] || fail "$1: no snapshot written"
  go tool pprof -symbolize=none -traces "$prof" >"$WORK/traces-$1.txt" 2>&1 ||
    { cat "$WORK/traces-$1.txt" >&2; fail "$1: go tool pprof rejected $prof"; }
  go tool pprof -comments "$prof" >"$WORK/comments-$1.txt" 2>&1 || fail "$1: no comments"
  nofp_records "$WORK/traces-$1.txt" "$WORK/records-$1.tsv"
  grep -E '	(.*;)?(ptt_nofp_outer|nofp_mid|dl_hot);' "$WORK/records-$1.tsv" >"$WORK/lib-$1.tsv" || true
  awk -F'\t' '{ l += $1; if ($2 ~ /\[truncated\]/) t += $1
                if ($2 ~ /;dl_drive;main;(.*;)?__libc_start(_call)?_main;/) r += $1 }
              END { printf "%.1f %.1f %.1f\n", l, t, r }' "$WORK/lib-$1.tsv"
}

check_complete() {
  local lib trunc rooted
  read -r lib trunc rooted < <(case_run "$1" "$2")
  note "$1: $lib ms through the library, $trunc ms [truncated], $rooted ms reach main"
  awk -v l="$lib" 'BEGIN { exit !(l >= 200) }' || fail "$1: too few samples ($lib ms through the library)"
  awk -v l="$lib" -v t="$trunc" 'BEGIN { exit !(t < 0.05 * l) }' ||
    { grep -F -m5 '[truncated]' "$WORK/lib-$1.tsv" >&2; fail "$1: $trunc of $lib ms truncated"; }
  awk -v l="$lib" -v r="$rooted" 'BEGIN { exit !(r >= 0.95 * l) }' || fail "$1: only $rooted of $lib ms reach main"
  grep -q ' 0 not walked$' "$WORK/comments-$1.txt" ||
    { grep '^unwind tables' "$WORK/comments-$1.txt" >&2; fail "$1: an object was not walked"; }
}

# 1. .debug_frame in the object.
mkdir -p "$WORK/inobj"
cp "$SRCLIB" "$WORK/inobj/libptt_nofp_dl0.so"
check_complete in-object "$WORK/inobj"

# 2. separate debug file through .gnu_debuglink, next to the object and in .debug/.
for where in next dotdebug; do
  d="$WORK/$where"
  mkdir -p "$d"
  dbg="$d/libptt_nofp_dl0.so.debug"
  [ "$where" = dotdebug ] && { mkdir -p "$d/.debug"; dbg="$d/.debug/libptt_nofp_dl0.so.debug"; }
  objcopy --only-keep-debug "$SRCLIB" "$dbg"
  objcopy --strip-debug --add-gnu-debuglink="$dbg" "$SRCLIB" "$d/libptt_nofp_dl0.so"
  readelf -S "$d/libptt_nofp_dl0.so" | grep -c '\.debug_frame' >/dev/null && fail "strip left .debug_frame in the object"
  check_complete "debuglink-$where" "$d"
done

# 3. control: stripped, no debug file: the walk cannot get through.
mkdir -p "$WORK/none"
objcopy --strip-debug "$SRCLIB" "$WORK/none/libptt_nofp_dl0.so"
read -r lib trunc rooted < <(case_run control "$WORK/none")
note "control: $lib ms through the library, $trunc ms [truncated], $rooted ms reach main"
awk -v l="$lib" -v t="$trunc" 'BEGIN { exit !(l >= 200 && t >= 0.5 * l) }' ||
  fail "control (no CFI anywhere): only $trunc of $lib ms truncated: what did the walker follow?"

# 4. a debug file of another build: its build-id note differs in one byte.
mkdir -p "$WORK/otherbuild"
dbg="$WORK/otherbuild/libptt_nofp_dl0.so.debug"
objcopy --only-keep-debug "$SRCLIB" "$dbg"
objcopy --strip-debug --add-gnu-debuglink="$dbg" "$SRCLIB" "$WORK/otherbuild/libptt_nofp_dl0.so"
python3 - "$dbg" <<'PY' || fail "could not change the debug file's build id"
import struct, sys
p = sys.argv[1]
b = bytearray(open(p, "rb").read())
shoff, = struct.unpack_from("<Q", b, 0x28)
shentsize, shnum = struct.unpack_from("<HH", b, 0x3a)
for i in range(shnum):
    o = shoff + i * shentsize
    typ, = struct.unpack_from("<I", b, o + 4)
    off, size = struct.unpack_from("<QQ", b, o + 0x18)
    if typ != 7 or size < 16:            # SHT_NOTE
        continue
    namesz, descsz, ntype = struct.unpack_from("<III", b, off)
    if ntype == 3 and namesz == 4 and bytes(b[off + 12:off + 16]) == b"GNU\0":   # NT_GNU_BUILD_ID
        b[off + 16] ^= 0xff
        open(p, "wb").write(b)
        sys.exit(0)
sys.exit(1)
PY
[ "$(readelf -n "$dbg" | grep 'Build ID')" != "$(readelf -n "$SRCLIB" | grep 'Build ID')" ] ||
  fail "the debug file still has the library's build id"
read -r lib trunc rooted < <(case_run otherbuild "$WORK/otherbuild")
note "other build's debug file: $lib ms through the library, $trunc ms [truncated], $rooted ms reach main"
awk -v l="$lib" -v t="$trunc" 'BEGIN { exit !(l >= 200 && t >= 0.5 * l) }' ||
  fail "a debug file of another build was used: only $trunc of $lib ms truncated"
echo "ok"
