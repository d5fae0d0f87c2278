#!/usr/bin/env bash
# A real gRPC client (@grpc/grpc-js, our own .proto files) against
# console_demo's scripted workload: metadata before tasks, every new task with
# its stats, created_at/poll_stats always present, names, locations, fields,
# polls, busy time, wakes, self-wakes, completion with dropped_at, retention,
# task details with decodable histograms, NOT_FOUND, INVALID_ARGUMENT, pause
# and resume per connection.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/console_lib.sh"
console_npm
console_demo_start
node "$CONSOLE_DIR/console_client.js" demo "$DEMO_ADDR" "$DEMO_PROGRESS"
console_demo_stop
