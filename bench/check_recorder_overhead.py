#!/usr/bin/env python3
"""Checks the recorder's overhead targets with stepprof-bench, against baselines
measured in the same process:

  BM_RegionHostClock   <= 1.3 x BM_TwoClockReads   (one region entry + exit)
  BM_RegionCompiledOut indistinguishable from BM_EmptyLoop
                       (within 10% or 0.25 ns per iteration, whichever is larger)
  BM_EndUpdateRegions  an update boundary's cost per region with 1,024 regions
                       <= 2 x that with 128 (linear in the regions; it was 2.9x when
                       the JSON writer searched the names already written)

Each benchmark runs --repetitions times, interleaved at random with the others, and the
minimum CPU time per iteration is compared (the minimum is the least disturbed by other
processes; CPU time excludes time the process was not running). A disturbance that
lasts the whole run (another virtual machine on the same core, seen once in CI: 1.38x
where this machine measures 1.21x) survives the minimum, so a missed target is measured
again, up to --attempts runs in all, a few seconds apart; the targets are met when one
run meets them all. Prints every run's figures; exit status 1 when no run met the
targets, 2 when the benchmark could not be run.

Usage: check_recorder_overhead.py STEPPROF_BENCH [--repetitions N] [--min-time SECONDS]
                                  [--attempts N]
"""
import argparse
import sys
import time

import gbench

TARGETS = ["BM_EmptyLoop", "BM_RegionCompiledOut", "BM_TwoClockReads", "BM_RegionHostClock",
           "BM_RegionCAbi", "BM_EndUpdate20Regions", "BM_EndUpdateRegions/128", "BM_EndUpdateRegions/1024"]
REGION_MAX_RATIO = 1.3
END_UPDATE_MAX_GROWTH = 2.0  # per-region cost, 1,024 regions against 128
COMPILED_OUT_REL, COMPILED_OUT_ABS_NS = 0.10, 0.25


def run(binary, repetitions, min_time):
    return gbench.run(binary, ["--benchmark_filter=^(%s)$" % "|".join(TARGETS),
                               "--benchmark_repetitions=%d" % repetitions,
                               "--benchmark_enable_random_interleaving=true",
                               "--benchmark_min_time=%s" % min_time],
                      "check_recorder_overhead", 600)


def to_ns(value, unit):
    return value * {"ns": 1.0, "us": 1e3, "ms": 1e6, "s": 1e9}[unit]


def measure(args):
    """One run of the benchmarks: prints the figures; returns 0 when every target is
    met, 1 when one is missed, 2 when the benchmark could not be run."""
    try:
        data = run(args.bench, args.repetitions, args.min_time)
    except gbench.BenchError as e:
        print(e, file=sys.stderr)
        return 2

    best = {}
    labels = {}
    for b in data["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        # (the name with its arguments, e.g. "BM_EndUpdateRegions/128", without settings
        # such as "/min_time:0.050")
        name = "/".join(p for p in b.get("run_name", b["name"]).split("/") if ":" not in p)
        ns = to_ns(b["cpu_time"], b["time_unit"])
        best[name] = min(ns, best.get(name, float("inf")))
        if b.get("label"):
            labels[name] = b["label"]
    missing = [t for t in TARGETS if t not in best]
    if missing:
        print("check_recorder_overhead: no results for %s" % ", ".join(missing), file=sys.stderr)
        return 2

    ctx = data.get("context", {})
    print("machine: %s CPU(s) at %s MHz, %s; clock %s; min of %d repetitions, CPU time per iteration"
          % (ctx.get("num_cpus"), ctx.get("mhz_per_cpu"), ctx.get("host_name", "?"),
             labels.get("BM_TwoClockReads", "?"), args.repetitions))
    for name in TARGETS:
        print("  %-24s %12.2f ns" % (name, best[name]))

    failed = False
    ratio = best["BM_RegionHostClock"] / best["BM_TwoClockReads"]
    ok = ratio <= REGION_MAX_RATIO
    failed |= not ok
    print("BM_RegionHostClock / BM_TwoClockReads = %.3f (target <= %.2f): %s"
          % (ratio, REGION_MAX_RATIO, "ok" if ok else "MISSED"))

    empty, out = best["BM_EmptyLoop"], best["BM_RegionCompiledOut"]
    allowed = max(COMPILED_OUT_REL * empty, COMPILED_OUT_ABS_NS)
    ok = abs(out - empty) <= allowed
    failed |= not ok
    print("BM_RegionCompiledOut - BM_EmptyLoop = %+.3f ns (ratio %.3f; target |diff| <= %.2f ns): %s"
          % (out - empty, out / empty if empty else float("nan"), allowed, "ok" if ok else "MISSED"))
    print("BM_RegionCAbi / BM_TwoClockReads = %.3f (information)" % (best["BM_RegionCAbi"] / best["BM_TwoClockReads"]))
    print("BM_EndUpdate20Regions = %.1f us per update (information)" % (best["BM_EndUpdate20Regions"] / 1e3))
    small, large = best["BM_EndUpdateRegions/128"] / 128, best["BM_EndUpdateRegions/1024"] / 1024
    growth = large / small
    ok = growth <= END_UPDATE_MAX_GROWTH
    failed |= not ok
    print("update boundary per region: %.0f ns with 1,024 regions, %.0f ns with 128: %.2fx (target <= %.1fx): %s"
          % (large, small, growth, END_UPDATE_MAX_GROWTH, "ok" if ok else "MISSED"))
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("bench")
    ap.add_argument("--repetitions", type=int, default=15)
    ap.add_argument("--min-time", default="0.05")
    ap.add_argument("--attempts", type=int, default=3, help="runs at most, while a target is missed")
    args = ap.parse_args()
    status = 1
    for attempt in range(1, max(args.attempts, 1) + 1):
        if attempt > 1:
            print("run %d of at most %d (the previous run missed a target)" % (attempt, args.attempts))
            sys.stdout.flush()
            time.sleep(3)
        status = measure(args)
        if status != 1:
            break
    if status == 1:
        print("check_recorder_overhead: missed in all %d runs" % args.attempts)
    return status


if __name__ == "__main__":
    sys.exit(main())
