# tests/console/console_lib.sh - shared by tests/console/*_test.sh (source it
# after tests/lib.sh). Not a test itself (no _test.sh suffix).

CONSOLE_DIR="$PT_SRC/tests/console"

# console_npm: makes sure tests/console/node_modules holds the pinned
# @grpc/grpc-js and @grpc/proto-loader (npm ci from package-lock.json).
# Skips (77) only when npm or the registry is unreachable.
console_npm() {
  command -v node >/dev/null || skip "node is not installed"
  if [ -f "$CONSOLE_DIR/node_modules/@grpc/grpc-js/package.json" ] &&
     [ -f "$CONSOLE_DIR/node_modules/@grpc/proto-loader/package.json" ]; then
    return 0
  fi
  command -v npm >/dev/null || skip "npm is not installed"
  if ! (cd "$CONSOLE_DIR" && npm ci --no-audit --no-fund >"$TMPDIR/npm.log" 2>&1); then
    if grep -qiE 'ENOTFOUND|EAI_AGAIN|ECONNREFUSED|ETIMEDOUT|network' "$TMPDIR/npm.log"; then
      skip "npm registry unreachable; cannot install @grpc/grpc-js (see npm log)"
    fi
    cat "$TMPDIR/npm.log" >&2
    fail "npm ci failed in tests/console"
  fi
}

# console_demo_start [ENV=VAL...]: starts console_demo on a kernel-chosen
# loopback port with a 2 s retention; sets DEMO_PID, DEMO_ADDR, DEMO_PROGRESS.
console_demo_start() {
  local demo="$PT_BUILD_PROF/tests/console/console_demo"
  [ -x "$demo" ] || skip "no profiling build at $PT_BUILD_PROF (console_demo missing)"
  local dir
  dir=$(mktemp -d "$TMPDIR/console.XXXXXX")
  DEMO_PROGRESS="$dir/progress"
  # DEMO_LIMIT_FDS=N: run the demo with RLIMIT_NOFILE = N.
  ( [ -n "${DEMO_LIMIT_FDS:-}" ] && ulimit -n "$DEMO_LIMIT_FDS"
    exec env PTCON_DEMO_BIND=127.0.0.1:0 PTCON_DEMO_PORTFILE="$dir/port" \
      PTCON_DEMO_PROGRESS="$DEMO_PROGRESS" PTCON_DEMO_RETENTION_MS=2000 "$@" \
      "$demo" ) >"$dir/demo.out" 2>&1 &
  DEMO_PID=$!
  PT_PIDS+=("$DEMO_PID")
  DEMO_OUT="$dir/demo.out"
  wait_for 20 test -s "$dir/port" || { cat "$dir/demo.out" >&2; fail "console_demo did not start"; }
  DEMO_ADDR="127.0.0.1:$(cat "$dir/port")"
  note "console_demo pid $DEMO_PID on $DEMO_ADDR"
}

# console_demo_alive: fails if the demo died.
console_demo_alive() {
  kill -0 "$DEMO_PID" 2>/dev/null || { cat "$DEMO_OUT" >&2; fail "console_demo died"; }
}

# console_demo_stop: SIGTERM, then the demo must exit 0 (a clean server
# shutdown; under ASan also: no memory error, no leak).
console_demo_stop() {
  console_demo_alive
  kill -TERM "$DEMO_PID"
  local rc=0
  wait "$DEMO_PID" || rc=$?
  [ "$rc" = 0 ] || { cat "$DEMO_OUT" >&2; fail "console_demo exited with $rc"; }
}
