"""What-if predictions against real runs of the reference workload: the small version of
the experiment in docs/whatif-validation.md (tests/e2e/whatif_experiment.py runs it).

Each comparison trains two runs of examples/pytorch/train_vlm.py side by side (same seed,
each on its own half of the CPUs, trading halves every few seconds so that both see the
same machine load), predicts one run's median update time from the other run's logs, and
asserts the prediction is within 10 % of the measured median (the issue's tolerance).

The build machine is shared: another job's load can change between the updates of a
pair. A comparison that misses is run again on a fresh pair, up to three times, and fails when
all miss (every attempt is printed). An attempt where whatif predicts nothing (a cost model
that load made miss its held-out error threshold: "not available", exit status 3) is a miss. Logs stay in $STEPPROF_TEST_OUT."""
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import whatif_experiment as ex  # noqa: E402

BIN = os.environ["STEPPROF_BIN"]
OUT = Path(os.environ.get("STEPPROF_TEST_OUT", "whatif-validation-out"))
TOLERANCE = 0.10
ATTEMPTS = 3


def env():
    e = dict(os.environ)
    assert "PYTHONPATH" in e, "needs PYTHONPATH=<build>/python (the stepprof package)"
    return e


def within_tolerance(run):
    """Runs `run(attempt)` up to ATTEMPTS times; returns every result, asserts one is within."""
    results = []
    for attempt in range(1, ATTEMPTS + 1):
        r = run(attempt)
        results.append(r)
        print(json.dumps(r, indent=1), flush=True)
        if not r["available"]:
            continue
        beats = abs(r["error_fraction"]) < abs(r.get("baseline_error_fraction", float("inf")))
        if abs(r["error_fraction"]) <= TOLERANCE and (beats or not r.get("must_beat_baseline")):
            return results
    last = results[-1]
    raise AssertionError(
        f"{last['scenario']}: every attempt missed the {TOLERANCE:.0%} tolerance"
        + (" or was no closer to the measured run than the unchanged baseline" if last.get("must_beat_baseline") else "")
        + ": " + "; ".join(describe(r) for r in results))


def describe(r: dict) -> str:
    if not r["available"]:
        return f"nothing predicted ({r['why_not']})"
    return (f"predicted {r['predicted_median_ms']:.0f} ms, measured {r['measured_median_ms']:.0f} ms "
            f"({r['error_fraction']:+.1%}; unchanged baseline {r.get('baseline_error_fraction', float('nan')):+.1%})")


def test_batched_geometry_group_predicts_the_by_frames_run():
    # Two ranks: each run's ranks share one CPU; 30 updates (the first left out), 4 samples
    # per micro-batch (the workload's default: both paths run often enough to be priced).
    def run(attempt):
        # The vggt_single path's cost model here has a held-out error of 42-58 % of its mean
        # (48 ms per update, timed on a CPU that two ranks share), around whatif's default
        # gate of 50 %: in one CI run all three attempts predicted nothing (55-58 %). The
        # comparison checks the prediction, so it admits models up to 75 %.
        r = ex.batched_geometry(BIN, OUT / f"batched-geometry-{attempt}", 30, 2, 0, env(), threshold=0.75)
        # The change is small next to the tolerance here, so the prediction must also be
        # closer to the measured run than "nothing changes" (the unchanged baseline) is.
        r["must_beat_baseline"] = True
        if r["available"]:
            r["baseline_error_fraction"] = r["baseline_median_ms"] / r["measured_median_ms"] - 1
        return r

    within_tolerance(run)


def test_balanced_ranks_predicts_the_run_without_the_slow_rank():
    # Four ranks (the median rank's speed needs three or more), rank 2 twice as slow.
    def run(attempt):
        r = ex.balanced_ranks(BIN, OUT / f"balanced-ranks-{attempt}", 20, 4, 0, env(), slow_rank=2, slow_factor=2.0)
        # The slow rank must cost more than the tolerance, so that predicting no change would
        # fail. A pair in which it did not (machine load hid it: 2594 against 2544 ms in one
        # clean-clone CI run) is a miss, tried again, not a failure of every attempt at once.
        if r["available"] and not r["baseline_median_ms"] > (1 + TOLERANCE) * r["measured_median_ms"]:
            r["available"] = False
            r["why_not"] = (f"the slow rank cost less than {TOLERANCE:.0%} in this pair: {r['baseline_median_ms']:.0f} "
                            f"against {r['measured_median_ms']:.0f} ms")
        return r

    within_tolerance(run)
