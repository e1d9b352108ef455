#!/usr/bin/env python3
"""The what-if validation experiment (docs/whatif-validation.md): predictions of
`stepprof whatif` from one run of the reference workload, against the measured update time
of another run that makes the change for real.

  batched-geometry: predict `batched-geometry --variant group` from a `--sampler random` run;
                    measure a `--sampler by-frames` run.
  balanced-ranks:   predict `balanced-ranks` from a `--slow-rank R --slow-factor F` run;
                    measure a run without the slow rank.

The two runs of a comparison train at the same time, each pinned to its own half of the
CPUs, and trade halves every few seconds: both see the same machine load (other jobs,
the other run), and neither runs faster because the other finished first. Both use the
same seed. The first update (data-loader start-up) is left out of both.

Usage (prints one JSON object per comparison):
  PYTHONPATH=build/release/python /usr/bin/python3 tests/e2e/whatif_experiment.py \\
      --stepprof build/release/stepprof --out /tmp/whatif-validation --updates 40
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

SOURCE = Path(__file__).resolve().parents[2]
WORKLOAD = SOURCE / "examples" / "pytorch" / "train_vlm.py"
PYTHON = "/usr/bin/python3"


def descendants(pid: int) -> list[int]:
    """pid and every process below it (from /proc)."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def pin(pid: int, cpus: set[int]) -> None:
    """Sets the CPU affinity of every thread of pid and its descendants."""
    for p in descendants(pid):
        try:
            threads = [int(t) for t in os.listdir(f"/proc/{p}/task")]
        except OSError:
            continue
        for t in threads:
            try:
                os.sched_setaffinity(t, cpus)
            except OSError:
                pass  # gone, or not ours


def run_pair(cmd_a: list[str], cmd_b: list[str], env: dict, swap_s: float = 4.0, timeout_s: float = 900) -> None:
    """Runs both commands at once, on alternating halves of the CPUs; raises if one fails."""
    cpus = sorted(os.sched_getaffinity(0))
    halves = [set(cpus[: len(cpus) // 2]), set(cpus[len(cpus) // 2:])] if len(cpus) >= 2 else None
    procs = [subprocess.Popen(c, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for c in (cmd_a, cmd_b)]
    start, turn = time.monotonic(), 0
    try:
        while any(p.poll() is None for p in procs):
            if halves:
                for i, p in enumerate(procs):
                    if p.poll() is None:
                        pin(p.pid, halves[(i + turn) % 2])
            turn += 1
            deadline = time.monotonic() + swap_s
            while time.monotonic() < deadline and any(p.poll() is None for p in procs):
                time.sleep(0.1)
            if time.monotonic() - start > timeout_s:
                raise TimeoutError(f"the workload runs took more than {timeout_s} s")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
    for p, c in zip(procs, (cmd_a, cmd_b)):
        out = p.stdout.read() if p.stdout else ""
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(c)} failed ({p.returncode}):\n{out[-3000:]}")


WORKERS = 1  # data-loader worker processes per rank (--workers)


def workload(out: Path, updates: int, ranks: int, seed: int, *extra: str) -> list[str]:
    return [PYTHON, str(WORKLOAD), "--ranks", str(ranks), "--updates", str(updates), "--seed", str(seed),
            "--workers", str(WORKERS), "--out", str(out), *extra]


def stepprof_json(binary: str, *args, ok=(0,)) -> dict:
    """The JSON stepprof prints; raises RuntimeError for an exit status not in `ok`."""
    r = subprocess.run([binary, *map(str, args), "--format", "json"], capture_output=True, text=True, check=False)
    if r.returncode not in ok:
        raise RuntimeError(f"stepprof {' '.join(map(str, args))} failed ({r.returncode}): {r.stderr}")
    return json.loads(r.stdout)


def compare(binary: str, scenario: str, predict_from: Path, measure: Path, *whatif_args: str) -> dict:
    """Predicted median update time (whatif on `predict_from`) against the measured one
    (stepprof report on `measure`), both over steps 2 and later.

    When whatif predicts nothing (exit status 3: e.g. a path's cost model missed its
    held-out error threshold because the shared machine's load changed within the run),
    the result says so ("available": false, "why_not") instead of raising: a caller that
    retries on a fresh pair counts it as a missed attempt."""
    w = stepprof_json(binary, "whatif", scenario, *whatif_args, "--steps", "2:", predict_from, ok=(0, 3))
    available = [p for p in w["predictions"] if p["available"]]
    if not available:
        return {"scenario": scenario, "predicted_from": str(predict_from), "measured_on": str(measure),
                "available": False, "why_not": "; ".join(p["why_not"] for p in w["predictions"])}
    (p,) = available
    measured = stepprof_json(binary, "report", "--steps", "2:", measure)["update_time"]["update_ms"]["median"]
    predicted = p["predicted_update_ms"]
    return {
        "scenario": scenario + (f" ({p['variant']})" if p["variant"] else ""),
        "predicted_from": str(predict_from),
        "measured_on": str(measure),
        "baseline_median_ms": p["measured_update_ms"]["median"],
        "predicted_median_ms": predicted["median"],
        "predicted_interval_ms": [predicted["low"], predicted["high"]],
        "measured_median_ms": measured,
        "error_fraction": predicted["median"] / measured - 1,
        "available": True,
    }


def batched_geometry(binary: str, out: Path, updates: int, ranks: int, seed: int, env: dict,
                     micro_batch: int = 4, threshold: float | None = None) -> dict:
    """`threshold`: whatif --threshold (the held-out error up to which a cost model is
    used), or None for its default."""
    a, b = out / "random", out / "by-frames"
    mb = ("--micro-batch", str(micro_batch))
    run_pair(workload(a, updates, ranks, seed, "--sampler", "random", *mb),
             workload(b, updates, ranks, seed, "--sampler", "by-frames", *mb), env)
    extra = ("--threshold", str(threshold)) if threshold is not None else ()
    return compare(binary, "batched-geometry", a, b, "--variant", "group", *extra)


def balanced_ranks(binary: str, out: Path, updates: int, ranks: int, seed: int, env: dict, slow_rank: int,
                   slow_factor: float, micro_batch: int = 4, slow_mode: str = "spin") -> dict:
    a, b = out / "slow", out / "even"
    mb = ("--micro-batch", str(micro_batch))
    run_pair(workload(a, updates, ranks, seed, "--slow-rank", str(slow_rank), "--slow-factor", str(slow_factor),
                      "--slow-mode", slow_mode, *mb),
             workload(b, updates, ranks, seed, *mb), env)
    return compare(binary, "balanced-ranks", a, b)


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--stepprof", required=True, help="the stepprof binary")
    p.add_argument("--out", required=True, type=Path, help="directory for the runs' logs")
    p.add_argument("--updates", type=int, default=40)
    p.add_argument("--ranks", type=int, default=4)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--slow-rank", type=int, default=2)
    p.add_argument("--slow-factor", type=float, default=2.0)
    p.add_argument("--workers", type=int, default=1, help="data-loader worker processes per rank")
    p.add_argument("--micro-batch", type=int, default=4, help="samples per micro-batch (the workload's default: 4)")
    p.add_argument("--slow-mode", choices=["sleep", "spin"], default="spin",
                   help="how the slow rank is slow (train_vlm.py --slow-mode); spin keeps the machine as busy")
    p.add_argument("--only", choices=["batched-geometry", "balanced-ranks"])
    args = p.parse_args(argv)
    global WORKERS
    WORKERS = args.workers
    env = dict(os.environ)
    env.setdefault("PYTHONPATH", str(SOURCE / "build" / "release" / "python"))
    results = []
    if args.only in (None, "batched-geometry"):
        results.append(batched_geometry(args.stepprof, args.out / "batched-geometry", args.updates, args.ranks,
                                        args.seed, env, args.micro_batch))
        print(json.dumps(results[-1]), flush=True)
    if args.only in (None, "balanced-ranks"):
        results.append(balanced_ranks(args.stepprof, args.out / "balanced-ranks", args.updates, args.ranks, args.seed,
                                      env, args.slow_rank, args.slow_factor, args.micro_batch,
                                      args.slow_mode))
        print(json.dumps(results[-1]), flush=True)
    return 0 if all(r["available"] and abs(r["error_fraction"]) <= 0.10 for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
