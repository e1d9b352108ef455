#!/usr/bin/env python3
"""Checks the what-if replay speed target with stepprof-bench-whatif: at least 1 million
samples per second through WhatIfReplay::replay for every variant (docs/whatif.md).

Each benchmark runs --repetitions times and the best repetition's rate (items_per_second,
computed from CPU time, so time the process was not running is not counted) is compared
with the target. Prints the figures; exit status 1 when the target is missed, 2 when the
benchmark could not be run.

Usage: check_whatif_replay.py STEPPROF_BENCH_WHATIF [--repetitions N] [--min-time SECONDS]
"""
import argparse
import sys

import gbench

TARGET_SAMPLES_PER_S = 1e6


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("--repetitions", type=int, default=5)
    ap.add_argument("--min-time", default="0.3")
    args = ap.parse_args()
    try:
        data = gbench.run(args.bench, [f"--benchmark_repetitions={args.repetitions}",
                                       f"--benchmark_min_time={args.min_time}"], "check_whatif_replay", 900)
    except gbench.BenchError as e:
        print(e, file=sys.stderr)
        return 2
    best = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration" or "error_occurred" in b:
            if b.get("error_occurred"):
                print(f"check_whatif_replay: {b['name']}: {b.get('error_message')}", file=sys.stderr)
                return 2
            continue
        name = b["run_name"]
        best[name] = max(best.get(name, 0.0), b["items_per_second"])
    if not best:
        print("check_whatif_replay: no benchmark results", file=sys.stderr)
        return 2
    ok = True
    for name, rate in sorted(best.items()):
        passed = rate >= TARGET_SAMPLES_PER_S
        ok = ok and passed
        print(f"{name:40s} {rate / 1e6:8.2f} M samples/s  ({rate / TARGET_SAMPLES_PER_S:.1f}x the target) "
              f"{'ok' if passed else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
