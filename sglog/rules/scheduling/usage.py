"""The scheduling rules' shared view of the steady decode rows: token usage next to the queue."""

from __future__ import annotations

import polars as pl

from sglog.rules import facts


def usage_rows(frame: pl.DataFrame, min_rows: int):
    """(the rows with token usage and a queue length, the usage column), or (None, None) below min_rows."""
    u = facts.usage_col(frame)
    if frame.height < min_rows or u is None or "queue_req" not in frame.columns:
        return None, None
    frame = facts.present(frame, u, "queue_req")
    return (frame, u) if frame.height >= min_rows else (None, None)


def steady_usage(run, min_rows: int):
    return usage_rows(facts.steady(run), min_rows)
