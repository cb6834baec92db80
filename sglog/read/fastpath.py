"""The vectorised path: whole chunks of a file read with polars, lark only for exemplars.

Per chunk (newline-aligned bytes, see sglog/read/inputs.py):

1. **Lines.** ``split_lines`` turns the chunk into a frame ``(line, raw)`` with
   polars' CSV reader (one column, no quoting: a multi-threaded line splitter);
   chunks it could read differently from Python's ``split("\\n")`` (CRLF, NUL,
   the separator byte, a BOM, invalid UTF-8) are split in Python instead.
2. **Claims** (``claims``, ``route``).  A line is read here, outside the record
   folder, only when it certainly is a whole record of its own: it starts a
   record (an SGLang envelope or a uvicorn level), nothing in it makes the
   record layer cut or fold it (ANSI, CR, NUL, a glued progress bar, a
   traceback or args dump), and the record layer cannot continue it with the
   *next* line: that line starts a record too (a record start never continues
   a record), or it is plain ASCII text that ``records._CONT_SGLANG`` does not
   take as a continuation.  Every other line goes to the record layer
   (sglog/read/records.py) and lark, unchanged.
   **Whole-line shapes** come first (``read_lit``): once a chunk has taught the
   book a batch shape, its plain lines (usual envelope, the exemplar's head,
   nothing after the last value but ``", "``) are checked by one regex without capture
   groups over the raw line and their values cut out at ``", "`` -- about
   twice as fast as routing, splitting the envelope and capture groups; the
   lines it does not take go on as below.
3. **Key/value families** (``decode_batch``, ``prefill_batch``, ``retraction``:
   rules ``HEAD colon_kvs``) are read by *shape*: the head and the sequence of
   keys.  The first line of a new shape is parsed by lark (the exemplar); its
   keys, with value classes chosen from the event class's FIELDS table (ints,
   decimals, booleans), become one anchored regex that ``str.extract_groups``
   applies to every line's message, then a polars cast per group.  A value
   outside its class (``5.``, `` 5``, ``12.5%``, a 20-digit int...) does not
   match, and the line goes to lark: the regex decides *which* lines are
   plain, never what they mean.  Rules whose message is one terminal with
   capture groups (the event class's TERMS) are read the same way.
4. **Access lines** use the grammar's flat ``http_access`` rule compiled whole.
5. **Checked.** For every shape used in a chunk, one row is re-read by the
   record folder and lark and compared (sglog/read/parse.py); a mismatch retires
   the shape and its rows go to lark.

Batch and access rows become polars frames; rows of the other families become
``Event`` objects.  Results equal a lark-only parse (``parse_file(fast=False)``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, TypedDict, cast

import polars as pl

from sglog import schema
from sglog.events import KIND_CLASSES, RANK_AXES, Event, Rank, guess, normalise_key, to_bool, to_float, to_int
from sglog.read import grammar, messages, records

if TYPE_CHECKING:
    from polars._typing import SchemaDict

BATCH_KINDS = ("decode_batch", "prefill_batch")
HOT_KINDS = ("prefill_batch", "decode_batch", "http_access")
MAX_NEW_SHAPES = 8  # per chunk and family; lines of further new shapes go to lark
TS_UNIT: Final = "ms"

# value classes of the typed regex groups: (regex, polars dtype).  Unbounded repeats (bounded
# ones make the automaton much larger, 4x slower); ints too long for Int64 are caught after the cast.
# ASCII digits only: Python's int()/float() take other Unicode digits, polars' casts do not.
# value classes: (regex, dtype)
_INT: tuple[str, type[pl.DataType]] = (r"-?[0-9]+", pl.Int64)
_DEC: tuple[str, type[pl.DataType]] = (r"-?[0-9]+\.[0-9]+", pl.Float64)
_NUM: tuple[str, type[pl.DataType]] = (r"-?[0-9]+(?:\.[0-9]+)?", pl.Float64)
_BOOL: tuple[str, type[pl.DataType]] = (r"True|False", pl.Boolean)

# ---------------------------------------------------------------- lines


def split_lines(chunk: bytes | str, first_line: int, end: int | None = None, head: bytes = b"") -> pl.DataFrame:
    """A chunk (``head + chunk[:end]``, ending on a line boundary) -> frame(line: Int64, raw: String).

    Lines are split on ``\\n`` only and keep everything else (``\\r``, NUL,
    ANSI codes); invalid UTF-8 becomes U+FFFD as with ``errors="replace"``.
    ``head`` (no newline in it) begins the first line; bytes after ``end``
    (the start of the next chunk, see ``inputs.iter_raw_chunks``) are not read.
    """
    raw = read_lines(chunk, end, head)
    return with_line_numbers(raw, first_line)


def with_line_numbers(raw: pl.Series, first_line: int) -> pl.DataFrame:
    n = len(raw)
    return pl.DataFrame({"line": pl.int_range(first_line, first_line + n, dtype=pl.Int64, eager=True), "raw": raw})


class _CsvOptions(TypedDict):
    # (typed per key: ``**_CSV_OPTIONS`` is checked against pl.read_csv's parameters)
    has_header: bool
    separator: str
    quote_char: str | None
    new_columns: list[str]
    schema: SchemaDict
    empty_string_is_null: bool
    encoding: str
    raise_if_empty: bool


_CSV_OPTIONS: _CsvOptions = {
    "has_header": False,
    "separator": "\x1f",
    "quote_char": None,
    "new_columns": ["raw"],
    "schema": {"raw": pl.String},
    "empty_string_is_null": False,
    "encoding": "utf8",
    "raise_if_empty": False,
}


def read_lines(chunk: bytes | str, end: int | None = None, head: bytes = b"") -> pl.Series:
    """The lines of ``head + chunk[:end]`` (see ``split_lines``) as a String series ``raw``.

    The CSV reader splits the lines (in Rust, without the GIL, and it counts
    them on the way: nothing has to count them first).  It reads on to the
    end of ``chunk``, and the partial line after ``end`` is dropped; the result is then checked byte for byte: its lines
    and their newlines must add up to ``end`` bytes.  Anything the reader
    might not take as Python's split would (see ``_csv_safe``, a failed
    check) goes through Python's decode and split.
    """
    if isinstance(chunk, str):
        chunk = chunk.encode("utf-8", errors="surrogatepass")
    if end is None:
        end = len(chunk)
    if not end and not head:
        return pl.Series("raw", [], dtype=pl.String)
    start = 0
    lead: list[str] = []
    if head:  # the first line: head + the block up to its first newline (a small copy)
        i = chunk.find(b"\n", 0, end)
        i = end if i < 0 else i
        lead = [(head + chunk[:i]).decode("utf-8", errors="replace")]
        start = min(i + 1, end)
    raw = None
    if end > start and _csv_safe(chunk):  # (the bytes after end too: a CR there only sends this chunk the slow way)
        raw = _csv_lines(chunk, start, end, 1 if head else 0)
    if raw is None:
        text = (chunk if start == 0 and end == len(chunk) else chunk[start:end]).decode("utf-8", errors="replace")
        if text.endswith("\n"):
            text = text[:-1]
        raw = pl.Series("raw", text.split("\n") if end > start else [], dtype=pl.String)
    if lead:
        raw = pl.concat([pl.Series("raw", lead, dtype=pl.String), raw])
    return raw


def _csv_lines(chunk: bytes, start: int, end: int, skip: int, n: int | None = None) -> pl.Series | None:
    """The lines of ``chunk[start:end]`` read by the CSV reader (``skip`` lines before ``start``;
    ``n`` of them, when counted); None when it cannot be sure they are Python's split of those bytes."""
    try:
        if n is None:
            frame = pl.read_csv(chunk, skip_lines=skip, **_CSV_OPTIONS)
            if end < len(chunk) and frame.height:
                frame = frame.head(frame.height - 1)  # the partial line after end (no newline in it)
        else:
            frame = pl.read_csv(chunk, skip_lines=skip, n_rows=n, **_CSV_OPTIONS)
    except (pl.exceptions.PolarsError, UnicodeDecodeError):
        # (without n: a multi-byte character cut at the end of the block, after end, fails the
        # strict decoding; the lines up to end, counted, may still be read)
        if n is None:
            return _csv_lines(chunk, start, end, skip, line_count(chunk[start:end] if start else chunk, end - start))
        return None
    if frame.width != 1:
        return None
    raw = frame.get_column("raw").fill_null("")
    newlines = len(raw) - (0 if chunk[end - 1] == 10 else 1)
    if int(raw.str.len_bytes().sum() or 0) + newlines != end - start:
        return None  # (strict UTF-8: each line's text is its bytes)
    return raw


def line_count(chunk: bytes, end: int | None = None) -> int:
    """Lines in ``chunk[:end]`` (a last one without newline counts)."""
    if end is None:
        end = len(chunk)
    if not end:
        return 0
    return chunk.count(b"\n", 0, end) + (0 if chunk[end - 1] == 10 else 1)


def _csv_safe(chunk: bytes) -> bool:
    """Is the CSV reader worth trying: would it give Python's split on LF?  It drops a BOM and a
    CR before LF (a CRLF file is caught here, at its first CR, before a wasted read).  Other
    bytes need no scan of their own (a pass over 32 MB each, holding the GIL): the reader keeps
    NUL, raises at its separator (``\x1f``: the slow way then), and ``_csv_lines`` checks that
    the lines it got add up to the chunk's bytes."""
    if chunk.startswith(b"\xef\xbb\xbf"):
        return False
    # CR by CR (memchr) rather than a search for CRLF (a two-byte search is much slower);
    # a CRLF file stops at its first CR
    find = chunk.find
    i = find(b"\r")
    while i != -1:
        if chunk[i + 1 : i + 2] in (b"\n", b""):
            return False
        i = find(b"\r", i + 1)
    return True


# ---------------------------------------------------------------- patterns derived from the grammar


@functools.cache
def _patterns() -> dict[str, str]:
    env = grammar.envelope_regex()
    uv = grammar.terminal_pattern("UVICORN_LEVEL")
    ranks = grammar.terminal_pattern("ENV_RANKS")
    return {
        "start": f"(?:{env})|^(?:{uv})",  # a line that certainly starts a record
        "env_inner": f"^(?P<ts>{grammar.terminal_pattern('ENV_TS')})(?P<ranks>{ranks})?$",
        "access": grammar.flat_rule_regex("http_access") + "$",
        # where records.clean may cut a glued progress bar off: before a log head that
        # follows ']', '|', '%' or '.' (a superset, without look-behind)
        "glued": r"[\]|%.] ?[\[(/]",
        "continues": records._CONT_SGLANG.pattern,  # the record layer's test for a line continuing a record
    }


_STD_TS = r"^\d{4}-\d\d-\d\d [0-2]\d:[0-5]\d:[0-5]\d(?: |$)"  # the usual 'YYYY-MM-DD HH:MM:SS', no ms

# texts that make the record layer treat a line specially (cut it, open a block): never claimed
_BLOCK_OPENERS = ("Traceback (most recent call last):", "--- Logging error ---", "server_args=")

# route codes
SLOW, BATCH, ACCESS, OTHER = 0, 1, 2, 3


def route(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``route``: SLOW (record layer) or BATCH / ACCESS / OTHER (claimed).

    A line is claimed only when it certainly is a whole record: it starts a
    record (SGLang envelope or uvicorn level), nothing in it makes the record
    layer cut or fold it, and the next line starts a record too.  OTHER lines
    start with ``[`` and may belong to another key/value family.
    """
    raw = pl.col("raw")
    # (expressions are not shared between columns: materialise each step once)
    if "_claim" not in df.columns:  # (read_chunk may have worked it out already)
        df = df.with_columns(claims(df))
    df = df.with_columns(raw.str.starts_with("[").alias("_env"))
    claim, env = pl.col("_claim"), pl.col("_env")
    df = df.with_columns(
        (claim & env & raw.str.contains(r"\] (?:Decode|Prefill) batch")).alias("_b"),
        (claim & raw.str.contains(" HTTP/", literal=True)).alias("_a"),
    )
    code = (
        pl.when(~claim)
        .then(pl.lit(SLOW, pl.Int8))
        .when(pl.col("_b"))
        .then(pl.lit(BATCH, pl.Int8))
        .when(pl.col("_a"))
        .then(pl.lit(ACCESS, pl.Int8))
        .when(env)
        .then(pl.lit(OTHER, pl.Int8))
        .otherwise(pl.lit(SLOW, pl.Int8))
    )
    return df.with_columns(code.alias("route")).drop("_env", "_claim", "_b", "_a")


def claims(df: pl.DataFrame, starts: pl.Series | None = None) -> pl.Series:
    """``_claim``: is the line certainly a whole record?

    It starts one (SGLang envelope or uvicorn level) and nothing in it makes
    the record layer cut or fold it; and the record layer cannot continue it
    with the next line: that line starts a record too, or it is plain text
    (no ANSI, CR, NUL, odd control or glued progress bar: the record layer
    sees it as it is) that does not look like a continuation
    (``records._CONT_SGLANG``: indented, ``Try to allocate``...).  A line that
    may open a traceback (``Exception in X:``) needs a start after it.  An envelope
    alone (a message that starts with a newline) is never claimed.

    ``starts``: lines already known to be starts (a whole-line shape took them);
    only the other lines are examined.
    """
    pats = _patterns()
    raw = df.get_column("raw")

    def examine(text: pl.Series) -> pl.DataFrame:
        frame = text.to_frame("raw")
        r = pl.col("raw")
        # (an envelope alone, ending in "] ", is a message that starts with a newline: the record
        # layer folds it with the lines after it)
        ok = frame.select(r.str.contains(pats["start"]) & ~r.str.contains(_dirty_regex()) & ~r.str.ends_with("] ")).to_series()
        # a line that is no clean start may still end the record before it (plain text): only
        # those lines are scanned for that (most lines here are starts)
        ends = _on_rows(text, ~ok, ~r.str.contains(_odd_regex()) & ~r.str.contains(pats["continues"]), ok)
        exc = frame.select(r.str.contains("Exception in ", literal=True)).to_series()
        return pl.DataFrame({"ok": ok, "ends": ends, "exc": exc})

    if starts is None:
        ex = examine(raw)
        ok, ends, exc = ex.get_column("ok"), ex.get_column("ends"), ex.get_column("exc")
    else:
        idx = (~starts).arg_true()
        ex = examine(raw.gather(idx))
        ok = starts.clone().scatter(idx, ex.get_column("ok"))
        ends = starts.clone().scatter(idx, ex.get_column("ends"))
        exc = pl.repeat(False, len(raw), dtype=pl.Boolean, eager=True).scatter(idx, ex.get_column("exc"))
    after = pl.when(exc).then(ok.shift(-1, fill_value=False)).otherwise(ends.shift(-1, fill_value=False))
    return pl.select(pl.lit(ok) & after).to_series().alias("_claim")


def _on_rows(raw: pl.Series, rows: pl.Series, test: pl.Expr, base: pl.Series) -> pl.Series:
    """``test`` (a boolean expression on ``pl.col("raw")``) on the lines where ``rows`` is true,
    ``base`` on the others: a scan of only the lines whose answer is still open."""
    idx = rows.arg_true()
    if not len(idx):
        return base
    got = raw.gather(idx).to_frame("raw").select(test).to_series()
    return base.clone().scatter(idx, got)


@functools.cache
def _odd_regex() -> str:
    """Texts that make the record layer's ``clean`` change a line, and any non-ASCII character (where
    Python's and polars' ``\\s``/``\\w`` may differ): such a line is no plain end of the record before it."""
    alts = [grammar.escape(n) for n in ("%|", "% Completed |")] + [r"^\.\.", r"[^\x09\x20-\x7e]"]
    return "|".join(alts)


@functools.cache
def _dirty_regex() -> str:
    """One regex for every text that makes a line unclaimable (literal alternatives scan fast)."""
    alts = [grammar.escape(n) for n in _glue_needles() + _BLOCK_OPENERS] + [r"\x1b", r"\r", r"\x00"]
    if not _glue_needles():
        alts.append(_patterns()["glued"])
    return "|".join(alts)


@functools.cache
def _glue_needles() -> tuple[str, ...]:
    """Literals that every line records.clean would cut contains (records.GLUE_NEEDLES).

    A claimed line starts with a record head, so the text before a glued head
    can only be a progress bar (``..NN%|`` or ``..NN% Completed |``).
    """
    from sglog.read import records

    return records.GLUE_NEEDLES


# ---------------------------------------------------------------- envelope


def with_envelope(df: pl.DataFrame) -> pl.DataFrame:
    """(line, raw, ...) of lines starting with ``[ts RANKS] `` -> + msg, ts, ts_has_date, rank, axes.

    ``msg`` is the text after the envelope.  Only for rows the record layer's
    envelope regex matches (``route`` checked it); ts and ranks are split the
    way that regex splits them and typed the way the record parser types them.
    """
    # the first '] ' ends the envelope (ENV_TS/ENV_RANKS have no ']'); each split or extraction is
    # materialised once (an expression is computed for each column that uses it), in few queries
    # (each query has a fixed cost whatever its size)
    df = df.with_columns(pl.col("raw").str.splitn("] ", 2).alias("_split"))
    parts = pl.col("_split")
    df = df.select(pl.exclude("_split"), parts.struct.field("field_0").str.slice(1).alias("_env"), parts.struct.field("field_1").alias("msg"))
    inner = pl.col("_env")
    if df.select(inner.str.contains(_STD_TS).all()).item():
        df = df.select(pl.exclude("_env"), _std_ts(inner.str.slice(0, 19)), pl.lit(True).alias("ts_has_date"), inner.str.slice(19).alias("_ranks"))
    else:
        df = df.with_columns(inner.str.extract_groups(_patterns()["env_inner"]).alias("_env"))
        ts = pl.col("_env").struct.field("ts")
        has_date = ts.str.len_chars() > 12
        text = ts.str.replace(",", ".", literal=True)
        full = pl.when(has_date).then(text).otherwise(pl.lit("1900-01-01 ") + text)
        parsed = full.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit=TS_UNIT)
        # chrono takes leap seconds (:60), Python's datetime does not
        parsed = pl.when(ts.str.contains(r":[6-9]\d(?:[.,]|$)")).then(pl.lit(None, pl.Datetime(TS_UNIT))).otherwise(parsed)
        df = df.with_columns(parsed.alias("_ts"))
        df = df.select(pl.exclude("_env", "_ts"), pl.col("_ts").alias("ts"), (has_date | pl.col("_ts").is_null()).alias("ts_has_date"), pl.col("_env").struct.field("ranks").alias("_ranks"))
    return _with_ranks(df)


def _std_ts(text: pl.Expr) -> pl.Expr:
    """'YYYY-MM-DD HH:MM:SS' (seconds 00-59) -> datetime, null where Python's datetime refuses it too."""
    return text.str.strptime(pl.Datetime(TS_UNIT), "%Y-%m-%d %H:%M:%S", strict=False).alias("ts")


def _with_ranks(df: pl.DataFrame) -> pl.DataFrame:
    """``_ranks`` (' TP3', None) -> rank label + one column per axis, as Rank.parse reads them.

    A chunk has a handful of distinct tags: each row's tag becomes its index among them (an enum
    cast), which picks the row's label and axis values from small tables (a string join per
    column, ``replace_strict``, cost twice as much)."""
    tags = sorted(t for t in df.get_column("_ranks").unique().to_list() if t is not None)
    labels, axes = _rank_table(tuple(t for t in tags if t))
    # (two queries: each has a fixed cost whatever its size, and a chunk has five such frames; the
    # index is materialised once, as an expression is computed for each column that uses it)
    df = df.with_columns(pl.col("_ranks").cast(pl.Enum(tags)).to_physical().alias("_ranks"))
    code = pl.col("_ranks")
    cols = [pl.lit(pl.Series("rank", [labels.get(t) for t in tags], dtype=pl.String)).gather(code).alias("rank")]
    # axes no line has stay null literals
    cols += [pl.lit(pl.Series(a, [axes[a].get(t) for t in tags], dtype=pl.Int64)).gather(code).alias(a) for a in RANK_AXES if a in axes]
    cols += [pl.lit(None, pl.Int64).alias(a) for a in RANK_AXES if a not in axes]
    return df.select(pl.exclude("_ranks"), *cols)


@functools.lru_cache(maxsize=256)
def _rank_table(tags: tuple[str, ...]) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Rank tag texts -> (label of each, {axis: value of each text that has it}) for the axes used."""
    labels: dict[str, str] = {}
    axes: dict[str, dict[str, int]] = {}
    for t in tags:
        rank = Rank.parse(t)
        if rank is None:
            continue
        labels[t] = rank.label
        for a in RANK_AXES:
            v = getattr(rank, a)
            if v is not None:
                axes.setdefault(a, {})[t] = v
    return labels, axes


# ---------------------------------------------------------------- key/value families

# rules ``KIND: HEAD colon_kvs`` read here: kind -> (head terminal, whether the head's text is part
# of the shape: its wording becomes a field)
FAMILIES = {
    "decode_batch": ("DECODE_HEAD", False),
    "prefill_batch": ("PREFILL_HEAD", False),
    "retraction": ("RETRACT_HEAD", True),
}


@functools.cache
def _family_heads() -> dict[str, str]:
    """kind -> head regex, for the families whose head terminal the grammar still has."""
    out = {}
    for kind, (term, _lit) in FAMILIES.items():
        try:
            out[kind] = grammar.terminal_pattern(term)
        except KeyError:
            continue
    return out


@dataclass
class Shape:
    """One line shape of a family: its extraction regexes and how to type each group."""

    kind: str
    regex: str  # anchored, on the message (text after the envelope); group 'head' + v0..vN
    names: list[str | None]  # field name of each value group (None: overridden by a later key)
    dtypes: list[Any]
    const: dict[str, Any] = field(default_factory=dict)  # fields not from the key/values or the head
    order: list[str] = field(default_factory=list)  # field order of the lark parse
    lit: LitPlan | None = None  # the whole-line reading of this shape's plain lines (see LitPlan)


@dataclass
class LitPlan:
    """A shape's plain lines read without capture groups.

    Most batch lines have the usual envelope (``[YYYY-MM-DD HH:MM:SS TP3] ``),
    the exemplar's exact head (``Decode batch, ``) and nothing after the last
    value but, as 0.4.9-0.5.8 print, ``", "``.  ``regex`` (no groups: the fast
    DFA) checks the whole line; the values are then cut out by splitting at
    ``","`` (a one-byte pattern: a third cheaper than ``", "``): the envelope,
    keys and values have no comma, and the head none but its last ``", "``, so
    part ``i + head_commas`` is `` key_i: value_i`` (a trailing ``", "`` adds a
    last part, which is not read), and the value is what follows the key's
    ``" key: "`` (a byte prefix: cheaper than a character slice).  A line the
    regex does not take goes on to the capture-group reading (``Shape.regex``).
    """

    regex: str  # anchored on the raw line
    head: str  # the literal head text
    keys: list[str]  # key texts, one per value (the part is f"{key}: {value}")
    head_commas: int  # 1 if the head ends with ", " (it is a part of its own), else 0


class ShapeBook:
    """The shapes of one file (derived from lark parses of exemplars); shared by the reader threads."""

    def __init__(self) -> None:
        self.shapes: dict[str, list[Shape]] = {k: [] for k in FAMILIES}
        self.terms: list[TermShape] = []
        self.not_terms: set[str] = set()  # message forms (digit runs as 0) whose lark parse is no term shape
        self.retired: set[str] = set()
        self.access_ok = True

    def derive(self, kinds: tuple[str, ...], msg: str) -> Shape | None:
        """The shape of this exemplar (a known one if another thread found it first), or None."""
        shape = derive_shape(kinds, msg)
        if shape is None or shape.regex in self.retired:
            return None
        for known in self.shapes[shape.kind]:
            if known.regex == shape.regex:
                return known
        self.shapes[shape.kind] = self.shapes[shape.kind] + [shape]
        return shape

    def retire(self, shape: Shape | TermShape) -> None:
        self.retired.add(shape.regex)
        if isinstance(shape, TermShape):
            self.terms = [s for s in self.terms if s.regex != shape.regex]
        else:
            self.shapes[shape.kind] = [s for s in self.shapes[shape.kind] if s.regex != shape.regex]

    def derive_term(self, msg: str) -> TermShape | None:
        shape = derive_term_shape(msg)
        if shape is None or shape.regex in self.retired:
            return None
        for known in self.terms:
            if known.regex == shape.regex:
                return known
        self.terms = self.terms + [shape]
        return shape


def derive_shape(kinds: tuple[str, ...], msg: str) -> Shape | None:
    """The shape of a message of one of these key/value families, from its lark parse; None if it
    is of another kind or cannot be vectorised."""
    parsed = messages.parse_message(msg)
    if parsed is None or parsed[0] not in kinds:
        return None
    kind = parsed[0]
    head_pat = _family_heads().get(kind)
    if head_pat is None:
        return None
    kv = _kv_pairs(kind, msg)
    if kv is None:
        return None
    head, pairs = kv
    groups = _kv_groups(KIND_CLASSES[kind].FIELDS, pairs)
    if groups is None:
        return None
    parts, names, dtypes, vclasses = groups
    head_re = grammar.escape(head) if FAMILIES[kind][1] else head_pat
    body = f"(?P<head>{head_re})" + ", ".join(parts) + "(?:, ?)?$"  # lark's END after a value
    names = _later_keys_win(names)
    head_fields = messages.head_fields(kind, head) if kind in BATCH_KINDS else {}
    typed = {n for n in names if n}
    fields = {k: v for k, v in parsed[1].items() if not isinstance(v, (list, dict))}
    const = {k: v for k, v in fields.items() if k not in typed and k not in head_fields}
    shape = Shape(kind, "^" + body, names, dtypes, const, list(fields))
    if not _reads_same(shape, msg, head_fields, fields):  # the exemplar itself must come out the same
        return None
    shape.lit = _lit_plan(kind, head, pairs, vclasses)
    return shape


def _kv_pairs(kind: str, msg: str) -> tuple[str, list[tuple[str, str]]] | None:
    """A ``HEAD colon_kvs`` message's lark parse -> (its head's text, its (key, value) texts); None
    if lark reads it otherwise or it has no key/value."""
    from lark import Token, Tree

    try:
        tree = grammar.parser().parse(msg)
    except Exception:
        return None
    if not isinstance(tree, Tree) or tree.data != kind or len(tree.children) != 2:
        return None
    head_tok, kvs = tree.children
    if not isinstance(head_tok, Token) or not isinstance(kvs, Tree):
        return None
    pairs: list[tuple[str, str]] = []
    for child in kvs.children:
        if isinstance(child, Tree):
            if child.data != "colon_kv" or len(child.children) < 2:
                return None
            pairs.append((str(child.children[0]), str(child.children[-1])))
    if not pairs:
        return None
    return str(head_tok), pairs


def _kv_groups(table: dict[str, Callable[[str], Any]], pairs: list[tuple[str, str]]) -> tuple[list[str], list[str | None], list[Any], list[str | None]] | None:
    """(key, value) pairs -> (the regex part of each pair, the field name and dtype of each value
    group v0..vN, the value class regex of each pair: None for an 'a -> b' pair); None if a value
    has no class (``_value_class``)."""
    parts: list[str] = []
    names: list[str | None] = []
    dtypes: list[Any] = []
    vclasses: list[str | None] = []
    for key, value in pairs:
        got = _kv_group(table, key, value, len(names))
        if got is None:
            return None
        part, group_names, group_dtypes, vclass = got
        parts.append(part)
        names += group_names
        dtypes += group_dtypes
        vclasses.append(vclass)
    return parts, names, dtypes, vclasses


def _kv_group(table: dict[str, Callable[[str], Any]], key: str, value: str, g: int) -> tuple[str, list[str | None], list[Any], str | None] | None:
    """One pair's regex part (its groups numbered from ``g``), field names, dtypes and value class."""
    name = normalise_key(key)
    if name == "new_token_ratio" and "->" in value:
        # Event.typed splits 'a -> b' into new_token_ratio_before / new_token_ratio
        if not re.fullmatch(rf"{_DEC[0]} -> {_DEC[0]}", value):
            return None
        part = grammar.escape(key) + f": (?P<v{g}>{_DEC[0]}) -> (?P<v{g + 1}>{_DEC[0]})"
        return part, ["new_token_ratio_before", "new_token_ratio"], [pl.Float64, pl.Float64], None
    cls = _value_class(table.get(name), value)
    if cls is None:
        return None
    return grammar.escape(key) + f": (?P<v{g}>{cls[0]})", [name], [cls[1]], cls[0]


def _later_keys_win(names: list[str | None]) -> list[str | None]:
    """The field names of the value groups with each repeated name kept only at its last key (as in
    Event.typed): None in the earlier places."""
    out = list(names)
    seen: set[str | None] = set()
    for i in range(len(out) - 1, -1, -1):
        if out[i] in seen:
            out[i] = None
        seen.add(out[i])
    return out


def _reads_same(shape: Shape, msg: str, head_fields: dict[str, Any], fields: dict[str, Any]) -> bool:
    """Whether the shape's regex reads the exemplar (``msg``) as lark did (``fields``)."""
    m = grammar.re_compile(shape.regex).match(msg)
    if m is None:
        return False
    mine: dict[str, Any] = dict(head_fields)
    for i, (name, dt) in enumerate(zip(shape.names, shape.dtypes)):
        if name:
            mine[name] = _py_cast(m.group(f"v{i}"), dt)
    mine.update(shape.const)
    return same_values(mine, fields)


def _lit_plan(kind: str, head: str, pairs: list[tuple[str, str]], vclasses: list[str | None]) -> LitPlan | None:
    """The whole-line reading of a batch shape, when its head and keys allow splitting at ', '."""
    if kind not in BATCH_KINDS or None in vclasses or re.search(r"[0-9]", head):
        return None  # (a digit in the head varies per line, and so do the head's fields; an 'a -> b' value is two groups)
    commas = head.count(",")  # (the lines are split at every comma: the head may end with ", " only)
    if "] " in head or ": " in head or commas > 1 or (commas and not head.endswith(", ")):
        return None
    keys = [k for k, _v in pairs]
    if any("," in k or ": " in k or not k for k in keys):
        return None
    values = [f"{grammar.escape(k)}: (?:{vc})" for (k, _v), vc in zip(pairs, vclasses)]
    regex = _std_envelope() + grammar.escape(head) + ", ".join(values) + "(?:, )?$"
    return LitPlan(regex, head, keys, 1 if commas else 0)


def _value_class(conv: Callable[[str], Any] | None, value: str) -> tuple[str, Any] | None:
    """The regex class and dtype of one value: only classes (that the exemplar's value is in)
    whose polars cast gives what ``conv`` gives."""
    if conv is to_int:
        cands = [_INT]
    elif conv is to_float:
        cands = [_NUM]
    elif conv is to_bool:
        cands = [_BOOL]
    elif conv is None or conv is guess:  # unknown key: typed by its look (events.guess)
        cands = [_INT, _DEC, _BOOL]
    else:
        return None
    for cls in cands:
        if re.fullmatch(cls[0], value):
            return cls
    return None


def _py_cast(text: str, dtype: type[pl.DataType]) -> Any:
    if dtype == pl.Int64:
        return int(text)
    if dtype == pl.Float64:
        return float(text)
    return text == "True"


# literal starts of the batch heads: which rows to try a kind's shapes on (the regexes decide)
_NEEDLES = {"decode_batch": "Decode batch", "prefill_batch": "Prefill batch"}


def _lit_regex(shape: Shape | None, access_re: str | None) -> str:
    """The whole-line regex of one of read_lit's readings: a shape's (only shapes with a ``lit``
    are read so), or the access reading's (None: there only when ``access_re`` is)."""
    return cast(str, access_re) if shape is None else cast(LitPlan, shape.lit).regex


def read_lit(df: pl.DataFrame, book: ShapeBook, keep_text: bool) -> tuple[list[pl.DataFrame], list[pl.DataFrame], pl.DataFrame, list[tuple[Shape | None, int]]]:
    """Lines (line, raw) of a chunk -> (batch frames and access frames of the lines whole-line
    shapes take, the other lines with their ``_claim`` worked out, samples).  See ``LitPlan``;
    plain access lines have one whole-line shape of their own (``_access_lit_regex``)."""
    shapes: list[Shape | None] = [sh for k in BATCH_KINDS for sh in book.shapes.get(k, []) if sh.lit is not None]
    access_re = _access_lit_regex() if book.access_ok else None
    if access_re is not None and shapes:  # (once a chunk has been read: the first chunk checks the access reading)
        shapes.append(None)
    if not shapes or not df.height:
        return [], [], df, []
    raw = df.get_column("raw")
    # each shape's regex on the lines no shape before it took (one whole-line scan per line that matches)
    hits = [raw.str.contains(_lit_regex(shapes[0], access_re))]
    anyhit = hits[0]
    none = pl.repeat(False, len(raw), dtype=pl.Boolean, eager=True)
    for sh in shapes[1:]:
        h = _on_rows(raw, ~anyhit, pl.col("raw").str.contains(_lit_regex(sh, access_re)), none)
        hits.append(h)
        anyhit = anyhit | h
    if not anyhit.any():
        return [], [], df, []
    claim = claims(df, anyhit)
    df = df.with_columns(claim)
    frames: list[pl.DataFrame] = []
    access: list[pl.DataFrame] = []
    samples: list[tuple[Shape | None, int]] = []
    taken = None
    for sh, h in zip(shapes, hits):
        mine = h & claim
        if taken is not None:
            mine = mine & ~taken  # (shapes' lines do not overlap; first one wins regardless)
        if not mine.any():
            continue
        if sh is None:
            frame, ok = _access_lit_frame(df.filter(mine), keep_text), None
        else:
            frame, ok = _lit_frame(df.filter(mine), sh, keep_text)
        if ok is not None:  # some lines have a value the capture-group reading must judge (frame: without them)
            mine = mine.clone().scatter(mine.arg_true().filter(~ok), False)
        if frame.height:
            (access if sh is None else frames).append(frame)
            samples.append((sh, frame.get_column("line")[-1]))
        taken = mine if taken is None else (taken | mine)
    if taken is None:
        return [], [], df, []
    return frames, access, df.filter(~taken), samples


_STD_ENV = r"^\[[0-9]{4}-[0-9]{2}-[0-9]{2} [0-2][0-9]:[0-5][0-9]:[0-5][0-9](?:RANKS)?\] "


def _std_envelope() -> str:
    """The usual envelope, ASCII only (byte offsets = char offsets up to its ``] ``)."""
    return _STD_ENV.replace("RANKS", grammar.terminal_pattern("ENV_RANKS").replace(r"\d", "[0-9]"))


@functools.cache
def _access_lit_regex() -> str | None:
    """A plain access line, without capture groups: the usual envelope, the uvicorn level and
    spaces, the client, the request (its path without spaces or quotes), status and phrase.
    A subset of the grammar's ``http_access``; None if that rule no longer has the known form."""
    try:
        level = grammar.terminal_pattern("UVICORN_LEVEL")
        client = grammar.terminal_pattern("CLIENT_SEP")
    except KeyError:
        return None
    name = client[: -len(' - "')]
    if not level.endswith(r":\s+") or not client.endswith(' - "') or " " in name or not name.endswith("*"):
        return None
    # a client of at least one character: lark's level takes all the spaces, so with none the
    # line is no access line for lark (a regex would backtrack one space into ' - "')
    return _std_envelope() + level[: -len(r"\s+")] + " +" + name[:-1] + '+ - "' + r'[A-Z]+ [^\s"]+ HTTP/[0-9.]+" [0-9]{3}(?: [^\n]*)?$'


_LEAD = ["line", "kind", "ts", "ts_has_date", "rank", *RANK_AXES]  # the envelope columns of a frame, in order
ACCESS_FIELDS = ["client", "method", "path", "http_version", "status", "phrase"]


def _lit_envelope(kind: str, pos: pl.Expr) -> list[pl.Expr]:
    """line, kind, ts, date flag and the rank tags (``_ranks``, for ``_with_ranks``) of lines that
    start with the usual envelope; ``pos``: where its ``] `` is."""
    raw = pl.col("raw")
    return [
        pl.col("line"),
        pl.lit(kind).alias("kind"),
        _std_ts(raw.str.slice(1, 19)),
        pl.lit(True).alias("ts_has_date"),
        raw.str.slice(20, pos - 20).alias("_ranks"),
    ]


def _access_lit_frame(rows: pl.DataFrame, keep_text: bool) -> pl.DataFrame:
    """Rows the access line shape matched -> a frame like ``_access_frame``'s: split at the
    first two quotes (``[env] LEVEL:   client - `` / ``METHOD path HTTP/v`` / `` status phrase``)."""
    raw = pl.col("raw")
    # (each split materialised once: an expression used by several columns is computed for each
    # of them; the request has exactly two spaces, as the shape's regex says)
    rows = rows.with_columns(raw.str.splitn('"', 3).alias("_parts"), raw.str.find("] ", literal=True).alias("_pos"))
    part = pl.col("_parts").struct.field
    rows = rows.with_columns(part("field_1").str.split_exact(" ", 2).alias("_req"))
    req = pl.col("_req").struct.field
    tail = part("field_2")
    cols = [
        *_lit_envelope("http_access", pl.col("_pos")),
        part("field_0").str.split(" ").list.get(-3).alias("client"),
        req("field_0").alias("method"),
        req("field_1").alias("path"),
        req("field_2").str.slice(5).alias("http_version"),
        tail.str.slice(1, 3).cast(pl.Int64).alias("status"),
        tail.str.slice(4).str.strip_chars().alias("phrase"),
    ]
    if keep_text:
        cols.append(raw.alias("text"))
    return _with_ranks(rows.select(cols)).select(*_LEAD, *ACCESS_FIELDS, *(["text"] if keep_text else []))


def _lit_frame(rows: pl.DataFrame, shape: Shape, keep_text: bool) -> tuple[pl.DataFrame, pl.Series | None]:
    """Rows a whole-line shape matched -> (typed frame like _apply_shapes', rows whose ints fit Int64 or None if all).

    The line is split once into a struct of its comma-separated parts (see ``LitPlan``;
    ``split_exact``: no list column to index); an int too long for Int64 (Python's int has no limit) casts to null, and only
    then are the rows told apart (the regex allows nothing else a cast could refuse).
    """
    plan = shape.lit
    assert plan is not None
    raw = pl.col("raw")
    parts = raw.str.split_exact(",", len(plan.keys) + plan.head_commas - 1)
    if plan.head_commas:  # '[env] HEAD' is part 0: its '] ' sits before the head (the envelope is ASCII)
        pos = parts.struct.field("field_0").str.len_bytes() - (len(plan.head[:-2].encode()) + 2)
    else:
        pos = raw.str.find("] ", literal=True)
    rows = rows.with_columns(pos.alias("_pos"), parts.alias("_parts"))
    part = pl.col("_parts").struct.field
    pos = pl.col("_pos")
    values: dict[str, pl.Expr] = {}
    ints: list[str] = []
    for i, (key, name, dt) in enumerate(zip(plan.keys, shape.names, shape.dtypes)):
        if not name:
            continue  # a later key of the same name wins
        if i == 0 and not plan.head_commas:  # '[env] HEADkey: value'
            v = part("field_0").str.slice(pos + (2 + len(plan.head) + len(key) + 2))
        else:
            v = part(f"field_{i + plan.head_commas}").str.strip_prefix(f" {key}: ")  # (bytes: no character count)
        if dt == pl.Boolean:
            values[name] = (v == "True").alias(name)
        else:
            values[name] = v.cast(dt, strict=False).alias(name)
            if dt == pl.Int64:
                ints.append(name)
    for k, val in shape.const.items():
        values[k] = pl.lit(val).alias(k)
    order = {k: i for i, k in enumerate(shape.order)}
    env = _lit_envelope(shape.kind, pos)
    if keep_text:
        env.append(raw.alias("text"))
    out = rows.select(*env, *[values[k] for k in sorted(values, key=lambda k: order.get(k, len(order)))])
    ok = None
    if any(out.get_column(c).null_count() for c in ints):
        ok = pl.select(pl.all_horizontal([out.get_column(c).is_not_null() for c in ints])).to_series()
        out = out.filter(ok)
    out = _with_ranks(out)
    lead = _LEAD + (["text"] if keep_text else [])
    return out.select(*lead, *[c for c in out.columns if c not in lead]), ok


def read_family(kinds: tuple[str, ...], rows: pl.DataFrame, book: ShapeBook, keep_text: bool) -> tuple[pl.DataFrame, pl.DataFrame, list[tuple[Shape, int]]]:
    """Claimed rows (line, raw) of some families -> (typed frame in line order, rows left for lark, samples).

    The envelope is split off first (a regex over the message alone is one-pass,
    about twice as fast as one over the whole line).  Rows are grouped by the
    literal start of their kind's head; each group meets its kind's known
    shapes, then new shapes from lark exemplars.
    """
    todo = with_envelope(rows)
    groups: list[tuple[tuple[str, ...], pl.DataFrame]] = []
    if len(kinds) > 1 and all(k in _NEEDLES for k in kinds):
        msg = pl.col("msg")
        for k in kinds:
            part = todo.filter(msg.str.starts_with(_NEEDLES[k]))
            if part.height:
                groups.append(((k,), part))
        if sum(g.height for _k, g in groups) < todo.height:
            groups.append((kinds, todo.filter(~pl.any_horizontal([msg.str.starts_with(_NEEDLES[k]) for k in kinds]))))
    else:
        groups.append((kinds, todo))
    frames: list[pl.DataFrame] = []
    samples: list[tuple[Shape, int]] = []
    rest_parts: list[pl.DataFrame] = []
    for ks, part in groups:
        shapes = [sh for k in ks for sh in book.shapes.get(k, [])]
        if shapes:
            got, part, smp = _apply_shapes(part, shapes, keep_text)
            if got is not None:
                frames.append(got)
                samples += smp
        new = 0
        while part.height:
            if new >= MAX_NEW_SHAPES:
                rest_parts.append(part)
                break
            new += 1
            first = part.get_column("line")[0]
            shape = book.derive(ks, part.get_column("msg")[0])
            if shape is not None:
                got, part, smp = _apply_shapes(part, [shape], keep_text)
                if got is not None:
                    frames.append(got)
                    samples += smp
            if part.height and part.get_column("line")[0] == first:  # the exemplar itself is not taken
                rest_parts.append(part.head(1))
                part = part.slice(1)
    frame = _concat_sorted(frames)
    rest = pl.concat([r.select("line", "raw") for r in rest_parts]).sort("line") if rest_parts else rows.select("line", "raw").clear()
    return frame, rest, samples


def _apply_shapes(todo: pl.DataFrame, shapes: list[Shape], keep_text: bool) -> tuple[pl.DataFrame | None, pl.DataFrame, list[tuple[Shape, int]]]:
    """(rows some shape takes, typed, in line order; the other rows; a sample line per shape used).

    Each shape's regex runs over every row (failing fast on other shapes' rows);
    a row takes the first shape that matches, as if they were tried in turn.
    """
    msg = todo.get_column("msg")
    parts = [_shape_columns(msg, j, shape) for j, shape in enumerate(shapes)]
    wide = pl.concat(parts, how="horizontal") if len(parts) > 1 else parts[0]
    del parts
    hits = [pl.col(f"{j}:_hit") for j in range(len(shapes))]
    wide, overlap = _first_match(wide, hits)
    counts = wide.select([h.sum() for h in hits]).row(0)
    used = [j for j, c in enumerate(counts) if c]
    if not used:
        return None, todo, []
    mask = wide.select(pl.any_horizontal([hits[j] for j in used]).alias("m")).to_series()
    names = _field_names(shapes, used)
    cols = [_pick([(j, pl.lit(shapes[j].kind)) for j in used], hits, overlap).alias("kind")]
    cols += [_pick(_field_sources(shapes, used, n), hits, overlap).alias(n) for n in names]
    batch = [j for j in used if shapes[j].kind in BATCH_KINDS]
    if batch:
        cols.append(_pick([(j, pl.col(f"{j}:head")) for j in batch], hits, overlap).alias("_head"))
    typed_cols = wide.select(cols)
    line = todo.get_column("line")
    samples = [(shapes[j], line.filter(wide.get_column(f"{j}:_hit"))[-1]) for j in used]  # the last row each shape took
    del wide
    out = _with_envelope_columns(todo, typed_cols, keep_text or any(shapes[j].kind not in BATCH_KINDS for j in used))
    if mask.all():
        left = todo.clear()
    else:
        out = out.filter(mask)
        left = todo.filter(~mask)
    if batch:
        out = _join_head_fields(out, names)
    return out, left, samples


def _shape_columns(msg: pl.Series, j: int, shape: Shape) -> pl.DataFrame:
    """Shape ``j``'s reading of every row's message: ``j:_hit`` (the regex matches and each int fits
    Int64), ``j:head`` and a typed column ``j:name`` per field (null where the regex does not match)."""
    groups = msg.str.extract_groups(shape.regex).struct.unnest()
    hit = pl.col("head").is_not_null()
    exprs = []
    for i, (name, dt) in enumerate(zip(shape.names, shape.dtypes)):
        if not name:
            continue
        v = pl.col(f"v{i}")
        if dt == pl.Boolean:
            exprs.append((v == "True").alias(f"{j}:{name}"))
        else:
            typed = v.cast(dt, strict=False)
            exprs.append(typed.alias(f"{j}:{name}"))
            if dt == pl.Int64:  # too long for Int64 (Python's int has no limit; the cast gives null): leave to lark
                hit = hit & typed.is_not_null()
    return groups.select(hit.fill_null(False).alias(f"{j}:_hit"), pl.col("head").alias(f"{j}:head"), *exprs)


def _first_match(wide: pl.DataFrame, hits: list[pl.Expr]) -> tuple[pl.DataFrame, bool]:
    """(the shapes' columns with each row a hit of the first shape that matches it only, whether
    any row matched several shapes)."""
    overlap = False
    if len(hits) > 1:
        overlap = wide.select((pl.sum_horizontal(hits) > 1).any()).item()
        if overlap:  # a row takes the first shape that matches
            first = [hits[0]] + [hits[j] & ~pl.any_horizontal(hits[:j]) for j in range(1, len(hits))]
            wide = wide.with_columns([f.alias(f"{j}:_hit") for j, f in enumerate(first)])
    return wide, overlap


def _pick(j_values: list[tuple[int, pl.Expr]], hits: list[pl.Expr], overlap: bool) -> pl.Expr:
    """One output column from its value in each shape ``j`` that has it: that value, or the first
    non-null of them."""
    # (a shape's groups are null on rows it does not match; rows it matched but does not
    # take are filtered out below -- unless another shape took them: then mask)
    if overlap:
        j_values = [(j, pl.when(hits[j]).then(e)) for j, e in j_values]
    elif any(isinstance(e, pl.Expr) and e.meta.is_literal() for _j, e in j_values):
        j_values = [(j, pl.when(hits[j]).then(e) if e.meta.is_literal() else e) for j, e in j_values]
    return j_values[0][1] if len(j_values) == 1 else pl.coalesce([e for _j, e in j_values])


def _field_names(shapes: list[Shape], used: list[int]) -> list[str]:
    """The fields of the shapes used: lark's field order, shape by shape."""
    names: list[str] = []
    for j in used:
        rank = {k: i for i, k in enumerate(shapes[j].order)}
        mine = [n for n in shapes[j].names if n] + list(shapes[j].const)
        for n in sorted(mine, key=lambda k: rank.get(k, len(rank))):
            if n not in names:
                names.append(n)
    return names


def _field_sources(shapes: list[Shape], used: list[int], n: str) -> list[tuple[int, pl.Expr]]:
    """Field ``n`` in each shape used that has it: a constant or its typed column."""
    srcs = []
    for j in used:
        if n in shapes[j].const:
            srcs.append((j, pl.lit(shapes[j].const[n])))
        elif n in shapes[j].names:
            srcs.append((j, pl.col(f"{j}:{n}")))
    return srcs


def _with_envelope_columns(todo: pl.DataFrame, typed_cols: pl.DataFrame, text: bool) -> pl.DataFrame:
    """The rows' envelope columns (and their text) beside their typed columns, line and kind first."""
    env = [pl.col("line"), pl.col("ts"), pl.col("ts_has_date"), pl.col("rank"), *[pl.col(a) for a in RANK_AXES]]
    if text:
        env.append(pl.col("raw").alias("text"))
    out = pl.concat([todo.select(env), typed_cols], how="horizontal")
    return out.select("line", "kind", *[c for c in out.columns if c not in ("line", "kind")])


def _join_head_fields(out: pl.DataFrame, names: list[str]) -> pl.DataFrame:
    """Batch rows -> + the fields of their heads (``messages.head_fields``, one per distinct head;
    not those the key/values give), without the ``_head`` column."""
    pairs = out.select("kind", "_head").unique().rows()
    head_rows = [{"kind": k, "_head": h, **messages.head_fields(k, h)} for k, h in pairs if h is not None]
    head_cols = [c for c in sorted({k for r in head_rows for k in r} - {"kind", "_head"}) if c not in names]
    if head_cols:
        hdf = pl.DataFrame(head_rows, infer_schema_length=None).select("kind", "_head", *head_cols)
        out = out.join(hdf, on=["kind", "_head"], how="left", maintain_order="left")
    return out.drop("_head")


# ---------------------------------------------------------------- single-terminal rules (TERMS)


@dataclass
class TermShape:
    """A rule whose message is one terminal with capture groups, named by the event class's TERMS."""

    kind: str
    regex: str  # ^(?:terminal)$ on the message
    groups: list[tuple[int, str, str, Any]]  # (group index, field name, value class regex, dtype)
    const: dict[str, Any] = field(default_factory=dict)
    order: list[str] = field(default_factory=list)
    literal: str | None = None  # the whole message, for a shape of one exact text (see literal_term_shape)


def derive_term_shape(msg: str) -> TermShape | None:
    """The term shape of a message, from its lark parse; None if it is not one (or cannot be vectorised)."""
    parsed = messages.parse_message(msg)
    if parsed is None:
        return None
    kind, fields = parsed
    cls = KIND_CLASSES.get(kind)
    if cls is None or any(isinstance(v, (list, dict)) for v in fields.values()):
        return None
    return _single_term_shape(msg, kind, fields, cls) or literal_term_shape(msg, kind, fields)


def _single_term_shape(msg: str, kind: str, fields: dict[str, Any], cls: type[Event]) -> TermShape | None:
    if not getattr(cls, "TERMS", None):
        return None
    from lark import Token, Tree

    try:
        tree = grammar.parser().parse(msg)
    except Exception:
        return None
    if not isinstance(tree, Tree) or tree.data != kind or len(tree.children) != 1 or not isinstance(tree.children[0], Token):
        return None
    tok = tree.children[0]
    spec = cls.TERMS.get(tok.type)
    if spec is None or str(tok) != msg:
        return None
    names, _consts = spec
    try:
        pattern = grammar.terminal_pattern(tok.type)
        m = grammar.compiled(tok.type).fullmatch(msg)
    except Exception:
        return None
    if m is None or any(n and n.startswith("*") for n in names):
        return None
    groups = []
    mine: dict[str, Any] = {}
    for i, raw in enumerate(m.groups()):
        name = names[i] if i < len(names) else None
        if name is None or name in mine:
            continue
        if raw is None:
            return None
        vc = _value_class(cls.FIELDS.get(name), raw)
        if vc is None:
            return None
        groups.append((i, name, vc[0], vc[1]))
        mine[name] = _py_cast(raw, vc[1])
    const = {k: v for k, v in fields.items() if k not in mine}
    mine.update(const)
    if not same_values(mine, fields):
        return None
    return TermShape(kind, f"^(?:{pattern})$", groups, const, list(fields))


def literal_term_shape(msg: str, kind: str, fields: dict[str, Any]) -> TermShape | None:
    """A shape of one exact message text with no digit, repeated word for word (``WARNING:  Invalid
    HTTP request received.``, thousands of times when something probes the port): its fields are
    those of its lark parse (a message's parse depends on its text alone, ``RecordParser.message``)."""
    if re.search(r"[0-9]", msg) or kind in HOT_KINDS:
        return None
    return TermShape(kind, "^" + grammar.escape(msg) + "$", [], dict(fields), list(fields), literal=msg)


def read_terms(rows: pl.DataFrame, book: ShapeBook) -> tuple[pl.DataFrame, pl.DataFrame, list[tuple[TermShape, int]]]:
    """Claimed rows (line, raw) with an envelope -> (event rows of term shapes, rows left for lark, samples)."""
    frames: list[pl.DataFrame] = []
    samples: list[tuple[TermShape, int]] = []
    todo = with_envelope(rows)
    shape: TermShape | None  # (the known shapes, then new ones: derive_term may give none)
    for shape in book.terms:
        if not todo.height:
            break
        got, todo = _apply_term(todo, shape)
        if got is not None:
            frames.append(got)
            samples.append((shape, got.get_column("line")[-1]))
    if todo.height:
        # new exemplars, the most frequent message forms (digit runs as one 0) first: the lines
        # worth reading here are the many alike (a rare line costs lark once either way)
        msg = pl.col("msg")
        forms = todo.select(msg, msg.str.replace_all("[0-9]+", "0").alias("_form"))
        if book.not_terms:
            forms = forms.filter(~pl.col("_form").is_in(pl.Series(list(book.not_terms), dtype=pl.String).implode()))
        top = forms.group_by("_form").agg(msg.first(), pl.len().alias("n")).filter(pl.col("n") >= 2).sort("n", "_form", descending=[True, False]).head(MAX_NEW_SHAPES)
        for form, text in zip(top.get_column("_form").to_list(), top.get_column("msg").to_list()):
            if not todo.height:
                break
            shape = book.derive_term(text)
            if shape is not None:
                got, todo = _apply_term(todo, shape)
                if got is not None:
                    frames.append(got)
                    samples.append((shape, got.get_column("line")[-1]))
            if (todo.get_column("msg") == text).any():  # the exemplar is not taken: do not pick its like again
                book.not_terms.add(form)
    return _concat_sorted(frames), todo.select("line", "raw"), samples


def _apply_term(todo: pl.DataFrame, shape: TermShape) -> tuple[pl.DataFrame | None, pl.DataFrame]:
    msg = pl.col("msg")
    if shape.literal is not None:
        hit = msg == shape.literal
        ext = todo
    else:
        hit = msg.str.contains(shape.regex)
        g = msg.str.extract_groups(shape.regex)
        ext = todo.with_columns(g.alias("_g"))
        fields = [f.name for f in cast(pl.Struct, ext.schema["_g"]).fields]  # (extract_groups: a struct)
    casts = []
    for i, name, vclass, dt in shape.groups:
        v = pl.col("_g").struct.field(fields[i])
        ok = v.str.contains(f"^(?:{vclass})$")
        typed = v == "True" if dt == pl.Boolean else v.cast(dt, strict=False)
        if dt == pl.Int64:  # (too long for Int64: null)
            ok = ok & typed.is_not_null()
        hit = hit & ok.fill_null(False)
        casts.append(typed.alias(f"_t_{name}"))
    mask = ext.select(hit.fill_null(False)).to_series()
    n = mask.sum()
    if n == 0:
        return None, todo
    got = ext.filter(mask)
    left = todo.filter(~mask)
    values: dict[str, pl.Expr] = {}
    for _i, name, _vc, _dt in shape.groups:
        values[name] = pl.col(f"_t_{name}").alias(name)
    for k, val in shape.const.items():
        values[k] = pl.lit(val).alias(k)
    rank = {k: i for i, k in enumerate(shape.order)}
    cols = [pl.col("line"), pl.lit(shape.kind).alias("kind"), pl.col("ts"), pl.col("ts_has_date"), pl.col("rank"), *[pl.col(a) for a in RANK_AXES], pl.col("raw").alias("text")]
    out = (got.with_columns(casts) if casts else got).select(*cols, *[values[k] for k in sorted(values, key=lambda k: rank.get(k, len(rank)))])
    return out, left


# ---------------------------------------------------------------- access lines


def read_access(rows: pl.DataFrame, keep_text: bool) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Claimed access rows (line, raw) -> (typed frame, rows left for lark)."""
    ext = _access_envelope(rows)
    ext = ext.with_columns(pl.col("msg").str.extract_groups("^" + _patterns()["access"]).alias("_m")).unnest("_m")
    # (an empty client: lark's level takes all the spaces and reads no access line there)
    hit = (ext.get_column("http_status").is_not_null() & (ext.get_column("client_sep") != ' - "')).fill_null(False)
    if not hit.any():
        return pl.DataFrame(), rows
    if hit.all():
        return _access_frame(ext, keep_text), rows.clear()
    return _access_frame(ext.filter(hit), keep_text), ext.filter(~hit).select("line", "raw")


def _access_frame(ok: pl.DataFrame, keep_text: bool) -> pl.DataFrame:
    cols = [
        pl.col("line"),
        pl.lit("http_access").alias("kind"),
        pl.col("ts"),
        pl.col("ts_has_date"),
        pl.col("rank"),
        *[pl.col(a) for a in RANK_AXES],
        pl.col("client_sep").str.strip_suffix(' - "').alias("client"),
        pl.col("http_method").alias("method"),
        pl.col("http_path").alias("path"),
        pl.col("http_version"),
        pl.col("http_status").cast(pl.Int64).alias("status"),
        pl.col("http_phrase").fill_null("").str.strip_chars().alias("phrase"),
    ]
    if keep_text:
        cols.append(pl.col("raw").alias("text"))
    return ok.select(cols)  # (columns: _LEAD, ACCESS_FIELDS, text)


def _access_envelope(rows: pl.DataFrame) -> pl.DataFrame:
    """Access rows with any envelope (or none: uvicorn's own format) -> + msg and the typed envelope."""
    env = pl.col("raw").str.starts_with("[")
    with_env = rows.filter(env)
    bare = rows.filter(~env)
    parts = []
    if with_env.height:
        parts.append(with_envelope(with_env))
    if bare.height:
        parts.append(
            bare.with_columns(
                pl.col("raw").alias("msg"),
                pl.lit(None, dtype=pl.Datetime(TS_UNIT)).alias("ts"),
                pl.lit(True).alias("ts_has_date"),
                pl.lit(None, dtype=pl.String).alias("rank"),
                *[pl.lit(None, dtype=pl.Int64).alias(a) for a in RANK_AXES],
            )
        )
    return parts[0] if len(parts) == 1 else pl.concat(parts, how="diagonal_relaxed").sort("line")


# ---------------------------------------------------------------- one chunk


@dataclass
class ChunkResult:
    batches: pl.DataFrame  # prefill/decode rows
    access: pl.DataFrame  # http_access rows
    events: pl.DataFrame  # rows of the other families (retraction ...), to become Event objects
    slow: pl.DataFrame  # (line, raw): for the record layer, in line order
    samples: list[tuple[Shape | TermShape | None, int]]  # rows to re-read with lark (None: an access row)
    counts: Counter[str] = field(default_factory=Counter)  # rows of each kind in batches and access (parse.frame_kinds)


def _after_envelope(heads: list[str]) -> str:
    """A regex for lines whose message (after the first ``] ``) begins with one of these heads."""
    return r"^\[[^\]]*\] (?:" + "|".join(f"(?:{h})" for h in heads) + ")"


TEACH_LINES = 2000  # batch lines of the first chunk that teach the shape book (fastpath.teach)


def teach(df: pl.DataFrame, book: ShapeBook) -> None:
    """Derive the shapes of these lines' batch lines (the first ``TEACH_LINES``) into the book, without
    reading the lines, so that the workers can start on whole-line shapes before the first chunk is
    read (that reading is ~0.1 s, mostly fixed costs; this, a few lark parses).

    Each line that no shape known so far matches is an exemplar (as in ``read_family``; at most
    ``MAX_NEW_SHAPES`` per kind).  Whatever this misses, a chunk's own reading derives; whatever it
    gets wrong, a chunk's lark samples retire (parse._read_checked)."""
    heads = _family_heads()
    kinds = [k for k in BATCH_KINDS if k in heads and k in _NEEDLES]
    if not kinds or not df.height:
        return
    raw = df.get_column("raw")
    lines = raw.filter(raw.str.contains(_after_envelope([_NEEDLES[k] for k in kinds]))).head(TEACH_LINES).to_list()
    known: dict[str, list[re.Pattern[str]]] = {k: [grammar.re_compile(sh.regex) for sh in book.shapes.get(k, [])] for k in kinds}
    tries = dict.fromkeys(kinds, 0)
    for line in lines:
        msg = line.partition("] ")[2]  # (the first '] ' ends the envelope, as in with_envelope)
        kind = next(k for k in kinds if msg.startswith(_NEEDLES[k]))
        if tries[kind] >= MAX_NEW_SHAPES or any(r.match(msg) for r in known[kind]):
            continue
        tries[kind] += 1
        shape = book.derive((kind,), msg)
        if shape is not None:
            known[kind].append(grammar.re_compile(shape.regex))


def read_chunk(df: pl.DataFrame, book: ShapeBook, keep_text: bool) -> ChunkResult:
    """frame(line, raw) -> the vectorised reading of one chunk."""
    samples: list[tuple[Shape | TermShape | None, int]] = []
    smp: Sequence[tuple[Shape | TermShape | None, int]]
    batch_frames, access_frames, df, smp = read_lit(df, book, keep_text)
    samples += smp
    df = route(df)
    parts = {k[0]: v.drop("route") for k, v in df.partition_by("route", as_dict=True, maintain_order=True).items()}
    empty = df.select("line", "raw").clear()
    slow_parts = [parts.get(SLOW, empty)]
    heads = _family_heads()
    rows = parts.get(BATCH)
    if rows is not None:
        kinds = tuple(k for k in BATCH_KINDS if k in heads)
        if kinds:
            frame, rest, smp = read_family(kinds, rows, book, keep_text)
            batch_frames.append(frame)
            slow_parts.append(rest)
            samples += smp
        else:
            slow_parts.append(rows)
    batches = kind_major(batch_frames)
    event_frames: list[pl.DataFrame] = []
    left = parts.get(OTHER)
    others = [k for k in heads if k not in BATCH_KINDS]
    if left is not None and others:
        fam = left.get_column("raw").str.contains(_after_envelope([heads[k] for k in others]))
        mine, left = left.filter(fam), left.filter(~fam)
        if mine.height:
            frame, rest, smp = read_family(tuple(others), mine, book, keep_text)
            if frame.height:
                event_frames.append(frame)
            slow_parts.append(rest)
            samples += smp
    if left is not None and left.height:
        frame, rest, smp = read_terms(left, book)
        if frame.height:
            event_frames.append(frame)
        slow_parts.append(rest)
        samples += smp
    rows = parts.get(ACCESS)
    if rows is not None:
        if book.access_ok:
            frame, rest = read_access(rows, keep_text)
            slow_parts.append(rest)
            if frame.height:
                access_frames.append(frame)
                samples.append((None, frame.get_column("line")[-1]))
        else:
            slow_parts.append(rows)
    access = _concat_sorted([f for f in access_frames if f.height])
    events = _concat_sorted(event_frames)
    slow_parts = [p for p in slow_parts if p.height]
    slow = pl.concat(slow_parts).sort("line") if len(slow_parts) > 1 else (slow_parts[0] if slow_parts else empty)
    return ChunkResult(batches, access, events, slow, samples)


def concat_frames(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Stack frames diagonally (missing columns become nulls, dtypes widen), without copying the
    columns: polars keeps the chunks and makes a missing column one null scalar, not a filled
    column.  (A hand-made version of that took 2-8 ms a call in frame queries; a chunk makes
    several such calls: this takes 0.2-0.6 ms, with the same columns, dtypes, values and size.)"""
    frames = [f for f in frames if f.height]
    if not frames:
        return pl.DataFrame()
    if len(frames) == 1:
        return frames[0]
    return pl.concat(frames, how="diagonal_relaxed", rechunk=False)


def kind_major(frames: list[pl.DataFrame]) -> pl.DataFrame:
    """Batch rows -> one frame *kind by kind*: the rows of each kind (in name order: decode, then
    prefill) together, each kind's in line order.  A run's decode rows are then a slice of the
    file's frame, not a copy (millions of rows: 5M lines, ~270 MB; #7), and a chunk's frames of
    whole-line shapes (one kind each, in line order) are stacked without a sort."""
    by_kind: dict[str, list[pl.DataFrame]] = {}
    for f in frames:
        if not f.height:
            continue
        kinds = f.get_column("kind")
        first = kinds[0]
        if kinds[-1] == first and (kinds == first).all():
            by_kind.setdefault(first, []).append(f)
        else:
            for (k,), part in f.partition_by("kind", as_dict=True, maintain_order=True).items():
                by_kind.setdefault(k, []).append(part)
    # (each kind's columns in one chunk, so that all of a frame's columns are cut at the same
    # rows: the file's frame then stacks the chunks' blocks as they are -- with columns cut
    # differently, e.g. the time parsed in pieces, polars would copy them whole.  Only such
    # columns are copied here, not the whole frame)
    return concat_frames([_concat_sorted(by_kind[k]).rechunk() for k in sorted(by_kind)])


def kind_blocks(frame: pl.DataFrame) -> dict[str, pl.DataFrame] | None:
    """The blocks of a kind-major frame (see ``kind_major``): kind -> its rows, a slice in line
    order; None if the frame is not kind by kind (a run of several files is in time order).
    (Kinds in name order make the kind column sorted: its blocks are found by bisection; polars
    knows the column sorted once the parse has stacked its constant blocks.)"""
    if not frame.height or "kind" not in frame.columns:
        return None
    kinds = frame.get_column("kind")
    if kinds.null_count() or not kinds.is_sorted():
        return None
    out: dict[str, pl.DataFrame] = {}
    at = 0
    while at < frame.height:
        k = kinds[at]
        end = kinds.search_sorted(k, "right")
        out[k] = frame.slice(at, end - at)
        at = end
    if not all(b.get_column("line").is_sorted() for b in out.values()):
        return None
    return out


def _concat_sorted(frames: list[pl.DataFrame]) -> pl.DataFrame:
    if not frames:
        return pl.DataFrame()
    if len(frames) == 1:
        return frames[0] if frames[0].get_column("line").is_sorted() else frames[0].sort("line")
    return concat_frames(frames).sort("line")


# ---------------------------------------------------------------- rows as event dicts


def rows_to_dicts(frame: pl.DataFrame, file: str) -> list[dict[str, Any]]:
    """Batch/access rows as event dicts (the same shape as Event.to_dict; null fields left out)."""
    out: list[dict[str, Any]] = []
    if frame.height == 0:
        return out
    skip = set(schema.ENVELOPE_COLUMNS) | set(RANK_AXES) | {"end_line"}
    for row in frame.iter_rows(named=True):
        rank = {a: row[a] for a in RANK_AXES if row.get(a) is not None}
        ts = row.get("ts")
        d = {
            "kind": row["kind"],
            "file": file,
            "line": row["line"],
            "end_line": row.get("end_line") or row["line"],  # (only rows folded with later lines have one)
            "ts": ts.isoformat(sep=" ") if ts else None,
            "ts_has_date": row.get("ts_has_date", True) if ts else True,
            "rank": rank or None,
        }
        for k, v in row.items():
            if k in skip or v is None:
                continue
            d[k] = v
        d["text"] = row.get("text", "")
        out.append(d)
    return out


def same_values(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Equal as event fields: None-valued keys ignored, 1 == 1.0 (a frame column may be Float64), bools strict."""
    a = {k: v for k, v in a.items() if v is not None}
    b = {k: v for k, v in b.items() if v is not None}
    if a.keys() != b.keys():
        return False
    for k, x in a.items():
        y = b[k]
        if (isinstance(x, bool) or isinstance(y, bool)) and type(x) is not type(y):
            return False
        if x != y:
            return False
    return True
