"""Runs a Google Benchmark binary for the bench check scripts and returns its JSON report.

run(binary, flags, who, timeout) -> the parsed `--benchmark_format=json` output (a dict
with "benchmarks": one entry per repetition and aggregate). Raises BenchError, whose
text names `who` and says why, when the binary cannot be started, runs past `timeout`
seconds, exits with a non-zero status (its stderr is passed through) or prints no JSON.
"""
import json
import subprocess
import sys


class BenchError(Exception):
    """The benchmark could not be run; str() says why (the check scripts exit with 2)."""


def run(binary, flags, who, timeout):
    cmd = [binary] + list(flags) + ["--benchmark_format=json"]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise BenchError("%s: cannot run %s: %s" % (who, binary, e)) from e
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise BenchError("%s: %s exited with %d" % (who, binary, proc.returncode))
    try:
        return json.loads(proc.stdout)
    except json.JSONDecodeError as e:
        raise BenchError("%s: %s printed no JSON report: %s" % (who, binary, e)) from e
