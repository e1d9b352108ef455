#!/usr/bin/env bash
# Quick start, step 2: installs what is missing, then builds and runs every test:
#   1. release build: unit, end-to-end and browser tests (ctest --preset release)
#   2. AddressSanitizer + UndefinedBehaviorSanitizer build of the whole suite
#   3. ThreadSanitizer build of the multi-threaded tests (label "threads")
#   4. libFuzzer targets of the readers, about a minute each (scripts/fuzz.sh)
# Usage: scripts/test.sh [--quick]   (--quick: release build only)
set -euo pipefail
cd "$(dirname "$0")/.."
quick=0
[ "${1:-}" = "--quick" ] && quick=1
scripts/install-deps.sh test
jobs=$(nproc)

step() { printf '\n==> %s\n' "$*"; }

step "release build and tests"
cmake --preset release >/dev/null
cmake --build --preset release -j "$jobs"
ctest --preset release -j "$jobs"

if [ "$quick" = 1 ]; then exit 0; fi

step "AddressSanitizer + UndefinedBehaviorSanitizer"
cmake --preset asan >/dev/null
cmake --build --preset asan -j "$jobs"
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
  ctest --preset asan -j "$jobs" -LE "browser|slow"

if ctest --test-dir build/release -N -L threads 2>/dev/null | grep -q 'Total Tests: [1-9]'; then
  step "ThreadSanitizer (multi-threaded tests)"
  cmake --preset tsan >/dev/null
  cmake --build --preset tsan -j "$jobs"
  TSAN_OPTIONS=halt_on_error=1 ctest --preset tsan -j "$jobs"
fi
step "fuzzing the readers (libFuzzer, a fixed seed and about a minute per target)"
scripts/fuzz.sh --ci

step "all tests passed"
