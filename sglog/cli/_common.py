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


LOG_SUFFIXES = (".log", ".txt", ".out", ".gz", ".zst")


def log_paths(logs: list[str] | None) -> list[str]:
    """The command line's logs as paths: none given and stdin piped is ``-`` (``sglog diagnose <
    server.log``); a directory is its log files (``*.log``, ``*.txt``, ``*.out``, ``.gz``,
    ``.zst``; sorted, not recursive)."""
    from sglog.errors import InputError, UsageError

    if not logs:
        try:
            piped = not sys.stdin.isatty()
        except (AttributeError, ValueError):
            piped = False
        if not piped:
            raise UsageError("no log given: name a file or a directory, or pipe one in (- is stdin)")
        logs = ["-"]
    out: list[str] = []
    for item in logs:
        path = Path(item)
        if item != "-" and path.is_dir():
            found = sorted(str(f) for f in path.iterdir() if f.is_file() and f.name.endswith(LOG_SUFFIXES))
            if not found:
                raise InputError(f"{item}: a directory with no log files ({', '.join('*' + s for s in LOG_SUFFIXES)})")
            out += found
        else:
            out.append(item)
    tune_allocator(out)
    return out


BIG_INPUT_BYTES = 256 << 20  # inputs this long in all get the frugal allocator setting (``tune_allocator``)
COMPRESSED_RATIO = 8  # a .gz / .zst log counts as this many times its size on disk
FRUGAL_MALLOC_CONF = "background_thread:true,dirty_decay_ms:0,muzzy_decay_ms:0"


def tune_allocator(paths: list[str]) -> None:
    """polars' allocator (jemalloc), through its documented setting, for long inputs: hand freed
    pages back at once instead of keeping them.  A long log allocates and frees large frames stage
    after stage, and the pages jemalloc keeps for later add to the command's peak memory (a 1 GB
    log's report: ~1,476 MiB kept, ~1,405 handed back); on shorter logs handing them back costs
    time and saves little (a 1M-line diagnose: +20%): benchmarks/NOTES.md.  stdin counts as long
    (its length is unknown).  Set before polars loads (once); a user's own setting wins."""
    if "_RJEM_MALLOC_CONF" not in os.environ and "polars" not in sys.modules and long_inputs(paths):
        os.environ["_RJEM_MALLOC_CONF"] = FRUGAL_MALLOC_CONF


def long_inputs(paths: list[str]) -> bool:
    """Whether these inputs hold BIG_INPUT_BYTES or more in all (compressed ones counted at
    COMPRESSED_RATIO times their size; stdin always); a path that cannot be read counts nothing."""
    total = 0
    for p in paths:
        if p == "-":
            return True
        try:
            size = os.stat(p).st_size
        except OSError:
            continue  # (the reader reports it)
        total += size * (COMPRESSED_RATIO if p.endswith((".gz", ".zst")) else 1)
    return total >= BIG_INPUT_BYTES


def read_ahead(logs: list[str]) -> None:
    """Start reading the first input's first blocks while the command imports polars and the
    parser (``inputs.prefetch``: the other core reads and decompresses meanwhile, #7)."""
    if logs:
        from sglog.read.inputs import prefetch

        prefetch(logs[0])


COLOR = {"when": "auto"}  # sglog --color auto|always|never (cli._root sets it)


def use_color(stream=None) -> bool:
    """Colour by ``--color``: always, never, or auto = FORCE_COLOR set: yes; NO_COLOR set: no;
    else only on a terminal (https://no-color.org, https://force-color.org)."""
    when = COLOR["when"]
    if when != "auto":
        return when == "always"
    if os.environ.get("FORCE_COLOR", "") not in ("", "0"):
        return True
    if os.environ.get("NO_COLOR"):
        return False
    try:
        return (stream or sys.stdout).isatty()
    except (AttributeError, ValueError):
        return False


def _console(stream, **kw):
    from rich.console import Console

    color = use_color(stream)
    return Console(force_terminal=color, no_color=not color, color_system="standard" if color else None, highlight=False, **kw)


def stderr_console():
    return _console(sys.stderr, stderr=True)


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
    return _console(sys.stdout, soft_wrap=False, width=output_width())


def write_text(text: str, out: Path | None) -> None:
    if out is None:
        sys.stdout.write(text)
        if text and not text.endswith("\n"):
            sys.stdout.write("\n")
        sys.stdout.flush()
    else:
        from sglog.cli import output

        output.write_text(out, text)  # (a temporary file renamed over the target, #28)


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
        from sglog.cli import output

        output.write_with(out, frame.write_parquet)
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


def write_lines(pieces, out: Path | None) -> None:
    """Text pieces (JSON lines) to stdout or to ``out`` as they come (never joined whole, #28)."""
    if out is None:
        for piece in pieces:
            sys.stdout.write(piece)
        sys.stdout.flush()
        return
    from sglog.cli import output

    def put(tmp: Path) -> None:
        with open(tmp, "w", encoding="utf-8", buffering=1 << 20) as f:
            for piece in pieces:
                f.write(piece)

    output.write_with(out, put)


def write_frames(frames, fmt: TableFormat, out: Path | None) -> None:
    """Frames of one table, in order, as one csv / parquet / jsonl, batch by batch (#28: the
    whole table in memory at once peaked at 8.5 GB for 1M lines): each batch goes to an Arrow
    IPC part beside the target, then polars streams the parts into the output (a lazy sink)."""
    import shutil
    import tempfile

    import polars as pl

    from sglog.cli import output
    from sglog.errors import UsageError

    if fmt == TableFormat.parquet and out is None:
        raise UsageError("--format parquet needs -o FILE")
    folder = out.parent if out is not None else None
    if folder is not None:
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError:
            pass  # (output.write_with reports it)
    try:
        holder = tempfile.TemporaryDirectory(prefix=".sglog-parts-", dir=folder if folder is not None and folder.is_dir() else None)
    except OSError as e:
        from sglog.textsafe import quote

        raise output.OutputError(f"{quote(str(out))}: cannot write ({output._reason(e)})") from None
    with holder as parts:
        files: list[Path] = []
        for i, frame in enumerate(frames):
            if frame.height or not files:
                frame = frame.with_columns(pl.col(pl.Float32, pl.Float64).round(6))
                f = Path(parts) / f"{i:06d}.arrow"
                frame.write_ipc(f)
                files.append(f)
            del frame
        lazy = pl.concat([pl.scan_ipc(f) for f in files], how="diagonal_relaxed") if files else pl.LazyFrame()

        def sink(tmp: Path) -> None:
            if fmt == TableFormat.parquet:
                lazy.sink_parquet(tmp)
            elif fmt == TableFormat.csv:
                lazy.sink_csv(tmp)
            else:
                lazy.sink_ndjson(tmp)

        if out is not None:
            output.write_with(out, sink)
            return
        piped = Path(parts) / "out"
        sink(piped)
        sys.stdout.flush()
        with open(piped, "rb") as fh:
            shutil.copyfileobj(fh, sys.stdout.buffer if hasattr(sys.stdout, "buffer") else sys.stdout, 1 << 20)
        sys.stdout.flush()
