#!/usr/bin/env bash
# An initial state larger than the client's 4 MiB message limit (30000 tasks
# with long names) reaches a real gRPC client split across several Updates,
# every task with its stats, none dropped.
set -euo pipefail
. "$(dirname "$0")/../lib.sh"
. "$(dirname "$0")/console_lib.sh"
console_npm
console_demo_start PTCON_DEMO_MANY=30000
node "$CONSOLE_DIR/console_client.js" split "$DEMO_ADDR" 30000
console_demo_stop
