#!/usr/bin/env bash
# The adversarial pass of issue 44 against neural-server and the CLI on the tiny fixture
# (docs/RELIABILITY.md "Hostile clients, third round"): a stream whose client stops reading, the
# store rewritten and truncated under the server, repack --out a FIFO and through a link, slow
# bodies against newcomers, a prompt over the context, SIGTERM mid-stream, HTTP/1.1 Host rules.
# Loopback only (127.0.0.1-3), every wait bounded (~2 minutes in all). One JSON line per
# scenario with its figures; exit status 1 when one did not hold.
#   scripts/adversarial-test.sh [scenario ...]   (stalledStream storeChanged outputPaths
#                                                 slowBodies longPrompt sigterm httpRules)
#   NEURAL_BUILD_DIR   build folder with neural-server and neural (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${NEURAL_BUILD_DIR:-build}
for bin in server/neural-server engine/cli/neural; do
  [ -x "$BUILD_DIR/$bin" ] || { echo "adversarial-test: build $BUILD_DIR/$bin first" >&2; exit 2; }
done
export NEURAL_SERVER_BIN=$PWD/$BUILD_DIR/server/neural-server
export NEURAL_NEURAL_BIN=$PWD/$BUILD_DIR/engine/cli/neural
export NEURAL_SHARED_DIR=${NEURAL_SHARED_DIR:-$(cd .. && pwd)/shared}
exec node tests/server/node/adversarial.mjs "$@"
