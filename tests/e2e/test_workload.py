"""Issue 4's proof: the reference PyTorch workload (examples/pytorch/train_vlm.py) trained
for real on 4 gloo ranks with rank 2 made 2x slower, recorded with the Python recorder,
then `stepprof report --format json` on the four logs.

Expected waits are computed here independently of stepprof's cross-rank method: from the
raw logs, the injected delay shows as rank 2's extra time in its compute regions
(vision_forward, vggt_*, language_forward, backward) over each other rank's, per update.
"""
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

import pytest

BIN = os.environ["STEPPROF_BIN"]
SRC = Path(os.environ["STEPPROF_SOURCE_DIR"])
PYPATH = os.environ["STEPPROF_PYTHONPATH"]
COMPUTE = ("vision_forward", "vggt_batched", "vggt_single", "language_forward", "backward")
UPDATES = 6


def train(out, *extra):
    env = dict(os.environ, PYTHONPATH=PYPATH)
    r = subprocess.run([sys.executable, str(SRC / "examples/pytorch/train_vlm.py"), "--ranks", "4",
                        "--updates", str(UPDATES), "--out", str(out), *extra],
                       env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]


def report(out):
    r = subprocess.run([BIN, "report", "--format", "json", str(out)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def compute_ms(out, rank):
    lines = [json.loads(l) for l in (Path(out) / f"rank{rank}.jsonl").read_text().splitlines()]
    return {u["step"]: sum(u["cpu_call_ms"].get(k, 0.0) for k in COMPUTE) for u in lines[1:]}


@pytest.fixture(scope="module")
def slow_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("slow")
    train(out, "--slow-rank", "2", "--slow-factor", "2")
    return out, report(out)


def test_all_ranks_recorded(slow_run):
    out, rep = slow_run
    assert rep["run"]["ranks"] == [0, 1, 2, 3]
    assert rep["run"]["updates_per_rank"] == [{"rank": r, "updates": UPDATES} for r in range(4)]
    assert rep["cross_rank"]["available"] and rep["cross_rank"]["steps_aligned"] == UPDATES
    assert rep["cross_rank"]["comm_region"] == "gradient_allreduce"


def test_rank2_is_the_straggler_in_most_updates(slow_run):
    _, rep = slow_run
    x = rep["cross_rank"]
    slowest = [u["slowest_rank"] for u in x["per_update"]]
    assert slowest.count(2) >= 0.8 * len(slowest), slowest
    assert x["stragglers"] == [2]
    # The finding names rank 2: as a straggler, or, when another rank also ran at least 5 %
    # slower (4 ranks on 2 cores: rank 0 took 1.08x in one run), as the slowest of a
    # slow-ranks group, its time at stake theirs together.
    named = [f for f in rep["findings"] if (f["kind"], f["subject"]) == ("straggler", "rank 2")]
    group = x["slow_group"]
    if not named and group and len(group["slow_ranks"]) > 1:
        named = [f for f in rep["findings"] if f["kind"] == "slow-ranks"
                 and "the slowest of them is rank 2" in f["evidence"]]
        means = {p["rank"]: p["compute_ms"]["mean"] for p in x["per_rank"]}
        fast = statistics.median(means[r] for r in group["fast_ranks"])
        assert all(means[r] >= 1.05 * fast for r in group["slow_ranks"]), (means, group)
    assert len(named) == 1, rep["findings"]


def test_waits_match_the_injected_delay(slow_run):
    out, rep = slow_run
    per_rank = {p["rank"]: p for p in rep["cross_rank"]["per_rank"]}
    slow = compute_ms(out, 2)
    for r in (0, 1, 3):
        mine = compute_ms(out, r)
        expected = statistics.median(slow[s] - mine[s] for s in slow)
        got = per_rank[r]["wait_ms"]["median"]
        # The wait also absorbs rank-to-rank differences outside the compute regions
        # (data loading, the optimizer); allow 35 % of the delay.
        assert got == pytest.approx(expected, rel=0.35), (r, got, expected)
    assert per_rank[2]["wait_ms"]["median"] == 0


def test_single_rank_estimate_agrees_with_cross_rank(slow_run):
    """The single-rank estimate (each rank's own log) is a lower bound of the cross-rank
    wait and puts the straggler lowest."""
    _, rep = slow_run
    per_rank = {p["rank"]: p for p in rep["cross_rank"]["per_rank"]}
    single = {r: p["single_rank_wait_median_ms"] for r, p in per_rank.items()}
    assert all(v is not None for v in single.values())
    assert single[2] == min(single.values())
    for r in (0, 1, 3):
        assert single[r] <= per_rank[r]["wait_ms"]["median"] * 1.1 + 20
        # Clearly above the straggler's: measured 3.3x to 16x (4 ranks on 2 cores: a rank
        # descheduled inside its all-reduce shows some wait of its own; 5x failed once in CI).
        assert single[r] > 2 * max(single[2], 1.0)
