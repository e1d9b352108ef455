#!/usr/bin/env bash
# Fuzzes the readers with libFuzzer (clang-14, ASan + UBSan): builds the `fuzz` preset
# and runs each target for a bounded time, seeded with the bundled real files.
#   scripts/fuzz.sh [SECONDS] [TARGET...]   SECONDS per target (default 60);
#                                            targets: record log kineto hierarchy (default: all)
#   scripts/fuzz.sh 1800                     the long run (30 minutes per target)
# The corpus grows in build/fuzz/corpus/<target>. A crash, hang or sanitizer report
# stops the script (exit 1) and leaves the input in build/fuzz/artifacts: minimize it
# (fuzz_<target> -minimize_crash=1 FILE), fix the bug, and add the input to
# tests/data/fuzz-regressions/<target>/, which tests/test_fuzz_regressions.cpp replays.
#   scripts/fuzz.sh --ci                     what CI runs: a fixed seed and a fixed number of
#                                            runs per target (about a minute each), so that a
#                                            CI run is the same every time (capped at 3 minutes)
set -euo pipefail
cd "$(dirname "$0")/.."
ci=0
if [ "${1:-}" = "--ci" ]; then ci=1; shift; fi
secs=${1:-60}
[ $# -gt 0 ] && shift
targets=("$@")
[ ${#targets[@]} -eq 0 ] && targets=(record log kineto hierarchy)

mkdir -p build
if ! { cmake --preset fuzz && cmake --build --preset fuzz -j "$(nproc)"; } > build/fuzz-build.log 2>&1; then
  echo "building the fuzz targets failed; the last lines of build/fuzz-build.log:" >&2
  tail -40 build/fuzz-build.log >&2
  exit 1
fi

# Seeds from the real log, its markdown table and its nesting file.
seeds=build/fuzz/seeds
rm -rf "$seeds"
mkdir -p "$seeds/record" "$seeds/log" "$seeds/kineto" "$seeds/hierarchy"
ex=examples/qwen-vggt
n=0
while IFS= read -r line; do
  printf '%s' "$line" > "$seeds/record/line$n.json"
  n=$((n + 1))
done < "$ex/rank1.jsonl"
# (The first records only: small inputs run faster, and the fuzzer mutates them further.)
for mode in 0 1 2 3 4 8 16; do
  { printf "\\x$(printf '%02x' $mode)"; head -n 6 "$ex/rank1.jsonl"; } > "$seeds/log/rank1.mode$mode"
done
{ printf '\x00'; head -n 8 "$ex/rank1.table.md"; } > "$seeds/log/table"
# Two ranks' records in one stream (a job's stdout): torchrun's prefixes, other output.
{ printf '\x00'; head -n 3 "$ex/rank1.jsonl" | sed 's/^/[rank1]:/'; echo 'NCCL INFO Channel 00/02 : 0 1'
  head -n 3 "$ex/rank1.jsonl" | sed 's/"rank": 1/"rank": 0/; s/^/[rank0]:/'; } > "$seeds/log/stream"
# A container runtime's log file (CRI): records split into `P` parts, the other stream between.
{ printf '\x00'; head -n 3 "$ex/rank1.jsonl" | while IFS= read -r l; do
    printf '2026-12-03T10:00:00.1Z stdout P %s\n2026-12-03T10:00:00.2Z stderr F W1203 warning\n' "${l:0:300}"
    printf '2026-12-03T10:00:00.3Z stdout F %s\n' "${l:300}"; done; } > "$seeds/log/cri"
# Docker's json-file log: each line escaped in an entry, one line split over two entries.
/usr/bin/python3 - "$ex/rank1.jsonl" > "$seeds/log/docker" <<'PY'
import json, sys
lines = open(sys.argv[1]).read().splitlines()[:3]
entry = lambda text, stream="stdout": json.dumps({"log": text, "stream": stream, "time": "2026-12-03T10:00:00Z"})
out = [entry(lines[0] + "\n"), entry(lines[1][:200]), entry("W1203 warning\n", "stderr"), entry(lines[1][200:] + "\n"),
       entry(lines[2] + "\n")]
sys.stdout.write("\x00" + "\n".join(out) + "\n")
PY
cp "$ex/hierarchy.txt" "$seeds/hierarchy/"
# One step of a real profiler trace (fuzz/kineto_seed.py), plain, gzip, cut and forced.
for mode in 0 1 2 3; do
  { printf "\\x$(printf '%02x' $mode)"; cat fuzz/seeds/kineto-dlrm-one-step.json; } > "$seeds/kineto/dlrm.mode$mode"
done
cp tests/data/fuzz-regressions/record/* "$seeds/record/" 2>/dev/null || true
cp tests/data/fuzz-regressions/log/* "$seeds/log/" 2>/dev/null || true
cp tests/data/fuzz-regressions/hierarchy/* "$seeds/hierarchy/" 2>/dev/null || true
cp tests/data/fuzz-regressions/kineto/* "$seeds/kineto/" 2>/dev/null || true

declare -A max_len=([record]=16384 [log]=32768 [kineto]=32768 [hierarchy]=4096)
# --ci: runs per target, about a minute each on a 2-core build machine.
declare -A ci_runs=([record]=600000 [log]=6000 [kineto]=15000 [hierarchy]=40000)
mkdir -p build/fuzz/artifacts
total=0
for t in "${targets[@]}"; do
  corpus=build/fuzz/corpus/$t
  if [ "$ci" = 1 ]; then  # from the seeds alone, as on a clean clone
    corpus=build/fuzz/ci-corpus/$t
    rm -rf "$corpus"
  fi
  mkdir -p "$corpus"
  log=build/fuzz/artifacts/$t.log
  if [ "$ci" = 1 ]; then
    bound=(-seed=1 -runs="${ci_runs[$t]}" -max_total_time=180)
    printf '==> fuzz_%s: %s runs, seed 1\n' "$t" "${ci_runs[$t]}"
  else
    bound=(-max_total_time="$secs")
    printf '==> fuzz_%s for %s s\n' "$t" "$secs"
  fi
  status=0
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
    "build/fuzz/fuzz/fuzz_$t" "${bound[@]}" -timeout=10 -rss_limit_mb=2048 -max_len="${max_len[$t]}" \
      -dict=fuzz/stepprof.dict -artifact_prefix="build/fuzz/artifacts/$t-" -print_final_stats=1 \
      "$corpus" "$seeds/$t" > "$log" 2>&1 || status=$?
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 || true)
  printf '    %s executions, %s, corpus %s inputs\n' "${execs:-?}" "${cov:-cov: ?}" "$(ls "$corpus" | wc -l)"
  if [ "$status" -ne 0 ]; then
    echo "fuzz_$t FAILED (exit $status); the last lines of $log:" >&2
    tail -40 "$log" >&2
    exit 1
  fi
  total=$((total + ${execs:-0}))
done
echo "fuzzing: ${total} executions without a crash, hang or sanitizer report"
