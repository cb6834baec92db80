"""``sglog events``: every event of the logs as typed data (table, jsonl, csv, parquet) or coverage stats."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from sglog.cli import app
from sglog.commands._common import TableFormat, output_width, stdout_console, write_frames, write_lines, write_text
from sglog import jsonout


@app.command(
    short_help="Every event of the logs as typed data, or line coverage.",
    example="""
sglog events server.log -k decode_batch -f csv -o decode.csv
sglog events server.log -f jsonl | jq -c 'select(.kind == "prefill_batch")'
sglog events --stats server.log
""",
)
def events(
    logs: Annotated[Optional[list[str]], typer.Argument(metavar="LOG...", help="Log files (.log, .gz, .zst), directories of them, or - for stdin (the default when piped).", show_default=False)] = None,
    kind: Annotated[Optional[list[str]], typer.Option("--kind", "-k", metavar="KIND", help="Only events of this kind (repeatable).")] = None,
    fmt: Annotated[TableFormat, typer.Option("--format", "-f", metavar="FORMAT", help="table, jsonl, csv, parquet (-o FILE) or json.")] = TableFormat.table,
    output: Annotated[Optional[Path], typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
    stats: Annotated[bool, typer.Option("--stats", help="Per-file line accounting and coverage instead of events.")] = False,
    since: Annotated[Optional[str], typer.Option("--since", metavar="TIME", help="Only events at or after TIME: '2026-02-27 10:05', or '10:05' for the time of day.")] = None,
    until: Annotated[Optional[str], typer.Option("--until", metavar="TIME", help="Only events at or before TIME (as --since).")] = None,
    rank: Annotated[Optional[list[str]], typer.Option("--rank", metavar="RANK", help="Only events of this rank, e.g. TP3 or DP1 (repeatable).")] = None,
) -> None:
    """Read logs into typed events: every event with its line, time, rank and fields (or, with --stats, how much of each file was understood)."""
    import json

    from sglog.commands._common import log_paths, read_ahead

    if kind:
        _check_kinds(kind)
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
    keep = _filter(since, until, rank)

    def selected():  # (streamed: the export holds one batch of rows at a time, #28)
        for p in parsed:
            for d in p.iter_dicts():
                if (not wanted or d["kind"] in wanted) and keep(d):
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
    return row | {"rank": _rank_label(row.get("rank"))} if "rank" in row else row


def _when(text: str, option: str) -> tuple[str, bool]:
    """``--since``/``--until``'s TIME as a comparable text and whether it has a date (``10:05`` has not)."""
    from datetime import datetime, time

    from sglog.errors import UsageError

    try:
        return datetime.fromisoformat(text.strip()).isoformat(sep=" "), True
    except ValueError:
        pass
    try:
        return time.fromisoformat(text.strip()).isoformat(), False
    except ValueError:
        raise UsageError(f"{option} {text!r}: give a time as '2026-02-27 10:05[:00]' or '10:05[:00]'") from None


def _filter(since: str | None, until: str | None, ranks: list[str] | None):
    """Whether an event row is in the --since/--until window and of one of the --rank ranks
    (an event without a time or a rank is out when the option is given)."""
    lo = _when(since, "--since") if since else None
    hi = _when(until, "--until") if until else None
    want = {r.strip().upper() for r in ranks or [] if r.strip()}

    def keep(d: dict) -> bool:
        ts = d.get("ts")
        for bound, after in ((lo, True), (hi, False)):
            if bound is None:
                continue
            if not ts:
                return False
            value, dated = bound
            mine = str(ts) if dated else str(ts).rsplit(" ", 1)[-1]
            mine = mine[: len(value)] if not after else mine
            if (mine < value) if after else (mine > value):
                return False
        if want:
            label = _rank_label(d.get("rank")) or ""
            if not want & set(label.split()):
                return False
        return True

    return keep


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


def _rank_label(rank) -> str | None:
    if not rank:
        return None
    return " ".join(f"{k.upper()}{v}" for k, v in rank.items())
