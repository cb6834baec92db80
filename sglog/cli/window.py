"""``--since TIME``, ``--until TIME`` and ``--rank RANK``: one window for the commands that read
events (``events``, ``timeline``, ``diagnose``).

One test decides what is in: :meth:`Window.keeps` (a time and a rank label).  The commands
apply it to what they show:

* ``events``: each event (:meth:`Window.rows`);
* ``timeline``: each batch line before the windows are aggregated (:meth:`Window.restrict`);
* ``diagnose``: each finding, by its evidence lines (:meth:`Window.findings`); the rules still
  read the whole run, so a window never invents a finding (a run cut at ``--until`` is not a
  run that stopped there).

A line without a time of its own (a traceback without a prefix, the shell's ``Killed``, a
library's message) is at the time of the last line before it in its file that has one; a
line without a rank (the launcher's, the HTTP server's) is never of a ``--rank``.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, time
from typing import Any

from sglog.errors import UsageError

SINCE_HELP = "Only what was logged at or after TIME: a time of day (10:05, 10:05:30) or a date and time (2026-02-27T10:05, or with a space for the T)."
UNTIL_HELP = "Only what was logged at or before TIME (as --since)."
RANK_HELP = "Only the lines of this rank, e.g. TP3, DP1 or EP0 (repeatable, comma-separated)."


@dataclass(frozen=True)
class Bound:
    """A --since/--until TIME as comparable text (ISO, a space between date and time) and whether it has a date."""

    text: str
    dated: bool

    @classmethod
    def parse(cls, text: str, option: str) -> Bound:
        """
        >>> Bound.parse("2026-02-27 10:05", "--since")
        Bound(text='2026-02-27 10:05:00', dated=True)
        >>> Bound.parse("10:05", "--until")
        Bound(text='10:05:00', dated=False)
        """
        try:
            return cls(datetime.fromisoformat(text.strip()).isoformat(sep=" "), True)
        except ValueError:
            pass
        try:
            return cls(time.fromisoformat(text.strip()).isoformat(), False)
        except ValueError:
            raise UsageError(f"{option} {text!r}: give a time as '2026-02-27 10:05[:00]' or '10:05[:00]'") from None

    def part(self, ts: str) -> str:
        """The part of a line's time this bound compares with: all of it, or its time of day."""
        return ts if self.dated else ts.rsplit(" ", 1)[-1]


@dataclass(frozen=True)
class Window:
    since: Bound | None = None
    until: Bound | None = None
    ranks: frozenset[str] = frozenset()

    @classmethod
    def from_options(cls, since: str | None, until: str | None, ranks: list[str] | None) -> Window | None:
        """The window the options name, or None when none is given; a bad value is a UsageError (exit 2).

        >>> Window.from_options(None, None, None) is None
        True
        >>> sorted(Window.from_options(None, None, ["tp3,DP1"]).ranks)
        ['DP1', 'TP3']
        """
        lo = Bound.parse(since, "--since") if since else None
        hi = Bound.parse(until, "--until") if until else None
        if lo and hi and lo.dated == hi.dated and lo.text > hi.text:
            raise UsageError(f"--since {since!r} is after --until {until!r}")
        wanted = frozenset(_rank(tag) for value in ranks or [] for tag in value.replace(",", " ").split())
        if lo is None and hi is None and not wanted:
            return None
        return cls(lo, hi, wanted)

    # -- the one test
    def in_time(self, ts: datetime | str | None) -> bool:
        """Whether a time is within --since/--until (a line without a time is not, once one is given)."""
        if self.since is None and self.until is None:
            return True
        if ts is None:
            return False
        text = ts.isoformat(sep=" ") if isinstance(ts, datetime) else str(ts)
        if self.since is not None and self.since.part(text) < self.since.text:
            return False
        if self.until is not None and self.until.part(text)[: len(self.until.text)] > self.until.text:
            return False  # (--until 10:05:00 keeps 10:05:00.5: the bound's own precision)
        return True

    def of_rank(self, label: str | None) -> bool:
        """Whether a rank label (``TP3``, ``DP1 TP3``) has one of the --rank tags."""
        return not self.ranks or label is not None and bool(label) and not self.ranks.isdisjoint(label.split())

    def keeps(self, ts: datetime | str | None, rank: str | None) -> bool:
        """
        >>> w = Window.from_options("10:05", "2026-02-27 10:06", ["TP3"])
        >>> w.keeps("2026-02-27 10:05:30", "TP3"), w.keeps("2026-02-27 10:06:00.5", "DP0 TP3")
        (True, True)
        >>> w.keeps("2026-02-27 10:04:59", "TP3"), w.keeps("2026-02-27 10:05:30", "TP2"), w.keeps(None, "TP3")
        (False, False, False)
        """
        return self.of_rank(rank) and self.in_time(ts)

    # -- events: rows
    def rows(self, rows: Iterable[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The event rows (``Event.to_dict``'s shape, in line order per file) in the window."""
        last: dict[str, Any] = {}
        for d in rows:
            ts = d.get("ts")
            file = str(d.get("file"))
            if ts:
                last[file] = ts
            else:
                ts = last.get(file)
            if self.keeps(ts, rank_label(d.get("rank"))):
                yield d

    # -- timeline: a run cut to the window
    def restrict(self, run):
        """A copy of ``run`` holding only its lines in the window (events and batch/access rows);
        what was derived from the whole run (startup, memory, ending, name) stays the run's; the
        copy's memo starts empty (``replace`` gives a new run its own)."""
        return dataclasses.replace(run, events=self._events(run.events), batches=self.frame(run.batches), access=self.frame(run.access))

    def _events(self, events: list) -> list:
        last: dict[str, datetime] = {}
        out = []
        for e in events:
            if e.ts is not None:
                last[e.file] = e.ts
            if self.keeps(e.ts if e.ts is not None else last.get(e.file), e.rank.label if e.rank else None):
                out.append(e)
        return out

    def frame(self, frame):
        """A frame's rows in the window (the test made once per distinct time and rank)."""
        import polars as pl

        if not frame.height:
            return frame
        mask = pl.lit(True)
        if self.since is not None or self.until is not None:
            if "ts" not in frame.columns:
                return frame.clear()
            times = frame.get_column("ts").drop_nulls().unique()
            mask = mask & pl.col("ts").is_in(times.filter(pl.Series([self.in_time(t) for t in times], dtype=pl.Boolean)).implode())
        if self.ranks:
            if "rank" not in frame.columns:
                return frame.clear()
            labels = frame.get_column("rank").drop_nulls().unique()
            mask = mask & pl.col("rank").is_in(labels.filter(pl.Series([self.of_rank(r) for r in labels], dtype=pl.Boolean)).implode())
        return frame.filter(mask.fill_null(False))

    # -- diagnose: findings by their evidence
    def findings(self, runs: list, findings: list) -> tuple[list, list]:
        """The runs with a line in the window and the findings with an evidence line in it (a
        finding whose evidence has no line, a metric window, goes with its run)."""
        shown = [r for r in runs if self.touches(r)]
        located = {r.index: _Lines(r) for r in shown}
        kept = []
        for f in findings:
            lines = located.get(f.run)
            if lines is None:
                continue
            found = [lines.at(ev.file, ev.line) for ev in f.evidence if ev.line is not None]
            at = [a for a in found if a is not None]
            if any(self.keeps(ts, rank) for ts, rank in at) if at else True:
                kept.append(f)
        return shown, kept

    def touches(self, run) -> bool:
        """Whether any of the run's lines is in the window."""
        return bool(self._events(run.events)) or any(self.frame(f).height for f in (run.batches, run.access))

    def text(self) -> str:
        """The window in words: ``since 2026-02-27 10:05:00, rank TP3``."""
        parts = [f"since {self.since.text}" if self.since else "", f"until {self.until.text}" if self.until else ""]
        if self.ranks:
            parts.append(f"rank{'s' if len(self.ranks) > 1 else ''} {' or '.join(sorted(self.ranks))}")
        return ", ".join(p for p in parts if p)

    def describe(self) -> dict[str, Any]:
        """The window as the JSON documents give it."""
        return {"since": self.since.text if self.since else None, "until": self.until.text if self.until else None, "ranks": sorted(self.ranks)}


def rank_label(rank: dict[str, int] | None) -> str | None:
    """An event row's rank as its label: ``{"tp": 0}`` -> ``TP0``."""
    if not rank:
        return None
    return " ".join(f"{k.upper()}{v}" for k, v in rank.items())


def _rank(tag: str) -> str:
    """A --rank tag as its label (``tp3`` -> ``TP3``), or a UsageError."""
    from sglog.events import RANK_AXES, Rank

    r = Rank.parse(tag.upper())
    if r is None or len(r.to_dict()) != 1 or r.label != tag.upper():
        axes = ", ".join(a.upper() for a in RANK_AXES)
        raise UsageError(f"--rank {tag!r}: give a rank as an axis and a number, e.g. TP3 or DP1 (axes: {axes})")
    return r.label


class _Lines:
    """Where a run's line (file, number) is in time and rank: the event or batch row holding it;
    a line without a time of its own is at the time of the last line before it with one."""

    def __init__(self, run) -> None:
        self.run = run
        self.events: dict[str, list] = {}
        for e in run.events:
            self.events.setdefault(e.file, []).append(e)
        for evs in self.events.values():
            evs.sort(key=lambda e: e.line)
        self.starts = {f: [e.line for e in evs] for f, evs in self.events.items()}

    def at(self, file: str, line: int) -> tuple[Any, str | None] | None:
        evs = self.events.get(file, [])
        i = bisect.bisect_right(self.starts.get(file, []), line) - 1
        if i >= 0 and evs[i].line <= line <= evs[i].end_line:
            e = evs[i]
            return (e.ts if e.ts is not None else self._before(file, line), e.rank.label if e.rank else None)
        row = self._row(file, line)
        if row is not None:
            return row
        return None

    def _row(self, file: str, line: int):
        import polars as pl

        for frame in (self.run.batches, self.run.access):
            if frame.height and "line" in frame.columns:
                hit = frame.filter((pl.col("line") == line) & ((pl.col("file") == file) if "file" in frame.columns else pl.lit(True)))
                if hit.height:
                    d = hit.row(0, named=True)
                    return d.get("ts") or self._before(file, line), d.get("rank")
        return None

    def _before(self, file: str, line: int):
        """The time of the last line before ``line`` in ``file`` that has one (events or batch rows)."""
        import polars as pl

        best: tuple[int, Any] | None = None
        evs = self.events.get(file, [])
        for e in reversed(evs[: bisect.bisect_left(self.starts.get(file, []), line)]):
            if e.ts is not None:
                best = (e.line, e.ts)
                break
        for frame in (self.run.batches, self.run.access):
            if frame.height and {"line", "ts"} <= set(frame.columns):
                cond = (pl.col("line") < line) & pl.col("ts").is_not_null()
                if "file" in frame.columns:
                    cond = cond & (pl.col("file") == file)
                got = frame.filter(cond).select(pl.col("line").max().alias("line"), pl.col("ts").sort_by("line").last().alias("ts"))
                if got.height and got["line"][0] is not None and (best is None or got["line"][0] > best[0]):
                    best = (got["line"][0], got["ts"][0])
        return best[1] if best else None
