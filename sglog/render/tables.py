"""Rich tables for the data commands (events, stats)."""

from __future__ import annotations

from typing import Any

from rich.table import Table


def stats_table(doc: dict[str, Any]) -> Table:
    t = Table(title="sglog: line accounting", show_lines=False)
    for col, just in (("file", "left"), ("lines", "right"), ("blank", "right"), ("unparsed", "right"), ("coverage", "right"), ("top kinds", "left")):
        t.add_column(col, justify=just)
    for f in doc["files"]:
        kinds = sorted(f["kinds"].items(), key=lambda kv: -kv[1])[:4]
        t.add_row(
            f["path"],
            str(f["lines"]),
            str(f["blank"]),
            str(f["unparsed"]),
            f"{f['coverage']:.3f}",
            ", ".join(f"{k} {v}" for k, v in kinds),
        )
    return t


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
