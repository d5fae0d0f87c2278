#!/usr/bin/env bash
# Hostile clients against the console server: malformed HTTP/2, garbage gRPC
# messages, an oversize request, clients that never read (TCP-level and
# zero-window), a thousand connections. The app loop of console_demo must keep
# ticking throughout (its progress counter advances) and the server must still
# serve a normal client at the end.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/console_lib.sh"
console_npm
# A state of ~600 KiB and a per-connection queue cap of 4 MiB: a normal
# client fits, a client with 16 unread WatchUpdates calls hits the cap.
console_demo_start PTCON_DEMO_MANY=2000 PTCON_DEMO_MAX_QUEUED=4194304 PTCON_DEMO_STALL_MS=1500
node "$CONSOLE_DIR/console_client.js" bad "$DEMO_ADDR" "$DEMO_PROGRESS"
console_demo_stop
grep -q "not reading (queue cap" "$DEMO_OUT" || fail "the server did not log dropping a client over the queue cap"
grep -q "not reading (stalled)" "$DEMO_OUT" || fail "the server did not log dropping a stalled client"

# Out of file descriptors: a demo limited to 48 fds and 200 connections. The
# server pauses accepting (no busy loop), the app loop keeps ticking, and the
# server serves again once the connections are gone.
DEMO_LIMIT_FDS=48 console_demo_start
node "$CONSOLE_DIR/console_client.js" flood "$DEMO_ADDR" "$DEMO_PROGRESS" 200
console_demo_stop
grep -q "pausing accepts" "$DEMO_OUT" || fail "the server did not run out of descriptors (test setup)"
