#!/usr/bin/env python3
"""Benchmark of the Kineto trace reader: throughput and peak memory of
`stepprof import kineto` on a large trace.

It writes a trace of --size-mb megabytes (10^6 bytes) with make_big_trace.py (real events
of examples/kineto/hta-a100-rank3of8.json.gz, repeated), plain and gzip-compressed, then
for each runs, --repeat times:
  baseline  reading the bytes only (`cat` / `gzip -dc` to /dev/null): the I/O floor
  stepprof  `stepprof import kineto TRACE -o DIR`
and prints, for the fastest run of each: wall seconds, throughput in MB/s of
decompressed trace bytes, peak resident memory (getrusage ru_maxrss of the child) and its
ratio to the decompressed size, and stepprof's time against the baseline's.

Targets (issue 6): >= 200 MB/s and peak memory far below the file size (checked here as
< 10 % of the decompressed bytes). Exit status 1 when a target is missed (unless --no-check).

Usage: bench_kineto.py [--bin build/release/stepprof] [--size-mb 1000] [--work DIR] [--repeat 3]
Python standard library only.
"""
import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def timed(cmd, stdout=subprocess.DEVNULL):
    """Runs cmd; returns (wall seconds, peak RSS bytes of the child, exit status)."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    err = proc.stderr.read().decode(errors="replace")
    proc.stderr.close()
    rc = os.waitstatus_to_exitcode(status)
    if rc != 0:
        sys.exit(f"{' '.join(map(str, cmd))} failed ({rc}):\n{err}")
    return wall, usage.ru_maxrss * 1024, rc


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=str(ROOT / "build/release/stepprof"))
    ap.add_argument("--size-mb", type=float, default=1000.0)
    ap.add_argument("--work", default=str(ROOT / "build/bench-kineto"))
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-check", action="store_true", help="print the figures, do not enforce the targets")
    args = ap.parse_args()

    work = Path(args.work)
    work.mkdir(parents=True, exist_ok=True)
    plain = work / f"trace-{int(args.size_mb)}mb.json"
    gz = work / f"trace-{int(args.size_mb)}mb.json.gz"
    gen = ROOT / "bench/kineto/make_big_trace.py"
    if not plain.exists():
        subprocess.run([sys.executable, gen, "--size-mb", str(args.size_mb), "-o", plain], check=True)
    if not gz.exists():
        subprocess.run([sys.executable, gen, "--size-mb", str(args.size_mb), "--gzip", "-o", gz], check=True)
    size = plain.stat().st_size

    ok = True
    print(f"trace: {size / 1e6:.1f} MB of JSON ({gz.stat().st_size / 1e6:.1f} MB gzip), from "
          f"examples/kineto/hta-a100-rank3of8.json.gz repeated")
    print(f"{'input':<6} {'run':<9} {'seconds':>8} {'MB/s':>8} {'peak RSS MB':>12} {'RSS/size':>9} {'vs baseline':>12}")
    for label, path, baseline in (("plain", plain, ["cat", plain]), ("gzip", gz, ["gzip", "-dc", gz])):
        base = min(timed(baseline)[0] for _ in range(args.repeat))
        runs = [timed([args.bin, "import", "kineto", path, "-o", work / f"out-{label}"]) for _ in range(args.repeat)]
        wall = min(r[0] for r in runs)
        rss = max(r[1] for r in runs)
        mbps = size / 1e6 / wall
        print(f"{label:<6} {'baseline':<9} {base:8.2f} {size / 1e6 / base:8.0f} {'':>12} {'':>9} {'':>12}")
        print(f"{label:<6} {'stepprof':<9} {wall:8.2f} {mbps:8.0f} {rss / 1e6:12.1f} {rss / size:9.1%} "
              f"{wall / base:11.2f}x")
        if mbps < 200 or rss > 0.10 * size:
            ok = False
    print("targets: >= 200 MB/s of decompressed trace bytes, peak RSS < 10 % of them:",
          "met" if ok else "MISSED")
    return 0 if ok or args.no_check else 1


if __name__ == "__main__":
    sys.exit(main())
