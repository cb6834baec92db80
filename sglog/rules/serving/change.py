"""What the findings in time share: their options, the windows they read, and how a change is told.

Each SGL6xx rule cuts one metric into windows (``sglog.timeline.series_windows``), takes the
windows with enough samples, drops the first (warm-up), and looks for the first sustained change
against the earlier level (``sglog.timeline.first_change``).  A change is told with the run's own
numbers and times: "accept length fell from 3.10 to 1.40 between 11:02 and 11:20, after 62 min at
3.00-3.20", and its ``details`` carry ``metric``, ``window_start``, ``window_end`` (ISO timestamps,
or line numbers in a log without timestamps), ``before``, ``after`` and ``axis``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import polars as pl

from sglog import timeline
from sglog.findings import Evidence
from sglog.rules.base import Option, row_evidence

WARMUP_WINDOWS = 1  # the first window with samples is warm-up: never a "before", never a change


def options(min_samples: int = 5, sustain: int = 2, min_before: int = 3) -> dict[str, Option]:
    """The options every SGL6xx rule has."""
    return {
        "window_s": Option(None, "window width in seconds (None: the run's span / 24, rounded up to 1, 2, 3, 5 or 10 min; a log without timestamps is cut by lines)"),
        "min_samples": Option(min_samples, "samples a window needs to count"),
        "sustain": Option(sustain, "windows in a row the change must last"),
        "min_before": Option(min_before, "windows with samples needed before the change (after the warm-up window)"),
    }


@dataclass(frozen=True)
class Windows:
    """A metric's windows with at least ``min_samples`` samples, the warm-up window dropped."""

    frame: pl.DataFrame
    axis: str  # time | line
    width: float  # seconds, or lines
    origin: Any  # where the metric's first counted window (the warm-up) starts: a timestamp or a line
    dated: bool = True  # the timestamps have dates (else times of day: told without the reader's placeholder date)
    last: Any = None  # where the metric's last row is (a timestamp or a line): "until the log ends (...)"


def windows(sw: timeline.SeriesWindows, count: str, o: dict[str, Any]) -> Windows:
    """The windows of ``sw`` whose ``count`` column reaches ``min_samples``, the first (warm-up) dropped."""
    w = sw.frame.filter(pl.col(count) >= o["min_samples"]) if sw.frame.height else sw.frame
    origin = None if w.height == 0 else (w["t_start"][0] if sw.axis == "time" else int(w["line_start"][0]))
    return Windows(w.slice(WARMUP_WINDOWS), sw.axis, sw.width, origin, sw.dated, sw.last)


@dataclass(frozen=True)
class Span:
    """Where a change is on the run's axis, in words and as data."""

    axis: str  # time | line
    start: str  # "11:02" / "line 1200"
    end: str
    start_value: Any  # ISO timestamp, or a line number
    end_value: Any
    before: str  # "after 62 min" / "after 1,200 lines"
    before_minutes: float | None
    to_the_end: bool  # the change lasts until the last window

    @property
    def between(self) -> str:
        if self.to_the_end:
            return f"from {self.start} until the log ends ({self.end})"
        return f"between {self.start} and {self.end}"


def _near(rows: pl.DataFrame, ws: Windows, w: pl.DataFrame, lo_at: int, s: int) -> tuple[pl.DataFrame, Any]:
    """The rows in windows ``lo_at``..``s`` of ``w``, in order, and where window ``s`` starts."""
    if ws.axis == "time":
        at, lo, mid, hi = pl.col("ts"), w["t_start"][lo_at], w["t_start"][s], w["t_end"][s]
    else:
        at, lo, mid, hi = pl.col("line"), w["line_start"][lo_at], w["line_start"][s], w["line_end"][s]
    near = rows.filter(at.is_between(lo, hi))
    return near.sort(["ts", "line"] if ws.axis == "time" else ["line"]), mid


def first_row(rows: pl.DataFrame, ws: Windows, w: pl.DataFrame, s: int, past: pl.Expr) -> dict[str, Any] | None:
    """Where the change starts, to the line rather than the window: the first of ``rows`` (in the
    window before ``s`` and in ``s``) of the unbroken stretch of rows ``past`` the limit (an
    expression over the rows' columns) that holds the first such row of window ``s``."""
    near, mid = _near(rows, ws, w, max(s - 1, 0), s)
    if near.height == 0:
        return None
    at = pl.col("ts") if ws.axis == "time" else pl.col("line")
    flags = near.select(past.fill_null(False)).to_series().to_list()
    in_s = near.select(at >= mid).to_series().to_list()
    k = next((i for i, (p, i_s) in enumerate(zip(flags, in_s)) if p and i_s), None)
    if k is None:
        return None
    while k > 0 and flags[k - 1]:
        k -= 1
    return _where(near.row(k, named=True))


def first_of(rows: pl.DataFrame, ws: Windows, w: pl.DataFrame, i: int) -> dict[str, Any] | None:
    """The first of ``rows`` in window ``i`` of ``w``."""
    near, _ = _near(rows, ws, w, i, i)
    return _where(near.row(0, named=True)) if near.height else None


def _where(row: dict[str, Any]) -> dict[str, Any]:
    return {"ts": row.get("ts"), "line": row["line"], "file": row.get("file") or ""}


def span(ws: Windows, s: int, e: int, w: pl.DataFrame | None = None, first: dict[str, Any] | None = None) -> Span:
    """The change over windows ``s``..``e`` (of ``w``, by default ``ws.frame``), after the serving
    from the metric's first window on; ``first`` (``first_row``) is where in window ``s`` it starts."""
    w = ws.frame if w is None else w
    axis, last = ws.axis, e == w.height - 1
    if axis == "time":
        t0, t1, tb = (first or {}).get("ts") or w["t_start"][s], (ws.last if last and ws.last else w["t_end"][e]), ws.origin
        day = ws.dated and (t0.date() != t1.date() or t0.date() != tb.date())
        fmt = "%Y-%m-%d %H:%M" if day else "%H:%M"
        minutes = (t0 - tb).total_seconds() / 60
        iso = (lambda t: t.isoformat(timespec="seconds")) if ws.dated else (lambda t: t.strftime("%H:%M:%S"))
        return Span(axis, t0.strftime(fmt), t1.strftime(fmt), iso(t0), iso(t1), f"after {_minutes(minutes)}", round(minutes, 1), last)
    l0, l1, lb = int((first or {}).get("line") or w["line_start"][s]), int(ws.last if last and ws.last else w["line_end"][e]), ws.origin
    return Span(axis, f"line {l0}", f"line {l1}", l0, l1, f"after {l0 - lb:,} lines", None, last)


def _minutes(m: float) -> str:
    if m >= 120:
        return f"{m / 60:.1f} h"
    return f"{m:.0f} min"


def evidence(rows: pl.DataFrame, ws: Windows, w: pl.DataFrame, s: int, note: str, run, first: dict[str, Any] | None, sp: Span) -> list[Evidence]:
    """The first line of the earlier level, the first line of the change, and the windows' numbers
    (the note starts with the change's bounds as data: ISO timestamps, times of day or lines)."""
    out = []
    for where, what in ((first_of(rows, ws, w, 0), "before"), (first or first_of(rows, ws, w, s), "the change starts")):
        if where is not None:
            out.append(row_evidence({"file": where["file"], "line": where["line"]}, note=what))
    bounds = f"lines {sp.start_value}-{sp.end_value}" if sp.axis == "line" else f"{sp.start_value} to {sp.end_value}"
    out.append(Evidence(file=run.files[0] if run.files else "", line=None, text=None, note=f"{bounds}: {note}"))
    return out


def details(metric: str, sp: Span, before: float, after: float, width: float, **more: Any) -> dict[str, Any]:
    return {
        "metric": metric,
        "axis": sp.axis,
        "window_start": sp.start_value,
        "window_end": sp.end_value,
        "before": before,
        "after": after,
        "window_width": width,
        "before_minutes": sp.before_minutes,
        "to_the_end": sp.to_the_end,
        **more,
    }


def level_range(values: pl.Series, unit: str = "") -> str:
    """'3.00-3.20' (p10-p90 of the earlier windows' values; one number when they agree); with
    ``unit`` "%" the values are percentages, printed whole."""
    lo, hi = values.quantile(0.1, "linear"), values.quantile(0.9, "linear")
    f = (lambda x: f"{x:.0f}%") if unit == "%" else (lambda x: f"{x:.2f}")
    return f(lo) if f(lo) == f(hi) else f"{f(lo)}-{f(hi)}"


def width_words(axis: str, width: float) -> str:
    return f"{width / 60:g}-min windows" if axis == "time" else f"{width:g}-line windows"


def active(w: pl.DataFrame, quiet_load: float) -> pl.DataFrame:
    """The windows between the load's ramp-up and its tail (``timeline.active_span`` of ``load``);
    all of them when there is no load column."""
    if w.height == 0 or "load" not in w.columns or w.get_column("load").null_count() == w.height:
        return w
    a = timeline.active_span(w.get_column("load"), quiet_load)
    return w.clear() if a is None else w.slice(a[0], a[1] - a[0] + 1)
