#!/usr/bin/env bash
# The full loopback load test of neural-server on the tiny fixture (docs/RELIABILITY.md):
# 1,000 requests from 32 concurrent clients (streaming, non-streaming, cancelled, malformed),
# every request answered validly or with 503, no crash, RSS within 5% of the post-warm-up RSS,
# queue-wait p50/p99 as the clients see it and as the server measures it (enqueue to engine start,
# its /metrics summary neural_queue_wait_seconds). CI runs a reduced form (ctest server_load: 150
# requests, 8 clients).
#   scripts/load-test.sh [extra load.mjs options, e.g. --requests 3000 --clients 64 --seed 2]
#   NEURAL_BUILD_DIR   build folder with neural-server (default: build; built if missing)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${NEURAL_BUILD_DIR:-build}
if [ ! -x "$BUILD_DIR/server/neural-server" ]; then
  NEURAL_BUILD_DIR=$BUILD_DIR ./scripts/build.sh
fi
export NEURAL_SERVER_BIN=$PWD/$BUILD_DIR/server/neural-server
export NEURAL_SHARED_DIR=${NEURAL_SHARED_DIR:-$(cd .. && pwd)/shared}
exec node tests/server/node/load.mjs --requests 1000 --clients 32 "$@"
