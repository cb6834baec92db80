"""Events -> runs: one run per server launch, ranks (and node files) merged.

A file can hold several launches (a crash and a restart), and one launch can
span several files (one per node).  ``build_runs`` splits each parsed file at
launch boundaries and merges runs of different files that are the same launch
(same arguments apart from node identity, overlapping in time).

Each run knows its arguments (and which were explicit or auto-chosen), model,
version as far as the format tells, parallelism, speculative settings, startup
phases per rank, memory budget, how it ended, and its batch/access frames.
"""

from __future__ import annotations

import bisect
import operator
import re
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from typing import Any

import polars as pl

from sglog.events import RANK_AXES, Event, Rank
from sglog.read import args as sargs
from sglog.read import fastpath
from sglog.read.parse import ParsedLog, parse_file
from sglog.schema import ENVELOPE_COLUMNS, FORWARD_PHASES, NEXT_PHASE, PHASE_WORDS, STARTUP_EVENT_KINDS

# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class RankPhase:
    start: datetime | None
    end: datetime | None

    @property
    def duration(self) -> float | None:
        if self.start is None or self.end is None:
            return None
        d = (self.end - self.start).total_seconds()
        return d if d >= 0 else None  # (a clock that went backwards: no duration, #28)


@dataclass(frozen=True)
class Phase:
    """One startup phase across ranks.  ``duration`` is the slowest rank's (the servers wait for it)."""

    name: str
    per_rank: dict[str, RankPhase] = field(default_factory=dict)
    elapsed_logged: dict[str, float] = field(default_factory=dict)  # `elapsed=` printed by SGLang, per rank

    @property
    def start(self) -> datetime | None:
        xs = [p.start for p in self.per_rank.values() if p.start]
        return min(xs) if xs else None

    @property
    def end(self) -> datetime | None:
        xs = [p.end for p in self.per_rank.values() if p.end]
        return max(xs) if xs else None

    @property
    def complete(self) -> bool:
        return bool(self.per_rank) and all(p.end is not None for p in self.per_rank.values())

    def _durations(self) -> dict[str, float]:
        out = {}
        for r, p in self.per_rank.items():
            d = p.duration
            if self.elapsed_logged.get(r) is not None and (d is None or d < self.elapsed_logged[r]):
                d = self.elapsed_logged[r]  # second-resolution timestamps under-count short phases
            if d is not None:
                out[r] = d
        return out

    @property
    def duration(self) -> float | None:
        d = self._durations()
        return max(d.values()) if d else None

    @property
    def slowest_rank(self) -> str | None:
        d = self._durations()
        return max(d, key=lambda rank: d[rank]) if d else None

    @property
    def skew(self) -> float | None:
        """Spread of the ranks' durations (slowest - fastest), seconds."""
        d = self._durations()
        return (max(d.values()) - min(d.values())) if len(d) > 1 else (0.0 if d else None)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "start": _iso(self.start),
            "end": _iso(self.end),
            "duration_s": _r(self.duration),
            "slowest_rank": self.slowest_rank,
            "skew_s": _r(self.skew),
            "complete": self.complete,
            "ranks": {r: {"start": _iso(p.start), "end": _iso(p.end), "duration_s": _r(p.duration)} for r, p in sorted(self.per_rank.items(), key=lambda kv: _rank_key(kv[0]))},
        }


PHASES = (
    "distributed_init",
    "weight_load",
    "kv_pool",
    "cuda_graph_capture",
    "draft_weight_load",
    "draft_kv_pool",
    "draft_cuda_graph_capture",
)


@dataclass(frozen=True)
class Startup:
    launch: datetime | None
    ready: datetime | None
    phases: dict[str, Phase]

    @property
    def total_s(self) -> float | None:
        if self.launch and self.ready:
            d = (self.ready - self.launch).total_seconds()
            return d if d >= 0 else None  # (timestamps going backwards: never a negative startup time, #28)
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "launch": _iso(self.launch),
            "ready": _iso(self.ready),
            "total_s": _r(self.total_s),
            "phases": [self.phases[p].to_dict() for p in PHASES if p in self.phases],
        }


@dataclass(frozen=True)
class MemoryBudget:
    """Per-rank GPU memory budget (GB); the summary is the minimum across ranks for
    free memory and the maximum for what was used.  ``None`` = not in the log."""

    total_gb: float | None = None  # T: free memory when weights start loading (SGLang budgets against it)
    target_weights_gb: float | None = None
    avail_after_weights_gb: float | None = None
    draft_weights_gb: float | None = None
    kv_gb: float | None = None
    kv_tokens: int | None = None
    draft_kv_gb: float | None = None
    draft_kv_tokens: int | None = None
    cuda_graph_gb: float | None = None
    draft_cuda_graph_gb: float | None = None
    available_gpu_mem_gb: float | None = None  # F: free after everything (the tuning number)
    mem_fraction_static: float | None = None
    mem_fraction_static_origin: str | None = None  # explicit | auto | default
    max_total_num_tokens: int | None = None
    context_len: int | None = None
    max_running_requests: int | None = None
    chunked_prefill_size: int | None = None
    per_rank: dict[str, dict[str, float | None]] = field(default_factory=dict)

    @property
    def weight_share(self) -> float | None:
        """(T - avail after weights) / T: share of the budget used before the KV pool is sized."""
        if self.total_gb and self.avail_after_weights_gb is not None:
            return (self.total_gb - self.avail_after_weights_gb) / self.total_gb
        return None

    @property
    def bytes_per_kv_token(self) -> float | None:
        if self.kv_gb and self.kv_tokens:
            return self.kv_gb * 2**30 / self.kv_tokens
        return None

    @property
    def static_pool_gb(self) -> float | None:
        if self.total_gb and self.mem_fraction_static is not None:
            return self.total_gb * self.mem_fraction_static
        return None

    def to_dict(self) -> dict[str, Any]:
        keys = [
            "total_gb",
            "target_weights_gb",
            "avail_after_weights_gb",
            "draft_weights_gb",
            "kv_gb",
            "kv_tokens",
            "draft_kv_gb",
            "draft_kv_tokens",
            "cuda_graph_gb",
            "draft_cuda_graph_gb",
            "available_gpu_mem_gb",
            "mem_fraction_static",
            "mem_fraction_static_origin",
            "max_total_num_tokens",
            "context_len",
            "max_running_requests",
            "chunked_prefill_size",
        ]
        out = {k: _r(getattr(self, k), 4) for k in keys}
        out["weight_share"] = _r(self.weight_share, 4)
        out["bytes_per_kv_token"] = _r(self.bytes_per_kv_token, 1)
        out["static_pool_gb"] = _r(self.static_pool_gb, 4)
        out["per_rank"] = {r: {k: _r(v, 4) for k, v in d.items()} for r, d in sorted(self.per_rank.items(), key=lambda kv: _rank_key(kv[0]))}
        return out


@dataclass(frozen=True)
class Ending:
    status: str  # serving | ready | crashed | stopped | incomplete
    phase: str | None  # the phase the log ends in / the run crashed in
    root_cause: Event | None = None
    last_ts: datetime | None = None

    def cause(self) -> str:
        """The root cause in a few words: `Type: first line of the message` (the line whole: data is
        never cut; a terminal renderer cuts it with an ellipsis)."""
        rc = self.root_cause
        if rc is None:
            return "unknown cause"
        if not rc.get("exc_type") and rc.kind in ("traceback", "scheduler_exception"):
            return "the exception line is not in the log"
        coll = rc.get("collective") or {}
        if coll.get("timeout") and not rc.get("exc_type"):
            op = str(coll.get("op_type") or "").strip("_")
            return "collective timeout" + (f": {op}" if op else "") + (f" SeqNum {coll['seq_num']}" if coll.get("seq_num") is not None else "")
        msg = (rc.get("exc_message") or "").strip().splitlines()
        return f"{rc.get('exc_type') or rc.kind}" + (f": {msg[0]}" if msg else "")

    def describe(self) -> str:
        if self.status == "crashed":
            return f"crashed during {PHASE_WORDS.get(self.phase or 'startup', self.phase)} ({self.cause()})"
        if self.status == "serving":
            return "ready and serving"
        if self.status == "ready":
            return "ready"
        if self.status == "stopped":
            return "stopped (shutdown)"
        return f"log ends during {PHASE_WORDS.get(self.phase or 'launch', self.phase)}"

    def to_dict(self) -> dict[str, Any]:
        rc = self.root_cause
        return {
            "status": self.status,
            "phase": self.phase,
            "description": self.describe(),
            "root_cause": None if rc is None else {"kind": rc.kind, "file": rc.file, "line": rc.line, "exc_type": rc.get("exc_type"), "exc_message": rc.get("exc_message")},
            "last_ts": _iso(self.last_ts),
        }


@dataclass(frozen=True)
class Run:
    """One server launch.  Frozen: a built run does not change (``with_facts`` gives a new one).

    Its one piece of state is ``_memo``, a private dict of the facts derived from it (frames, stats),
    filled once per key by ``memo``; it is not a field of the run's value (not compared, not shown).
    """

    index: int
    files: list[str]
    line_ranges: dict[str, tuple[int, int]]
    events: list[Event]
    batches: pl.DataFrame
    access: pl.DataFrame
    args: dict[str, Any] = field(default_factory=dict)
    arg_origins: dict[str, str] = field(default_factory=dict)
    launch_command: str | None = None
    version: str | None = None
    ranks: list[str] = field(default_factory=list)
    startup: Startup | None = None
    memory: MemoryBudget = field(default_factory=MemoryBudget)
    ending: Ending | None = None
    index_in_file: int = 1
    label: str = ""  # the run's name, given by build_runs (``run_names``); see ``name``
    # derived facts computed once per run (a run does not change once built): see ``memo``
    _memo: dict[str, Any] = field(default_factory=dict, init=False, repr=False, compare=False)

    def memo(self, key: str, compute):
        """``compute(self)``, computed once per run: rules ask for the same frames and facts many times."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute(self)
            return value

    def with_facts(self, **facts: Any) -> Run:
        """This run with ``facts`` set, as a new run that keeps the memo: what was derived so far
        comes from the same events and frames (``build_runs`` adds a run's facts one by one)."""
        new = replace(self, **facts)
        object.__setattr__(new, "_memo", self._memo)  # (the one assignment on a frozen run, made before anyone sees it)
        return new

    # -- identity / descriptions
    @property
    def name(self) -> str:
        """The name an operator knows the run by, the same in every command and format (``run_names``):
        ``server.log``, ``server.log#2`` when the file holds several launches, ``node0.log + 1 more``."""
        if self.label:
            return self.label
        return run_names([[(f, self.index_in_file) for f in self.files]], {f: self.index_in_file for f in self.files})[0]

    @property
    def model(self) -> str | None:
        m = self.args.get("model_path")
        if m:
            return str(m)
        return self.model_class

    @property
    def model_class(self) -> str | None:
        for e in self.events_of("weight_load_end"):
            if e.get("type"):
                return str(e.get("type"))
        return None

    @property
    def parallelism(self) -> dict[str, int]:
        out = {}
        for axis, key in (("tp", "tp_size"), ("dp", "dp_size"), ("pp", "pp_size"), ("ep", "ep_size"), ("nnodes", "nnodes")):
            v = self.args.get(key)
            if isinstance(v, int):
                out[axis] = v
        if "tp" not in out:
            parsed = [Rank.parse(r) for r in self.ranks]
            tps = {rk.tp for rk in parsed if rk is not None and rk.tp is not None}
            if tps:
                out["tp"] = max(tps) + 1
        return out

    @property
    def spec(self) -> dict[str, Any] | None:
        algo = self.args.get("speculative_algorithm")
        if not algo:
            if self.batches.height and "accept_len" in self.batches.columns and self.batches.get_column("accept_len").drop_nulls().len():
                return {"algorithm": "unknown (accept len in decode lines)"}
            return None
        return {
            "algorithm": algo,
            "draft_model_path": self.args.get("speculative_draft_model_path"),
            "num_steps": self.args.get("speculative_num_steps"),
            "eagle_topk": self.args.get("speculative_eagle_topk"),
            "num_draft_tokens": self.args.get("speculative_num_draft_tokens"),
        }

    def origin(self, field: str) -> str | None:
        return self.arg_origins.get(field)

    @property
    def by_kind(self) -> dict[str, list[int]]:
        """Where each kind's events are in ``events`` (positions, ascending); once per run.  A
        multi-hour log has tens of thousands of events, and most questions are about a few kinds."""
        return self.memo("by_kind", lambda run: kind_positions(run.events))

    def events_of(self, *kinds: str) -> list[Event]:
        """The events of these kinds, in ``events`` order."""
        index, events = self.by_kind, self.events
        if len(kinds) == 1:
            return [events[i] for i in index.get(kinds[0], ())]
        return [events[i] for i in sorted(i for k in set(kinds) for i in index.get(k, ()))]

    def first(self, kind: str) -> Event | None:
        at = self.by_kind.get(kind)
        return self.events[at[0]] if at else None

    def events_between(self, file: str, lo: int, hi: int) -> list[Event]:
        """The events of ``file`` that start on lines ``lo`` to ``hi - 1``, in ``events`` order.  A
        one-file run's events are in line order (checked once, in C): a bisection, not a walk
        through all of them."""
        events = self.events
        line = operator.attrgetter("line")
        if len(self.files) == 1 and self.files[0] == file and self.memo("line_order", lambda run: _ascending(list(map(line, run.events)))):
            return events[bisect.bisect_left(events, lo, key=line) : bisect.bisect_left(events, hi, key=line)]
        return [e for e in events if e.file == file and lo <= e.line < hi]

    def lowered_texts(self) -> dict[str, str]:
        """kind -> the texts of its events joined by newlines, lower-cased; once per run.  The
        screens for rare words use it (``mentions``, the KV-transfer rule): a scan in C of a
        kind's texts instead of a walk through tens of thousands of events.  Kind by kind, so that
        one non-ASCII line (a tqdm bar) makes only its own kind's text wide (a wide copy of all the
        texts, ~7 MB for 1M lines, cost twice as much)."""

        def compute(run: Run) -> dict[str, str]:
            text, events = operator.attrgetter("text"), run.events
            return {kind: "\n".join(filter(None, map(text, map(events.__getitem__, at)))).lower() for kind, at in run.by_kind.items()}

        return self.memo("lowered_texts", compute)

    def mentions(self, needle: str) -> bool:
        """Might some event's text contain ``needle``?  A screen for a rule that looks for a rare
        line among tens of thousands of events before it walks them: true when one does, and
        also when one holds a case variant of it (the texts are searched lower-cased)."""
        if not needle.isascii():  # (lower-casing may change non-ASCII text around it: no screen)
            return any(needle in t for t in map(operator.attrgetter("text"), self.events) if t)
        low = needle.lower()
        return any(low in blob for blob in self.lowered_texts().values())

    def has(self, *kinds: str) -> bool:
        """Is there an event of any of these kinds?"""
        index = self.by_kind
        return any(k in index for k in kinds)

    @property
    def decode(self) -> pl.DataFrame:
        """The decode rows of the batch frame (without the columns null in all of them); once per run."""
        return self.memo("decode", lambda run: _rows_of(run.batches, "decode_batch", run.kind_blocks))

    @property
    def prefill(self) -> pl.DataFrame:
        """The prefill rows of the batch frame (without the columns null in all of them); once per run."""
        return self.memo("prefill", lambda run: _rows_of(run.batches, "prefill_batch", run.kind_blocks))

    @property
    def kind_blocks(self) -> dict[str, pl.DataFrame] | None:
        """The batch frame's rows of each kind, as slices of it (``fastpath.kind_blocks``); None when
        the frame is not kind by kind (a run of several files is in time order); once per run."""
        return self.memo("kind_blocks", lambda run: fastpath.kind_blocks(run.batches))

    def count(self, kind: str) -> int:
        """How many rows of this kind the batch frame has (without copying them)."""
        if self.batches.height == 0 or "kind" not in self.batches.columns:
            return 0
        return self.memo(f"count:{kind}", lambda run: int(run.batches.select((pl.col("kind") == kind).sum()).item()))


def _ascending(xs: list) -> bool:
    return all(map(operator.le, xs, xs[1:]))


def kind_positions(events: list[Event]) -> dict[str, list[int]]:
    """kind -> the positions of its events in ``events`` (ascending)."""
    index: dict[str, list[int]] = {}
    for i, e in enumerate(events):
        at = index.get(e.kind)
        if at is None:
            index[e.kind] = [i]
        else:
            at.append(i)
    return index


def _rows_of(batches: pl.DataFrame, kind: str, blocks: dict[str, pl.DataFrame] | None) -> pl.DataFrame:
    """Rows of one kind, without the columns that are null in all of them (prefill fields in decode
    rows, unused rank axes): a multi-hour log has millions of rows.  A slice of a frame that is
    kind by kind (a one-file run); a copy of the others' rows, with ``kind`` a constant."""
    if batches.height == 0 or "kind" not in batches.columns:
        return batches
    # (null in all of them: the rank axes are in the `rank` label, the date flag is for the roll-over
    # of date-less times, done before)
    wanted = [c for c in batches.columns if c != "kind" and not (c in ENVELOPE_COLUMNS and c != "ts_has_date") and c not in RANK_AXES]
    if blocks is not None and kind in blocks:  # (kind by kind, as parse_file makes it: the kind's rows are a slice)
        block = blocks[kind]
        nulls = block.select(wanted).null_count().row(0, named=True) if wanted else {}
        return block.select(_kept(block.columns, wanted, {c for c in wanted if nulls[c] == block.height}))
    mine = batches.get_column("kind") == kind
    # (only columns with some nulls and some values need a look)
    nulls = batches.select(wanted).null_count().row(0, named=True) if wanted else {}
    mixed = [c for c in wanted if 0 < nulls[c] < batches.height]
    # (whether a column has a value in these rows, from the masks: only the columns kept are then copied, once)
    present = batches.select([(pl.lit(mine) & pl.col(c).is_not_null()).any().alias(c) for c in mixed]).row(0, named=True) if mixed else {}
    keep = _kept(batches.columns, wanted, {c for c in wanted if nulls[c] == batches.height} | {c for c in mixed if not present[c]})
    rows = batches.select([c for c in keep if c != "kind"]).filter(mine)
    return rows.with_columns(pl.lit(kind).alias("kind")).select(keep)


def _kept(columns: list[str], fields: list[str], empty: set[str]) -> list[str]:
    """The columns of a kind's rows: kind, the envelope but the date flag, and the fields (the
    date flag among them) with a value; no rank axis."""
    return [c for c in columns if c == "kind" or (c in ENVELOPE_COLUMNS and c != "ts_has_date") or (c in fields and c not in empty)]


def jsonable(v):
    """A value of the args dump as plain JSON data (unknown objects as strings)."""
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {str(k): jsonable(x) for k, x in v.items()}
    return str(v)


def _iso(ts: datetime | None) -> str | None:
    return ts.isoformat(sep=" ") if ts else None


def _r(x, nd: int = 2):
    if isinstance(x, float):
        return round(x, nd)
    return x


def _rank_key(label: str):
    r = Rank.parse(label)
    if r is None:
        return (99, label)
    return tuple(-1 if getattr(r, a) is None else getattr(r, a) for a in ("dp", "pp", "tp", "ep"))


# ------------------------------------------------------------------ splitting

_CRASH_KINDS = {"sigquit", "scheduler_exception", "oom", "fatal_error", "cpp_exception", "scheduler_dead"}
# the startup phases' kinds (also the ones that tell a run has begun starting up)
_STARTUP_KINDS = frozenset({"init_dist_begin", "init_dist_end", "weight_load_begin", "weight_load_end", "memory_pool_end", "cuda_graph_capture_begin", "cuda_graph_capture_end"})


class _Splitter:
    """The state ``_split_points`` walks through, one event at a time (``step``)."""

    # the kinds that move the state; an event of any other kind only ends a pending command line
    MOVING = frozenset({"comment", "blank", "launch_command", "server_args", "init_dist_begin", "weight_load_begin", "server_ready", *_CRASH_KINDS, *_STARTUP_KINDS})

    def __init__(self) -> None:
        self.starts = [1]
        self.seen_args = False
        self.seen_startup = False
        self.ended = False  # ready or crashed
        self.pending_command: int | None = None
        self.ranks_loaded: set[str] = set()

    def step(self, e: Event) -> None:
        k = e.kind
        if k in ("comment", "blank"):
            return
        if k == "launch_command":
            if self.seen_args or self.seen_startup or self.pending_command is None:
                self.pending_command = e.line
            return
        new = False
        if k == "server_args":
            new = self.seen_args or self.seen_startup
        elif k in ("init_dist_begin", "weight_load_begin") and self.ended:
            new = k == "init_dist_begin" or (e.rank.label if e.rank else "") in self.ranks_loaded
        if new:
            pending = self.pending_command
            self.starts.append(pending if pending and pending > self.starts[-1] else e.line)
            self.seen_args = self.seen_startup = self.ended = False
            self.ranks_loaded = set()
        self.pending_command = None
        if k == "server_args":
            self.seen_args = True
        if k in _STARTUP_KINDS:
            self.seen_startup = True
        if k == "weight_load_begin":
            self.ranks_loaded.add(e.rank.label if e.rank else "")
        if k in ("server_ready", "sigquit", "scheduler_dead") or (k in _CRASH_KINDS and self.seen_startup):
            self.ended = True


def _split_points(log: ParsedLog, index: dict[str, list[int]] | None = None) -> list[int]:
    """First line of each run in one file (``index``: ``kind_positions(log.events)``, if known).

    Only the events of the kinds that move the splitter are stepped through; a gap between their
    positions stands for the other events, each of which would only end a pending command line.
    """
    events = log.events
    if index is None:
        index = kind_positions(events)
    sp = _Splitter()
    prev = -1
    for i in sorted(i for k in _Splitter.MOVING for i in index.get(k, ())):
        if i != prev + 1:
            sp.pending_command = None
        prev = i
        sp.step(events[i])
    return sorted(set(sp.starts))


def _slice_frame(frame: pl.DataFrame, blocks: dict[str, pl.DataFrame] | None, lo: int, hi: int, file: str) -> pl.DataFrame:
    """The rows of lines ``lo`` to ``hi``: zero-copy slices of each kind's block (``blocks``, the
    frame's ``fastpath.kind_blocks``: the frames of parse_file are kind by kind, each kind's rows
    in line order; millions of rows)."""
    if frame.height == 0:
        return frame
    if blocks is not None:
        parts = []
        for block in blocks.values():
            line = block.get_column("line")
            start, stop = line.search_sorted(lo, "left"), line.search_sorted(hi, "right")
            parts.append(block.slice(start, stop - start))
        part = fastpath.concat_frames(parts) if any(p.height for p in parts) else frame.clear()
    else:
        part = frame.filter((pl.col("line") >= lo) & (pl.col("line") <= hi))
    return part.with_columns(pl.lit(file).alias("file"))


@dataclass
class _Piece:
    file: str
    lo: int
    hi: int
    events: list[Event]
    batches: pl.DataFrame
    access: pl.DataFrame
    index_in_file: int
    by_kind: dict[str, list[int]] | None = None  # kind_positions(events), when known


def _pieces(log: ParsedLog) -> list[_Piece]:
    index = kind_positions(log.events)
    starts = _split_points(log, index)
    bounds = list(zip(starts, [s - 1 for s in starts[1:]] + [max(log.lines, 1)]))
    out = []
    line = operator.attrgetter("line")
    # (each frame's kind blocks found once for all its pieces: a restart-heavy file has many)
    frames = [(f, fastpath.kind_blocks(f)) for f in (log.batches, log.access)]
    for i, (lo, hi) in enumerate(bounds, 1):
        # (the events are in line order: a piece's are a slice of them)
        evs = log.events[bisect.bisect_left(log.events, lo, key=line) : bisect.bisect_right(log.events, hi, key=line)]
        whole = len(evs) == len(log.events)  # (then the same list: the file's index is the piece's)
        batches, access = (_slice_frame(f, blocks, lo, hi, log.path) for f, blocks in frames)
        out.append(_Piece(log.path, lo, hi, evs, batches, access, i, index if whole else None))
    return out


# ------------------------------------------------------------------ naming


def run_names(runs: list[list[tuple[str, int]]], launches: dict[str, int]) -> list[str]:
    """Each run's name, from its files and which launch of each it is (``[(path, N), ...]``), and
    how many launches each file holds (``launches``).

    A run is named after its file, without the directory (stdin is ``stdin``); ``#N`` follows
    only when the file holds several launches (the ``FILE#N`` that ``sglog diff`` takes); a
    launch over several files (one per node or rank) is named after the first of them in
    natural order (node2 before node10), with how many more.  Files of one name in different
    directories keep as much of their directory as tells them apart.  The names do not
    depend on the order the files were given in.

    >>> run_names([[("logs/server.log", 1)]], {"logs/server.log": 1})
    ['server.log']
    >>> run_names([[("a.log", 1)], [("a.log", 2)]], {"a.log": 2})
    ['a.log#1', 'a.log#2']
    >>> run_names([[("n/node10.log", 1), ("n/node2.log", 1)]], {"n/node10.log": 1, "n/node2.log": 1})
    ['node2.log + 1 more']
    >>> run_names([[("x/server.log", 1)], [("y/server.log", 1)], [("-", 1)]], {"x/server.log": 1, "y/server.log": 1, "-": 1})
    ['x/server.log', 'y/server.log', 'stdin']
    """
    shown = _shown_paths(list(dict.fromkeys(f for run in runs for f, _ in run)))
    names = []
    for run in runs:
        index = dict(run)
        first = min(index, key=lambda f: (_natural(shown[f]), f))
        name = shown[first] + (f"#{index[first]}" if launches.get(first, 1) > 1 else "")
        if len(index) > 1:
            name += f" + {len(index) - 1} more"
        names.append(name)
    return names


def _shown_paths(paths: list[str]) -> dict[str, str]:
    """Each path as shown in a run's name: its file name, with the fewest trailing directories
    that tell it from another path of the same file name."""
    from pathlib import PurePath

    parts = {p: ("stdin",) if p == "-" else (PurePath(p).parts or (p,)) for p in paths}
    depth = dict.fromkeys(paths, 1)
    while True:
        shown = {p: "/".join(parts[p][-depth[p] :]) for p in paths}
        alike: dict[str, list[str]] = {}
        for p, s in shown.items():
            alike.setdefault(s, []).append(p)
        deeper = [p for group in alike.values() if len(group) > 1 for p in group if depth[p] < len(parts[p])]
        if not deeper:
            return {p: s if len(alike[s]) == 1 else p for p, s in shown.items()}  # (the same parts: the path as given)
        for p in deeper:
            depth[p] += 1


def _natural(name: str) -> tuple:
    """A sort key that orders the numbers in names by value (``node2`` before ``node10``)."""
    return tuple((0, int(t), "") if t.isdigit() else (1, 0, t) for t in re.split(r"(\d+)", name) if t)


# ------------------------------------------------------------------ building


def _node_free(args: dict[str, Any]) -> dict[str, Any]:
    drop = {"node_rank", "host", "dist_init_addr", "port", "base_gpu_id", "random_seed", "nccl_port", "log_requests_target"}
    return {k: v for k, v in args.items() if k not in drop}


def _time_span(p: _Piece) -> tuple[datetime | None, datetime | None]:
    ts = [e.ts for e in p.events if e.ts is not None and e.ts_has_date]
    if p.batches.height and "ts" in p.batches.columns:
        b = p.batches.get_column("ts").drop_nulls()
        if b.len():
            ts += [t for t in (b.min(), b.max()) if isinstance(t, datetime)]
    return (min(ts), max(ts)) if ts else (None, None)


def _args_of(events: list[Event]) -> dict[str, Any]:
    for e in events:
        if e.kind == "server_args":
            return dict(e.get("args") or {})
    return {}


def build_runs(logs: list[ParsedLog]) -> list[Run]:
    pieces: list[_Piece] = []
    for log in logs:
        pieces.extend(_pieces(log))
    # merge pieces from different files that are the same launch
    groups: list[list[_Piece]] = []
    for p in pieces:
        pa = _node_free(_args_of(p.events))
        placed = False
        if pa:
            span: tuple[datetime | None, datetime | None] | None = None  # (p's time span, when a group is a candidate: a pass over its events)
            for g in groups:
                if any(q.file == p.file for q in g):
                    continue
                ga = _node_free(_args_of(g[0].events))
                if ga != pa:
                    continue
                ps, pe = span = span or _time_span(p)
                gs, ge = _time_span(g[0])
                if ps and pe and gs and ge and (ps <= ge + timedelta(minutes=5)) and (gs <= pe + timedelta(minutes=5)):
                    g.append(p)
                    placed = True
                    break
        if not placed:
            groups.append([p])
    launches: dict[str, int] = {}
    for p in pieces:
        launches[p.file] = launches.get(p.file, 0) + 1
    names = run_names([[(p.file, p.index_in_file) for p in g] for g in groups], launches)
    return [_make_run(i, g, name) for i, (g, name) in enumerate(zip(groups, names), 1)]


def _make_run(index: int, group: list[_Piece], name: str = "") -> Run:
    events: list[Event] = []
    for p in group:
        events.extend(p.events)
    if len(group) > 1:
        events.sort(key=lambda e: (e.ts or datetime.min, e.file, e.line))
    frames_b = [p.batches for p in group if p.batches.height]
    frames_a = [p.access for p in group if p.access.height]
    batches = pl.concat(frames_b, how="diagonal_relaxed") if frames_b else pl.DataFrame()
    access = pl.concat(frames_a, how="diagonal_relaxed") if frames_a else pl.DataFrame()
    _roll_dateless(events, batches)
    if batches.height and "ts" in batches.columns:
        batches = _roll_frame(batches)
    if len(group) > 1 and batches.height and "ts" in batches.columns:
        # (time order; rows of one second in file and line order: a file's frame is kind by kind,
        # and a prefill line before a decode line of the same second stays before it)
        batches = _files_in_order(batches, "ts")
    args = _args_of(events)
    command = next((e.get("command") for e in events if e.kind == "launch_command"), None)
    run = Run(
        index=index,
        files=list(dict.fromkeys(p.file for p in group)),
        line_ranges={p.file: (p.lo, p.hi) for p in group},
        events=events,
        batches=batches,
        access=access,
        args=args,
        arg_origins=sargs.origins(args, command) if args else {},
        launch_command=command,
        index_in_file=group[0].index_in_file,
        label=name,
    )
    if len(group) == 1 and group[0].by_kind is not None:
        run.memo("by_kind", lambda _run: group[0].by_kind)  # (the file's index: the same events)
    # each fact is read from the run with the facts before it (the ending reads the startup ...)
    run = run.with_facts(ranks=_ranks(run))
    run = run.with_facts(version=guess_version(run))
    run = run.with_facts(startup=_startup(run))
    run = run.with_facts(memory=_memory(run))
    return run.with_facts(ending=_ending(run))


def _ranks(run: Run) -> list[str]:
    labels = set(map(operator.attrgetter("rank.label"), filter(operator.attrgetter("rank"), run.events)))  # (in C: tens of thousands of events)
    if run.batches.height and "rank" in run.batches.columns:
        labels |= {r for r in run.batches.get_column("rank").unique().to_list() if r}
    return sorted(labels, key=_rank_key)


def _roll_dateless(events: list[Event], batches: pl.DataFrame) -> None:
    """Date-less timestamps (<=0.3.3): add a day each time the clock goes backwards by > 1 h."""
    day = 0
    prev = None
    for e in events:
        if e.ts is None or e.ts_has_date:
            continue
        t = e.ts + timedelta(days=day)
        if prev is not None and t < prev - timedelta(hours=1):
            day += 1
            t = e.ts + timedelta(days=day)
        e.ts = t
        prev = t


def _files_in_order(frame: pl.DataFrame, *first: str) -> pl.DataFrame:
    """Rows sorted by ``first`` (nulls last), then by file in the order the files come in, then by line."""
    at = pl.col("_at").min().over("file")
    return frame.with_row_index("_at").sort([*first, at, "line"], nulls_last=True).drop("_at")


def _roll_frame(frame: pl.DataFrame) -> pl.DataFrame:
    if "ts_has_date" not in frame.columns or frame.get_column("ts_has_date").all():
        return frame
    # (in line order: a file's frame is kind by kind; several files one after the other)
    frame = frame.sort("line") if frame.get_column("file").n_unique() <= 1 else _files_in_order(frame)
    back = (pl.col("ts").diff() < pl.duration(hours=-1)).fill_null(False).cast(pl.Int64).cum_sum()
    return frame.with_columns(pl.when(pl.col("ts_has_date")).then(pl.col("ts")).otherwise(pl.col("ts") + pl.duration(days=1) * back).alias("ts"))


# ------------------------------------------------------------------ version


Release = tuple[int, int, int]
Bounds = tuple[Release | None, Release | None]  # (the lowest, the highest release a format admits; None: no bound)
_NO_LOWER, _NO_UPPER = (0, 2, 15), (9, 9, 99)
# batch-line fields that exist only from, or only up to, a release
_BATCH_CLUES: tuple[tuple[str, Release | None, Release | None], ...] = (
    ("accept_rate", (0, 5, 3), None),
    ("pending_token", (0, 5, 11), None),
    ("cache_hit_rate", None, (0, 4, 2)),
)


def guess_version(run: Run) -> str | None:
    """The SGLang version (or range) as far as the log's formats tell: pip's line, else the
    releases that every format seen admits (the bounds only narrow: their order does not matter)."""
    for e in run.events_of("pip_package"):
        if e.get("package") == "sglang":
            return str(e.get("version"))
    bounds = [_event_bounds(e) for e in run.events_of("server_args", "weight_load_end", "init_dist_end", "init_dist_begin", "cuda_graph_capture_end")]
    bounds += _run_bounds(run)
    lo = max([_NO_LOWER, *(b[0] for b in bounds if b[0] is not None)])
    hi = min([_NO_UPPER, *(b[1] for b in bounds if b[1] is not None)])
    return _version_range(lo, hi)


def _event_bounds(e: Event) -> Bounds:
    """The releases a startup line's format admits."""
    k = e.kind
    if k == "server_args":
        return ((0, 5, 19), None) if e.get("style") == "dict" else (None, (0, 5, 18))
    if k == "weight_load_end":
        if "elapsed" in e.fields and "dtype" in e.fields:
            return (0, 5, 9), (0, 5, 9)
        if "elapsed" in e.fields:
            return (0, 5, 10), None
        if "mem_usage" in e.fields:
            return (0, 4, 3), (0, 5, 8)
        return None, (0, 4, 2)
    if k == "init_dist_end":
        if "elapsed" in e.fields:
            return (0, 5, 9), None
        if e.text and "Init parallel" in e.text:
            return (0, 5, 21), None
        return (0, 4, 3), (0, 5, 8)
    if k == "init_dist_begin" and "Init nccl" in (e.text or ""):
        return None, (0, 3, 3)
    if k == "cuda_graph_capture_end":
        if "Time elapsed" in (e.text or ""):
            return None, (0, 5, 13)
        if "elapsed=" in (e.text or ""):
            return (0, 5, 14), None
    return None, None


def _run_bounds(run: Run) -> list[Bounds]:
    """The releases the run's other formats admit: times of day without dates on ranked lines
    (up to 0.3.3), batch-line fields (_BATCH_CLUES)."""
    out: list[Bounds] = []
    dateless = not all(map(operator.attrgetter("ts_has_date"), run.events))  # (in C; the full test only when some are)
    if dateless and any(e.ts is not None and not e.ts_has_date and e.rank is not None for e in run.events):
        out.append((None, (0, 3, 3)))
    b = run.batches
    if b.height:
        out += [(lo, hi) for col, lo, hi in _BATCH_CLUES if col in b.columns and b.get_column(col).drop_nulls().len()]
    return out


def _version_range(lo: Release, hi: Release) -> str | None:
    """``0.5.9``, ``>=0.5.10``, ``<=0.4.2``, ``0.4.3-0.5.8``, ``mixed`` (formats of releases
    that exclude each other), or None (nothing tells)."""
    if lo == _NO_LOWER and hi == _NO_UPPER:
        return None
    fmt = ".".join
    if lo == hi:
        return fmt(map(str, lo))
    if hi == _NO_UPPER:
        return f">={fmt(map(str, lo))}"
    if lo == _NO_LOWER:
        return f"<={fmt(map(str, hi))}"
    if lo > hi:
        return "mixed"
    return f"{fmt(map(str, lo))}-{fmt(map(str, hi))}"


# ------------------------------------------------------------------ startup


def _startup(run: Run) -> Startup:
    # Read as mutable [start, end] spans per phase and rank; frozen into Phase / RankPhase at the end.
    spans: dict[str, dict[str, list[datetime | None]]] = {name: {} for name in PHASES}
    elapsed: dict[str, dict[str, float]] = {name: {} for name in PHASES}
    load_no = load_numbers(run)
    pools: dict[str, int] = {}
    for e in run.events_of(*_STARTUP_KINDS):
        k = e.kind
        r = e.rank.label if e.rank else "-"
        if k == "init_dist_begin":
            spans["distributed_init"].setdefault(r, [e.ts, None])
        elif k == "init_dist_end":
            rp = spans["distributed_init"].setdefault(r, [None, None])
            if rp[1] is None:  # a draft worker inits again later: keep the target's
                rp[1] = e.ts
                if e.get("elapsed") is not None:
                    elapsed["distributed_init"][r] = e.get("elapsed")
        elif k == "weight_load_begin":
            name = "weight_load" if load_no[id(e)] == 1 else "draft_weight_load"
            under_way = spans[name].get(r)
            if under_way is not None and r == "-" and under_way[1] is None:
                continue  # (lines without rank tags: another rank's begin of the same load; it runs from the first begin)
            spans[name][r] = [e.ts, None]
        elif k == "weight_load_end":
            name = "weight_load" if load_no[id(e)] == 1 else "draft_weight_load"
            if _is_draft_class(e.get("type")):
                name = "draft_weight_load"
            rp = spans[name].setdefault(r, [None, None])
            rp[1] = e.ts  # (without rank tags, the last rank's end)
            if e.get("elapsed") is not None:
                elapsed[name][r] = e.get("elapsed")
            kv = "kv_pool" if name == "weight_load" else "draft_kv_pool"
            spans[kv].setdefault(r, [e.ts, None])
        elif k == "memory_pool_end":
            pools[r] = pools.get(r, 0) + 1
            name = "kv_pool" if pools[r] == 1 else "draft_kv_pool"  # the target's pool is set up first (DFLASH loads its draft earlier)
            rp = spans[name].setdefault(r, [None, None])
            rp[1] = e.ts
        elif k == "cuda_graph_capture_begin":
            name = "draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture"
            begun = spans[name].get(r)
            if begun is None:
                spans[name][r] = [e.ts, None]
            else:
                begun[1] = None  # a further capture stage (verify, extend, prefill) of the same phase
        elif k == "cuda_graph_capture_end":
            name = "draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture"
            rp = spans[name].setdefault(r, [None, None])
            rp[1] = e.ts
    phases = {name: Phase(name, {r: RankPhase(*span) for r, span in spans[name].items()}, elapsed[name]) for name in PHASES if spans[name]}
    launch = next((e.ts for e in run.events if e.ts is not None), None)
    ready_line = run.first("server_ready")
    ready = ready_line.ts if ready_line else None
    return Startup(launch=launch, ready=ready, phases=phases)


def _is_draft_class(name: Any) -> bool:
    s = str(name or "")
    return any(x in s for x in ("Eagle", "EAGLE", "NextN", "MTP", "Draft", "DFlash", "DFLASH"))


# ------------------------------------------------------------------ memory


_MEMORY_KINDS = frozenset({"weight_load_begin", "weight_load_end", "kv_cache_allocated", "memory_pool_end", "cuda_graph_capture_end", "memory_summary"})


def load_numbers(run: Run) -> dict[int, int]:
    """Which weight load each ``weight_load_begin`` / ``weight_load_end`` line is in, by ``id``:
    1 for the target model's, 2 and up for a draft model's (loaded after it, on the same rank).

    Lines without rank tags are every rank's at once: a begin while a load is under way there
    (begun more often than ended) is another rank's begin of the same load, and so is an end; a
    begin once every begun load ended is the next load."""
    out: dict[int, int] = {}
    count: dict[str, int] = {}
    under_way = 0  # loads begun and not ended, on untagged lines
    for e in run.events_of("weight_load_begin", "weight_load_end"):
        r = e.rank.label if e.rank else "-"
        if e.kind == "weight_load_begin":
            if r != "-" or under_way == 0:
                count[r] = count.get(r, 0) + 1
            if r == "-":
                under_way += 1
            out[id(e)] = count[r]
        else:
            out[id(e)] = max(count.get(r, 1), 1)
            if r == "-":
                under_way = max(under_way - 1, 0)
    return out


def _memory(run: Run) -> MemoryBudget:
    per: dict[str, dict[str, float | None]] = {}
    load_no = load_numbers(run)
    pools: dict[str, int] = {}
    for e in run.events_of(*_MEMORY_KINDS):
        k = e.kind
        r = e.rank.label if e.rank else "-"
        d = per.setdefault(r, {})
        if k == "weight_load_begin":
            if load_no[id(e)] == 1:
                d.setdefault("total_gb", e.get("avail_mem"))
        elif k == "weight_load_end":
            draft = load_no[id(e)] > 1 or _is_draft_class(e.get("type"))
            if draft:
                d.setdefault("draft_weights_gb", e.get("mem_usage"))
            else:
                d.setdefault("target_weights_gb", e.get("mem_usage"))
                d.setdefault("avail_after_weights_gb", e.get("avail_mem"))
        elif k == "kv_cache_allocated":
            size = e.get("kv_size")
            if size is None and e.get("k_size") is not None:
                size = (e.get("k_size") or 0) + (e.get("v_size") or 0)
            draft = pools.get(r, 0) >= 1  # KV lines after the first `Memory pool end` belong to the draft
            key, tkey = ("draft_kv_gb", "draft_kv_tokens") if draft else ("kv_gb", "kv_tokens")
            if size is not None:
                d[key] = (d.get(key) or 0) + size
            if e.get("tokens") is not None and d.get(tkey) is None:
                d[tkey] = e.get("tokens")
        elif k == "memory_pool_end":
            pools[r] = pools.get(r, 0) + 1
        elif k == "cuda_graph_capture_end":
            key = "draft_cuda_graph_gb" if e.get("role") == "draft" else "cuda_graph_gb"
            if e.get("mem_usage") is not None:
                d[key] = (d.get(key) or 0) + e.get("mem_usage")
        elif k == "memory_summary":
            for f in ("available_gpu_mem", "max_total_num_tokens", "context_len", "max_running_requests", "chunked_prefill_size"):
                if e.get(f) is not None:
                    d["available_gpu_mem_gb" if f == "available_gpu_mem" else f] = e.get(f)
    per = {r: d for r, d in per.items() if d}

    def agg(key, fn):
        vals = [d[key] for d in per.values() if d.get(key) is not None]
        return fn(vals) if vals else None

    values: dict[str, Any] = {}
    for key in ("total_gb", "avail_after_weights_gb", "available_gpu_mem_gb", "kv_gb", "kv_tokens", "draft_kv_gb", "draft_kv_tokens", "max_total_num_tokens"):
        values[key] = agg(key, min)
    for key in ("target_weights_gb", "draft_weights_gb", "cuda_graph_gb", "draft_cuda_graph_gb", "context_len", "max_running_requests", "chunked_prefill_size"):
        values[key] = agg(key, max)
    mfs = run.args.get("mem_fraction_static")
    values["mem_fraction_static"] = float(mfs) if isinstance(mfs, (int, float)) and not isinstance(mfs, bool) else None
    values["mem_fraction_static_origin"] = run.arg_origins.get("mem_fraction_static")
    for key, arg in (("context_len", "context_length"), ("max_running_requests", "max_running_requests"), ("chunked_prefill_size", "chunked_prefill_size")):
        if values[key] is None and isinstance(run.args.get(arg), int):
            values[key] = run.args.get(arg)
    return MemoryBudget(per_rank=per, **values)


# ------------------------------------------------------------------ ending


ROOT_CAUSE_KINDS = ("oom", "scheduler_exception", "traceback", "fatal_error", "cpp_exception", "watchdog_timeout", "batch_oom")


def root_cause(events: list[Event]) -> Event | None:
    """The first real error of a crash (not the fan-out of sigquit / child-failed lines)."""
    errs = [e for e in events if e.kind in ROOT_CAUSE_KINDS]
    # tracebacks of the logging module or of the launcher's wait loop are consequences
    useful = [e for e in errs if not (e.kind == "traceback" and (e.get("component") == "logging" or e.get("exc_type") in ("EOFError", "KeyboardInterrupt", "BrokenPipeError")))]
    errs = useful or errs
    if not errs:
        return None
    if len({x.file for x in errs}) > 1:
        return min(errs, key=lambda e: (e.ts or datetime.max, e.line))
    return min(errs, key=lambda e: e.line)


def _ending(run: Run) -> Ending:
    kinds = set(run.by_kind)
    last_ts = max(filter(None, map(operator.attrgetter("ts"), run.events)), default=None)  # (in C: tens of thousands of events)
    sigterm = next((e for e in run.events_of("shutdown") if e.get("variant") == "sigterm" or "SIGTERM received" in e.text), None)
    if run.batches.height and "ts" in run.batches.columns:
        bt = run.batches.get_column("ts").drop_nulls()
        if bt.len():
            last_ts = max(filter(None, [last_ts, bt.max()]))
    phase = _current_phase(run)
    crashed = bool(kinds & {"sigquit", "scheduler_dead", "fatal_error", "cpp_exception", "process_killed", "scheduler_exception", "oom"})
    ready = "server_ready" in kinds
    if crashed and sigterm is not None:
        # a requested shutdown: children exiting with -15 and the SIGQUIT cleanup that follows are not a crash
        errors_before = [e for e in run.events_of("scheduler_exception", "oom", "fatal_error", "cpp_exception") if e.line < sigterm.line and e.file == sigterm.file]
        if not errors_before:
            return Ending("stopped", "serving" if ready else phase, None, last_ts)
    if crashed:
        rc = root_cause(run.events_of(*ROOT_CAUSE_KINDS))
        return Ending("crashed", crash_phase(run, rc, phase) if rc is not None else ("serving" if ready else phase), rc, last_ts)
    # an SGLang error after which the server neither became ready nor served: the log was cut right after it
    rc = next(iter(crash_errors(run)), None)
    if rc is not None and not _served_after(run, rc):
        return Ending("crashed", crash_phase(run, rc, phase), rc, last_ts)
    if "shutdown" in kinds:
        return Ending("stopped", "serving" if ready else phase, None, last_ts)
    if ready:
        return Ending("serving" if run.count("decode_batch") or run.count("prefill_batch") else "ready", "serving", None, last_ts)
    # no ready line: a log of serving lines only (an excerpt) is still serving
    if run.batches.height and not (run.startup is not None and run.startup.phases) and not run.has("memory_summary"):
        return Ending("serving", "serving", None, last_ts)
    if run.batches.height:
        # a startup, then batches, and no ready line: SGLang's warm-up request alone (one short prefill)
        # means the log ends in warm-up; more traffic means it served (the ready line is not in the excerpt)
        warmup_only = run.count("decode_batch") == 0 and run.count("prefill_batch") <= WARMUP_PREFILLS
        return Ending("incomplete", "warmup", None, last_ts) if warmup_only else Ending("serving", "serving", None, last_ts)
    return Ending("incomplete", phase, None, last_ts)


WARMUP_PREFILLS = 1  # launch_server's warm-up: one short /generate before it logs that it is ready


def crash_phase(run: Run, rc: Event, timeline: str | None = None) -> str | None:
    """The phase a crash happened in, in one place (the ending, the findings and the fix say the same).

    The error's own frames say it best (``phase``, sglog/read/frames.py: a crash in
    init_attention_backend is not in CUDA-graph capture, whatever another rank was doing); a forward
    pass after the server was ready, or after batches were logged, is serving; else the last step
    the error's rank began (the timeline), else the timeline's current phase."""
    ready = next(iter(run.events_of("server_ready")), None)
    served = (ready is not None and (ready.file, ready.line) < (rc.file, rc.line)) or _served_before(run, rc)
    framed = rc.get("phase")
    if framed in FORWARD_PHASES or framed is None:
        if served:
            return "serving"
        if framed is not None and timeline == "warmup":
            return "warmup"
    began = _rank_phase(run, rc)
    if framed is not None:
        if began == f"draft_{framed}":
            return began  # the frames do not tell the draft model's step from the target's
        return framed
    return began or ("serving" if served else timeline)


def _rank_phase(run: Run, rc: Event) -> str | None:
    """The last startup step that began before the error, on the error's rank (any rank's when the error has none)."""
    if run.startup is None:
        return None
    label = rc.rank.label if rc.rank else None
    began = [n for n in PHASES if n in run.startup.phases and (label is None or label in run.startup.phases[n].per_rank or set(run.startup.phases[n].per_rank) <= {"-"})]
    return began[-1] if began else None


def _served_before(run: Run, e: Event) -> bool:
    """Were batches logged before this event (in its file)?"""
    b = run.batches
    if not b.height or "line" not in b.columns:
        return False
    mask = pl.col("line") < e.line
    if "file" in b.columns:
        mask = mask & (pl.col("file") == e.file)
    return bool(b.select(mask.any()).item())


ERROR_KINDS = ("oom", "scheduler_exception", "traceback", "fatal_error", "cpp_exception")
_CONSEQUENCE_EXCEPTIONS = ("EOFError", "KeyboardInterrupt", "BrokenPipeError")


def crash_errors(run: Run) -> list[Event]:
    """The run's errors that can be the root cause of a crash, in log order: not the logging module's
    tracebacks, not the launcher's EOFError / KeyboardInterrupt, not a foreign traceback that names
    no exception; and c10d's watchdog lines that report a collective timeout (torch then takes the
    process down, whether or not the log shows the abort)."""
    out = []
    for e in run.events_of(*ERROR_KINDS):
        if e.kind == "traceback":
            if e.get("component") == "logging" or e.get("exc_type") in _CONSEQUENCE_EXCEPTIONS:
                continue
            if not is_sglang_error(e) and not e.get("exc_type"):
                continue
        out.append(e)
    timeouts = [e for e in run.events_of("torch_log") if (e.get("collective") or {}).get("timeout")]
    if timeouts:
        out = sorted(out + timeouts[:1], key=lambda e: (e.file, e.line))
    return out


def is_sglang_error(e: Event) -> bool:
    """An error raised in SGLang's code (a component preface or an SGLang frame)."""
    return bool(e.get("component")) or any("sglang" in str(f.get("file") or "") for f in (e.get("frames") or []))


def _served_after(run: Run, e: Event) -> bool:
    """Did the server become ready or log batches after this event (in its file)?"""
    if any(r.file == e.file and r.line > e.line for r in run.events_of("server_ready")):
        return True
    b = run.batches
    if b.height and "line" in b.columns and "file" in b.columns:
        return bool(b.select(((pl.col("file") == e.file) & (pl.col("line") > e.line)).any()).item())  # (a count, no copy)
    return False


def stop_phase(run: Run) -> tuple[str | None, Event | None]:
    """(the phase the log stops in, the event that began it), from the order of the startup lines.

    The phase of the latest begin line; if every rank that began it finished it afterwards, the
    step after it (nothing of that step logged yet).  A ``memory_summary`` line means the model
    runner is set up (its pool and graphs): warm-up.  (None, None) without startup lines."""
    began: dict[str, set[str]] = {}
    ended: dict[str, set[str]] = {}
    first: dict[str, Event] = {}
    loads: dict[str, int] = {}  # rank -> the load its lines are in (1: the target's)
    load_no = load_numbers(run)
    current = None
    for e in run.events_of(*STARTUP_EVENT_KINDS):
        r = e.rank.label if e.rank else "-"
        k = e.kind
        ph = None
        end = False
        if k == "init_dist_begin":
            ph = "distributed_init"
        elif k == "init_dist_end":
            ph, end = "distributed_init", True
        elif k == "weight_load_begin":
            loads[r] = load_no[id(e)]
            ph = "weight_load" if loads[r] == 1 else "draft_weight_load"
        elif k == "weight_load_end":
            loads[r] = load_no[id(e)]
            ph, end = ("weight_load" if loads[r] == 1 else "draft_weight_load"), True
        elif k == "kv_cache_allocated":
            ph = "kv_pool" if loads.get(r, 1) <= 1 else "draft_kv_pool"
        elif k == "memory_pool_end":
            ph, end = ("kv_pool" if loads.get(r, 1) <= 1 else "draft_kv_pool"), True
        elif k in ("cuda_graph_capture_begin", "cuda_graph_bs"):
            ph = "draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture"
        elif k == "cuda_graph_capture_end":
            ph, end = ("draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture"), True
        elif k == "memory_summary":
            ph = "warmup"
        if ph is None:
            continue
        if end:
            ended.setdefault(ph, set()).add(r)
            began.setdefault(ph, set())
        else:
            began.setdefault(ph, set()).add(r)
            ended.get(ph, set()).discard(r)  # (a further stage of the phase on this rank)
            first.setdefault(ph, e)
            current = ph
        if current is None:
            current = ph
    if current is None:
        return None, None
    if current != "warmup" and began.get(current) and began[current] <= ended.get(current, set()):
        return NEXT_PHASE.get(current, "warmup"), first.get(current)
    return current, first.get(current)


def _current_phase(run: Run) -> str | None:
    """The last startup phase that began (and did not finish), or 'launch'."""
    if run.startup is None or not run.startup.phases:
        return "launch" if not run.has("server_ready") else "serving"
    began = [name for name in PHASES if run.startup.phases.get(name) is not None]
    starts = [run.startup.phases[name].start for name in began]
    if all(t is not None for t in starts):
        # in the order they began (DFLASH loads its draft model and pool before the target's capture)
        began = [name for _t, _i, name in sorted((t, i, name) for i, (t, name) in enumerate(zip(starts, began)))]
    last = None
    for i, name in enumerate(began):
        last = name
        # a phase is over on a rank when it ended there, or when that rank began a later one (old
        # releases log no end of distributed init); the first phase some rank is still in is current
        later = set().union(*(run.startup.phases[n].per_rank for n in began[i + 1 :]))
        if any(p.end is None and (r not in later and "-" not in later) for r, p in run.startup.phases[name].per_rank.items()):
            return name
    if last and not run.has("server_ready"):
        # no rank is still in a phase it began: the order of the startup lines tells the step the
        # log stops in (a summary line after the pool's end, a capture stage after the graphs' end)
        return stop_phase(run)[0] or NEXT_PHASE.get(last, last)
    return "serving"


# ------------------------------------------------------------------ API


def load_runs(paths: list[str], **parse_kw) -> list[Run]:
    """Parse files and build their runs (several files merge when they are one launch)."""
    logs = [parse_file(p, **parse_kw) for p in paths]
    return build_runs(logs)


def select(runs: list[Run], spec: str | None) -> list[Run]:
    if not spec:
        return runs
    n = int(spec)
    return [r for r in runs if r.index == n]
