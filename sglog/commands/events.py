"""``sglog events``: every event of the logs as typed data (table, jsonl, csv, parquet) or coverage stats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sglog.cli import app
from sglog.commands._common import TableFormat, output_width, stdout_console, write_frames, write_lines, write_text
from sglog.commands.window import RANK_HELP, SINCE_HELP, UNTIL_HELP, Window, rank_label
from sglog import jsonout


@app.command(
    short_help="Every event of the logs as typed data, or line coverage.",
    example="""
sglog events server.log -k decode_batch -f csv -o decode.csv
sglog events server.log -f jsonl | jq -c 'select(.kind == "prefill_batch")'
sglog events --stats server.log
sglog events server.log --since '2026-02-27 10:05' --until 10:10 --rank TP3
""",
)
def events(
    logs: Annotated[Optional[list[str]], typer.Argument(metavar="LOG...", help="Log files (.log, .gz, .zst), directories of them, or - for stdin (the default when piped).", show_default=False)] = None,
    kind: Annotated[Optional[list[str]], typer.Option("--kind", "-k", metavar="KIND", help="Only events of this kind (repeatable).")] = None,
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", metavar="FORMAT", help="table, jsonl, csv, parquet (-o FILE) or json.")] = TableFormat.table,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
    stats: Annotated[bool, typer.Option("--stats", help="Per-file line accounting and coverage instead of events.")] = False,
    since: Annotated[Optional[str], typer.Option("--since", metavar="TIME", help=SINCE_HELP)] = None,
    until: Annotated[Optional[str], typer.Option("--until", metavar="TIME", help=UNTIL_HELP)] = None,
    rank: Annotated[Optional[list[str]], typer.Option("--rank", metavar="RANK", help=RANK_HELP)] = None,
) -> None:
    """Read logs into typed events: every event with its line, time, rank and fields (or, with --stats, how much of each file was understood)."""
    import json

    from sglog.commands._common import log_paths, read_ahead

    if kind:
        _check_kinds(kind)
    window = Window.from_options(since, until, rank)  # (a bad value stops before reading)
    logs = log_paths(logs)
    read_ahead(logs)

    from sglog.read.parse import parse_file

    parsed = [parse_file(p, keep_text=not stats) for p in logs]
    if stats:
        doc = {"files": [p.stats() for p in parsed]}
        if fmt in (TableFormat.json, TableFormat.jsonl):
            write_text(jsonout.dumps(doc, indent=2), output)
            return
        from sglog.render.tables import stats_table

        stdout_console().print(stats_table(doc))
        return
    wanted = set(kind or [])

    def selected():  # (streamed: the export holds one batch of rows at a time, #28)
        for p in parsed:
            rows = p.iter_dicts() if window is None else window.rows(p.iter_dicts())  # (every kind: an untimed line takes the time before it)
            for d in rows:
                if not wanted or d["kind"] in wanted:
                    yield d

    if fmt == TableFormat.jsonl or fmt == TableFormat.json:
        write_lines((jsonout.dumps(_exported(r), default=str, ensure_ascii=False) + "\n" for r in selected()), output)
        return
    if fmt == TableFormat.table:
        from sglog.render.tables import events_table

        stdout_console().print(events_table(list(selected()), width=output_width()))
        return
    import itertools

    import polars as pl

    def frame_of(rows) -> pl.DataFrame:
        frame = pl.DataFrame([{k: (json.dumps(v) if isinstance(v, (dict, list)) else v) for k, v in _exported(r).items()} for r in rows], infer_schema_length=None)
        if "ts" in frame.columns and frame.height and frame["ts"].dtype == pl.String:
            # (a datetime, as in the Python API, when every event's time has its date)
            ts = frame["ts"].str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
            if ts.null_count() == frame["ts"].null_count():
                frame = frame.with_columns(ts.alias("ts"))
        return frame

    rows = selected()
    write_frames((frame_of(batch) for batch in iter(lambda: list(itertools.islice(rows, EXPORT_BATCH)), [])), fmt, output)


EXPORT_BATCH = 100_000  # rows per frame of an export (a frame of 100k rows: ~100 MB of Python dicts on the way)


def _exported(row: dict) -> dict:
    """An event as every export format writes it: the rank as its label (``TP0``, ``TP1 DP0``)."""
    return row | {"rank": rank_label(row.get("rank"))} if "rank" in row else row


def _check_kinds(kinds: list[str]) -> None:
    """Each ``--kind`` names an event kind, or the command stops before reading (exit 2, the valid kinds listed)."""
    from sglog.errors import UsageError
    from sglog.events import KIND_CLASSES

    unknown = [k for k in kinds if k not in KIND_CLASSES]
    if unknown:
        import difflib

        near = [m for k in unknown for m in difflib.get_close_matches(k, KIND_CLASSES, n=3)]
        hint = f" (did you mean {', '.join(dict.fromkeys(near))}?)" if near else ""
        raise UsageError(f"--kind {', '.join(unknown)}: not an event kind{hint}; the kinds are: {', '.join(sorted(KIND_CLASSES))}")

