#!/usr/bin/env bash
# The installed desktop app (cmake --install into a temporary prefix, away from the source and
# build trees) makes the demo model from the tokenizer it carries, loads it and answers a
# message: the screenshot mode sends "Hello! What can you do?", waits for the streamed reply and
# saves main.png. Usage: installed_demo_test.sh BUILD_DIR
set -euo pipefail
build=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" > "$tmp/install.log" 2>&1 || { cat "$tmp/install.log"; exit 1; }
for f in bin/neural-desktop bin/neural-server bin/neural share/neural/demo/tokenizer.json; do
  [ -s "$tmp/prefix/$f" ] || { echo "not installed: $f"; exit 1; }
done
unset NEURAL_DEMO_TOKENIZER
export NEURAL_DESKTOP_HOME=$tmp/home QT_QPA_PLATFORM=offscreen
cd "$tmp"
"$tmp/prefix/bin/neural-desktop" --version
timeout 300 "$tmp/prefix/bin/neural-desktop" --demo --screenshots "$tmp/shots" > "$tmp/app.log" 2>&1 ||
  { echo "neural-desktop failed:"; cat "$tmp/app.log"; cat "$tmp"/home/data/logs/*.log 2>/dev/null | tail -20; exit 1; }
[ -f "$tmp/home/data/demo/config.json" ] || { echo "the demo model was not made"; exit 1; }
[ -s "$tmp/shots/main.png" ] || { echo "no screenshot of the answered chat"; exit 1; }
grep -q "screenshot .*main.png" "$tmp"/home/data/logs/neural-desktop.log
echo "installed app: demo model made and answered (main.png $(stat -c %s "$tmp/shots/main.png") bytes)"
