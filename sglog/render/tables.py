"""Rich tables for the data commands (events, stats)."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def stats_table(doc: dict[str, Any]):
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
        for col, just in (("lines", "right"), ("first", "right"), ("shape", "left"), ("example", "left")):
            u.add_column(col, justify=just, overflow="fold")
        for g in groups:
            u.add_row(str(g["lines"]), str(g["first_line"]), g["template"], g["example"])
        parts.append(u)
    return Group(*parts)


def events_table(rows: list[dict[str, Any]], limit: int = 2000) -> Table:
    t = Table(show_lines=False)
    for col in ("line", "kind", "ts", "rank", "summary"):
        t.add_column(col, overflow="fold")
    for r in rows[:limit]:
        rank = " ".join(f"{k.upper()}{v}" for k, v in (r.get("rank") or {}).items())
        skip = {"kind", "file", "line", "end_line", "ts", "ts_has_date", "rank", "text"}
        summary = ", ".join(f"{k}={v}" for k, v in r.items() if k not in skip and not isinstance(v, (list, dict)))[:160]
        t.add_row(str(r["line"]), r["kind"], r.get("ts") or "", rank, summary)
    if len(rows) > limit:
        t.caption = f"{len(rows) - limit} more rows: use --format jsonl"
    return t


def runs_table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="sglog: runs")
    for col in ("run", "name", "version", "model", "parallelism", "spec", "ended", "startup", "decode tok/s"):
        t.add_column(col, overflow="fold")
    for r in rows:
        par = " ".join(f"{k}{v}" for k, v in r["parallelism"].items() if v and (v != 1 or k == "tp"))
        spec = r["spec"]["algorithm"] if r.get("spec") else "-"
        if r.get("spec") and r["spec"].get("num_steps"):
            spec += f" s{r['spec']['num_steps']}"
        t.add_row(
            str(r["run"]),
            r["name"],
            r.get("version") or "?",
            (r.get("model") or "?")[-40:],
            par or "?",
            spec,
            r["ending"]["description"] if r.get("ending") else "?",
            f"{r['startup_s']:.0f} s" if r.get("startup_s") is not None else "-",
            f"{r['decode_tok_s_median']:.1f}" if r.get("decode_tok_s_median") is not None else "-",
        )
    return t


def frame_table(frame, limit: int = 500) -> Table:
    t = Table()
    if frame.height == 0:
        t.add_column("no batch lines in this run")
        return t
    for col in frame.columns:
        t.add_column(col, overflow="fold")
    for row in frame.head(limit).iter_rows():
        t.add_row(*[_fmt(v) for v in row])
    if frame.height > limit:
        t.caption = f"{frame.height - limit} more rows: use --format csv"
    return t


def _fmt(v) -> str:
    if v is None:
        return ""
    if isinstance(v, float):
        return f"{v:.2f}"
    return str(v)
