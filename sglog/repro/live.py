"""Live progress of a launch: the startup phases read from the log as it is written.

Lines go through the same grammar as whole files (``sglog.read.records.Folder`` +
``sglog.read.parse.RecordParser``); the events move a small state machine of
phases (weights, KV pool, CUDA graphs, their draft-model twins, ready) and
notice a crash and its root cause.  The caller passes the clock (``now``, in
seconds since launch), so this module is deterministic; renderers return
strings or rich renderables and never write.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sglog.events import Event
from sglog.read.parse import RecordParser
from sglog.read.records import Folder, Record
from sglog.schema import gb

if TYPE_CHECKING:
    from rich.table import Table

# (key, label) in startup order
PHASES = (
    ("distributed_init", "init"),
    ("weight_load", "weights"),
    ("kv_pool", "KV pool"),
    ("cuda_graph_capture", "CUDA graphs"),
    ("draft_weight_load", "draft weights"),
    ("draft_kv_pool", "draft KV pool"),
    ("draft_cuda_graph_capture", "draft CUDA graphs"),
)
LABELS = dict(PHASES)
CRASH_KINDS = frozenset({"oom", "scheduler_exception", "fatal_error", "cpp_exception", "sigquit", "scheduler_dead", "process_killed"})
ERROR_KINDS = CRASH_KINDS | {"traceback", "watchdog_timeout"}


@dataclass
class PhaseState:
    key: str
    label: str
    started: float | None = None
    ended: float | None = None
    begins: set[str] = field(default_factory=set)  # ranks that began
    ends: set[str] = field(default_factory=set)
    detail: str = ""
    note: str = ""  # start line not shown yet

    @property
    def done(self) -> bool:
        return self.ended is not None

    def duration(self, now: float) -> float | None:
        if self.started is None:
            return None
        return (self.ended if self.ended is not None else now) - self.started


@dataclass
class LiveStatus:
    """What the log says so far.  ``feed`` returns the plain progress lines of what just changed."""

    file: str
    phases: dict[str, PhaseState] = field(default_factory=lambda: {k: PhaseState(k, label) for k, label in PHASES})
    ready_at: float | None = None
    crash_at: float | None = None
    errors: list[Event] = field(default_factory=list)
    lines: int = 0
    last_line_at: float = 0.0
    decode_tok_s: float | None = None
    last_text: str = ""  # the last non-blank line (what a process said before it died)
    _loads: dict[str, int] = field(default_factory=dict)
    _folder: Folder = field(default_factory=Folder)
    _parser: RecordParser = field(init=False, repr=False)

    def __post_init__(self) -> None:
        self._parser = RecordParser(self.file)

    # -- state
    @property
    def status(self) -> str:
        if self.crash_at is not None:
            return "crashed"
        if self.ready_at is not None:
            return "ready"
        return "starting"

    @property
    def current(self) -> PhaseState | None:
        """The phase in progress (the last one that began and has not ended)."""
        cur = None
        for k, _ in PHASES:
            p = self.phases[k]
            if p.started is not None and not p.done:
                cur = p
        return cur

    @property
    def current_phase(self) -> str | None:
        cur = self.current
        if cur is not None:
            return cur.key
        if self.ready_at is not None:
            return "serving"
        started = [k for k, _ in PHASES if self.phases[k].started is not None]
        return {"weight_load": "kv_pool", "cuda_graph_capture": "warmup", "draft_cuda_graph_capture": "warmup", "kv_pool": "cuda_graph_capture"}.get(started[-1], started[-1]) if started else "launch"

    @property
    def root_cause(self) -> Event | None:
        from sglog.runs.build import root_cause

        return root_cause(self.errors)

    # -- input
    def feed(self, line: str, now: float) -> list[str]:
        self.lines += 1
        self.last_line_at = now
        if line.strip():
            self.last_text = line.strip()[:200]
        self._folder.feed(self.lines, line)
        return self._events(self._folder.take(), now)

    def idle(self, now: float, after: float = 0.5) -> list[str]:
        """Close the open record once no line came for ``after`` s (the last line may be the ready line)."""
        if self.lines and now - self.last_line_at >= after:
            return self._events(self._folder.flush(), now)
        return []

    def finish(self, now: float) -> list[str]:
        return self._events(self._folder.flush(), now)

    def _events(self, records: Iterable[Record], now: float) -> list[str]:
        out: list[str] = []
        for rec in records:
            if rec.mode == "blank":
                continue
            out.extend(self.on_event(self._parser(rec), now))
        return out

    def on_event(self, e: Event, now: float) -> list[str]:
        k = e.kind
        r = e.rank.label if e.rank else "-"
        out: list[str] = []
        if k == "init_dist_begin":
            out += self._begin("distributed_init", r, now)
        elif k == "init_dist_end":
            out += self._end("distributed_init", r, now, _elapsed(e))
        elif k == "weight_load_begin":
            n = self._loads.get(r, 0)
            self._loads[r] = n + 1
            out += self._begin("weight_load" if n == 0 else "draft_weight_load", r, now, f"avail {_gb(e.get('avail_mem'))}")
        elif k == "weight_load_end":
            draft = self._loads.get(r, 1) > 1 or _is_draft(e.get("type"))
            key = "draft_weight_load" if draft else "weight_load"
            out += self._end(key, r, now, f"{_gb(e.get('mem_usage'))} used, {_gb(e.get('avail_mem'))} left" if e.get("mem_usage") is not None else "")
            out += self._begin("draft_kv_pool" if draft else "kv_pool", r, now)
        elif k == "kv_cache_allocated":
            key = "draft_kv_pool" if self._loads.get(r, 1) > 1 else "kv_pool"
            if e.get("tokens") is not None:
                self.phases[key].detail = f"#tokens {e.get('tokens')}"
        elif k == "memory_pool_end":
            key = "draft_kv_pool" if self._loads.get(r, 1) > 1 else "kv_pool"
            out += self._end(key, r, now, self.phases[key].detail or f"avail {_gb(e.get('avail_mem'))}")
        elif k == "cuda_graph_capture_begin":
            key = "draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture"
            out += self._begin(key, r, now)
        elif k == "cuda_graph_capture_end":
            key = "draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture"
            out += self._end(key, r, now, f"{_gb(e.get('mem_usage'))}" if e.get("mem_usage") is not None else "")
        elif k == "server_ready":
            if self.ready_at is None:
                self.ready_at = now
                for p in self.phases.values():
                    if p.started is not None and not p.done:
                        p.ended = now
                out.append(self._line(now, f"ready after {_secs(now)}"))
        elif k == "decode_batch":
            tps = e.get("gen_throughput")
            if isinstance(tps, (int, float)):
                self.decode_tok_s = float(tps)
        if k in ERROR_KINDS:
            self.errors.append(e)
        if k in CRASH_KINDS and self.crash_at is None:
            self.crash_at = now
            rc = self.root_cause
            where = LABELS.get(self.current_phase or "", self.current_phase or "startup")
            out.append(self._line(now, f"crashed in {where}: {describe(rc)}"))
        return out

    def _begin(self, key: str, rank: str, now: float, detail: str = "") -> list[str]:
        p = self.phases[key]
        p.begins.add(rank)
        if p.started is None:
            p.started = now
            p.note = f"{p.label} ..." + (f" ({detail})" if detail else "")
            return self._announce(now)
        if p.done and rank not in p.ends:
            p.ended = None  # a late rank: still running
        return []

    def _announce(self, now: float) -> list[str]:
        """Start lines of phases whose predecessors are done (ranks finish a phase at different times)."""
        out = []
        for i, (key, _) in enumerate(PHASES):
            p = self.phases[key]
            if p.note and all(self.phases[k].started is None or self.phases[k].done for k, _ in PHASES[:i]):
                out.append(self._line(now, p.note))
                p.note = ""
        return out

    def _end(self, key: str, rank: str, now: float, detail: str = "") -> list[str]:
        p = self.phases[key]
        if p.started is None:
            p.started = now
        p.ends.add(rank)
        if detail:
            p.detail = detail
        if p.ended is None and p.begins <= p.ends:
            p.ended = now
            if p.note:  # never announced: its start goes first
                out = [self._line(now, p.note)]
                p.note = ""
            else:
                out = []
            out.append(self._line(now, f"{p.label} done in {_secs(p.ended - p.started)}" + (f" ({p.detail})" if p.detail else "")))
            return out + self._announce(now)
        return []

    @staticmethod
    def _line(now: float, text: str) -> str:
        return f"[{now:7.1f}s] {text}"


def describe(e: Event | None) -> str:
    if e is None:
        return "unknown cause"
    msg = (e.get("exc_message") or "").strip().splitlines()
    what = e.get("exc_type") or e.kind
    return f"{what}: {msg[0][:160]}" if msg else str(what)


def _elapsed(e: Event) -> str:
    v = e.get("elapsed")
    return f"{v:.2f} s logged" if isinstance(v, (int, float)) else ""


def _gb(v: object) -> str:
    return gb(float(v) if isinstance(v, (int, float)) else None)


def _secs(s: float) -> str:
    return f"{s:.1f}s" if s < 90 else f"{s / 60:.1f} min"


def _is_draft(name: object) -> bool:
    s = str(name or "")
    return any(x in s for x in ("Eagle", "EAGLE", "NextN", "MTP", "Draft", "DFlash", "DFLASH"))


# ------------------------------------------------------------------ rich display


def table(status: LiveStatus, now: float, title: str = "") -> Table:
    """A rich renderable of the phases (for a TTY)."""
    from rich.table import Table
    from rich.text import Text

    t = Table(title=Text(title) if title else None, show_header=True, header_style="bold", box=None, pad_edge=False)
    t.add_column("phase")
    t.add_column("state")
    t.add_column("time", justify="right")
    t.add_column("detail")
    for key, label in PHASES:
        p = status.phases[key]
        if p.started is None:
            continue
        d = p.duration(now)
        state = Text("done", style="green") if p.done else Text("running", style="yellow")
        t.add_row(label, state, _secs(d) if d is not None else "", Text(p.detail))
    if status.crash_at is not None:
        t.add_row("crash", Text("crashed", style="bold red"), _secs(status.crash_at), Text(describe(status.root_cause)))
    elif status.ready_at is not None:
        t.add_row("ready", Text("ready", style="bold green"), _secs(status.ready_at), Text(""))
    else:
        t.add_row("", Text("waiting", style="dim"), _secs(now), Text(f"{status.lines} log lines"))
    return t
