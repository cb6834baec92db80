"""Serving timelines (polars): the batch frame of a run, windows, steady state.

Column names come from sglog/schema.py.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from sglog import schema

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
    ref = second.median() or 0.0
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
    # millions of rows, and each quantile of an unsorted one is a selection pass: 1M lines 144 -> 44 ms)
    # (means in the rows' order: the same float sums as before)
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
    d = decode_frame(run)
    steady = d.select("line", "file", "steady") if d.height and "file" in d.columns else None
    b = b.filter(pl.col("ts").is_not_null()).sort("ts")
    if steady is not None:
        b = b.join(steady, on=["line", "file"], how="left")
    else:
        b = b.with_columns(pl.lit(None, dtype=pl.Boolean).alias("steady"))
    if "token_usage" not in b.columns and "full_token_usage" in b.columns:  # hybrid SWA / mamba models
        b = b.with_columns(pl.col("full_token_usage").alias("token_usage"))
    elif "full_token_usage" in b.columns:
        b = b.with_columns(pl.coalesce("token_usage", "full_token_usage").alias("token_usage"))
    for col, dtype in (("gen_throughput", pl.Float64), ("input_throughput", pl.Float64), ("running_req", pl.Int64), ("queue_req", pl.Int64), ("token_usage", pl.Float64), ("cuda_graph", pl.Boolean), ("accept_len", pl.Float64)):
        if col not in b.columns:
            b = b.with_columns(pl.lit(None, dtype=dtype).alias(col))
    is_dec = pl.col("kind") == "decode_batch"
    is_pre = pl.col("kind") == "prefill_batch"
    agg = b.group_by_dynamic("ts", every=every, closed="left", label="left").agg(
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
    )
    rt = _retraction_frame(run)
    if rt.height:
        rc = rt.sort("ts").group_by_dynamic("ts", every=every, closed="left", label="left").agg(pl.len().alias("retractions"))
        agg = agg.join(rc, on="ts", how="left")
    else:
        agg = agg.with_columns(pl.lit(0, dtype=pl.UInt32).alias("retractions"))
    secs = pl.duration(seconds=1)
    width = pl.lit(pl.Series([every]).str.replace("s$", "").alias("w")) if False else None
    del width, secs
    seconds = _seconds(every)
    agg = agg.with_columns(
        pl.col("retractions").fill_null(0).cast(pl.Int64),
        (pl.col("retractions").fill_null(0) * 60.0 / seconds).alias("retractions_per_min"),
        pl.col("steady").fill_null(False),
    ).rename({"ts": "window_start"})
    return agg.select(list(schema.WINDOW_COLUMNS))


def _seconds(every: str) -> float:
    units = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
    num = "".join(ch for ch in every if ch.isdigit() or ch == ".")
    unit = every[len(num):] or "s"
    return float(num or 1) * units.get(unit, 1)
