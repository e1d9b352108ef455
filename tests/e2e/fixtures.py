"""Logs for the export tests, written with Python's standard library.

- the bundled real log (rank 1 of a 4-GPU run) and its nesting;
- a 4-rank job made from it: rank r is the real log with every time multiplied by
  RANK_SCALE[r] (so rank 2 is the slowest), and `rank` set to r;
- a log written the way stepprof's recorder writes one (with `parents` and the config's
  `region_alternatives` / `region_roles`) whose region, counter, config and file names are
  hostile HTML and CSV text.
"""
import copy
import json
import os
from pathlib import Path

SRC = Path(os.environ["STEPPROF_SOURCE_DIR"])
LOG = SRC / "examples/qwen-vggt/rank1.jsonl"
HIER = SRC / "examples/qwen-vggt/hierarchy.txt"

RANK_SCALE = {0: 1.0, 1: 1.02, 2: 1.15, 3: 0.97}

# Hostile names: markup, attribute breakers, CSV separators and quotes, U+2028.
SCRIPT = "<script>alert(1)</script>"
ONLOAD = '"onload=alert(2) x="'
IMG = "<img src=x onerror=alert(3)>"
CSVISH = 'a,b "c"\nd'
LINESEP = "line\u2028sep"
HOSTILE_FILE = "<svg onload=alert(4)>.jsonl"


def real_records():
    lines = [json.loads(l) for l in LOG.read_text().splitlines() if l.strip()]
    return lines[0], lines[1:]


def parse_hierarchy(path=HIER):
    """{region: parent or None} and the regions in file order, from the indentation."""
    parent, order, stack = {}, [], []  # stack of (indent, name)
    for raw in Path(path).read_text().splitlines():
        line = raw.split("#", 1)[0].rstrip()
        if not line.strip():
            continue
        indent = len(line) - len(line.lstrip(" "))
        name = line.split()[0]
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent[name] = stack[-1][1] if stack else None
        order.append(name)
        stack.append((indent, name))
    return parent, order


def write_jsonl(path, records):
    with open(path, "w", encoding="utf-8") as f:
        for r in records:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
    return path


def walls_by_step(files):
    """{step: [wall_ms of each file's update record for that step]}, read with json.loads."""
    walls = {}
    for f in files:
        for line in Path(f).read_text().splitlines():
            rec = json.loads(line)
            if rec["type"] == "update":
                walls.setdefault(rec["step"], []).append(rec["wall_ms"])
    return walls


def write_multi_rank(directory):
    """Four rank files in `directory`; returns their paths."""
    config, updates = real_records()
    paths = []
    for rank, scale in RANK_SCALE.items():
        c = dict(config, rank=rank)
        us = []
        for u in updates:
            u = copy.deepcopy(u)
            u["rank"] = rank
            u["wall_ms"] *= scale
            for key in ("cuda_stream_ms", "cpu_call_ms"):
                u[key] = {k: v * scale for k, v in u[key].items()}
            us.append(u)
        paths.append(write_jsonl(Path(directory) / f"rank{rank}.jsonl", [c, *us]))
    return paths


def hostile_records():
    top, child, fast, slow, comm = SCRIPT, CSVISH, "fast path", IMG, ONLOAD
    config = {"type": "config", "rank": 0, "world_size": 1, "micro_batch": 2, "accumulation": 1,
              "note": SCRIPT, "<b>key</b>": ONLOAD, LINESEP: IMG,
              "region_alternatives": {fast: ONLOAD, slow: ONLOAD},
              "region_roles": {comm: "communication"}}
    parents = {top: None, child: top, fast: child, slow: child, comm: None, LINESEP: top}
    updates = []
    for step in range(6):
        use_slow = step % 2 == 1
        slots = 200 + 20 * step  # LINESEP's time follows the token slots: no-padding has a model to use
        dev = {top: 60.0 + 2 * step, child: 30.0 + step, comm: 20.0 - step, LINESEP: 0.025 * slots}
        dev[slow if use_slow else fast] = 25.0 + step if use_slow else 10.0 + step
        counts = {"samples": 2, "token_slots": slots, "valid_tokens": 150 + step, "frames": 8,
                  (slow if use_slow else fast) + "_samples": 2, (slow if use_slow else fast) + "_frames": 8,
                  SCRIPT: step, CSVISH: 1}
        updates.append({"type": "update", "rank": 0, "step": step, "wall_ms": 90.0 + step,
                        "cuda_stream_ms": dev, "cpu_call_ms": {k: v * 0.99 for k, v in dev.items()},
                        "calls": {k: 1 for k in dev}, "parents": {k: parents[k] for k in dev},
                        "counts": counts})
    return config, updates


def write_hostile(directory):
    config, updates = hostile_records()
    return write_jsonl(Path(directory) / HOSTILE_FILE, [config, *updates])


def rank_speeds(updates, ref="vggt_batched", work="vggt_batched_frames", clock="cuda_stream_ms"):
    """Each rank's speed on the reference path (docs/report-json.md, code_paths): its ms per
    unit of work there over the pooled ms per unit of every rank; 1 for a rank that did not
    run it. `updates`: every rank's update records as dicts."""
    pooled_ms = sum(u[clock].get(ref, 0.0) for u in updates)
    pooled_work = sum(u["counts"].get(work, 0) for u in updates)
    per_rank = {}
    for u in updates:
        if ref in u[clock]:
            ms, w = per_rank.get(u["rank"], (0.0, 0.0))
            per_rank[u["rank"]] = (ms + u[clock][ref], w + u["counts"].get(work, 0))
    return {r: (ms / w) / (pooled_ms / pooled_work) for r, (ms, w) in per_rank.items() if ms > 0 and w > 0}


def update_speeds(updates, ref="vggt_batched", work="vggt_batched_frames", clock="cuda_stream_ms"):
    """Each update's speed (docs/report-json.md, code_paths): its rank's speed (rank_speeds),
    except where the median ms per unit on the reference path over the rank's 5 updates
    around it (by step; at least 3 with time on the path) differs from the rank's whole-run ms
    per unit by more than 10 %: that median over the pooled ms per unit then. Returns
    {(rank, step): speed}; 1 for a rank that did not run the path."""
    pooled = sum(u[clock].get(ref, 0.0) for u in updates) / sum(u["counts"].get(work, 0) for u in updates)
    whole = {r: s * pooled for r, s in rank_speeds(updates, ref, work, clock).items()}
    out = {}
    for rank in {u["rank"] for u in updates}:
        mine = sorted((u for u in updates if u["rank"] == rank), key=lambda u: u["step"])
        for i, u in enumerate(mine):
            if rank not in whole:
                out[(rank, u["step"])] = 1.0
                continue
            near = sorted(v[clock][ref] / v["counts"][work] for v in mine[max(0, i - 2):i + 3]
                          if v[clock].get(ref, 0) > 0 and v["counts"].get(work, 0) > 0)
            cost = whole[rank]
            if len(near) >= 3 and abs(near[len(near) // 2] / whole[rank] - 1) > 0.10:
                cost = near[len(near) // 2]
            out[(rank, u["step"])] = cost / pooled
    return out


def speed_weighted_cost(updates, speeds, path, work, clock="cuda_stream_ms"):
    """A path's ms per unit of work with each update's work weighted by its speed
    (update_speeds)."""
    ms = sum(u[clock].get(path, 0.0) for u in updates)
    return ms / sum(speeds.get((u["rank"], u["step"]), 1.0) * u["counts"].get(work, 0) for u in updates)


def handles_signal(pid, sig):
    """True when process `pid` has a handler for signal `sig` (a name such as "SIGINT", or
    a number): its bit in SigCgt of /proc/PID/status. Tests wait for it before they signal
    a command, as a slow start (a sanitizer build on a loaded machine) takes a signal sent
    earlier with the default action."""
    import signal
    number = int(getattr(signal, sig)) if isinstance(sig, str) else int(sig)
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (number - 1)))
    except OSError:
        pass
    return False
