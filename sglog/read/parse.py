"""Records -> typed events, for whole files: the reader everything stands on.

``parse_file`` streams a file in newline-aligned chunks (memory flat in the
size of the input).  Per chunk, the vectorised path (sglog/read/fastpath.py) reads
the frequent line kinds with polars -- batch and access lines into polars
frames, retractions and other single-terminal rules into events -- in worker
threads (polars releases the GIL), while this thread folds the remaining
lines into records (sglog/read/records.py) and parses them with the lark grammar
(sglog/read/messages.py).  ``fast=False`` sends every line through the record layer
and lark, with no memo but the exact one: the reference the fast path is
checked against (tests/test_fastpath.py, benchmarks/run.py).

The record parser memoises messages it has seen and, on the fast path, also
by *digit shape*: messages that differ only in their digits lex the same
(``grammar.digit_literals``), so lark parses one exemplar and the others reuse
its tree with their own token text.
"""

from __future__ import annotations

import bisect
import functools
import itertools
import os
import re
import threading
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, ParamSpec, TypeVar

import polars as pl

from sglog.events import BLOCK_KINDS, KIND_CLASSES, RANK_AXES, Event, Rank, make
from sglog.read import blocks, fastpath, grammar, messages, signatures
from sglog.read import named as named_messages
from sglog.read.envelope import VECTOR_DEPTH, Unwrapper, hard_wrap_width
from sglog.read.inputs import CHUNK_BYTES, Source, default_workers, iter_byte_chunks, open_source, planned_chunks, tune_malloc
from sglog.read.records import Folder, Record, is_start

if TYPE_CHECKING:
    from concurrent.futures import Executor

    from sglog.read.catalog import CatalogueMatch
from sglog.schema import DESCRIBED_KINDS
from sglog.schema import coverage as schema_coverage

DETECT_LINES = 20000  # a file's outer envelopes are decided within its first lines (sglog/read/envelope.py)
_MEMO_MAX = 20000
_MEMO_LEN = 4000
_SHAPES_MAX = 5000
_TS_MAX = 200000


@dataclass
class ParsedLog:
    """One input file read into events."""

    source: Source
    lines: int = 0
    blank: int = 0
    events: list[Event] = field(default_factory=list)  # slow-path events, in line order
    # decode_batch + prefill_batch rows, kind by kind (all decode rows, then all prefill rows), each
    # kind's in line order (fastpath.kind_major: a run's decode rows are a slice, not a copy)
    batches: pl.DataFrame = field(default_factory=pl.DataFrame)
    access: pl.DataFrame = field(default_factory=pl.DataFrame)  # http_access rows
    kinds: Counter[str] = field(default_factory=Counter)
    lines_fast: int = 0  # lines read by the vectorised path (the rest went through the record layer)

    @property
    def path(self) -> str:
        return self.source.name

    @property
    def unparsed(self) -> int:
        return sum(e.end_line - e.line + 1 for e in self.events if e.kind == "unparsed")

    @property
    def coverage(self) -> float:
        return schema_coverage(self.unparsed, self.lines - self.blank)

    def stats(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "lines": self.lines,
            "blank": self.blank,
            "unparsed": self.unparsed,
            "coverage": self.coverage,
            "sources": self.sources(),
            "unparsed_templates": unparsed_templates(e for e in self.events if e.kind == "unparsed"),
            "kinds": dict(sorted(self.kinds.items())),
        }

    def sources(self) -> dict[str, int]:
        """Lines by what named them: SGLang's grammar rules, the message catalogue, record-layer
        blocks (tracebacks, thread dumps), other programs' shapes; blank and unparsed lines."""
        out = dict.fromkeys(SOURCES, 0)
        for e in self.events:
            out[source_of(e.kind)] += e.end_line - e.line + 1
        out[source_of("decode_batch")] += self.batches.height
        out[source_of("http_access")] += self.access.height
        return out

    def iter_dicts(self) -> Iterator[dict[str, Any]]:
        """Every event as a dict, in line order (slow-path events and frame rows merged).

        Streamed: the frames' rows are made into dicts a slice at a time (all of them at once
        held ~1 KB per row: ``events -f parquet`` of 1M lines peaked at 8.5 GB, #28).  Each
        kind's rows are in line order in the frames, so a merge keeps the order; at the same
        line a slow-path event comes first."""
        import heapq

        streams: list[Iterator[dict[str, Any]]] = [(ev.to_dict() for ev in self.events)]
        for frame in (self.batches, self.access):
            if not frame.height:
                continue
            blocks = fastpath.kind_blocks(frame)  # (a kind-major frame's kinds are slices of it: a partition copied every row, #28)
            parts = list(blocks.values()) if blocks is not None else frame.partition_by("kind", maintain_order=True) if "kind" in frame.columns else [frame]
            for part in parts:
                part = part if part["line"].is_sorted() else part.sort("line")
                streams.append(self._sliced(part))
        yield from heapq.merge(*streams, key=lambda d: d["line"])

    def _sliced(self, frame: pl.DataFrame, step: int = 20000) -> Iterator[dict[str, Any]]:
        for off in range(0, frame.height, step):
            yield from fastpath.rows_to_dicts(frame.slice(off, step), self.path)


SOURCES = ("grammar", "catalogue", "blocks", "third_party", "blank", "unparsed")


@functools.cache
def source_of(kind: str) -> str:
    """Which of ``SOURCES`` an event kind's lines count under (the event class's ``SOURCE``)."""
    if kind in ("blank", "unparsed"):
        return kind
    source = getattr(KIND_CLASSES.get(kind), "SOURCE", "sglang")
    return {"sglang": "grammar", "block": "blocks", "catalogue": "catalogue"}.get(source, "third_party")


_MASKS = (
    (re.compile(r"\b0x[0-9a-fA-F]+\b"), "<hex>"),
    (re.compile(r"'[^']*'|\"[^\"]*\""), "<str>"),
    (re.compile(r"(?:[A-Za-z]:)?(?:/[\w.@+-]+){2,}/?"), "<path>"),
    (re.compile(r"\b[0-9a-fA-F]{8,}\b|\d+(?:\.\d+)?"), "<n>"),
    (re.compile(r"\s+"), " "),
)
TEMPLATES_SHOWN = 10


def unparsed_templates(events: Iterable[Event], shown: int = TEMPLATES_SHOWN) -> list[dict[str, Any]]:
    """The unparsed lines grouped by shape (numbers, hex, quoted strings and paths masked), the
    most frequent first: what sglog does not know in a log, at a glance."""
    groups: dict[str, list[Any]] = {}
    for e in events:
        text = str(e.fields.get("message") or e.text).split("\n", 1)[0]
        key = text
        for rx, repl in _MASKS:
            key = rx.sub(repl, key)
        key = key.strip()[:160]
        g = groups.get(key)
        if g is None:
            groups[key] = [1, e.end_line - e.line + 1, e.line, text[:300]]
        else:
            g[0] += 1
            g[1] += e.end_line - e.line + 1
    ranked = sorted(groups.items(), key=lambda kv: (-kv[1][1], kv[1][2]))
    return [{"template": k, "count": g[0], "lines": g[1], "first_line": g[2], "example": g[3]} for k, g in ranked[:shown]]


# ---------------------------------------------------------------- one record


def _parse_ts(ts: str) -> tuple[datetime | None, bool]:
    ts = ts.replace(",", ".")
    try:
        if len(ts) in (19, 23) and ts[10] == " ":
            return datetime.fromisoformat(ts), True  # same results as strptime for this form, 10x faster
        if len(ts) > 12:
            fmt = "%Y-%m-%d %H:%M:%S.%f" if "." in ts else "%Y-%m-%d %H:%M:%S"
            return datetime.strptime(ts, fmt), True
        fmt = "%H:%M:%S.%f" if "." in ts else "%H:%M:%S"
        return datetime.strptime(ts, fmt), False
    except ValueError:
        return None, True


_ZERO = str.maketrans("123456789", "000000000")
_REJECTED = "rejected"  # lark rejects every message of this digit shape
_UNUSABLE = "unusable"  # parse each message of this shape on its own


class RecordParser:
    """Turn records into events; memoises messages (and, with ``shapes``, digit shapes) seen before."""

    def __init__(self, file: str, *, shapes: bool = False):
        self.file = file
        self.env = grammar.re_compile(grammar.envelope_regex())
        self.memo: dict[str, tuple[str, dict[str, Any]] | None] = {}
        self.ts_memo: dict[str, tuple[datetime | None, bool]] = {}
        self.rank_memo: dict[str | None, Rank | None] = {}
        self.catalogue_memo: dict[str, dict[str, Any] | None] = {}
        self.raised_memo: dict[tuple[str, str | None], dict[str, Any] | None] = {}
        self.version: str | None = None  # the SGLang release the log names (pip list), once seen
        self.shapes: dict[Any, Any] | None = None
        self.literals: tuple[str, ...] = ()
        if shapes:
            lits = grammar.digit_literals()
            if lits is not None:
                self.shapes = {}
                self.literals = lits

    def ts(self, text: str) -> tuple[datetime | None, bool]:
        hit = self.ts_memo.get(text)
        if hit is None:
            if len(self.ts_memo) >= _TS_MAX:
                self.ts_memo.clear()
            hit = self.ts_memo[text] = _parse_ts(text)
        return hit

    def rank(self, tags: str | None) -> Rank | None:
        try:
            return self.rank_memo[tags]
        except KeyError:
            r = self.rank_memo[tags] = Rank.parse(tags)
            return r

    def envelope(self, first: str) -> tuple[str, datetime | None, bool, Rank | None, str | None]:
        m = self.env.match(first)
        if not m:
            return first, None, True, None, None
        ts, has_date = self.ts(m.group("ts"))
        return first[m.end() :], ts, has_date, self.rank(m.group("ranks")), m.group("ray")

    def message(self, message: str) -> tuple[str, dict[str, Any]] | None:
        if len(message) > _MEMO_LEN:
            return messages.parse_message(message)
        hit = self.memo.get(message, 0)
        if hit != 0:
            return (hit[0], dict(hit[1])) if hit else None  # type: ignore[index]  # (0: a miss; mypy cannot narrow "!= 0")
        res = self._parse(message)
        if len(self.memo) < _MEMO_MAX:
            self.memo[message] = res
        return (res[0], dict(res[1])) if res else None

    # -- digit shapes
    def _parse(self, message: str) -> tuple[str, dict[str, Any]] | None:
        if self.shapes is None:
            return messages.parse_message(message)
        zeroed = message.translate(_ZERO)
        if zeroed == message:
            return messages.parse_message(message)
        shape = (zeroed, self._literal_places(message)) if self.literals else zeroed
        if shape is None or shape[1] is None:
            return messages.parse_message(message)
        tpl = self.shapes.get(shape)
        if tpl is None:
            res = messages.parse_message(message)
            if len(self.shapes) < _SHAPES_MAX:
                self.shapes[shape] = _template(message, res)
            return res
        if tpl is _UNUSABLE:
            return messages.parse_message(message)
        if tpl is _REJECTED:
            # parse_message also tries the message without a foreign logger prefix
            return messages.parse_message(message) if messages.strip_prefix(message)[1] else None
        kind, tree = tpl
        try:
            return kind, messages.interpret(kind, _retoken(tree, message), message)
        except Exception:
            return messages.parse_message(message)

    def _literal_places(self, message: str) -> tuple[Any, ...] | None:
        """Where the grammar's digit-bearing literals occur (and as what text): part of the shape."""
        low = message.lower()
        if len(low) != len(message):  # case folding moved the positions: no shape
            return None
        out = []
        for lit in self.literals:
            i = low.find(lit)
            while i >= 0:
                out.append((i, message[i : i + len(lit)]))
                i = low.find(lit, i + 1)
        return tuple(out)

    def __call__(self, rec: Record) -> Event:
        common = {"file": self.file, "line": rec.line, "end_line": rec.end_line, "text": "\n".join(rec.raw)}
        if rec.mode == "blank":
            return make("blank", **common)
        logical = rec.logical  # (a line a page wrapped is one line again)
        first, ts, has_date, rank, ray = self.envelope(logical[0])
        common.update(ts=ts, ts_has_date=has_date, rank=rank)
        lines = [first] + logical[1:]
        if rec.mode == "traceback":
            kind, fields = blocks.read_traceback(lines, self.raised)
            return make(kind, fields=_with_ray(named_messages.name_block(blocks.enrich(kind, fields, lines, rank)), ray), **common)
        if rec.mode == "fatal":
            return make("fatal_error", fields=blocks.enrich("fatal_error", blocks.read_fatal(lines), lines, rank), **common)
        if rec.mode == "cpp":
            return make("cpp_exception", fields=named_messages.name_block(blocks.enrich("cpp_exception", blocks.read_cpp(lines), lines, rank)), **common)
        message = "\n".join(lines)
        res = self.message(message)
        if res is None and len(lines) > 1:
            res = self.message(first)
        if res is None:
            named = self.catalogued(first)
            if named is not None:
                kind = "library_log" if "library" in named else named_messages.kind_of(named["template"], named["source"]) or "sglang_message"
                if kind in DESCRIBED_KINDS:
                    named.update(signatures.describe(first))
                return make(kind, fields=_with_ray(named, ray), **common)
            if rec.line == 1 and ts is None:
                cut = self.catalogued_tail(first)
                if cut is not None:
                    return make("library_log" if "library" in cut else "sglang_message", fields=_with_ray(cut, ray), **common)
            fields = {"message": message[:2000], **messages.strip_prefix(first)[1]}  # (a logger prefix's parts: log_level, log_source ...)
            fields.update(signatures.describe(first))
            return make("unparsed", fields=_with_ray(fields, ray), **common)
        kind, fields = res
        if kind == "pip_package" and fields.get("package") == "sglang" and fields.get("version"):
            self.version = str(fields["version"])  # ranks ambiguous catalogue matches
        elif kind == "torch_log":
            coll = blocks.collective(str(fields.get("message") or ""))
            if coll is not None:
                if "rank" not in coll and (r := blocks.rank_in(first)) is not None:
                    coll["rank"] = r  # (torch's `[rank3]:` prefix)
                fields["collective"] = coll
        elif kind == "native_backtrace":
            blocks.enrich(kind, fields, lines, rank)
        elif kind == "kv_transfer_failed":
            fields.update(signatures.transfer_fields(fields.get("exc_message")))
        if kind in DESCRIBED_KINDS and "signatures" not in fields:
            fields.update(signatures.describe(str(fields.get("message") or first)))
        return make(kind, fields=_with_ray(fields, ray), **common)

    def raised(self, text: str, source: str | None) -> dict[str, Any] | None:
        """The catalogued SGLang message an exception's message (first line) is: ``template``,
        ``source`` (module:line) and its typed placeholder ``fields``; None if it is none.
        ``source``: the raising frame (``srt/managers/scheduler.py:123``), preferred among matches."""
        key = (text, source)
        hit = self.raised_memo.get(key, 0)
        if hit != 0:
            return {**hit, "fields": dict(hit["fields"])} if hit else None  # type: ignore[dict-item, index]  # (0: a miss, as in message)
        from sglog.read import catalog

        m = catalog.load().match(text, self.version, source, libraries=False)
        out: dict[str, Any] | None = {"template": m.template, "source": m.source, "fields": dict(m.fields)} if m is not None else None
        if len(self.raised_memo) < _MEMO_MAX:
            self.raised_memo[key] = out
        return {**out, "fields": dict(out["fields"])} if out else None

    def catalogued_tail(self, message: str) -> dict[str, Any] | None:
        """The catalogued SGLang message a file's first line is the rest of, when the paste began
        in the middle of a line (``Catalogue.match_tail``): its fields, with ``cut`` = "start"."""
        from sglog.read import catalog

        m = catalog.load().match_tail(message, self.version)
        if m is None:
            return None
        out = _match_fields(m) | {"cut": "start"}
        if m.library:
            out["message"] = message.strip()
        _add_placeholders(out, m.fields)
        return out

    def catalogued(self, message: str) -> dict[str, Any] | None:
        """The fields of the catalogued SGLang message this line is (sglog/read/catalog.py), or None:
        a message no grammar rule names, matched after any foreign logger prefix (kept as ``log_*``)."""
        hit = self.catalogue_memo.get(message, 0)
        if hit != 0:
            return dict(hit) if hit else None  # type: ignore[arg-type]  # (0: a miss, as in message)
        from sglog.read import catalog

        text, prefix = messages.strip_prefix(message)
        m = catalog.load().match(text, self.version, prefix.get("log_source"))
        out = None
        if m is not None:
            out = _match_fields(m)
            if m.library:
                out["message"] = text  # (as the grammar's library lines keep it)
            named = None if m.library else named_messages.read(m.template, list(m.fields.values()), m.source)  # a kind of its own: typed fields
            if named is not None:
                out.update(named[1])  # (its field names, not the miner's placeholder names)
                if named[0] == "kv_transfer_failed":
                    out.update(signatures.transfer_fields(out.get("exc_message")))
            else:
                _add_placeholders(out, m.fields)
            out.update(prefix)
        if len(self.catalogue_memo) < _MEMO_MAX:
            self.catalogue_memo[message] = out
        return dict(out) if out else None


def _template(message: str, res: tuple[str, dict[str, Any]] | None) -> Any:
    """What a message's parse tells about the other messages of its digit shape."""
    from lark import Tree
    from lark.exceptions import LarkError

    try:
        tree = grammar.parser().parse(message)
    except LarkError:
        # lark rejects the shape; the result was None unless a foreign prefix was stripped
        return _REJECTED if res is None and not messages.strip_prefix(message)[1] else _UNUSABLE
    except Exception:
        return _UNUSABLE
    if res is None or not isinstance(tree, Tree) or tree.data != res[0]:
        return _UNUSABLE
    try:
        again = messages.interpret(res[0], _retoken(tree, message), message)
    except Exception:
        return _UNUSABLE
    return (res[0], tree) if again == res[1] else _UNUSABLE


def _retoken(node: Any, message: str) -> Any:
    """A copy of a parse tree with each token's text taken from ``message`` (same positions)."""
    from lark import Token, Tree

    if isinstance(node, Token):
        return node.update(value=message[node.start_pos : node.end_pos])
    if isinstance(node, Tree):
        return Tree(node.data, [_retoken(c, message) for c in node.children])
    return node


def _match_fields(m: CatalogueMatch) -> dict[str, Any]:
    """An ``sglang_message``'s catalogue fields: which template, where, which releases."""
    out: dict[str, Any] = {"template": m.template, "source": m.source, "level": m.level, "versions": f"{m.versions[0]}-{m.versions[1]}", "origin": m.kind}
    if m.shared:
        out["shared"] = m.shared
    if m.package:
        out["package"] = m.package  # (a package of SGLang's project, e.g. sglang-omni: versions are its own)
    if m.library:
        out["library"] = m.library  # (a library SGLang runs: a library_log, its versions the library's)
    return out


def _add_placeholders(out: dict[str, Any], fields: dict[str, Any]) -> None:
    """A match's placeholder fields, under the miner's names (``arg_`` before one the catalogue fields use)."""
    for name, value in fields.items():
        out[name if name not in out else f"arg_{name}"] = value


def _with_ray(fields: dict[str, Any], ray: str | None) -> dict[str, Any]:
    if ray:
        fields["ray_actor"] = ray.strip()[1:-1]
    return fields


# ---------------------------------------------------------------- whole files


def parse_source(
    src: Source,
    *,
    fast: bool = True,
    keep_text: bool = False,
    chunk_bytes: int | None = None,
    threads: int | None = None,
) -> ParsedLog:
    """Read one source into a ParsedLog, chunk by chunk.

    On the fast path the vectorised reading of the next chunks (polars, which
    releases the GIL) runs in worker threads while this thread folds and
    parses the current chunk's other lines, so both cores work.
    """
    tune_malloc()
    log = ParsedLog(source=src)
    rp = RecordParser(src.name, shapes=fast)
    slow = _SlowLines(log, rp)
    size = chunk_bytes or CHUNK_BYTES
    if fast:
        starts, batch_frames, access_frames = _read_vectorised(log, slow, src, size, keep_text, threads)
    else:
        _read_lark_only(log, slow, src, size)
        starts, batch_frames, access_frames = [], [], []
    slow.finish()
    if fast:
        log.events.sort(key=_line_of)
    log.batches = _hot_kinds(batch_frames, fastpath.BATCH_KINDS, slow.hot, starts, keep_text, log.kinds)
    log.access = _hot_kinds(access_frames, ("http_access",), slow.hot, starts, keep_text, log.kinds)
    return log


def _read_vectorised(log: ParsedLog, slow: _SlowLines, src: Source, size: int, keep_text: bool, threads: int | None) -> tuple[list[int], list[pl.DataFrame], list[pl.DataFrame]]:
    """The fast path's chunks into ``log``: their rows and counts, the lines they left to the record
    layer folded.  Returns each chunk's first line and its batch and access frames (maybe empty)."""
    starts: list[int] = []
    batch_frames: list[pl.DataFrame] = []
    access_frames: list[pl.DataFrame] = []
    for res, n in _read_ahead(src, size, fastpath.ShapeBook(), keep_text, threads):
        starts.append(log.lines + 1)
        log.lines += n
        log.lines_fast += n - res.slow.height
        batch_frames.append(res.batches)
        access_frames.append(res.access)
        log.kinds.update(res.counts)
        if res.events.height:
            _frame_events(log, res.events, slow.rp)
        slow.fold(res.slow)
        del res
    return starts, batch_frames, access_frames


def _read_lark_only(log: ParsedLog, slow: _SlowLines, src: Source, size: int) -> None:
    """Every line of the source through the record layer (``fast=False``)."""
    next_line = 1
    for chunk in iter_byte_chunks(src, size):
        df = fastpath.split_lines(chunk, next_line)
        del chunk
        next_line += df.height
        log.lines += df.height
        slow.fold(df)
        del df


class _SlowLines:
    """The lines the vectorised path leaves (all of them with ``fast=False``): folded into records,
    parsed into ``log``'s events, batch and access events kept aside in ``hot``.

    The file's outer envelopes are decided from its first lines that SGLang's own envelope does
    not start (up to Unwrapper.SAMPLE of them, within its first DETECT_LINES lines), in both paths
    alike; the lines before the decision wait for it (``pending``)."""

    def __init__(self, log: ParsedLog, rp: RecordParser) -> None:
        self.log = log
        self.rp = rp
        self.folder = Folder()
        self.hot: list[Event] = []  # batch/access lines the record layer parsed: rows of the frames (_hot_kinds)
        self.unwrap: Unwrapper | None = None  # the file's outer envelopes (sglog/read/envelope.py), seen in its first slow lines
        self.outer: dict[int, dict[str, Any]] = {}  # line -> the parts of the envelope stripped from it
        self.pending: list[tuple[list[int], list[str]]] = []
        self.sample: list[str] = []
        self.own = rp.env.match  # SGLang's own envelope (the grammar's, Ray's prefix included) comes first

    def fold(self, slow: pl.DataFrame) -> None:
        """A chunk's slow lines (a frame ``line``, ``raw``)."""
        numbers, raws = slow.get_column("line").to_list(), slow.get_column("raw").to_list()
        if self.unwrap is not None:
            self._emit(numbers, raws)
            return
        self.pending.append((numbers, raws))
        own = self.own
        self.sample.extend(itertools.islice((r for r in raws if not own(r)), Unwrapper.SAMPLE - len(self.sample)))
        if len(self.sample) >= Unwrapper.SAMPLE or (numbers and numbers[-1] >= DETECT_LINES):
            self._decide()

    def finish(self) -> None:
        """After the last chunk: the records still open."""
        if self.unwrap is None:
            self._decide()
        self._drain(self.folder.flush())

    def _decide(self) -> None:
        """The outer envelopes, from the sample; then the lines that waited for them."""
        self.unwrap = Unwrapper.for_lines(self.sample)
        self.sample.clear()
        self.folder.wrap = hard_wrap_width(itertools.chain.from_iterable(raws for _, raws in self.pending), is_start)
        for numbers, raws in self.pending:
            self._emit(numbers, raws)
        self.pending.clear()

    def _emit(self, numbers: list[int], raws: list[str]) -> None:
        """Lines to the folder; the records they close to events."""
        if self.unwrap is not None and self.unwrap.active:
            self._feed_unwrapped(self.unwrap, numbers, raws)
        else:
            feed = self.folder.feed
            for n, raw in zip(numbers, raws):
                feed(n, raw)
        self._drain(self.folder.take())

    def _feed_unwrapped(self, unwrap: Unwrapper, numbers: list[int], raws: list[str]) -> None:
        """Lines to the folder with their outer envelopes stripped (their parts kept in ``outer``)."""
        feed, strip, own, outer = self.folder.feed, unwrap.feed, self.own, self.outer
        for n, raw in zip(numbers, raws):
            if own(raw):
                feed(n, raw)
                continue
            text, parts = strip(raw)
            if parts:
                outer[n] = parts
                feed(n, raw, text)
            else:
                feed(n, raw)

    def _drain(self, records: list[Record]) -> None:
        """Records -> ``log``'s events (batch and access ones to ``hot``)."""
        rp, outer, hot, log = self.rp, self.outer, self.hot, self.log
        events, kinds, hot_kinds = log.events, log.kinds, fastpath.HOT_KINDS
        for rec in records:
            ev = _read_record(rp, rec)
            if outer:
                _add_outer(ev, rec, outer, rp)
            if ev.kind in hot_kinds:
                hot.append(ev)
                continue
            events.append(ev)
            kinds[ev.kind] += 1
            if ev.kind == "blank":
                log.blank += rec.end_line - rec.line + 1


def _add_outer(ev: Event, rec: Record, outer: dict[int, dict[str, Any]], rp: RecordParser) -> None:
    """The parts of the outer envelope stripped from a record's first line (else from its first
    line that had any) as the event's fields (its own win), taken out of ``outer``."""
    parts = outer.pop(rec.line, None)
    for n in range(rec.line + 1, rec.end_line + 1):
        parts = parts or outer.get(n)
        outer.pop(n, None)
    if not parts:
        return
    ev.fields.update((k, v) for k, v in parts.items() if k not in ev.fields)
    if ev.rank is None and isinstance(parts.get("gpu"), int):  # 0.2.x's `[gpu=N] `: the TP rank
        ev.rank = rp.rank(f"TP{parts['gpu']}")
        if ev.kind in BLOCK_KINDS and ev.fields.get("rank_from") != "tag":
            ev.fields.update(rank=parts["gpu"], rank_from="tag")


def _hot_kinds(frames: list[pl.DataFrame], kinds: tuple[str, ...], hot: list[Event], starts: list[int], keep_text: bool, counts: Counter[str]) -> pl.DataFrame:
    """The file's frame of ``kinds`` (batches, or access lines) from its chunks' frames and the
    events of those kinds the record layer parsed (``hot``; counted into ``counts``).

    The frames are kind by kind (fastpath.kind_major): each chunk's rows of a kind are a block
    (a slice), and the file's frame stacks the blocks of each kind in turn (no copy).  ``frames``
    is emptied."""
    by_kind = [_blocks_of(f) if len(kinds) > 1 else {kinds[0]: f} for f in frames]
    frames.clear()
    parts = [_kind_rows(kind, [b.get(kind, _EMPTY) for b in by_kind], hot, starts, keep_text, counts) for kind in sorted(kinds)]
    by_kind.clear()
    return fastpath.concat_frames(parts)


def _kind_rows(kind: str, chunks: list[pl.DataFrame], hot: list[Event], starts: list[int], keep_text: bool, counts: Counter[str]) -> pl.DataFrame:
    """One kind's rows: its chunks' blocks, with the lines of it the record layer parsed (``fast=False``,
    or lines that were not claimed) joined in line order, between slices of them (no copy).  A few
    join the kind's whole frame at once, more join each its chunk's block (so that no sort copies
    the whole frame: _insert_rows sorts when there are many)."""
    mine = [e for e in hot if e.kind == kind]
    if mine:
        counts[kind] += len(mine)
    if len(mine) > _INSERT_MAX and chunks:
        by_chunk: dict[int, list[Event]] = {}
        for e in mine:
            by_chunk.setdefault(bisect.bisect_right(starts, e.line) - 1, []).append(e)
        for i, evs in by_chunk.items():
            chunks[i] = _insert_rows(chunks[i], _hot_frame(evs, keep_text))
        mine = []
    frame = fastpath.concat_frames(chunks)
    if mine:
        frame = _insert_rows(frame, _hot_frame(mine, keep_text))
    return frame


def _read_record(rp: RecordParser, rec: Record) -> Event:
    """``rp(rec)``, or an ``unparsed`` event with the record's lines kept when its message nests
    deeper than the parser's recursion reaches (500 brackets in a server_args value, #28)."""
    try:
        return rp(rec)
    except RecursionError:
        text = "\n".join(rec.raw)
        return make("unparsed", fields={"message": text[:2000]}, file=rp.file, line=rec.line, end_line=rec.end_line, text=text)


def frame_kinds(frame: pl.DataFrame, kinds: tuple[str, ...]) -> Counter[str]:
    """How many rows of each kind a batch or access frame has (``kinds``: the ones it should hold)."""
    if not frame.height:
        return Counter()
    kind = frame.get_column("kind")
    counts = {k: int((kind == k).sum()) for k in kinds}  # (string compares: a group-by costs more)
    if sum(counts.values()) != frame.height:
        counts = dict(frame.group_by("kind").len().iter_rows())
    return Counter({k: n for k, n in counts.items() if n})


_INSERT_MAX = 64
_EMPTY = pl.DataFrame()


def _blocks_of(frame: pl.DataFrame) -> dict[str, pl.DataFrame]:
    """kind -> the rows of a chunk's batch frame (slices of it: it is kind by kind, see read_chunk)."""
    if not frame.height:
        return {}
    blocks = fastpath.kind_blocks(frame)
    if blocks is None:  # (not kind by kind: sorted here, a copy)
        blocks = fastpath.kind_blocks(fastpath.kind_major([frame]))
    assert blocks is not None
    return blocks


def _insert_rows(frame: pl.DataFrame, extra: pl.DataFrame) -> pl.DataFrame:
    """A frame (in line order) with a few more rows put in line order, as slices of the frame
    around them (no copy of the frame's rows: a sort would copy all of them)."""
    if not frame.height or extra.height > _INSERT_MAX:
        return fastpath.concat_frames([frame, extra]).sort("line")
    extra = extra.sort("line")
    cuts = frame.get_column("line").search_sorted(extra.get_column("line"), "left").to_list()
    pieces = []
    prev = 0
    for j, cut in enumerate(cuts):
        if cut > prev:
            pieces.append(frame.slice(prev, cut - prev))
        pieces.append(extra.slice(j, 1))
        prev = cut
    if prev < frame.height:
        pieces.append(frame.slice(prev))
    return fastpath.concat_frames(pieces)


AHEAD = 2  # chunks read ahead beyond one per worker: workers then rarely wait for the caller (1M lines: -10%)


class _Numbering:
    """Where a chunk's lines end: the next chunk's first line number, once its lines are split."""

    def __init__(self) -> None:
        self.ready = threading.Event()
        self.next: int | None = None

    @classmethod
    def start(cls) -> _Numbering:
        n = cls()
        n.next = 1
        n.ready.set()
        return n

    def wait(self) -> int:
        self.ready.wait()
        if self.next is None:
            raise RuntimeError("an earlier chunk could not be split into lines")
        return self.next


def _read_ahead(src: Source, size: int, book: fastpath.ShapeBook, keep_text: bool, threads: int | None) -> Iterator[tuple[fastpath.ChunkResult, int]]:
    """(vectorised reading of a chunk, its line count), in order, ``threads`` chunks at a time.

    A reader thread reads (and decompresses: zlib and zstd release the GIL);
    worker threads split and number the lines and run the polars reading; the caller reads
    the small first chunk, whose batch lines first teach the shape book (``fastpath.teach``:
    the workers wait for that once they have split their chunks' lines), then folds the rest
    meanwhile.  At most ``threads + AHEAD`` chunks are in flight.
    """
    workers = threads if threads is not None else default_workers()
    work = _ChunkReading(src.name, book, keep_text)
    if workers <= 1:
        yield from _read_in_turn(work, src, size, workers)
    else:
        yield from _ReadAhead(work, workers).results(src, size)


def _read_in_turn(work: _ChunkReading, src: Source, size: int, workers: int) -> Iterator[tuple[fastpath.ChunkResult, int]]:
    """One worker: each chunk read by the caller, in turn."""
    prev = _Numbering.start()
    for head, chunk, end in planned_chunks(src, size, workers):
        mine = _Numbering()
        block = [chunk]
        del chunk
        yield work(head, block, end, prev, mine, lead=True)
        prev = mine


class _ChunkReading:
    """A chunk's vectorised reading (a call per chunk, in a worker thread or the caller): its lines
    split and numbered, the shape book taught by the first chunk, then ``_read_checked``."""

    def __init__(self, file: str, book: fastpath.ShapeBook, keep_text: bool) -> None:
        self.file = file
        self.book = book
        self.keep_text = keep_text
        self.taught = threading.Event()  # the first chunk's batch lines have taught the shape book their shapes (fastpath.teach)
        self.unwrap = _VectorUnwrap()  # the file's outer envelopes, decided from the first chunk, stripped in polars

    def __call__(self, head: bytes, block: list[bytes], end: int, prev: _Numbering, mine: _Numbering, lead: bool = False, raw: pl.Series | None = None) -> tuple[fastpath.ChunkResult, int]:
        # (the block comes in a list, emptied here: its bytes are let go once its lines are split,
        # not when the reading of the chunk ends -- the pool's work item keeps its arguments)
        try:
            df = _numbered_lines(head, block, end, raw, prev, mine)
            del raw
            if lead:
                self._teach(df)
            else:
                self.taught.wait()
            return self._read(df), df.height
        finally:
            if lead:
                self.taught.set()

    def _teach(self, df: pl.DataFrame) -> None:
        if not self.taught.is_set():
            self.unwrap.decide(df)
            fastpath.teach(self.unwrap.inner(df), self.book)  # (the batch shapes first: the workers start on them)
            self.taught.set()

    def _read(self, df: pl.DataFrame) -> fastpath.ChunkResult:
        inner = self.unwrap.inner(df)
        res = _read_checked(inner, self.book, self.keep_text, self.file)
        if inner is not df:
            res = self.unwrap.restore(res, df)
        res.counts = frame_kinds(res.batches, fastpath.BATCH_KINDS) + frame_kinds(res.access, ("http_access",))
        return res


def _numbered_lines(head: bytes, block: list[bytes], end: int, raw: pl.Series | None, prev: _Numbering, mine: _Numbering) -> pl.DataFrame:
    """A chunk's lines (split here unless ``raw``), numbered on from the chunk before (``prev``,
    once its lines are split); ``mine`` then tells the next chunk where they end."""
    try:
        if raw is None:
            raw = fastpath.read_lines(block.pop(), end, head)
        first = prev.wait()  # (the chunks before this one were split: its first line's number)
        mine.next = first + len(raw)
    finally:
        mine.ready.set()
    return fastpath.with_line_numbers(raw, first)


class _ReadAhead:
    """Several workers: a reader thread reads the chunks and hands them to a pool of worker threads
    (the first to the caller), whose results come back to the caller in order; at most
    ``workers + AHEAD`` chunks read but not yet handed to the caller."""

    def __init__(self, work: _ChunkReading, workers: int) -> None:
        import queue

        self.work = work
        self.workers = workers
        self.done = object()
        self.stop = threading.Event()
        self.slots = threading.Semaphore(workers + AHEAD)
        self.pending: queue.Queue[Any] = queue.Queue()  # calls and futures of chunk readings, in order; an error; done

    def results(self, src: Source, size: int) -> Iterator[tuple[fastpath.ChunkResult, int]]:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="sglog-read") as pool:
            thread = threading.Thread(target=self._reader, args=(src, size, pool), name="sglog-input", daemon=True)
            thread.start()
            _warm_parser()  # (while the first chunk is read from the input)
            try:
                while True:
                    item = self.pending.get()
                    if item is self.done:
                        break
                    if isinstance(item, BaseException):
                        raise item
                    res = item() if isinstance(item, functools.partial) else item.result()
                    self.slots.release()
                    yield res
            finally:
                self.stop.set()
                self.slots.release()  # wake a reader waiting for a slot
                thread.join()

    def _reader(self, src: Source, size: int, pool: Executor) -> None:
        try:
            self._submit(src, size, pool)
        except BaseException as e:  # an unreadable input: raised in the caller
            self.pending.put(e)

    def _submit(self, src: Source, size: int, pool: Executor) -> None:
        """Each chunk's reading as it is read, once a slot is free.

        A small first chunk's batch lines teach the shape book the common line shapes before the
        workers read full chunks (which then take the whole-line path); they split theirs into
        lines meanwhile (see ``_ChunkReading``).  The first chunk is read by the caller itself,
        which has nothing else to do until it is: its lines are split here, while it loads the
        parser, and the workers meanwhile split the next two chunks into lines.  (Compressed input
        ramps up: the second worker need not wait for a whole block's inflation.  Lines are counted
        by the workers as they split them: each numbers its chunk's lines once the chunk before
        it has been split.  Blocks a command began to read while it imported the rest:
        inputs.prefetch.)"""
        chunks = planned_chunks(src, size, self.workers)
        lead = True
        prev = _Numbering.start()
        while True:
            self.slots.acquire()
            if self.stop.is_set():
                return
            head, chunk, end = next(chunks, (b"", None, 0))
            if chunk is None:
                break
            mine = _Numbering()
            if lead:
                self.pending.put(functools.partial(self.work, head, [], 0, prev, mine, lead=True, raw=fastpath.read_lines(chunk, end, head)))
            else:
                self.pending.put(pool.submit(self.work, head, [chunk], end, prev, mine))
            prev = mine
            lead = False
            del chunk
        self.pending.put(self.done)


class _VectorUnwrap:
    """A file's outer envelopes for the vectorised path: stripped from every line in polars
    before the fast path looks for SGLang's own lines (``Unwrapper.vector_pattern``).  The lines
    it does not claim go back to the record layer whole, which unwraps them one by one; the rows
    it claims keep their physical text."""

    def __init__(self) -> None:
        self.pattern: str | None = None

    def decide(self, df: pl.DataFrame) -> None:
        own = grammar.re_compile(grammar.envelope_regex()).match
        raws = df.get_column("raw").head(DETECT_LINES).to_list()
        found = Unwrapper.for_lines(itertools.islice((r for r in raws if not own(r)), Unwrapper.SAMPLE))
        self.pattern = found.vector_pattern()

    def inner(self, df: pl.DataFrame) -> pl.DataFrame:
        if self.pattern is None:
            return df
        raw = pl.col("raw")
        for _ in range(VECTOR_DEPTH):
            raw = raw.str.replace(self.pattern, "")
        return df.with_columns(raw)

    @staticmethod
    def restore(res: fastpath.ChunkResult, df: pl.DataFrame) -> fastpath.ChunkResult:
        first = df.get_column("line")[0] if df.height else 0
        raws = df.get_column("raw")

        def whole(frame: pl.DataFrame, column: str) -> pl.DataFrame:
            if not frame.height or column not in frame.columns:
                return frame
            return frame.with_columns(raws.gather(frame.get_column("line") - first).alias(column))

        res.slow = whole(res.slow, "raw")
        res.batches, res.access, res.events = (whole(f, "text") for f in (res.batches, res.access, res.events))
        return res


# messages whose parse builds the lexer scanners the first chunk's shape exemplars need
_WARM_MESSAGES = (
    "Decode batch, #running-req: 1, #token: 1, token usage: 0.00, gen throughput (token/s): 1.00, #queue-req: 0",
    "Prefill batch, #new-seq: 1, #new-token: 1, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0",
    'INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK',
)


def _warm_parser() -> None:
    """Load the lark parser and build its common scanners (lark builds a contextual lexer's
    scanners on first use): the first chunk's reading needs them, and the reader thread splits
    that chunk's lines meanwhile."""
    for m in _WARM_MESSAGES:
        messages.parse_message(m)


def _line_of(e: Event) -> int:
    return e.line


def _read_checked(df: pl.DataFrame, book: fastpath.ShapeBook, keep_text: bool, file: str) -> fastpath.ChunkResult:
    """Read a chunk on the vectorised path; re-read one row per shape with lark and retire what differs."""
    for _attempt in range(8):
        res = fastpath.read_chunk(df, book, keep_text)
        bad = False
        for shape, line in res.samples:
            if not _sample_ok(df, res, shape, line, file):
                bad = True
                if shape is None:
                    book.access_ok = False
                else:
                    book.retire(shape)
        if not bad:
            return res
    # still differing after 8 rounds: read this chunk with lark only
    return fastpath.ChunkResult(pl.DataFrame(), pl.DataFrame(), pl.DataFrame(), df.select("line", "raw"), [])


def _sample_ok(df: pl.DataFrame, res: fastpath.ChunkResult, shape: fastpath.Shape | fastpath.TermShape | None, line: int, file: str) -> bool:
    """Does lark (record folder + parser, no memo) read this row as the fast path did?"""
    first = df.get_column("line")[0]
    raws = df.get_column("raw")
    i = line - first
    folder = Folder()
    for k in (i, i + 1):
        if k < len(raws):
            folder.feed(first + k, raws[k])
    recs = folder.flush()
    if not recs or recs[0].line != line or recs[0].end_line != line:
        return False
    ev = RecordParser(file)(recs[0])
    want = ev.to_dict()
    kind = "http_access" if shape is None else shape.kind
    if ev.kind != kind:
        return False
    if kind in fastpath.HOT_KINDS:
        frame = res.access if shape is None else res.batches
        got = fastpath.rows_to_dicts(frame.filter(pl.col("line") == line), file)[0]
        want = {k: v for k, v in want.items() if not isinstance(v, (list, dict)) or k == "rank"}
    else:
        got = _row_event(res.events.filter(pl.col("line") == line).row(0, named=True), file, RecordParser(file)).to_dict()
    for d in (got, want):
        d.pop("text", None)
        d["rank"] = str(d.get("rank"))
    return fastpath.same_values(got, want)


_FRAME_ENVELOPE = {"line", "kind", "ts", "ts_has_date", "rank", "text", *RANK_AXES}


def _row_event(row: dict[str, Any], file: str, rp: RecordParser) -> Event:
    fields = {k: v for k, v in row.items() if k not in _FRAME_ENVELOPE}
    ts = row["ts"]
    return make(
        row["kind"],
        file=file,
        line=row["line"],
        end_line=row["line"],
        ts=ts,
        ts_has_date=row["ts_has_date"],
        rank=rp.rank(row["rank"]),
        text=row["text"],
        fields=fields,
    )


def _frame_events(log: ParsedLog, frame: pl.DataFrame, rp: RecordParser) -> None:
    """Rows of the non-hot families (retractions ...) -> Event objects (appended; sorted by line later).

    Kind by kind: a kind's columns that are never null make its fields dicts without a test per
    value, and the event class is mapped over the columns, with positional arguments.
    """
    from sglog.events import KIND_CLASSES

    file = log.path
    kinds = log.kinds
    for (kind,), part in frame.partition_by("kind", as_dict=True, maintain_order=True).items():
        counts = part.null_count().row(0, named=True)
        cols = [c for c in part.columns if c not in _FRAME_ENVELOPE and counts[c] < part.height]
        col = part.get_column
        values = [col(c).to_list() for c in cols]
        fields: list[dict[str, Any]]
        if not cols:
            fields = [{} for _ in range(part.height)]
        elif all(counts[c] == 0 for c in cols):
            fields = list(map(dict, map(zip, itertools.repeat(cols), zip(*values))))
        else:
            fields = [{c: v for c, v in zip(cols, vs) if v is not None} for vs in zip(*values)]
        lines = col("line").to_list()
        ranks = list(map(rp.rank, col("rank").to_list()))
        # (map: the loop runs in C; ~15% less than a Python loop over tens of thousands of rows)
        log.events.extend(map(KIND_CLASSES[kind], itertools.repeat(file), lines, lines, col("ts").to_list(), col("ts_has_date").to_list(), ranks, col("text").to_list(), fields))
        kinds[kind] += part.height


def _hot_frame(events: list[Event], keep_text: bool) -> pl.DataFrame:
    """Batch/access events parsed by the record layer -> frame rows like the vectorised path's."""
    rows = []
    for e in events:
        row: dict[str, Any] = {"line": e.line, "kind": e.kind, "ts": e.ts, "ts_has_date": e.ts_has_date}
        if e.end_line != e.line:  # a batch line the record layer folded with the next line(s)
            row["end_line"] = e.end_line
        rank = e.rank.to_dict() if e.rank else {}
        for axis in RANK_AXES:
            row[axis] = rank.get(axis)
        row["rank"] = e.rank.label if e.rank else None
        row.update({k: v for k, v in e.fields.items() if not isinstance(v, (list, dict))})
        if keep_text:
            row["text"] = e.text
        rows.append(row)
    frame = pl.DataFrame(rows, infer_schema_length=None)
    if "ts" in frame.columns and frame.schema["ts"] == pl.Datetime("us"):
        frame = frame.with_columns(pl.col("ts").cast(pl.Datetime(fastpath.TS_UNIT)))
    return frame


def parse_file(name: str, **kw: Any) -> ParsedLog:
    return parse_source(open_source(name), **kw)


def parse_files(names: list[str], *, jobs: int | None = None, **kw: Any) -> list[ParsedLog]:
    """Several files, in order; with more than one file and core, one process per file at a time.

    (The commands do not use this: on 2 cores one file's threads already use both, and two
    1M-line files took 5.4 s in two processes against 4.2 s one after the other.  It pays
    with more cores than files need.)

    Each file is read by its own process (its threads and memory stay separate); the
    results come back pickled (frames as Arrow IPC).  Inputs are opened here first, so
    an unreadable file fails before any work starts.  stdin ('-') is spooled first.
    """
    sources = [open_source(n) for n in names]
    jobs = min(len(sources), jobs if jobs is not None else (os.cpu_count() or 1))
    if jobs <= 1:
        return [parse_source(s, **kw) for s in sources]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    kw.setdefault("threads", 1)  # the processes already use the cores
    # spawn, not fork: a forked child of a process whose polars threads hold locks can deadlock
    with ProcessPoolExecutor(max_workers=jobs, mp_context=multiprocessing.get_context("spawn")) as pool:
        futures = [pool.submit(parse_source, s, **kw) for s in sources]
        return [f.result() for f in futures]


_P = ParamSpec("_P")
_R = TypeVar("_R")


def _no_gc(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """Run without the cyclic garbage collector: a parse makes ~100k acyclic objects that it
    keeps, and generation scans of them cost ~5% of the run."""
    import gc

    @functools.wraps(fn)
    def wrapper(*args: _P.args, **kw: _P.kwargs) -> _R:
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kw)
        finally:
            if was:
                gc.enable()

    return wrapper


parse_source = _no_gc(parse_source)


def comparable(d: dict[str, Any]) -> dict[str, Any]:
    """An event dict in a form where the fast path and the lark-only path must agree:
    None-valued fields and the file name dropped, numbers as floats (frame columns may widen)."""
    out: dict[str, Any] = {}
    for k, v in d.items():
        if v is None or k == "file":
            continue
        if isinstance(v, bool) or not isinstance(v, (int, float)) or k in ("line", "end_line"):
            out[k] = v
        else:
            out[k] = float(v)
    return out
