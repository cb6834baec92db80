"""Records -> typed events, for whole files: the reader everything stands on.

``parse_file`` streams a file in chunks.  The hot line kinds go through the
vectorised path (sglog/fastpath.py) into polars frames; every other line goes
through the record layer (sglog/records.py) and the lark grammar
(sglog/messages.py) into ``Event`` objects.  ``fast=False`` sends every line
through the record layer and lark (the reference the fast path is checked
against).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import polars as pl

from sglog import blocks, fastpath, grammar, messages
from sglog.events import Event, Rank, make
from sglog.inputs import Source, iter_text_chunks, open_source
from sglog.records import Folder, Record

_MEMO_MAX = 20000
_MEMO_LEN = 4000


@dataclass
class ParsedLog:
    """One input file read into events."""

    source: Source
    lines: int = 0
    blank: int = 0
    events: list[Event] = field(default_factory=list)  # slow-path events, in line order
    batches: pl.DataFrame = field(default_factory=pl.DataFrame)  # prefill_batch + decode_batch rows
    access: pl.DataFrame = field(default_factory=pl.DataFrame)  # http_access rows
    kinds: Counter = field(default_factory=Counter)

    @property
    def path(self) -> str:
        return self.source.name

    @property
    def unparsed(self) -> int:
        return sum(e.end_line - e.line + 1 for e in self.events if e.kind == "unparsed")

    @property
    def coverage(self) -> float:
        nonblank = self.lines - self.blank
        return 1.0 if nonblank <= 0 else round(1.0 - self.unparsed / nonblank, 4)

    def stats(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "lines": self.lines,
            "blank": self.blank,
            "unparsed": self.unparsed,
            "coverage": self.coverage,
            "kinds": dict(sorted(self.kinds.items())),
        }

    def iter_dicts(self) -> Iterator[dict[str, Any]]:
        """Every event as a dict, in line order (slow-path events and frame rows merged)."""
        rows = []
        for frame in (self.batches, self.access):
            rows.extend(fastpath.rows_to_dicts(frame, self.path))
        rows.sort(key=lambda d: d["line"])
        i = 0
        for ev in self.events:
            while i < len(rows) and rows[i]["line"] < ev.line:
                yield rows[i]
                i += 1
            yield ev.to_dict()
        yield from rows[i:]


# ---------------------------------------------------------------- one record


def _parse_ts(ts: str) -> tuple[datetime | None, bool]:
    ts = ts.replace(",", ".")
    try:
        if len(ts) > 12:
            fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in ts else "%Y-%m-%d %H:%M:%S"
            return datetime.strptime(ts, fmt), True
        fmt = "%H:%M:%S.%f" if "." in ts else "%H:%M:%S"
        return datetime.strptime(ts, fmt), False
    except ValueError:
        return None, True


class RecordParser:
    """Turn records into events; memoises messages seen before."""

    def __init__(self, file: str):
        self.file = file
        self.env = re.compile(grammar.envelope_regex())
        self.memo: dict[str, tuple[str, dict[str, Any]] | None] = {}

    def envelope(self, first: str) -> tuple[str, datetime | None, bool, Rank | None, str | None]:
        m = self.env.match(first)
        if not m:
            return first, None, True, None, None
        ts, has_date = _parse_ts(m.group("ts"))
        return first[m.end():], ts, has_date, Rank.parse(m.group("ranks")), m.group("ray")

    def message(self, message: str) -> tuple[str, dict[str, Any]] | None:
        if len(message) > _MEMO_LEN:
            return messages.parse_message(message)
        hit = self.memo.get(message, 0)
        if hit != 0:
            return (hit[0], dict(hit[1])) if hit else None
        res = messages.parse_message(message)
        if len(self.memo) < _MEMO_MAX:
            self.memo[message] = res
        return (res[0], dict(res[1])) if res else None

    def __call__(self, rec: Record) -> Event:
        common = {"file": self.file, "line": rec.line, "end_line": rec.end_line, "text": "\n".join(rec.raw)}
        if rec.mode == "blank":
            return make("blank", **common)
        first, ts, has_date, rank, ray = self.envelope(rec.lines[0])
        common.update(ts=ts, ts_has_date=has_date, rank=rank)
        lines = [first] + rec.lines[1:]
        if rec.mode == "traceback":
            kind, fields = blocks.read_traceback(lines)
            return make(kind, fields=_with_ray(fields, ray), **common)
        if rec.mode == "fatal":
            return make("fatal_error", fields=blocks.read_fatal(lines), **common)
        if rec.mode == "cpp":
            return make("cpp_exception", fields=blocks.read_cpp(lines), **common)
        message = "\n".join(lines)
        res = self.message(message)
        if res is None and len(lines) > 1:
            res = self.message(first)
        if res is None:
            return make("unparsed", fields=_with_ray({"message": message[:2000]}, ray), **common)
        kind, fields = res
        return make(kind, fields=_with_ray(fields, ray), **common)


def _with_ray(fields: dict[str, Any], ray: str | None) -> dict[str, Any]:
    if ray:
        fields["ray_actor"] = ray.strip()[1:-1]
    return fields


# ---------------------------------------------------------------- whole files


def parse_source(src: Source, *, fast: bool = True, keep_text: bool = False, chunk_bytes: int | None = None) -> ParsedLog:
    log = ParsedLog(source=src)
    rp = RecordParser(src.name)
    folder = Folder()
    batch_frames: list[pl.DataFrame] = []
    access_frames: list[pl.DataFrame] = []
    next_line = 1
    kw = {"chunk_bytes": chunk_bytes} if chunk_bytes else {}

    def drain(records: list[Record]) -> None:
        for rec in records:
            ev = rp(rec)
            log.events.append(ev)
            log.kinds[ev.kind] += 1
            if ev.kind == "blank":
                log.blank += rec.end_line - rec.line + 1

    for chunk in iter_text_chunks(src, **kw):
        df = fastpath.split_lines(chunk, next_line)
        next_line += df.height
        log.lines += df.height
        if fast:
            batches, access, slow = fastpath.read_chunk(df, keep_text)
            if batches.height:
                batch_frames.append(batches)
            if access.height:
                access_frames.append(access)
        else:
            slow = df
        for n, raw in zip(slow.get_column("line").to_list(), slow.get_column("raw").to_list()):
            folder.feed(n, raw)
        drain(folder.take())
    drain(folder.flush())
    if batch_frames:
        log.batches = pl.concat(batch_frames, how="diagonal_relaxed")
    if access_frames:
        log.access = pl.concat(access_frames, how="diagonal_relaxed")
    # batch/access lines the slow path parsed (fast=False, or odd lines) join the frames
    _move_hot_events(log, keep_text)
    for frame in (log.batches, log.access):
        if frame.height:
            for kind, n in frame.group_by("kind").len().iter_rows():
                log.kinds[kind] += n
    return log


def _move_hot_events(log: ParsedLog, keep_text: bool) -> None:
    hot = [e for e in log.events if e.kind in ("prefill_batch", "decode_batch", "http_access")]
    if not hot:
        return
    log.events = [e for e in log.events if e.kind not in ("prefill_batch", "decode_batch", "http_access")]
    for e in hot:
        log.kinds[e.kind] -= 1
    rows_b, rows_a = [], []
    for e in hot:
        row: dict[str, Any] = {"line": e.line, "kind": e.kind, "ts": e.ts, "ts_has_date": e.ts_has_date}
        rank = e.rank.to_dict() if e.rank else {}
        for axis in ("dp", "pp", "attn_cp", "moe_dp", "tp", "ep"):
            row[axis] = rank.get(axis)
        row["rank"] = e.rank.label if e.rank else None
        row.update({k: v for k, v in e.fields.items() if not isinstance(v, (list, dict))})
        if keep_text:
            row["text"] = e.text
        (rows_a if e.kind == "http_access" else rows_b).append(row)
    for rows, attr in ((rows_b, "batches"), (rows_a, "access")):
        if rows:
            extra = pl.DataFrame(rows, infer_schema_length=None)
            cur = getattr(log, attr)
            merged = pl.concat([cur, extra], how="diagonal_relaxed") if cur.height else extra
            setattr(log, attr, merged.sort("line"))


def parse_file(name: str, **kw) -> ParsedLog:
    return parse_source(open_source(name), **kw)
