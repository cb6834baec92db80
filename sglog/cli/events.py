"""``sglog events``: every event of the logs as typed data (table, jsonl, csv, parquet) or coverage stats."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Annotated

import typer

from sglog import jsonout
from sglog.cli import app
from sglog.cli._common import TableFormat, output_width, stdout_console, write_frames, write_lines, write_text
from sglog.cli.window import RANK_HELP, SINCE_HELP, UNTIL_HELP, Window, rank_label


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
    logs: Annotated[list[str] | None, typer.Argument(metavar="LOG...", help="Log files (.log, .gz, .zst), directories of them, or - for stdin (the default when piped).", show_default=False)] = None,
    kind: Annotated[list[str] | None, typer.Option("--kind", "-k", metavar="KIND", help="Only events of this kind (repeatable).")] = None,
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", metavar="FORMAT", help="table, jsonl, csv, parquet (-o FILE) or json.")] = TableFormat.table,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
    stats: Annotated[bool, typer.Option("--stats", help="Per-file line accounting and coverage instead of events.")] = False,
    since: Annotated[str | None, typer.Option("--since", metavar="TIME", help=SINCE_HELP)] = None,
    until: Annotated[str | None, typer.Option("--until", metavar="TIME", help=UNTIL_HELP)] = None,
    rank: Annotated[list[str] | None, typer.Option("--rank", metavar="RANK", help=RANK_HELP)] = None,
) -> None:
    """Read logs into typed events: every event with its line, time, rank and fields (or, with --stats, how much of each file was understood)."""
    from sglog.cli._common import log_paths, read_ahead

    if kind:
        _check_kinds(kind)
    window = Window.from_options(since, until, rank)  # (a bad value stops before reading)
    logs = log_paths(logs)
    read_ahead(logs)
    parsed = _parse_all(logs, keep_text=not stats)
    if stats:
        _write_stats(parsed, fmt, output)
        return
    rows = _selected(parsed, window, set(kind or []))
    if fmt == TableFormat.jsonl or fmt == TableFormat.json:
        write_lines((jsonout.dumps(_export(r), default=str, ensure_ascii=False) + "\n" for r in rows), output)
        return
    if fmt == TableFormat.table:
        from sglog.render.tables import events_table

        stdout_console().print(events_table(list(rows), width=output_width()))
        return
    import itertools

    write_frames((_frame_of(batch) for batch in iter(lambda: list(itertools.islice(rows, EXPORT_BATCH)), [])), fmt, output)


def _parse_all(logs: list[str], keep_text: bool) -> list:
    """The logs parsed, each input opened as it is read (see inputs.MAX_OPEN_FILES).  A file's
    batch and access rows are read without their text, which is read again from the file as the
    rows are written (the texts of all rows held at once took more memory than the log itself,
    #28); a pipe has one reading, whose copy may be cut short: its rows keep their text."""
    from sglog.read.inputs import open_source
    from sglog.read.parse import parse_source

    parsed = []
    for name in logs:
        src = open_source(name)
        parsed.append(parse_source(src, keep_text=keep_text and src.stream is not None))
    return parsed


def _write_stats(parsed: list, fmt: TableFormat, output: Path | None) -> None:
    """``--stats``: each file's line accounting, as JSON or a table."""
    doc = {"files": [p.stats() for p in parsed]}
    if fmt in (TableFormat.json, TableFormat.jsonl):
        write_text(jsonout.dumps(doc, indent=2), output)
        return
    from sglog.render.tables import stats_table

    stdout_console().print(stats_table(doc))


def _selected(parsed: list, window: Window | None, wanted: set[str]) -> Iterator[dict]:
    """The rows to export, streamed (the export holds one batch of rows at a time, #28): every
    kind goes through the window (an untimed line takes the time before it), then the kinds."""
    for p in parsed:
        rows = p.iter_dicts() if window is None else window.rows(p.iter_dicts())
        rows = (d for d in rows if not wanted or d["kind"] in wanted)
        yield from rows if p.source.stream is not None else with_text(rows, p.source)


def _frame_of(rows: list[dict]):
    """A batch of rows as a frame, column by column in the order the keys come (polars' frame of
    the row dicts held far more memory a row on the way; the same columns, types and values);
    nested values as JSON text, in every format (CSV has none).  Empties ``rows``."""
    import json

    import polars as pl

    n = len(rows)
    columns: dict[str, list] = {}
    for i, r in enumerate(rows):
        for k, v in _export(r).items():
            c = columns.get(k)
            if c is None:
                c = columns[k] = [None] * n
            c[i] = json.dumps(v) if isinstance(v, (dict, list, tuple)) else v
    rows.clear()
    frame = pl.DataFrame([pl.Series(k, c, strict=False) for k, c in columns.items()])
    columns.clear()
    if "ts" in frame.columns and frame.height and frame["ts"].dtype == pl.String:
        # (a datetime, as in the Python API, when every event's time has its date)
        ts = frame["ts"].str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False)
        if ts.null_count() == frame["ts"].null_count():
            frame = frame.with_columns(ts.alias("ts"))
    return frame


EXPORT_BATCH = 50_000  # rows per frame of an export: it bounds the Python dicts held on the way


def with_text(rows, src):
    """Event rows of one input, in line order, with the text of the rows read without it (the
    batch and access rows, ``fastpath.HOT_KINDS``): their lines of the input, read along with
    them, one block at a time."""
    from sglog.read.fastpath import HOT_KINDS
    from sglog.read.inputs import iter_lines

    lines = iter_lines(src)
    at = 0  # lines read
    held: dict[int, str] = {}  # the lines of the row before (rows do not share lines; this is in case)
    for d in rows:
        if d["kind"] in HOT_KINDS and not d.get("text"):
            first, last = d["line"], d.get("end_line") or d["line"]
            if first > at:
                held = {}
            while at < last:
                text = next(lines, None)
                if text is None:  # (the file was cut since it was read)
                    break
                at += 1
                if at >= first:
                    held[at] = text
            d["text"] = "\n".join(held.get(n, "") for n in range(first, last + 1))
        yield d


def _export(row: dict) -> dict:
    """An event as every export format writes it: the rank as its label (``TP0``, ``TP1 DP0``);
    in place (the rows are the export's own), and returned."""
    if "rank" in row:
        row["rank"] = rank_label(row["rank"])
    return row


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
