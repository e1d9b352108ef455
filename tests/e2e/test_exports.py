"""End-to-end tests of `stepprof trace`, `stepprof html` and `stepprof report --format csv`.

Expected values are computed here from the raw log lines with Python's standard library
(json, csv, statistics, html.parser), independently of stepprof.
"""
import csv
import html
import html.parser
import json
import math
import os
import re
import statistics
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
import fixtures as fx  # noqa: E402

BIN = os.environ["STEPPROF_BIN"]
# Seconds a command may take. Under AddressSanitizer + UndefinedBehaviorSanitizer the
# what-if section of `html` on the bundled log takes about 100 s (0.4 s in a release
# build), and ran past 120 s beside another test (CI, 2026-12-08).
TIMEOUT = 600 if os.environ.get("STEPPROF_SANITIZE") else 120


def run(*args):
    return subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, timeout=TIMEOUT)


def us(ms):
    """Milliseconds to whole microseconds, rounding half away from zero (as llround)."""
    import decimal
    return int(decimal.Decimal(repr(ms * 1000)).quantize(decimal.Decimal(1), rounding=decimal.ROUND_HALF_UP))


# ---------------------------------------------------------------------------------------
# Trace


def load_trace(tmp_path, *args, name="trace.json"):
    out = tmp_path / name
    r = run("trace", *args, "-o", out)
    assert r.returncode == 0, r.stderr
    return json.loads(out.read_text())  # loads as JSON


def tracks(trace):
    """{(pid, tid): [X events in file order]} and {(pid, tid): thread name}."""
    by, names = defaultdict(list), {}
    for e in trace["traceEvents"]:
        if e["ph"] == "X":
            by[(e["pid"], e["tid"])].append(e)
        elif e["ph"] == "M" and e["name"] == "thread_name":
            names[(e["pid"], e["tid"])] = e["args"]["name"]
    return by, names


def enclosing(events):
    """For each X event of one track, the innermost event that contains it (or None);
    fails if two events overlap without one containing the other."""
    stack, parent = [], {}
    for e in sorted(events, key=lambda e: (e["ts"], -e["dur"])):
        while stack and e["ts"] >= stack[-1]["ts"] + stack[-1]["dur"]:
            stack.pop()
        if stack:
            top = stack[-1]
            assert e["ts"] + e["dur"] <= top["ts"] + top["dur"], (e, top)  # child inside parent
        parent[id(e)] = stack[-1] if stack else None
        stack.append(e)
    return parent


def test_trace_structure_and_required_fields(tmp_path):
    t = load_trace(tmp_path, "--hierarchy", fx.HIER, fx.LOG)
    assert t["displayTimeUnit"] == "ms"
    events = t["traceEvents"]
    for e in events:
        assert {"name", "ph", "pid", "tid"} <= e.keys()
        assert e["ph"] in {"M", "X", "C"}
        if e["ph"] == "X":
            assert isinstance(e["ts"], int) and isinstance(e["dur"], int) and e["dur"] >= 0
            assert e["args"]["layout"] in {"synthetic from per-update sums", "synthetic: one update after another"}
            assert e["cat"] in {"update", "region"}
        if e["ph"] == "C":
            assert isinstance(e["ts"], int) and e["args"]
            assert all(isinstance(v, (int, float)) for v in e["args"].values())
    procs = {e["pid"]: e["args"]["name"] for e in events if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {1: "rank 1"}  # one process per rank, pid = rank
    assert t["otherData"]["nesting_known"] is True and t["otherData"]["real_timestamps"] is False


def test_trace_layout_from_sums(tmp_path):
    config, updates = fx.real_records()
    parent_of, order = fx.parse_hierarchy()
    t = load_trace(tmp_path, "--hierarchy", fx.HIER, fx.LOG)
    by, names = tracks(t)
    assert sorted(names.values()) == ["device stream (cuda_stream_ms)", "host (cpu_call_ms)"]

    # Updates one after another: update k starts at the sum of the earlier wall_ms.
    starts, t0 = {}, 0
    for u in updates:
        starts[u["step"]] = t0
        t0 += us(u["wall_ms"])

    for key, events in by.items():
        clock = "cuda_stream_ms" if "device" in names[key] else "cpu_call_ms"
        ts = [e["ts"] for e in events]
        assert ts == sorted(ts)  # monotone time per track
        parent = enclosing(events)
        roots = [e for e in events if e["cat"] == "update"]
        assert [r["name"] for r in roots] == [f"update {u['step']}" for u in updates]
        for r, u in zip(roots, updates):
            assert r["ts"] == starts[u["step"]] and r["dur"] == us(u["wall_ms"])
        step_of = {u["step"]: u for u in updates}
        children = defaultdict(list)
        for e in events:
            if e["cat"] != "region":
                continue
            u = step_of[e["args"]["step"]]
            assert e["dur"] == us(u[clock][e["name"]])  # its summed time, unscaled here
            assert e["args"]["calls"] == u["calls"][e["name"]]
            assert e["args"]["recorded_ms"] == u[clock][e["name"]]
            p = parent[id(e)]
            want = parent_of[e["name"]]
            # nested by the hierarchy: the enclosing slice is the region's parent (or the update)
            assert (p["name"] if p["cat"] == "region" else None) == want, (e["name"], p["name"])
            assert p["args"]["step"] == e["args"]["step"]
            children[id(p)].append(e)
        # Children one after another from the parent's start, in nesting order.
        for e in events:
            kids = children.get(id(e), [])
            if not kids:
                continue
            assert kids[0]["ts"] == e["ts"]
            for a, b in zip(kids, kids[1:]):
                assert b["ts"] == a["ts"] + a["dur"]
                assert order.index(a["name"]) < order.index(b["name"])
    assert t["otherData"]["shrunk_slices"] == 0


def test_trace_layout_of_a_parent_with_a_child_per_update(tmp_path):
    # A child per update (names made with the step in them): the layout goes over the
    # update's own regions instead of every child (it was quadratic in the updates), and
    # must be the same: children in nesting order, an absent child's children in its place.
    kids = [f"k{i}" for i in range(40)]
    hier = tmp_path / "h.txt"
    hier.write_text("A\n" + "".join(f"  {k}\n" for k in kids) + "  mid\n    leaf\n  z\n")
    lines = [json.dumps({"type": "config", "rank": 0, "world_size": 1})]
    for step in range(30):
        times = {"A": 10.0, f"k{step}": 1.5 + step / 100, "leaf": 2.25, "z": 3.0}
        lines.append(json.dumps({"type": "update", "rank": 0, "step": step, "wall_ms": 12.0, "cpu_call_ms": times,
                                 "calls": {k: 1 for k in times}}))
    log = tmp_path / "perstep.jsonl"
    log.write_text("\n".join(lines) + "\n")
    by, _ = tracks(load_trace(tmp_path, "--hierarchy", hier, log))
    (events,) = by.values()
    parent = enclosing(events)
    for step in range(30):
        a = next(e for e in events if e["name"] == "A" and e["args"]["step"] == step)
        under = [e for e in events if parent[id(e)] is a]
        assert [e["name"] for e in under] == [f"k{step}", "leaf", "z"]
        assert under[0]["ts"] == a["ts"]
        for x, y in zip(under, under[1:]):
            assert y["ts"] == x["ts"] + x["dur"]


def test_trace_counters(tmp_path):
    _, updates = fx.real_records()
    t = load_trace(tmp_path, "--hierarchy", fx.HIER, fx.LOG)
    starts, t0 = [], 0
    for u in updates:
        starts.append(t0)
        t0 += us(u["wall_ms"])
    counters = defaultdict(list)
    for e in t["traceEvents"]:
        if e["ph"] == "C":
            counters[e["name"]].append(e)
    tokens = counters["tokens"]
    assert [e["ts"] for e in tokens] == starts
    assert [e["args"]["token_slots"] for e in tokens] == [u["counts"]["token_slots"] for u in updates]
    assert [e["args"]["valid_tokens"] for e in tokens] == [u["counts"]["valid_tokens"] for u in updates]
    assert [e["args"]["frames"] for e in counters["work"]] == [u["counts"]["frames"] for u in updates]
    pad = [e["args"]["padding_fraction"] for e in counters["padding fraction"]]
    assert pad == pytest.approx([1 - u["counts"]["valid_tokens"] / u["counts"]["token_slots"] for u in updates])
    paths = counters["samples per code path (geometry)"]
    assert len(paths) == len(updates)
    for e, u in zip(paths, updates):
        for p in ("vggt_batched", "vggt_single"):
            # samples where the path ran; 0 where it did not run at all
            want = u["counts"].get(p + "_samples", 0 if p not in u["cuda_stream_ms"] else None)
            assert e["args"][p] == want


def test_trace_one_process_per_rank_and_aligned_steps(tmp_path):
    paths = fx.write_multi_rank(tmp_path)
    t = load_trace(tmp_path, "--hierarchy", fx.HIER, *paths)
    procs = {e["pid"]: e["args"]["name"] for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"}
    assert procs == {r: f"rank {r}" for r in fx.RANK_SCALE}
    _, updates = fx.real_records()
    # Update k starts on every rank when the slowest rank's update k-1 ended.
    starts, t0 = {}, 0
    for u in updates:
        starts[u["step"]] = t0
        t0 += max(us(u["wall_ms"] * s) for s in fx.RANK_SCALE.values())
    for e in t["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "update":
            assert e["ts"] == starts[e["args"]["step"]]
            assert e["dur"] == us(e["args"]["wall_ms"])
    by, _ = tracks(t)
    assert {pid for pid, _ in by} == set(fx.RANK_SCALE)
    for events in by.values():
        enclosing(events)


def test_a_trace_of_many_megabytes_is_written_as_it_is_made(tmp_path):
    # The trace was held whole in memory (2.9x its size at 16,384 ranks: 6.8 GB for a
    # 2.3 GB trace); it is written in pieces of about 1 MiB. Written to a file and to
    # stdout, it is the same JSON document, with every rank's every update in it.
    logs = tmp_path / "logs"
    r = run("synth", "-o", logs, "--ranks", 64, "--updates", 40)
    assert r.returncode == 0, r.stderr
    r = run("trace", logs, "-o", tmp_path / "t.json")
    assert r.returncode == 0, r.stderr
    text = (tmp_path / "t.json").read_text()
    assert len(text) > 8 * 2**20  # (many pieces)
    out = subprocess.run([BIN, "trace", str(logs)], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout == text
    steps = defaultdict(set)
    for e in json.loads(text)["traceEvents"]:
        if e["ph"] == "X" and e["cat"] == "update":
            steps[e["pid"]].add(e["args"]["step"])
    for f in sorted(logs.glob("rank*.jsonl")):
        recs = [json.loads(line) for line in f.read_text().splitlines()]
        rank = recs[0]["rank"]
        assert steps[rank] == {u["step"] for u in recs if u["type"] == "update"}, f


def test_trace_without_nesting_puts_regions_on_their_own_tracks(tmp_path):
    _, updates = fx.real_records()
    t = load_trace(tmp_path, fx.LOG)
    by, names = tracks(t)
    regions = {k for u in updates for k in u["cuda_stream_ms"]}
    want = {"updates (wall_ms)"} | {f"{r} [device]" for r in regions} | {f"{r} [host]" for r in regions}
    assert set(names.values()) == want
    for key, events in by.items():
        name = names[key]
        if name == "updates (wall_ms)":
            continue
        region, clock = re.fullmatch(r"(.*) \[(device|host)\]", name).groups()
        field = "cuda_stream_ms" if clock == "device" else "cpu_call_ms"
        present = [u for u in updates if region in u[field]]
        assert [e["args"]["step"] for e in events] == [u["step"] for u in present]
        for e, u in zip(events, present):
            assert e["dur"] == min(us(u[field][region]), us(u["wall_ms"]))
        enclosing(events)  # disjoint on its track
    assert any("nesting unknown" in n for n in t["otherData"]["layout"])


def test_trace_uses_logged_start_times(tmp_path):
    config, updates = fx.real_records()
    base = 1_718_000_000_000.0
    t0, recs = base, [config]
    for u in updates:
        recs.append(dict(u, start_unix_ms=t0))
        t0 += u["wall_ms"] + 250.0  # a gap between updates
    log = fx.write_jsonl(tmp_path / "timed.jsonl", recs)
    t = load_trace(tmp_path, "--hierarchy", fx.HIER, log)
    assert t["otherData"]["real_timestamps"] is True
    roots = [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "update" and e["tid"] == 1]
    assert [e["ts"] for e in roots] == [us(r["start_unix_ms"] - base) for r in recs[1:]]
    assert all(e["args"]["layout"] == "logged start_unix_ms" for e in roots)


def test_trace_takes_start_times_rounded_to_the_millisecond(tmp_path):
    # Back-to-back updates logged in whole milliseconds start up to 1 ms before the
    # previous one ends: the trace fell back to the synthetic layout ("start_unix_ms of
    # step 8 falls inside step 7"). Such a start is now the previous update's end; more
    # than 1 ms early is still refused, naming file, line, rank and by how much.
    config, updates = fx.real_records()
    base = 1_718_000_000_000
    recs, t0 = [config], float(base)
    for u in updates:
        recs.append(dict(u, start_unix_ms=math.floor(t0)))
        t0 += u["wall_ms"]
    log = fx.write_jsonl(tmp_path / "rounded.jsonl", recs)
    t = load_trace(tmp_path, "--hierarchy", fx.HIER, log)
    assert t["otherData"]["real_timestamps"] is True
    roots = [e for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "update" and e["tid"] == 1]
    expect, end = [], None
    for r in recs[1:]:
        start = us(r["start_unix_ms"] - base)
        if end is not None and end - 1000 <= start < end:
            start = end
        expect.append(start)
        end = start + us(r["wall_ms"])
    assert [e["ts"] for e in roots] == expect
    # 5 ms early at the fourth update: refused, and said where.
    recs[4] = dict(recs[4], start_unix_ms=recs[4]["start_unix_ms"] - 5)
    log = fx.write_jsonl(tmp_path / "early.jsonl", recs)
    r = run("trace", "-o", tmp_path / "early.trace.json", log)
    assert r.returncode == 0, r.stderr
    assert (f"start_unix_ms not used, updates laid out one after another: {log}:5: the logged start_unix_ms of "
            f"rank 1 step {updates[3]['step']} falls ") in r.stderr, r.stderr
    assert f" ms inside step {updates[2]['step']}" in r.stderr


def test_trace_says_why_logged_start_times_are_not_used(tmp_path):
    # "start_unix_ms": "now" fell back to the synthetic layout without a word, and 1e16 in
    # one update (beyond 64-bit microseconds) said "falls inside step 29", which was false.
    config, updates = fx.real_records()
    base = 1_718_000_000_000.0

    def timed(last=None, every=None, drop=None):
        t0, recs = base, [config]
        for k, u in enumerate(updates):
            v = every if every is not None else t0
            rec = dict(u, start_unix_ms=v)
            if k == len(updates) - 1 and last is not None:
                rec["start_unix_ms"] = last
            if drop is not None and k == drop:
                del rec["start_unix_ms"]
            recs.append(rec)
            t0 += u["wall_ms"] + 250.0
        return recs

    last_step = updates[-1]["step"]
    # (Each names the update's file and line: the overlap case did, these did not.) A value
    # that is not a Unix time in ms is the reader's error now (`report` said nothing of it):
    # the field is left out, the record kept, exit 1; the layout then says why.
    n = len(updates)
    cases = [("big", timed(last=1e16), f"big.jsonl:{n + 1}: rank 1 step {last_step} has no start_unix_ms, while "
                                       "other updates have one", f"big.jsonl:{n + 1}:"),
             ("now", timed(every="now"), None, "now.jsonl:2:"),
             ("some", timed(drop=3), f'some.jsonl:5: rank 1 step {updates[3]["step"]} has no start_unix_ms, while '
                                     'other updates', None)]
    for name, recs, why, error_at in cases:
        log = fx.write_jsonl(tmp_path / f"{name}.jsonl", recs)
        out = tmp_path / f"{name}.trace.json"
        r = run("trace", "-o", out, log)
        if error_at:
            assert r.returncode == 1, r.stderr
            assert f"{log.parent}/{error_at}" in r.stderr and "error: start_unix_ms: " in r.stderr, r.stderr
            assert "is not a Unix time in milliseconds (a number from 0 to 1e14); the field is left out" in r.stderr
        else:
            assert r.returncode == 0, r.stderr
        t = json.loads(out.read_text())
        assert t["otherData"]["real_timestamps"] is False
        assert not any("falls inside" in n for n in t["otherData"]["layout"]), name
        if why is None:
            continue
        why = f"{log.parent}/{why}"
        assert "stepprof: note: start_unix_ms not used, updates laid out one after another: " + why in r.stderr, r.stderr
        assert any(n.startswith("start_unix_ms not used: ") and why in n for n in t["otherData"]["layout"]), name
    # `report` says it too (it compares the ranks' start times with them).
    r = run("report", "--format", "json", tmp_path / "now.jsonl")
    assert r.returncode == 1 and "now.jsonl:2:" in r.stderr and "start_unix_ms" in r.stderr
    # No start_unix_ms anywhere (the usual log) is no note.
    r = run("trace", "-o", tmp_path / "plain.json", fx.LOG)
    assert r.returncode == 0 and "start_unix_ms" not in r.stderr, r.stderr


def test_trace_shrinks_children_that_exceed_their_parent(tmp_path):
    recs = [{"type": "config", "rank": 0},
            {"type": "update", "rank": 0, "step": 1, "wall_ms": 100.0,
             "cuda_stream_ms": {"outer": 50.0, "a": 40.0, "b": 20.0},
             "calls": {"outer": 1, "a": 1, "b": 1}, "parents": {"outer": None, "a": "outer", "b": "outer"}}]
    log = fx.write_jsonl(tmp_path / "over.jsonl", recs)
    t = load_trace(tmp_path, log)
    x = {e["name"]: e for e in t["traceEvents"] if e["ph"] == "X"}
    # a and b (60 ms) are shrunk by 50/60 to fit outer (50 ms), laid out from its start.
    assert x["a"]["ts"] == 0 and x["a"]["dur"] == 40000 * 5 // 6
    assert x["b"]["ts"] == x["a"]["dur"] and x["b"]["dur"] == 50000 - 40000 * 5 // 6  # (ends at outer's end)
    assert x["a"]["args"]["scale"] == pytest.approx(5 / 6, rel=1e-4)
    assert x["b"]["ts"] + x["b"]["dur"] <= x["outer"]["ts"] + x["outer"]["dur"]
    assert t["otherData"]["shrunk_slices"] == 2


def test_trace_does_not_shrink_children_that_fit_but_for_rounding(tmp_path):
    # 1.0006 + 1.0006 + 0.9988 ms is exactly 3 ms, the parent's time; rounded one by one
    # (1001 + 1001 + 999 us) they overran it, and all three were "shrunk" (args.scale) with
    # a gap at the end.
    recs = [{"type": "config", "rank": 0, "world_size": 1},
            {"type": "update", "rank": 0, "step": 1, "wall_ms": 3.0,
             "cpu_call_ms": {"P": 3.0, "a": 1.0006, "b": 1.0006, "c": 0.9988},
             "parents": {"P": None, "a": "P", "b": "P", "c": "P"}}]
    t = load_trace(tmp_path, fx.write_jsonl(tmp_path / "round.jsonl", recs))
    x = {e["name"]: e for e in t["traceEvents"] if e["ph"] == "X"}
    assert t["otherData"]["shrunk_slices"] == 0
    assert not any("scale" in x[n]["args"] for n in "abc")
    # Each ends at its running sum, rounded: 1000.6, 2001.2, 3000 us.
    assert [x[n]["ts"] for n in "abc"] == [0, 1001, 2001]
    assert x["c"]["ts"] + x["c"]["dur"] == x["P"]["ts"] + x["P"]["dur"] == 3000


def test_trace_rounding_errors_do_not_add_up(tmp_path):
    # 20 children of 499.6 us in a parent of 9,992 us: rounded one by one (500 us each)
    # they overran by 8 us, all cut from the last (492 us), without a word.
    kids = {f"c{i:02d}": 0.4996 for i in range(20)}
    recs = [{"type": "config", "rank": 0, "world_size": 1},
            {"type": "update", "rank": 0, "step": 1, "wall_ms": 9.992, "cpu_call_ms": {"P": 9.992, **kids},
             "parents": {"P": None, **{k: "P" for k in kids}}}]
    t = load_trace(tmp_path, fx.write_jsonl(tmp_path / "many.jsonl", recs))
    x = {e["name"]: e for e in t["traceEvents"] if e["ph"] == "X"}
    assert t["otherData"]["shrunk_slices"] == 0
    for i, k in enumerate(sorted(kids)):
        assert abs(x[k]["dur"] - 499.6) <= 1 and abs(x[k]["ts"] - 499.6 * i) <= 0.5, (k, x[k])
    assert x["c19"]["ts"] + x["c19"]["dur"] == 9992


def test_trace_keeps_hostile_names_intact(tmp_path):
    log = fx.write_hostile(tmp_path)
    t = load_trace(tmp_path, log)
    names = {e["name"] for e in t["traceEvents"] if e["ph"] == "X" and e["cat"] == "region"}
    _, updates = fx.hostile_records()
    assert names == {k for u in updates for k in u["cuda_stream_ms"]}
    by, _ = tracks(t)
    for events in by.values():
        parent = enclosing(events)
        for e in events:
            if e["name"] == fx.CSVISH:
                assert parent[id(e)]["name"] == fx.SCRIPT  # nested by the log's parents
    counters = {k for e in t["traceEvents"] if e["ph"] == "C" for k in e["args"]}
    assert {fx.SCRIPT, fx.CSVISH} <= counters


# ---------------------------------------------------------------------------------------
# CSV


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def csv_dir(tmp_path, *args, name="csv"):
    out = tmp_path / name
    r = run("report", "--format", "csv", "--out", out, *args)
    assert r.returncode == 0, r.stderr
    assert sorted(p.name for p in out.iterdir()) == ["regions.csv", "summary.csv", "updates.csv"]
    return out


def num(cell):
    return None if cell == "" else float(cell)


def test_csv_updates(tmp_path):
    _, updates = fx.real_records()
    rows = read_csv(csv_dir(tmp_path, "--hierarchy", fx.HIER, fx.LOG) / "updates.csv")
    counters = []
    for u in updates:
        counters += [c for c in u["counts"] if c not in counters]
    assert list(rows[0].keys()) == ["rank", "step", "wall_ms", "outside_regions_ms", "padding_fraction",
                                    *[f"counts.{c}" for c in counters]]
    assert len(rows) == len(updates)
    for row, u in zip(rows, updates):
        assert int(row["rank"]) == 1 and int(row["step"]) == u["step"]
        assert float(row["wall_ms"]) == u["wall_ms"]  # exact round trip
        for c in counters:
            cell = row[f"counts.{c}"]
            assert (cell == "") == (c not in u["counts"])  # absent is empty, never 0
            if c in u["counts"]:
                assert float(cell) == u["counts"][c]
        assert float(row["padding_fraction"]) == pytest.approx(1 - u["counts"]["valid_tokens"] / u["counts"]["token_slots"])
        outside = u["wall_ms"] - u["cpu_call_ms"]["batch_fetch_and_count"] - u["cpu_call_ms"]["micro_step_total"]
        assert float(row["outside_regions_ms"]) == pytest.approx(outside)


def test_csv_regions(tmp_path):
    _, updates = fx.real_records()
    parent_of, order = fx.parse_hierarchy()
    kids = defaultdict(list)
    for r, p in parent_of.items():
        if p:
            kids[p].append(r)
    depth = {}
    for r in order:
        depth[r] = 0 if parent_of[r] is None else depth[parent_of[r]] + 1
    rows = read_csv(csv_dir(tmp_path, "--hierarchy", fx.HIER, fx.LOG) / "regions.csv")
    assert len(rows) == sum(len(u["calls"]) for u in updates)  # one row per update x region present
    by = {(int(r["step"]), r["region"]): r for r in rows}
    for u in updates:
        for region in u["calls"]:
            row = by[(u["step"], region)]
            assert float(row["device_ms"]) == u["cuda_stream_ms"][region]
            assert float(row["host_ms"]) == u["cpu_call_ms"][region]
            assert int(row["calls"]) == u["calls"][region]
            assert row["parent"] == (parent_of[region] or "")
            assert int(row["depth"]) == depth[region]
            for field, col in (("cuda_stream_ms", "device_self_ms"), ("cpu_call_ms", "host_self_ms")):
                self_ms = u[field][region] - sum(u[field].get(k, 0) for k in kids[region])
                assert float(row[col]) == pytest.approx(self_ms, abs=1e-9)


def test_csv_summary_matches_raw_statistics(tmp_path):
    _, updates = fx.real_records()
    rows = {r["region"]: r for r in read_csv(csv_dir(tmp_path, "--hierarchy", fx.HIER, fx.LOG) / "summary.csv")}
    assert set(rows) == {k for u in updates for k in u["cuda_stream_ms"]}
    single = [u["cuda_stream_ms"]["vggt_single"] for u in updates if "vggt_single" in u["cuda_stream_ms"]]
    r = rows["vggt_single"]
    assert int(r["updates_present"]) == len(single)
    assert float(r["device_ms_median"]) == pytest.approx(statistics.median(single))
    assert float(r["device_ms_mean"]) == pytest.approx(statistics.mean(single))
    assert float(r["share_fraction"]) == pytest.approx(sum(single) / sum(u["wall_ms"] for u in updates))
    assert r["parent"] == "geometry_total" and r["depth"] == "3" and r["in_nesting"] == "true"
    assert r["device_self_ms_median"] == ""  # a leaf: no exclusive-time summary, as in the report


def test_csv_summary_counts_the_updates_with_each_clock(tmp_path):
    # summary.csv had no count of the updates with a device time, so its device median
    # could be over fewer updates than updates_present with nothing to say so (the
    # report's [n of m]). Device time dropped from every third update of two regions.
    config, updates = fx.real_records()
    dropped = {"vggt_single": 0, "language_forward": 0}
    for region in dropped:
        with_it = [u for u in updates if region in u["cuda_stream_ms"]]
        for u in with_it[::3]:
            del u["cuda_stream_ms"][region]
            dropped[region] += 1
    log = fx.write_jsonl(tmp_path / "part.jsonl", [config] + updates)
    rows = {r["region"]: r for r in read_csv(csv_dir(tmp_path, log) / "summary.csv")}
    for region in {k for u in updates for k in list(u["cuda_stream_ms"]) + list(u["cpu_call_ms"])}:
        device = sum(region in u["cuda_stream_ms"] for u in updates)
        host = sum(region in u["cpu_call_ms"] for u in updates)
        r = rows[region]
        assert (int(r["device_updates"]), int(r["host_updates"])) == (device, host), region
        assert int(r["updates_present"]) == sum(region in u["cuda_stream_ms"] or region in u["cpu_call_ms"] for u in updates)
    for region, n in dropped.items():
        assert n > 0 and int(rows[region]["device_updates"]) == int(rows[region]["host_updates"]) - n
        device = [u["cuda_stream_ms"][region] for u in updates if region in u["cuda_stream_ms"]]
        assert float(rows[region]["device_ms_median"]) == pytest.approx(statistics.median(device))


def test_a_gap_that_cannot_be_known_is_not_none(tmp_path):
    # A log with device times only: the gap between device and host is unknown, and was
    # written "none" (no gap) beside a null gap_ms (a helper's docs check).
    config, updates = fx.real_records()
    for u in updates:
        u["cpu_call_ms"] = {}
    log = fx.write_jsonl(tmp_path / "device_only.jsonl", [config] + updates)
    rows = json.loads(run("report", "--format", "json", log).stdout)["regions"]["rows"]
    assert rows and all(r["gap_ms"] is None and r["gap"] is None for r in rows)
    summary = read_csv(csv_dir(tmp_path, log) / "summary.csv")
    assert summary and all(r["device_minus_host_ms_median"] == "" and r["gap"] == "" for r in summary)
    # With both clocks it is said, "none" included.
    rows = json.loads(run("report", "--format", "json", fx.LOG).stdout)["regions"]["rows"]
    assert {r["gap"] for r in rows} >= {"none"} and all(r["gap"] is not None for r in rows)


def test_counts_are_json_integers():
    # Keys without a unit are counts (docs/report-json.md); sums of counters and padded
    # lengths came out as 987856.0 and 3221.0 (a helper's docs check).
    config, updates = fx.real_records()
    doc = json.loads(run("report", "--format", "json", "--hierarchy", fx.HIER, fx.LOG).stdout)
    p = doc["padding"]
    slots = sum(u["counts"]["token_slots"] for u in updates)
    assert p["token_slots"] == slots and type(p["token_slots"]) is int
    assert type(p["valid_tokens"]) is int and type(p["max_padded_length"]) is int
    paths = [x for g in doc["code_paths"]["groups"] for x in g["paths"]]
    assert paths and all(type(x[k]) is int for x in paths for k in ("calls", "samples", "frames"))
    assert sum(x["calls"] for x in paths) == sum(u["calls"].get(x["region"], 0) for u in updates for x in paths)


def test_csv_without_nesting_leaves_self_and_depth_empty(tmp_path):
    out = csv_dir(tmp_path, fx.LOG)
    rows = read_csv(out / "regions.csv")
    assert rows and all(r["device_self_ms"] == "" and r["depth"] == "" and r["parent"] == "" for r in rows)
    assert all(r["outside_regions_ms"] == "" for r in read_csv(out / "updates.csv"))
    assert all(r["in_nesting"] == "" for r in read_csv(out / "summary.csv"))


def test_csv_quotes_hostile_names(tmp_path):
    log = fx.write_hostile(tmp_path)
    out = csv_dir(tmp_path, log)
    text = (out / "regions.csv").read_bytes().decode("utf-8")
    assert '"a,b ""c""\nd"' in text  # RFC 4180: quoted, quotes doubled, line break kept
    config, updates = fx.hostile_records()
    rows = read_csv(out / "regions.csv")
    assert {r["region"] for r in rows} == {k for u in updates for k in u["cuda_stream_ms"]}
    assert {r["parent"] for r in rows} == {fx.SCRIPT, fx.CSVISH, ""}
    header = list(read_csv(out / "updates.csv")[0].keys())
    assert f"counts.{fx.SCRIPT}" in header and f"counts.{fx.CSVISH}" in header


def test_csv_usage_errors(tmp_path):
    assert run("report", "--format", "csv", fx.LOG).returncode == 2  # no --out
    assert run("report", "--out", tmp_path / "x", fx.LOG).returncode == 2  # --out without csv
    assert run("report", "--format", "csv", "--out", tmp_path / "y", "-o", tmp_path / "z", fx.LOG).returncode == 2
    blocker = tmp_path / "file"
    blocker.write_text("")
    r = run("report", "--format", "csv", "--out", blocker / "sub", fx.LOG)
    assert r.returncode == 2 and "cannot create directory" in r.stderr


def test_a_csv_export_that_fails_leaves_the_earlier_one_whole(tmp_path):
    # The tables were renamed into place one by one: a failure (or Ctrl-C) in the middle
    # left one new table among the old ones.
    out = tmp_path / "csv"
    assert run("report", "--format", "csv", "--out", out, fx.LOG).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    assert len(before) >= 3
    last = sorted(before)[-1]
    (out / last).unlink()
    (out / last).mkdir()  # the last table's place is taken by a directory
    other = tmp_path / "other.jsonl"
    other.write_text("\n".join(fx.LOG.read_text().splitlines()[:5]) + "\n")
    r = run("report", "--format", "csv", "--out", out, other)
    assert r.returncode == 2 and "is not a regular file" in r.stderr, r.stderr
    after = {p.name: (p.read_bytes() if p.is_file() else None) for p in out.iterdir()}
    assert after == {**{k: v for k, v in before.items() if k != last}, last: None}  # no table replaced, nothing left


def test_a_csv_export_that_fails_leaves_no_new_directory(tmp_path):
    # A write that fails (here: a 1 KB file-size limit, as a full disk would) removed the
    # tables it had staged but left the directories it had made, empty.
    import resource
    import signal

    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # the write fails with EFBIG instead
        resource.setrlimit(resource.RLIMIT_FSIZE, (1024, 1024))

    out = tmp_path / "new" / "csv"
    r = subprocess.run([BIN, "report", "--format", "csv", "--out", out, fx.LOG], capture_output=True, text=True,
                       timeout=TIMEOUT, preexec_fn=limit)
    assert r.returncode == 2 and "cannot write" in r.stderr, r.stderr
    # The message names the table asked for, not a staging file (".partial-PID").
    assert re.search(r"cannot write \S*/new/csv/[a-z_]+\.csv: File too large", r.stderr), r.stderr
    assert ".partial" not in r.stderr and ".tmp" not in r.stderr, r.stderr
    assert list(tmp_path.iterdir()) == [], list(tmp_path.rglob("*"))
    # A directory that was there stays, with what it held.
    kept = tmp_path / "kept"
    kept.mkdir()
    (kept / "notes.txt").write_text("mine")
    r = subprocess.run([BIN, "report", "--format", "csv", "--out", kept, fx.LOG], capture_output=True, text=True,
                       timeout=TIMEOUT, preexec_fn=limit)
    assert r.returncode == 2
    assert [p.name for p in kept.iterdir()] == ["notes.txt"]


# ---------------------------------------------------------------------------------------
# HTML (parsed; the browser test opens it in Chromium)


class Page(html.parser.HTMLParser):
    """Collects the visible text, every tag with its attributes, and the scripts."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text, self.tags, self.scripts, self._script = [], [], [], None

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))
        if tag in ("script", "style"):
            self._script = [dict(attrs).get("type", "classic"), "", tag]

    def handle_endtag(self, tag):
        if tag in ("script", "style") and self._script is not None:
            if tag == "script":
                self.scripts.append(tuple(self._script[:2]))
            self._script = None

    def handle_data(self, data):
        if self._script is not None:
            self._script[1] += data
        else:
            self.text.append(data)


def html_page(tmp_path, *args, name="report.html"):
    out = tmp_path / name
    r = run("html", *args, "-o", out)
    assert r.returncode == 0, r.stderr
    source = out.read_text(encoding="utf-8")
    page = Page()
    page.feed(source)
    page.close()
    return source, page


@pytest.fixture(scope="module")
def bundled_page(tmp_path_factory):
    """The page of the bundled log (`html --hierarchy`), made once for the tests that read
    it (about 100 s each under the sanitizers)."""
    return html_page(tmp_path_factory.mktemp("bundled"), "--hierarchy", fx.HIER, fx.LOG)


def test_html_is_self_contained(bundled_page):
    source, page = bundled_page
    assert [t for t, _ in page.scripts] == ["application/json", "classic"]
    for tag, attrs in page.tags:
        assert "src" not in attrs, (tag, attrs)  # no external script or image
        assert tag != "link"
        assert not any(a.startswith("on") for a in attrs)
    csp = next(a["content"] for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy")
    import base64
    import hashlib
    digest = base64.b64encode(hashlib.sha256(page.scripts[1][1].encode()).digest()).decode()
    assert f"script-src 'sha256-{digest}'" in csp  # only the bundled script may run
    assert "default-src 'none'" in csp
    charts = [a["data-chart"] for _, a in page.tags if "data-chart" in a]
    assert charts == ["update-time", "regions", "paths-0", "padding", "whatif"]


def test_html_shows_everything_the_report_shows(bundled_page):
    _, page = bundled_page
    shown = " ".join(" ".join(page.text).split())
    r = run("report", "--format", "markdown", "--hierarchy", fx.HIER, fx.LOG)
    assert r.returncode == 0
    cells = 0
    for line in r.stdout.splitlines():
        if line.startswith("|---"):
            continue  # a table's separator row
        if line.startswith("#"):
            text = line.lstrip("# ")
        elif line.startswith("|"):
            for cell in line.strip("|").split(" | "):
                cell = html.unescape(re.sub(r"\\(.)", r"\1", cell.replace("&nbsp;", ""))).strip()
                if cell:
                    cells += 1
                    assert " ".join(cell.split()) in shown, cell
            continue
        else:
            text = re.sub(r"^\d+\. \*\*|\*\*$|^   - ", "", line)
        text = html.unescape(re.sub(r"\\(.)", r"\1", text)).strip()
        if text:
            if ": " in text and line.startswith("   - "):
                text = text.split(": ", 1)[1]
            assert " ".join(text.split()) in shown, text
    assert cells > 100


def test_html_chart_data_comes_from_the_log(bundled_page):
    _, updates = fx.real_records()
    _, page = bundled_page
    data = json.loads(page.scripts[0][1])
    (rank,) = data["ranks"]
    assert rank["label"] == "rank 1"
    assert rank["steps"] == [u["step"] for u in updates]
    assert rank["wall_ms"] == [u["wall_ms"] for u in updates]
    deepest = rank["breakdowns"][-1]
    parts = {p["label"]: p["ms"] for p in deepest["parts"]}
    assert parts["vggt_single"] == [u["cuda_stream_ms"].get("vggt_single") for u in updates]
    ds = [u["cuda_stream_ms"]["deepspeed_step"] - u["cuda_stream_ms"]["gradient_clipping"]
          - u["cuda_stream_ms"]["optimizer"] for u in updates]
    assert parts["deepspeed_step (self)"] == pytest.approx(ds)
    # At the deepest cut the parts add up to the update (device vs host differences aside).
    for k, u in enumerate(updates):
        total = sum(v[k] for v in parts.values() if v[k] is not None)
        assert total == pytest.approx(u["wall_ms"], rel=0.01)
    (group,) = rank["paths"]
    single = next(p for p in group["paths"] if p["label"] == "vggt_single")["ms_per_unit"]
    assert single == pytest.approx([u["cuda_stream_ms"]["vggt_single"] / u["counts"]["vggt_single_frames"]
                                    if "vggt_single" in u["cuda_stream_ms"] else None for u in updates])


@pytest.mark.parametrize("trace", ["hta-a100-rank3of8.json.gz", "hta-a100-rank0of2-nccl.json.gz",
                                   "param-dlrm-8rank-v100-worker0_step_12.json.gz"])
def test_html_stack_of_a_trace_adds_up_to_the_update(tmp_path, trace):
    # A trace's device times are busy unions (the GPU time of a region's own kernels), not
    # spans of the update: stacked, they made 0.29 to 1.63 of wall_ms, and the NCCL kernels
    # were counted twice (in the regions that launched them and as `nccl`). The stack now
    # takes host times, and leaves out regions with device time only.
    path = fx.SRC / "examples/kineto" / trace
    _, page = html_page(tmp_path, path)
    data = json.loads(page.scripts[0][1])
    (rank,) = data["ranks"]
    deepest = rank["breakdowns"][-1]
    labels = [p["label"] for p in deepest["parts"]]
    assert not {"nccl", "nccl (self)", "nccl_exposed"} & set(labels), labels  # (annotations "nccl:..." are host regions)
    for k, wall in enumerate(rank["wall_ms"]):
        total = sum(p["ms"][k] for p in deepest["parts"] if p["ms"][k] is not None)
        assert total == pytest.approx(wall, rel=1e-9), (k, labels)


def test_html_heatmap_title_names_the_clock_of_a_traces_communication(tmp_path):
    # A trace's nccl region has device time only: the heatmap said "wall_ms minus its host
    # time" of it.
    traces = sorted((fx.SRC / "examples/kineto").glob("param-dlrm-8rank-v100-worker*_step_12.json.gz"))
    _, page = html_page(tmp_path, *traces)
    titles = [t for t in page.text if "time outside the communication region" in t]
    assert titles and all("wall_ms minus its device time" in t for t in titles), titles
    _, real = html_page(tmp_path, *fx.write_multi_rank(tmp_path), name="real.html")
    titles = [t for t in real.text if "time outside the communication region" in t]
    assert titles and all("wall_ms minus its host time" in t for t in titles), titles


def test_html_multi_rank_heatmaps(tmp_path):
    paths = fx.write_multi_rank(tmp_path)
    _, page = html_page(tmp_path, "--hierarchy", fx.HIER, *paths)
    charts = [a["data-chart"] for _, a in page.tags if "data-chart" in a]
    assert charts == ["update-time", "heatmap-update_ms", "heatmap-outside_comm_ms", "regions", "paths-0", "padding",
                      "whatif"]
    data = json.loads(page.scripts[0][1])
    _, updates = fx.real_records()
    m = {x["id"]: x["values"] for x in data["matrices"]}
    for i, (rank, s) in enumerate(fx.RANK_SCALE.items()):
        assert m["update_ms"][i] == pytest.approx([u["wall_ms"] * s for u in updates])
        assert m["outside_comm_ms"][i] == pytest.approx(
            [(u["wall_ms"] - u["cpu_call_ms"]["backward_and_communication"]) * s for u in updates])


def test_html_escapes_hostile_names(tmp_path):
    log = fx.write_hostile(tmp_path)
    source, page = html_page(tmp_path, log)
    # Only the page's own two scripts; nothing from the log became markup.
    assert [t for t, _ in page.scripts] == ["application/json", "classic"]
    assert not any(a.startswith("on") for _, attrs in page.tags for a in attrs)
    assert {t for t, _ in page.tags} <= {"html", "head", "meta", "title", "style", "body", "header", "h1", "p", "nav",
                                         "a", "main", "section", "h2", "h3", "figure", "div", "figcaption", "table",
                                         "thead", "tbody", "tr", "th", "td", "ol", "li", "dl", "dt", "dd", "footer",
                                         "script", "label", "select"}
    # The payloads appear, as text, in the page...
    shown = "".join(page.text)
    for payload in (fx.SCRIPT, fx.ONLOAD, fx.IMG, fx.HOSTILE_FILE, "<b>key</b>"):
        assert payload in shown, payload
    # ...only escaped in the source (outside the data block, where they are JSON-escaped).
    data_start = source.index('<script type="application/json"')
    for payload in (fx.SCRIPT, fx.IMG, "<svg onload", "<b>key</b>"):
        assert payload not in source, payload
        assert payload.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;") in source[:data_start]
    assert '"onload=' not in source[:data_start]
    block = page.scripts[0][1]
    assert "<" not in block and ">" not in block and "&" not in block and "\u2028" not in block
    data = json.loads(block)
    labels = {p["label"] for p in data["ranks"][0]["breakdowns"][-1]["parts"]}
    # (The line separator as its UTF-8 bytes in text, as the tables and the text report show it.)
    linesep = fx.LINESEP.replace("\u2028", "\\xe2\\x80\\xa8")
    csvish = fx.CSVISH.replace("\n", "\\x0a")  # (a legend drew the newline as two overlapping lines)
    assert {fx.SCRIPT + " (self)", csvish + " (self)", linesep, fx.ONLOAD, "fast path", fx.IMG} <= labels
    assert linesep in shown and fx.LINESEP not in shown


def test_html_and_trace_exit_statuses(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text(fx.LOG.read_text() + "{not json}\n")
    assert run("html", bad, "-o", tmp_path / "a.html").returncode == 1  # rejected line, rest written
    assert (tmp_path / "a.html").stat().st_size > 0
    assert run("trace", bad, "-o", tmp_path / "a.json").returncode == 1
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    assert run("html", empty, "-o", tmp_path / "b.html").returncode == 3
    assert run("trace", empty, "-o", tmp_path / "b.json").returncode == 3
    assert run("trace", fx.LOG, "-o", tmp_path / "no/such/dir/t.json").returncode == 2


def log_updates(path):
    return [json.loads(l) for l in Path(path).read_text().splitlines()[1:] if l.strip()]


def test_html_charts_of_long_runs_draw_means_of_consecutive_updates(tmp_path):
    # 4,001 updates: more than the 2,000 points a line is drawn from, so each point is
    # the mean of 3 consecutive updates (the last point: of the one update left).
    logs = tmp_path / "logs"
    assert run("synth", "-o", logs, "--ranks", "1", "--updates", "4001").returncode == 0
    updates = log_updates(logs / "rank0.jsonl")
    source, page = html_page(tmp_path, logs)
    assert "Each point of the charts is the mean of 3 consecutive updates." in source
    (rank,) = json.loads(page.scripts[0][1])["ranks"]
    chunks = [updates[i:i + 3] for i in range(0, len(updates), 3)]
    assert rank["steps"] == [c[0]["step"] for c in chunks]
    assert rank["wall_ms"] == pytest.approx([statistics.fmean(u["wall_ms"] for u in c) for c in chunks], rel=1e-12)
    assert len(rank["steps"]) == 1334


def test_html_charts_of_many_ranks_show_the_slowest_and_fastest(tmp_path):
    logs = tmp_path / "logs"
    assert run("synth", "-o", logs, "--ranks", "40", "--updates", "5").returncode == 0
    medians = {}
    for f in logs.glob("rank*.jsonl"):
        medians[json.loads(f.read_text().splitlines()[0])["rank"]] = statistics.median(u["wall_ms"] for u in log_updates(f))
    assert sorted(medians) == list(range(40))
    by_median = sorted(medians, key=lambda r: -medians[r])
    expected = sorted(by_median[:8] + by_median[-3:])
    source, page = html_page(tmp_path, logs)
    data = json.loads(page.scripts[0][1])
    assert [r["label"] for r in data["ranks"]] == [f"rank {r}" for r in expected]
    assert "Per-rank charts show 11 of the 40 ranks" in source
    # Where every rank's updates are: updates.csv (the JSON report holds summaries only).
    assert "Every update of every rank is in DIR/updates.csv of stepprof report --format csv --out DIR." in source
    csv_dir = tmp_path / "csv"
    assert run("report", "--format", "csv", "--out", csv_dir, logs).returncode == 0
    with open(csv_dir / "updates.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == sum(len(log_updates(p)) for p in Path(logs).glob("rank*.jsonl"))
    for m in data["matrices"]:  # the heatmaps keep every rank, with their own labels
        assert m["labels"] == [f"rank {r}" for r in range(40)] and len(m["values"]) == 40


def test_html_heatmaps_of_more_than_256_ranks_show_the_largest_of_each_group_of_ranks(tmp_path):
    # 300 ranks: rows of ceil(300 / 256) = 2 consecutive ranks (150 rows), each cell the
    # largest wall_ms of the two; the straggler's row (ranks 76..77) stays the darkest of
    # the time outside communication.
    logs = tmp_path / "logs"
    assert run("synth", "-o", logs, "--ranks", "300", "--updates", "3", "--straggler", "77:1:3:1.8").returncode == 0
    wall = {}
    for f in logs.glob("rank*.jsonl"):
        rank = json.loads(f.read_text().splitlines()[0])["rank"]
        wall[rank] = {u["step"]: u["wall_ms"] for u in log_updates(f)}
    source, page = html_page(tmp_path, logs)
    assert "Each heatmap row is 2 consecutive ranks, each cell the largest of their values." in source
    data = json.loads(page.scripts[0][1])
    (m,) = [m for m in data["matrices"] if m["id"] == "update_ms"]
    assert m["ranks_per_row"] == 2
    assert m["labels"] == [f"ranks {r}..{r + 1}" for r in range(0, 300, 2)]
    steps = data["steps"]
    expected = [[max(wall[r][s], wall[r + 1][s]) for s in steps] for r in range(0, 300, 2)]
    assert len(m["values"]) == 150
    for got, want in zip(m["values"], expected):
        assert got == pytest.approx(want, rel=1e-12)
    # (Every rank's wall_ms waits for the straggler; the time outside communication shows it.)
    (outside,) = [m for m in data["matrices"] if m["id"] == "outside_comm_ms"]
    darkest = max(range(150), key=lambda i: sum(outside["values"][i]))
    assert outside["labels"][darkest] == "ranks 76..77"
    # Rank 101's log missing: 299 ranks, still 2 per row; a row names the ranks it holds.
    (logs / "rank101.jsonl").unlink()
    _, page = html_page(tmp_path, logs, name="missing.html")
    (m,) = [m for m in json.loads(page.scripts[0][1])["matrices"] if m["id"] == "update_ms"]
    assert m["labels"][49:52] == ["ranks 98..99", "ranks 100, 102", "ranks 103..104"]
    assert m["labels"][-1] == "rank 299" and len(m["values"]) == 150
    assert m["values"][50] == pytest.approx([max(wall[100][s], wall[102][s]) for s in steps], rel=1e-12)


def test_the_update_time_table_of_many_ranks_shows_the_stragglers_as_the_charts_do(tmp_path):
    # The text table showed only the 8 slowest and 3 fastest, leaving out stragglers the
    # cross-rank table and the HTML charts show.
    logs = tmp_path / "logs"
    stragglers = [3, 7, 11, 20, 33]
    args = ["synth", "-o", logs, "--ranks", "40", "--updates", "30", "--seed", "5"]
    for r in stragglers:
        args += ["--straggler", f"{r}:1:30:1.6"]
    assert run(*args).returncode == 0
    report = json.loads(run("report", "--format", "json", logs).stdout)
    assert sorted(report["cross_rank"]["stragglers"]) == stragglers
    text = run("report", logs).stdout
    section = text[text.index("2. Update time"):text.index("3. Regions")]
    table_ranks = {int(m.group(1)) for m in re.finditer(r"^  (\d+) +[\d,]+\.\d", section, re.M)}
    assert set(stragglers) <= table_ranks
    _, page = html_page(tmp_path, logs)
    charted = {int(r["label"].split()[1]) for r in json.loads(page.scripts[0][1])["ranks"]}
    assert charted == table_ranks


def test_csv_tables_never_replace_an_input_log(tmp_path):
    # -o refused to overwrite an input log, but --out DIR wrote DIR/updates.csv over a log
    # of that name; and --out - made a directory named "-" (-o - is stdout).
    logs = tmp_path / "cdir"
    logs.mkdir()
    given = logs / "updates.csv"
    given.write_bytes(fx.LOG.read_bytes())
    r = run("report", "--format", "csv", "--out", logs, given)
    assert r.returncode == 2, r.stderr
    assert f"--out would write {logs / 'updates.csv'}, which is one of the input logs ({given})" in r.stderr
    assert given.read_bytes() == fx.LOG.read_bytes()
    assert sorted(p.name for p in logs.iterdir()) == ["updates.csv"]
    r = subprocess.run([BIN, "report", "--format", "csv", "--out", "-", str(fx.LOG)], capture_output=True, text=True,
                       timeout=TIMEOUT, cwd=tmp_path)
    assert r.returncode == 2 and "give a directory" in r.stderr, r.stderr
    assert not (tmp_path / "-").exists()


def test_background_regions_are_not_parts_of_the_update_in_trace_html_and_csv(tmp_path):
    # A data-loader thread's region (role "background") runs alongside the update. The
    # report left it out of the update, but the trace shrank every region of the update to
    # make room for it (forward drawn at half its time), and the HTML chart stacked it as
    # a part of the update, so "(outside every region)" went negative.
    walls = [100.0, 120.0, 90.0, 110.0]
    lines = [json.dumps({"type": "config", "rank": 0, "world_size": 1,
                         "region_roles": {"prefetch": "background"}})]
    for step, wall in enumerate(walls):
        host = {"forward": 0.4 * wall, "backward": 0.5 * wall, "prefetch": 0.95 * wall + 5 * step,
                "decode": 0.6 * wall, "opt": 0.05 * wall}
        lines.append(json.dumps({"type": "update", "rank": 0, "step": step, "wall_ms": wall, "cpu_call_ms": host,
                                 "calls": {k: 1 for k in host},
                                 "parents": {"forward": None, "backward": None, "prefetch": None,
                                             "decode": "prefetch", "opt": "backward"}}))
    log = tmp_path / "bg.jsonl"
    log.write_text("\n".join(lines) + "\n")
    records = [json.loads(x) for x in lines[1:]]

    by, names = tracks(load_trace(tmp_path, log))
    track = {names[k]: v for k, v in by.items()}
    assert sorted(track) == ["host (cpu_call_ms)", "prefetch (background) [host]"]
    for e in track["host (cpu_call_ms)"]:
        assert e["name"] not in ("prefetch", "decode")
        if e["cat"] == "region":  # every region of the update at its own time
            assert e["dur"] == us(records[e["args"]["step"]]["cpu_call_ms"][e["name"]]), e
            assert "scale" not in e["args"]
    bg = track["prefetch (background) [host]"]
    assert [e["name"] for e in bg] == ["prefetch", "decode"] * len(walls)
    parent = enclosing(bg)
    for e in bg:
        u = records[e["args"]["step"]]
        recorded = us(u["cpu_call_ms"][e["name"]])
        if e["name"] == "prefetch":  # from the update's start, at most its wall time
            assert parent[id(e)] is None and e["dur"] == min(recorded, us(u["wall_ms"]))
        else:
            assert parent[id(e)]["name"] == "prefetch" and e["dur"] == min(recorded, parent[id(e)]["dur"])

    outside = [u["wall_ms"] - u["cpu_call_ms"]["forward"] - u["cpu_call_ms"]["backward"] for u in records]
    rows = read_csv(csv_dir(tmp_path, log) / "updates.csv")
    assert [float(r["outside_regions_ms"]) for r in rows] == pytest.approx(outside)

    _, page = html_page(tmp_path, log)
    (rank,) = json.loads(page.scripts[0][1])["ranks"]
    for b in rank["breakdowns"]:
        parts = {p["label"]: p["ms"] for p in b["parts"]}
        assert not {"prefetch", "decode"} & set(parts), parts
        assert parts["(outside every region)"] == pytest.approx(outside)
    deepest = {p["label"]: p["ms"] for p in rank["breakdowns"][-1]["parts"]}
    assert deepest["backward (self)"] == pytest.approx([0.45 * w for w in walls])


def test_trace_ranks_draws_only_those_ranks_at_the_places_of_the_whole_trace(tmp_path):
    # 8,192 ranks' trace was 57 MB per step, with no way to draw fewer ranks.
    out = tmp_path / "logs"
    assert run("synth", "-o", out, "--ranks", 6, "--updates", 12, "--straggler", "4:3:8").returncode == 0
    def events(*args):
        r = run("trace", out, "-o", tmp_path / "t.json", *args)
        assert r.returncode == 0, r.stderr
        doc = json.loads((tmp_path / "t.json").read_text())
        return doc["traceEvents"] if isinstance(doc, dict) else doc
    whole = events()
    some = events("--ranks", "1,4:5")
    assert {e["pid"] for e in some} == {1, 4, 5}
    # Rank 4's straggling steps are as long in the filtered trace as in the whole one.
    # (process_sort_index is the process's place among those drawn.)
    def placed(evs):
        return [e for e in evs if e["name"] != "process_sort_index"]
    assert placed(some) == placed([e for e in whole if e["pid"] in (1, 4, 5)])
    assert len(placed(some)) > 100
    r = run("trace", out, "--ranks", "7:9", "-o", tmp_path / "none.json")
    assert r.returncode == 3 and "no rank of the logs is in it (the logs' ranks: 0..5)" in r.stderr
    r = run("trace", out, "--ranks", "3:1")
    assert r.returncode == 2 and "the first rank is after the last" in r.stderr
    r = run("trace", out, "--ranks", "")  # (drew every rank, while --steps '' was refused)
    assert r.returncode == 2 and "--ranks: an empty list" in r.stderr, r.stderr


def test_a_trace_longer_than_its_time_axis_is_refused(tmp_path):
    # 10,000 updates of 9.99e11 ms (each below the 10^12 ms limit) added up past a 64-bit
    # microsecond clock: 767 update slices had negative timestamps, the trace ran backwards.
    log = tmp_path / "huge.jsonl"
    lines = [json.dumps({"type": "config", "rank": 0, "world_size": 1})]
    lines += [json.dumps({"type": "update", "rank": 0, "step": s, "wall_ms": 9.99e11}) for s in range(10000)]
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "t.json"
    r = run("trace", log, "-o", out)
    assert r.returncode == 3, r.stderr  # (nothing drawn; 1 says the rest was analyzed)
    assert "the updates' wall_ms add up to 9.99e+15 ms" in r.stderr and "Nothing was written" in r.stderr, r.stderr
    assert not out.exists()
    # Nine of them fit (9 x 31.7 years, within 2^53 us = 285 years).
    r = run("trace", "--steps", "0:8", log, "-o", out)
    assert r.returncode == 0, r.stderr
    events = json.loads(out.read_text())["traceEvents"]
    starts = sorted(e["ts"] for e in events if e.get("cat") == "update")
    assert starts == [round(k * 9.99e14) for k in range(9)]


def test_a_page_of_a_log_whose_name_is_not_utf8_is_utf8(tmp_path):
    # The name's bytes went into <title> and two other places raw, in a page declared UTF-8.
    name = os.fsdecode(b"bad\xff\xfe.jsonl")
    (tmp_path / name).write_bytes(fx.LOG.read_bytes())
    out = tmp_path / "p.html"
    r = run("html", tmp_path / name, "-o", out)
    assert r.returncode == 0, r.stderr
    page = out.read_bytes().decode("utf-8")  # (raises on invalid UTF-8)
    assert "<title>" in page and "bad\\xff\\xfe.jsonl" in page


def test_logged_start_times_beyond_the_time_axis_are_not_used(tmp_path):
    # start_unix_ms of 0 and 9.9e13 ms gave timestamps past 2^53 us, which a trace viewer
    # (JavaScript numbers) cannot hold to the microsecond.
    log = tmp_path / "span.jsonl"
    log.write_text("\n".join(json.dumps(r) for r in (
        {"type": "config", "rank": 0, "world_size": 1},
        {"type": "update", "rank": 0, "step": 1, "wall_ms": 10, "start_unix_ms": 0},
        {"type": "update", "rank": 0, "step": 2, "wall_ms": 10, "start_unix_ms": 9.9e13})) + "\n")
    out = tmp_path / "t.json"
    r = run("trace", log, "-o", out)
    assert r.returncode == 0, r.stderr
    assert "start_unix_ms not used" in r.stderr and "more than a trace's time axis holds" in r.stderr, r.stderr
    starts = sorted(e["ts"] for e in json.loads(out.read_text())["traceEvents"] if e.get("cat") == "update")
    assert starts == [0, 10000]


def test_regions_below_many_wrappers_the_log_never_has_are_in_the_trace(tmp_path):
    # The bundled nesting under 300 nested wrapper regions the log never records: each
    # counted as a level of the trace's 256, and the trace held no region slice (exit 0,
    # nothing said). They are now no levels: the same slices as without them.
    lines = [line for line in fx.HIER.read_text().splitlines() if line.strip() and not line.startswith("#")]
    depth = 300
    wrapped = ["  " * d + f"wrapper{d}" for d in range(depth)] + ["  " * depth + line for line in lines]
    hier = tmp_path / "wrapped.txt"
    hier.write_text("\n".join(wrapped) + "\n")
    plain = [e for e in load_trace(tmp_path, "--hierarchy", fx.HIER, fx.LOG)["traceEvents"] if e.get("ph") == "X"]
    deep = [e for e in load_trace(tmp_path, "--hierarchy", hier, fx.LOG)["traceEvents"] if e.get("ph") == "X"]
    assert len(plain) > 500 and deep == plain


def test_trace_lays_out_regions_under_an_absent_background_wrapper(tmp_path):
    # A --hierarchy file puts the data loading on another thread, under a `loader_thread`
    # role=background that no update has: its regions were dropped from the trace. They
    # are on its track now, from each update's start, with their logged times.
    hier = tmp_path / "bg.txt"
    hier.write_text(fx.HIER.read_text().replace("batch_fetch_and_count            role=data\n",
                                                "loader_thread role=background\n  batch_fetch_and_count role=data\n"))
    assert "loader_thread" in hier.read_text()
    trace = load_trace(tmp_path, "--hierarchy", hier, fx.LOG)
    by, names = tracks(trace)
    (host,) = [k for k, n in names.items() if n == "loader_thread (background) [host]"]
    (main,) = [k for k, n in names.items() if n == "host (cpu_call_ms)"]
    updates = [e for e in by[main] if e["name"].startswith("update ")]
    logged = [json.loads(line)["cpu_call_ms"]["batch_fetch_and_count"]
              for line in fx.LOG.read_text().splitlines() if json.loads(line)["type"] == "update"]
    slices = [e for e in by[host] if e["name"] == "batch_fetch_and_count"]
    assert [e["dur"] for e in slices] == [us(ms) for ms in logged]
    assert all(e["name"] != "batch_fetch_and_count" for e in by[main])
    assert len(updates) == len(logged) and [e["ts"] for e in slices] == [e["ts"] for e in updates]
