"""Rich tables for the data commands (events, stats)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich.table import Table

if TYPE_CHECKING:
    import polars as pl
    from rich.console import Group, JustifyMethod


def stats_table(doc: dict[str, Any]) -> Group:
    """Line accounting per file (what named each line), then each file's unparsed lines grouped
    by shape: what sglog does not know, with a count and one example each."""
    from rich.console import Group

    t = Table(title="sglog: line accounting", show_lines=False)
    # (header, key): lines named by the grammar's rules, the catalogue, record-layer blocks, other programs' shapes
    cols = (("lines", "lines"), ("rules", "grammar"), ("catalog", "catalogue"), ("blocks", "blocks"), ("other", "third_party"), ("blank", "blank"), ("unparsed", "unparsed"))
    t.add_column("file", justify="left", overflow="fold", ratio=1)
    for head, _ in cols:
        t.add_column(head, justify="right", no_wrap=True)
    t.add_column("cov", justify="right", no_wrap=True)
    t.caption = "rules: SGLang's grammar rules; catalog: SGLang messages from its source; blocks: tracebacks, dumps; other: other programs' shapes"
    parts: list[Any] = [t]
    for f in doc["files"]:
        src = f.get("sources") or {}
        t.add_row(
            f["path"],
            *(str(f["lines"] if key == "lines" else src.get(key, f.get(key, 0))) for _, key in cols),
            f"{f['coverage']:.3f}",
        )
    for f in doc["files"]:
        groups = f.get("unparsed_templates") or []
        if not groups:
            continue
        u = Table(title=f"unparsed lines of {f['path']}, by shape", show_lines=False)
        columns: tuple[tuple[str, JustifyMethod], ...] = (("lines", "right"), ("first", "right"), ("shape", "left"), ("example", "left"))
        for col, just in columns:
            u.add_column(col, justify=just, overflow="fold")
        for g in groups:
            u.add_row(str(g["lines"]), str(g["first_line"]), g["template"], g["example"])
        parts.append(u)
    return Group(*parts)


def events_table(rows: list[dict[str, Any]], limit: int = 2000, width: int | None = None) -> Table:
    t = Table(show_lines=False)
    cells = []
    for r in rows[:limit]:
        rank = " ".join(f"{k.upper()}{v}" for k, v in (r.get("rank") or {}).items())
        skip = {"kind", "file", "line", "end_line", "ts", "ts_has_date", "rank", "text"}
        summary = ", ".join(f"{k}={v}" for k, v in r.items() if k not in skip and not isinstance(v, (list, dict)))[:160]
        cells.append([str(r["line"]), r["kind"], r.get("ts") or "", rank, summary])
    _columns(t, ["line", "kind", "ts", "rank", "summary"], cells, width)
    for row in cells:
        t.add_row(*row)
    if len(rows) > limit:
        t.caption = f"{len(rows) - limit} more rows: use --format jsonl"
    return t


def runs_table(rows: list[dict[str, Any]], width: int | None = None) -> Group | Table:
    """The runs as a table; a crashed run's cell says where it crashed and its exception type,
    and its whole message follows the table (a long message in a narrow cell would be cut)."""
    from rich.console import Group
    from rich.padding import Padding
    from rich.text import Text

    t = Table(title="sglog: runs")
    cells, notes = [], []
    for r in rows:
        par = " ".join(f"{k}{v}" for k, v in r["parallelism"].items() if v and (v != 1 or k == "tp"))
        spec = r["spec"]["algorithm"] if r.get("spec") else "-"
        if r.get("spec") and r["spec"].get("num_steps"):
            spec += f" s{r['spec']['num_steps']}"
        ending = r.get("ending") or {}
        ended = ending.get("description") or "?"
        rc = ending.get("root_cause") or {}
        if ending.get("status") == "crashed" and rc.get("exc_message"):
            ended = ended.split(" (", 1)[0] + f" ({rc.get('exc_type') or rc.get('kind')}, see below)"
            notes.append(Padding(Text(f"run {r['run']}: {ending['description']}"), (0, 0, 0, 2)))
        cells.append(
            [
                str(r["run"]),
                r["name"],
                r.get("version") or "?",
                (r.get("model") or "?")[-40:],
                par or "?",
                spec,
                ended,
                f"{r['startup_s']:.0f} s" if r.get("startup_s") is not None else "-",
                f"{r['decode_tok_s_median']:.1f}" if r.get("decode_tok_s_median") is not None else "-",
            ]
        )
    _columns(t, ["run", "name", "version", "model", "parallelism", "spec", "ended", "startup", "decode tok/s"], cells, width)
    for row in cells:
        t.add_row(*row)
    return Group(t, *notes) if notes else t


def frame_table(frame: pl.DataFrame, limit: int = 500, width: int | None = None) -> Table:
    t = Table()
    if frame.height == 0:
        t.add_column("no batch lines in this run")
        return t
    cells = [[_fmt(v) for v in row] for row in frame.head(limit).iter_rows()]
    _columns(t, [c.replace("_", " ") for c in frame.columns], cells, width)  # (a header wraps at its words)
    for row in cells:
        t.add_row(*row)
    if frame.height > limit:
        t.caption = f"{frame.height - limit} more rows: use --format csv"
    return t


def _columns(table: Table, headers: list[str], rows: list[list[str]], width: int | None = None, longest: int = 30) -> None:
    """Columns that wrap at spaces only, in ``width``.

    Each column starts as wide as its widest cell; while the table is too wide, the column
    with the most room above its least width gives a character.  The least width is the longest
    word of its cells (the whole cell when all are short: a time, a number; up to ``longest``)
    and of its header, so no cell splits a word or number;
    only when even those do not fit do the widest columns go below it (a long word then ends in
    an ellipsis).  Without ``width``, rich lays the table out.
    """
    heads = [max(map(len, h.split()), default=1) for h in headers]
    cell_least = [min(_least(str(row[i]) for row in rows), longest) for i in range(len(headers))]
    if width is None:
        for head, least, h in zip(headers, cell_least, heads):
            table.add_column(head, overflow="ellipsis", min_width=max(least, h))
        return
    room = width - 3 * len(headers) - 1  # (a space either side of each cell, and the rules between)
    widths = [max([len(str(row[i])) for row in rows] + [len(headers[i]), cell_least[i], heads[i]]) for i in range(len(headers))]
    # give way in three steps: down to the longest word of cells and header, then of the cells
    # only (a header word ends in an ellipsis), then below it (a cell's long word does)
    for floor in ([max(c, h) for c, h in zip(cell_least, heads)], cell_least, [3] * len(headers)):
        while sum(widths) > room:
            slack = [w - f for w, f in zip(widths, floor)]
            if max(slack) <= 0:
                break
            widths[slack.index(max(slack))] -= 1
    for head, w in zip(headers, widths):
        table.add_column(head, overflow="ellipsis", width=w)


def _least(cells: Iterable[str], short: int = 20) -> int:
    """The narrowest a column may be: its longest cell when every cell is short, else its longest word."""
    cells = list(cells)
    if all(len(c) <= short for c in cells):
        return max(map(len, cells), default=1)
    return max((len(w) for c in cells for w in c.split()), default=1)


def _fmt(v: object) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)
