#!/usr/bin/env python3
"""Per-region overhead of the Python recorder, measured in one process against
torch.autograd.profiler.record_function and a bare Python context manager.

Each figure is the minimum over repetitions of (time of N `with` blocks) / N, minus the
same loop with an empty body, in ns per region (one enter + one exit).
Targets (issue 4): `with rec.region(...)` <= 1000 ns and >= 10x faster than
record_function. Exit status 1 when a target is missed (unless --no-check).

Usage: PYTHONPATH=build/release/python /usr/bin/python3 bench/python_overhead.py [--json FILE]
"""
import argparse
import json
import os
import platform
import tempfile
import timeit

import stepprof


class Bare:
    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--n", type=int, default=200_000, help="regions per repetition")
    p.add_argument("--repeat", type=int, default=7)
    p.add_argument("--json", help="also write the figures to this file")
    p.add_argument("--no-check", action="store_true")
    args = p.parse_args()

    try:
        from torch.autograd.profiler import record_function
    except ImportError:  # measured only where torch is installed
        record_function = None

    tmp = tempfile.mkdtemp()
    rec = stepprof.Recorder(os.path.join(tmp, "bench-rank{rank}.jsonl"), rank=0, world_size=1,
                            device_timing="off")
    region = rec.region("bench")
    bare = Bare()

    def empty():
        pass

    def with_region_lookup():
        with rec.region("bench"):
            pass

    def with_region_object():
        with region:
            pass

    def with_bare():
        with bare:
            pass

    def with_record_function():
        with record_function("bench"):
            pass

    def count():
        rec.count("samples", 8)

    def frame():
        rec.frame(9, 2)

    def best(fn, n):
        return min(timeit.repeat(fn, number=n, repeat=args.repeat)) / n * 1e9

    base = best(empty, args.n)
    rows = {
        "stepprof: with rec.region(name)": best(with_region_lookup, args.n) - base,
        "stepprof: with region (kept object)": best(with_region_object, args.n) - base,
        "bare Python context manager": best(with_bare, args.n) - base,
    }
    if record_function:
        rows["torch record_function"] = best(with_record_function, max(args.n // 10, 1000)) - base
    # The per-update data calls (not regions: no target; the README gives them).
    calls = {
        "stepprof: rec.count(name, n)": best(count, args.n) - base,
        "stepprof: rec.frame(frames, samples)": best(frame, args.n) - base,
    }
    rec.end_update(0)
    rec.close()

    print(f"python {platform.python_version()}, {platform.machine()}, clock {stepprof.clock_name()}, "
          f"empty call {base:.0f} ns subtracted")
    for name, ns in rows.items():
        print(f"  {name:38s} {ns:8.0f} ns per region")
    for name, ns in calls.items():
        print(f"  {name:38s} {ns:8.0f} ns per call")
    ours = rows["stepprof: with rec.region(name)"]
    result = {"ns_per_region": rows, "ns_per_call": calls, "empty_call_ns": base}
    ok = ours <= 1000
    print(f"  target <= 1000 ns per region: {'met' if ok else 'MISSED'} ({ours:.0f} ns)")
    if record_function:
        ratio = rows["torch record_function"] / ours
        result["record_function_over_stepprof"] = ratio
        ok_ratio = ratio >= 10
        ok = ok and ok_ratio
        print(f"  record_function / stepprof = {ratio:.1f}x (target >= 10x): {'met' if ok_ratio else 'MISSED'}")
    print(f"  stepprof / bare context manager = {ours / rows['bare Python context manager']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=2)
    return 0 if ok or args.no_check else 1


if __name__ == "__main__":
    raise SystemExit(main())
