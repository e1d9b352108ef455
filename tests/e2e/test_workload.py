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
UPDATES = 10


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


def own_work_ms(out, rank):
    """wall_ms minus the communication region's host time, per step: the doc's own work."""
    lines = [json.loads(l) for l in (Path(out) / f"rank{rank}.jsonl").read_text().splitlines()]
    return {u["step"]: u["wall_ms"] - u["cpu_call_ms"].get("gradient_allreduce", 0.0) for u in lines[1:]}


def comm_ms(out, rank):
    """The communication region's host time, per step."""
    lines = [json.loads(l) for l in (Path(out) / f"rank{rank}.jsonl").read_text().splitlines()]
    return {u["step"]: u["cpu_call_ms"].get("gradient_allreduce", 0.0) for u in lines[1:]}


def test_waits_follow_their_definition(slow_run):
    """docs/report-json.md: a rank's wait in an update is the slowest rank's own work
    (wall_ms minus communication) minus its own, at most its own communication time (the
    ranks' update clocks do not start together: 4 processes on 2 cores); recomputed here
    from the raw logs."""
    out, rep = slow_run
    per_rank = {p["rank"]: p for p in rep["cross_rank"]["per_rank"]}
    own = {r: own_work_ms(out, r) for r in range(4)}
    comm = {r: comm_ms(out, r) for r in range(4)}
    for r in range(4):
        waits = [min(max(own[q][s] for q in range(4)) - own[r][s], comm[r][s]) for s in own[r]]
        assert per_rank[r]["wait_ms"]["median"] == pytest.approx(statistics.median(waits), abs=1e-6), r


def test_waits_match_the_injected_delay(slow_run):
    """The injected delay shows as rank 2's extra time in the compute regions; the wait
    also absorbs rank-to-rank differences outside them (data loading, the optimizer, and
    4 ranks sharing 2 cores). Measured on this VM, with the tests running beside builds:
    0.86x to 1.13x of the delay in 12 runs of 10 updates; with 6 updates it was 0.66x to
    1.47x in 25 runs, and 1.41x failed CI's former bound of 1.35x."""
    out, rep = slow_run
    per_rank = {p["rank"]: p for p in rep["cross_rank"]["per_rank"]}
    slow = compute_ms(out, 2)
    for r in (0, 1, 3):
        mine = compute_ms(out, r)
        delay = statistics.median(slow[s] - mine[s] for s in slow)
        got = per_rank[r]["wait_ms"]["median"]
        assert delay > 0, (r, delay)
        assert 0.7 * delay <= got <= 1.5 * delay, (r, got, delay)
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
