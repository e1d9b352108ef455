#!/usr/bin/env bash
# Remakes docs/img/report.png, the README's picture of the HTML report: `stepprof html`
# on the bundled real log, opened in headless Chromium by the browser test's checker
# (tests/browser/check_report.mjs), which also fails on any JavaScript error or missing
# chart. Needs a release build (cmake --preset release && cmake --build --preset release).
set -euo pipefail
cd "$(dirname "$0")/.."
build=build/release
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/stepprof" html --hierarchy examples/qwen-vggt/hierarchy.txt examples/qwen-vggt/rank1.jsonl -o "$out/report.html"
node tests/browser/check_report.mjs --modules "$build/web/node_modules" --html "$out/report.html" \
  --screenshot "$out/full.png" --expect update-time,regions,paths-0,padding \
  --clip-from update-time --clip-height 1560 --clip-out docs/img/report.png >/dev/null
echo "wrote docs/img/report.png ($(stat -c %s docs/img/report.png) bytes)"
