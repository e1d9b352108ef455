"""`stepprof whatif` end to end: cost models on the bundled real log and on a generated
two-rank log, checked against least squares computed here with numpy; the pad variant's
prediction replayed here by the formulas of docs/whatif.md; errors and output formats.
"""
import json
import math
import os
import re
import shutil
import random
import statistics
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fixtures as fx  # noqa: E402

BIN = os.environ["STEPPROF_BIN"]


def run(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=120)


def whatif_json(*args):
    r = run("whatif", *args, "--format", "json")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def model(doc, region):
    (m,) = [m for m in doc["cost_models"]["regions"] if m["region"] == region]
    return m


def through_origin(x, y):
    """NNLS with one column: max(0, x.y / x.x); leave-one-out errors by refitting."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    beta = max(0.0, x @ y / (x @ x))
    loo = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        b = max(0.0, x[keep] @ y[keep] / (x[keep] @ x[keep]))
        loo.append(y[i] - b * x[i])
    fitted = beta * x
    r2 = 1 - np.sum((y - fitted) ** 2) / np.sum((y - y.mean()) ** 2)
    return beta, float(np.sqrt(np.mean(np.square(loo)))), float(r2)


# ---- the bundled real log -----------------------------------------------------------------

def test_real_log_costs_per_frame_and_per_token_slot():
    _, updates = fx.real_records()
    doc = whatif_json("batched-geometry", "--hierarchy", fx.HIER, fx.LOG)
    for region, counter, unit in [("vggt_single", "vggt_single_frames", "frame"),
                                  ("vggt_batched", "vggt_batched_frames", "frame"),
                                  ("language_forward", "token_slots", "token slot")]:
        x = [u["counts"].get(counter, 0) for u in updates]
        y = [u["cuda_stream_ms"].get(region, 0.0) for u in updates]
        beta, loo, r2 = through_origin(x, y)
        m = model(doc, region)
        assert m["clock"] == "device"
        assert [t["feature"] for t in m["terms"]] == [counter], m
        assert m["terms"][0]["unit"] == unit
        assert m["terms"][0]["ms_per_unit"] == pytest.approx(beta, rel=1e-9)
        assert m["heldout_rmse_ms"] == pytest.approx(loo, rel=1e-9)
        assert m["heldout_fraction"] == pytest.approx(loo / np.mean(y), rel=1e-9)
        assert m["r2"] == pytest.approx(r2, rel=1e-9, abs=1e-12)
        assert m["usable"]
    # The published figures of the real run, read off the log by hand: ~46 ms per frame on
    # the per-sample path, ~25 ms per frame batched (1,786 ms per call of 72 frames).
    assert model(doc, "vggt_single")["terms"][0]["ms_per_unit"] == pytest.approx(46.3, abs=0.05)
    assert model(doc, "vggt_batched")["terms"][0]["ms_per_unit"] == pytest.approx(1786 / 72, abs=0.05)
    comm = model(doc, "backward_and_communication")
    assert not comm["usable"] and "communication" in comm["why_not"]


def test_real_log_one_rank_range():
    _, updates = fx.real_records()
    doc = whatif_json("batched-geometry", "--variant", "pad", "--hierarchy", fx.HIER, fx.LOG)
    assert doc["ranks"] == 1 and not doc["microbatch_detail"]
    (p,) = doc["predictions"]
    assert p["available"] and p["range"]
    assert p["measured_update_ms"]["median"] == pytest.approx(statistics.median(u["wall_ms"] for u in updates))
    # Every rank improves alike: the whole change; only this rank: its saving is absorbed by
    # waiting, so never below the measured time where the change is a saving.
    for u in p["updates"]:
        assert u["only_this_rank_ms"] >= min(u["measured_ms"], u["predicted_ms"]) - 1e-6
    assert p["predicted_update_ms"]["median"] < p["measured_update_ms"]["median"]
    lo, hi = p["predicted_update_ms"]["low"], p["predicted_update_ms"]["high"]
    assert lo <= p["predicted_update_ms"]["median"] <= hi
    assert any("no per-micro-batch detail" in n for n in p["notes"])
    assert p["samples_per_update"] == 64  # global_batch of the config
    assert p["throughput"]["measured_samples_per_s"] == pytest.approx(64 / p["measured_update_ms"]["median"] * 1000)



def test_real_log_saving_per_1000_updates_is_the_mean_saving():
    # no-padding on the bundled log: language_forward costs a fitted ms per token slot, so
    # each update saves that cost times its padded slots; the saving varies between
    # updates, and 1,000 updates save 1,000 times its mean (not the difference of the
    # medians, which is larger here).
    _, updates = fx.real_records()
    doc = whatif_json("no-padding", "--hierarchy", fx.HIER, fx.LOG)
    (p,) = doc["predictions"]
    per_slot = model(doc, "language_forward")
    (term,) = [t for t in per_slot["terms"] if t["feature"] == "token_slots"]
    padded = [u["counts"]["token_slots"] - u["counts"]["valid_tokens"] for u in updates]
    mean_saving = term["ms_per_unit"] * statistics.fmean(padded)
    assert p["saved_mean_ms_per_update"] == pytest.approx(mean_saving, rel=1e-9)
    assert p["saved_s_per_1000_updates"] == pytest.approx(mean_saving, rel=1e-9)
    assert p["saved_ms_per_update"] > mean_saving * 1.1  # the medians' difference, documented as such

def test_a_model_that_explains_little_is_a_weak_point():
    # language_forward's cost per token slot prices no-padding with a 1.1 % held-out error
    # but explains little of its variation (its time hardly varies): the prediction rests
    # on proportionality, which the output did not say. R² worked out here.
    _, updates = fx.real_records()
    x = [u["counts"]["token_slots"] for u in updates]
    y = [u["cuda_stream_ms"]["language_forward"] for u in updates]
    _, _, r2 = through_origin(x, y)
    assert r2 < 0.3
    doc = whatif_json("no-padding", "--hierarchy", fx.HIER, fx.LOG)
    (p,) = doc["predictions"]
    assert any(f"the model of language_forward explains {r2 * 100:.0f} % of its variation over these updates "
               f"(R² {r2:.2f})" in n for n in p["notes"]), p["notes"]


def test_a_choice_of_terms_that_one_update_sets_is_a_weak_point():
    # On the bundled log language_forward's cost per token slot beats its cost per call
    # (the model to beat) by 8.7 % of held-out error; without some single updates by less
    # than --min-gain 5 %, and then no-padding has no model that prices its change. The
    # bootstrap interval, refitting the chosen terms only, did not show that (found by a
    # helper). The updates that flip the first round are worked out here with numpy.
    _, updates = fx.real_records()
    slots = np.array([u["counts"]["token_slots"] for u in updates], float)
    calls = np.array([u["calls"]["language_forward"] for u in updates], float)
    y = np.array([u["cuda_stream_ms"]["language_forward"] for u in updates], float)
    flips = []
    for i, u in enumerate(updates):
        keep = np.arange(len(y)) != i
        _, by_slots, _ = through_origin(slots[keep], y[keep])
        _, by_calls, _ = through_origin(calls[keep], y[keep])
        if not by_slots <= (1 - 0.05) * by_calls:
            flips.append(u["step"])
    assert flips, "the bundled log no longer has such updates"
    doc = whatif_json("no-padding", "--hierarchy", fx.HIER, fx.LOG)
    m = model(doc, "language_forward")
    assert [t["feature"] for t in m["terms"]] == ["token_slots"]
    assert [u["step"] for u in m["choice"]["set_by"]] == flips, (m["choice"], flips)
    assert all(u["terms"] == ["calls"] for u in m["choice"]["set_by"]), m["choice"]
    (p,) = doc["predictions"]
    steps = ", ".join(map(str, flips[:-1])) + " or " + str(flips[-1])
    assert any(n.startswith(f"the model of language_forward (token_slots) is a choice that single updates set (of "
                            f"{len(updates)} updates): leaving out any one of step {steps} alone, the selection "
                            "chooses calls instead, which does not price the change") for n in p["notes"]), p["notes"]
    # A choice that held: no update sets it.
    assert model(doc, "deepspeed_step")["choice"] == {"set_by": []}
    # Without one of those steps no model prices no-padding; the message says the verdict
    # rests on a choice that single updates set (found by a review).
    kept = [l for l in fx.LOG.read_text().splitlines() if f'"step": {flips[0]},' not in l and
            f'"step":{flips[0]},' not in l]
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"whatif-without-{os.getpid()}.jsonl"
    log.write_text("\n".join(kept) + "\n")
    try:
        r = run("whatif", "no-padding", "--hierarchy", fx.HIER, log)
    finally:
        log.unlink()
    assert r.returncode == 3 and "no usable cost model of a leaf region uses the work that changes" in r.stderr
    assert "is a choice that single updates set" in r.stderr and "which prices the change" in r.stderr, r.stderr


# ---- a generated two-rank log with per-micro-batch detail ----------------------------------

FAST, SLOW, SLOT, PER_CALL = 2.0, 5.0, 0.5, 50.0  # ms per frame, per frame, per token slot, per call


def generate(directory: Path, seed=7, updates=12):
    """Two ranks; each update has 2 micro-batches of 4 samples. A micro-batch whose samples
    share one frame count runs `fast` once, else `slow` once per sample. Times: fast and
    slow at FAST / SLOW ms per frame with 1 % noise, lang at SLOT ms per token slot, other
    at PER_CALL ms per call; both ranks leave `sync` together 5 ms after the slower one."""
    rng = random.Random(seed)
    per_rank = {0: [], 1: []}
    for step in range(1, updates + 1):
        own = {}
        for r in (0, 1):
            mbs = []
            for _ in range(2):
                if rng.random() < 0.4:
                    f = rng.choice([9, 9, 9, 4, 6])
                    frames = [f] * 4
                else:
                    frames = [rng.choice([9, 9, 9, 9, 1, 2, 3, 5, 7, 8]) for _ in range(4)]
                tokens = [4 * f + rng.randint(20, 90) for f in frames]
                mbs.append({"path": "fast" if len(set(frames)) == 1 else "slow", "frames": frames, "tokens": tokens,
                            "padded_length": max(tokens)})
            ff = sum(sum(m["frames"]) for m in mbs if m["path"] == "fast")
            sf = sum(sum(m["frames"]) for m in mbs if m["path"] == "slow")
            slots = sum(4 * m["padded_length"] for m in mbs)
            valid = sum(sum(m["tokens"]) for m in mbs)
            t = {"fast": FAST * ff * (1 + 0.01 * rng.gauss(0, 1)) if ff else None,
                 "slow": SLOW * sf * (1 + 0.01 * rng.gauss(0, 1)) if sf else None,
                 "lang": SLOT * slots, "other": PER_CALL * 2}
            geometry = (t["fast"] or 0) + (t["slow"] or 0)
            own[r] = (mbs, t, geometry + t["lang"] + t["other"], ff, sf, slots, valid)
        slowest = max(v[2] for v in own.values())
        for r, (mbs, t, c, ff, sf, slots, valid) in own.items():
            sync = slowest - c + 5
            host = {"step": c + sync, "geometry": (t["fast"] or 0) + (t["slow"] or 0), "lang": t["lang"],
                    "other": t["other"], "sync": sync}
            calls = {"step": 1, "geometry": 2, "lang": 2, "other": 2, "sync": 1}
            parents = {"step": None, "geometry": "step", "lang": "step", "other": "step", "sync": "step"}
            n_fast = sum(m["path"] == "fast" for m in mbs)
            if t["fast"] is not None:
                host["fast"], calls["fast"], parents["fast"] = t["fast"], n_fast, "geometry"
            if t["slow"] is not None:
                host["slow"], calls["slow"], parents["slow"] = t["slow"], 4 * (2 - n_fast), "geometry"
            counts = {"micro_steps": 2, "samples": 8, "frames": ff + sf, "token_slots": slots, "valid_tokens": valid,
                      "fast_samples": 4 * n_fast, "fast_frames": ff, "fast_microbatches": n_fast,
                      "slow_samples": 4 * (2 - n_fast), "slow_frames": sf, "slow_microbatches": 2 - n_fast}
            hist = {}
            for m in mbs:
                for f in m["frames"]:
                    hist[str(f)] = hist.get(str(f), 0) + 1
            per_rank[r].append({"type": "update", "rank": r, "step": step, "wall_ms": c + sync + 1.0,
                                "cpu_call_ms": host, "calls": calls, "parents": parents, "counts": counts,
                                "frame_histogram": hist, "microbatches": mbs})
    paths = []
    for r, recs in per_rank.items():
        config = {"type": "config", "rank": r, "world_size": 2, "micro_batch": 4, "accumulation": 2,
                  "region_alternatives": {"fast": "geometry", "slow": "geometry"},
                  "region_roles": {"sync": "communication"}}
        paths.append(fx.write_jsonl(directory / f"rank{r}.jsonl", [config, *recs]))
    return paths, per_rank


def feature_value(u, term, region, scenario=None):
    """The value of a model term's feature in update u, or after the pad variant (every
    micro-batch runs `fast` once with its frames padded to its largest)."""
    name, kind = term["feature"], term["kind"]
    if kind == "calls":
        if scenario == "pad":
            return {"fast": len(u["microbatches"]), "slow": 0}.get(region, u["calls"].get(region, 0))
        return u["calls"].get(region, 0)
    if kind == "path_frames_squared":
        path = name[: -len("_frames_sq")]
        if scenario == "pad":
            return sum(len(m["frames"]) * max(m["frames"]) ** 2 for m in u["microbatches"]) if path == "fast" else 0
        return sum(f * f for m in u["microbatches"] if m["path"] == path for f in m["frames"])
    if kind == "frames_squared":
        return sum(int(f) ** 2 * n for f, n in u["frame_histogram"].items())
    if scenario == "pad" and name.startswith(("fast_", "slow_")):
        if name.startswith("slow_"):
            return 0
        return {"fast_frames": sum(len(m["frames"]) * max(m["frames"]) for m in u["microbatches"]),
                "fast_samples": u["counts"]["samples"], "fast_microbatches": len(u["microbatches"])}[name]
    return u["counts"].get(name, 0)


def lstsq_loo(x, y):
    """Least squares (no constraint: the tests' data give positive costs, where NNLS is the
    same) and its leave-one-out errors by refitting."""
    x, y = np.asarray(x, float), np.asarray(y, float)
    beta = np.linalg.lstsq(x, y, rcond=None)[0]
    loo = [y[i] - x[i] @ np.linalg.lstsq(x[np.arange(len(y)) != i], y[np.arange(len(y)) != i], rcond=None)[0]
           for i in range(len(y))]
    return beta, float(np.sqrt(np.mean(np.square(loo))))


def test_generated_log_models_match_numpy(tmp_path):
    paths, per_rank = generate(tmp_path)
    doc = whatif_json("batched-geometry", "--variant", "pad", *paths)
    ups = per_rank[0] + per_rank[1]  # stepprof's order: rank, then step
    for region, counter in [("fast", "fast_frames"), ("slow", "slow_frames"), ("lang", "token_slots")]:
        m = model(doc, region)
        # The cost per unit of the path's own work (or per token slot) comes first; a term
        # more is kept only where it lowers the held-out error by 5 %.
        assert m["terms"][0]["feature"] == counter, m
        x = [[feature_value(u, t, region) for t in m["terms"]] for u in ups]
        y = [u["cpu_call_ms"].get(region, 0.0) for u in ups]
        beta, loo = lstsq_loo(x, y)
        assert [t["ms_per_unit"] for t in m["terms"]] == pytest.approx(beta, rel=1e-8)
        assert m["heldout_rmse_ms"] == pytest.approx(loo, rel=1e-6)
        if len(m["terms"]) == 1:
            assert m["r2"] == pytest.approx(through_origin([r[0] for r in x], y)[2], rel=1e-9)
    assert model(doc, "fast")["terms"][0]["ms_per_unit"] == pytest.approx(FAST, rel=0.02)
    assert model(doc, "lang")["terms"] == [{"feature": "token_slots", "kind": "counter", "unit": "token slot",
                                            "ms_per_unit": pytest.approx(SLOT)}]
    (other,) = model(doc, "other")["terms"]
    assert other["kind"] == "calls" and other["ms_per_unit"] == pytest.approx(PER_CALL)
    assert doc["cost_models"]["microbatch_frames"] is True


def test_generated_log_pad_prediction_replayed_in_python(tmp_path):
    """docs/whatif.md: D = sum over leaf models of t(x') - t(x); with every rank's log
    U'(k) = max_r (c + D) + (U(k) - max_r c), c = wall_ms - sync."""
    paths, per_rank = generate(tmp_path)
    doc = whatif_json("batched-geometry", "--variant", "pad", *paths)
    models = {r: model(doc, r)["terms"] for r in ("fast", "slow")}

    def change(u, region):
        return sum(t["ms_per_unit"] * (feature_value(u, t, region, "pad") - feature_value(u, t, region))
                   for t in models[region])

    measured, predicted = [], []
    fast_change = []
    for k in range(len(per_rank[0])):
        rows = [per_rank[r][k] for r in (0, 1)]
        u = max(x["wall_ms"] for x in rows)
        cs, news = [], []
        for x in rows:
            c = x["wall_ms"] - x["cpu_call_ms"]["sync"]
            cs.append(c)
            news.append(c + change(x, "fast") + change(x, "slow"))
        measured.append(u)
        predicted.append(max(news) + (u - max(cs)))
    for r in (0, 1):
        fast_change += [change(x, "fast") for x in per_rank[r]]
    (p,) = doc["predictions"]
    assert p["available"] and not p["range"], p
    assert [x["predicted_ms"] for x in p["updates"]] == pytest.approx(predicted, rel=1e-9)
    assert p["measured_update_ms"]["median"] == pytest.approx(statistics.median(measured), rel=1e-12)
    assert p["predicted_update_ms"]["median"] == pytest.approx(statistics.median(predicted), rel=1e-9)
    assert p["saved_ms_per_update"] == pytest.approx(statistics.median(measured) - statistics.median(predicted))
    assert p["predicted_update_ms"]["low"] <= p["predicted_update_ms"]["median"] <= p["predicted_update_ms"]["high"]
    (fast,) = [r for r in p["regions"] if r["region"] == "fast"]
    assert fast["change_ms"] == pytest.approx(np.mean(fast_change), rel=1e-9)
    assert p["samples_per_update"] == 16  # 8 samples per update on each of 2 ranks


def test_generated_log_group_variant_and_no_padding(tmp_path):
    paths, per_rank = generate(tmp_path)
    doc = whatif_json("batched-geometry", "--variant", "group", *paths)
    (p,) = doc["predictions"]
    assert p["available"]
    assert any("token slots follow from the drawn samples" in a for a in p["assumptions"])
    # (The random draws are of each update's micro-batches, not samples: "16 draws per
    # update" right after "every micro-batch keeps its size" read as 16 samples, a helper.)
    assert any("each update's micro-batches drawn 16 times at random, the predictions averaged" in a
               for a in p["assumptions"]), p["assumptions"]
    # The same seed gives the same draws; another seed other draws.
    again = whatif_json("batched-geometry", "--variant", "group", *paths)
    assert again["predictions"][0]["predicted_update_ms"] == p["predicted_update_ms"]
    other = whatif_json("batched-geometry", "--variant", "group", "--seed", "5", *paths)
    assert other["predictions"][0]["updates"] != p["updates"]
    # no-padding: lang costs SLOT per token slot, so D = SLOT x (valid - slots) per rank-update.
    nopad = whatif_json("no-padding", *paths)["predictions"][0]
    beta = model(doc, "lang")["terms"][0]["ms_per_unit"]
    for k, u in enumerate(nopad["updates"]):
        rows = [per_rank[r][k] for r in (0, 1)]
        cs = [x["wall_ms"] - x["cpu_call_ms"]["sync"] for x in rows]
        news = [c + beta * (x["counts"]["valid_tokens"] - x["counts"]["token_slots"]) for c, x in zip(cs, rows)]
        assert u["predicted_ms"] == pytest.approx(max(news) + (u["measured_ms"] - max(cs)), rel=1e-9)


def test_path_work_from_micro_batch_detail_when_the_log_has_no_path_counters(tmp_path):
    # A C++ engine that records each micro-batch's path and frames (the recorder's
    # microbatch()) and no <path>_frames counters: the cost models had only frames^2 and
    # calls for the paths and priced a linear cost badly. Each path here costs a fixed ms
    # per frame, so the models are exact and the pad variant's prediction is worked out
    # here: fast_path's new time is FAST_MS x 4 x the largest frame count of each
    # micro-batch, slow_path's is 0.
    fast_ms, slow_ms = 0.5, 2.0
    rnd = random.Random(5)
    hier = tmp_path / "h.txt"
    hier.write_text("geometry\n  fast_path alt=g\n  slow_path alt=g\n")
    records = [{"type": "config", "rank": 0, "world_size": 1}]
    for step in range(1, 41):
        mbs, dev = [], {"fast_path": 0.0, "slow_path": 0.0}
        for _ in range(2):
            path = "slow_path" if rnd.random() < 0.3 else "fast_path"
            frames = [rnd.choice([3, 5, 9]) for _ in range(4)]
            mbs.append({"path": path, "frames": frames})
            dev[path] += sum(frames) * (slow_ms if path == "slow_path" else fast_ms)
        dev = {k: v for k, v in dev.items() if v > 0}
        dev["geometry"] = dev.get("fast_path", 0.0) + dev.get("slow_path", 0.0)
        records.append({"type": "update", "rank": 0, "step": step, "wall_ms": dev["geometry"] + 5,
                        "cuda_stream_ms": dev, "calls": {k: 1 for k in dev}, "microbatches": mbs})
    log = fx.write_jsonl(tmp_path / "mb.jsonl", records)
    doc = whatif_json("batched-geometry", "--variant", "pad", "--bootstrap", "0", "--hierarchy", hier, log)
    for region, per_frame in [("fast_path", fast_ms), ("slow_path", slow_ms)]:
        (term,) = model(doc, region)["terms"]
        assert (term["feature"], term["kind"], term["unit"]) == (f"{region}_frames", "path_frames", "frame")
        assert term["ms_per_unit"] == pytest.approx(per_frame, rel=1e-9)
    assert {"fast_path_samples", "fast_path_microbatches"} <= set(model(doc, "fast_path")["candidates"])
    (p,) = doc["predictions"]
    assert p["available"], p["why_not"]
    news = []
    for u, rec in zip(p["updates"], records[1:]):
        new = rec["wall_ms"] - rec["cuda_stream_ms"].get("fast_path", 0) - rec["cuda_stream_ms"].get("slow_path", 0)
        new += fast_ms * sum(len(m["frames"]) * max(m["frames"]) for m in rec["microbatches"])
        assert (u["step"], u["predicted_ms"]) == (rec["step"], pytest.approx(new, rel=1e-9))
        news.append(new)
    saved = statistics.fmean(r["wall_ms"] for r in records[1:]) - statistics.fmean(news)
    assert p["saved_mean_ms_per_update"] == pytest.approx(saved, rel=1e-9)


def test_balanced_ranks_needs_several_ranks(tmp_path):
    paths, _ = generate(tmp_path)
    r = run("whatif", "balanced-ranks", paths[0])
    assert r.returncode == 3
    assert "needs every rank's log" in r.stderr
    doc = whatif_json("balanced-ranks", *paths)
    (p,) = doc["predictions"]
    assert p["available"] and len(p["ranks"]) == 2
    assert any("half corrected" in n for n in p["notes"])


def test_work_that_changes_in_a_parent_region_only_is_said(tmp_path):
    # A helper's engine: forward's own time follows the token slots (0.004 ms each) while
    # its one child, attention, takes a fixed 4 ms. The cost-model table listed forward as
    # used, at that cost, above "no usable cost model uses the work that changes".
    def write(name, token_bound):
        rng = random.Random(3)
        lines = [{"type": "config", "rank": 0, "world_size": 1}]
        for step in range(60):
            slots = rng.choice([1024, 2048, 3072, 4096])
            valid = int(slots * rng.uniform(0.5, 0.9))
            attention = 4 + rng.uniform(-0.05, 0.05)
            scaled = 8 + 0.004 * slots + rng.uniform(-0.1, 0.1)
            forward = attention + (scaled if token_bound == "forward" else 8)
            times = {"forward": forward, "attention": attention}
            if token_bound == "tokenize":
                times["tokenize"] = scaled  # (outside the nesting: no parents entry)
            lines.append({"type": "update", "rank": 0, "step": step, "wall_ms": forward + 25,
                          "cpu_call_ms": times, "parents": {"forward": None, "attention": "forward"},
                          "counts": {"token_slots": slots, "valid_tokens": valid, "samples": 4}})
        log = tmp_path / name
        log.write_text("".join(json.dumps(x) + "\n" for x in lines))
        return log

    log = write("parent.jsonl", "forward")
    doc = json.loads(run("whatif", "no-padding", "--format", "json", log).stdout)
    assert any(t["feature"] == "token_slots" for t in model(doc, "forward")["terms"])
    r = run("whatif", "no-padding", log)
    assert r.returncode == 3
    assert "no usable cost model of a leaf region uses the work that changes (token_slots)" in r.stderr
    assert "The models of forward use it, but it has child regions" in r.stderr, r.stderr
    # A region outside the nesting is no parent (a review: it was named one).
    log = write("outside.jsonl", "tokenize")
    doc = json.loads(run("whatif", "no-padding", "--format", "json", log).stdout)
    assert any(t["feature"] == "token_slots" for t in model(doc, "tokenize")["terms"])
    r = run("whatif", "no-padding", log)
    assert r.returncode == 3 and "no usable cost model of a leaf region" in r.stderr
    assert "The models of" not in r.stderr, r.stderr


# ---- command line ---------------------------------------------------------------------------

def test_text_and_markdown_outputs():
    r = run("whatif", "no-padding", "--hierarchy", fx.HIER, fx.LOG)
    assert r.returncode == 0, r.stderr
    for text in ("2. Cost models", "3. What if: no-padding", "held-out error", "predicted (only this rank)",
                 "predicted (every rank)", "per 1,000 updates", "0.0553 ms/token slot (token_slots)"):
        assert text in r.stdout, text
    m = run("whatif", "batched-geometry", "--format", "markdown", "--hierarchy", fx.HIER, fx.LOG)
    assert m.returncode == 0
    assert "## 3. What if: batched-geometry (pad)" in m.stdout
    assert "## 4. What if: batched-geometry (group)" in m.stdout
    # The cost models' last column is prose: left-aligned, as in the text output.
    lines = m.stdout.splitlines()
    head = lines.index("| region | used | mean ms | held-out error | R² | cost per unit of work |")
    assert lines[head + 1] == "|---|---:|---:|---:|---:|---|"


def test_usage_errors_and_no_data(tmp_path):
    assert run("whatif", "faster", fx.LOG).returncode == 2
    # A log given where the scenario goes: said so, not only "not in {batched-geometry, ...}".
    r = run("whatif", fx.LOG)
    assert r.returncode == 2 and "is a file or directory: give the scenario first" in r.stderr, r.stderr
    assert run("whatif", "no-padding", "--variant", "pad", fx.LOG).returncode == 2
    assert run("whatif", "batched-geometry", "--threshold", "-1", fx.LOG).returncode == 2
    # A group the nesting does not have is a usage error that names the groups it has.
    r = run("whatif", "batched-geometry", "--group", "nope", "--hierarchy", fx.HIER, fx.LOG)
    assert r.returncode == 2 and "nope" in r.stderr and "geometry" in r.stderr
    assert run("whatif", "batched-geometry", "--group", "geometry", "--hierarchy", fx.HIER, fx.LOG).returncode == 0
    # So is a path that is not one of the group's (it was exit 3, "not available").
    r = run("whatif", "batched-geometry", "--path", "nosuch", "--hierarchy", fx.HIER, fx.LOG)
    assert r.returncode == 2 and "paths: vggt_batched, vggt_single" in r.stderr, r.stderr
    # Options that do not apply, and numbers that make no sense, were taken silently:
    # NaN passed the range checks, and -1 and 10^23 were read as the seed 2^64 - 1.
    for args, said in ((("balanced-ranks", "--path", "x"), "--path goes with batched-geometry"),
                       (("no-padding", "--group", "geometry"), "--group goes with batched-geometry"),
                       (("no-padding", "--threshold", "nan"), "use a finite number"),
                       (("no-padding", "--min-gain", "nan"), "use a finite number"),
                       (("no-padding", "--threshold", "abc"), '"abc" is not a number'),
                       (("no-padding", "--threshold", "0.5x"), '"0.5x" is not a number'),
                       (("no-padding", "--min-gain", "2"), "use a number from 0 to 1"),
                       # (a fraction: 20 read as 2000 %, and --help said [0 - 100])
                       (("no-padding", "--threshold", "20"), "use a number from 0 to 10"),
                       (("no-padding", "--seed", "-1"), "use a whole number"),
                       (("no-padding", "--seed", "99999999999999999999999"), "use a whole number"),
                       (("no-padding", "--bootstrap", "200000"), "20 to 100000 replicates")):
        r = run("whatif", *args, "--hierarchy", fx.HIER, fx.LOG)
        assert r.returncode == 2 and said in r.stderr, (args, r.stderr)
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run("whatif", "no-padding", empty).returncode == 3
    # --format json still writes a document that says why (it wrote nothing).
    r = run("whatif", "no-padding", "--format", "json", empty)
    assert r.returncode == 3, r.stderr
    doc = json.loads(r.stdout)
    assert doc["schema"] == "stepprof.whatif/1" and doc["analyzed"] is False and "predictions" not in doc, doc
    assert any("nothing to analyze" in d["message"] for d in doc["diagnostics"]["items"]), doc
    # Without the nesting nothing can be replayed: exit 3 and the reason on stderr.
    r = run("whatif", "no-padding", fx.LOG)
    assert r.returncode == 3 and "nesting" in r.stderr
    # A rejected line is reported (exit 1) and the rest analyzed.
    bad = tmp_path / "bad.jsonl"
    bad.write_text(fx.LOG.read_text() + "{not json}\n")
    r = run("whatif", "no-padding", "--hierarchy", fx.HIER, bad)
    assert r.returncode == 1 and "What if: no-padding" in r.stdout
    # No prediction is exit 3 also when some input was rejected as well.
    r = run("whatif", "no-padding", tmp_path / "missing.jsonl", fx.LOG)
    assert r.returncode == 3 and "cannot read" in r.stderr and "not available" in r.stderr


def test_too_few_updates_is_the_reason_given_first(tmp_path):
    # With 2 updates stderr said "needs the region nesting" or "cannot tell which path of
    # group geometry is the cheaper one"; the reason was that no cost model can be fitted
    # on fewer than 5 updates (only the models table said so).
    lines = fx.LOG.read_text().splitlines(keepends=True)
    short = tmp_path / "short.jsonl"
    short.write_text("".join(lines[:3]))  # the config and 2 updates
    for args in (("no-padding",), ("batched-geometry",), ("no-padding", "--hierarchy", fx.HIER),
                 ("batched-geometry", "--hierarchy", fx.HIER)):
        r = run("whatif", *args, short)
        assert r.returncode == 3, (args, r.stderr)
        said = [l for l in r.stderr.splitlines() if "not available" in l]
        assert said and all("the cost models need at least 5 update records; the input holds 2" in l for l in said), (
            args, r.stderr)
        assert all(("nesting is needed" in l) == ("--hierarchy" not in args) for l in said), (args, r.stderr)


def test_no_padding_leaves_an_update_without_token_counters_as_measured(tmp_path):
    # An update without valid_tokens was packed to 0 token slots: it "saved" all its
    # language_forward time (-2,749 ms), and the mean saving grew by half.
    lines = fx.LOG.read_text().splitlines()
    recs = [json.loads(x) for x in lines]
    (u,) = [r for r in recs if r["type"] == "update" and r["step"] == 17]
    del u["counts"]["valid_tokens"]
    log = tmp_path / "novalid.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    r = run("whatif", "no-padding", "--hierarchy", fx.HIER, "--format", "json", log)
    assert r.returncode == 1, r.stderr  # (the reader's bad-field error for the lone token_slots)
    (p,) = json.loads(r.stdout)["predictions"]
    (s17,) = [x for x in p["updates"] if x["step"] == 17]
    assert s17["predicted_ms"] == s17["measured_ms"], s17
    assert any(n.startswith("1 of 20 updates lack the token_slots or valid_tokens counter (first: rank 1 step 17)")
               for n in p["notes"]), p["notes"]
    # The other updates are predicted as with the whole log.
    (whole,) = whatif_json("no-padding", "--hierarchy", fx.HIER, fx.LOG)["predictions"]
    others = {x["step"]: x["measured_ms"] - x["predicted_ms"] for x in whole["updates"] if x["step"] != 17}
    mine = {x["step"]: x["measured_ms"] - x["predicted_ms"] for x in p["updates"] if x["step"] != 17}
    assert all(abs(mine[k] - others[k]) < 0.35 * abs(others[k]) + 5 for k in others), (mine, others)


def test_updates_without_a_frame_histogram_are_said_to_be_unchanged(tmp_path):
    # Steps whose frame_histogram was missing got a change of exactly 0 (step 12 is
    # -2,769 ms with the whole log), with no note: the saving was understated silently.
    recs = [json.loads(x) for x in fx.LOG.read_text().splitlines()]
    for r in recs:
        if r["type"] == "update" and r["step"] in (12, 17, 25):
            del r["frame_histogram"]
    log = tmp_path / "nohist.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    for variant in ("pad", "group"):
        (p,) = whatif_json("batched-geometry", "--variant", variant, "--hierarchy", fx.HIER, log)["predictions"]
        for x in p["updates"]:
            if x["step"] in (12, 17, 25):
                assert x["predicted_ms"] == x["measured_ms"], x
        assert any(n.startswith("3 of 20 updates ran the group's paths but have no frame_histogram") and
                   "(first: rank 1 step 12)" in n for n in p["notes"]), p["notes"]
    (p,) = whatif_json("batched-geometry", "--variant", "pad", "--hierarchy", fx.HIER, fx.LOG)["predictions"]
    assert not any("no frame_histogram" in n for n in p["notes"])


def test_one_rank_of_an_unknown_world_size_has_no_job_throughput(tmp_path):
    # A config without world_size and global_batch: the job throughput was the rank's
    # (taken as a job of 1 rank) beside "one rank's log of a job of multi ranks".
    recs = [json.loads(x) for x in fx.LOG.read_text().splitlines()]
    del recs[0]["world_size"], recs[0]["global_batch"]
    log = tmp_path / "nows.jsonl"
    log.write_text("".join(json.dumps(r) + "\n" for r in recs))
    (p,) = whatif_json("no-padding", "--hierarchy", fx.HIER, log)["predictions"]
    assert p["samples_per_update"] is None, p["samples_per_update"]
    assert set(p["throughput"].values()) == {None}, p["throughput"]
    text = run("whatif", "no-padding", "--hierarchy", fx.HIER, log).stdout
    assert "a job of multi ranks" not in text and "job of several ranks (the config gives no world_size)" in text
    assert "throughput (job)" not in text
    # With the config's global_batch (64), the job's samples per update are those.
    config = json.loads(fx.LOG.read_text().splitlines()[0])
    (p,) = whatif_json("no-padding", "--hierarchy", fx.HIER, fx.LOG)["predictions"]
    assert p["samples_per_update"] == config["global_batch"]


def test_the_logs_of_some_ranks_are_not_called_every_ranks_log(tmp_path):
    # 2 of 4 ranks' logs were described as "every rank's log (2 ranks)".
    assert run("synth", "-o", tmp_path, "--ranks", 4, "--updates", 30).returncode == 0
    text = run("whatif", "no-padding", tmp_path / "rank1.jsonl", tmp_path / "rank2.jsonl").stdout
    assert "the logs of 2 of the 4 ranks (the others' not given)" in text and "every rank's log" not in text, text
    assert "every rank's log (4 ranks)" in run("whatif", "no-padding", tmp_path).stdout


def test_balanced_ranks_of_many_ranks_shows_the_ones_that_matter(tmp_path):
    # 1,024 ranks printed 1,024 rows; the report shows the 8 slowest and 3 fastest.
    r = run("synth", "-o", tmp_path / "logs", "--ranks", 40, "--updates", 20)
    assert r.returncode == 0, r.stderr
    text = run("whatif", "balanced-ranks", "--bootstrap", "0", tmp_path / "logs")
    assert text.returncode == 0, text.stderr
    table = text.stdout.split("  rank  own work ms (median)")[1].split("40 ranks: shown are")[0]
    rows = [l.split() for l in table.splitlines()[2:] if l.strip()]
    assert len(rows) == 11, rows
    works = [float(r[1].replace(",", "")) for r in rows]
    assert works == sorted(works, reverse=True)
    js = json.loads(run("whatif", "balanced-ranks", "--bootstrap", "0", "--format", "json", tmp_path / "logs").stdout)
    every = [r for p in js["predictions"] for r in p.get("ranks", [])]
    assert len(every) == 40
    assert max(r["compute_ms"] for r in every) == pytest.approx(works[0], abs=0.06)


def test_work_that_never_varies_is_not_priced(tmp_path):
    # 200 copies of one update: every feature is constant, so a cost per token slot is any
    # split of a fixed cost. It priced padding at 1.67e-05 ms per token slot and predicted
    # a saving.
    lines = fx.LOG.read_text().splitlines()
    update = json.loads(lines[1])
    copies = [lines[0]] + [json.dumps(dict(update, step=s)) for s in range(200)]
    log = tmp_path / "identical.jsonl"
    log.write_text("\n".join(copies) + "\n")
    r = run("whatif", "no-padding", "--hierarchy", fx.HIER, log)
    assert r.returncode == 3, r.stderr
    assert "the work it changes (token_slots) is the same in every update" in r.stderr, r.stderr


def test_html_report_has_the_whatif_section(tmp_path):
    out = tmp_path / "r.html"
    r = run("html", "--hierarchy", fx.HIER, fx.LOG, "-o", out)
    assert r.returncode == 0, r.stderr
    page = out.read_text()
    assert '<section id="whatif">' in page and "8. What if" in page
    start = page.index('<script type="application/json" id="stepprof-data">') + len(
        '<script type="application/json" id="stepprof-data">')
    data = json.loads(page[start:page.index("</script>", start)])
    _, updates = fx.real_records()
    (measured, *predictions) = data["whatif"]["series"]
    assert measured["label"] == "measured" and measured["ms"] == [u["wall_ms"] for u in updates]
    assert [s["label"] for s in predictions] == ["batched-geometry (pad)", "batched-geometry (group)", "no-padding"]
    r = run("html", "--no-whatif", "--hierarchy", fx.HIER, fx.LOG, "-o", out)
    assert r.returncode == 0 and 'id="whatif"' not in out.read_text()


def test_bootstrap_0_does_not_call_the_widening_a_90_percent_interval():
    # With --bootstrap 0 the group variant (no per-micro-batch detail in the real log)
    # still printed "(90 % interval 13,267.1 .. 13,540.1)": the widening for the unknown
    # token slots, labelled as a bootstrap interval the run never computed.
    text = run("whatif", "batched-geometry", "--bootstrap", "0", "--hierarchy", fx.HIER, fx.LOG).stdout
    assert "intervals        none (--bootstrap 0)" in text
    assert "% interval" not in text, text
    group = text[text.index("batched-geometry (group)"):]
    line = next(l for l in group.splitlines() if "predicted (every rank)" in l)
    assert "what the log leaves unknown" in line, line
    with_boot = run("whatif", "batched-geometry", "--bootstrap", "40", "--hierarchy", fx.HIER, fx.LOG).stdout
    assert "90 % interval" in with_boot


def _rare_fallback_job(tmp_path):
    """16 ranks x 12 updates; the slow path runs in 3 rank-updates: ranks 3 and 9 in step 4,
    rank 12 in step 8 (at 4,096 ranks the same shape was 3 of 204,800 updates)."""
    out = tmp_path / "logs"
    r = run("synth", "-o", out, "--ranks", 16, "--updates", 12, "--seed", 5,
            "--fallback", "3:4", "--fallback", "9:4", "--fallback", "12:8")
    assert r.returncode == 0, r.stderr
    updates = [json.loads(line) for f in sorted(out.glob("rank*.jsonl")) for line in f.read_text().splitlines()]
    return out, [u for u in updates if u["type"] == "update"]


def test_a_slow_path_too_rare_for_a_model_is_removed_as_measured(tmp_path):
    # whatif batched-geometry exited 3 ("the cost model of vggt_single is not usable: listed
    # in 3 of the 192 updates"): the path that no longer runs needs no model, its measured
    # time goes.
    out, updates = _rare_fallback_job(tmp_path)
    single = [u["cuda_stream_ms"].get("vggt_single", 0.0) for u in updates]
    assert sum(1 for t in single if t > 0) == 3
    doc = whatif_json("batched-geometry", out)
    assert not model(doc, "vggt_single")["usable"]
    assert "listed in 3 of the 192 updates" in model(doc, "vggt_single")["why_not"]
    for p in doc["predictions"]:
        assert p["available"], p
        (row,) = [r for r in p["regions"] if r["region"] == "vggt_single"]
        assert row["removed"] and not row["modeled"]
        assert row["change_ms"] == pytest.approx(-sum(single) / len(updates), rel=1e-12)
    text = run("whatif", "batched-geometry", out).stdout
    assert "no: removed as measured" in text and "vggt_single has no usable cost model" in text


def test_slow_path_time_at_stake_is_per_step_with_every_ranks_log(tmp_path):
    # The finding's time at stake was the mean over all 192 rank-updates, so it shrank as
    # 1/ranks (0.037 ms at 4,096 ranks) though the step waits for the rank that fell back.
    out, updates = _rare_fallback_job(tmp_path)
    speeds = fx.update_speeds(updates)  # (each rank's work at its speed on the path most updates ran)
    fast = fx.speed_weighted_cost(updates, speeds, "vggt_batched", "vggt_batched_frames")
    excess = {}
    for u in updates:
        if "vggt_single" in u["cuda_stream_ms"]:
            e = u["cuda_stream_ms"]["vggt_single"] - u["counts"]["vggt_single_frames"] * fast * speeds.get((u["rank"], u["step"]), 1)
            excess[u["step"]] = max(excess.get(u["step"], -1e300), e)
    assert sorted(excess) == [4, 8]
    r = run("report", out, "--format", "json")
    assert r.returncode == 0, r.stderr
    rep = json.loads(r.stdout)
    (g,) = rep["code_paths"]["groups"]
    steps = len({u["step"] for u in updates})
    assert g["step_saving_at_most_ms"] == pytest.approx(sum(max(0.0, e) for e in excess.values()) / steps, rel=1e-9)
    all_excess = sum(u["cuda_stream_ms"]["vggt_single"] - u["counts"]["vggt_single_frames"] * fast * speeds.get((u["rank"], u["step"]), 1)
                     for u in updates if "vggt_single" in u["cuda_stream_ms"])
    assert g["saving_ms_per_update"] == pytest.approx(all_excess / len(updates), rel=1e-9)
    (f,) = [f for f in rep["findings"] if f["kind"] == "slow-path"]
    assert f["ms_per_update"] == pytest.approx(sum(max(0.0, e) for e in excess.values()) / steps, rel=1e-9)
    assert "3 of 192 rank updates" in f["title"]


def test_a_saving_in_few_updates_leads_with_the_mean(tmp_path):
    # A fallback in 3 of 192 updates: removing it leaves the median update as it was, and
    # the headline read "saved 0.0 ms per update (0.0 %, difference of the medians)" for a
    # what-if that saves time on average. The mean now leads where the median saving is
    # under half of it.
    out, updates = _rare_fallback_job(tmp_path)
    doc = whatif_json("batched-geometry", out)
    p = doc["predictions"][0]
    assert p["saved_mean_ms_per_update"] > 0 and p["saved_ms_per_update"] < 0.5 * p["saved_mean_ms_per_update"], p
    text = " ".join(run("whatif", "batched-geometry", out).stdout.split())
    mean = p["saved_mean_ms_per_update"]
    assert f"{mean:.1f} ms per update on average (" in text or f"{mean:.2f} ms per update on average (" in text, text
    assert "the time is saved in the updates away from the median" in text


def test_a_mean_saving_under_half_the_median_one_is_explained(tmp_path):
    # An audit: "saved 226.3 ms per update (difference of the medians) ... (mean 102.2)"
    # with no word on why the total over 1,000 updates is half of what the headline says.
    r = run("synth", "-o", tmp_path / "logs", "--ranks", 6, "--updates", 40, "--accumulation", 1, "--micro-batch", 2,
            "--fallback-rate", 0.3, "--straggler", "5:10:25:1.3", "--fallback", "5:12", "--seed", 7)
    assert r.returncode == 0, r.stderr
    args = ("batched-geometry", "--variant", "pad", "--bootstrap", 20, tmp_path / "logs")
    (p,) = whatif_json(*args)["predictions"]
    assert 0 < p["saved_mean_ms_per_update"] < 0.5 * p["saved_ms_per_update"], p
    text = " ".join(run("whatif", *args).stdout.split())
    assert (f"(mean {p['saved_mean_ms_per_update']:.1f} ms per update; the mean is under half of it: some updates "
            "save much less, or take longer, so the total over 1,000 updates follows the mean)") in text, text


def test_a_background_region_gets_no_cost_model(tmp_path):
    # A data loader's region runs beside the updates: a model of it priced nothing an
    # update spends, yet was listed as used.
    rnd = random.Random(3)
    lines = [json.dumps({"type": "config", "rank": 0, "world_size": 1, "region_roles": {"loader": "background"}})]
    for step in range(12):
        slots = rnd.randint(800, 1200)
        host = {"forward": 0.01 * slots, "loader": 5.0 + 0.002 * slots}
        lines.append(json.dumps({"type": "update", "rank": 0, "step": step, "wall_ms": host["forward"] + 1,
                                 "cpu_call_ms": host, "calls": {k: 1 for k in host},
                                 "parents": {k: None for k in host},
                                 "counts": {"token_slots": slots, "valid_tokens": slots - rnd.randint(0, 100)}}))
    log = tmp_path / "bg.jsonl"
    log.write_text("\n".join(lines) + "\n")
    r = run("whatif", "no-padding", log, "--format", "json")
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    loader = model(doc, "loader")
    assert not loader["usable"] and "background region" in loader["why_not"]
    assert model(doc, "forward")["usable"]
    (p,) = doc["predictions"]
    assert [x["region"] for x in p["regions"]] == ["forward"]


def test_a_small_threshold_is_shown_as_given(tmp_path):
    # --threshold 0.001 read "held-out error 0 % of its mean time is above the 0 % threshold".
    r = run("whatif", "no-padding", "--threshold", "0.001", "--hierarchy", fx.HIER, fx.LOG)
    assert r.returncode == 3, r.stderr  # (no model is usable: nothing to predict, and the models say why)
    reasons = re.findall(r"held-out error ([0-9.]+) % of its mean time is above the ([0-9.]+) % threshold", r.stdout)
    assert reasons, r.stdout
    for error, threshold in reasons:
        assert threshold == "0.1" and float(error) > 0.1, (error, threshold)
    # The error in ms and the option that would take the model (a helper had a 0.032 ms
    # fast path refused and no word of --threshold).
    doc = json.loads(run("whatif", "no-padding", "--threshold", "0.001", "--format", "json", "--hierarchy", fx.HIER,
                         fx.LOG).stdout)
    refused = [m for m in doc["cost_models"]["regions"] if "held-out error" in (m["why_not"] or "")]
    assert refused
    for m in refused:
        took = re.search(r"\(([0-9.e+-]+) ms of ([0-9.e+-]+) ms per update; --threshold ([0-9.]+) would take it\)$",
                         m["why_not"])
        assert took, m["why_not"]
        assert float(took[1]) == pytest.approx(m["heldout_rmse_ms"], rel=5e-3)
        assert float(took[2]) == pytest.approx(m["mean_ms"], rel=5e-3)
        assert float(took[3]) >= m["heldout_rmse_ms"] / m["mean_ms"] > float(took[3]) - 0.01


def test_micro_batches_on_a_path_outside_the_group_are_said(tmp_path):
    # A micro-batch path that is no region of the group (misspelt: no_such_region) was
    # replayed as one that skips the geometry, and the prediction moved without a word.
    runs = fx.SRC / "examples/pytorch/runs/random"
    for f in sorted(runs.glob("rank*.jsonl")):
        (tmp_path / f.name).write_text(f.read_text().replace('"path":"vggt_single"', '"path":"no_such_region"', 1))
    r = run("whatif", "batched-geometry", "--variant", "group", "--format", "json", tmp_path)
    assert r.returncode == 0, r.stderr
    text = json.dumps(json.loads(r.stdout))
    # (The group's paths in the order the log first names them, as the nesting has them.)
    first = "".join((tmp_path / "rank0.jsonl").read_text().splitlines(keepends=True)[1:])  # (the updates)
    paths = ", ".join(sorted(("vggt_batched", "vggt_single"), key=lambda p: first.index(f'"{p}":')))
    assert (f"4 micro-batch(es) name a path that is not one of the group's ({paths}): "
            "no_such_region; they are replayed as micro-batches that do not run the group") in text
    clean = run("whatif", "batched-geometry", "--variant", "group", "--format", "json", runs)
    assert "name a path that is not one of the group's" not in clean.stdout


def test_pad_without_detail_leaves_updates_that_were_all_batched_unchanged(tmp_path):
    # Without per-micro-batch detail, pad split each update's samples at random: an update
    # whose two micro-batches both ran the batched path (frames [3,3,3,3] and [8,8,8,8])
    # got micro-batches of mixed frame counts padded to 8, a predicted +40 ms for a change
    # that leaves it as it was. Costs here are exact: fast 2 ms/frame, slow 5 ms/frame.
    rnd = random.Random(5)
    lines = [json.dumps({"type": "config", "rank": 0, "world_size": 1, "micro_batch": 4, "accumulation": 2,
                         "region_alternatives": {"fast": "geo", "slow": "geo"}})]
    all_fast = []
    for step in range(1, 13):
        mbs = []
        for m in range(2):
            if (step + m) % 3 == 0:  # a micro-batch of mixed frame counts: the slow path
                frames = [rnd.randint(2, 9) for _ in range(4)]
                frames[0] = frames[1] + 1 if len(set(frames)) == 1 else frames[0]
            else:
                frames = [rnd.randint(3, 9)] * 4
            mbs.append(frames)
        fast = [f for f in mbs if len(set(f)) == 1]
        slow = [f for f in mbs if len(set(f)) > 1]
        times, calls, counts = {}, {}, {"micro_steps": 2, "samples": 8, "frames": sum(map(sum, mbs))}
        if fast:
            times["fast"], calls["fast"] = 2.0 * sum(map(sum, fast)), len(fast)
            counts.update(fast_frames=sum(map(sum, fast)), fast_samples=4 * len(fast), fast_microbatches=len(fast))
        if slow:
            times["slow"], calls["slow"] = 5.0 * sum(map(sum, slow)), 4 * len(slow)
            counts.update(slow_frames=sum(map(sum, slow)), slow_samples=4 * len(slow), slow_microbatches=len(slow))
        times["geom"], calls["geom"] = times.get("fast", 0) + times.get("slow", 0) + 1.0, 2
        hist = {}
        for f in (x for mb in mbs for x in mb):
            hist[str(f)] = hist.get(str(f), 0) + 1
        lines.append(json.dumps({"type": "update", "rank": 0, "step": step, "wall_ms": times["geom"] + 3.0,
                                 "cpu_call_ms": times, "calls": calls,
                                 "parents": {"geom": None, **{k: "geom" for k in times if k != "geom"}},
                                 "counts": counts, "frame_histogram": hist, "input_shapes": {"(4, 100)": 2}}))
        if not slow:
            all_fast.append(step)
    log = tmp_path / "nodetail.jsonl"
    log.write_text("\n".join(lines) + "\n")
    assert 0 < len(all_fast) < 12
    doc = whatif_json("batched-geometry", "--variant", "pad", log)
    (p,) = doc["predictions"]
    assert p["available"], p
    for u in p["updates"]:
        if u["step"] in all_fast:
            assert u["predicted_ms"] == pytest.approx(u["measured_ms"], abs=1e-9), u
        else:
            assert u["predicted_ms"] != pytest.approx(u["measured_ms"], abs=1e-6), u
    assert any(f"{len(all_fast)} of 12 updates ran only fast of the group" in n for n in p["notes"]), p["notes"]


def test_pad_onto_the_per_sample_path_pads_updates_that_ran_only_it():
    # --path vggt_single --variant pad on the bundled log (no per-micro-batch detail): the
    # 9 updates that ran only vggt_single, the per-sample fallback (one call per sample),
    # were left unpadded, with a note that "every micro-batch was batched already"; only
    # a batched path (one call per micro-batch) takes micro-batches of one frame count.
    # Here by the pad formula of docs/whatif.md: every micro-batch of n samples and
    # largest frame count m puts n m frames on vggt_single, at its cost per frame, and
    # vggt_batched's frames go at its cost (both fitted here with numpy).
    _, updates = fx.real_records()
    doc = whatif_json("batched-geometry", "--hierarchy", fx.HIER, "--path", "vggt_single", "--variant", "pad", fx.LOG)
    (p,) = doc["predictions"]
    assert p["available"], p
    assert sorted(r["region"] for r in p["regions"]) == ["vggt_batched", "vggt_single"], p["regions"]
    beta = {}
    for region in ("vggt_single", "vggt_batched"):
        x = [u["counts"].get(region + "_frames", 0) for u in updates]
        y = [u["cuda_stream_ms"].get(region, 0.0) for u in updates]
        beta[region], _, _ = through_origin(x, y)
    single_only = 0
    expected = []
    for u in updates:
        hist = {int(f): n for f, n in u["frame_histogram"].items()}
        largest = max(hist)
        # Two micro-batches of 8 (input_shapes): more than 8 samples of the largest frame
        # count put one in each, however the samples are split, so every micro-batch pads to it.
        assert list(u["input_shapes"].values()) in ([2], [1, 1]) and hist[largest] > 8, u["input_shapes"]
        c = u["counts"]
        single_only += c.get("vggt_batched_frames", 0) == 0
        change = (beta["vggt_single"] * (sum(hist.values()) * largest - c.get("vggt_single_frames", 0))
                  - beta["vggt_batched"] * c.get("vggt_batched_frames", 0))
        expected.append(u["wall_ms"] + change)
    assert single_only == 9
    assert [u["predicted_ms"] for u in p["updates"]] == pytest.approx(expected, rel=1e-9)
    assert p["predicted_update_ms"]["median"] == pytest.approx(statistics.median(expected), rel=1e-9)
    assert p["predicted_update_ms"]["median"] == pytest.approx(16763.6, abs=0.05)  # the brief's figure
    assert not any("ran only vggt_single" in n for n in p["notes"]), p["notes"]
    # Onto the batched path (the default), the 3 updates that ran only it stay as they were.
    (q,) = whatif_json("batched-geometry", "--hierarchy", fx.HIER, "--variant", "pad", fx.LOG)["predictions"]
    assert any(n.startswith("3 of 20 updates ran only vggt_batched of the group, which takes a micro-batch in one "
                            "call") for n in q["notes"]), q["notes"]
    for u, rec in zip(q["updates"], updates):
        if "vggt_single" not in rec["cuda_stream_ms"]:
            assert u["predicted_ms"] == pytest.approx(u["measured_ms"], abs=1e-9), u


def few_steps_bound():
    """The fewest steps n for which some interval of the steps short of their whole range,
    from the k-th smallest to the k-th largest (k >= 2), covers their median with at least
    90 % probability whatever their distribution: 1 - 2 P(Binomial(n, 1/2) <= k - 1)."""
    for n in range(2, 100):
        for k in range(2, n // 2 + 1):
            if 1 - 2 * sum(math.comb(n, i) for i in range(k)) / 2 ** n >= 0.9:
                return n


def test_a_prediction_over_few_steps_says_its_interval_is_no_90_percent_interval(tmp_path):
    # balanced-ranks over the 2 steps two ranks' logs had in common printed "(90 % interval
    # ..)" and a total per 1,000 updates, with no word that 2 steps cannot give either.
    bound = few_steps_bound()
    assert bound == 8
    for steps in (3, bound - 1, bound):
        out = tmp_path / str(steps)
        r = run("synth", "-o", out, "--ranks", 2, "--updates", steps, "--seed", 3)
        assert r.returncode == 0, r.stderr
        for scenario in ("balanced-ranks", "no-padding"):
            doc = whatif_json(scenario, out)
            assert doc["steps"] == steps
            (p,) = doc["predictions"]
            assert p["available"], p
            few = [n for n in p["notes"] if n.startswith(f"rests on only {steps} steps that every rank's log has: "
                                                         "too few for a 90 % interval")]
            text = " ".join(run("whatif", scenario, out).stdout.split())  # (the text wraps lines)
            if steps < bound:
                (note,) = few
                whole = 1 - 2 / 2 ** steps  # the whole range of the steps covers their median
                assert f"(their whole range: {whole * 100:.1f} % for {steps})" in note, note
                assert f"the saving per 1,000 updates is the mean saving of {steps} steps times 1,000" in note
                assert "(90 % interval" not in text, text
                assert f"over only {steps} steps: not a 90 % interval)" in text, text
                assert f"{steps} steps are too few for a 90 % interval" in text
            else:
                assert not few, p["notes"]
                assert "(90 % interval" in text and "not a 90 % interval" not in text, text
    # From one rank's log the steps are its updates; with --bootstrap 0 only the total is weak.
    r = run("whatif", "no-padding", "--bootstrap", "0", "--format", "json", tmp_path / str(bound - 1) / "rank0.jsonl")
    (p,) = json.loads(r.stdout)["predictions"]
    assert (f"rests on only {bound - 1} steps: the saving per 1,000 updates is the mean saving of {bound - 1} steps "
            "times 1,000") in p["notes"], p


def test_own_work_takes_the_host_time_where_an_update_has_no_device_time_for_the_collective(tmp_path):
    # As the rank comparison does (cross_rank.hpp own_work): wall_ms minus the
    # communication region's device time, else its host time in an update without one.
    # The what-ifs took that region as 0 there, so the whole wall time counted as own work.
    logs = []
    expected = {}
    for rank in (0, 1):
        lines = [json.dumps({"type": "config", "rank": rank, "world_size": 2})]
        own = []
        for step in range(1, 9):
            wall = 100.0 + step
            comm_host = 40.0 + rank * 5 + step % 3
            device = {"compute": wall - comm_host - 1}
            host = {"compute": wall - comm_host - 1, "allreduce": comm_host}
            if not (rank == 1 and step <= 4):  # rank 1 timed the collective on the host only here
                device["allreduce"] = comm_host - 0.5
            own.append(wall - device.get("allreduce", comm_host))
            lines.append(json.dumps({"type": "update", "rank": rank, "step": step, "wall_ms": wall,
                                     "cuda_stream_ms": device, "cpu_call_ms": host,
                                     "calls": {"compute": 1, "allreduce": 1}, "counts": {"samples": 4}}))
        expected[rank] = statistics.median(own)
        log = tmp_path / f"rank{rank}.jsonl"
        log.write_text("\n".join(lines) + "\n")
        logs.append(log)
    (p,) = whatif_json("balanced-ranks", "--bootstrap", "0", *logs)["predictions"]
    assert p["available"], p
    assert {r["rank"]: r["compute_ms"] for r in p["ranks"]} == pytest.approx(expected, rel=1e-12)


def synth_logs(tmp_path, ranks, seed):
    """`ranks` ranks x 40 updates of synth (fallback rate 0.5): the directory and its files, sorted."""
    logs = tmp_path / "logs"
    r = run("synth", "-o", logs, "--ranks", ranks, "--updates", 40, "--seed", seed, "--fallback-rate", 0.5)
    assert r.returncode == 0, r.stderr
    return logs, sorted(logs.glob("rank*.jsonl"))


def test_a_rank_whose_log_starts_late_is_left_out_as_the_report_does(tmp_path):
    # One rank of 8 whose log starts at the 16th of 40 steps left the 15 steps before out
    # of every prediction ("15 step(s) missing from some rank's log are left out"), while
    # the report's rank comparison left the rank out instead and compared all 40 steps.
    logs, files = synth_logs(tmp_path, 8, 7)
    lines = files[5].read_text().splitlines()
    files[5].write_text("\n".join(lines[:1] + lines[16:]) + "\n")  # its config, then steps 16 on
    first = json.loads(lines[16])["step"]
    walls = fx.walls_by_step(files[:5] + files[6:])
    assert len(walls) == 40 and all(len(w) == 7 for w in walls.values())
    report = json.loads(run("report", "--format", "json", logs).stdout)["cross_rank"]
    assert report["ranks_short"] == [{"rank": 5, "steps": 25}]  # what the report does
    (p,) = whatif_json("balanced-ranks", logs)["predictions"]
    assert p["available"], p
    assert p["measured_update_ms"]["median"] == pytest.approx(statistics.median(max(w) for w in walls.values()),
                                                              rel=1e-12)
    assert any(n.startswith(f"rank 5 (from step {first}) left out: its log starts late") for n in p["notes"]), p["notes"]
    assert not any("missing from some rank's log" in n for n in p["notes"]), p["notes"]
    assert [row["rank"] for row in p["ranks"]] == [0, 1, 2, 3, 4, 6, 7]


def test_a_trace_is_not_said_to_rebuild_micro_batches_from_what_it_lacks():
    # A profiler trace has no frame histogram or input shapes: the detail line said the
    # micro-batches were "rebuilt from the frame histogram and input_shapes".
    trace = fx.SRC / "examples/kineto/hta-a100-rank3of8.json.gz"
    r = run("whatif", "no-padding", trace, "--format", "json")
    assert r.returncode == 3, r.stderr  # (no token counters: not available, but the document is written)
    doc = json.loads(r.stdout)
    assert doc["detail"] == ("no per-micro-batch detail, frame histogram or input_shapes in the logs: the "
                             "micro-batches' composition is unknown")
    assert whatif_json("no-padding", "--hierarchy", fx.HIER, fx.LOG)["detail"].startswith(
        "no per-micro-batch detail: micro-batches rebuilt from the frame histogram and input_shapes")


def test_a_widened_interval_says_so():
    # Without per-micro-batch detail the pad interval is widened to cover every random
    # split, and the group interval down to no padding; the notes saying so were written
    # and then replaced by the replay's notes, so neither ever showed.
    doc = whatif_json("batched-geometry", "--hierarchy", fx.HIER, fx.LOG)
    pad, group = doc["predictions"]
    assert "the interval is widened to cover the 16 random splits of the updates' samples into micro-batches" in pad["notes"]
    assert any(n.startswith("the interval is widened down to the prediction with no padding left") for n in group["notes"])
    assert any(n.startswith("no per-micro-batch detail in the log") for n in pad["notes"])


def test_a_rank_whose_log_holds_under_half_of_the_steps_is_left_out(tmp_path):
    # One rank's log cut after its first update (a crashed rank) left one step in every
    # rank's log: every what-if was "not available", while the report compared the other
    # ranks over all their steps. It is now left out, as the report does.
    logs, files = synth_logs(tmp_path, 4, 5)
    lines = files[3].read_text().splitlines()
    files[3].write_text("\n".join(lines[:2]) + "\n")  # its config and first update
    walls = fx.walls_by_step(files[:3])
    doc = whatif_json("balanced-ranks", logs)
    assert doc["steps"] == 40
    (p,) = doc["predictions"]
    assert p["available"], p
    assert p["measured_update_ms"]["median"] == pytest.approx(statistics.median(max(w) for w in walls.values()),
                                                              rel=1e-12)
    assert any(n.startswith("rank 3 (1 of the 40 steps) left out: its log holds under half of the steps")
               for n in p["notes"]), p["notes"]
    assert [row["rank"] for row in p["ranks"]] == [0, 1, 2]
    assert whatif_json("batched-geometry", logs)["predictions"][0]["available"]
    # Two ranks, one of them short: nothing is left out (no comparison would remain).
    two = tmp_path / "two"
    two.mkdir()
    for f in files[2:]:
        shutil.copy(f, two / f.name)
    r = run("whatif", "balanced-ranks", two, "--format", "json")
    assert r.returncode == 3, r.stdout
    assert "fewer than two steps are in every rank's log" in r.stdout


def test_micro_batch_paths_that_are_no_region_are_named_not_called_missing_frames(tmp_path):
    # Every micro-batch's path misspelt: whatif said the updates have neither a frame
    # histogram nor per-micro-batch frames (they had both), and report said nothing.
    config, updates = fx.real_records()
    for u in updates:
        frames = [int(f) for f, n in u["frame_histogram"].items() for _ in range(n)]
        half = len(frames) // 2
        u["microbatches"] = [{"path": "vggt_singel", "frames": frames[:half]},
                             {"path": "vggt_singel", "frames": frames[half:]}]
    log = fx.write_jsonl(tmp_path / "rank1.jsonl", [config, *updates])
    r = run("whatif", "batched-geometry", "--hierarchy", fx.HIER, log)
    assert r.returncode == 3
    assert ("no micro-batch takes a path of the group (vggt_batched, vggt_single): the per-micro-batch detail of "
            "every update names vggt_singel as its path") in r.stderr, r.stderr
    r = run("report", log)
    assert r.returncode == 0, r.stderr
    assert (f"{2 * len(updates)} micro-batch(es) in {len(updates)} update(s) name a path that is no region of their "
            f"update (first: step {updates[0]['step']}, \"vggt_singel\"): a misspelt path?") in r.stderr, r.stderr
    # An update that times no region: the path is not the one at fault.
    bare = fx.write_jsonl(tmp_path / "bare.jsonl", [config, {"type": "update", "rank": 1, "step": 1, "wall_ms": 10,
                                                             "microbatches": [{"path": "vggt_single", "frames": [4]}]}])
    r = run("report", bare)
    assert r.returncode == 0, r.stderr
    assert "\"vggt_single\"): their updates time no region at all." in r.stderr, r.stderr
    assert "misspelt" not in r.stderr, r.stderr
    # Some of each: both causes are named (the first update alone decided).
    mixed = fx.write_jsonl(tmp_path / "mixed.jsonl", [config, {"type": "update", "rank": 1, "step": 1, "wall_ms": 10,
                                                               "microbatches": [{"path": "vggt_single", "frames": [4]}]},
                                                      {"type": "update", "rank": 1, "step": 2, "wall_ms": 10,
                                                       "cpu_call_ms": {"x": 1},
                                                       "microbatches": [{"path": "vggt_single", "frames": [4]}]}])
    r = run("report", mixed)
    assert ("2 micro-batch(es) in 2 update(s) name a path that is no region of their update (first: step 1, "
            "\"vggt_single\"): 1 of them in updates that time no region at all; the others: a misspelt path?"
            ) in r.stderr, r.stderr


def test_a_wrapper_the_log_lacks_does_not_make_its_parent_a_leaf(tmp_path):
    # `fwd` around forward_and_loss's children in a --hierarchy file, a region the log
    # never has: forward_and_loss had no child "in the log", so its model was summed as a
    # leaf beside its grandchildren's, and the saving counted its token-slot cost twice
    # (463 against 754 ms per update here; a review: 16.5 against 7.65). The prediction
    # is the one without the wrapper.
    logs = tmp_path / "logs"
    assert run("synth", "--ranks", 2, "--updates", 60, "--fallback-rate", 0.3, "--random-padding-spikes", 3,
               "-o", logs).returncode == 0
    hier = tmp_path / "fwd.txt"
    text = fx.HIER.read_text()
    body = text[text.index("    prepare_inputs"):text.index("  backward_and_engine_step")]
    hier.write_text(text.replace(body, "    fwd\n" + "".join("  " + line + "\n" for line in body.splitlines())))
    assert "    fwd\n      prepare_inputs\n" in hier.read_text()
    for scenario in ("no-padding", "batched-geometry"):
        plain = whatif_json(scenario, "--hierarchy", fx.HIER, logs)
        wrapped = whatif_json(scenario, "--hierarchy", hier, logs)
        assert wrapped["predictions"] == plain["predictions"], scenario
        assert [p["regions"] for p in plain["predictions"]] != [[]] * len(plain["predictions"])
