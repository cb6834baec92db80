"""Helpers shared by the commands: output writing, format choices, stderr console."""

from __future__ import annotations

import os
import sys
from enum import Enum
from pathlib import Path


class TableFormat(str, Enum):
    table = "table"
    jsonl = "jsonl"
    csv = "csv"
    parquet = "parquet"
    json = "json"


class ReportFormat(str, Enum):
    rich = "rich"
    json = "json"
    markdown = "markdown"


def read_ahead(logs: list[str]) -> None:
    """Start reading the first input's first blocks while the command imports polars and the
    parser (``inputs.prefetch``: the other core reads and decompresses meanwhile, #7)."""
    if logs:
        from sglog.inputs import prefetch

        prefetch(logs[0])


def stderr_console():
    from rich.console import Console

    return Console(stderr=True, no_color=bool(os.environ.get("NO_COLOR")), highlight=False)


PIPED_WIDTH = 120  # the width of every command's text when stdout is not a terminal


def output_width(stream=None) -> int:
    """The one width rule of every command: ``COLUMNS`` if set, else the terminal's, else 120 (piped)."""
    try:
        return max(60, int(os.environ.get("COLUMNS", "")))
    except ValueError:
        pass
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return max(60, os.get_terminal_size(stream.fileno()).columns)
    except (AttributeError, ValueError, OSError):
        pass
    return PIPED_WIDTH


def stdout_console():
    from rich.console import Console

    return Console(no_color=bool(os.environ.get("NO_COLOR")), highlight=False, soft_wrap=False, width=output_width())


def write_text(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        if text and not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(text, encoding="utf-8")


def write_table(renderable, out: Path | None) -> None:
    """A rich table (or other renderable) to stdout, or as plain text to ``out``."""
    if out is None:
        stdout_console().print(renderable)
        return
    import io

    from rich.console import Console

    console = Console(record=True, width=120, no_color=True, file=io.StringIO())
    console.print(renderable)
    write_text(console.export_text(), out)


def write_frame(frame, fmt: TableFormat, out: Path | None) -> None:
    """Write a polars frame as csv / parquet / jsonl to a file or stdout."""
    import io
    import json

    import polars as pl

    from sglog.errors import UsageError

    # the same values in every format: floats rounded to 6 decimals (a sum of log values printed
    # 29.759999999999998 in CSV)
    frame = frame.with_columns(pl.col(pl.Float32, pl.Float64).round(6))
    if fmt == TableFormat.parquet:
        if out is None:
            raise UsageError("--format parquet needs -o FILE")
        out.parent.mkdir(parents=True, exist_ok=True)
        frame.write_parquet(out)
        return
    buf = io.StringIO()
    if fmt == TableFormat.csv:
        import polars as pl

        nested = [c for c, t in frame.schema.items() if isinstance(t, (pl.List, pl.Struct, pl.Array, pl.Object))]
        # (CSV has no nested values: a list or struct cell is its JSON text, null stays empty)
        flat = frame.with_columns([pl.Series(c, [None if v is None else json.dumps(v, default=str, ensure_ascii=False) for v in frame[c].to_list()], dtype=pl.String) for c in nested])
        flat.write_csv(buf)
    else:
        frame.write_ndjson(buf)
    write_text(buf.getvalue(), out)
