"""The speculative rules' shared model: chained acceptance, the accept-length statistics, the speculative args as evidence."""

from __future__ import annotations

import polars as pl

from sglog.rules import facts
from sglog.rules.base import event_evidence

CHAIN_ALGOS = ("EAGLE", "EAGLE3", "NEXTN", "MTP")


def chain_len(alpha: float, s: int) -> float:
    """Expected accept length with `s` chained draft positions."""
    if abs(1 - alpha) < 1e-9:
        return s + 1.0
    return (1 - alpha ** (s + 1)) / (1 - alpha)


def solve_alpha(L: float, s: int) -> float:
    """Per-position acceptance that gives accept length `L` over `s` positions (bisection)."""
    if s <= 0:
        return 0.0
    L = min(max(L, 1.0), s + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if chain_len(mid, s) < L:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def accept_stats(run, min_rows: int):
    """(steady rows with accept len, median L, median accept rate or None); once per run (three
    rules ask, and the medians of millions of rows are not free)."""
    return run.memo(f"accept_stats:{min_rows}", lambda run: _accept_stats(run, min_rows))


def _accept_stats(run, min_rows: int):
    s = facts.steady(run)
    if s.height == 0 or "accept_len" not in s.columns:
        return None, None, None
    s = facts.present(s, "accept_len")
    if s.height < min_rows:
        return None, None, None
    # (both medians in one query: polars sorts the two columns side by side)
    has_rate = "accept_rate" in s.columns and s.get_column("accept_rate").drop_nulls().len() > 0
    meds = s.select(pl.col("accept_len").median(), *([pl.col("accept_rate").drop_nulls().median()] if has_rate else [])).row(0)
    return s, float(meds[0]), (float(meds[1]) if has_rate else None)


def spec_evidence(run):
    sa = run.first("server_args")
    if sa is None:
        return []
    steps, topk, ndt = facts.spec_steps(run)
    return [event_evidence(sa, note=f"speculative_algorithm={facts.spec_algo(run)}, num_steps={steps}, eagle_topk={topk}, num_draft_tokens={ndt}")]
