#!/usr/bin/env python3
"""Writes a large PyTorch profiler (Kineto) trace for the reader benchmark.

It repeats the events of a real trace (default: examples/kineto/hta-a100-rank3of8.json.gz,
6 ProfilerSteps of a real 8-rank A100 job) until the output reaches --size-mb megabytes
(10^6 bytes) of JSON: copy k has every timestamp moved past the end of copy k-1, every
correlation / flow / External id offset so that they stay unique, and ProfilerStep#N
renumbered to N + k * steps. Metadata events (ph "M") are written once. The layout is
Kineto's: top-level keys, then one event per line, as torch.profiler writes them.

Usage: make_big_trace.py [--source TRACE] [--size-mb 1000] [--gzip] -o OUT
Python standard library only.
"""
import argparse
import copy
import gzip
import json
import re
import sys
from pathlib import Path

STEP = re.compile(r"^ProfilerStep#(\d+)$")


def load(path):
    opener = gzip.open if Path(path).read_bytes()[:2] == b"\x1f\x8b" else open
    with opener(path, "rt") as f:
        return json.load(f)


def main():
    here = Path(__file__).resolve().parents[2]
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--source", default=str(here / "examples/kineto/hta-a100-rank3of8.json.gz"))
    ap.add_argument("--size-mb", type=float, default=1000.0, help="target size of the JSON text, 10^6 bytes")
    ap.add_argument("--gzip", action="store_true", help="write gzip (level 1) instead of plain JSON")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    trace = load(args.source)
    events = trace["traceEvents"]
    meta = [e for e in events if e.get("ph") == "M"]
    body = [e for e in events if e.get("ph") != "M"]
    numeric_ts = [e["ts"] for e in body if isinstance(e.get("ts"), (int, float))]
    t0 = min(numeric_ts)
    t1 = max(e["ts"] + e.get("dur", 0) for e in body if isinstance(e.get("ts"), (int, float)))
    span = (t1 - t0) + 1000  # 1 ms gap between copies
    ids = [e.get("id", 0) for e in body if isinstance(e.get("id"), int)]
    ids += [e["args"].get("correlation", 0) for e in body if isinstance(e.get("args"), dict)]
    ids += [e["args"].get("External id", 0) for e in body if isinstance(e.get("args"), dict)]
    id_span = max(i for i in ids if isinstance(i, int)) + 1
    steps = sorted(int(m.group(1)) for e in body if (m := STEP.match(str(e.get("name", "")))))
    step_span = steps[-1] - steps[0] + 1 if steps else 0

    head = {k: v for k, v in trace.items() if k != "traceEvents"}
    target = int(args.size_mb * 1e6)
    opener = (lambda p: gzip.open(p, "wt", compresslevel=1)) if args.gzip else (lambda p: open(p, "w"))
    written = 0
    copies = 0
    with opener(args.output) as out:
        def w(s):
            nonlocal written
            out.write(s)
            written += len(s)

        w("{\n")
        for k, v in head.items():
            w(f'  "{k}": {json.dumps(v)},\n')
        w('  "traceEvents": [\n')
        first = True
        for e in meta:
            w(("" if first else ",\n") + json.dumps(e))
            first = False
        while written < target:
            dt = copies * span
            di = copies * id_span
            for e in body:
                e = copy.copy(e)
                if isinstance(e.get("ts"), (int, float)):
                    e["ts"] = e["ts"] + dt
                if isinstance(e.get("id"), int):
                    e["id"] = e["id"] + di
                a = e.get("args")
                if isinstance(a, dict):
                    a = dict(a)
                    for key in ("correlation", "External id"):
                        if isinstance(a.get(key), int):
                            a[key] = a[key] + di
                    e["args"] = a
                m = STEP.match(str(e.get("name", "")))
                if m:
                    e["name"] = f"ProfilerStep#{int(m.group(1)) + copies * step_span}"
                w(",\n" + json.dumps(e))
            copies += 1
        w("\n]\n}\n")
    print(f"{args.output}: {written / 1e6:.1f} MB of JSON, {copies} copies of {len(body)} events, "
          f"{copies * len(steps)} ProfilerSteps", file=sys.stderr)


if __name__ == "__main__":
    main()
