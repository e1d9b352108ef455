"""The Python recorder (package stepprof over the C++ recorder), end to end: record with
the Python API, read the file back with the json module and with `stepprof report`, and
compare with what the test measured itself."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from pathlib import Path

import pytest

import stepprof

BIN = os.environ.get("STEPPROF_BIN")


def read_log(path):
    lines = [json.loads(l) for l in Path(path).read_text().splitlines()]
    assert lines[0]["type"] == "config"
    return lines[0], lines[1:]


def busy(seconds):
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        pass


def run_python(code, **env):
    """Runs `code` in a fresh interpreter that imports this stepprof (extra environment
    variables from `env`); the CompletedProcess, output as text."""
    full = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path), **env}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=full)


def close_interrupted(rec, owner, name, fake):
    """rec.close() with `owner.name` replaced by `fake` (which raises KeyboardInterrupt, as a
    Ctrl-C landing there would), restored afterwards."""
    real = getattr(owner, name)
    setattr(owner, name, fake)
    try:
        with pytest.raises(KeyboardInterrupt):
            rec.close()
    finally:
        setattr(owner, name, real)


def test_regions_counters_and_fields(tmp_path):
    path = tmp_path / "rank{rank}.jsonl"
    rec = stepprof.Recorder(str(path), rank=3, world_size=4, config={"micro_batch": 2, "note": "test"},
                            alternatives={"fast": "path", "slow": "path"}, roles={"sync": "communication"},
                            device_timing="off")
    measured = {}
    inner_in, inner_around = 0.0, 0.0  # step 1: time inside / around the inner blocks [ms]
    for step in (1, 2):
        t0 = time.perf_counter()
        with rec.region("outer"):
            for _ in range(3):
                a = time.perf_counter()
                with rec.region("inner"):
                    b = time.perf_counter()
                    busy(0.004)
                    c = time.perf_counter()
                d = time.perf_counter()
                if step == 1:
                    inner_in += (c - b) * 1000
                    inner_around += (d - a) * 1000
            if step == 1:
                with rec.region("fast"):
                    busy(0.002)
        measured[step] = (time.perf_counter() - t0) * 1000
        rec.count("samples", 2)
        rec.count("samples", 2)
        rec.frame(9, 3)
        rec.frame(4)
        rec.input_shape((2, 128))
        rec.sample_indices([10, 11, 12, 13])
        rec.count("token_slots", 256)
        rec.count("valid_tokens", 192)
        rec.end_update(step)
    assert rec.close() == {}

    config, updates = read_log(tmp_path / "rank3.jsonl")
    assert config["rank"] == 3 and config["world_size"] == 4 and config["micro_batch"] == 2
    assert config["region_alternatives"] == {"fast": "path", "slow": "path"}
    assert config["region_roles"] == {"sync": "communication"}
    assert config["device_timing"].startswith("off")
    assert [u["step"] for u in updates] == [1, 2]
    u1, u2 = updates
    assert u1["calls"] == {"outer": 1, "inner": 3, "fast": 1}
    assert "fast" not in u2["calls"] and "fast" not in u2["cpu_call_ms"]  # absent, not 0
    assert u1["parents"] == {"outer": None, "inner": "outer", "fast": "outer"}
    assert "cuda_stream_ms" not in u1  # host only
    # Host times against this test's own clock readings: the recorded time of the inner
    # region lies between the time measured inside the with-blocks and the time measured
    # around them (robust to preemption on a loaded machine).
    assert inner_in <= u1["cpu_call_ms"]["inner"] <= inner_around
    assert u1["cpu_call_ms"]["inner"] >= 12
    assert u1["cpu_call_ms"]["outer"] <= measured[1] + 0.5
    assert u1["cpu_call_ms"]["outer"] >= u1["cpu_call_ms"]["inner"] + u1["cpu_call_ms"]["fast"]
    assert u1["counts"]["samples"] == 4
    assert u1["frame_histogram"] == {"9": 3, "4": 1}
    assert u1["input_shapes"] == {"(2, 128)": 1}
    assert u1["sample_indices"] == [10, 11, 12, 13]
    assert u1["padding_fraction"] == pytest.approx(1 - 192 / 256)


def test_decorator_and_threads(tmp_path):
    rec = stepprof.Recorder(str(tmp_path / "r{rank}.jsonl"), rank=0, world_size=1, device_timing="off")

    @rec.timed("load")
    def load():
        busy(0.002)
        rec.count("loaded", 1)

    @rec.timed()
    def helper():
        return 7

    threads = [threading.Thread(target=load) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert helper() == 7
    rec.end_update(1)
    rec.close()
    _, (u,) = read_log(tmp_path / "r0.jsonl")
    assert u["calls"]["load"] == 4
    assert u["counts"]["loaded"] == 4
    assert u["cpu_call_ms"]["load"] >= 4 * 2 - 0.5
    assert any(k.endswith("helper") for k in u["calls"])


def test_exception_inside_region_propagates_and_region_closes(tmp_path):
    rec = stepprof.Recorder(str(tmp_path / "e{rank}.jsonl"), device_timing="off")
    with pytest.raises(KeyError):
        with rec.region("fails"):
            raise KeyError("boom")
    with rec.region("after"):
        pass
    rec.end_update(5)
    rec.close()
    _, (u,) = read_log(tmp_path / "e0.jsonl")
    assert u["calls"] == {"fails": 1, "after": 1}
    assert u["parents"]["after"] is None  # "fails" was closed by the exception


def test_unwritable_path_warns_and_counts(tmp_path):
    (tmp_path / "file").write_text("a regular file, not a directory\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = stepprof.Recorder(str(tmp_path / "file" / "r{rank}.jsonl"), device_timing="off")
        with rec.region("work"):
            pass
        rec.end_update(1)  # must not raise
        errors = rec.close()
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert warned and "Not a directory" in warned[0]
    assert not any(m.startswith("stepprof: stepprof:") for m in warned)
    assert sum(errors.values()) >= 1
    # Each warning points at the job's own call (Recorder(), end_update(), close()), so
    # that a per-module warnings filter matches it (close()'s pointed into stepprof).
    ours = [w for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(ours) == 3, [str(w.message) for w in ours]
    assert [w.filename for w in ours] == [__file__] * 3


def test_io_problems_are_reported_once_as_warnings_not_also_on_stderr(tmp_path, capfd):
    (tmp_path / "file").write_text("a regular file, not a directory\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = stepprof.Recorder(str(tmp_path / "file" / "r.jsonl"), device_timing="off")
        rec.end_update(1)
        rec.end_update(2)  # warned about once
        rec.close()
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(warned) == 3, warned  # open, the first failed update, close
    assert "could not be written" in warned[1] and "update 1" in warned[1]
    assert "while recording to" in warned[2]
    assert "stepprof" not in capfd.readouterr().err  # the C layer does not print them again


def test_a_recorder_dropped_without_close_frees_the_process_for_another(tmp_path):
    rec = stepprof.Recorder(str(tmp_path / "a.jsonl"), device_timing="off")
    rec.end_update(0)
    del rec
    rec = stepprof.Recorder(str(tmp_path / "b.jsonl"), device_timing="off")  # used to raise "already open"
    rec.close()
    assert len((tmp_path / "a.jsonl").read_text().splitlines()) == 2


def test_a_recorder_dropped_without_close_says_what_was_lost(tmp_path):
    # Data recorded after the last end_update() is in no record; dropped without close()
    # (garbage-collected, or left at interpreter exit) nothing said so.
    code = ("import stepprof\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'r.jsonl')!r}, device_timing='off')\n"
            "rec.end_update(0)\n"
            "with rec.region('after_the_last_update'):\n    pass\n"
            "del rec\n"
            "print('alive')\n")
    r = run_python(code)
    assert r.returncode == 0 and r.stdout == "alive\n", r.stderr
    assert "a Recorder dropped without close()" in r.stderr and "unwritten_at_close 1" in r.stderr, r.stderr
    # Left open at interpreter exit, it was not dropped: said so.
    r = run_python(code.replace("del rec\n", ""))
    assert r.returncode == 0 and "a Recorder still open at exit" in r.stderr, r.stderr
    # Nothing is said when nothing was lost.
    code = code.replace("with rec.region('after_the_last_update'):\n    pass\n", "")
    r = run_python(code)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def test_warnings_as_errors_at_open_do_not_stop_the_job(tmp_path, capfd):
    # python -W error (or pytest's filterwarnings = error): a log that cannot be opened
    # raised RecorderWarning from Recorder(), whose message says the run goes on.
    (tmp_path / "file").write_text("x\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec = stepprof.Recorder(str(tmp_path / "file" / "r.jsonl"), device_timing="off")
        rec.end_update(0)
        errors = rec.close()
    assert errors.get("write_failed", 0) >= 1
    err = capfd.readouterr().err
    assert "cannot open the log" in err and "(RecorderWarning, not raised)" in err
    rec = stepprof.Recorder(str(tmp_path / "ok.jsonl"), device_timing="off")
    rec.close()


def test_recorder_does_not_import_torch(tmp_path):
    # Recorder() imported torch (1 to 2 s; a Ctrl-C during that import was lost and the
    # process crashed at exit). It uses torch only when the job has imported it.
    code = ("import sys, stepprof\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'r.jsonl')!r})\n"
            "rec.end_update(0); rec.close()\n"
            "print('torch' in sys.modules, rec.rank, rec.world_size)\n")
    r = run_python(code, RANK="3", WORLD_SIZE="4")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False", "3", "4"]


def test_a_counter_sum_above_2_53_is_left_out_and_counted(tmp_path):
    path = tmp_path / "wrap.jsonl"
    rec = stepprof.Recorder(str(path), device_timing="off")
    with pytest.warns(stepprof.RecorderWarning, match="above 2\\^53"):
        rec.count("big", 2**62)  # one count beyond what a record holds exactly: counted
    for _ in range(4):
        rec.count("big", 2**52)  # 2^54 in all: above 2^53
    rec.count("fine", 3)
    rec.end_update(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        errors = rec.close()
    record = json.loads(path.read_text().splitlines()[1])
    assert record["counts"] == {"fine": 3}
    assert record["recorder_errors"] == {"bad_argument": 2}  # (the count of 2^62 and the sum)
    assert errors == {"bad_argument": 2}


def test_missing_log_directory_is_created(tmp_path):
    rec = stepprof.Recorder(tmp_path / "logs" / "r{rank}.jsonl", device_timing="off")  # a Path works too
    rec.end_update(1)
    assert rec.close() == {}
    config, updates = read_log(tmp_path / "logs" / "r0.jsonl")
    assert [u["step"] for u in updates] == [1]


def test_an_unknown_region_role_is_rejected_at_open(tmp_path):
    # The analyzer would ignore a misspelt role; the recorder says so instead of writing it.
    with pytest.raises(ValueError, match="unknown role"):
        stepprof.Recorder(str(tmp_path / "r{rank}.jsonl"), device_timing="off", roles={"loader": "backgorund"})
    assert not (tmp_path / "r0.jsonl").exists()
    rec = stepprof.Recorder(str(tmp_path / "r{rank}.jsonl"), device_timing="off", roles={"loader": "background"})
    rec.close()


def test_wrong_argument_types_raise_and_bad_values_are_counted(tmp_path):
    # A wrong type is a programming error found at the first call: raised. A value out of
    # range comes from the data and may first appear at hour 20 (a NaN padding fraction
    # from an empty micro-batch): it raised ValueError into the training loop, which
    # killed the job; now it is counted as bad_argument, with one warning.
    path = tmp_path / "t0.jsonl"
    rec = stepprof.Recorder(str(tmp_path / "t{rank}.jsonl"), device_timing="off")
    with pytest.raises(TypeError):
        rec.count("samples", "3")  # not parsed
    with pytest.raises(ValueError):
        rec.region("a\x00b")  # the C ABI would cut the name at the NUL
    with pytest.raises(TypeError):
        rec.end_update("2")
    with pytest.raises(TypeError, match=r"an input shape is a sequence of integers, e.g. \(8, 3154\), not str '45'"):
        rec.input_shape("45")  # (was: "dimension must be an integer, not str '4'")
    with pytest.raises(TypeError):
        rec.padding_fraction("0.5")  # float() would parse it
    bad_values = [
        lambda: rec.padding_fraction(float("nan")),
        lambda: rec.padding_fraction(1.5),
        lambda: rec.count("samples", -3),  # the reader would reject the whole update
        lambda: rec.count("samples", 2 ** 63),  # beyond int64
        lambda: rec.count("samples", -(2 ** 70)),
        lambda: rec.frame(-1),
        lambda: rec.frame(3, 2 ** 33),  # samples above 2^32 in one update
        lambda: rec.input_shape((8, -1)),
        lambda: rec.input_shape(()),
        lambda: rec.sample_indices([3, -5]),
        lambda: rec.microbatch(frames=[9, 9], tokens=[1]),
        lambda: rec.microbatch(tokens=[40, 90], padded_length=50),
        lambda: rec.microbatch(tokens=[40], padded_length=-1),
        lambda: rec.count("samples", 1.5),  # not truncated to 1, nor raised (from the data)
    ]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in bad_values:
            call()  # (raises nothing)
    warned = [w for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(warned) == 1, [str(w.message) for w in caught]  # the first one only
    assert "padding fraction nan is not recorded" in str(warned[0].message)
    assert "bad_argument" in str(warned[0].message)
    assert warned[0].filename == __file__  # (at the caller's line)
    # (A review: an int beyond a double raised OverflowError; the message showed a clamped
    # value and an iterator's shape as "()".)
    more = [
        (lambda: rec.padding_fraction(10 ** 400), "padding fraction 1000"),
        (lambda: rec.count("samples", 10 ** 30), f"count {10 ** 30} for counter"),
        (lambda: rec.input_shape(iter([1, -2])), "input shape (1, -2)"),
        (lambda: rec.sample_indices(iter([4, 2 ** 70])), f"sample index {2 ** 70}"),
    ]
    # An int of more than 4,300 digits has no repr (ValueError): its message raised.
    more.append((lambda: rec.count("samples", 10 ** 5000), "a value is not recorded"))
    for call, shown in more:
        rec._warned_value = False  # (each warns, to see its message)
        with pytest.warns(stepprof.RecorderWarning, match=re.escape(shown)):
            call()
    rec.count("samples", 2)
    rec.end_update(1)
    with pytest.warns(stepprof.RecorderWarning):
        assert rec.close() == {"bad_argument": len(bad_values) + len(more)}
    _, updates = read_log(path)
    assert updates[0]["counts"] == {"samples": 2}
    assert updates[0]["recorder_errors"] == {"bad_argument": len(bad_values) + len(more)}
    for key in ("padding_fraction", "frame_histogram", "input_shapes", "sample_indices", "microbatches"):
        assert key not in updates[0], updates[0]
    _, updates = read_log(tmp_path / "t0.jsonl")
    assert updates[0]["counts"] == {"samples": 2}
    for bad in ("0", 0.5):
        with pytest.raises(TypeError):
            stepprof.Recorder(str(tmp_path / "u{rank}.jsonl"), rank=bad, world_size=1, device_timing="off")
    with pytest.raises(TypeError):
        stepprof.Recorder(None, device_timing="off")


@pytest.mark.skipif(not BIN, reason="needs STEPPROF_BIN")
def test_a_resumed_single_process_run_appends_to_one_run(tmp_path, monkeypatch):
    for var in ("STEPPROF_RUN_ID", "TORCHELASTIC_RUN_ID", "SLURM_JOB_ID", "RANK", "WORLD_SIZE"):
        monkeypatch.delenv(var, raising=False)
    path = tmp_path / "r{rank}.jsonl"
    for first, append in ((1, False), (3, True)):  # a job, then the same job resumed
        rec = stepprof.Recorder(str(path), device_timing="off", append=append)
        for step in (first, first + 1):
            with rec.region("work"):
                pass
            rec.end_update(step)
        rec.close()
    r = subprocess.run([BIN, "report", "--format", "json", str(tmp_path / "r0.jsonl")], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["run"]["updates"] == 4


def test_a_resumed_run_without_append_warns_that_its_log_was_truncated(tmp_path):
    # A requeued job (same run_id) opened its log without append=True: every record of the
    # first attempt was gone, and nothing said so.
    path = tmp_path / "rank0.jsonl"
    rec = stepprof.Recorder(str(path), rank=0, world_size=1, run_id="job7", device_timing="off")
    rec.end_update(1)
    rec.close()
    with pytest.warns(stepprof.RecorderWarning, match=r'held records of this run \(run_id "job7"\), and was '
                                                      r"truncated.*append=True in Python"):
        rec = stepprof.Recorder(str(path), rank=0, world_size=1, run_id="job7", device_timing="off")
    rec.close()
    # With append=True, or for another run's log, no warning.
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stepprof.Recorder(str(path), rank=0, world_size=1, run_id="job7", device_timing="off", append=True).close()
        stepprof.Recorder(str(path), rank=0, world_size=1, run_id="job8", device_timing="off").close()


@pytest.mark.skipif(not BIN, reason="needs STEPPROF_BIN")
def test_a_resumed_run_that_does_not_restate_its_config_is_still_one_run(tmp_path):
    # The resumed process passed no config (or fewer fields): its config record lacked the
    # seed and the batch settings, and the reader took it for another run's, skipping the
    # resumed updates (exit 0). A setting it states differently is another run still.
    def record(path, config, steps, append):
        rec = stepprof.Recorder(str(path), rank=0, world_size=1, run_id="job7", config=config,
                                device_timing="off", append=append)
        for step in steps:
            with rec.region("work"):
                pass
            rec.end_update(step)
        rec.close()

    def updates(path):
        r = subprocess.run([BIN, "report", "--format", "json", str(path)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        return json.loads(r.stdout)["run"]["updates"], r.stderr

    settings = {"micro_batch": 4, "accumulation": 2, "seed": 1}
    same = tmp_path / "same.jsonl"
    record(same, settings, range(5), False)
    record(same, None, range(5, 10), True)
    n, err = updates(same)
    assert n == 10, err
    other = tmp_path / "other.jsonl"
    record(other, settings, range(5), False)
    record(other, {"seed": 2}, range(5, 10), True)
    n, err = updates(other)
    assert n == 5 and "seed 2 against 1" in err, err


def test_close_returns_the_errors_close_counted(tmp_path):
    # close() returned the counts read before closing: {} while its own warning said
    # "unwritten_at_close 1".
    rec = stepprof.Recorder(str(tmp_path / "u{rank}.jsonl"), device_timing="off")
    rec.end_update(1)
    with rec.region("after_the_last_update"):
        pass
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        errors = rec.close()
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert errors == {"unwritten_at_close": 1}, errors
    assert len(warned) == 1 and "unwritten_at_close 1" in warned[0], warned
    clean = stepprof.Recorder(str(tmp_path / "c{rank}.jsonl"), device_timing="off")
    clean.end_update(1)
    assert clean.close() == {}


def test_arguments_that_were_taken_or_failed_obscurely(tmp_path, monkeypatch):
    # A bool counted as 1; config=[1, 2] failed inside dict(); roles= dropped
    # config["region_roles"] without a word; RANK=abc said "invalid literal for int()".
    with stepprof.Recorder(str(tmp_path / "a{rank}.jsonl"), device_timing="off") as rec:
        with pytest.raises(TypeError, match="not bool"):
            rec.count("samples", True)
        with pytest.raises(TypeError, match="bool"):
            rec.padding_fraction(True)
        with pytest.raises(TypeError, match="not bool"):
            rec.end_update(False)
        rec.count("samples", 3)  # (an int still is)
        rec.end_update(1)
    with pytest.raises(TypeError, match="config must be a mapping .* not list"):
        stepprof.Recorder(str(tmp_path / "b{rank}.jsonl"), config=[1, 2], device_timing="off")
    with pytest.raises(ValueError, match='"region_roles" is given both in config and as roles='):
        stepprof.Recorder(str(tmp_path / "c{rank}.jsonl"), config={"region_roles": {"x": "data"}},
                          roles={"y": "optimizer"}, device_timing="off")
    with pytest.raises(ValueError, match='"region_alternatives" is given both'):
        stepprof.Recorder(str(tmp_path / "c{rank}.jsonl"), config={"region_alternatives": {"x": "g"}},
                          alternatives={"y": "g"}, device_timing="off")
    monkeypatch.setenv("RANK", "abc")
    with pytest.raises(ValueError, match=r"\$RANK is 'abc': expected an integer"):
        stepprof.Recorder(str(tmp_path / "d{rank}.jsonl"), device_timing="off")
    # Beyond 64 bits pybind11 raised "TypeError: open(): incompatible function arguments";
    # RANK without WORLD_SIZE said only "rank 1 is outside [0, 1)".
    monkeypatch.setenv("RANK", str(2**70))
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ValueError, match=r"\$RANK is '1180591620717411303424': outside the 64-bit integer range"):
        stepprof.Recorder(str(tmp_path / "d{rank}.jsonl"), device_timing="off")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.delenv("WORLD_SIZE")
    with pytest.raises(ValueError, match=r"rank 1 of world size 1 is no rank .* from \$RANK 1 and \$WORLD_SIZE "
                                         r"\(unset: 1\)"):
        stepprof.Recorder(str(tmp_path / "d{rank}.jsonl"), device_timing="off")
    # With world_size= given, $RANK alone is a rank of it (the check above refused it too,
    # found by a reviewer).
    rec = stepprof.Recorder(str(tmp_path / "e{rank}.jsonl"), world_size=8, device_timing="off")
    assert (rec.rank, rec.world_size) == (1, 8)
    rec.close()
    assert not any(p.name.startswith(("b", "c", "d")) for p in tmp_path.iterdir())


def test_close_warnings_point_at_the_with_statement(tmp_path):
    # Closed by `with Recorder() as rec:`, the warning pointed into stepprof (__exit__).
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with stepprof.Recorder(str(tmp_path / "w.jsonl"), device_timing="off") as rec:
            rec.count("after_the_last_update", 1)
    ours = [w for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(ours) == 1 and "unwritten_at_close" in str(ours[0].message)
    assert ours[0].filename == __file__


def test_a_seed_beyond_64_bits_is_refused_as_one(tmp_path):
    # A seed of 2**64 (kept as text in the config: a JSON reader would round it) was
    # refused as 'should be an integer, found "18446744073709551616"', for an integer.
    with pytest.raises(ValueError, match=r'config field "seed" should be an integer, found the text '
                                         r'"18446744073709551616": an integer beyond the 64-bit range'):
        stepprof.Recorder(str(tmp_path / "s.jsonl"), config={"seed": 2 ** 64}, device_timing="off")
    rec = stepprof.Recorder(str(tmp_path / "t.jsonl"), config={"seed": 2 ** 64 - 1}, device_timing="off")
    rec.close()
    # A quoted integer is not said to be beyond 64 bits (a review found).
    with pytest.raises(ValueError, match=r'config field "micro_batch" should be an integer, found the text "8" '
                                         r'\(write the number without quotes\)'):
        stepprof.Recorder(str(tmp_path / "q.jsonl"), config={"micro_batch": "8"}, device_timing="off")


def test_config_keys_written_alike_are_named(tmp_path):
    # {1: 2, "1": 3}: json.dumps writes both keys as "1", which the recorder refused as
    # 'config_json: key "1" appears twice', naming a parameter the caller never gave.
    for cfg, a, b, text in (({1: 2, "1": 3}, "1", "'1'", '"1"'), ({True: 1, "true": 2}, "True", "'true'", '"true"'),
                            ({"x": {None: 1, "null": 2}}, "None", "'null'", '"null"')):
        with pytest.raises(ValueError, match=f"config keys {a} and {b} are both written as the JSON key {text}"):
            stepprof.Recorder(str(tmp_path / "k.jsonl"), config=cfg, device_timing="off")
    rec = stepprof.Recorder(str(tmp_path / "ok.jsonl"), config={1: 2, "2": 3, 1.5: 4}, device_timing="off")
    rec.close()
    first = json.loads((tmp_path / "ok.jsonl").read_text().splitlines()[0])
    assert (first["1"], first["2"], first["1.5"]) == (2, 3, 4)


def test_a_timed_function_called_after_close_warns_at_its_call(tmp_path):
    # The used_after_close warning of a @rec.timed function pointed one frame above the
    # call: at the caller's caller, or "sys:1" for a call at module level.
    rec = stepprof.Recorder(str(tmp_path / "t.jsonl"), device_timing="off")

    @rec.timed
    def step():
        return 3

    rec.end_update(0)
    rec.close()

    def train():
        return step()  # the warning's line

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert train() == 3
    ours = [w for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(ours) == 1 and "Recorder.timed() after close()" in str(ours[0].message)
    assert (ours[0].filename, ours[0].lineno) == (__file__, train.__code__.co_firstlineno + 1)
    assert rec.errors == {"used_after_close": 1}


def test_timed_without_parentheses_and_on_callables_without_a_qualified_name(tmp_path):
    # @rec.timed (no parentheses) replaced the function with the decorator, whose first
    # call in the loop raised "region name must be a str, not function"; a
    # functools.partial raised AttributeError (__qualname__).
    import functools

    path = tmp_path / "timed.jsonl"
    with stepprof.Recorder(str(path), device_timing="off") as rec:
        @rec.timed
        def bare(x):
            return x + 1

        def scale(x, k):
            return x * k

        doubled = rec.timed()(functools.partial(scale, k=2))
        assert bare(1) == 2 and doubled(3) == 6
        rec.end_update(0)
    _, records = read_log(path)
    assert records[0]["calls"] == {
        "test_timed_without_parentheses_and_on_callables_without_a_qualified_name.<locals>.bare": 1, "partial": 1}


def test_timed_on_a_generator_or_async_function_warns_where_it_is_decorated(tmp_path):
    # Such a region timed only making the generator or coroutine (about 0.003 ms against a
    # 20 ms update), without a word.
    with stepprof.Recorder(str(tmp_path / "gen.jsonl"), device_timing="off") as rec:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")

            @rec.timed
            def batches():  # the first warning's line is the decorator's, above
                yield 1

            @rec.timed("step")
            async def step():
                return 1

            async def stream():
                yield 1

            rec.timed()(stream)

            @rec.timed
            def plain():
                return 1
        ours = [w for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
        messages = [str(w.message) for w in ours]
        assert len(ours) == 3, messages
        assert messages[0].startswith("@timed on a generator (test_timed_on_a_generator_or_async_function_warns_"
                                      "where_it_is_decorated.<locals>.batches) times only the call that creates "
                                      "the generator, not its work; time the code between its yields"), messages
        assert messages[1].startswith("@timed on an async function (step) times only the call that creates the "
                                      "coroutine, not its work; time the code between its awaits"), messages
        assert messages[2].startswith("@timed on an async generator"), messages
        assert all(w.filename == __file__ for w in ours), [w.filename for w in ours]
        assert ours[0].lineno in (batches.__wrapped__.__code__.co_firstlineno, batches.__wrapped__.__code__.co_firstlineno + 1)
        rec.end_update(0)
    # With warnings as errors, the decoration still works (the message goes to stderr).
    r = run_python("import warnings, stepprof\n"
                   "warnings.simplefilter('error')\n"
                   f"rec = stepprof.Recorder({str(tmp_path / 'err.jsonl')!r}, device_timing='off')\n"
                   "@rec.timed\n"
                   "def g():\n"
                   "    yield 1\n"
                   "print(list(g()))\n"
                   "rec.close()\n")
    assert r.returncode == 0 and r.stdout.strip() == "[1]", r.stderr
    assert "@timed on a generator (g)" in r.stderr and "(RecorderWarning, not raised)" in r.stderr, r.stderr


def test_a_recorder_in_a_reference_cycle_does_not_block_the_next_one(tmp_path):
    # A Recorder held by an object it holds is closed only by the cycle collector: until
    # it ran, the next Recorder was already_open and recorded nothing.
    class Trainer:
        pass

    t = Trainer()
    t.rec = stepprof.Recorder(str(tmp_path / "first.jsonl"), device_timing="off")
    t.rec.owner = t
    t.rec.end_update(0)
    del t
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no already_open warning
        rec = stepprof.Recorder(str(tmp_path / "second.jsonl"), device_timing="off")
    assert not rec.closed
    rec.end_update(0)
    assert rec.close() == {}


def test_an_unknown_clock_in_the_environment_warns_at_once(tmp_path, monkeypatch):
    # STEPPROF_CLOCK=bogus was said only at close(), as "bad_argument 1", and the report
    # then read "some values are not recorded": the variable was never named.
    monkeypatch.setenv("STEPPROF_CLOCK", "bogus")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec = stepprof.Recorder(str(tmp_path / "clock.jsonl"), device_timing="off")
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(warned) == 1 and "STEPPROF_CLOCK=bogus is not a clock" in warned[0], warned
    assert caught[0].filename == __file__
    rec.end_update(0)
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        assert rec.close() == {"bad_argument": 1}


def test_an_interrupt_as_the_open_returns_leaves_no_recorder_open(tmp_path, monkeypatch):
    # Ctrl-C during Recorder() (its first open calibrates the clock for ~10 ms) is raised as
    # the C call returns, before Python holds the handle: the recorder stayed open with no
    # owner, and every later Recorder of the process recorded nothing (already_open).
    real_open = stepprof._core.open

    def open_then_interrupted(*args):
        real_open(*args)
        raise KeyboardInterrupt

    monkeypatch.setattr(stepprof._core, "open", open_then_interrupted)
    with pytest.raises(KeyboardInterrupt):
        stepprof.Recorder(str(tmp_path / "interrupted.jsonl"), device_timing="off")
    monkeypatch.setattr(stepprof._core, "open", real_open)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no already_open warning
        rec = stepprof.Recorder(str(tmp_path / "next.jsonl"), device_timing="off")
    assert not rec.closed
    rec.end_update(0)
    assert rec.close() == {}
    _, records = read_log(tmp_path / "next.jsonl")
    assert [r["step"] for r in records] == [0]


def test_a_second_recorder_while_one_is_open_warns_and_records_nothing(tmp_path, capfd):
    # Recorder() raised RuntimeError "a stepprof recorder is already open in this process"
    # into the job (e.g. a library that makes its own Recorder while the trainer's is open).
    first = stepprof.Recorder(str(tmp_path / "first.jsonl"), device_timing="off")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        second = stepprof.Recorder(str(tmp_path / "second{rank}.jsonl"), rank=0, world_size=1, device_timing="off")
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(warned) == 1 and "already open" in warned[0] and "already_open" in warned[0], warned
    assert second.closed
    assert second.errors == {"already_open": 1}
    assert second.info["path"].endswith("second0.jsonl") and second.info["records_written"] == 0
    # The path is shown escaped: a newline in it forged a line of the job's output (a review).
    with pytest.warns(stepprof.RecorderWarning, match=re.escape("(" + str(tmp_path) + "/x\\x0aforged.jsonl)")) as w:
        stepprof.Recorder(str(tmp_path / "x\nforged.jsonl"), device_timing="off")
    assert all("\n" not in str(m.message) for m in w)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: its calls warn no more, and raise nothing
        with first.region("outer_first"):
            with second.region("from_second"):  # must not enter a region of the open recorder
                pass
        second.count("from_second", 5)
        second.frame(3)
        second.input_shape((1, 2))
        second.sample_indices([9])
        second.padding_fraction(0.5)
        second.microbatch(frames=[1])
        second.set_cuda_stream(0)
        second.begin_update()

        @second.timed("timed_second")
        def work():
            return 7

        assert work() == 7
        second.end_update(1)
        second.flush()
        first.count("from_first", 1)
        first.end_update(0)
        assert first.close() == {}  # nothing of the second's (e.g. no mismatched_exit)
        assert second.close() == {"already_open": 1}
        assert second.close() == {}  # twice: a no-op
    assert second.errors == {"already_open": 1}
    _, updates = read_log(tmp_path / "first.jsonl")
    assert [u["step"] for u in updates] == [0]
    assert updates[0]["counts"] == {"from_first": 1}
    assert updates[0]["calls"] == {"outer_first": 1} and updates[0]["parents"] == {"outer_first": None}
    for field in ("frame_histogram", "input_shapes", "sample_indices", "padding_fraction", "microbatches"):
        assert field not in updates[0], field
    assert not (tmp_path / "second0.jsonl").exists()
    # With warnings turned into errors (python -W error) it does not raise either.
    first = stepprof.Recorder(str(tmp_path / "first.jsonl"), device_timing="off")
    capfd.readouterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        third = stepprof.Recorder(str(tmp_path / "third.jsonl"), device_timing="off")
    assert third.errors == {"already_open": 1}
    assert "already open" in capfd.readouterr().err
    # A wrong argument raises while another recorder is open too (it was an already_open
    # warning, the mistake found only after the first run).
    with pytest.raises(ValueError, match="rank must be in"):
        stepprof.Recorder(str(tmp_path / "e{rank}.jsonl"), rank=7, world_size=2, device_timing="off")
    with pytest.raises(ValueError):
        stepprof.Recorder(str(tmp_path / "e{rank}.jsonl"), roles={"x": "bogus"}, device_timing="off")
    first.close()
    # Once the first is closed, a new one opens as before.
    fourth = stepprof.Recorder(str(tmp_path / "fourth.jsonl"), device_timing="off")
    assert not fourth.closed
    fourth.close()
    with pytest.raises(ValueError):
        stepprof.Recorder(str(tmp_path / "d{rank}.jsonl"), device_timing="sometimes")


def test_a_closed_recorders_calls_do_nothing_are_counted_and_do_not_reach_the_next_one(tmp_path):
    # After close() every call raised RuntimeError "the stepprof recorder is closed": a
    # logging thread that outlived the training loop died of it. They must not record
    # into a recorder opened later either (the calls go to whichever one is open).
    r1 = stepprof.Recorder(str(tmp_path / "r1.jsonl"), device_timing="off")
    r1.end_update(0)
    assert r1.close() == {}
    assert r1.close() == {}  # twice: a no-op, not counted
    info = r1.info  # raised: the info as of close
    assert info["path"].endswith("r1.jsonl") and info["records_written"] == 2 and info["errors"] == {}  # (config + 1)
    r2 = stepprof.Recorder(str(tmp_path / "r2.jsonl"), device_timing="off")
    calls = [lambda: r1.count("from_r1", 7), lambda: r1.region("from_r1"), lambda: r1.frame(3),
             lambda: r1.input_shape((1, 2)), lambda: r1.sample_indices([1]), lambda: r1.padding_fraction(0.5),
             lambda: r1.microbatch(frames=[1]), lambda: r1.set_cuda_stream(0), lambda: r1.begin_update(),
             lambda: r1.end_update(1), lambda: r1.flush(), lambda: r1.timed("timed_r1")(lambda: 3)()]
    died = []

    def logger():  # a background thread that outlives the training loop
        try:
            for _ in range(10):
                r1.count("from_logger", 1)
        except BaseException as e:  # noqa: BLE001
            died.append(e)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for call in calls:
            call()
        with r2.region("outer_r2"):
            with r1.region("from_r1"):  # does nothing: not a region of r2
                with r2.region("inner_r2"):
                    pass
        t = threading.Thread(target=logger)
        t.start()
        t.join()
    assert not died, died
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(warned) == 1 and "used_after_close" in warned[0] and "after close()" in warned[0], warned
    # (timed() counts twice: the decoration's region() and the call of the function)
    assert r1.errors == {"used_after_close": len(calls) + 1 + 1 + 10}
    assert r1.info["errors"] == r1.errors and r1.closed
    # A wrong argument type or value is still a programming error, raised at once.
    with pytest.raises(TypeError):
        r1.count("samples", "3")
    with pytest.raises(ValueError):
        r1.region("a\x00b")
    with pytest.raises(TypeError):
        r1.end_update("2")
    r2.count("from_r2", 1)
    r2.end_update(0)
    assert r2.close() == {}
    _, updates = read_log(tmp_path / "r2.jsonl")
    assert updates[0]["counts"] == {"from_r2": 1}
    assert updates[0]["calls"] == {"outer_r2": 1, "inner_r2": 1}
    assert updates[0]["parents"] == {"outer_r2": None, "inner_r2": "outer_r2"}
    assert "frame_histogram" not in updates[0] and "sample_indices" not in updates[0]
    steps = [json.loads(l).get("step") for l in (tmp_path / "r1.jsonl").read_text().splitlines()[1:]]
    assert steps == [0]


def test_a_function_timed_before_close_records_nothing_after_it_and_threads_are_all_counted(tmp_path):
    # A function decorated with timed() before close() kept its region object: its calls
    # after close() recorded into the next recorder and were not counted. And threads
    # calling after close() lost counts (an unlocked += in the count).
    r1 = stepprof.Recorder(str(tmp_path / "r1.jsonl"), device_timing="off")

    @r1.timed("dec")
    def f():
        return 5

    assert f() == 5
    r1.end_update(0)
    r1.close()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert f() == 5  # runs, records nothing
        r3 = stepprof.Recorder(str(tmp_path / "r3.jsonl"), device_timing="off")
        f()
        f()
        old = sys.getswitchinterval()
        sys.setswitchinterval(1e-6)
        try:
            threads = [threading.Thread(target=lambda: [r1.count("x", 1) for _ in range(2000)]) for _ in range(8)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
        finally:
            sys.setswitchinterval(old)
    assert r1.errors == {"used_after_close": 3 + 8 * 2000}
    r3.end_update(0)
    r3.close()
    _, updates = read_log(tmp_path / "r3.jsonl")
    assert "dec" not in updates[0].get("calls", {}), updates[0]
    _, first = read_log(tmp_path / "r1.jsonl")
    assert first[0]["calls"] == {"dec": 1}


def test_a_timed_function_does_not_keep_a_dropped_recorder_open(tmp_path):
    # The decorated function held its Recorder: one dropped without close() stayed open,
    # and the next Recorder of the process recorded nothing (already_open) for the run.
    import gc

    def make():
        rec = stepprof.Recorder(str(tmp_path / "first.jsonl"), device_timing="off")

        @rec.timed("work")
        def work():
            return 1

        return work

    work = make()
    gc.collect()
    second = stepprof.Recorder(str(tmp_path / "second.jsonl"), device_timing="off")
    assert not second.closed and second.errors == {}
    assert work() == 1  # its recorder is gone: it runs, unrecorded
    second.count("samples", 1)
    second.end_update(0)
    assert second.close() == {}
    _, updates = read_log(tmp_path / "second.jsonl")
    assert updates[0]["counts"] == {"samples": 1} and "work" not in updates[0].get("calls", {}), updates[0]


def test_a_signal_handler_that_closes_the_recorder_does_not_hang_the_job(tmp_path):
    # The usual preemption handler (SIGTERM: close the recorder, exit) runs on the main
    # thread between two bytecodes of the call it interrupted, which may hold the
    # recorder's lock: with a non-reentrant lock the job hung (18 of 20 trials), and a
    # handler that only flushed and read errors hung too. A handler that closes and goes
    # on must not raise into the interrupted call either.
    script = tmp_path / "preempted.py"
    script.write_text(
        "import os, signal, sys, warnings\n"
        "import stepprof\n"
        "warnings.simplefilter('ignore')\n"
        "rec = stepprof.Recorder(sys.argv[1], rank=0, world_size=1, device_timing='off')\n"
        "def on_term(sig, frame):\n"
        "    if sys.argv[2] == 'exit':\n"
        "        rec.close(); sys.exit(0)\n"
        "    rec.flush(); rec.errors; rec.close()  # and the loop goes on\n"
        "signal.signal(signal.SIGTERM, on_term)\n"
        "print('ready', flush=True)\n"
        "s = 0\n"
        "while not rec.closed:\n"
        "    with rec.region('step'):\n"
        "        pass\n"
        "    rec.end_update(s)\n"
        "    s += 1\n"
        "rec.end_update(s)  # after close: counted, not raised\n"
        "print('done', rec.errors.get('used_after_close', 0) >= 1, flush=True)\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    for trial in range(6):
        mode = "exit" if trial % 2 == 0 else "go-on"
        log = tmp_path / f"r{trial}.jsonl"
        p = subprocess.Popen([sys.executable, str(script), str(log), mode], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=env)
        assert p.stdout.readline() == "ready\n"
        time.sleep(0.2)  # (in the loop)
        p.send_signal(signal.SIGTERM)
        try:
            out, err = p.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.communicate()
            pytest.fail(f"trial {trial} ({mode}): the job hung in the SIGTERM handler")
        assert p.returncode == 0, (trial, mode, err)
        if mode == "go-on":
            assert out == "done True\n", (out, err)
        r = subprocess.run([BIN, "report", "--format", "json", str(log)], capture_output=True, text=True)
        assert r.returncode == 0, r.stderr


def test_an_interrupted_close_leaves_the_recorder_closed(tmp_path):
    # Ctrl-C while close() waited for a pipe's reader left the object half-closed: closed
    # False, and `errors` (documented never to raise) raised RuntimeError.
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off")
    rec.end_update(0)
    real_close = stepprof._core.close

    def interrupted(owner, handle):
        real_close(owner, handle)
        raise KeyboardInterrupt  # as a SIGINT handled just as the C ABI's close returns

    close_interrupted(rec, stepprof._core, "close", interrupted)
    assert rec.closed
    assert isinstance(rec.errors, dict) and isinstance(rec.info, dict)
    rec.end_update(1)  # counted as used_after_close, not raised
    assert rec.errors.get("used_after_close") == 1
    assert rec.close() == {}


def test_an_interrupt_as_the_close_returns_keeps_its_errors_and_its_warning(tmp_path):
    # Ctrl-C as the C ABI's close returned (it may wait a second for a pipe's reader) lost
    # what it returned: `errors` read {} and no warning was given.
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.count("", 1)  # one bad_argument
    rec.end_update(0)
    real_close = stepprof._core.close

    def interrupted(owner, handle):
        real_close(owner, handle)
        raise KeyboardInterrupt

    close_interrupted(rec, stepprof._core, "close", interrupted)
    assert rec.closed
    assert rec.errors == {"bad_argument": 1}
    assert rec.info["errors"] == {"bad_argument": 1}
    # close() again gives the warning the first did not, and what it would have returned.
    with pytest.warns(stepprof.RecorderWarning, match="counted 1 error"):
        assert rec.close() == {"bad_argument": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rec.close() == {}  # (once only)


def test_an_interrupt_before_the_c_close_is_finished_by_the_next_recorder(tmp_path):
    # An interrupt landed between close() letting go of the handle and the C ABI's close
    # (a signal handler runs at the call into _finish_close): the recorder stayed open with
    # no object holding its handle, and every later Recorder of the process was refused
    # as already_open, even after gc.collect().
    log = tmp_path / "r.jsonl"
    rec = stepprof.Recorder(str(log), device_timing="off")
    rec.end_update(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.count("", 1)  # one bad_argument

    def interrupted(self, handle):
        raise KeyboardInterrupt

    close_interrupted(rec, stepprof.Recorder, "_finish_close", interrupted)
    assert rec.closed
    assert rec.errors == {"bad_argument": 1}  # (read from the recorder not yet closed)
    # The next Recorder closes it (rec is still referenced here) and opens.
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (an already_open warning would raise)
        again = stepprof.Recorder(str(tmp_path / "b.jsonl"), device_timing="off")
    assert not again.closed
    again.end_update(0)
    assert again.close() == {}
    assert rec.errors == {"bad_argument": 1}
    assert [json.loads(l)["type"] for l in log.read_text().splitlines()] == ["config", "update"]
    # Or close() again finishes it.
    rec2 = stepprof.Recorder(str(tmp_path / "c.jsonl"), device_timing="off")
    close_interrupted(rec2, stepprof.Recorder, "_finish_close", interrupted)
    assert rec2.close() == {}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        stepprof.Recorder(str(tmp_path / "d.jsonl"), device_timing="off").close()


def test_a_close_interrupted_and_never_repeated_is_said_at_exit(tmp_path):
    code = ("import stepprof, warnings\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'r.jsonl')!r}, rank=0, world_size=1, device_timing='off')\n"
            "warnings.simplefilter('ignore')\n"
            "rec.count('', 1)\n"
            "rec.end_update(0)\n"
            "real = stepprof._core.close\n"
            "def interrupted(owner, handle):\n"
            "    real(owner, handle)\n"
            "    raise KeyboardInterrupt\n"
            "stepprof._core.close = interrupted\n"
            "try:\n"
            "    rec.close()\n"
            "except KeyboardInterrupt:\n"
            "    pass\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "stepprof: a Recorder whose close() was interrupted: the recorder counted 1 error(s)" in r.stderr, r.stderr
    assert "bad_argument 1" in r.stderr, r.stderr


def test_a_recorder_left_open_at_exit_says_what_was_lost_with_a_daemon_thread_alive(tmp_path):
    # With a daemon thread alive at exit, the module-level recorder's __del__ never ran
    # and the message was lost; it is now closed at exit (atexit).
    code = ("import stepprof, threading, time\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'r.jsonl')!r}, rank=0, world_size=1, device_timing='off')\n"
            "threading.Thread(target=lambda: time.sleep(100), daemon=True).start()\n"
            "rec.end_update(0)\n"
            "rec.count('after_the_last_update', 1)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "stepprof: a Recorder still open at exit: the recorder counted 1 error(s)" in r.stderr, r.stderr
    assert "unwritten_at_close 1" in r.stderr, r.stderr


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_multiprocessing_rank_that_returns_with_its_recorder_open_says_what_was_lost(tmp_path, method):
    # A rank started by multiprocessing with "fork" (torch.multiprocessing's default on
    # Linux) ends with os._exit(), which runs no atexit handler: a module-level recorder
    # still open was never closed and nothing was said (a helper's 4-rank job, also after
    # Ctrl-C). With "spawn" the child exits normally; it says so once, not twice.
    code = ("import multiprocessing as mp, stepprof\n"
            "KEEP = []\n"
            "def rank(r):\n"
            f"    rec = stepprof.Recorder({str(tmp_path)!r} + f'/r{{r}}.jsonl', rank=r, world_size=2, "
            "device_timing='off')\n"
            "    rec.end_update(0)\n"
            "    KEEP.append(rec)\n"
            "    rec.count('after_the_last_update', 1)\n"
            "if __name__ == '__main__':\n"
            f"    ps = [mp.get_context({method!r}).Process(target=rank, args=(r,)) for r in range(2)]\n"
            "    [p.start() for p in ps]\n"
            "    [p.join() for p in ps]\n"
            "    print([p.exitcode for p in ps])\n")
    script = tmp_path / "ranks.py"
    script.write_text(code)
    r = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')")
    assert r.returncode == 0, r.stderr
    assert "[0, 0]" in r.stdout, r.stdout
    for rank in (0, 1):
        said = [l for l in r.stderr.splitlines() if f"r{rank}.jsonl" in l]
        assert len(said) == 1, r.stderr
        assert "a Recorder still open at exit" in said[0] and "unwritten_at_close 1" in said[0], r.stderr


@pytest.mark.parametrize("method", ["fork", "spawn"])
def test_a_multiprocessing_rank_whose_thread_or_exit_handler_records_keeps_every_record(tmp_path, method):
    # The exit finalizer above runs before multiprocessing joins the rank's threads and
    # before a spawn rank's atexit handlers: it closed a recorder that a training thread
    # still used (a log of the config line only) and one whose job closes it at exit
    # (its last update lost). A review found both.
    code = ("import atexit, multiprocessing as mp, threading, time, stepprof\n"
            "def train(rec):\n"
            "    for s in range(5):\n"
            "        time.sleep(0.02)\n"
            "        rec.end_update(s)\n"
            "    rec.close()\n"
            "def threaded(r):\n"
            f"    rec = stepprof.Recorder({str(tmp_path)!r} + '/threaded.jsonl', rank=0, world_size=1, "
            "device_timing='off')\n"
            "    threading.Thread(target=train, args=(rec,)).start()\n"
            "def finished_at_exit(r):\n"
            f"    rec = stepprof.Recorder({str(tmp_path)!r} + '/at_exit.jsonl', rank=0, world_size=1, "
            "device_timing='off')\n"
            "    def finish():\n"
            "        rec.end_update(1)\n"
            "        rec.close()\n"
            "    atexit.register(finish)\n"
            "    rec.end_update(0)\n"
            "if __name__ == '__main__':\n"
            "    for target in (threaded, finished_at_exit):\n"
            f"        p = mp.get_context({method!r}).Process(target=target, args=(0,))\n"
            "        p.start()\n"
            "        p.join()\n"
            "        print(p.exitcode)\n")
    script = tmp_path / "ranks.py"
    script.write_text(code)
    r = run_python(f"import runpy; runpy.run_path({str(script)!r}, run_name='__main__')")
    assert r.returncode == 0 and r.stdout.split() == ["0", "0"], (r.stdout, r.stderr)
    assert "used_after_close" not in r.stderr, r.stderr
    assert len((tmp_path / "threaded.jsonl").read_text().splitlines()) == 6, r.stderr
    # (A forked rank runs no atexit handler: its log ends with update 0, as it always did.)
    assert len((tmp_path / "at_exit.jsonl").read_text().splitlines()) == (2 if method == "fork" else 3), r.stderr


def test_a_close_inside_a_call_waits_for_the_call_and_an_interrupted_close_still_closes(tmp_path):
    # (1) A signal handler's close() between `handle = self._handle` and the C call (a
    # reviewer drove it there with a trace function): the handle was freed under the
    # call (valgrind: an invalid read in the C ABI's handle check). Here close() runs
    # inside the call as such a handler would; the call must still get a live handle.
    # Such a close() returns the errors counted so far, as `errors` does then (it returned
    # {}, and a handler that logged what close() returned before exiting saw no errors).
    log = tmp_path / "deferred.jsonl"
    rec = stepprof.Recorder(str(log), rank=0, world_size=1, device_timing="off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.count("", 1)  # one bad_argument
    rec.end_update(0)

    def call_interrupted_by_a_handler(handle, step):
        assert rec.close() == {"bad_argument": 1}  # (carried out when the call returns)
        assert rec.errors == {"bad_argument": 1}
        return stepprof._core.end_update(handle, step)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (the close warns about the bad_argument)
        assert rec._with_handle("end_update", call_interrupted_by_a_handler, 1) == 0
    assert rec.closed
    assert rec.errors == {"bad_argument": 1}
    assert [json.loads(l)["type"] for l in log.read_text().splitlines()] == ["config", "update", "update"]
    # (2) An interrupt before the C close (while close() reads the recorder's info) left it
    # never closed: every later Recorder of the process was refused as already_open.
    rec = stepprof.Recorder(str(tmp_path / "a.jsonl"), rank=0, world_size=1, device_timing="off")
    real_info = stepprof._core.info_json

    def interrupted(handle):
        raise KeyboardInterrupt

    stepprof._core.info_json = interrupted
    try:
        with pytest.raises(KeyboardInterrupt):
            rec.close()
    finally:
        stepprof._core.info_json = real_info
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (an already_open warning would raise)
        again = stepprof.Recorder(str(tmp_path / "b.jsonl"), rank=0, world_size=1, device_timing="off")
    assert not again.closed
    again.close()


def test_close_on_another_thread_never_raises_into_the_per_update_calls(tmp_path):
    # flush(), end_update() and begin_update() read the handle, then passed it on: a
    # close() in between made them pass 0, and the binding raised ValueError("the
    # recorder is closed") into the thread (26 trials of 200 on 2 cores).
    raised = []
    old = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            for trial in range(200):
                rec = stepprof.Recorder(str(tmp_path / "race.jsonl"), device_timing="off")
                stop = threading.Event()

                def logger():
                    try:
                        while not stop.is_set():
                            rec.flush()
                            rec.begin_update()
                            rec.info  # noqa: B018 - the property reads the handle too
                    except BaseException as e:  # noqa: BLE001
                        raised.append(repr(e))

                t = threading.Thread(target=logger)
                t.start()
                for s in range(20):
                    rec.end_update(s)
                rec.close()
                stop.set()
                t.join()
                if raised:
                    break
    finally:
        sys.setswitchinterval(old)
    assert not raised, (trial, raised[:1])
    # Each trial's calls after close() are counted, and close() returned what it counted.
    assert set(rec.errors) <= {"used_after_close"}


def test_small_misuses_get_clear_answers(tmp_path):
    # A list as a name gave "unhashable type: 'list'" (the cache lookup came first); an
    # empty path was taken and warned about as a file that cannot be opened; errors after
    # close() raised RuntimeError.
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off")
    with pytest.raises(TypeError, match="region name must be a str, not list"):
        rec.region(["a"])
    with pytest.raises(TypeError, match="counter name must be a str, not list"):
        rec.count(["a"], 1)
    rec.end_update(5)
    rec.end_update(5)  # a step not above the previous one: counted as bad_argument
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        closed_with = rec.close()
    assert closed_with == {"bad_argument": 1} and rec.errors == closed_with
    with pytest.raises(ValueError, match="the log path is empty"):
        stepprof.Recorder("", device_timing="off")


def test_a_path_with_a_nul_character_is_rejected(tmp_path):
    # It was cut at the NUL: the log went to tmp_path/"a".
    with pytest.raises(ValueError, match="NUL"):
        stepprof.Recorder(str(tmp_path / "a\0b.jsonl"), device_timing="off")
    assert not (tmp_path / "a").exists()


def test_a_config_with_inf_or_nan_is_written_with_them_as_text(tmp_path):
    # Recorder() failed: json.dumps writes Infinity, which JSON does not have.
    cfg = {"max_grad_norm": float("inf"), "nested": {"x": [1.5, float("nan"), float("-inf")]}, "lr": 1e-4,
           "huge": 10 ** 400, "u64": 2 ** 64 - 1, "i64": -(2 ** 63), "bigseed": 2 ** 64 + 1, "neg": -(2 ** 63) - 1}
    with stepprof.Recorder(str(tmp_path / "inf.jsonl"), config=cfg, alternatives={"a": "g"},
                           device_timing="off") as rec:
        rec.end_update(0)
    config, _ = read_log(tmp_path / "inf.jsonl")
    assert config["max_grad_norm"] == "inf"
    assert config["nested"] == {"x": [1.5, "nan", "-inf"]}
    assert config["lr"] == 1e-4
    assert config["huge"] == str(10 ** 400)
    # 64-bit ints are written as they are; beyond them as text (2^64 + 1 was rounded to
    # 1.8446744073709552e+19 without a word).
    assert config["u64"] == 2 ** 64 - 1 and config["i64"] == -(2 ** 63)
    assert config["bigseed"] == str(2 ** 64 + 1) and config["neg"] == str(-(2 ** 63) - 1)
    # region_alternatives before the user's fields, as the C++ recorder writes them.
    keys = list(config)
    assert keys.index("region_alternatives") < keys.index("max_grad_norm")


def test_set_cuda_stream_warns_instead_of_raising_when_it_cannot(tmp_path):
    with stepprof.Recorder(str(tmp_path / "s.jsonl"), device_timing="off") as rec:
        with pytest.warns(stepprof.RecorderWarning, match="host time only"):
            rec.set_cuda_stream(0)
        with rec.region("after"):
            pass
        rec.end_update(0)
    _, updates = read_log(tmp_path / "s.jsonl")
    assert updates[0]["calls"] == {"after": 1}


@pytest.mark.skipif(not BIN, reason="needs STEPPROF_BIN")
def test_report_reads_the_python_log(tmp_path):
    rec = stepprof.Recorder(str(tmp_path / "rank{rank}.jsonl"), rank=0, world_size=1,
                            config={"micro_batch": 1, "accumulation": 1}, device_timing="off")
    for step in range(1, 4):
        with rec.region("step_total"):
            with rec.region("child"):
                busy(0.001)
        rec.end_update(step)
    rec.close()
    out = subprocess.run([BIN, "report", "--format", "json", str(tmp_path)], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rep = json.loads(out.stdout)
    assert rep["run"]["updates"] == 3
    assert rep["regions"]["nesting_known"] is True
    rows = {r["name"]: r for r in rep["regions"]["rows"]}
    assert rows["child"]["parent"] == "step_total"
    assert rows["step_total"]["host_self_ms"] is not None


def test_microbatch_detail(tmp_path):
    path = tmp_path / "mb.jsonl"
    rec = stepprof.Recorder(str(path), rank=0, world_size=1, device_timing="off")
    rec.microbatch(frames=[9, 9], tokens=[120, 101], path="vggt_batched", padded_length=128)
    rec.microbatch(frames=(3, 9), tokens=[40, 90], path="vggt_single")
    rec.microbatch(frames=[4])
    with pytest.warns(stepprof.RecorderWarning, match="one entry per sample"):
        rec.microbatch(frames=[9, 9], tokens=[1])  # (not recorded, counted)
    rec.microbatch(frames=[-1])
    rec.microbatch(tokens=[40, 90], padded_length=50)
    rec.end_update(1)
    rec.end_update(2)
    with pytest.warns(stepprof.RecorderWarning):
        assert rec.close() == {"bad_argument": 3}
    _, updates = read_log(path)
    assert updates[0]["microbatches"] == [
        {"path": "vggt_batched", "frames": [9, 9], "tokens": [120, 101], "padded_length": 128},
        {"path": "vggt_single", "frames": [3, 9], "tokens": [40, 90]},
        {"frames": [4]},
    ]
    assert "microbatches" not in updates[1]


def test_a_fork_child_sees_the_parents_recorder_closed(tmp_path):
    parent_log = tmp_path / "parent.jsonl"
    rec = stepprof.Recorder(str(parent_log), device_timing="off")
    rec.end_update(0)
    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 0
        try:
            with rec.region("child_work"):
                rec.count("child_items", 1)
            if not rec.closed:
                code = 2
            rec.begin_update()
            rec.end_update(99)  # raised RuntimeError, which killed a DataLoader worker
            rec.flush()
            if rec.errors != {}:
                code = 3
            if rec.close() != {}:
                code = 5
            own = stepprof.Recorder(str(tmp_path / "child.jsonl"), device_timing="off")
            own.end_update(7)
            own.close()
        except BaseException:
            code = 6
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    rec.end_update(1)
    rec.close()
    steps = [json.loads(l)["step"] for l in parent_log.read_text().splitlines()[1:]]
    assert steps == [0, 1]  # nothing of the child's
    child = [json.loads(l) for l in (tmp_path / "child.jsonl").read_text().splitlines()]
    assert [r.get("step") for r in child[1:]] == [7]


def test_the_parents_recorder_in_a_fork_child_records_nothing_into_the_childs_own(tmp_path):
    # A DataLoader worker that opens a Recorder of its own: the parent's copy, closed,
    # passed its open check and recorded into the child's recorder (region, count,
    # frame, input_shape, ...), mixing the main process's data into the worker's log.
    rec = stepprof.Recorder(str(tmp_path / "parent.jsonl"), device_timing="off")

    @rec.timed("parent_timed")
    def work():
        return 1

    pid = os.fork()
    if pid == 0:  # the child: report through the exit status only
        code = 4
        try:
            own = stepprof.Recorder(str(tmp_path / "child.jsonl"), device_timing="off")
            with rec.region("parent_region"):
                rec.count("parent_counter", 7)
            rec.frame(5, 2)
            rec.input_shape((3, 4))
            rec.sample_indices([1, 2])
            rec.padding_fraction(0.5)
            rec.microbatch(path="parent_path", frames=[3])
            work()
            with own.region("child_region"):
                own.count("child_counter", 1)
            own.end_update(1)
            code = 0 if own.close() == {} and rec.errors == {} else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    rec.end_update(0)
    rec.close()
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status
    _, (u,) = read_log(tmp_path / "child.jsonl")
    assert set(u["cpu_call_ms"]) == {"child_region"}, u
    assert u["counts"] == {"child_counter": 1}, u
    for key in ("frame_histogram", "input_shapes", "sample_indices", "padding_fraction", "microbatches"):
        assert key not in u, (key, u)


def test_a_fork_child_starts_with_no_open_region(tmp_path):
    # A child forked inside regions inherited them as open: a recorder it opened gave the
    # child's regions the parent's region as their parent and counted open_at_end_update
    # and unwritten_at_close (and the with-blocks' exits in the child, mismatched_exit).
    rec = stepprof.Recorder(str(tmp_path / "parent.jsonl"), device_timing="off")
    own = None
    with rec.region("fork_outer"):
        with rec.region("fork_inner"):
            pid = os.fork()
            if pid == 0:  # the child: report through the exit status only
                try:
                    own = stepprof.Recorder(str(tmp_path / "child.jsonl"), device_timing="off")
                    with own.region("child_work"):
                        pass
                    own.end_update(1)
                except BaseException:
                    os._exit(3)
    if pid == 0:  # (the with-blocks entered in the parent have exited in the child too)
        code = 4
        try:
            with own.region("child_work"):
                pass
            own.end_update(2)
            code = 0 if own.close() == {} else 2
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    rec.end_update(0)
    assert rec.close() == {}
    child = [json.loads(l) for l in (tmp_path / "child.jsonl").read_text().splitlines()]
    assert [r.get("step") for r in child[1:]] == [1, 2]
    for record in child[1:]:
        assert record["parents"] == {"child_work": None}, record
        assert "recorder_errors" not in record, record
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, status  # close() returned {}
    _, (u,) = read_log(tmp_path / "parent.jsonl")
    assert u["parents"] == {"fork_outer": None, "fork_inner": "fork_outer"}


SPAWN_SCRIPT = '''
import multiprocessing, sys, warnings
import stepprof

# At module level, as a @rec.timed decorator needs it: a spawned worker runs this again.
rec = stepprof.Recorder(sys.argv[1], device_timing="off")


def work(x):
    return x * x


def main():
    for step in range(3):
        rec.end_update(step)
    with multiprocessing.get_context("spawn").Pool(2) as pool:  # a spawn-method DataLoader's workers
        assert pool.map(work, range(8)) == [x * x for x in range(8)]
    for step in range(3, 6):
        rec.end_update(step)
    rec.close()


if __name__ == "__main__":
    main()
'''


def test_a_spawned_worker_running_a_module_level_recorder_again_leaves_the_log_alone(tmp_path):
    # Each spawned worker imports the main module again and opens a recorder on the same
    # path: it truncated the parent's log, which lost steps 0..2 and held two configs.
    script = tmp_path / "train.py"
    script.write_text(SPAWN_SCRIPT)
    log = tmp_path / "rank0.jsonl"
    for flags in ([], ["-W", "error"]):  # (with warnings as errors the workers died at import)
        r = subprocess.run([sys.executable, *flags, str(script), str(log)], capture_output=True, text=True,
                           timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
        assert r.returncode == 0, r.stderr
        config, updates = read_log(log)
        assert [u["step"] for u in updates] == list(range(6))
        assert "another process is recording to this file" in r.stderr  # each worker says why it writes nothing


def test_values_a_record_cannot_hold_are_counted(tmp_path):
    # An index or dimension above 2^53 made the reader reject the whole record; a
    # negative sample index was dropped silently while negative counts raised. Each is
    # now left out and counted (bad_argument), as the C++ recorder does.
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off")
    with pytest.warns(stepprof.RecorderWarning, match="sample index -5"):
        rec.sample_indices([3, -5])
    rec.input_shape((2 ** 63 - 1, 1))
    rec.frame(2 ** 60)
    rec.microbatch(frames=[1], tokens=[2 ** 54])
    rec.input_shape((2, 2 ** 53))
    rec.end_update(0)
    with pytest.warns(stepprof.RecorderWarning):
        assert rec.close() == {"bad_argument": 4}
    _, updates = read_log(tmp_path / "r.jsonl")
    assert updates[0]["input_shapes"] == {f"(2, {2 ** 53})": 1}
    assert "sample_indices" not in updates[0]


def test_warnings_as_errors_do_not_raise_into_the_training_loop(capfd):
    # python -W error: a write that fails mid-run raised RecorderWarning from end_update.
    with pytest.warns(stepprof.RecorderWarning):
        rec = stepprof.Recorder("/dev/full", device_timing="off")  # every write fails: ENOSPC
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        rec.end_update(0)
        rec.end_update(1)
        errors = rec.close()
    assert errors.get("write_failed", 0) >= 2
    err = capfd.readouterr().err
    assert "could not be written to /dev/full" in err and "(RecorderWarning, not raised)" in err


def test_names_past_the_limit_and_text_that_is_not_utf8_do_not_raise(tmp_path):
    # 1030 region names (f"batch_{step}") must not raise into the loop past the 1024th;
    # str made from bytes that are not UTF-8 (os.fsdecode) raised TypeError or ValueError.
    raw = os.fsencode(str(tmp_path)) + b"/log-\xff.jsonl"
    rec = stepprof.Recorder(raw, device_timing="off", run_id="r\udcff", config={"note": "caf\udce9"})
    with rec.region("a\udcff"):
        pass
    rec.microbatch(frames=[1], tokens=[2], path="p\udcfe")
    for i in range(1030):
        with rec.region(f"batch_{i}"):
            pass
        rec.count(f"items_{i}", 1)
    with rec.region(""):  # empty: records nothing, counted
        pass
    rec.end_update(0)
    assert rec.info["path"].endswith("/log-\ufffd.jsonl")  # (shown with U+FFFD, as in the records)
    with pytest.warns(stepprof.RecorderWarning, match="too_many_regions"):
        errors = rec.close()
    assert errors["too_many_regions"] >= 6 and errors["too_many_counters"] >= 6 and errors["bad_argument"] >= 1
    config, updates = read_log(raw.decode("utf-8", "surrogateescape"))
    assert config["run_id"] == "r\ufffd" and config["note"] == "caf\ufffd"
    assert "a\ufffd" in updates[0]["calls"] and "batch_0" in updates[0]["calls"]


UNIQUE_NAMES_SCRIPT = r'''
import json, sys, tracemalloc, warnings
import stepprof

rec = stepprof.Recorder(sys.argv[1], device_timing="off")


def unique_names(first, n):
    for i in range(first, first + n):
        with rec.region(f"unique_region_{i}"):
            pass
        rec.count(f"unique_counter_{i}", 1)


unique_names(0, 1100)  # past the 1,024-name limit
tracemalloc.start()
before = tracemalloc.get_traced_memory()[0]
unique_names(1100, 20000)
grown = tracemalloc.get_traced_memory()[0] - before
tracemalloc.stop()
rec.end_update(0)
with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    errors = rec.close()
print(json.dumps({"grown": grown, "errors": errors}))
'''


def test_names_past_the_limit_are_not_kept_by_the_recorder_object(tmp_path):
    # Recorder.region() and count() cached every name, also those past the recorder's
    # 1,024-name limit, which record nothing: a job making a new name per step grew without
    # bound (14 -> 102 MiB over 300,000 names). (A new process: the limit is per process.)
    script = tmp_path / "unique.py"
    script.write_text(UNIQUE_NAMES_SCRIPT)
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "r.jsonl")], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert out["grown"] < 100_000, f"{out['grown']} bytes kept for 20,000 names that record nothing"
    errors = out["errors"]
    assert errors["too_many_regions"] >= 20000 and errors["too_many_counters"] >= 20000, errors
    _, (u,) = read_log(tmp_path / "r.jsonl")
    assert "unique_region_0" in u["calls"] and "unique_region_21099" not in u["calls"]
    assert u["counts"]["unique_counter_0"] == 1 and "unique_counter_21099" not in u["counts"]


PAST_THE_LIMIT_SCRIPT = r'''
import sys
import stepprof

rec = stepprof.Recorder(sys.argv[1], device_timing="off")
for i in range(1022):  # with "outer" and "inner", the 1,024 names the recorder takes
    with rec.region(f"filler_{i}"):
        pass
with rec.region("outer"):
    with rec.region("inner_0"):
        pass
    with rec.region("past_the_limit"):  # the 1,025th name: not recorded
        with rec.region("inner_0"):
            pass
        with rec.region("past_the_limit_2"):
            with rec.region("inner_0"):
                pass
rec.end_update(0)
rec.close()
'''


def test_a_region_inside_one_past_the_name_limit_keeps_the_enclosing_recorded_parent(tmp_path):
    # A region entered inside one past the 1,024-name limit had no `parents` entry: its
    # parent was the unrecorded slot, so the report put it outside the nesting. (A new
    # process: the name limit is per process.)
    script = tmp_path / "limit.py"
    script.write_text(PAST_THE_LIMIT_SCRIPT)
    log = tmp_path / "r.jsonl"
    r = subprocess.run([sys.executable, str(script), str(log)], capture_output=True, text=True, timeout=120,
                       env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert "too_many_regions" in r.stderr
    _, updates = read_log(log)
    u = updates[0]
    assert u["calls"]["inner_0"] == 3 and "past_the_limit" not in u["calls"]
    assert u["parents"]["inner_0"] == "outer" and u["parents"]["outer"] is None
    assert u["recorder_errors"]["too_many_regions"] >= 1


def test_a_region_object_is_made_by_the_recorder_only():
    with pytest.raises(TypeError):
        stepprof.Region()


def test_numpy_and_torch_scalars_in_the_config_are_numbers(tmp_path):
    # json.dumps(default=str) wrote np.int64(8) as "8", which open() then refused.
    np = pytest.importorskip("numpy")
    cfg = {"micro_batch": np.int64(8), "accumulation": np.int32(2), "seed": np.uint32(1234),
           "lr": np.float32(0.5), "nested": {"warmup": np.int16(3)}}
    try:
        import torch
        cfg["global_batch"] = torch.tensor(64)
    except ImportError:
        cfg["global_batch"] = np.array(64)
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off", config=cfg)
    rec.end_update(0)
    rec.close()
    config, _ = read_log(tmp_path / "r.jsonl")
    assert (config["micro_batch"], config["accumulation"], config["seed"], config["global_batch"]) == (8, 2, 1234, 64)
    assert config["lr"] == 0.5 and config["nested"] == {"warmup": 3}
    deep = 0
    for _ in range(1000):
        deep = [deep]
    with pytest.raises(ValueError, match="nested more than 64"):
        stepprof.Recorder(str(tmp_path / "d.jsonl"), device_timing="off", config={"x": deep})


def test_a_log_on_stdout_redirected_to_a_file_neither_truncates_nor_locks_it(tmp_path):
    # `python train.py /dev/stdout >> job.log`: the job's earlier output was erased, and a
    # second rank writing to the same output file found it locked.
    out = tmp_path / "job.log"
    out.write_text("earlier output\n")
    script = ("import stepprof, sys\nprint('printed before open', flush=True)\n"
              "rec = stepprof.Recorder('/dev/stdout', rank=int(sys.argv[1]), world_size=2, run_id='j', "
              "device_timing='off')\nrec.end_update(0)\nrec.close()\n")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    with open(out, "a") as f:
        procs = [subprocess.Popen([sys.executable, "-c", script, str(r)], stdout=f, stderr=subprocess.PIPE, env=env)
                 for r in (0, 1)]
        errs = [p.communicate(timeout=60)[1].decode() for p in procs]
    assert all(p.returncode == 0 for p in procs), errs
    text = out.read_text()
    assert text.startswith("earlier output\n") and text.count("printed before open") == 2
    assert text.count('"type":"config"') == 2 and text.count('"type":"update"') == 2, text
    assert not any("another process" in e for e in errs), errs


def test_a_format_spec_on_rank_in_the_path_is_applied(tmp_path):
    # "rank{rank:03d}.jsonl" was not expanded (only "{rank}" was): every rank wrote to
    # one file named "rank{rank:03d}.jsonl", and all but the first found it locked.
    for rank in (3, 12):
        with stepprof.Recorder(str(tmp_path / "rank{rank:03d}.jsonl"), rank=rank, world_size=16, run_id="j",
                               device_timing="off") as rec:
            assert rec.info["path"] == str(tmp_path / f"rank{rank:03d}.jsonl")
            rec.end_update(0)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["rank003.jsonl", "rank012.jsonl"]
    config, updates = read_log(tmp_path / "rank012.jsonl")
    assert config["rank"] == 12 and [u["step"] for u in updates] == [0]
    # "{rank}" as before (in a directory name too), "{rank:>3}" padded with spaces; other
    # braces are kept as they are.
    with stepprof.Recorder(str(tmp_path / "d{rank}" / "r{rank}-{rank:>3}-{x}{.jsonl"), rank=5, world_size=16,
                           run_id="j", device_timing="off") as rec:
        rec.end_update(0)
    assert (tmp_path / "d5" / "r5-  5-{x}{.jsonl").exists()
    with pytest.raises(ValueError, match=r"\{rank:q\} is not a format spec"):
        stepprof.Recorder(str(tmp_path / "r{rank:q}.jsonl"), rank=1, world_size=2, run_id="j", device_timing="off")
    assert not any(p.name.startswith("r{") for p in tmp_path.iterdir())


def test_numpy_arrays_in_the_config_are_lists(tmp_path):
    # json.dumps(default=str) wrote np.array([0.9, 0.999]) as the string "[0.9   0.999]".
    np = pytest.importorskip("numpy")
    cfg = {"betas": np.array([0.9, 0.999]), "grid": np.arange(4, dtype=np.int32).reshape(2, 2),
           "odd": np.array([1.0, np.inf]), "nested": {"mask": np.array([True, False])}}
    with stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off", config=cfg) as rec:
        rec.end_update(0)
    config, _ = read_log(tmp_path / "r.jsonl")
    assert config["betas"] == [0.9, 0.999]
    assert config["grid"] == [[0, 1], [2, 3]]
    assert config["odd"] == [1.0, "inf"]
    assert config["nested"] == {"mask": [True, False]}


def test_the_config_does_not_import_numpy(tmp_path):
    # Arrays are recognized only when the job has imported numpy itself.
    code = ("import sys, stepprof\n"
            "class Shaped:\n    ndim = 1\n    def tolist(self):\n        return [1]\n    def __str__(self):\n"
            "        return 'shaped'\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'r.jsonl')!r}, device_timing='off', config={{'x': Shaped()}})\n"
            "rec.end_update(0); rec.close()\n"
            "print('numpy' in sys.modules)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["False"]
    config, _ = read_log(tmp_path / "r.jsonl")
    assert config["x"] == "shaped"  # not an array: its str(), as before


PICKLED_SCRIPT = '''
import multiprocessing, pickle, sys
import stepprof


class Dataset:  # holds the recorder, as a Dataset that times its own loading does
    def __init__(self, rec):
        self.rec = rec

    def load(self, i):
        with self.rec.region("load"):
            self.rec.count("loaded", 1)
            self.rec.end_update(100 + i)
        # Closed and called again, as a fork() child's copy may be: silent, errors {}
        # (it warned "after close()", an error under -W error, and counted used_after_close).
        closed = self.rec.close()
        self.rec.count("loaded", 1)
        return (i, self.rec.closed, self.rec.errors, closed)


def main():
    rec = stepprof.Recorder(sys.argv[1], device_timing="off")
    ds = Dataset(rec)
    with multiprocessing.get_context("spawn").Pool(1) as pool:  # pickles ds, and the recorder
        got = pool.map(ds.load, range(2))
    assert got == [(0, True, {}, {}), (1, True, {}, {})], got
    with rec.region("step"):
        pass
    rec.end_update(0)
    assert rec.close() == {}


if __name__ == "__main__":
    main()
'''


def test_a_recorder_pickled_into_a_spawned_worker_records_nothing_there(tmp_path):
    # Pickling raised TypeError (its lock) into the job: a Dataset holding the recorder
    # could not go to a DataLoader worker started with "spawn".
    script = tmp_path / "train.py"
    script.write_text(PICKLED_SCRIPT)
    log = tmp_path / "rank0.jsonl"
    r = subprocess.run([sys.executable, "-W", "error", str(script), str(log)], capture_output=True, text=True,
                       timeout=120, env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    _, updates = read_log(log)
    assert [(u["step"], u["calls"]) for u in updates] == [(0, {"step": 1})]


def test_a_copy_of_a_recorder_is_the_recorder(tmp_path):
    # A copy.copy() shared the handle: dropping the copy closed the recorder, whose
    # records were then lost without a word and whose info raised.
    import copy
    import gc
    rec = stepprof.Recorder(str(tmp_path / "c.jsonl"), device_timing="off")
    assert copy.copy(rec) is rec and copy.deepcopy({"r": rec})["r"] is rec
    c = copy.copy(rec)
    del c
    gc.collect()
    rec.end_update(0)  # (no region: earlier tests may have taken the process's 1,024 names)
    assert rec.info["records_written"] == 2 and rec.close() == {}
    _, updates = read_log(tmp_path / "c.jsonl")
    assert [u["step"] for u in updates] == [0]


def test_flags_numpy_and_torch_bools_and_one_element_arrays_are_refused(tmp_path):
    # append="no" appended; np.bool_(True) and torch.tensor(True) were counted as 1, and
    # torch.tensor([3]) as 3, while a plain True raised TypeError.
    np = pytest.importorskip("numpy")
    for flag in ("append", "sync_at_update"):
        with pytest.raises(TypeError, match=f"{flag} must be True or False"):
            stepprof.Recorder(str(tmp_path / "f.jsonl"), device_timing="off", **{flag: "no"})
    rec = stepprof.Recorder(str(tmp_path / "b.jsonl"), device_timing="off", append=np.bool_(False))
    bad = [np.bool_(True), np.array([3])]
    try:
        import torch
        bad += [torch.tensor(True), torch.tensor([3])]
    except ImportError:
        pass
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # (numpy's deprecation of a bool as an index raised instead)
        for value in bad:
            with pytest.raises(TypeError):
                rec.count("samples", value)
            with pytest.raises(TypeError):
                rec.frame(value)
    rec.count("samples", np.int64(3))
    rec.set_cuda_stream(None)  # a run without a GPU: nothing (it raised TypeError)
    rec.end_update(0)
    assert rec.close() == {}
    _, updates = read_log(tmp_path / "b.jsonl")
    assert updates[0]["counts"] == {"samples": 3}


def test_sample_indices_from_numpy_arrays_and_torch_tensors(tmp_path):
    # A DataLoader's index batch is a tensor: each element was converted one by one (13 ms
    # for 4,096 indices against 1 ms for a list). The values and the checks are the same.
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off")
    rec.sample_indices(np.arange(5, dtype=np.int64))
    rec.sample_indices(torch.tensor([7, 2 ** 40]))
    rec.sample_indices(np.array([], dtype=np.int32))
    with pytest.warns(stepprof.RecorderWarning, match="sample index -2"):
        rec.sample_indices(np.array([1, -2]))  # (counted: a bad value)
    for bad, error, match in [(np.array([[1, 2]]), TypeError, "must be an integer"),
                              (torch.tensor(3), TypeError, "not a 0-d Tensor"),
                              (np.array([True]), TypeError, "must be an integer")]:
        with pytest.raises(error, match=match):
            rec.sample_indices(bad)
    rec.end_update(0)
    with pytest.warns(stepprof.RecorderWarning):
        assert rec.close() == {"bad_argument": 1}
    _, updates = read_log(tmp_path / "r.jsonl")
    assert updates[0]["sample_indices"] == [0, 1, 2, 3, 4, 7, 2 ** 40]


def test_a_handler_that_closes_during_close_leaves_the_close_to_it(tmp_path, monkeypatch):
    # A signal handler's close() while close() read the recorder's info (before the C
    # ABI's close) closed the recorder itself; the interrupted close() then closed the
    # stale handle again and took the next session's counts for its own ({} here).
    rec = stepprof.Recorder(str(tmp_path / "a.jsonl"), device_timing="off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.count("", 1)  # one bad_argument
    rec.end_update(0)
    real_loads = json.loads
    seen = {}

    def loads_with_a_handler(*args, **kwargs):
        monkeypatch.setattr(json, "loads", real_loads)
        seen["handler"] = rec.close()  # (what a SIGTERM handler running here does)
        seen["errors"] = rec.errors
        return real_loads(*args, **kwargs)

    monkeypatch.setattr(json, "loads", loads_with_a_handler)
    with pytest.warns(stepprof.RecorderWarning, match="counted 1 error") as caught:
        assert rec.close() == {"bad_argument": 1}
    assert seen == {"handler": {}, "errors": {"bad_argument": 1}}
    assert caught[0].filename == __file__  # (the warning points at the job's close())
    assert rec.errors == {"bad_argument": 1}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rec.close() == {}
        stepprof.Recorder(str(tmp_path / "b.jsonl"), device_timing="off").close()


def test_a_second_close_that_finishes_an_interrupted_one_warns_at_the_jobs_line(tmp_path):
    rec = stepprof.Recorder(str(tmp_path / "a.jsonl"), device_timing="off")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rec.count("", 1)

    def interrupted(self, handle, stacklevel=5):
        raise KeyboardInterrupt

    close_interrupted(rec, stepprof.Recorder, "_finish_close", interrupted)
    with pytest.warns(stepprof.RecorderWarning, match="counted 1 error") as caught:
        assert rec.close() == {"bad_argument": 1}
    assert caught[0].filename == __file__, caught[0].filename


def test_errors_in_a_fork_child_while_the_parent_closes_do_not_wait_for_the_lock(tmp_path):
    # A thread of the parent was in close() (holding the recorder's lock) at fork(): the
    # child's `errors` waited for that lock for good.
    code = ("import json, os, signal, sys, threading, time, warnings, stepprof\n"
            "warnings.simplefilter('ignore')\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'f.jsonl')!r}, rank=0, world_size=1, device_timing='off')\n"
            "rec.end_update(0)\n"
            "real = json.loads\n"
            "def slow(*a, **k):\n"
            "    time.sleep(0.5)\n"
            "    return real(*a, **k)\n"
            "json.loads = slow\n"
            "t = threading.Thread(target=rec.close)\n"
            "t.start()\n"
            "time.sleep(0.1)\n"
            "assert rec._closing and rec._finishing\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    signal.alarm(5)\n"
            "    print('child', rec.errors, rec.closed, flush=True)\n"
            "    os._exit(0)\n"
            "t.join()\n"
            "json.loads = real\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print('status', status)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert "child {} True" in r.stdout and "status 0" in r.stdout, (r.stdout, r.stderr)


def test_a_handler_close_at_the_entry_of_the_close_leaves_nothing_to_close_twice(tmp_path):
    # A signal handler can run as _finish_close is entered, before it marks the close as in
    # progress: its close() closed the recorder, and the interrupted one then closed the
    # stale handle again (and took the next session's counts for its own).
    rec = stepprof.Recorder(str(tmp_path / "a.jsonl"), device_timing="off")
    rec.end_update(0)
    rec.count("samples", 1)  # unwritten_at_close
    real_finish = stepprof.Recorder._finish_close
    real_close = stepprof._core.close
    closes = []
    state = {}

    def spy(owner, handle):
        closes.append(handle)
        return real_close(owner, handle)

    def entered_with_a_handler(self, handle, stacklevel=5):
        stepprof.Recorder._finish_close = real_finish
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            state["handler"] = rec.close()  # the handler's close() at the entry
        state["next"] = stepprof.Recorder(str(tmp_path / "b.jsonl"), device_timing="off")  # and the next session
        return real_finish(self, handle, stacklevel)

    stepprof.Recorder._finish_close = entered_with_a_handler
    stepprof._core.close = spy
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            first = rec.close()
    finally:
        stepprof.Recorder._finish_close = real_finish
        stepprof._core.close = real_close
    assert state["handler"] == {"unwritten_at_close": 1}
    assert first == {"unwritten_at_close": 1} and rec.errors == {"unwritten_at_close": 1}
    assert len(closes) == 1  # the C ABI's close once
    nxt = state["next"]
    assert not nxt.closed
    nxt.end_update(0)
    assert nxt.close() == {}


def test_a_warning_interrupted_as_it_is_given_is_given_by_the_next_close(tmp_path, monkeypatch):
    rec = stepprof.Recorder(str(tmp_path / "a.jsonl"), device_timing="off")
    rec.end_update(0)
    rec.count("samples", 1)  # unwritten_at_close
    real_warn = stepprof._warn_in_loop

    def interrupted(message, stacklevel=3):
        monkeypatch.setattr(stepprof, "_warn_in_loop", real_warn)
        raise KeyboardInterrupt  # (a Ctrl-C at the function's entry)

    monkeypatch.setattr(stepprof, "_warn_in_loop", interrupted)
    with pytest.raises(KeyboardInterrupt):
        rec.close()
    with pytest.warns(stepprof.RecorderWarning, match="unwritten_at_close 1"):
        assert rec.close() == {"unwritten_at_close": 1}


def test_a_recorder_freed_while_its_close_was_interrupted_is_closed_by_the_next_one(tmp_path):
    # An interrupt inside __del__ (Python ignores it there) freed the Recorder with its
    # recorder open: every later Recorder() of the process was refused as already_open.
    code = ("import stepprof, sys, warnings\n"
            "warnings.simplefilter('error')\n"
            "sys.unraisablehook = lambda u: print('ignored', u.exc_type.__name__)\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'a.jsonl')!r}, rank=0, world_size=1, device_timing='off')\n"
            "rec.end_update(0)\n"
            "real = stepprof.Recorder._close_dropped\n"
            "def interrupted(self, *a, **k):\n"
            "    raise KeyboardInterrupt\n"
            "stepprof.Recorder._close_dropped = interrupted\n"
            "del rec\n"
            "stepprof.Recorder._close_dropped = real\n"
            f"nxt = stepprof.Recorder({str(tmp_path / 'b.jsonl')!r}, rank=0, world_size=1, device_timing='off')\n"
            "print('next open', not nxt.closed)\n"
            "nxt.end_update(0)\n"
            "print('next close', nxt.close())\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["ignored KeyboardInterrupt", "next open True", "next close {}"], r.stdout
    assert "a Recorder was freed with its recorder still open" in r.stderr, r.stderr
    lines = (tmp_path / "a.jsonl").read_text().splitlines()
    assert [json.loads(l)["type"] for l in lines] == ["config", "update"]


def test_a_fork_child_takes_no_lock_a_parent_thread_held_at_the_fork(tmp_path):
    # After close(), a child's calls were counted under a lock (and end_update() took the
    # recorder's lock) that a parent thread held at the fork: the child hung for good.
    code = ("import os, signal, threading, time, warnings, stepprof\n"
            "warnings.simplefilter('ignore')\n"
            f"rec = stepprof.Recorder({str(tmp_path / 'f.jsonl')!r}, rank=0, world_size=1, device_timing='off')\n"
            "rec.end_update(0)\n"
            "rec.close()\n"
            "held = threading.Event()\n"
            "def hold():\n"
            "    with stepprof._MISUSE_LOCK, rec._handle_lock:\n"
            "        held.set()\n"
            "        time.sleep(1)\n"
            "threading.Thread(target=hold).start()\n"
            "held.wait()\n"
            "pid = os.fork()\n"
            "if pid == 0:\n"
            "    signal.alarm(5)\n"
            "    rec.count('samples', 1); rec.end_update(1); rec.flush(); rec.begin_update()\n"
            "    print('child', rec.errors, flush=True)\n"
            "    os._exit(0)\n"
            "_, status = os.waitpid(pid, 0)\n"
            "print('status', status)\n")
    r = run_python(code)
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines() == ["child {}", "status 0"], (r.stdout, r.stderr)


def test_per_update_data_past_its_limit_is_counted_not_raised(tmp_path):
    # A loop that appends sample indices and never calls end_update() grew the job's
    # memory without bound; past max_update_data_bytes a call records nothing and counts.
    log = tmp_path / "r.jsonl"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # (close() warns of the error counted)
        rec = stepprof.Recorder(str(log), rank=0, world_size=1, device_timing="off", max_update_data_bytes=80)
        rec.sample_indices(list(range(11)))  # 88 bytes: past it
        rec.sample_indices(list(range(10)))  # 80: fits
        rec.microbatch(frames=[3, 3])  # 64 + 16 more: past it, counted and not raised
        rec.frame(3)  # (the C ABI returns STEPPROF_ERR_NO_MEMORY for these now: not raised)
        rec.input_shape((2, 8))
        rec.end_update(0)
        assert rec.close() == {"update_data_full": 4}
    record = json.loads(log.read_text().splitlines()[1])
    assert record["sample_indices"] == list(range(10))
    assert record["recorder_errors"] == {"update_data_full": 4}
    assert "microbatches" not in record and "frame_histogram" not in record and "input_shapes" not in record
    with pytest.raises(ValueError, match="max_update_data_bytes"):
        stepprof.Recorder(str(log), device_timing="off", max_update_data_bytes=-1)
    with pytest.raises(TypeError, match="max_update_data_bytes"):
        stepprof.Recorder(str(log), device_timing="off", max_update_data_bytes=1.5)


TEMPLATE_BEFORE_INIT = '''
import os, sys, time, warnings
import stepprof
import torch.distributed as dist
import torch.multiprocessing as mp


def worker(rank, init, log_dir):
    rec = stepprof.Recorder(os.path.join(log_dir, "rank{rank}.jsonl"), device_timing="off")  # before init
    dist.init_process_group("gloo", init_method="file://" + init, rank=rank, world_size=2)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec.end_update(0)
        dist.barrier()
        rec.close()
    for w in caught:
        print(f"rank {rank}: {w.message}", flush=True)


if __name__ == "__main__":
    mp.start_processes(worker, args=(sys.argv[1], sys.argv[2]), nprocs=2, start_method="fork")
'''


def test_a_rank_path_opened_before_init_process_group_says_the_rank_was_taken_as_0(tmp_path):
    # Every process of a 2-rank job made its Recorder("rank{rank}.jsonl") before
    # init_process_group: both took rank 0, and the second's warning told it to use
    # rank{rank} paths, which it did. It now says why the rank was 0.
    script = tmp_path / "train.py"
    script.write_text(TEMPLATE_BEFORE_INIT)
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE")}
    r = subprocess.run([sys.executable, str(script), str(tmp_path / "init"), str(tmp_path)], capture_output=True,
                       text=True, timeout=120, env={**env, "PYTHONPATH": os.pathsep.join(sys.path)})
    assert r.returncode == 0, r.stderr
    assert not (tmp_path / "rank1.jsonl").exists()
    said = [l for l in r.stdout.splitlines() if "another process is recording to this file" in l]
    assert len(said) == 1, r.stdout
    assert "This process's rank was taken as 0: no rank= was given, $RANK is unset, and torch.distributed was not " \
           "initialized when the Recorder was made; make it after init_process_group(), or pass rank=" in said[0]


def test_recording_in_a_fork_child_is_said_once(tmp_path):
    # A DataLoader worker (a fork() child) timing __getitem__: its regions and counts
    # record nothing (the log is the parent's), and the work was missing from the log
    # without a word (a helper). One RecorderWarning per process says so now.
    rec = stepprof.Recorder(str(tmp_path / "parent.jsonl"), device_timing="off")
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                with rec.region("worker_getitem"):
                    rec.count("worker_items", 1)
                rec.count("worker_items", 1)
            said = [str(c.message) for c in caught if issubclass(c.category, stepprof.RecorderWarning)]
            os.write(w, json.dumps(said).encode())
        finally:
            os._exit(0)
    os.close(w)
    with os.fdopen(r) as f:
        said = json.loads(f.read())
    os.waitpid(pid, 0)
    rec.end_update(0)
    rec.close()
    assert len(said) == 1, said
    assert said[0].startswith(f"stepprof: Recorder.region() in process {pid}, a fork() child of the recording "
                              f"process {os.getpid()} (e.g. a DataLoader worker), records nothing"), said
    # The parent's own calls say nothing of it.
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec2 = stepprof.Recorder(str(tmp_path / "again.jsonl"), device_timing="off")
        with rec2.region("main"):
            pass
        rec2.end_update(0)
        rec2.close()
    assert not [c for c in caught if "fork() child" in str(c.message)]


def test_a_float_count_from_the_data_is_recorded_when_whole_and_counted_otherwise(tmp_path):
    # count("tokens", mask.sum()) of a float mask is a float tensor, perhaps only on a path
    # taken at hour 20: it raised TypeError into the training loop, which ended the job.
    # A whole number is the count it stands for; any other float is a bad value (counted,
    # warned once), not truncated.
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    rec = stepprof.Recorder(str(tmp_path / "r.jsonl"), device_timing="off")
    mask = torch.ones(37)  # float32
    # (One counter name, "samples", recorded by the first test: a test before this one
    # takes the process's 1,024 names.)
    rec.count("samples", mask.sum())
    rec.count("samples", 3.0)
    rec.count("samples", np.float64(2))
    rec.frame(np.float32(9), samples=2.0)
    rec.input_shape((8.0, torch.tensor(100.0, dtype=torch.bfloat16)))
    rec.sample_indices(torch.tensor([4.0, 1.0]))
    rec.microbatch(frames=[9.0], tokens=[torch.tensor(121.0)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        rec.count("samples", mask[:3].mean() * 2.5)  # 2.5: not truncated to 2
        rec.count("samples", float("nan"))
        rec.count("samples", float("inf"))
        rec.frame(9.5)
        rec.input_shape((8, 99.5))
        rec.sample_indices([1, 2.5])
        rec.microbatch(frames=[9], tokens=[120.5])
    warned = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
    assert len(warned) == 1 and "count tensor(2.5000) for counter 'samples'" in warned[0], warned
    assert "no whole number" in warned[0] and "above 2^53" not in warned[0], warned
    with pytest.raises(TypeError):
        rec.count("samples", torch.tensor([3.0]))  # an array is no count (as an integer one)
    # (A review: a whole float beyond 2^53 is "above 2^53", a negative one "negative", not
    # "no whole number"; arrays given to microbatch() raised their truth value's error.)
    rec2_warned = []
    for call, reason in [(lambda: rec.count("samples", 1e300), "above 2^53"),
                         (lambda: rec.count("samples", -1e300), "negative"),
                         (lambda: rec.microbatch(frames=np.array([3, 4]), tokens=np.array([10])), "one entry per sample"),
                         (lambda: rec.microbatch(frames=torch.tensor([3.5]), tokens=torch.tensor([10.0])),
                          "no whole number"),
                         (lambda: rec.microbatch(frames=[3], tokens=(x for x in [10.5])), "no whole number")]:
        rec._warned_value = False  # (one warning per Recorder: each reason is looked at)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            call()  # (raises nothing)
        said = [str(w.message) for w in caught if issubclass(w.category, stepprof.RecorderWarning)]
        assert len(said) == 1 and reason in said[0], (reason, said)
        rec2_warned.append(reason)
    rec.end_update(0)
    with pytest.warns(stepprof.RecorderWarning):
        assert rec.close() == {"bad_argument": 7 + len(rec2_warned)}
    _, updates = read_log(tmp_path / "r.jsonl")
    u = updates[0]
    assert u["counts"] == {"samples": 42}
    assert u["frame_histogram"] == {"9": 2}
    assert u["input_shapes"] == {"(8, 100)": 1}
    assert u["sample_indices"] == [4, 1]
    assert u["microbatches"] == [{"frames": [9], "tokens": [121]}]
