"""``sglog runs`` and ``sglog timeline``: one row per server launch; serving windows."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from sglog import jsonout
from sglog.cli import app
from sglog.cli._common import TableFormat, output_width, stdout_console, write_frame, write_table, write_text
from sglog.cli.window import RANK_HELP, SINCE_HELP, UNTIL_HELP, Window
from sglog.schema import SCHEMA_VERSION


@app.command(
    short_help="One row per server launch: version, model, how it ended, speed.",
    example="""
sglog runs server.log
sglog runs *.log -f csv -o runs.csv
sglog runs server.log -f jsonl | jq -r .ending
""",
)
def runs(
    logs: Annotated[
        list[str] | None, typer.Argument(metavar="LOG...", help="Log files or directories of them (- or piped: stdin); files of one launch (one per node) merge into one run.", show_default=False)
    ] = None,
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", metavar="FORMAT", help="table, json (one document), jsonl (a run per line), csv or parquet (-o FILE).")] = TableFormat.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
) -> None:
    """One row per server launch: version, model, parallelism, spec, how it ended, startup time, decode tok/s."""

    from sglog.cli._common import log_paths
    from sglog.runs.build import load_runs
    from sglog.timeline import run_summary

    found = load_runs(log_paths(logs))
    if fmt == TableFormat.json:
        doc = {"schema_version": SCHEMA_VERSION, "runs": [run_summary(r) | {"startup": r.startup.to_dict() if r.startup else None, "memory": r.memory.to_dict()} for r in found]}
        write_text(jsonout.dumps(doc, indent=2, default=str, ensure_ascii=False), output)
        return
    if fmt != TableFormat.table:
        from sglog.render.export import runs_frame

        write_frame(runs_frame(found), fmt, output)
        return
    from sglog.render.tables import runs_table

    write_table(runs_table([run_summary(r) for r in found], width=output_width() if output is None else 120), output)


@app.command(
    short_help="Serving timeline in windows: throughput, queue, token usage.",
    example="""
sglog timeline server.log
sglog timeline server.log --run 2 -w 1m -f csv -o timeline.csv
sglog timeline server.log --since 10:05 --until 10:30 --rank DP1
""",
)
def timeline(
    logs: Annotated[list[str] | None, typer.Argument(metavar="LOG...", help="Log files or directories of them (- or piped: stdin).", show_default=False)] = None,
    run: Annotated[int | None, typer.Option("--run", metavar="N", help="Only run N (1-based, as `sglog runs` numbers them).")] = None,
    window: Annotated[str, typer.Option("--window", "-w", metavar="WIDTH", help="Window width, e.g. 10s, 1m, 5m.")] = "10s",
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", metavar="FORMAT", help="table, csv, parquet (-o FILE) or jsonl.")] = TableFormat.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
    since: Annotated[str | None, typer.Option("--since", metavar="TIME", help=SINCE_HELP + " The windows aggregate the batch lines in it.")] = None,
    until: Annotated[str | None, typer.Option("--until", metavar="TIME", help=UNTIL_HELP)] = None,
    rank: Annotated[list[str] | None, typer.Option("--rank", metavar="RANK", help=RANK_HELP)] = None,
) -> None:
    """Serving timeline in windows: decode throughput p10/p50/p90, running/queue, token usage, CUDA-graph share, retractions."""
    import polars as pl

    from sglog import timeline as tl
    from sglog.errors import UsageError
    from sglog.runs.build import load_runs

    if not window[:1].isdigit() or window[-1] not in "smhd":
        raise UsageError(f"--window {window!r}: use a number and a unit, e.g. 10s, 1m")
    cut = Window.from_options(since, until, rank)  # (a bad value stops before reading)
    from sglog.cli._common import log_paths

    found = load_runs(log_paths(logs))
    chosen = [r for r in found if run is None or r.index == run]
    if run is not None and not chosen:
        raise UsageError(f"--run {run}: the logs hold {len(found)} run(s)")
    if cut is not None:  # (each run as built from the whole logs, numbered as `sglog runs` does, cut to the window)
        chosen = [cut.restrict(r) for r in chosen]
    frames = [tl.windows(r, window).with_columns(pl.lit(r.index).alias("run")) for r in chosen]
    frames = [f for f in frames if f.height]
    frame = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    if fmt == TableFormat.table:
        from sglog.render.tables import frame_table

        stdout_console().print(frame_table(frame, width=output_width()))
        return
    write_frame(frame, TableFormat.jsonl if fmt == TableFormat.json else fmt, output)
