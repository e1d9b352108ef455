"""stepprof: always-on per-update performance telemetry for distributed training.

The recorder writes one JSON line per optimizer update per rank (docs/log-schema.md):
regions timed on the host clock (and on the CUDA stream when torch has a GPU), counters,
the frame histogram, input shapes and sample indices. `stepprof report` reads them.

    import stepprof
    rec = stepprof.Recorder("logs/rank{rank}.jsonl", rank=rank, world_size=world,
                            config={"micro_batch": 8, "accumulation": 2})
    for step in range(steps):
        with rec.region("forward_and_loss"):
            loss = model(batch)
        rec.count("samples", 8)
        rec.end_update(step)
    rec.close()

This package is a thin layer over the C++ recorder (the compiled module stepprof._core,
which binds the C ABI of include/stepprof/stepprof.h); nothing is timed in Python.
The recorder never raises into the training loop for what it cannot do (a file it
cannot write, a full disk) nor for the state it is in (a second Recorder while one is
open, a call after close(), e.g. from a logging thread that outlives training): it counts
those errors (`errors`, the next record's `recorder_errors`, close()), and warns once.
Nor for a value that the data gave (a negative count, a NaN padding fraction from an
empty micro-batch, an index above 2^53): it may appear only at hour 20 of a run, so it is
not recorded and is counted as bad_argument, with one RecorderWarning. So is a count
that is a float and no whole number (a float tensor's sum may be one only at hour 20;
37.0 is taken as 37). A wrong type of an argument (a count of "3", a step of 1.5, a name
that is no str) is a programming error found at the first call: TypeError.
"""
from __future__ import annotations

import atexit
import functools
import gc
import inspect
import operator
import json
import math
import os
import re
import sys
import threading
import warnings
import weakref
from typing import Any, Callable, Iterable, Mapping, Optional, Sequence, TypeVar, Union

from . import _core

__all__ = ["Recorder", "Region", "RecorderWarning", "clock_name"]

Region = _core.Region
F = TypeVar("F", bound=Callable[..., Any])


def _integer(value: Any, what: str, expected: str = "an integer") -> int:
    """`value` as an int if it is an integer (int, numpy or torch integer scalar);
    TypeError otherwise (2.5 or "3" are not silently truncated or parsed, nor a tensor or
    array of one element that is not a scalar), ValueError beyond int64. A bool (numpy's
    and torch's too) is not taken as 0 or 1 (count("samples", True) is a mistake).
    `expected` is what a TypeError's message says was expected."""
    dtype = getattr(value, "dtype", None)
    kind = getattr(dtype, "kind", None)  # (numpy's; str(dtype) took most of a numpy int's time)
    if isinstance(value, bool) or (dtype is not None and (kind == "b" if kind is not None else str(dtype) == "torch.bool")):
        raise TypeError(f"{what} must be {expected}, not bool {value!r}")
    if getattr(value, "ndim", 0) != 0:  # (torch.tensor([3]) was taken as 3)
        raise TypeError(f"{what} must be {expected}, not a {type(value).__name__} of {value.ndim} dimension(s)")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be {expected}, not {type(value).__name__} {value!r}") from None
    if not -(2 ** 63) <= n < 2 ** 63:
        raise ValueError(f"{what} {n} is outside the signed 64-bit range (-2^63 to 2^63 - 1)")
    return n


def _flag(value: Any, what: str) -> bool:
    """`value` as a bool: a bool or a numpy bool; TypeError otherwise (append="no" is
    truthy, and appended to the old log)."""
    if isinstance(value, bool):
        return value
    if str(getattr(value, "dtype", "")) == "bool" and getattr(value, "ndim", 1) == 0:
        return bool(value)
    raise TypeError(f"{what} must be True or False, not {type(value).__name__} {value!r}")


def _warn_in_loop(message: str, stacklevel: int = 3) -> None:
    """A RecorderWarning from a call in the training loop. With warnings turned into
    errors (python -W error, a filter's "error"), the message goes to stderr instead: the
    recorder never raises into the training loop for what it cannot do."""
    try:
        warnings.warn(message, RecorderWarning, stacklevel=stacklevel)
    except Warning:
        print(f"{message} (RecorderWarning, not raised)", file=sys.stderr, flush=True)


_MAX_COUNT = 2 ** 53  # the largest count a record holds exactly (the reader rejects more)


_MAX_BATCH_COUNT = 2**32  # samples of one frame count in one update (schema.hpp: kMaxBatchCount)


_NOT_A_COUNT = 2 ** 63 - 1  # sent for a value the C ABI must count as bad_argument (above 2^53)


def _is_float_scalar(value: Any) -> bool:
    """True for a float (Python's, numpy's) or a floating-point numpy or torch scalar
    (0-d): torch.float32, torch.bfloat16, numpy.float16, ..."""
    if isinstance(value, float):
        return True
    dtype = getattr(value, "dtype", None)
    if dtype is None:
        return False
    # (numpy's dtype.kind, torch's dtype.is_floating_point: str(dtype) made a numpy int64
    # count twice as slow, a review measured)
    kind = getattr(dtype, "kind", None)
    if kind is not None:  # (ml_dtypes' and JAX's bfloat16 is of kind "V")
        floating = kind == "f" or (kind == "V" and "float" in str(dtype))
    else:
        floating = getattr(dtype, "is_floating_point", False) is True
    return floating and getattr(value, "ndim", 1) == 0


def _is_whole(f: float) -> bool:
    """True for a finite float with no fractional part (37.0, -0.0, 1e300)."""
    return math.isfinite(f) and f.is_integer()


def _count(value: Any, what: str) -> int:
    """`value` as a count, dimension or dataset index for the C ABI, which takes 0 to 2^53
    and counts any other value as bad_argument: an integer (numpy's and torch's too); one
    beyond int64 is clamped to int64's range (still outside 0 to 2^53, so it is counted,
    not recorded), not raised: such a value comes from the data. So does a float:
    mask.sum() of a float mask is a float tensor, perhaps only on a path taken at hour 20
    of a run. A float that is a whole number (37.0) is taken as that integer; any other
    (37.5, NaN, infinity) is _NOT_A_COUNT, counted and warned of, not truncated or raised.
    TypeError for anything else (a str, a bool, an array of one or more dimensions)."""
    if _is_float_scalar(value):
        f = float(value)
        if not _is_whole(f):
            return _NOT_A_COUNT
        # (A whole number beyond int64 is clamped as an int is: its sign kept, so the C
        # ABI's reason is "negative" or "above 2^53", not "no whole number".)
        return int(f) if abs(f) < 2 ** 63 else (_NOT_A_COUNT if f > 0 else -(2 ** 63))
    try:
        return _integer(value, what, "an integer (or a float that is a whole number)")
    except ValueError:  # (beyond int64: _integer took the type)
        return _NOT_A_COUNT if operator.index(value) > 0 else -(2 ** 63)


def _shown(path: Union[str, bytes]) -> str:
    """A log path as the recorder's messages show it: control characters and bytes that
    are no UTF-8 as \\xNN (a newline in a path forged a line of the job's output)."""
    return _core.printable(path if isinstance(path, bytes) else os.fsencode(path))


def _utf8(text: str) -> str:
    """`text` as UTF-8 can hold it: lone surrogates (a str made from bytes that are not
    UTF-8 with os.fsdecode or errors="surrogateescape") become U+FFFD, one per byte, as
    the C++ recorder writes bad bytes."""
    try:
        text.encode("utf-8")
        return text
    except UnicodeEncodeError:
        try:
            return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
        except UnicodeEncodeError:  # a surrogate that is not an escaped byte
            return text.encode("utf-8", "surrogatepass").decode("utf-8", "replace")


def _name(name: Any, what: str) -> str:
    """`name` checked as a region or counter name: a str without NUL characters (the
    C ABI would cut the name there); lone surrogates become U+FFFD (_utf8)."""
    if not isinstance(name, str):
        raise TypeError(f"{what} name must be a str, not {type(name).__name__}")
    if "\0" in name:
        raise ValueError(f"{what} name {name!r} contains a NUL character")
    return _utf8(name)


def _listed(values: Any) -> list:
    """`values` as a list: a numpy array's or torch tensor's elements as Python numbers
    (tolist()), any other iterable's as they are. TypeError for a str or bytes, or a
    0-d array (no sequence)."""
    if isinstance(values, (str, bytes)):
        raise TypeError(f"expected a sequence of integers, not {type(values).__name__} {values!r}")
    if hasattr(values, "tolist") and not isinstance(values, (list, tuple)):
        listed = values.tolist()
        if not isinstance(listed, list):
            raise TypeError(f"expected a sequence of integers, not a 0-d {type(values).__name__}")
        return listed
    return list(values)


def _is_array(value: Any) -> bool:
    """True for a numpy array or a torch tensor, when the process has imported numpy or
    torch (never imported here: a job that has not imported them has none)."""
    for module, attr in (("numpy", "ndarray"), ("torch", "Tensor")):
        m = sys.modules.get(module)
        cls = getattr(m, attr, None) if m is not None else None
        if isinstance(cls, type) and isinstance(value, cls):
            return True
    return False


def _finite(value: Any, depth: int = 0) -> Any:
    """`value` made writable as JSON, at any depth of dicts, lists and tuples:
    - numpy and torch scalars (and 0-d arrays and tensors) as the Python number they hold
      (`json.dumps(default=str)` would write np.int64(8) as the string "8");
    - every float that JSON cannot hold (inf, -inf, nan), and every int beyond 64 bits
      (below -2^63 or above 2^64 - 1, which JSON readers round to a double), as its str()
      ("inf", "18446744073709551617"): {"max_grad_norm": float("inf")} is written, not
      rejected, and a 65-bit int is not rounded without a word;
    - numpy arrays and torch tensors of one or more dimensions as (nested) lists
      (tolist(); json.dumps(default=str) wrote np.array([1, 2]) as the string "[1 2]"),
      when the process has imported numpy or torch (neither is imported here);
    - strings through _utf8 (a lone surrogate is not valid JSON text).
    ValueError for a value nested more than 64 levels deep (the recorder refuses those)."""
    if depth > 64:
        raise ValueError("a config value is nested more than 64 levels deep")
    if not isinstance(value, (int, float, str, bytes, Mapping, list, tuple)):
        ndim = getattr(value, "ndim", None)
        if ndim == 0:
            try:
                value = value.item()  # numpy scalar or 0-d array, torch 0-d tensor
            except (AttributeError, TypeError, ValueError, RuntimeError):
                pass
        elif isinstance(ndim, int) and ndim > 0 and _is_array(value):
            try:
                value = value.tolist()  # nested lists of Python numbers
            except (AttributeError, TypeError, ValueError, RuntimeError):
                pass
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    if isinstance(value, int) and not isinstance(value, bool) and not -(2 ** 63) <= value < 2 ** 64:
        return str(value)  # (beyond 64 bits: JSON readers, the recorder's too, round it to a double)
    if isinstance(value, str):
        return _utf8(value)
    if isinstance(value, Mapping):
        out: dict[Any, Any] = {}
        written: dict[str, Any] = {}  # JSON key text -> the key given
        for k, v in value.items():
            key = _utf8(k) if isinstance(k, str) else k
            # json.dumps writes 1, 1.0, True and None as the keys "1", "1.0", "true" and
            # "null": two keys written alike were refused by the recorder as a key "that
            # appears twice" in a parameter the caller never named.
            text = key if isinstance(key, str) else json.dumps(key) if key is None or isinstance(
                key, (int, float)) else None
            if text is not None:
                if text in written:
                    raise ValueError(f"config keys {written[text]!r} and {k!r} are both written as the JSON key "
                                     f"{json.dumps(text)}")
                written[text] = k
            out[key] = _finite(v, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        return [_finite(v, depth + 1) for v in value]
    return value


_STATUS_OK = 0
_STATUS_WARN_IO = 1
_STATUS_WARN_ERRORS = 2
_STATUS_ERR_STATE = -2  # open(): another recorder is open in this process

# Names cached per Recorder at most (the recorder takes 1,024 region and 1,024 counter
# names per process; names it refuses are not cached, so this bounds only str keys that
# differ but name one region, e.g. lone surrogates replaced by U+FFFD).
_MAX_CACHED_NAMES = 4096


class _NullRegion:
    """The region of a Recorder that records nothing (closed, or made while another was
    open): `with` does nothing, and it never records into another recorder."""

    __slots__ = ()

    def __enter__(self) -> "_NullRegion":
        return self

    def __exit__(self, *exc: object) -> bool:
        return False  # do not swallow the exception of the with-block

    def __repr__(self) -> str:
        return "<stepprof region of a recorder that records nothing>"


_NULL_REGION = _NullRegion()
# used_after_close counts of every Recorder (a slow path). Reentrant: a signal handler that
# calls the recorder may run inside the block (a plain Lock hung the job there).
_MISUSE_LOCK = threading.RLock()

# Recorders open in this process, closed at interpreter exit if the job did not: a
# module-level recorder's __del__ may never run at shutdown (with a daemon thread alive
# it did not), and what close() would say on stderr was lost with it.
_OPEN: "weakref.WeakSet[Recorder]" = weakref.WeakSet()


def _close_at_exit() -> None:
    for rec in list(_OPEN):
        rec._close_dropped(at_exit=True)


def _finish_interrupted_closes() -> None:
    # (A function, so that no reference to a recorder outlives it: one held by a local
    # variable of Recorder() was never collected by its gc.collect().)
    for rec in list(_OPEN):
        if rec._closing and not rec._handle and not rec._finishing:
            rec._close_dropped(how="a Recorder whose close() was interrupted")


def _after_fork_in_child() -> None:
    # A fork() child (a DataLoader worker) holds copies of the parent's open recorders,
    # closed in the C++ recorder. Their handles are let go of here, so that region(),
    # count(), frame() and the rest do nothing there: with the handle kept they passed
    # the open check and recorded into the recorder the child opened itself (the C ABI's
    # per-update calls go to the process's open recorder). Their `closed`, `info` and
    # `errors` read as before (_pid is the parent's).
    global _FORKED
    _FORKED = True
    for rec in list(_OPEN):
        if rec._handle:
            rec._open_at_fork = True  # (its calls here say once that they record nothing: _say_forked)
        rec._handle = 0


os.register_at_fork(after_in_child=_after_fork_in_child)
_FORKED = False  # this process was made by fork() (set in the child)
_FORK_SAID = 0  # the process that said _say_forked's warning (a pid: a child's child says it again)


def _say_forked(call: str, parent: int, stacklevel: int) -> None:
    # A recording call in a fork() child (a DataLoader worker timing __getitem__) records
    # nothing, and the work timed there was missing from the log without a word (a
    # helper): said once per process, never raised.
    global _FORK_SAID
    if _FORK_SAID == os.getpid():
        return
    _FORK_SAID = os.getpid()
    _warn_in_loop(f"stepprof: Recorder.{call}() in process {os.getpid()}, a fork() child of the recording process "
                  f"{parent} (e.g. a DataLoader worker), records nothing: the recorder and its log are the parent's. "
                  "Time that work in the parent (around the loader's next()), or open a Recorder of its own in this "
                  "process (another path)", stacklevel=stacklevel + 1)

_AT_EXIT_REGISTERED = False  # (registered at the first open, so that the job's exit
# handlers registered after it, a finish() that calls end_update() and close(), run first)
_MP_EXIT_PID = 0  # the process whose multiprocessing exit runs _close_forked_at_exit


def _close_forked_at_exit() -> None:
    # (multiprocessing runs its exit finalizers before it joins the rank's threads: a
    # recorder that a thread of the rank still uses is left to it.)
    if any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.current_thread()):
        return
    _close_at_exit()


def _close_at_multiprocessing_exit() -> None:
    # A rank that multiprocessing started by fork() ("fork", Linux's default, as
    # torch.multiprocessing's start_processes(..., start_method="fork") does, or
    # "forkserver") ends with os._exit(): no atexit handler runs there, so a Recorder still
    # open when the rank's function returned (or raised, Ctrl-C included) was never closed
    # and what close() says was lost. multiprocessing runs its own exit finalizers before
    # that os._exit(). (A "spawn" rank exits normally, through atexit: its job's own exit
    # handlers, a finish() that calls end_update() and close(), must run first.)
    global _MP_EXIT_PID
    mp = sys.modules.get("multiprocessing")
    if not _FORKED or _MP_EXIT_PID == os.getpid() or mp is None or mp.parent_process() is None:
        return
    _MP_EXIT_PID = os.getpid()
    import multiprocessing.util  # noqa: PLC0415 - only in a multiprocessing child

    multiprocessing.util.Finalize(None, _close_forked_at_exit, exitpriority=0)


class RecorderWarning(UserWarning):
    """The recorder could not do something (e.g. write its log); it keeps running."""


def clock_name() -> str:
    """The host clock regions are timed with: "tsc" or "steady_clock"."""
    return _core.clock_name()


def _torch_cuda_stream() -> Optional[tuple[int, int]]:
    """(current CUDA stream address, device index) when the process has imported torch
    and it has a GPU, else None. Never raises. torch is not imported here: the import
    takes seconds, and a job that has not imported torch runs no work on its streams."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if torch.cuda.is_available():
            return int(torch.cuda.current_stream().cuda_stream), int(torch.cuda.current_device())
    except Exception:  # noqa: BLE001 - torch is optional; any failure means host-only timing
        return None
    return None


def _default_rank_world() -> tuple[int, int]:
    """Rank and world size from torch.distributed when the process has imported it and
    initialized it, else from the RANK / WORLD_SIZE environment (torchrun's), else 0
    and 1. torch is not imported here (an initialized process group has imported it)."""
    dist = sys.modules.get("torch.distributed")
    try:
        if dist is not None and dist.is_available() and dist.is_initialized():
            return dist.get_rank(), dist.get_world_size()
    except Exception:  # noqa: BLE001 - a half-initialized torch: fall back to the environment
        pass
    def from_env(name: str, default: int) -> int:
        text = os.environ.get(name)
        if text is None:
            return default
        try:
            value = int(text)
        except ValueError:
            raise ValueError(f"${name} is {text!r}: expected an integer (or pass {name.lower()}= to Recorder)") from None
        if not -2**63 <= value < 2**63:  # (the C ABI's int64_t: pybind11 raised a TypeError)
            raise ValueError(f"${name} is {text!r}: outside the 64-bit integer range (or pass {name.lower()}= to "
                             "Recorder)")
        return value

    return from_env("RANK", 0), from_env("WORLD_SIZE", 1)


_RANK_FIELD = re.compile(rb"\{rank(?::([^{}]*))?\}")


def _expand_path(path: bytes, rank: int) -> bytes:
    """`path` with each "{rank}" replaced by the rank and each "{rank:SPEC}" by
    format(rank, SPEC), Python's format spec for an integer ("{rank:03d}": 007, "{rank:>4}":
    "   7"). Other text, braces included, is kept as it is. ValueError for a SPEC that is
    not a format spec of an integer."""
    def field(m: "re.Match[bytes]") -> bytes:
        if m.group(1) is None:
            return str(rank).encode()
        spec = m.group(1).decode("utf-8", "surrogateescape")
        try:
            return os.fsencode(format(rank, spec))
        except ValueError as e:
            raise ValueError(f"log path {os.fsdecode(path)!r}: {{rank:{spec}}} is not a format spec of an integer "
                             f"({e})") from None
    return _RANK_FIELD.sub(field, path)


class Recorder:
    """The process's step-log recorder (one open at a time per process).

    Args:
        path: output file (str, bytes or path-like; not empty); "{rank}" is replaced by the
            rank, and "{rank:SPEC}" by the rank in Python's format spec SPEC for an
            integer ("rank{rank:03d}.jsonl": rank007.jsonl); other braces are kept as they
            are. Truncated unless append=True. "-" is a file of that name, not stdout
            ("/dev/stdout" writes to stdout).
        rank, world_size: data-parallel rank and number of ranks (default: from
            torch.distributed if initialized, else $RANK / $WORLD_SIZE, else 0 and 1).
        config: the run's settings, written in the config record in this order (e.g.
            micro_batch, accumulation, global_batch, seed, ...). Values must be
            JSON-serializable; numpy arrays are written as lists, other values as their
            str(), and so are the floats JSON cannot hold (inf, nan: "inf", "nan").
        alternatives: {region: group}: regions that are alternative code paths for the
            same work (e.g. {"vggt_batched": "geometry", "vggt_single": "geometry"}).
        roles: {region: "communication" | "data" | "optimizer" | "background"};
            "background": the region runs alongside the update on another thread (a
            data-loader thread), so the report does not count it as part of the update.
            Another role raises ValueError (the analyzer would not use it).
        run_id: identifies the run on every rank (default: $STEPPROF_RUN_ID,
            $TORCHELASTIC_RUN_ID or $SLURM_JOB_ID; else generated when world_size is
            1, and left out otherwise, since a per-process id would make the ranks of
            one run look like different runs).
        device_timing: "auto" (time regions on torch's current CUDA stream when the
            process has imported torch and it has a GPU; else the recorder looks for
            libcuda itself and times the default stream, or keeps host time only and the
            config record says why) or "off". Recorder() never imports torch.
        sync_at_update: synchronize the stream at each end_update() so device and host
            time agree per update (default True, as the real log's note says).
        append: append to the file instead of truncating it: what a job resumed from a
            checkpoint passes, so that the analyzer reads both parts as one run (the
            steps it runs again replace the earlier copies). Without it, a file that
            holds records of this same run_id is truncated with a RecorderWarning.
        (sync_at_update and append: True or False, else TypeError.)
        max_update_data_bytes: the most memory one update's frame histogram, input
            shapes, sample indices and micro-batch detail may take in the recorder
            [bytes], counted as 8 per integer plus 64 per bucket, distinct shape and
            micro-batch (default 64 MiB, 8 million sample indices; 0: no limit). A call
            past it records nothing and is counted as "update_data_full" (microbatch()
            does not raise), so that a loop without end_update() cannot grow the job's
            memory without bound. An integer, else TypeError; below 0, ValueError.

    A log that cannot be opened (an unwritable directory, a full disk) does not raise:
    the recorder runs on, counts the records it cannot write, and warns
    (RecorderWarning; printed to stderr instead when warnings are turned into errors).

    Nor does the recorder's state raise into the job:
    - a Recorder made while another one of the process is open (not closed, and still
      referenced) warns and records nothing: its calls do nothing (they never record into
      the open one), `closed` is True, and `errors` and close() report
      {"already_open": 1};
    - after close(), region(), timed(), count(), frame(), input_shape(),
      sample_indices(), padding_fraction(), microbatch(), set_cuda_stream(),
      begin_update(), end_update() and flush() do nothing (a thread that outlives the
      training loop, e.g. a logger's): each such call is counted as "used_after_close"
      in `errors` (close()'s errors plus these), and the first one warns. region() then
      returns a context manager that does nothing, and `info` is the info as of close().
    A wrong argument type still raises TypeError at the call (a name holding a NUL,
    ValueError), and Recorder() raises ValueError for a $RANK or $WORLD_SIZE that is no
    integer, or no rank of the world, when it reads them. A bad value of a per-update call
    (a negative count, a NaN padding fraction) is not recorded: counted as bad_argument,
    with one RecorderWarning.

    The recorder is the process's: copy.copy() and copy.deepcopy() return the Recorder
    itself, and a Recorder pickled into another process (a Dataset holding it, sent to a
    DataLoader worker started with "spawn") records nothing there, as a fork() child's
    copy. The 1,024 region and 1,024 counter names a process can record are shared by
    its Recorders, one after another (a sweep that names new regions in each run runs
    out: counted as too_many_regions / too_many_counters).

    Units: region times are written in milliseconds (cuda_stream_ms, cpu_call_ms), wall
    time of the update in milliseconds (wall_ms), counters as counts.
    """

    def __init__(
        self,
        path: Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"] = "stepprof-rank{rank}.jsonl",
        *,
        rank: Optional[int] = None,
        world_size: Optional[int] = None,
        config: Optional[Mapping[str, Any]] = None,
        alternatives: Optional[Mapping[str, str]] = None,
        roles: Optional[Mapping[str, str]] = None,
        run_id: Optional[str] = None,
        device_timing: str = "auto",
        sync_at_update: bool = True,
        append: bool = False,
        max_update_data_bytes: Optional[int] = None,
    ) -> None:
        self._init_state()
        if device_timing not in ("auto", "off"):
            raise ValueError(f"device_timing must be 'auto' or 'off', not {device_timing!r}")
        if rank is None or world_size is None:
            default_rank, default_world = _default_rank_world()
        from_default = rank is None or world_size is None
        # The rank taken as 0 for want of any source (no rank=, no $RANK, torch.distributed
        # not initialized yet): with a {rank} path every process opens rank0's file, and the
        # lock conflict's warning then says why (a Recorder made before init_process_group).
        # (Found by a helper whose 4 ranks all wrote nothing but rank 0's.)
        dist = sys.modules.get("torch.distributed")
        try:
            dist_ready = dist is not None and dist.is_available() and dist.is_initialized()
        except Exception:  # noqa: BLE001 - as _default_rank_world
            dist_ready = False
        rank_guessed = rank is None and "RANK" not in os.environ and not dist_ready
        rank = default_rank if rank is None else _integer(rank, "rank")
        world_size = default_world if world_size is None else _integer(world_size, "world_size")
        if from_default and not 0 <= rank < world_size and ("RANK" in os.environ or "WORLD_SIZE" in os.environ):
            raise ValueError(f"rank {rank} of world size {world_size} is no rank of the world (0 <= rank < world "
                             f"size), from $RANK {os.environ.get('RANK', '(unset: 0)')} and $WORLD_SIZE "
                             f"{os.environ.get('WORLD_SIZE', '(unset: 1)')}: set both, as torchrun does, or pass "
                             "rank= and world_size= to Recorder")
        # region_alternatives and region_roles first, then the user's fields, as the C++
        # recorder writes them (docs/recorder.md).
        if config is not None and not isinstance(config, Mapping):
            raise TypeError(f"config must be a mapping of field names to values (a dict), not {type(config).__name__}")
        user = dict(config or {})
        cfg: dict[str, Any] = {}
        # Given both ways, one would be dropped without a word: as the C++ recorder does,
        # that is an error.
        for given, key, arg in ((alternatives, "region_alternatives", "alternatives"), (roles, "region_roles", "roles")):
            if given and key in user:
                raise ValueError(f'"{key}" is given both in config and as {arg}=: give it once')
            if given:
                cfg[key] = dict(given)
        cfg.update(user)
        path = os.fspath(path)
        if not path:
            raise ValueError("the log path is empty")
        if ("\0" if isinstance(path, str) else b"\0") in path:
            raise ValueError(f"log path {path!r} contains a NUL character")
        # bytes: a path that is not UTF-8 is passed as it is; {rank:SPEC} expanded here
        # (the C++ recorder expands only {rank}).
        self._rank_guessed = rank_guessed and _RANK_FIELD.search(os.fsencode(path)) is not None
        path = _expand_path(os.fsencode(path), rank)
        # Problems at open and close are raised as RecorderWarning, not also printed.
        options: dict[str, Any] = {"sync_at_update": _flag(sync_at_update, "sync_at_update"),
                                   "append": _flag(append, "append"), "print_warnings": False}
        if run_id is not None:
            options["run_id"] = _utf8(str(run_id))
        if max_update_data_bytes is not None:
            options["max_update_data_bytes"] = _integer(max_update_data_bytes, "max_update_data_bytes")
            if options["max_update_data_bytes"] < 0:
                raise ValueError(f"max_update_data_bytes must be >= 0 (0: no limit), not {max_update_data_bytes}")
        options["device_timing"] = device_timing
        # With torch and a GPU, time regions on torch's current stream and device;
        # otherwise "auto" lets the recorder probe libcuda, so the config says why not.
        stream = _torch_cuda_stream() if device_timing == "auto" else None
        if stream is not None:
            options["cuda_stream"], options["cuda_device"] = stream
        self.rank = rank
        self.world_size = world_size
        config_json, options_json = json.dumps(_finite(cfg), default=str), json.dumps(options)
        try:
            # (_core.open sets self._handle itself before it returns.)
            handle, status, message = _core.open(self, path, rank, world_size, config_json, options_json)
            if status == _STATUS_ERR_STATE and any(r._handle or r._closing for r in list(_OPEN)):
                # The open one may be a Recorder whose close() an interrupt cut short (it
                # is closed now), or one no longer referenced but in a reference cycle (an
                # object that holds it and is held by it), which only the cycle collector
                # closes: a sweep or a notebook's next run recorded nothing.
                _finish_interrupted_closes()
                gc.collect()
                handle, status, message = _core.open(self, path, rank, world_size, config_json, options_json)
            self._opened(handle, status, message, path)
        except BaseException:
            # An interrupt (Ctrl-C, or a signal handler's exception) during the open (its
            # clock calibration takes ~10 ms) or right after it: the recorder it opened is
            # closed again, not left open with no owner, which would refuse every later
            # Recorder of the process as already_open.
            handle, self._handle = self._handle, 0
            if handle:
                self._close_called = True
                try:
                    _core.close(self, handle)
                except Exception:  # noqa: BLE001 - the interrupt is what is raised
                    pass
            raise

    def _init_state(self) -> None:
        # First in __init__: __del__, close() and the properties read these, also when
        # __init__ raises. Also the whole state of a copy unpickled in another process.
        self._handle = 0
        self._rank_guessed = False  # (set in __init__: the rank was taken as 0 for want of a source)
        self._pid = os.getpid()  # a fork() child holds a closed copy (docs/recorder.md)
        # Held by the calls that pass the handle to the C ABI and by close(), so that a
        # close() on another thread waits for them instead of freeing the handle under
        # them (and they never pass a closed one: the C ABI raises on handle 0).
        # Reentrant: a Python signal handler (SIGTERM on preemption: close() and exit)
        # runs on the main thread between two bytecodes of whatever call it interrupted,
        # which may hold the lock; with a plain Lock the job hung there for good.
        self._handle_lock = threading.RLock()
        self._in_call = 0  # calls in progress that hold the handle (under the lock)
        self._deferred_close = 0  # a handle close() let go of during such a call
        # The handle close() let go of until the C ABI has closed it (_core.close sets it
        # to 0): an interrupt between the two leaves it here, closed by the next close(),
        # the next Recorder(), __del__ or the exit handler instead of open with no owner.
        self._closing = 0
        # True from the start of _finish_close until the C ABI has closed the handle
        # (_core.close sets it back): a signal handler's close() in between (on this thread:
        # the lock is reentrant) must leave the close to the interrupted one, not close twice.
        self._finishing = False
        self._close_message = ""  # close()'s warning, set by _core.close, until given
        self._close_called = False
        self._errors_at_close: dict[str, int] = {}
        self._misuse: dict[str, int] = {}  # already_open, used_after_close
        self._warned_misuse = False
        self._info_at_open: dict[str, Any] = {}
        self._info_at_close: Optional[dict[str, Any]] = None
        self._regions: dict[str, Region] = {}
        self._counters: dict[str, int] = {}
        self._warned_write = False
        self._warned_value = False  # (_bad_value)

    def __copy__(self) -> "Recorder":
        # The process's recorder, not a value: a copy sharing its handle closed it when
        # the copy was dropped (and the original then raised).
        return self

    def __deepcopy__(self, memo: dict[int, Any]) -> "Recorder":
        return self

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickled into another process (a DataLoader worker started with spawn, a Dataset
        # that holds the recorder): there it records nothing, as a fork() child's copy.
        # (The lock made pickling raise TypeError into the job.)
        return (_recorder_elsewhere, (self.rank, self.world_size, self.info.get("path", "")))

    def _opened(self, handle: int, status: int, message: str, path: bytes) -> None:
        # The rest of __init__ once _core.open returned.
        if status == _STATUS_ERR_STATE:
            # Another recorder is open (not closed, still referenced): raising would stop
            # the job for its telemetry. This one records nothing and says why.
            self._misuse["already_open"] = 1
            self._info_at_open = {"path": path.decode("utf-8", "replace"), "records_written": 0, "errors": {}}
            _warn_in_loop(f"stepprof: {message}: this Recorder ({_shown(path)}) records nothing "
                          "(counted as already_open in its errors)", stacklevel=4)
            return
        self._handle = handle
        global _AT_EXIT_REGISTERED
        if not _AT_EXIT_REGISTERED:
            _AT_EXIT_REGISTERED = True
            atexit.register(_close_at_exit)
        _OPEN.add(self)
        try:
            _close_at_multiprocessing_exit()
        except Exception:  # noqa: BLE001 - only the message at a forked rank's exit is lost
            pass
        try:
            self._info_at_open = json.loads(_core.info_json(handle))
        except Exception:  # noqa: BLE001 - only info; the recorder is open
            self._info_at_open = {"path": path.decode("utf-8", "replace")}
        if status in (_STATUS_WARN_IO, _STATUS_WARN_ERRORS):
            # The recorder runs on and counts what it cannot write (or a setting it
            # ignored, STEPPROF_CLOCK naming no clock): with warnings turned into errors
            # (python -W error, pytest's filterwarnings = error) raising would stop the
            # job, or a spawned DataLoader worker that opens it again.
            _warn_in_loop(self._with_rank_hint(message), stacklevel=4)  # (at the caller of Recorder())
        elif message:
            # Opened, with a note: the log of this same run was truncated (a job resumed
            # without append=True).
            _warn_in_loop(message, stacklevel=4)

    # ---- regions ----------------------------------------------------------------------

    def region(self, name: str) -> Union[Region, _NullRegion]:
        """The context manager of region `name`: `with rec.region("forward"): ...` adds
        the block's host time (and device-stream time) and one call to the region in
        the current update, with the enclosing region as its parent. Regions nest per
        thread. The object is cached per name and may be kept and reused (it records
        into whichever recorder of the process is open). TypeError / ValueError for a
        name that is not a str or holds a NUL character. A name the recorder refuses
        (past 1,024 names, empty, over 1,024 bytes) records nothing and is counted
        (too_many_regions, bad_argument) at each call. Once closed (or made while
        another recorder was open), a context manager that does nothing (a call after
        close() is counted as used_after_close)."""
        if self._handle:
            r = self._regions.get(name) if isinstance(name, str) else None  # (a list is unhashable)
            if r is not None:
                return r
            r, recorded = _core.region(_name(name, "region"))
            # A refused name is not kept: a job making a new name per step would grow the
            # cache without bound (they are counted at each call instead).
            if recorded and len(self._regions) < _MAX_CACHED_NAMES:
                self._regions[name] = r
            return r
        _name(name, "region")
        self._usable("region")  # (counted)
        return _NULL_REGION

    def timed(self, name: Union[str, F, None] = None) -> Any:
        """Decorator: every call of the function is region `name` (default: the
        function's qualified name, else its name, else its type's name for a callable
        object): `@rec.timed("name")`, `@rec.timed()` or `@rec.timed`. A recursive function counts every call and its
        time once. On a generator or async function it times only the call that
        creates the generator or coroutine, not the work done when it is iterated or
        awaited, and warns so (RecorderWarning) when it decorates one. Inside one, a `with rec.region(...)` must not span an `await` or a
        `yield` (regions nest per thread: docs/recorder.md, "Threads"); time the code
        between two of them. Decorating with a closed recorder times nothing (as
        region())."""

        if callable(name):  # @rec.timed without parentheses: `name` is the function
            return self.timed()(name, 1)

        def decorate(fn: F, _outer: int = 0) -> F:
            default = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or type(fn).__name__
            # (It looked nearly free: the work runs when the generator is iterated or the
            # coroutine awaited, outside the region.)
            kind = ("an async generator" if inspect.isasyncgenfunction(fn) else
                    "a generator" if inspect.isgeneratorfunction(fn) else
                    "an async function" if inspect.iscoroutinefunction(fn) else None)
            if kind:
                _warn_in_loop(f"@timed on {kind} ({name or default}) times only the call that creates "
                              f"{'the coroutine' if kind == 'an async function' else 'the generator'}, not its work; "
                              f"time the code between its {'awaits' if 'async' in kind else 'yields'} with "
                              f"rec.region(...) instead", stacklevel=3 + _outer)
            region = self.region(name or default)
            # (A weak reference: a decorated function must not keep a Recorder dropped
            # without close() open, so that a later Recorder would find it open.)
            recorder = weakref.ref(self)

            @functools.wraps(fn)
            def wrapper(*args: Any, **kwargs: Any) -> Any:
                # A function decorated before close() would record into a recorder opened
                # later (the region object is the process's): once closed it only runs.
                rec = recorder()
                if rec is None or not rec._handle:
                    if rec is not None:
                        rec._misused("timed", stacklevel=4)  # (at the decorated function's call)
                    return fn(*args, **kwargs)
                with region:
                    return fn(*args, **kwargs)

            return wrapper  # type: ignore[return-value]

        return decorate

    # ---- per-update data --------------------------------------------------------------

    def count(self, name: str, n: int = 1) -> None:
        """Adds n [count] to counter `name` in the current update (thread-safe).
        n is an integer, or a float that is a whole number (mask.sum() of a float mask:
        37.0 adds 37). Raises TypeError for a str, bool or array. A negative n (counts of
        work items are >= 0), one above 2^53, or a float that is no whole number (37.5,
        NaN) is not added: counted as bad_argument, with a RecorderWarning the first time
        (_bad_value). Once closed it does nothing (counted
        as used_after_close)."""
        given = n
        if type(n) is not int or not 0 <= n <= _MAX_COUNT:  # (the common case checked at once)
            n = _count(n, "count")
        if not self._handle:
            _name(name, "counter")
            self._usable("count")  # (counted)
            return
        c = self._counters.get(name) if isinstance(name, str) else None
        if c is None:
            c, recorded = _core.counter(_name(name, "counter"))
            if recorded and len(self._counters) < _MAX_CACHED_NAMES:  # (as region())
                self._counters[name] = c
        try:
            _core.counter_add(c, n)
        except ValueError as e:  # (an unknown id cannot be: ids come from _core.counter)
            self._bad_value("count", lambda: f"count {given!r} for counter {name!r}", e, [given])

    def frame(self, frames: int, samples: int = 1) -> None:
        """Adds `samples` samples with `frames` frames each to the update's frame_histogram.
        TypeError for a str, bool or array. A value outside 0 to 2^53 (a float that is no
        whole number too: 9.0 is 9, as in count()), or `samples` above 2^32
        (no real batch; the reader rejects such a count), is not added: counted as
        bad_argument, with a RecorderWarning the first time. An add that takes the
        update's count for `frames` above 2^32 is left out and counted as a bad_argument
        error too. Adding 0 samples
        writes nothing (no bucket of 0 samples). Once closed it does nothing (counted as
        used_after_close)."""
        n, f = samples, frames
        if type(n) is not int or type(f) is not int or not 0 <= n <= _MAX_BATCH_COUNT or not 0 <= f <= _MAX_COUNT:
            n = _count(samples, "samples")  # (the common case checked at once)
            f = _count(frames, "frames")
        if self._usable("frame"):
            try:
                _core.frame_histogram_add(f, n)
            except ValueError as e:
                self._bad_value("frame", lambda: f"frame({frames!r}, samples={samples!r})", e, [frames, samples])

    def input_shape(self, shape: Sequence[int]) -> None:
        """Counts one micro-batch whose token tensor has this shape, (batch, padded_length): the
        padding analysis reads the padded length (a shape of another number of dimensions is
        written, and not used for padding; the reader warns).
        A shape of no dimensions or with one outside 0 to 2^53 is not recorded: counted as
        bad_argument, with a RecorderWarning the first time. Once closed it does nothing
        (counted as used_after_close). TypeError for a str or bytes (its characters are no
        dimensions) or a dimension that is no number (a float that is no whole number is a
        bad value: 8.0 is 8, as in count())."""
        if isinstance(shape, (str, bytes)):
            raise TypeError(f"an input shape is a sequence of integers, e.g. (8, 3154), not {type(shape).__name__} "
                            f"{shape!r}")
        shape = tuple(shape)  # (an iterator is read once: the message shows it too)
        dims = [_count(d, "input shape dimension") for d in shape]
        if self._usable("input_shape"):
            try:
                _core.input_shape(dims)
            except ValueError as e:
                self._bad_value("input_shape", lambda: f"input shape {shape!r}", e, shape)

    def sample_indices(self, indices: Iterable[int]) -> None:
        """Appends dataset indices to the update's sample_indices. With an index outside
        0 to 2^53 it records none of them: counted as bad_argument, with a RecorderWarning
        the first time (a float index that is no whole number too; 7.0 is 7, as in count()).
        TypeError for an index that is no number. Once closed it does
        nothing (counted as used_after_close)."""
        if hasattr(indices, "tolist") and not isinstance(indices, (list, tuple)):
            # A numpy array or torch tensor (a DataLoader's index batch): its elements as
            # Python ints at once, about 10x faster than converting each scalar object.
            listed = indices.tolist()
            if not isinstance(listed, list):  # (a 0-d array or tensor: one number)
                raise TypeError(f"sample indices must be a sequence of integers, not a 0-d {type(indices).__name__}")
            indices = listed
        if not isinstance(indices, (list, tuple)):
            indices = list(indices)  # (an iterator is read once: the message shows a value of it)
        checked = [_count(i, "sample index") for i in indices]
        if self._usable("sample_indices"):
            try:
                _core.sample_indices(checked)
            except ValueError as e:
                bad = next((given for given, i in zip(indices, checked) if not 0 <= i <= _MAX_COUNT), None)
                self._bad_value("sample_indices", lambda: f"sample index {bad!r}", e, [bad])

    def padding_fraction(self, fraction: float) -> None:
        """Sets the update's padding_fraction in [0, 1]; without it the recorder derives
        it from the token_slots and valid_tokens counters. With both counters recorded,
        the analyzer uses them, and a fraction more than 1e-4 from 1 - valid_tokens /
        token_slots is a bad-field warning there. Raises TypeError for a
        string or a bool (or anything float() cannot take as a number). A fraction outside
        [0, 1] or NaN (1 - mask.mean() of an empty micro-batch) is not recorded: counted as
        bad_argument, with a RecorderWarning the first time. Once closed it does nothing
        (counted as used_after_close)."""
        if isinstance(fraction, (str, bytes, bytearray, bool)):
            raise TypeError(f"padding fraction should be a number, got {type(fraction).__name__} {fraction!r}")
        try:
            f = float(fraction)
        except OverflowError:  # (an int beyond a double: a bad value, counted below)
            f = math.inf
        if self._usable("padding_fraction"):
            try:
                _core.set_padding_fraction(f)
            except ValueError as e:
                self._bad_value("padding_fraction", lambda: f"padding fraction {fraction!r}", e)

    def microbatch(
        self,
        *,
        frames: Optional[Sequence[int]] = None,
        tokens: Optional[Sequence[int]] = None,
        path: Optional[str] = None,
        padded_length: Optional[int] = None,
    ) -> None:
        """Records one micro-batch of the update's per-micro-batch detail (the log's
        `microbatches`, in call order; docs/log-schema.md): `frames[i]` and `tokens[i]`
        are sample i's frame count and valid (non-padding) token count [count], `path`
        the code-path region the micro-batch took (e.g. "vggt_batched"), `padded_length`
        the token length it was padded to (default: its longest sample's tokens).
        `stepprof whatif` uses this detail (docs/whatif.md).

            rec.microbatch(frames=[9, 9, 3, 9], tokens=[121, 98, 40, 110], path="vggt_single")

        A micro-batch with a count outside 0 to 2^53, frames and tokens of different
        lengths, or a padded length below a sample's tokens or negative is not recorded:
        counted as bad_argument, with a RecorderWarning the first time, and so is a float
        count that is no whole number (121.0 is 121, as in count()). TypeError for a
        count that is no number. Once closed it does nothing (counted as
        used_after_close)."""
        # (Read once, as lists: an iterator is used up by the first pass, and an array's
        # truth value raised below, in the training loop.)
        frames = None if frames is None else _listed(frames)
        tokens = None if tokens is None else _listed(tokens)
        f = [_count(x, "frames") for x in frames] if frames is not None else []
        t = [_count(x, "tokens") for x in tokens] if tokens is not None else []
        # (A negative padded_length is the C ABI's "its longest sample": one given here is
        # a bad value, sent as one above 2^53, which the C ABI refuses and counts.)
        pad = -1 if padded_length is None else _count(padded_length, "padded_length")
        if padded_length is not None and pad < 0:
            pad = _MAX_COUNT + 1
        p = "" if path is None else _name(path, "code path region")
        if self._usable("microbatch"):
            try:
                _core.microbatch(f, t, p, pad)
            except ValueError as e:
                self._bad_value("microbatch", lambda: f"micro-batch (frames {frames!r}, tokens {tokens!r}, "
                                f"padded_length {padded_length!r})", e,
                                [*(frames if frames is not None else ()), *(tokens if tokens is not None else ()),
                                 padded_length])

    def set_cuda_stream(self, stream: Any) -> None:
        """Times this thread's regions on `stream` (a torch.cuda.Stream or its integer
        cuda_stream address; None, a run without a GPU: does nothing). When the recorder
        cannot (device timing is off, or every device event range is taken:
        device_threads, counted), it warns (RecorderWarning) and the thread's regions keep
        host time only; it does not raise into the training loop. TypeError for a stream
        that is neither, ValueError for a negative address. Once closed it does nothing
        (counted as used_after_close)."""
        if stream is None:  # (set_cuda_stream(stream if cuda else None) raised TypeError)
            return
        address = _integer(getattr(stream, "cuda_stream", stream), "CUDA stream address")
        if address < 0:
            raise ValueError(f"CUDA stream address {address} is negative")
        if not self._usable("set_cuda_stream"):
            return
        try:
            _core.set_device_stream(address)
        except RuntimeError as e:
            _warn_in_loop(f"stepprof: regions of this thread keep host time only: {e}")

    def begin_update(self) -> None:
        """Starts the current update over (e.g. after evaluation, or after model loading
        before the loop): restarts its wall clock and drops what was recorded since the
        last end_update() (region times, counts, frames, shapes, sample indices), so that
        the next record holds only what follows. Call it outside regions: a region open
        on this thread keeps its time from before it (counted as open_at_begin_update).
        Does nothing in a fork() child, and once closed (counted as used_after_close)."""
        if not self._forked():
            self._with_handle("begin_update", _core.begin_update)

    def end_update(self, step: int) -> None:
        """Writes the record of optimizer update `step` and starts the next update.
        A record that cannot be written is counted (reported in the next record and at
        close()) and warned about once. A step not above every earlier one is written
        and counted as bad_argument; a step below 0 writes nothing (the update goes on,
        into the next record; counted as bad_argument). In a fork() child (a DataLoader worker),
        whose copy of the recorder is closed, it does nothing, as region() and count()
        do there. TypeError / ValueError for a step that is not a 64-bit integer. Once
        closed it does nothing (counted as used_after_close)."""
        step = _integer(step, "step")
        if self._forked():
            return
        status = self._with_handle("end_update", _core.end_update, step)
        if status == _STATUS_WARN_IO and not self._warned_write:
            self._warned_write = True
            _warn_in_loop(f"stepprof: the record of update {step} could not be written to {_shown(self.info['path'])}; "
                          "it is counted, as are further failures (see close())")

    # ---- lifetime -----------------------------------------------------------------------

    def flush(self) -> None:
        """Asks the OS to persist what was written (records are written whole per update).
        Does nothing in a fork() child, and once closed (counted as used_after_close)."""
        if not self._forked():
            self._with_handle("flush", _core.flush)

    @property
    def errors(self) -> dict[str, int]:
        """Errors counted since open, by kind (e.g. {"write_failed": 3}); after close(),
        those close() returned plus the calls made since ({"used_after_close": n}); for a
        Recorder made while another was open, {"already_open": 1}; in a fork() child,
        {} (the parent counts its own)."""
        if self._forked():
            return {}
        if self._handle == 0 and self._closing and self._pid == os.getpid():
            # (A close() cut short before the C ABI's: the recorder's counts so far. Not in
            # a fork() child: its copy of the lock may be held for good.)
            with self._handle_lock:
                if self._closing:
                    try:
                        out = dict(json.loads(_core.info_json(self._closing)).get("errors", {}))
                        for kind, n in self._misuse.items():
                            out[kind] = out.get(kind, 0) + n
                        return out
                    except Exception:  # noqa: BLE001 - as below
                        pass
        if self._handle == 0:
            out = dict(self._errors_at_close)
            for kind, n in self._misuse.items():
                out[kind] = out.get(kind, 0) + n
            return out
        return dict(self.info.get("errors", {}))

    @property
    def info(self) -> dict[str, Any]:
        """path, run_id, clock, device_timing, records_written and errors. After close(),
        as of close() (errors: as `errors`); for a Recorder made while another was open,
        its path, records_written 0 and its errors; in a fork() child, as of open() with
        errors {}. Never raises."""
        if self._handle != 0 and self._pid == os.getpid():
            text = self._with_handle(None, _core.info_json)
            if text is not None:
                return json.loads(text)
        out = dict(self._info_at_close if self._info_at_close is not None else self._info_at_open)
        out["errors"] = self.errors
        return out

    @property
    def closed(self) -> bool:
        """True after close(), in a fork() child (the recorder is the parent's), and for a
        Recorder made while another was open (it never opened)."""
        return self._handle == 0 or self._pid != os.getpid()

    def close(self) -> dict[str, int]:
        """Closes the recorder and returns the errors counted during the run, those
        close() itself counts included (e.g. {"unwritten_at_close": 1}; empty when none);
        warns when there were any. A Recorder made while another was open returns
        {"already_open": 1} (it warned when made). Closing twice is a no-op that returns {},
        unless an interrupt cut the first close() short: the second then finishes it, gives
        its warning and returns its errors.
        Called from a signal handler that interrupted one of this recorder's calls, it
        returns the errors counted so far, and the recorder closes as that call returns
        (what that close counts is in `errors` then, and warned about)."""
        return self._close()

    def _close(self) -> dict[str, int]:
        # close(), also for __exit__: its warning is 5 frames up (_warn_in_loop,
        # _finish_close, _close, close or __exit__), at the job's close() or `with`.
        if self._handle == 0 or self._pid != os.getpid():
            # (Not locked: a fork() child's copy of the lock may be held by a thread it
            # does not have.)
            if self._close_called:
                if self._pid == os.getpid() and not self._finishing and (self._closing or self._close_message):
                    return self._close_again()  # the first close() was interrupted
                return {}
            self._close_called = True
            if self._handle == 0:  # never opened: another recorder was open
                return dict(self._misuse)
            self._handle = 0  # a fork() child: the recorder and its log are the parent's
            return {}
        with self._handle_lock:  # (a call on another thread ends first)
            if self._close_called:
                return {}
            self._close_called = True
            # The handle is let go of before the C ABI closes it: a KeyboardInterrupt
            # raised as close() returns (it may wait up to a second for a pipe's reader)
            # leaves a closed recorder, not a half-closed one that raises. It is kept in
            # _closing (no call between the two stores, so no signal handler runs there)
            # until the C ABI has closed it.
            handle = self._handle
            self._closing, self._handle = handle, 0
            if self._in_call:
                # A signal handler on this thread (SIGTERM on preemption) interrupted a
                # call that holds the handle: that call closes it as it returns, so that
                # the handle outlives it (closed under it, it was freed memory).
                # It returns the errors counted so far (also `errors` until then): the
                # call is between two bytecodes, not inside the C ABI, so the handle can
                # still be read.
                self._deferred_close = handle
                try:
                    self._errors_at_close = dict(json.loads(_core.info_json(handle)).get("errors", {}))
                except Exception:  # noqa: BLE001 - only what to return; the close goes on
                    self._errors_at_close = {}
                return dict(self._errors_at_close)
            errors = self._finish_close(handle)
        return errors

    def _finish_close(self, handle: int, stacklevel: int = 5) -> dict[str, int]:
        # (Its warning points `stacklevel` frames up: 5 from _close, see there; a deferred
        # close, from _with_handle under the job's call, is as deep; 6 from _close_again.)
        # The C ABI's close of `handle` (already let go of), under the handle's lock; what
        # it counted is kept for `errors` and `info`, and warned about.
        # A signal handler's close() at this call's entry (a handler may run there) finished
        # the close already: nothing is left to close. (No call between the check, the
        # store and the try: no handler runs in between.)
        if self._finishing or self._closing != handle:
            return dict(self._errors_at_close)
        self._finishing = True
        try:
            try:
                self._info_at_close = json.loads(_core.info_json(handle))
            except Exception:  # noqa: BLE001 - only info; close anyway
                self._info_at_close = None
        finally:  # (closed even when an interrupt lands before it)
            # (_core.close sets _closing, _errors_at_close and _close_message itself.)
            _status, _message, errors = _core.close(self, handle)
            if self._info_at_close is not None:
                self._info_at_close["errors"] = dict(errors)
        message = self._close_message = self._with_rank_hint(self._close_message)
        if message:  # (cleared once given: an interrupt before leaves it to the next close())
            _warn_in_loop(message, stacklevel=stacklevel)
            self._close_message = ""
        return dict(errors)

    def _with_rank_hint(self, message: str) -> str:
        """`message`, and where it is a lock conflict on a {rank} path whose rank was taken
        as 0 for want of a source, why (every process of the job opened rank 0's file)."""
        if not (message and self._rank_guessed and "another process is recording to this file" in message):
            return message
        return message + (". This process's rank was taken as 0: no rank= was given, $RANK is unset, and "
                          "torch.distributed was not initialized when the Recorder was made; make it after "
                          "init_process_group(), or pass rank=")

    def _close_again(self) -> dict[str, int]:
        # close() after one an interrupt cut short: the handle it let go of is closed now
        # if it was not, and the warning it did not give is given; then it returns the
        # errors, else {} as any second close().
        with self._handle_lock:
            if self._in_call or self._finishing:  # (the interrupted call or close() closes it)
                return {}
            if self._closing:
                return self._finish_close(self._closing, stacklevel=6)
            message = self._close_message
            if not message:
                return {}
            _warn_in_loop(message, stacklevel=5)
            self._close_message = ""
            return dict(self._errors_at_close)

    def __enter__(self) -> "Recorder":
        return self

    def __exit__(self, *exc: object) -> bool:
        self._close()
        return False

    def __del__(self) -> None:
        self._close_dropped()

    def _close_dropped(self, at_exit: bool = False, how: str = "") -> None:
        # A recorder dropped without close() (or still open at interpreter exit) is closed
        # here, so that the process can open another (one is open at a time). What close()
        # counts itself (data recorded after the last end_update(), records a pipe's reader
        # never took) is in no record: it is said on stderr, as close() would warn (a
        # warning from __del__ is often lost).
        try:
            pid = os.getpid()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the module's globals are gone
            return
        if getattr(self, "_pid", None) != pid or getattr(self, "_finishing", False):
            return  # (a fork() child's copy; a close() in progress closes it)
        if not getattr(self, "_handle", 0) and not getattr(self, "_closing", 0):
            # A close() an interrupt cut short after the C ABI closed the recorder: its
            # warning, not given, is said here. (Under the lock: a close() on another
            # thread between the C ABI's close and its warning gives the warning itself.)
            if not getattr(self, "_close_message", "") or sys.stderr is None:
                return
            if not self._handle_lock.acquire(timeout=1.0):
                return
            try:
                message, self._close_message = self._close_message, ""
            finally:
                self._handle_lock.release()
            if message:
                said = message[len("stepprof: "):] if message.startswith("stepprof: ") else message
                sys.stderr.write(f"stepprof: a Recorder whose close() was interrupted: {said}\n")
            return
        # At exit a daemon thread may still be in a call with the handle: it ends first
        # (or, stuck for a second, the recorder is left to the process's end).
        if not self._handle_lock.acquire(timeout=1.0):
            return
        try:
            if (self._in_call and not self._handle) or self._finishing:  # (that call or close() closes it)
                return
            handle = self._handle or self._closing
            if self._handle and not how:
                how = "a Recorder still open at exit" if at_exit else "a Recorder dropped without close()"
            elif not how:
                how = "a Recorder whose close() was interrupted"
            self._closing, self._handle = handle, 0
            if handle:
                self._close_called = True  # (as close(): later calls are counted, and warned about)
                _core.close(self, handle)  # (sets _closing, _errors_at_close, _close_message)
                message, self._close_message = self._with_rank_hint(self._close_message), ""
                if message and sys.stderr is not None:
                    said = message[len("stepprof: "):] if message.startswith("stepprof: ") else message
                    sys.stderr.write(f"stepprof: {how}: {said}\n")
        except Exception:  # interpreter shutdown: nothing left to report to
            pass
        finally:
            self._handle_lock.release()

    def _with_handle(self, call: Optional[str], fn: Callable[..., Any], *args: Any) -> Any:
        # fn(handle, *args) while this recorder is open, under the handle's lock; None once
        # closed (or never opened), counted as used_after_close when `call` names it. Not
        # for a fork() child (the callers return before: its lock may be held for good).
        with self._handle_lock:
            handle = self._handle
            if handle:
                self._in_call += 1
                try:
                    return fn(handle, *args)
                finally:
                    self._in_call -= 1
                    if not self._in_call and self._deferred_close:
                        deferred, self._deferred_close = self._deferred_close, 0
                        self._finish_close(deferred)  # (close() from a signal handler in the call)
        if call is not None:
            self._misused(call)
        return None

    def _usable(self, call: str) -> bool:
        # The per-update calls record into whichever recorder of the process is open: once
        # this one is closed (or if it never opened) they would land in another one, so
        # they do nothing. (In a fork() child, e.g. a DataLoader worker, its copy of the
        # recorder is closed in the C++ recorder: they record nothing there either.)
        if self._handle:
            return True
        self._misused(call)
        return False

    def _misused(self, call: str, stacklevel: int = 5) -> None:
        # A call after close(): counted and warned about once, never raised (a logging
        # thread that outlives the training loop must not die of it). Before close(), a
        # Recorder that never opened (already_open) counts nothing more.
        if self._pid != os.getpid():
            if getattr(self, "_open_at_fork", False):
                _say_forked(call, self._pid, stacklevel)
            return  # (a fork() child: its copy of the lock may be held for good)
        if not self._close_called:
            return
        with _MISUSE_LOCK:  # (threads calling after close: an unlocked += lost counts)
            self._misuse["used_after_close"] = self._misuse.get("used_after_close", 0) + 1
            warn = not self._warned_misuse
            self._warned_misuse = True
        if warn:
            _warn_in_loop(f"stepprof: Recorder.{call}() after close() records nothing (counted as used_after_close "
                          "in the recorder's errors; further calls are counted without a warning)",
                          stacklevel=stacklevel)  # (5: at the caller of region(), count(), ... via _usable)

    def _bad_value(self, call: str, what: Callable[[], str], error: Exception, given: Iterable[Any] = ()) -> None:
        # A value the C ABI refused (it counted it as bad_argument, so the next record's
        # recorder_errors and close() say so): warned about once per Recorder, never
        # raised. The value may come from the data, at any step of a long run. `what`
        # describes it, called only for the warning: an int of more than 4,300 digits has
        # no repr (ValueError), which raised on every call (found by a review).
        if self._warned_value:
            return
        self._warned_value = True
        try:
            shown = what()
        except (ValueError, OverflowError, RecursionError):
            shown = "a value"
        if any(_is_float_scalar(v) and not _is_whole(float(v)) for v in given):
            error = "a float that is no whole number: not truncated"  # (the C ABI was sent _NOT_A_COUNT)
        _warn_in_loop(f"stepprof: Recorder.{call}(): {shown} is not recorded ({error}); counted as bad_argument in "
                      "the recorder's errors; further bad values are counted without a warning", stacklevel=4)

    def _forked(self) -> bool:
        # A fork() child of the process that opened this recorder: its copy is closed, and
        # its copies of the locks may be held for good (by a parent thread in a call or in
        # close() at the fork), so it takes none of them.
        return self._pid != os.getpid()


def _recorder_elsewhere(rank: int, world_size: int, path: str) -> Recorder:
    """A Recorder unpickled (in a spawned DataLoader worker, say): it records nothing,
    as a fork() child's copy (closed; errors {}), and leaves the process free to open
    its own."""
    r = Recorder.__new__(Recorder)
    r._init_state()
    # Another process's recorder, as a fork() child's copy is: _forked() is true (no pid
    # is 0), so that a close() and calls after it are silent there too (they warned
    # "after close()", an error under -W error, and counted used_after_close).
    r._pid = 0
    r.rank, r.world_size = rank, world_size
    r._info_at_open = {"path": path, "records_written": 0, "errors": {}}
    return r
