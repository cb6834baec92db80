"""Serving timelines (polars): the batch frame of a run, windows, steady state.

Column names come from sglog/schema.py.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import polars as pl

from sglog import schema

if TYPE_CHECKING:
    from datetime import datetime

    from polars._typing import PolarsDataType

WARMUP_MIN_ROWS = 10


def steady_mask(decode: pl.DataFrame) -> pl.Series:
    """True for decode rows in steady state: after warm-up, with requests running.

    Warm-up ends at the first row from which the median of the next 10 rows
    reaches 90% of the median of the run's second half (vectorised).
    """
    n = decode.height
    if n == 0 or "gen_throughput" not in decode.columns:
        return pl.Series("steady", [], dtype=pl.Boolean)
    tps = decode.get_column("gen_throughput").fill_null(0.0)
    running = decode.get_column("running_req").fill_null(1) if "running_req" in decode.columns else pl.Series([1] * n)
    second = tps.slice(n // 2).filter(running.slice(n // 2) > 0)
    if second.len() == 0:
        second = tps.slice(n // 2)
    ref = cast("float | None", second.median()) or 0.0  # (polars types an aggregate as any literal)
    start = 0
    if n >= 2 * WARMUP_MIN_ROWS and ref > 0:
        start = _warmup_end(tps, 0.9 * ref)
    idx = pl.Series(range(n))
    return ((idx >= start) & (running > 0)).alias("steady")


def _warmup_end(tps: pl.Series, level: float) -> int:
    """The first row from which the median of the next ``WARMUP_MIN_ROWS`` rows reaches ``level``
    (0 if none does).  Warm-up is short: the rolling median runs over growing prefixes (rows
    whose window lies inside a prefix have their final value) until one finds it."""
    n, w = tps.len(), WARMUP_MIN_ROWS
    m = 4096
    while True:
        m = min(m, n)
        fwd = tps.slice(0, m).rolling_median(window_size=w).shift(-(w - 1))
        hits = (fwd >= level).arg_true()  # (rows whose window passes the prefix's end are null)
        if hits.len():
            return int(hits[0])
        if m == n:
            return 0
        m *= 8


def _once(run, key: str, compute):
    """``compute(run)``, once per run (``Run.memo``; computed each time for run-like objects without it)."""
    memo = getattr(run, "memo", None)
    return memo(key, compute) if memo else compute(run)


def decode_frame(run) -> pl.DataFrame:
    """The run's decode rows (in time order across files) with a ``steady`` column."""
    return _once(run, "decode_frame", _decode_frame)


def _decode_frame(run) -> pl.DataFrame:
    d = run.decode
    if d.height == 0:
        return d
    d = d.sort("ts", nulls_last=True) if "ts" in d.columns and len(run.files) > 1 else d
    return d.with_columns(steady_mask(d))


def decode_stats(run, values: bool = False) -> dict[str, Any]:
    """Steady-state decode throughput distribution and friends (once per run).  ``values``: also the
    steady throughputs themselves, as a list (for significance tests; millions in a long run)."""
    out = dict(_once(run, "decode_stats", _decode_stats))
    if values and out:
        out["values"] = steady_rows(run).get_column("gen_throughput").drop_nulls().to_list()
    return out


def run_summary(run) -> dict[str, Any]:
    """A run's facts with its steady decode throughput's median: the row of ``sglog runs``."""
    from sglog.runs.build import _r, jsonable

    steady = decode_stats(run)
    return {
        "run": run.index,
        "name": run.name,
        "files": run.files,
        "lines": {f: list(r) for f, r in run.line_ranges.items()},
        "version": run.version,
        "model": run.model,
        "model_class": run.model_class,
        "parallelism": run.parallelism,
        "ranks": run.ranks,
        "spec": run.spec,
        "ending": run.ending.to_dict() if run.ending else None,
        "startup_s": _r(run.startup.total_s) if run.startup else None,
        "decode_tok_s_median": _r(steady.get("p50")),
        "args_explicit": {k: jsonable(run.args[k]) for k, o in run.arg_origins.items() if o == "explicit"},
        "args_auto": {k: jsonable(run.args[k]) for k, o in run.arg_origins.items() if o == "auto"},
    }


def steady_rows(run) -> pl.DataFrame:
    """The run's steady-state decode rows (all decode rows when none is steady); once per run."""
    return _once(run, "steady", _steady_rows)


def _steady_rows(run) -> pl.DataFrame:
    d = decode_frame(run)
    if d.height == 0:
        return d
    s = rows_where(d, d.get_column("steady"))
    return d if s is None else s


def rows_where(frame: pl.DataFrame, mask: pl.Series) -> pl.DataFrame | None:
    """``frame.filter(mask)`` (None when no row is left), as a zero-copy slice when the rows are
    one contiguous block (steady state usually is: millions of rows, #7)."""
    idx = mask.fill_null(False).arg_true()
    if idx.len() == 0:
        return None
    first, last = idx[0], idx[-1]
    if last - first + 1 == idx.len():
        return frame.slice(first, idx.len())
    return frame.filter(mask)


def _decode_stats(run) -> dict[str, Any]:
    d = decode_frame(run)
    if d.height == 0 or "gen_throughput" not in d.columns:
        return {}
    s = steady_rows(run)
    # each column sorted once: polars reads the quantiles of a sorted series off it (a run has
    # millions of rows, and each quantile of an unsorted one is a selection pass)
    # (means in the rows' order: the same float sums as before)
    raw: pl.Series | None  # (None: a column the decode lines lack, below)
    raw = s.get_column("gen_throughput").drop_nulls()
    t = raw.sort()
    out: dict[str, Any] = {
        "n": t.len(),
        "p10": t.quantile(0.10, "linear"),
        "p50": t.median(),
        "p90": t.quantile(0.90, "linear"),
        "mean": raw.mean(),
        "warmup_rows": d.height - s.height,
    }
    for col, name in (("running_req", "running"), ("queue_req", "queue"), ("token_usage", "token_usage"), ("accept_len", "accept_len"), ("accept_rate", "accept_rate")):
        raw = s.get_column(col).drop_nulls() if col in s.columns else None
        if raw is not None and raw.len():
            c = raw.sort()
            out[f"{name}_p50"] = c.median()
            out[f"{name}_max"] = c.max()
            out[f"{name}_p99"] = c.quantile(0.99, "higher")
            out[f"{name}_mean"] = raw.mean()
    if "cuda_graph" in s.columns and s.get_column("cuda_graph").drop_nulls().len():
        out["cuda_graph_share"] = s.get_column("cuda_graph").drop_nulls().cast(pl.Float64).mean()
    return out


def prefill_stats(run) -> dict[str, Any]:
    p = run.prefill
    if p.height == 0 or "input_throughput" not in p.columns:
        return {}
    t = p.get_column("input_throughput").drop_nulls().filter(pl.Series(p.get_column("input_throughput").drop_nulls() > 0))
    if t.len() == 0:
        return {"n": p.height}
    return {"n": p.height, "p50": t.median(), "p90": t.quantile(0.9, "linear")}


def _retraction_frame(run) -> pl.DataFrame:
    rows = [{"ts": e.ts} for e in run.events if e.kind == "retraction" and e.ts is not None]
    return pl.DataFrame(rows, schema={"ts": pl.Datetime("ms")})


_UNIT_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
WINDOW_MAX_SECONDS = 366 * 86400


def check_window(every: str) -> str:
    """``every`` as polars reads it (a positive whole number and one of s, m, h, d, at most a
    year), else a UsageError: 0s, -5s or 10^20 s made polars panic (#28)."""
    from sglog.errors import UsageError

    text = every.strip()
    num, unit = text[:-1], text[-1:]
    if unit not in _UNIT_SECONDS or not num.isascii() or not num.isdigit() or len(num) > 12:
        raise UsageError(f"--window {every!r}: use a whole number and a unit (s, m, h, d), e.g. 10s, 1m")
    seconds = int(num) * _UNIT_SECONDS[unit]
    if seconds <= 0 or seconds > WINDOW_MAX_SECONDS:
        raise UsageError(f"--window {every!r}: the width must be from 1s to 366d")
    return f"{int(num)}{unit}"


def windows(run, every: str = "10s") -> pl.DataFrame:
    """Aggregate the batch frame into fixed windows (columns: schema.WINDOW_COLUMNS)."""
    every = check_window(every)
    b = run.batches
    if b.height == 0 or "ts" not in b.columns:
        return pl.DataFrame(schema={c: pl.Float64 for c in schema.WINDOW_COLUMNS})
    # the decode rows with their steady flag (known when the frame names its files), the other rows
    # with none, the columns read and nothing else, stacked: no sort or join of the whole frame
    # (they copied it twice: a long log's timeline peaked at several times its frame, #28)
    d = decode_frame(run)
    others = run.prefill if run.count("decode_batch") + run.count("prefill_batch") == b.height else b.filter(pl.col("kind") != "decode_batch")
    parts = [_window_columns(b, d, d.height > 0 and "file" in d.columns), _window_columns(b, others, False)]
    frame = pl.concat([p for p in parts if p.height] or parts[:1], how="vertical_relaxed", rechunk=False)
    is_dec = pl.col("kind") == "decode_batch"
    is_pre = pl.col("kind") == "prefill_batch"
    # (windows as group_by_dynamic cut them, closed and labelled on the left: a time truncated to the width)
    agg = grouped(
        frame,
        pl.col("ts").dt.truncate(every).alias("window_start"),
        [
            is_dec.sum().alias("n_decode"),
            is_pre.sum().alias("n_prefill"),
            pl.col("gen_throughput").filter(is_dec).quantile(0.10, "linear").alias("decode_tps_p10"),
            pl.col("gen_throughput").filter(is_dec).median().alias("decode_tps_p50"),
            pl.col("gen_throughput").filter(is_dec).quantile(0.90, "linear").alias("decode_tps_p90"),
            pl.col("input_throughput").filter(is_pre & (pl.col("input_throughput") > 0)).median().alias("prefill_tps_p50"),
            pl.col("running_req").max().alias("running_max"),
            pl.col("queue_req").max().alias("queue_max"),
            pl.col("token_usage").mean().alias("token_usage_mean"),
            pl.col("token_usage").max().alias("token_usage_max"),
            pl.col("cuda_graph").filter(is_dec).cast(pl.Float64).mean().alias("cuda_graph_share"),
            pl.col("accept_len").filter(is_dec).mean().alias("accept_len_mean"),
            pl.col("steady").filter(is_dec).any().alias("steady"),
        ],
    )
    rt = _retraction_frame(run)
    if rt.height:
        rc = rt.sort("ts").group_by_dynamic("ts", every=every, closed="left", label="left").agg(pl.len().alias("retractions"))
        agg = agg.join(rc.rename({"ts": "window_start"}), on="window_start", how="left")
    else:
        agg = agg.with_columns(pl.lit(0, dtype=pl.UInt32).alias("retractions"))
    seconds = _seconds(every)
    agg = agg.with_columns(
        pl.col("retractions").fill_null(0).cast(pl.Int64),
        (pl.col("retractions").fill_null(0) * 60.0 / seconds).alias("retractions_per_min"),
        pl.col("steady").fill_null(False),
    )
    return agg.select(list(schema.WINDOW_COLUMNS))


_WINDOW_METRICS = (
    ("gen_throughput", pl.Float64),
    ("input_throughput", pl.Float64),
    ("running_req", pl.Int64),
    ("queue_req", pl.Int64),
    ("token_usage", pl.Float64),
    ("cuda_graph", pl.Boolean),
    ("accept_len", pl.Float64),
)


def _window_columns(b: pl.DataFrame, rows: pl.DataFrame, steady: bool) -> pl.DataFrame:
    """The columns ``windows`` reads of some of the batch frame ``b``'s rows (a slice of it, or
    decode_frame's rows with their ``steady`` flag when ``steady``): the same names and types
    whichever columns those rows lack (the token usage of hybrid models is their full pool's)."""
    have = set(rows.columns)

    def col(name: str, dtype) -> pl.Expr:
        if name not in have or rows.schema[name] == pl.Null:  # (a log with no times has a null ts column)
            return pl.lit(None, dtype=dtype if b.schema.get(name, pl.Null) == pl.Null else b.schema[name]).alias(name)
        return pl.col(name)

    usage = col("token_usage", pl.Float64)
    if "full_token_usage" in have:  # hybrid SWA / mamba models
        usage = pl.coalesce(usage, pl.col("full_token_usage")).cast(b.schema.get("token_usage", b.schema["full_token_usage"])).alias("token_usage")
    return rows.select(
        col("ts", pl.Datetime("ms")),
        col("kind", pl.String),
        *[usage if name == "token_usage" else col(name, dtype) for name, dtype in _WINDOW_METRICS],
        pl.col("steady") if steady else pl.lit(None, dtype=pl.Boolean).alias("steady"),
    )


GROUP_ROWS = 1 << 20  # rows a group-by aggregates at a time (``grouped``)


def grouped(frame: pl.DataFrame, key: pl.Expr, aggs: list[pl.Expr], derived: Sequence[pl.Expr] = ()) -> pl.DataFrame:
    """``frame`` grouped by ``key`` (an aliased expression), ``aggs`` over each group, in the
    key's order; rows whose key is null are left out.  ``derived``: aliased columns computed
    from the rows before they are grouped, for ``aggs`` to read (a condition several aggregations
    share is computed once, not in each group: batch windows 44 -> 23 ms on 1M lines).  The
    groups are aggregated a block of about GROUP_ROWS rows at a time, each group whole and its
    rows in their order, so the result is that of one group-by: a median over millions of rows
    at once held ~130 MB a column more (a 1 GB log's diagnosis peaked at 1.5 GB, #28)."""
    name = key.meta.output_name()
    used = {c for e in (key, *aggs, *derived) for c in e.meta.root_names()}
    frame = aligned(frame.select([c for c in frame.columns if c in used])).with_columns(key, *derived)
    keys = frame.get_column(name)
    if keys.null_count() == 0 and keys.is_sorted():
        frame = frame.with_columns(keys.set_sorted())  # (a window key in row order: polars groups it as slices, twice as fast)
    if frame.height <= GROUP_ROWS:
        cuts = []  # (one block: every row whose key is not null)
    else:
        counts = frame.get_column(name).value_counts(name="n").drop_nulls(name).sort(name)
        starts = counts.get_column("n").cum_sum() - counts.get_column("n")
        cuts = counts.get_column(name).filter((starts // GROUP_ROWS).diff().fill_null(1) > 0).to_list()
    lazy = frame.lazy()
    at = pl.col(name)
    parts = []
    for i, lo in enumerate(cuts or [None]):
        hi = cuts[i + 1] if i + 1 < len(cuts) else None
        rows = lazy.filter(at.is_not_null() if lo is None else (at >= lo) if hi is None else (at >= lo) & (at < hi))
        parts.append(rows.group_by(name).agg(*aggs).sort(name).collect())
    return pl.concat(parts) if len(parts) > 1 else parts[0]


def aligned(frame: pl.DataFrame) -> pl.DataFrame:
    """``frame`` with every column cut into chunks of the same lengths, the most chunked
    column's, as slices (a column of one chunk is sliced, not copied): polars copies a frame whose
    columns are chunked apart (a parse's stacked chunks beside a column computed whole) into one
    chunk before it filters it or adds a column (a 1 GB log's batch frame: ~400 MB, #28)."""
    if frame.width == 0:
        return frame
    lengths = max((frame.get_column(c).chunk_lengths() for c in frame.columns), key=len)
    if len(lengths) <= 1:
        return frame

    def cut(s: pl.Series) -> pl.Series:
        return pl.concat([s.slice(off, n) for off, n in zip(itertools.accumulate(lengths, initial=0), lengths)], rechunk=False)

    columns = []
    for c in frame.columns:
        s = frame.get_column(c)
        if s.chunk_lengths() != lengths:
            s = cut(s)  # (no copy when its chunks end where the others' do: stacked frames, a column of one chunk)
            if s.chunk_lengths() != lengths:
                s = cut(s.rechunk())
        columns.append(s)
    return pl.DataFrame(columns)


def _seconds(every: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    num = "".join(ch for ch in every if ch.isdigit() or ch == ".")
    unit = every[len(num) :] or "s"
    return float(num or 1) * units.get(unit, 1)


# ------------------------------------------------------------------ findings in time (SGL6xx)
#
# A metric's rows (decode lines, batch lines, retractions, finished requests) -> windows along the
# run's time, or along its lines when the log has no timestamps; then, window by window, the earlier
# level of the metric and the first sustained change against it.  The rows -> windows step is one
# lazy polars group-by per frame (all of a frame's metrics at once, once per run: millions of
# rows); the scan for a change walks the windows (a few dozen).

SERIES_WINDOWS = 24  # a run's span is cut into about this many windows
SERIES_WIDTHS_S = (60, 120, 180, 300, 600)  # the widths a time window takes: span / SERIES_WINDOWS, rounded up
_SERIES_EMPTY: dict[str, PolarsDataType] = {"window": pl.Int64, "n": pl.UInt32, "t_start": pl.Datetime("ms"), "t_end": pl.Datetime("ms"), "line_start": pl.Int64, "line_end": pl.Int64}


@dataclass(frozen=True)
class SeriesWindows:
    """A frame's rows cut into windows: ``frame`` has schema.SERIES_COLUMNS and the aggregates,
    one row per window that holds rows, in order."""

    frame: pl.DataFrame
    axis: str  # "time" or "line"
    width: float  # seconds, or lines
    origin: Any  # where window 0 starts: a timestamp, or a line
    dated: bool  # the timestamps have dates (else times of day, on the reader's placeholder date)
    last: Any  # the last row's timestamp or line


def series_axis(frame: pl.DataFrame) -> str:
    """``"time"`` when at least 90% of the rows have a timestamp, else ``"line"`` (request lines
    printed without an envelope, a paste without timestamps)."""
    if frame.height == 0 or "ts" not in frame.columns:
        return "line"
    return "time" if frame.get_column("ts").null_count() <= 0.1 * frame.height else "line"


def series_width(frame: pl.DataFrame, axis: str, width: float | None = None, windows: int = SERIES_WINDOWS) -> float:
    """The windows' width: seconds on the time axis (``width``, else the span / ``windows`` rounded
    up to one of SERIES_WIDTHS_S), lines on the line axis (the span of lines / ``windows``)."""
    if axis == "time":
        if width:
            return float(width)
        ts = frame.get_column("ts").drop_nulls()
        span = (cast("datetime", ts.max()) - cast("datetime", ts.min())).total_seconds() if ts.len() else 0.0
        raw = span / max(windows, 1)
        return float(next((w for w in SERIES_WIDTHS_S if w >= raw), SERIES_WIDTHS_S[-1]))
    lines = frame.get_column("line")
    span = int(cast(int, lines.max()) - cast(int, lines.min()) + 1) if lines.len() else 1
    return float(max(1, -(-span // max(windows, 1))))


def series_windows(frame: pl.DataFrame, aggs: list[pl.Expr], width: float | None = None, grid: SeriesWindows | None = None, derived: Sequence[pl.Expr] = ()) -> SeriesWindows:
    """``frame``'s rows (``line``, ``ts``: null on the line axis, and the aggs' columns)
    cut into windows, with ``aggs`` (polars aggregations) over each window's rows.  ``grid``: use
    another frame's windows (axis, width and origin), so that the two join window by window.
    ``derived``: columns the aggs read, computed from the rows first (``grouped``)."""
    axis = grid.axis if grid is not None else series_axis(frame)
    dated = "ts_has_date" not in frame.columns or bool(frame.get_column("ts_has_date").fill_null(True).all())
    if axis == "time" and frame.height:
        frame = frame.filter(pl.col("ts").is_not_null()) if frame.get_column("ts").null_count() else frame
    if frame.height == 0:
        return SeriesWindows(pl.DataFrame(schema=_SERIES_EMPTY), axis, grid.width if grid else 0.0, grid.origin if grid else None, dated, None)
    w = grid.width if grid is not None else series_width(frame, axis, width)
    if axis == "time":
        origin = grid.origin if grid is not None else frame.get_column("ts").min()
        at = (pl.col("ts") - pl.lit(origin)).dt.total_milliseconds() // int(w * 1000)
        last = frame.get_column("ts").max()
        ts = pl.col("ts")
    else:
        origin = grid.origin if grid is not None else int(cast(int, frame.get_column("line").min()))
        at = (pl.col("line") - origin) // int(w)
        last = int(cast(int, frame.get_column("line").max()))
        ts = pl.lit(None, dtype=pl.Datetime("ms"))
    out = grouped(
        frame,
        at.cast(pl.Int64).alias("window"),
        [
            pl.len().alias("n"),
            ts.min().alias("t_start"),
            ts.max().alias("t_end"),
            pl.col("line").min().alias("line_start"),
            pl.col("line").max().alias("line_end"),
            *aggs,
        ],
        derived,
    )
    return SeriesWindows(out, axis, w, origin, dated, last)


def _agg(frame: pl.DataFrame, col: str, how: str, name: str, dtype=pl.Float64) -> pl.Expr:
    """``how`` (median, mean, max) of ``col`` as ``name``; a null column when the frame lacks it."""
    if col not in frame.columns:
        return pl.lit(None, dtype=dtype).alias(name)
    return getattr(pl.col(col), how)().cast(dtype).alias(name)


def _count(frame: pl.DataFrame, col: str, name: str) -> pl.Expr:
    """How many rows have ``col``, as ``name`` (0 when the frame lacks it)."""
    return (pl.col(col).count() if col in frame.columns else pl.lit(0, dtype=pl.UInt32)).alias(name)


def decode_windows(run, width: float | None = None) -> SeriesWindows:
    """The steady decode rows (after warm-up, requests running) in windows; columns
    schema.DECODE_WINDOW_COLUMNS after the SERIES ones: the medians of the metrics, the means of
    what only gives context (a median per window is a sort per window: 1M lines, #7).  Once per
    run and width."""
    return _once(run, f"decode_windows:{width}", lambda run: _decode_windows(run, width))


def _decode_windows(run, width):
    d = steady_rows(run)
    u = next((c for c in ("token_usage", "full_token_usage") if c in d.columns), "token_usage")
    has_len = "accept_len" in d.columns and d.get_column("accept_len").null_count() < d.height
    aggs = [
        _agg(d, "accept_len", "median", "accept_len"),
        _count(d, "accept_len", "n_accept_len"),
        # (the rate only matters when the length is not printed)
        pl.lit(None, dtype=pl.Float64).alias("accept_rate") if has_len else _agg(d, "accept_rate", "median", "accept_rate"),
        pl.lit(0, dtype=pl.UInt32).alias("n_accept_rate") if has_len else _count(d, "accept_rate", "n_accept_rate"),
        _agg(d, "gen_throughput", "median", "gen_throughput"),
        _count(d, "gen_throughput", "n_gen_throughput"),
        _agg(d, "running_req", "median", "running"),
        (pl.col("cuda_graph").cast(pl.Float64).mean() if "cuda_graph" in d.columns else pl.lit(None, dtype=pl.Float64)).alias("graph"),
        _agg(d, u, "mean", "usage"),
        ((pl.col("token") / pl.col("running_req").clip(1)).mean() if {"token", "running_req"} <= set(d.columns) else pl.lit(None, dtype=pl.Float64)).alias("tokens_per_req"),
    ]
    return series_windows(d, aggs, width)


def batch_windows(run, width: float | None = None) -> SeriesWindows:
    """All batch lines (decode and prefill) in windows: queue, usage, load, and the prefill lines'
    cached and new tokens; columns schema.BATCH_WINDOW_COLUMNS after the SERIES ones.  Once per
    run and width."""
    return _once(run, f"batch_windows:{width}", lambda run: _batch_windows(run, width))


def _batch_windows(run, width):
    b = run.batches
    cols = set(b.columns)
    u = next((c for c in ("token_usage", "full_token_usage") if c in cols and b.get_column(c).drop_nulls().len()), "token_usage")
    tokens = {"cached_token", "new_token"} <= cols
    # (which rows are prefill lines, and prefill lines with both token counts: computed once, as
    # columns, not in each of the aggregations that read them)
    prefill = pl.col("kind") == "prefill_batch"
    pre, both = pl.col("_prefill"), pl.col("_prefill_tokens")
    derived = [prefill.alias("_prefill")]
    if tokens:
        derived.append((prefill & pl.col("cached_token").is_not_null() & pl.col("new_token").is_not_null()).alias("_prefill_tokens"))
    aggs = [
        _agg(b, "queue_req", "median", "queue"),
        _count(b, "queue_req", "n_queue"),
        _agg(b, u, "mean", "usage"),
        _agg(b, "running_req", "mean", "running"),
        _agg(b, "running_req", "max", "running_max", pl.Int64),
        (both.sum() if tokens else pl.lit(0)).cast(pl.UInt32).alias("n_prefill"),
        (pl.col("cached_token").filter(both).sum() if tokens else pl.lit(None)).cast(pl.Int64).alias("cached_tokens"),
        (pl.col("new_token").filter(both).sum() if tokens else pl.lit(None)).cast(pl.Int64).alias("new_tokens"),
        (pl.col("new_token").filter(both).mean() if tokens else pl.lit(None)).cast(pl.Float64).alias("new_per_prefill"),
        (pl.col(u).filter(pre).mean() if u in cols else pl.lit(None)).cast(pl.Float64).alias("prefill_usage"),
    ]
    return series_windows(b, aggs, width, derived=derived)


def retraction_windows(run, width: float | None = None) -> SeriesWindows:
    """Retracted requests per window of the batch lines' windows (``batch_windows``): ``served``
    (batch lines and retraction lines in the window), ``retracted`` (the larger of the retraction
    lines' and the gauge's counts, so that a server printing both is not counted twice),
    ``retracted_events``, ``retracted_counter``.  Once per run and width."""
    return _once(run, f"retraction_windows:{width}", lambda run: _retraction_windows(run, width))


def _retraction_windows(run, width):
    grid = batch_windows(run, width)
    rt = retraction_series(run)
    if grid.frame.height == 0 and rt.height:
        grid = series_windows(rt, [], width)
    r = series_windows(
        rt,
        [
            (pl.col("source") == "event").sum().alias("events"),
            pl.col("retracted").filter(pl.col("source") == "event").sum().alias("retracted_events"),
            pl.col("retracted").filter(pl.col("source") == "counter").sum().alias("retracted_counter"),
        ],
        grid=grid,
    )
    keep = list(schema.SERIES_COLUMNS)
    served = grid.frame.select(*keep).rename({c: f"{c}_b" for c in keep if c != "window"})
    f = served.join(r.frame, on="window", how="full", coalesce=True).sort("window")
    f = f.with_columns(
        *[pl.coalesce(f"{c}_b", c).alias(c) for c in ("t_start", "line_start")],
        *[pl.max_horizontal(f"{c}_b", c).alias(c) for c in ("t_end", "line_end")],
        (pl.col("n_b").fill_null(0) + pl.col("events").fill_null(0)).alias("served"),
        pl.col("retracted_events").fill_null(0),
        pl.col("retracted_counter").fill_null(0),
    ).with_columns(pl.max_horizontal("retracted_events", "retracted_counter").alias("retracted"), pl.col("served").alias("n"))
    f = f.select(*keep, "served", "retracted", "retracted_events", "retracted_counter")
    return SeriesWindows(f, grid.axis, grid.width, grid.origin, grid.dated and r.dated, max(filter(None, [grid.last, r.last]), default=None))


def request_windows(run, width: float | None = None) -> SeriesWindows:
    """Finished requests' time to first token in windows (median ``ttft``); once per run and width."""
    return _once(run, f"request_windows:{width}", lambda run: series_windows(request_series(run), [pl.col("ttft").median().alias("ttft")], width))


def earlier_median(values: pl.Series) -> pl.Series:
    """For each window, the median of the values of the windows before it (null for the first)."""
    return values.shift(1).rolling_median(window_size=max(values.len(), 1), min_samples=1)


def earlier_mean(values: pl.Series) -> pl.Series:
    """For each window, the mean of the values of the windows before it (null for the first)."""
    return values.shift(1).cum_sum() / pl.int_range(0, values.len(), eager=True).cast(pl.Float64)


def earlier_best(values: pl.Series, loads: pl.Series, sustain: int) -> pl.DataFrame:
    """For each window, the best level held earlier: ``best``, the largest median of ``sustain``
    windows in a row before it (a rolling best that one lucky window does not set; null until
    there is one), and ``best_load``, the median load of the windows that held it."""
    k = max(sustain, 1)
    f = pl.DataFrame({"v": values, "l": loads}).with_columns(
        pl.col("v").rolling_median(window_size=k, min_samples=k).alias("held"), pl.col("l").rolling_median(window_size=k, min_samples=k).alias("held_load")
    )
    top = pl.col("held").cum_max()
    return f.select(
        top.shift(1).alias("best"),
        pl.when(pl.col("held").is_not_null() & (pl.col("held") == top)).then(pl.col("held_load")).forward_fill().shift(1).alias("best_load"),
    )


def active_span(load: pl.Series, share: float) -> tuple[int, int] | None:
    """(first, last) window whose load is at least ``share`` of the median window's: the serving
    between the ramp-up and the tail after the load stops."""
    if load.len() == 0:
        return None
    med = load.median()
    if med is None:
        return None
    busy = (load.fill_null(0) >= share * cast(float, med)).arg_true()
    if busy.len() == 0:
        return None
    return int(busy[0]), int(busy[-1])


def first_change(n: int, crossed, sustain: int, min_before: int) -> tuple[int, int] | None:
    """(first, last) window of the first sustained change among ``n`` windows: ``sustain`` windows
    in a row, the first with at least ``min_before`` windows before it, for which
    ``crossed(k, s)`` (window ``k`` is past the limit that the earlier level at window ``s`` sets)
    holds, while the window before them is not (a change already under way when the windows
    before it became enough is no change of the run's level); extended while the next windows
    stay past that same limit."""
    for s in range(max(min_before, 0), n - max(sustain, 1) + 1):
        if s > 0 and crossed(s - 1, s):
            continue
        if all(crossed(k, s) for k in range(s, s + sustain)):
            e = s + sustain - 1
            while e + 1 < n and crossed(e + 1, s):
                e += 1
            return s, e
    return None


def decode_series(run) -> pl.DataFrame:
    """The run's decode rows in steady state (after warm-up, requests running) with a timestamp
    or line: the rows the decode metrics' windows are made of."""
    return steady_rows(run)


def retraction_series(run) -> pl.DataFrame:
    """One row per retraction seen (``line``, ``file``, ``ts``, ``ts_has_date``, ``retracted``:
    requests, ``source``: event or counter):
    from the retraction events (their ``#retracted_reqs``, 1 when not printed) and from the rises of
    the ``#retracted-req`` gauge of PD decode batch lines, per file and rank (the gauge counts the
    retracted requests waiting to be admitted again: a rise is new retractions, a lower bound)."""
    return _once(run, "retraction_series", _retraction_series)


def _retraction_series(run) -> pl.DataFrame:
    schema_: dict[str, PolarsDataType] = {"line": pl.Int64, "file": pl.String, "ts": pl.Datetime("ms"), "ts_has_date": pl.Boolean, "retracted": pl.Int64, "source": pl.String}
    evs = [e for e in run.events_of("retraction") if not e.get("testing")]
    parts = []
    if evs:
        parts.append(
            pl.DataFrame(
                {
                    "line": [e.line for e in evs],
                    "file": [e.file for e in evs],
                    "ts": [e.ts for e in evs],
                    "ts_has_date": [e.ts_has_date for e in evs],
                    "retracted": [e.get("retracted_reqs") or 1 for e in evs],
                    "source": ["event"] * len(evs),
                },
                schema=schema_,
            )
        )
    b = run.batches
    if b.height and "retracted_req" in b.columns:
        keys = [c for c in ("file", "rank") if c in b.columns]
        cols = ["line", "file", "ts", "retracted_req", *[k for k in keys if k != "file"], *(["ts_has_date"] if "ts_has_date" in b.columns else [])]
        g = b.filter(pl.col("retracted_req").is_not_null()).select(cols)
        if "ts_has_date" not in g.columns:
            g = g.with_columns(pl.lit(True).alias("ts_has_date"))
        if g.height:
            rise = (pl.col("retracted_req") - pl.col("retracted_req").shift(1)).over(keys, order_by="line") if keys else pl.col("retracted_req").diff()
            g = g.with_columns(rise.alias("retracted")).filter(pl.col("retracted") > 0)
            parts.append(g.select("line", "file", "ts", "ts_has_date", pl.col("retracted").cast(pl.Int64), pl.lit("counter").alias("source")).cast(schema_))
    if not parts:
        return pl.DataFrame(schema=schema_)
    return pl.concat(parts)


def request_series(run) -> pl.DataFrame:
    """Finished requests with a time to first token (``ttft``, seconds): ``line``, ``file``, ``ts``
    (the envelope's, else the JSON line's own ``timestamp``), ``ts_has_date``, ``ttft``."""
    return _once(run, "request_series", _request_series)


def _request_series(run) -> pl.DataFrame:
    from datetime import datetime

    def when(e):
        if e.ts is not None:
            return e.ts
        try:
            t = datetime.fromisoformat(str(e.get("log_ts")))
        except (TypeError, ValueError):
            return None
        return t.replace(tzinfo=None)

    evs = [e for e in run.events_of("request_log") if e.get("event") == "finished" and isinstance(e.get("ttft"), (int, float)) and not isinstance(e.get("ttft"), bool)]
    return pl.DataFrame(
        {"line": [e.line for e in evs], "file": [e.file for e in evs], "ts": [when(e) for e in evs], "ts_has_date": [e.ts_has_date for e in evs], "ttft": [float(e.get("ttft")) for e in evs]},
        schema={"line": pl.Int64, "file": pl.String, "ts": pl.Datetime("ms"), "ts_has_date": pl.Boolean, "ttft": pl.Float64},
    )
