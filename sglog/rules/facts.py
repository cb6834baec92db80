"""Facts about a run that several rules share: the crash (its root cause, phase and fan-out),
CUDA-graph sizes, speculative settings, version bounds, the steady decode window.

Pure functions of a :class:`~sglog.runs.build.Run`.  Which rule explains a crash is
not decided here: each crash rule claims it (sglog/rules/ownership.py).
"""

from __future__ import annotations

import math
import operator
import re
from dataclasses import dataclass
from typing import Any

import polars as pl

from sglog.schema import STARTUP_EVENT_KINDS as STARTUP_EVENT_KINDS  # (the startup lines, for the rules)

STARTUP_PHASES = ("distributed_init", "weight_load", "kv_pool", "cuda_graph_capture", "draft_weight_load", "draft_kv_pool", "draft_cuda_graph_capture", "warmup", "launch")
CAPTURE_PHASES = ("cuda_graph_capture", "draft_cuda_graph_capture")
DRAFT_PHASES = ("draft_weight_load", "draft_kv_pool", "draft_cuda_graph_capture")
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN", "MTP")


def frame_functions(e) -> list[str]:
    return [str(f.get("function") or "") for f in (e.get("frames") or [])]


def frame_files(e) -> list[str]:
    return [str(f.get("file") or "") for f in (e.get("frames") or [])]


def is_oom(e) -> bool:
    return e.kind in ("oom", "batch_oom") or "out_of_memory" in (e.get("signatures") or ())


def in_capture_frames(e) -> bool:
    fns = frame_functions(e)
    files = frame_files(e)
    return any("cuda_graph_runner" in f or "graph_runner" in f for f in files) or any(fn in ("capture", "capture_one_batch_size", "init_cuda_graphs", "init_device_graphs") for fn in fns)


# -------------------------------------------------------------- crash


@dataclass(frozen=True)
class Crash:
    """The root cause of a crash, where it happened and what followed from it."""

    event: Any  # the root-cause Event
    phase: str | None  # startup phase (or "serving") the crash happened in
    truncated: bool  # the traceback's exception line is missing
    fanout: tuple = ()  # what followed from it: SIGQUIT, "child failed", dead ranks, the same error on other ranks
    signatures: tuple[str, ...] = ()  # failure classes its words name (sglog/read/signatures.py), with the lines just before it
    causes: tuple[str, ...] = ()  # the part that failed (signatures.CAUSES: a kernel, backend or layer), with the lines just before it


def crash(run) -> Crash | None:
    """The crash of a run (None if it did not crash), with its root cause (once per run)."""
    return run.memo("root_cause", _crash)


def _crash(run) -> Crash | None:
    """The crash of a run (None if it did not crash), with its root cause.

    A run crashed when `run.ending` says so (sglog/runs/build.py decides it: crash
    lines, or an SGLang error after which the server neither became ready nor
    served).  A foreign traceback that names no exception is not the cause: the
    run's first SGLang error is."""
    from sglog.runs.build import crash_errors, is_sglang_error

    ending = run.ending
    if ending is None or ending.status != "crashed":
        return None
    rc = ending.root_cause
    if rc is None or (rc.kind == "traceback" and not is_sglang_error(rc) and not rc.get("exc_type")):
        rc = next(iter(crash_errors(run)), None)
    if rc is None:
        return None
    phase = crash_phase(run, rc)
    truncated = rc.kind in ("traceback", "scheduler_exception", "oom") and not rc.get("exc_type")
    return Crash(rc, phase, truncated, fanout_of(run, rc), crash_signatures(run, rc), crash_causes(run, rc))


CONTEXT_LINES = 5  # lines above an error whose words count as its own (a HIP/HSA abort line, a NCCL WARN)


def crash_signatures(run, rc) -> tuple[str, ...]:
    """The signatures of the root cause and of the error lines just above it (sglog/read/signatures.py)."""
    return tuple(dict.fromkeys(s for e in _with_context(run, rc) for s in e.get("signatures") or ()))


def crash_causes(run, rc) -> tuple[str, ...]:
    """The causes (``signatures.CAUSES``) of the root cause and of the error lines just above it."""
    return tuple(dict.fromkeys(c for e in _with_context(run, rc) for c in event_causes(e)))


def event_causes(e) -> list[str]:
    """An event's causes, as the reader named them (an error block's, a third-party or unparsed line's)."""
    return list(e.get("causes") or ())


def _with_context(run, rc) -> list:
    return [rc] + [e for e in run.events_between(rc.file, rc.line - CONTEXT_LINES, rc.line) if e is not rc and e.kind not in ("blank", "http_access", "progress", "python_warning")]


FANOUT_KINDS = ("sigquit", "sigquit_handler", "scheduler_dead", "process_killed")


def fanout_of(run, rc) -> tuple:
    """The consequences of the root cause `rc`: the SIGQUIT / "child failed" / "scheduler is dead"
    lines after it, and the same exception type on the other ranks."""
    after = (rc.file, rc.line)
    out = [e for e in run.events_of(*FANOUT_KINDS) if (e.file, e.line) > after]
    t = rc.get("exc_type")
    if t:
        from sglog.runs.build import ERROR_KINDS

        label = rc.rank.label if rc.rank else None
        out += [e for e in run.events_of(*ERROR_KINDS) if e is not rc and e.get("exc_type") == t and (e.rank.label if e.rank else None) != label]
    out.sort(key=lambda e: (e.file, e.line))
    return tuple(out)


def is_spec_auto(run) -> bool:
    """Speculative decoding with an auto-chosen --mem-fraction-static (the draft model is not budgeted)."""
    return is_spec(run) and run.origin("mem_fraction_static") != "explicit"


def not_enough_memory(c: Crash) -> bool:
    """SGLang's own "not enough memory for the KV cache" startup check failed."""
    return bool(c.event.get("not_enough_memory")) or "kv_memory_insufficient" in c.signatures


def oom_crash(c: Crash) -> bool:
    """A complete out-of-memory error (its exception line is in the log)."""
    return not c.truncated and is_oom(c.event)


def in_capture(run, c: Crash) -> bool:
    """Did the crash happen inside CUDA-graph capture (the phase its rank was in, the message, the frames)?"""
    rc = c.event
    return (c.phase in CAPTURE_PHASES and _rank_began(run, rc, c.phase)) or capture_named(c) or in_capture_frames(rc)


def capture_named(c: Crash) -> bool:
    """The error itself says a CUDA-graph capture failed (SGLang's wrapper message)."""
    return bool(c.event.get("capture_failed")) or "capture_failed" in c.signatures


def last_before(run, kind: str, rc):
    """The last `kind` event before `rc`, on `rc`'s rank (events without a rank count for any)."""
    label = rc.rank.label if rc.rank else None
    found = None
    for e in run.events_of(kind):
        if (label is None or e.rank is None or e.rank.label == label) and (e.file, e.line) < (rc.file, rc.line):
            found = e
    return found


def crash_phase(run, rc) -> str | None:
    """The phase the crash happened in: the ending's when `rc` is its root cause (sglog/runs/build.py decides it)."""
    from sglog.runs.build import crash_phase as phase_of

    if run.ending is not None and run.ending.status == "crashed" and run.ending.root_cause is rc:
        return run.ending.phase
    return phase_of(run, rc, run.ending.phase if run.ending else None)


def _rank_began(run, rc, phase: str | None) -> bool:
    """Had the error's rank begun this phase?  (Another rank's progress does not count; a phase the
    log never shows beginning, only inferred as the step after the last one, has not begun.)"""
    if run.startup is None:
        return True
    ph = run.startup.phases.get(phase or "")
    if ph is None:
        return False
    if rc.rank is None:
        return True
    labelled = [label for label in ph.per_rank if label != "-"]
    return rc.rank.label in ph.per_rank or not labelled


# -------------------------------------------------------------- arguments and settings


def arg(run, name: str, default: Any = None) -> Any:
    v = run.args.get(name, default)
    return default if v is None else v


def field_of(events: list, name: str) -> list:
    """Each event's field ``name`` (None where it has none), picked out in C: rules read one field
    of tens of thousands of retractions or GC lines."""
    return list(map(operator.methodcaller("get", name), map(operator.attrgetter("fields"), events)))


def num(x: Any) -> float | None:
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, (int, float)):
        return float(x) if math.isfinite(float(x)) else None
    return None


def stat(x: object) -> float | None:
    """A polars aggregate of a numeric column (``Series.median/max/min/mean/quantile``), typed as a
    number: polars types it as any Python literal. Returned as it is (an int stays an int), None
    for an empty or all-null column; anything else is not a number and raises TypeError."""
    if x is None or isinstance(x, (int, float)):
        return x
    raise TypeError(f"not a numeric aggregate: {type(x).__name__}")


def value(x: object) -> float:
    """:func:`stat` of an aggregate that must be there: a None raises TypeError, as ``float(None)`` does."""
    if isinstance(x, (int, float)):
        return x
    raise TypeError(f"not a numeric aggregate: {type(x).__name__}")


def tp_size(run) -> int:
    v = run.args.get("tp_size")
    if isinstance(v, int) and not isinstance(v, bool):
        return v
    return run.parallelism.get("tp", 1)


def is_spec(run) -> bool:
    algo = run.args.get("speculative_algorithm")
    return bool(algo) and str(algo).upper() not in ("NONE", "")


def spec_algo(run) -> str | None:
    algo = run.args.get("speculative_algorithm")
    return str(algo).upper() if algo else None


def spec_steps(run) -> tuple[int | None, int | None, int | None]:
    def i(v):
        return v if isinstance(v, int) and not isinstance(v, bool) else None

    return i(run.args.get("speculative_num_steps")), i(run.args.get("speculative_eagle_topk")), i(run.args.get("speculative_num_draft_tokens"))


def version_bounds(run) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
    """(lowest, highest) SGLang version the log's formats allow; None where unknown."""
    v = run.version
    if not v or v == "mixed":
        return None, None

    def parse(s: str) -> tuple[int, ...] | None:
        nums = re.findall(r"\d+", s.split("post")[0])
        return tuple(int(x) for x in nums[:3]) if nums else None

    if v.startswith(">="):
        return parse(v[2:]), None
    if v.startswith("<="):
        return None, parse(v[2:])
    if "-" in v:
        a, b = v.split("-", 1)
        return parse(a), parse(b)
    p = parse(v)
    return p, p


def at_least(run, version: tuple[int, ...]) -> bool | None:
    lo, hi = version_bounds(run)
    if lo is not None and lo >= version:
        return True
    if hi is not None and hi < version:
        return False
    return None


# -------------------------------------------------------------- CUDA graphs


def captured_bs(run) -> list[int]:
    """Batch sizes of the target's decode CUDA graphs, as far as the log tells."""
    for e in run.events_of("cuda_graph_bs"):
        if isinstance(e.get("bs"), list):
            return _ints(e.get("bs"))
    for e in run.events_of("cuda_graph_capture_begin", "cuda_graph_capture_end"):
        if e.get("role", "target") == "target" and e.get("stage", "decode") in ("decode", "verify") and isinstance(e.get("bs"), list):
            return _ints(e.get("bs"))
    v = run.args.get("cuda_graph_bs")
    if isinstance(v, list) and v:
        return _ints(v)
    return []


def _ints(xs) -> list[int]:
    return sorted({int(x) for x in xs if isinstance(x, (int, float)) and not isinstance(x, bool)})


def max_graph_bs(run) -> int | None:
    v = run.args.get("cuda_graph_max_bs")
    if isinstance(v, int) and not isinstance(v, bool) and v > 0:
        return v
    bs = captured_bs(run)
    return max(bs) if bs else None


def graphs_disabled(run) -> bool:
    """--disable-cuda-graph (or a disabled decode graph backend) in the args, or the warning it
    prints (0.4.5.post3's "CUDA Graph is DISABLED." banner: an excerpt may lack the args)."""
    return run.args.get("disable_cuda_graph") is True or run.args.get("cuda_graph_backend_decode") == "disabled" or cuda_graph_banner(run) is not None


def cuda_graph_banner(run):
    """The "CUDA Graph is DISABLED." warning (a feature_disabled event), if the run has one."""
    return next((e for e in run.events_of("feature_disabled") if e.get("feature") == "cuda_graph"), None)


def round_up_capture(n: float, sizes: list[int] | None = None) -> int:
    """The smallest captured size >= n, or SGLang's default grid (8-step to 256, 16-step above)."""
    if sizes:
        above = [s for s in sizes if s >= n]
        if above:
            return min(above)
    n = max(1, math.ceil(n))
    if n <= 8:
        return 1 << (n - 1).bit_length()
    step = 8 if n <= 256 else 16
    return int(math.ceil(n / step) * step)


# -------------------------------------------------------------- decode window


def decode_rows(run) -> pl.DataFrame:
    """Decode rows with a `steady` column (after warm-up, requests running)."""
    from sglog import timeline

    return timeline.decode_frame(run)


def steady(run) -> pl.DataFrame:
    """Steady-state decode rows (all decode rows when none is steady); once per run."""
    from sglog import timeline

    return timeline.steady_rows(run)


def present(frame: pl.DataFrame, *cols: str) -> pl.DataFrame:
    """The rows where these columns are not null (the frame itself when none is: no copy of
    millions of rows for nothing)."""
    if not any(frame.get_column(c).null_count() for c in cols):
        return frame
    return frame.filter(pl.all_horizontal([pl.col(c).is_not_null() for c in cols]))


def col(frame: pl.DataFrame, name: str) -> pl.Series | None:
    if frame.height == 0 or name not in frame.columns:
        return None
    s = frame.get_column(name).drop_nulls()
    return s if s.len() else None


def usage_col(frame: pl.DataFrame) -> str | None:
    for c in ("token_usage", "full_token_usage"):
        if c in frame.columns and frame.get_column(c).drop_nulls().len():
            return c
    return None


def rows(frame: pl.DataFrame, limit: int | None = None) -> list[dict[str, Any]]:
    f = frame if limit is None else frame.head(limit)
    keep = [
        c
        for c in f.columns
        if c in ("file", "line", "ts", "running_req", "queue_req", "token_usage", "full_token_usage", "gen_throughput", "accept_len", "accept_rate", "cuda_graph", "kind", "new_token", "rank")
    ]
    return f.select(keep).to_dicts()


def line_span(frame: pl.DataFrame) -> str:
    if frame.height == 0 or "line" not in frame.columns:
        return ""
    lines = frame.get_column("line")
    return f"lines {stat(lines.min())}-{stat(lines.max())}"


def batches_before(run, file: str, line: int, n: int) -> tuple[list[dict[str, Any]], dict[str, int]]:
    """(the last ``n`` batch rows logged before ``line`` of ``file``, in line order; how many rows
    of each kind came before it), without copying the rows before it (millions in a long run).
    A one-file run's frame is kind by kind (parse.ParsedLog.batches): each kind's rows are looked
    at on their own; a run of several files is in time order: the file's latest lines are taken."""
    b = run.batches
    if not b.height or "line" not in b.columns:
        return [], {}
    blocks = run.kind_blocks
    rows: list[dict[str, Any]] = []
    counts: dict[str, int] = {}
    for kind, frame in blocks.items() if blocks is not None else [(None, b)]:
        mask = frame.get_column("line") < line
        if "file" in frame.columns:
            mask = mask & (frame.get_column("file") == file)
        idx = mask.arg_true()
        if not idx.len():
            continue
        if kind is not None:  # (a kind's rows are in line order)
            counts[kind] = idx.len()
            last = idx.tail(n)
        else:  # (a run of several files is in time order: the latest lines of this file)
            if "kind" in frame.columns:
                counts = dict(frame.get_column("kind").gather(idx).value_counts().iter_rows())
            last = idx.gather(frame.get_column("line").gather(idx).arg_sort(descending=True).head(n))
        rows += frame[last].to_dicts()
    rows.sort(key=operator.itemgetter("line"))
    return rows[-n:], counts


def serving_minutes(run) -> float | None:
    b = run.batches
    if b.height == 0 or "ts" not in b.columns:
        return None
    ts = b.get_column("ts").drop_nulls()
    if ts.len() < 2:
        return None
    return (ts.max() - ts.min()).total_seconds() / 60.0


def server_args_event(run):
    return run.first("server_args")


# -------------------------------------------------------------- where a startup stopped


def last_startup_phase(run):
    """(phase the log stops in, the event that began it): the run's own reading (sglog/runs)."""
    from sglog.runs.build import stop_phase  # (lazily: a command that lists rules loads no parser)

    return stop_phase(run)
