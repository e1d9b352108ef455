#!/usr/bin/env bash
# Quick start, step 1: installs what is missing, builds the stepprof command (release
# preset) and runs `stepprof report` on the bundled real log (rank 1 of a 4-GPU VLM run).
# The first build takes a few minutes on 2 cores and fetches the chart library from the
# npm registry (pinned in web/package-lock.json); later runs only rebuild what changed.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build >&2
log=build/quickstart-build.log
mkdir -p build
echo "quickstart: building stepprof (log: $log) ..." >&2
if ! { cmake --preset release && cmake --build --preset release --target stepprof_cli; } >"$log" 2>&1; then
  tail -n 40 "$log" >&2
  echo "quickstart: the build failed; the whole log is in $log" >&2
  exit 1
fi
exec build/release/stepprof report --hierarchy examples/qwen-vggt/hierarchy.txt examples/qwen-vggt/rank1.jsonl
