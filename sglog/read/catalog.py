"""The message catalogue: names the SGLang messages that the grammar does not.

``data/catalog.json.gz`` lists every message first line SGLang can print, mined from its source
across all releases (see its schema in :func:`load`).  A catalogued line is recognised honestly:
a specific message, with its source module and line, level, and the releases that have it.  A
match names a message; it does not prove the log is SGLang's (``shared`` marks text vLLM prints
too, so only ``sglang_only`` matches count as evidence).

Matching: each kept template's longest constant piece (its first ``KEY_CHARS`` characters) goes
into one Aho-Corasick automaton (pyahocorasick); a message's candidates are the templates whose
piece occurs in it; each is checked first by its constant head, tail and pieces (plain string
operations), and only then by its full-match regex, compiled on first use.  Chosen by measurement
over a google-re2 ``Set`` (its compile of the whole catalogue takes over a second, and with
templates of many ``.*?`` its matching fell off the DFA and was slower still) and over a
pure-Python index on the first constant word (several times slower, and blind to templates that
start with a placeholder).  The automaton is built on the first ``match``, not on ``load``.

Loading: what the matcher needs from the templates (which are kept, in what order, their key
pieces: :func:`build_index`) is computed by the generator and written at the head of the
shipped file, so that loading reads the index and leaves the templates undecoded until a
message's candidates need them (one JSON object a line); a catalogue without an index (an older
file, a test's) computes it on load.

>>> cat = Catalogue({"schema": 1, "releases": ["0.4.0", "0.5.0"], "templates": [
...     {"t": "Load weight begin. avail mem={} GB", "p": ["avail_mem"], "l": "info", "k": "log",
...      "s": "srt/model_executor/model_runner.py:234", "v": [0, 1]}]})
>>> m = cat.match("Load weight begin.  avail mem=75.12 GB")
>>> m.source, m.versions, m.fields
('srt/model_executor/model_runner.py:234', ('0.4.0', '0.5.0'), {'avail_mem': 75.12})
"""

from __future__ import annotations

import bisect
import gzip
import json
import re
import threading
import zlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import ahocorasick

from sglog.errors import InternalError

SCHEMA = 1

MIN_CONSTANT = 7
"""A template needs at least this many constant letters/digits to be kept.

Below it, templates are generic text that names nothing (``Error: {}``, ``Got {} {}``).  Taken
from the 6-8 range measured when the catalogue was designed; not tuned on the shipped file."""

MIN_CONSTANT_LEADING = 15
"""A template that starts with a placeholder needs this many constant letters/digits (its
constant tail), since its first characters say nothing about the message."""

MIN_CONSTANT_LIBRARY = 12
MIN_WORDS_LIBRARY = 2
"""A library's template (tools/catalog/mine.py LIBRARIES) needs this many constant letters/digits,
in at least MIN_WORDS_LIBRARY words of three letters or more: a library's generic wordings
(``welcome {}``, ``Loading {} {}``, ``Heartbeat``) would otherwise take the lines of SGLang (or of
another server) that the catalogue does not have for the library's, and count them recognised."""

KEY_CHARS = 16
"""Characters of a template's longest constant piece that the prefilter looks for."""

# Why a template is dropped (the keys of Catalogue.dropped).
PLACEHOLDERS_ONLY = "placeholders-only"
TOO_FEW_CONSTANTS = "too-few-constants"
LEADING_PLACEHOLDER = "leading-placeholder"

_PLACEHOLDER = None  # in a template's parts: a `{}`
_BRACES = re.compile(r"(\{\{|\}\}|\{\})")
_NOT_ALNUM = re.compile(r"[\W_]+")
_ENOUGH = re.compile(rf"(?:[\W_]*[^\W_]){{{MIN_CONSTANT_LEADING}}}")  # enough for any template
_WORD = re.compile(r"[A-Za-z]{3,}")
_INT = re.compile(r"[+-]?\d+")
_FLOAT = re.compile(r"[+-]?(?:\d+\.\d*|\.\d+|\d+(?=[eE]))(?:[eE][+-]?\d+)?")
_VERSION = re.compile(r"v?(\d+(?:\.\d+)*)(?:[._-]?(a|alpha|b|beta|c|rc|pre|preview|post|dev)[._-]?(\d*))?(?:\+.*)?", re.I)
_PHASES = {"dev": 0, "a": 1, "alpha": 1, "b": 2, "beta": 2, "c": 3, "rc": 3, "pre": 3, "preview": 3, "post": 5}
_FINAL = 4


class CatalogueError(InternalError):
    """The shipped message catalogue is missing or cannot be read (a broken install of sglog)."""


@dataclass(frozen=True, slots=True)
class CatalogueMatch:
    """A message named by the catalogue.

    ``fields`` maps each placeholder's name to its text, typed when it is a clean ``int``,
    ``float`` (``1.5``, ``1e-3``) or ``True``/``False``; anything else (``1.2 GB``, ``None``,
    lists) stays a string.  ``versions`` is the first and last mined release having the message;
    ``package``: the package of SGLang's project that prints it when it is not SGLang itself
    (``sglang-omni``), whose releases ``versions`` then names; ``library``: the library SGLang runs
    (``uvicorn``, ``transformers`` ...: tools/catalog/mine.py ``LIBRARIES``) that logs it, whose
    releases ``versions`` names: someone else's message, which says nothing of SGLang.
    """

    template: str
    source: str
    level: str
    kind: str
    versions: tuple[str, str]
    shared: str | None
    fields: dict[str, Any]
    package: str | None = None
    library: str | None = None

    @property
    def sglang_only(self) -> bool:
        """No other program mined (vLLM, a library) prints this first line: evidence the log is SGLang's."""
        return self.shared is None and self.library is None


def normalise(message: str) -> str:
    """A message as templates are written: whitespace runs collapsed to one space, trimmed.

    >>> normalise("  Load weight\\tbegin.   avail mem=1 GB ")
    'Load weight begin. avail mem=1 GB'
    """
    return " ".join(message.split())


def version_key(version: str) -> tuple[tuple[int, ...], int, int] | None:
    """A release string as a sortable key, or None when it is not a version.

    Handles ``0.5.10``, ``0.5.10.post1``, ``0.4.0rc2``, ``v0.3.0``, ``0.4.1+cu121`` (local part
    ignored); trailing zeros do not count (``0.5`` == ``0.5.0``).

    >>> version_key("0.4.6.post5") > version_key("0.4.6") > version_key("0.4.6rc1")
    True
    >>> version_key("0.5.10") > version_key("0.5.9"), version_key("main")
    (True, None)
    """
    m = _VERSION.fullmatch(version.strip())
    if m is None:
        return None
    nums = [int(x) for x in m.group(1).split(".")]
    while len(nums) > 1 and nums[-1] == 0:
        nums.pop()
    phase = _PHASES[m.group(2).lower()] if m.group(2) else _FINAL
    return tuple(nums), phase, int(m.group(3) or 0)


def _parts(template: str) -> list[str | None]:
    """A template's literal pieces and placeholders (None), with ``{{``/``}}`` undoubled.

    A lone brace (a mining slip) stays literal.

    >>> _parts("a {{b}} {}: {}")
    ['a {b} ', None, ': ', None]
    """
    if "{" not in template and "}" not in template:
        return [template]
    parts: list[str | None] = []
    buf = ""
    for i, piece in enumerate(_BRACES.split(template)):
        if i % 2 == 0:
            buf += piece
        elif piece == "{}":
            if buf:
                parts.append(buf)
                buf = ""
            parts.append(_PLACEHOLDER)
        else:
            buf += piece[0]
    if buf:
        parts.append(buf)
    return parts


def _pattern(parts: list[str | None]) -> str:
    """The full-match regex of a template's parts.

    A placeholder matches any text, shortest first, empty included (an f-string of an empty
    value prints nothing); a space beside a placeholder is optional, since an empty or
    space-edged value collapses with it in the normalised message.
    """
    out: list[str] = []
    g = 0
    for i, part in enumerate(parts):
        if part is _PLACEHOLDER:
            out.append(f"(?P<_{g}>.*?)")
            g += 1
            continue
        lead = i > 0 and part.startswith(" ")
        trail = i + 1 < len(parts) and part.endswith(" ")
        core = part[1 if lead else 0 : len(part) - 1 if trail else len(part)]
        if lead:
            out.append(" ?")
        if core or not (lead and trail):  # a lone " " between two placeholders is one " ?"
            out.append(re.escape(core))
        if trail and (core or not lead):
            out.append(" ?")
    return "(?s)" + "".join(out)


def _typed(value: str) -> Any:
    if _INT.fullmatch(value):
        return int(value)
    if _FLOAT.fullmatch(value):
        return float(value)
    if value == "True":
        return True
    if value == "False":
        return False
    return value


def _field_names(names: list[str], count: int) -> tuple[str, ...]:
    """One unique, non-empty name per placeholder (``arg{i}`` where the miner gave none)."""
    out: list[str] = []
    seen: set[str] = set()
    for i in range(count):
        name = str(names[i]) if i < len(names) and names[i] else f"arg{i}"
        base, k = name, 2
        while name in seen:
            name, k = f"{base}_{k}", k + 1
        seen.add(name)
        out.append(name)
    return tuple(out)


def _verdict(template: str) -> str | None:
    """Why a template is too generic to keep, or None to keep it.

    Braces are not letters or digits, so the raw text counts the constant ones.

    >>> _verdict("{}: {}"), _verdict("Error: {}"), _verdict("{} is ready now"), _verdict("Load weight begin")
    ('placeholders-only', 'too-few-constants', 'leading-placeholder', None)
    """
    alnum = len(_NOT_ALNUM.sub("", template))
    if alnum == 0:
        return PLACEHOLDERS_ONLY
    if alnum < MIN_CONSTANT:
        return TOO_FEW_CONSTANTS
    if template.startswith("{}") and alnum < MIN_CONSTANT_LEADING:
        return LEADING_PLACEHOLDER
    return None


def _library_verdict(template: str) -> str | None:
    """``_verdict``, stricter, for a library's template (``MIN_CONSTANT_LIBRARY``).

    >>> _library_verdict("welcome {}"), _library_verdict("Heartbeat"), _library_verdict("server started on [{}]:{}")
    ('too-few-constants', 'too-few-constants', None)
    """
    why = _verdict(template)
    if why is not None:
        return why
    constant = _BRACES.sub(" ", template)
    if len(_NOT_ALNUM.sub("", constant)) < MIN_CONSTANT_LIBRARY or len(_WORD.findall(constant)) < MIN_WORDS_LIBRARY:
        return TOO_FEW_CONSTANTS
    return None


class _Template:
    """A kept template; made on first use, with its cheap checks and its regex."""

    __slots__ = ("raw", "text", "first", "last", "parts", "head", "tail", "cores", "names", "regex")

    def __init__(self, raw: Mapping[str, Any]) -> None:
        self.raw = raw
        self.text: str = raw["t"]
        self.first, self.last = raw["v"]
        parts = self.parts = _parts(self.text)
        # what any matching text has: its constant head and tail and every constant piece (the
        # spaces beside a placeholder are optional); checked before the regex, they turn most
        # candidates away in a few string operations and spare the regex's backtracking
        self.head = parts[0].rstrip(" ") if parts[0] is not _PLACEHOLDER else ""
        self.tail = parts[-1].lstrip(" ") if parts[-1] is not _PLACEHOLDER else ""
        self.cores = tuple(c for c in (p.strip(" ") for p in parts[1:-1] if p is not _PLACEHOLDER) if c)
        self.names: tuple[str, ...] | None = None
        self.regex: re.Pattern[str] | None = None

    def fullmatch(self, text: str) -> dict[str, Any] | None:
        """The typed fields when ``text`` is this message, else None."""
        parts = self.parts
        if len(parts) == 1:
            return {} if text == parts[0] else None
        if not (text.startswith(self.head) and text.endswith(self.tail) and all(c in text for c in self.cores)):
            return None
        if self.regex is None:
            self.regex = re.compile(_pattern(parts))
        m = self.regex.fullmatch(text)
        if m is None:
            return None
        if self.names is None:
            self.names = _field_names(list(self.raw.get("p") or ()), len(m.groups()))
        return {name: _typed(value) for name, value in zip(self.names, m.groups())}


TAIL_CONSTANT_CHARS = 16  # constant letters and digits a cut message's rest keeps, to name it
TAIL_PIECE_CHARS = 8  # the shortest last piece match_tail indexes a template by


def _last_piece(template: str) -> str | None:
    """A template's last constant piece of ``TAIL_PIECE_CHARS`` or more (spaces trimmed), if any."""
    pieces: list[str] = template.split("{}") if "{{" not in template and "}}" not in template else [p for p in _parts(template) if p is not None]
    return next((p for p in map(str.strip, reversed(pieces)) if len(p) >= TAIL_PIECE_CHARS), None)


def _tail_fields(t: _Template, text: str) -> dict[str, Any] | None:
    """The fields after the cut when ``text`` is template ``t`` from inside one of its
    placeholders on (the earliest cut that matches: the longest rest), else None."""
    parts = t.parts
    names = _field_names(list(t.raw.get("p") or ()), sum(1 for p in parts if p is _PLACEHOLDER))
    seen = 0
    for k, part in enumerate(parts):
        if part is not _PLACEHOLDER:
            continue
        seen += 1
        rest = parts[k + 1 :]
        if not rest or sum(ch.isalnum() for p in rest if p is not _PLACEHOLDER for ch in p) < TAIL_CONSTANT_CHARS:
            return None  # (a later cut keeps fewer constants still)
        m = re.fullmatch("(?s).*?" + _pattern(rest)[4:], text)
        if m is not None:
            return {name: _typed(value) for name, value in zip(names[seen:], m.groups())}
    return None


def _key_piece(template: str) -> str:
    """A template's longest constant piece, trimmed of the spaces a placeholder may swallow
    (its head when that is already ``KEY_CHARS`` long: the common case, and cheap)."""
    head = template.partition("{")[0]
    if len(head) > KEY_CHARS:
        return head
    if "{{" in template or "}}" in template:
        pieces = [p for p in _parts(template) if p is not _PLACEHOLDER]
    else:
        pieces = template.split("{}")
    return max([p.strip() for p in pieces], key=len)


def build_index(templates: Sequence[Mapping[str, Any]], releases: int, path: str = "<data>") -> dict[str, Any]:
    """What a catalogue's matcher needs from its templates, computed once: ``order``, the kept
    templates' positions in preference order (the most constant characters but spaces first, then
    SGLang's project's before a library's, then the newest, then the oldest first release; a
    library's template is kept only when ``_library_verdict`` keeps it); ``pieces``, each key piece (a template's longest
    constant piece, cut to ``KEY_CHARS``), in order of first use along ``order``; ``again``, the
    [rank, piece] of each template whose piece an earlier one has (every other template has the
    next new piece: the index stays small in the shipped file); ``dropped``, the templates too
    generic to keep, by reason.

    The generator writes it into the shipped file (tools/catalog/mine.py), so that loading reads
    it instead of every template; a catalogue without one computes it here.  ``releases``: how
    many releases the templates' ``v`` index.

    >>> build_index([{"t": "Error: {}", "v": [0, 0]}, {"t": "Load weight begin", "v": [0, 1]}], 2)
    {'order': [1], 'pieces': ['Load weight begi'], 'again': [], 'dropped': {'placeholders-only': 0, 'too-few-constants': 1, 'leading-placeholder': 0}}
    """
    dropped = {PLACEHOLDERS_ONLY: 0, TOO_FEW_CONSTANTS: 0, LEADING_PLACEHOLDER: 0}
    order: list[tuple[int, int, int, int, int]] = []
    for i, raw in enumerate(templates):
        text = raw["t"]
        lib = 1 if raw.get("lib") else 0
        if lib or _ENOUGH.match(text) is None:  # most templates pass at once; look closer at the rest
            why = _library_verdict(text) if lib else _verdict(text)
            if why is not None:
                dropped[why] += 1
                continue
        first, last = raw["v"]
        if not 0 <= first <= last < releases:
            raise CatalogueError(f"message catalogue {path}: template {text!r} has releases {raw['v']!r}")
        # how specific: its constant characters but spaces (a doubled brace counts twice)
        constants = len(text) - text.count(" ") - 2 * text.count("{}")
        order.append((-constants, lib, -last, -first, i))
    order.sort()
    kept = [o[4] for o in order]
    pieces: dict[str, int] = {}
    again: list[list[int]] = []
    for rank, i in enumerate(kept):
        piece = _key_piece(templates[i]["t"])[:KEY_CHARS]
        if piece in pieces:
            again.append([rank, pieces[piece]])
        else:
            pieces[piece] = len(pieces)
    return {"order": kept, "pieces": list(pieces), "again": again, "dropped": dropped}


def _groups(index: Mapping[str, Any]) -> list[list[int]]:
    """The ranks in ``order`` of the templates of each key piece of ``index`` (``build_index``),
    ascending: a piece's first template is the first rank not in ``again``, the others follow."""
    again = index["again"]
    taken = {rank for rank, _j in again}
    groups = [[rank] for rank in range(len(index["order"])) if rank not in taken]
    if len(groups) != len(index["pieces"]):
        raise CatalogueError(f"message catalogue: its index has {len(index['pieces'])} key pieces, its templates use {len(groups)}")
    for rank, j in again:  # (in rank order)
        groups[j].append(rank)
    return groups


class _Kept:
    """The kept templates in preference order: ``templates[order[i]]`` (a list of template
    objects, or ``_Lines`` of a file whose templates are decoded when a message needs one)."""

    __slots__ = ("templates", "order")

    def __init__(self, templates: Sequence[Mapping[str, Any]], order: list[int]) -> None:
        self.templates, self.order = templates, order

    def __len__(self) -> int:
        return len(self.order)

    def __getitem__(self, i: int) -> Mapping[str, Any]:
        return self.templates[self.order[i]]

    def __iter__(self) -> Iterator[Mapping[str, Any]]:
        return (self.templates[i] for i in self.order)


class _Lines:
    """A catalogue file's templates, one JSON object a line, each decoded on first use."""

    __slots__ = ("lines", "decoded", "path")

    def __init__(self, lines: list[bytes], path: str) -> None:
        self.lines, self.path = lines, path
        self.decoded: list[Mapping[str, Any] | None] = [None] * len(lines)

    def __len__(self) -> int:
        return len(self.lines)

    def __getitem__(self, i: int) -> Mapping[str, Any]:
        t = self.decoded[i]
        if t is None:
            try:
                t = json.loads(self.lines[i].rstrip(b","))
            except ValueError as e:
                raise CatalogueError(f"message catalogue {self.path}: corrupt template {i + 1} ({type(e).__name__}: {str(e)[:100]})") from None
            if not isinstance(t, dict) or "t" not in t or "v" not in t:
                raise CatalogueError(f"message catalogue {self.path}: template {i + 1} is not a template")
            self.decoded[i] = t
        return t


class Catalogue:
    """The kept templates of a catalogue, and the automaton that finds a message's candidates.

    ``total`` templates were read; ``dropped`` counts those too generic to keep, by reason.
    """

    def __init__(self, data: Mapping[str, Any], path: str = "<data>", body: Callable[[], Mapping[str, Any]] | None = None) -> None:
        if not isinstance(data, Mapping) or data.get("schema") != SCHEMA:
            schema = data.get("schema") if isinstance(data, Mapping) else None
            raise CatalogueError(f"message catalogue {path}: schema {schema!r}, expected {SCHEMA}")
        self.path = path
        self.releases: tuple[str, ...] = tuple(data["releases"])
        self.vllm_releases: tuple[str, ...] = tuple(data.get("vllm_releases") or ())
        keys = [version_key(r) for r in self.releases]
        self._release_keys = sorted((k, i) for i, k in enumerate(keys) if k is not None)
        self._automaton: Any = None
        self._pieces: list[list[int]] = []
        self._tails: Any = None  # (match_tail's automaton, built on first use)
        self._tail_groups: list[list[int]] = []
        self._lock = threading.Lock()
        # ``body``: the whole catalogue, read when a template is first needed (``data`` is then
        # its head: the releases, all that sglog.formats asks for)
        self._body = body
        if body is None:
            self._take(data)

    def _take(self, data: Mapping[str, Any]) -> None:
        templates = data["templates"]
        self._total = len(templates)
        index = data.get("index")
        if index is None:
            index = build_index(templates, len(self.releases), self.path)
        elif len(index["order"]) + sum(index["dropped"].values()) != self._total:
            raise CatalogueError(f"message catalogue {self.path}: its index counts {len(index['order'])} kept and {sum(index['dropped'].values())} dropped templates of {self._total}")
        self._dropped: dict[str, int] = {PLACEHOLDERS_ONLY: 0, TOO_FEW_CONSTANTS: 0, LEADING_PLACEHOLDER: 0} | dict(index["dropped"])
        # the kept templates in preference order (the most specific first, then the newest; match()
        # takes the first), read from ``templates`` only when a message needs them
        self._raw: _Kept = _Kept(templates, index["order"])
        self._index = index
        self._made: list[_Template | None] = [None] * len(self._raw)

    def _ready(self) -> None:
        """Read the templates and the index, when ``load`` left them for later."""
        if self._body is None:
            return
        with self._lock:
            if self._body is not None:
                data = self._body()
                if not isinstance(data, Mapping) or data.get("schema") != SCHEMA or tuple(data.get("releases") or ()) != self.releases:
                    raise CatalogueError(f"message catalogue {self.path}: its head and its body disagree")
                self._take(data)
                self._body = None

    @property
    def total(self) -> int:
        """How many templates the catalogue has, kept or not."""
        self._ready()
        return self._total

    @property
    def dropped(self) -> dict[str, int]:
        """The templates too generic to keep, by reason."""
        self._ready()
        return self._dropped

    def __len__(self) -> int:
        self._ready()
        return len(self._raw)

    def sources(self) -> list[str]:
        """The ``module:line`` of every kept template of SGLang's project (which files print
        SGLang's messages; not the libraries')."""
        self._ready()
        return [r["s"] for r in self._raw if not r.get("lib")]

    def _build(self) -> Any:
        """The automaton of the templates' key pieces (each cut to ``KEY_CHARS``: as selective,
        and a trie a fraction of the size to build; the pieces are the index's)."""
        self._ready()
        with self._lock:
            if self._automaton is None:
                a = ahocorasick.Automaton(ahocorasick.STORE_INTS)
                for j, piece in enumerate(self._index["pieces"]):
                    a.add_word(piece, j)
                a.make_automaton()
                self._pieces = _groups(self._index)
                self._automaton = a
        return self._automaton

    def release_index(self, version: str) -> int | None:
        """Index of the newest mined release at or before ``version`` (a future version maps to
        the newest release, one older than all to -1); None when ``version`` is not a version."""
        key = version_key(version)
        if key is None or not self._release_keys:
            return None
        pos = bisect.bisect_right(self._release_keys, (key, len(self.releases)))
        return self._release_keys[pos - 1][1] if pos else -1

    def match(self, message: str, version: str | None = None, source: str | None = None, libraries: bool = True) -> CatalogueMatch | None:
        """The template that names ``message`` (its text after the log prefix), or None.

        When several match: the one printed at ``source`` (``file.py:N`` from a ``LEVEL file.py:N``
        prefix, when given) first, then those whose releases contain ``version`` (when given),
        then the most constant characters, then the newest.  A library's template (which any
        SGLang release may print beside its own) names the message only when it is more specific
        than every SGLang template that matches, whatever their releases; ``libraries=False``:
        SGLang's project's templates only (an exception SGLang raised is named by its own).
        """
        text = normalise(message)
        if not text:
            return None
        automaton = self._automaton if self._automaton is not None else self._build()
        pieces = self._pieces
        candidates: set[int] = set()
        for _end, j in automaton.iter(text):
            candidates.update(pieces[j])
        if not candidates:
            return None
        at = self.release_index(version) if version else None
        fallback: tuple[_Template, dict[str, Any]] | None = None  # the most specific of SGLang's
        best: tuple[_Template, dict[str, Any]] | None = None  # ... of those in the log's releases
        library: tuple[_Template, dict[str, Any]] | None = None  # a library's, more specific than those
        made = self._made
        for i in sorted(candidates):  # (the most specific first)
            t = made[i]
            if t is None:
                t = made[i] = _Template(self._raw[i])
            if not libraries and t.raw.get("lib"):
                continue
            fields = t.fullmatch(text)
            if fields is None:
                continue
            if source is not None:
                where = t.raw["s"]
                if where == source or where.endswith("/" + source):
                    return self._result(t, fields)
            if t.raw.get("lib"):
                if library is None and fallback is None:
                    if source is None:
                        return self._result(t, fields)
                    library = (t, fields)
                continue
            if at is None or t.first <= at <= t.last:
                if source is None:
                    return self._result(t, fields)
                if best is None:
                    best = (t, fields)
            if fallback is None:
                fallback = (t, fields)
        chosen = library or best or fallback
        return self._result(*chosen) if chosen else None

    def match_tail(self, message: str, version: str | None = None) -> CatalogueMatch | None:
        """The template a message cut at its start is the rest of, or None: a paste that begins
        in the middle of a line (a terminal's selection, an issue's excerpt) has SGLang's message
        from inside one of its placeholders on.  The rest must keep ``TAIL_CONSTANT_CHARS``
        constant characters to name the message; its fields are the placeholders after the cut.
        Candidates are the templates whose last long constant piece the text has (an index built
        on first use: only a first line that nothing else names asks for it)."""
        text = normalise(message)
        if not text:
            return None
        automaton = self._tails if self._tails is not None else self._build_tails()
        candidates: set[int] = set()
        for _end, j in automaton.iter(text):
            candidates.update(self._tail_groups[j])
        at = self.release_index(version) if version else None
        fallback = None
        for i in sorted(candidates):
            t = self._made[i] or _Template(self._raw[i])
            self._made[i] = t
            fields = _tail_fields(t, text)
            if fields is None:
                continue
            if t.raw.get("lib"):
                if fallback is None:  # (a library's, more specific than SGLang's: as in ``match``)
                    return self._result(t, fields)
                continue
            if at is None or t.first <= at <= t.last:
                return self._result(t, fields)
            fallback = fallback or (t, fields)
        return self._result(*fallback) if fallback else None

    def _build_tails(self) -> Any:
        """The automaton of every kept template's last constant piece of ``TAIL_PIECE_CHARS`` or more."""
        self._ready()
        with self._lock:
            if self._tails is None:
                groups: dict[str, list[int]] = {}
                for i, raw in enumerate(self._raw):
                    piece = _last_piece(raw["t"])
                    if piece is not None:  # (its last KEY_CHARS characters: as selective, and a trie a fraction of the size)
                        groups.setdefault(piece[-KEY_CHARS:], []).append(i)
                a = ahocorasick.Automaton(ahocorasick.STORE_INTS)
                for j, piece in enumerate(groups):
                    a.add_word(piece, j)
                a.make_automaton()
                self._tail_groups = list(groups.values())
                self._tails = a
        return self._tails

    def _result(self, t: _Template, fields: dict[str, Any]) -> CatalogueMatch:
        raw = t.raw
        return CatalogueMatch(
            template=t.text,
            source=raw.get("s", ""),
            level=raw.get("l", ""),
            kind=raw.get("k", ""),
            versions=(raw["pv"][0], raw["pv"][1]) if raw.get("pkg") else (self.releases[t.first], self.releases[t.last]),
            shared=raw.get("shared") or None,
            fields=fields,
            package=None if raw.get("lib") else raw.get("pkg") or None,
            library=raw.get("pkg") if raw.get("lib") else None,
        )


_cache: dict[str, Catalogue] = {}
_cache_lock = threading.Lock()


def _shipped() -> Path:
    return Path(str(resources.files("sglog.read").joinpath("data", "catalog.json.gz")))


def load(path: str | Path | None = None) -> Catalogue:
    """The catalogue at ``path`` (default: the one shipped in ``sglog/read/data``), cached.

    Format (schema 1): ``{"schema": 1, "releases": [...], "vllm_releases": [...], "templates":
    [{"t": first line with `{}` placeholders, "p": names, "l": level, "k": kind, "s":
    "module:line", "v": [first, last] release indices, "shared": "vllm" (optional)}]}``.
    A missing or unreadable file raises :class:`CatalogueError` naming it.
    """
    p = Path(path) if path is not None else _shipped()
    key = str(p.resolve()) if p.exists() else str(p)
    with _cache_lock:
        cat = _cache.get(key)
        if cat is None:
            cat = _cache[key] = _read(p)
    return cat


def _read(p: Path) -> Catalogue:
    try:
        raw = p.read_bytes()
    except OSError as e:
        raise CatalogueError(f"message catalogue {p}: cannot read it ({e.strerror or type(e).__name__})") from None
    try:
        head = _head(raw)
        if head is not None:  # (the generator's file: the rest is read when a template is needed)
            return Catalogue(head, str(p), body=lambda: _whole(raw, p))
        return Catalogue(_whole(raw, p), str(p))
    except CatalogueError:
        raise
    except _CORRUPT as e:
        raise CatalogueError(f"message catalogue {p}: corrupt ({type(e).__name__}: {str(e)[:100]})") from None


_CORRUPT = (OSError, EOFError, zlib.error, ValueError, KeyError, TypeError, IndexError, AttributeError)
_HEAD_BYTES = 1 << 14  # the compressed bytes whose text holds a shipped file's head (its releases: a few kB)


def _head(raw: bytes) -> dict[str, Any] | None:
    """The head of a catalogue the generator wrote (``mine.dumps``: ``{"schema": 1, "releases":
    [...], "vllm_releases": [...], "index": ...``), from the first bytes of its gzip stream; None
    for any other file (read whole)."""
    if raw[:2] != b"\x1f\x8b":
        return None
    try:
        text = zlib.decompressobj(16 + zlib.MAX_WBITS).decompress(raw[:_HEAD_BYTES], 1 << 16)
    except zlib.error:
        return None
    cut = text.find(b',"index":')
    if not text.startswith(b'{"schema":') or cut < 0:
        return None
    try:
        head = json.loads(text[:cut] + b"}")
    except ValueError:
        return None
    return head if isinstance(head, dict) and isinstance(head.get("releases"), list) else None


def _whole(raw: bytes, p: Path) -> Any:
    """The whole catalogue: the generator's layout with its templates undecoded (``_indexed``),
    else the JSON read whole."""
    try:
        text = _gunzip(raw) if raw[:2] == b"\x1f\x8b" else raw
        data = _indexed(text, str(p))
        return json.loads(text) if data is None else data
    except _CORRUPT as e:
        raise CatalogueError(f"message catalogue {p}: corrupt ({type(e).__name__}: {str(e)[:100]})") from None


def _gunzip(raw: bytes) -> bytes:
    """Inflated by ISA-L when it is installed (as .gz logs are: the shipped file in ~10 ms against
    zlib's ~20), else by zlib."""
    try:
        from isal import igzip, isal_zlib
    except ImportError:
        return gzip.decompress(raw)
    try:
        out: bytes = igzip.decompress(raw)  # (igzip.decompress has no annotations)
        return out
    except isal_zlib.error as e:  # type: ignore[misc]  # isal's stub declares `error: Exception`, an instance; it is the class
        raise zlib.error(str(e)) from None


_HEAD_END = b'"templates":['


def _indexed(text: bytes, path: str) -> dict[str, Any] | None:
    """The catalogue of a file the generator wrote (``mine.dumps``: a head line with the index,
    then one template a line, then ``]}``), its templates left undecoded (``_Lines``); None for
    any other layout (read whole by ``json.loads``)."""
    cut = text.find(b"\n")
    if cut < 0 or not text[:cut].endswith(_HEAD_END) or not text.endswith(b"\n]}\n"):
        return None
    head = json.loads(text[:cut] + b"]}")
    if not isinstance(head, dict) or "index" not in head:
        return None
    body = text[cut + 1 : -4]
    head["templates"] = _Lines(body.split(b"\n") if body else [], path)
    return head
