"""Frames for the data exports (``runs -f csv|parquet|jsonl``): one typed schema in every format.

The same columns, with the same types, go to CSV, Parquet and JSON Lines; only CSV, which has no
nested values, writes a list column as JSON text (``commands._common.write_frame``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import polars as pl

if TYPE_CHECKING:
    from sglog.runs.build import Run

# (column, type) of a run's row, in order
RUN_SCHEMA: dict[str, Any] = {
    "run": pl.Int64,
    "name": pl.String,
    "files": pl.List(pl.String),
    "version": pl.String,
    "model": pl.String,
    "model_class": pl.String,
    "tp": pl.Int64,
    "dp": pl.Int64,
    "pp": pl.Int64,
    "ep": pl.Int64,
    "nnodes": pl.Int64,
    "ranks": pl.List(pl.String),
    "spec_algorithm": pl.String,
    "spec_num_steps": pl.Int64,
    "spec_eagle_topk": pl.Int64,
    "spec_num_draft_tokens": pl.Int64,
    "status": pl.String,
    "phase": pl.String,
    "ending": pl.String,
    "exc_type": pl.String,
    "exc_message": pl.String,
    "crash_file": pl.String,
    "crash_line": pl.Int64,
    "last_ts": pl.Datetime("us"),
    "startup_s": pl.Float64,
    "decode_tok_s_median": pl.Float64,
}


def _int(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) else None


def run_row(summary: dict[str, Any], last_ts: Any = None) -> dict[str, Any]:
    """A run's row of ``RUN_SCHEMA`` from its ``timeline.run_summary`` (``last_ts``: the run's datetime)."""
    par = summary.get("parallelism") or {}
    spec = summary.get("spec") or {}
    ending = summary.get("ending") or {}
    rc = ending.get("root_cause") or {}
    return {
        "run": summary["run"],
        "name": summary["name"],
        "files": list(summary.get("files") or []),
        "version": summary.get("version"),
        "model": summary.get("model"),
        "model_class": summary.get("model_class"),
        **{k: _int(par.get(k)) for k in ("tp", "dp", "pp", "ep", "nnodes")},
        "ranks": list(summary.get("ranks") or []),
        "spec_algorithm": spec.get("algorithm"),
        **{f"spec_{k}": _int(spec.get(k)) for k in ("num_steps", "eagle_topk", "num_draft_tokens")},
        "status": ending.get("status"),
        "phase": ending.get("phase"),
        "ending": ending.get("description"),
        "exc_type": rc.get("exc_type"),
        "exc_message": rc.get("exc_message"),
        "crash_file": rc.get("file"),
        "crash_line": _int(rc.get("line")),
        "last_ts": last_ts,
        "startup_s": summary.get("startup_s"),
        "decode_tok_s_median": summary.get("decode_tok_s_median"),
    }


def runs_frame(runs: Sequence[Run]) -> pl.DataFrame:
    """One row per run, ``RUN_SCHEMA``'s columns and types (also for no runs)."""
    from sglog.timeline import run_summary

    rows = [run_row(run_summary(r), r.ending.last_ts if r.ending else None) for r in runs]
    return pl.DataFrame(rows, schema=RUN_SCHEMA) if rows else pl.DataFrame(schema=RUN_SCHEMA)
