#!/usr/bin/python3
"""Scale benchmark: `stepprof report` on many ranks' logs against a Python baseline.

In one session it
  1. writes the logs with `stepprof synth` (default 64 ranks x 10,000 updates) into a
     temporary directory,
  2. times `stepprof report --format json` on them: wall time, throughput [GB/s], CPU
     time, peak resident memory [bytes] (from wait4's rusage of the child) and that
     peak divided by the update records,
  3. computes the same summary with Python's standard library (json.loads per line;
     the update-time statistics, the region table's medians, the padding fraction and
     the slow-path count) on the same files, checks that both agree, and prints the
     ratio of the two times.

Usage (from the repository root, after `cmake --build --preset release`):
  /usr/bin/python3 bench/scale_bench.py                      # the full run (several minutes)
  /usr/bin/python3 bench/scale_bench.py --ranks 6 --updates 300 --check-only   # what CTest runs
Exit status: 0 when both agree (and, without --check-only, always prints the figures);
1 when they disagree; 2 on a usage or run error.
"""
import argparse
import json
import math
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def quantile(values, q):
    """Type-7 quantile (linear interpolation between order statistics)."""
    v = sorted(values)
    h = (len(v) - 1) * q
    lo = math.floor(h)
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (h - lo) * (v[hi] - v[lo])


def run_timed(cmd):
    """Runs cmd; returns (exit status, wall s, user s, sys s, peak RSS bytes, stdout, stderr)."""
    out = tempfile.TemporaryFile()
    err = tempfile.TemporaryFile()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=out, stderr=err)
    _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    out.seek(0)
    err.seek(0)
    # ru_maxrss is in kilobytes on Linux.
    return (proc.returncode, wall, usage.ru_utime, usage.ru_stime, usage.ru_maxrss * 1024, out.read(),
            err.read().decode(errors="replace"))


def baseline(files):
    """The summary, from the raw lines with json.loads (what a user would write)."""
    job = {}  # step -> largest wall_ms over ranks (the job waits for its slowest rank)
    device, host = {}, {}
    slots = valid = 0
    slow_updates = 0
    updates = 0
    for f in files:
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                rec = json.loads(line)
                if rec.get("type") != "update":
                    continue
                updates += 1
                step, wall = rec["step"], rec["wall_ms"]
                if wall > job.get(step, -1.0):
                    job[step] = wall
                for name, ms in rec.get("cuda_stream_ms", {}).items():
                    device.setdefault(name, []).append(ms)
                for name, ms in rec.get("cpu_call_ms", {}).items():
                    host.setdefault(name, []).append(ms)
                counts = rec.get("counts", {})
                slots += counts.get("token_slots", 0)
                valid += counts.get("valid_tokens", 0)
                if "vggt_single" in rec.get("cuda_stream_ms", {}):
                    slow_updates += 1
    walls = list(job.values())
    return {
        "updates": updates,
        "update_ms": {"median": statistics.median(walls), "p10": quantile(walls, 0.1), "p90": quantile(walls, 0.9),
                      "min": min(walls), "max": max(walls), "mean": statistics.fmean(walls)},
        "device_median": {k: statistics.median(v) for k, v in device.items()},
        "host_median": {k: statistics.median(v) for k, v in host.items()},
        "padding_fraction": 1 - valid / slots,
        "slow_updates": slow_updates,
    }


def compare(report, base):
    """Differences between stepprof's JSON report and the baseline (empty when they agree)."""
    problems = []

    def close(what, a, b, rel=1e-9):
        if not math.isclose(a, b, rel_tol=rel, abs_tol=1e-9):
            problems.append(f"{what}: stepprof {a!r}, baseline {b!r}")

    if report["run"]["updates"] != base["updates"]:
        problems.append(f"updates: stepprof {report['run']['updates']}, baseline {base['updates']}")
    for key, value in base["update_ms"].items():
        close(f"update_ms.{key}", report["update_time"]["update_ms"][key], value)
    rows = {r["name"]: r for r in report["regions"]["rows"]}
    if set(rows) != set(base["device_median"]):
        problems.append(f"regions differ: {sorted(set(rows) ^ set(base['device_median']))}")
    for name, m in base["device_median"].items():
        if name in rows:
            close(f"{name} device median", rows[name]["device_ms"]["median"], m)
    for name, m in base["host_median"].items():
        if name in rows:
            close(f"{name} host median", rows[name]["host_ms"]["median"], m)
    close("padding fraction", report["padding"]["padding_fraction"], base["padding_fraction"])
    groups = report["code_paths"]["groups"]
    if not groups or groups[0]["updates_with_slow"] != base["slow_updates"]:
        problems.append(f"slow-path updates: stepprof {groups[0]['updates_with_slow'] if groups else None}, "
                        f"baseline {base['slow_updates']}")
    return problems


def machine():
    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} CPUs, {platform.system()} {platform.release()}"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stepprof", default=str(ROOT / "build/release/stepprof"), help="the stepprof binary")
    ap.add_argument("--ranks", type=int, default=64)
    ap.add_argument("--updates", type=int, default=10000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--dir", help="write the logs here (kept) instead of a temporary directory; logs already "
                                  "there from the same --ranks, --updates and --seed are reused")
    ap.add_argument("--runs", type=int, default=3, help="timed stepprof runs; the fastest counts (default 3)")
    ap.add_argument("--check-only", action="store_true", help="check agreement; print no speed figures")
    args = ap.parse_args()
    if not Path(args.stepprof).exists():
        print(f"scale_bench: no stepprof binary at {args.stepprof} (build first)", file=sys.stderr)
        return 2

    work = Path(args.dir) if args.dir else Path(tempfile.mkdtemp(prefix="stepprof_scale_"))
    try:
        logs = work / "logs"
        synth = [args.stepprof, "synth", "-o", str(logs), "--manifest", str(work / "manifest.json"),
                 "--ranks", str(args.ranks), "--updates", str(args.updates), "--seed", str(args.seed),
                 "--fallback-rate", "0.5", "--random-stragglers", "1", "--random-fallbacks", "10",
                 "--random-padding-spikes", "10"]
        manifest = work / "manifest.json"
        old = json.loads(manifest.read_text()) if args.dir and manifest.exists() else None
        if old and (old["ranks"], old["updates"], old["seed"]) == (args.ranks, args.updates, args.seed) and all(
                Path(f).exists() for f in old["files"]):
            wall = 0.0  # reused
        else:
            status, wall, user, system, rss, _, err = run_timed(synth)
            if status != 0:
                print(f"scale_bench: stepprof synth failed:\n{err}", file=sys.stderr)
                return 2
        files = json.loads(manifest.read_text())["files"]
        size = sum(Path(f).stat().st_size for f in files)
        print(f"logs: {args.ranks} ranks x {args.updates} updates, {size / 1e9:.3f} GB in {len(files)} files "
              f"(written in {wall:.1f} s)")

        best = None
        for _ in range(max(1, args.runs)):
            res = run_timed([args.stepprof, "report", "--format", "json", str(logs)])
            if res[0] not in (0, 1):
                print(f"scale_bench: stepprof report failed ({res[0]}):\n{res[6]}", file=sys.stderr)
                return 2
            if best is None or res[1] < best[1]:
                best = res
        status, wall, user, system, rss, out, err = best
        report = json.loads(out)

        start = time.perf_counter()
        base = baseline(files)
        py_wall = time.perf_counter() - start

        problems = compare(report, base)
        for p in problems:
            print(f"DISAGREE {p}")
        print(f"agreement: {'yes' if not problems else 'NO'} (update time statistics, {len(base['device_median'])} "
              f"regions' device and host medians, padding fraction, slow-path updates)")
        if not args.check_only:
            updates = report["run"]["updates"]
            print(f"machine: {machine()}")
            print(f"stepprof report: {wall:.2f} s wall, {size / 1e9 / wall:.2f} GB/s, CPU {user:.2f} s user + "
                  f"{system:.2f} s system, peak RSS {rss / 1e6:.0f} MB = {rss / updates:.0f} bytes per update record "
                  f"({updates} updates; best of {max(1, args.runs)})")
            print(f"python baseline (json.loads, one process): {py_wall:.1f} s, {size / 1e9 / py_wall:.3f} GB/s")
            print(f"ratio: {py_wall / wall:.1f}x (target >= 30x)")
        return 1 if problems else 0
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
