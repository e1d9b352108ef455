#!/usr/bin/python3
"""How well `stepprof report` finds straggler stretches that `stepprof synth` injected.

For each setting of a grid (ranks, micro-batches per update, background fallback rate)
and each seed it writes logs with two random stragglers (`--random-stragglers 2`, a
factor of 1.3 to 1.5 over 20 to 40 updates) and logs without any, runs
`stepprof report --format json` and compares `cross_rank.episodes` with the manifest:
  - found: an injected stretch that an episode of its rank overlaps by half of the
    stretch or more (several episodes of the rank count together, so a split stretch is
    found, and its split is counted);
  - edge error: |first step - injected first| + |last step - injected last| over the
    episodes of that rank that overlap it (their outer edges) [updates];
  - false episodes: episodes that overlap no injected stretch of their rank, in the logs
    with stragglers and in those without.
Prints one line per setting and the totals; `--json FILE` writes them too.

Usage (after `cmake --build --preset release`):
  /usr/bin/python3 bench/episode_eval.py                # the grid below, 4 seeds each (minutes)
  /usr/bin/python3 bench/episode_eval.py --seeds 2 --ranks 8 --updates 200
Exit status 0; 2 on a usage or run error.
"""
import argparse
import itertools
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode not in (0, 1):
        sys.exit(f"episode_eval: {' '.join(map(str, cmd))} failed ({r.returncode}): {r.stderr[-2000:]}")
    return r


def episodes_of(binary, logs):
    rep = json.loads(run([binary, "report", "--format", "json", logs]).stdout)
    return [(e["rank"], e["first_step"], e["last_step"]) for e in rep["cross_rank"].get("episodes", [])]


def score(injected, found):
    """(found, edge errors of the found, splits, false episodes) for one job."""
    hits, edges, splits = 0, [], 0
    used = set()
    for s in injected:
        lo, hi = s["first_step"], s["last_step"]
        mine = [e for e in found if e[0] == s["rank"] and e[2] >= lo and e[1] <= hi]
        used.update(mine)
        covered = sum(min(hi, e[2]) - max(lo, e[1]) + 1 for e in mine)
        if covered * 2 >= hi - lo + 1:
            hits += 1
            edges.append(abs(min(e[1] for e in mine) - lo) + abs(max(e[2] for e in mine) - hi))
            splits += len(mine) > 1
    false = [e for e in found if e not in used]
    return hits, edges, splits, false


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--binary", default=str(ROOT / "build/release/stepprof"))
    ap.add_argument("--seeds", type=int, default=4)
    ap.add_argument("--ranks", type=int, nargs="*", default=[8, 16])
    ap.add_argument("--accumulation", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--fallback-rate", type=float, nargs="*", default=[0.0, 0.2, 0.5])
    ap.add_argument("--updates", type=int, default=300)
    ap.add_argument("--json")
    a = ap.parse_args()
    if not os.access(a.binary, os.X_OK):
        sys.exit(f"episode_eval: {a.binary} is not built (cmake --build --preset release)")
    rows = []
    totals = {"injected": 0, "found": 0, "edge": 0, "splits": 0, "false": 0, "false_null": 0}
    with tempfile.TemporaryDirectory(prefix="stepprof-episodes-") as tmp:
        for ranks, acc, rate in itertools.product(a.ranks, a.accumulation, a.fallback_rate):
            row = {"ranks": ranks, "accumulation": acc, "fallback_rate": rate, "injected": 0, "found": 0,
                   "edge": 0, "splits": 0, "false": 0, "false_null": 0}
            for seed in range(1, a.seeds + 1):
                common = ["--ranks", ranks, "--updates", a.updates, "--seed", seed, "--accumulation", acc,
                          "--fallback-rate", rate]
                logs, manifest, null = Path(tmp) / "s", Path(tmp) / "m.json", Path(tmp) / "n"
                for d in (logs, null):
                    shutil.rmtree(d, ignore_errors=True)  # (synth keeps other files of a directory)
                run([a.binary, "synth", "-o", logs, "--manifest", manifest, *common, "--random-stragglers", 2])
                injected = json.loads(manifest.read_text())["injections"]["stragglers"]
                hits, edges, splits, false = score(injected, episodes_of(a.binary, logs))
                row["injected"] += len(injected)
                row["found"] += hits
                row["edge"] += sum(edges)
                row["splits"] += splits
                row["false"] += len(false)
                run([a.binary, "synth", "-o", null, *common])
                row["false_null"] += len(episodes_of(a.binary, null))
            rows.append(row)
            for k in totals:
                totals[k] += row[k]
            print(f"ranks {ranks:3} accumulation {acc} fallback rate {rate:.1f}: found {row['found']:2} of "
                  f"{row['injected']:2}, edge error {row['edge'] / max(row['found'], 1):5.1f} updates per found, "
                  f"split {row['splits']}, false episodes {row['false']} (+{row['false_null']} in the logs "
                  f"without stragglers)", flush=True)
    print(f"total: found {totals['found']} of {totals['injected']}, edge error "
          f"{totals['edge'] / max(totals['found'], 1):.1f} updates per found, split {totals['splits']}, false "
          f"episodes {totals['false']} (+{totals['false_null']} without stragglers)")
    if a.json:
        Path(a.json).write_text(json.dumps({"rows": rows, "totals": totals}, indent=1) + "\n")


if __name__ == "__main__":
    main()
