#!/usr/bin/env python3
"""Cuts a real PyTorch profiler trace down to a fuzzer seed of a few KiB: one
ProfilerStep, a few user annotations and operators inside it, some runtime launches
with their kernels and memory copies (an NCCL kernel among them when the step has one)
and the flow events that link them. The keys and event shapes stay those of the trace.

  /usr/bin/python3 fuzz/kineto_seed.py examples/kineto/param-dlrm-8rank-v100-worker0_step_12.json.gz \\
      > fuzz/seeds/kineto-dlrm-one-step.json
"""
import gzip
import json
import sys


def main(path: str) -> None:
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        trace = json.load(f)
    events = trace["traceEvents"]
    step = next(e for e in events if str(e.get("name", "")).startswith("ProfilerStep#"))
    lo, hi = step["ts"], step["ts"] + step["dur"]

    def inside(e):
        return "ts" in e and lo <= e["ts"] and e["ts"] + e.get("dur", 0) <= hi

    def first(cat, n):
        return [e for e in events if e.get("cat") == cat and inside(e)][:n]

    gpu_cats = ("kernel", "gpu_memcpy", "gpu_memset")
    gpu = [e for e in events if e.get("cat") in gpu_cats]
    nccl = [e for e in gpu if "nccl" in e.get("name", "").lower()]
    launches = first("cuda_runtime", 10)
    corr = {e.get("args", {}).get("correlation") for e in launches}
    for k in nccl[:1]:  # keep one NCCL kernel and its launch
        c = k.get("args", {}).get("correlation")
        launches += [e for e in events if e.get("cat") == "cuda_runtime" and e.get("args", {}).get("correlation") == c]
        corr.add(c)
    kernels = [e for e in gpu if e.get("args", {}).get("correlation") in corr]
    flows = [e for e in events if e.get("cat") == "ac2g" and e.get("id") in corr]
    meta = [e for e in events if e.get("ph") == "M"][:6]
    kept = meta + [step] + first("user_annotation", 4) + first("cpu_op", 8) + launches + kernels + flows
    out = {k: v for k, v in trace.items() if k != "traceEvents"}
    out["traceEvents"] = kept
    json.dump(out, sys.stdout, separators=(",", ":"))


if __name__ == "__main__":
    main(sys.argv[1])
