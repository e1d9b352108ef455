#!/usr/bin/env bash
# Quick start, step 1: installs what is missing, builds stepprof (release preset) and
# runs `stepprof report` on the bundled real log (rank 1 of a 4-GPU VLM run).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh build
cmake --preset release >/dev/null
cmake --build --preset release
exec build/release/stepprof report --hierarchy examples/qwen-vggt/hierarchy.txt examples/qwen-vggt/rank1.jsonl
