"""Load the lark grammar (``grammars/sglang.lark``) and derive what the fast path needs.

The grammar is the one source of syntax.  Besides the LALR parser for whole
records, this module compiles

* single terminals (``terminal_pattern``) into Python/Rust-compatible regexes, and
* *flat* rules (a fixed sequence of literals and terminals, e.g. ``http_access``)
  into anchored regexes with one named group per terminal (``flat_rule_regex``),

so that the vectorised polars path (sglog/read/fastpath.py) reads exactly the syntax
the grammar describes.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from pathlib import Path

GRAMMAR_FILE = "sglang.lark"


def grammar_text() -> str:
    """The grammar source, from the installed package or the source tree."""
    try:
        res = resources.files("sglog").joinpath("grammars").joinpath(GRAMMAR_FILE)
        if res.is_file():
            return res.read_text(encoding="utf-8")
    except (FileNotFoundError, ModuleNotFoundError, NotADirectoryError):  # pragma: no cover
        pass
    here = Path(__file__).resolve().parents[2] / "grammars" / GRAMMAR_FILE
    return here.read_text(encoding="utf-8")


@functools.cache
def parser():
    """The LALR parser for one record's message (start symbol ``message``).

    lark keeps the built parser in a cache file (~0.03 s to load instead of ~1 s to build), in the
    user's private cache folder only (sglog/read/cache.py: a pickle is code); no folder, no cache."""
    import lark

    from sglog.read.cache import file_in_cache

    path = file_in_cache(parser_cache_name())
    return lark.Lark(
        grammar_text(),
        start="message",
        parser="lalr",
        lexer="contextual",
        maybe_placeholders=False,
        cache=str(path) if path is not None else False,
        propagate_positions=False,
    )


def parser_cache_name() -> str:
    """The name of lark's cache file in the private folder: keyed by lark's version and the grammar."""
    import hashlib

    import lark

    return "lark-" + hashlib.sha256(f"{lark.__version__}\n{grammar_text()}".encode()).hexdigest()[:24] + ".cache"


def _load_definitions():
    from lark.load_grammar import load_grammar

    grammar, _ = load_grammar(grammar_text(), "<sglang.lark>", None, False)
    terms = {name: tree for name, (tree, _prio) in grammar.term_defs}
    rules = {name: tree for name, _params, tree, _opts in grammar.rule_defs}
    return terms, rules


@functools.cache
def _derived() -> dict:
    """Every terminal's regex and every flat rule's, derived from the grammar once and kept on disk
    as plain strings (loading the grammar's trees instead, to derive them at each start, cost ~30 ms
    of unpickling before the first chunk could be read)."""
    return _disk_cached("derived", _derive_all)


def _derive_all() -> dict:
    terms, rules = _load_definitions()
    pats: dict[str, str] = {}

    def term(name: str) -> str:
        if name not in pats:
            pats[name] = _terminal_regex(terms[name], term)
        return pats[name]

    out_terms: dict[str, str | dict[str, str]] = {}
    for name in terms:
        try:
            out_terms[name] = term(name)
        except ValueError as e:
            out_terms[name] = {"error": str(e)}
    flat: dict[str, str | dict[str, str]] = {}
    for rule, tree in rules.items():
        try:
            flat[rule] = _flat_regex(rule, tree, term)
        except ValueError as e:
            flat[rule] = {"error": str(e)}
    return {"terms": out_terms, "flat": flat}


def _disk_cached(tag: str, compute):
    """``compute()``, kept as JSON in the private cache folder (sglog/read/cache.py), keyed by the
    grammar text and the lark/Python versions (a few derivations take 0.1-0.2 s each)."""
    import hashlib
    import sys

    import lark

    from sglog.read.cache import json_cached

    key = hashlib.sha256(f"{tag} {lark.__version__} {sys.version_info[:2]}\n{grammar_text()}".encode()).hexdigest()[:24]
    return json_cached(f"{tag}-{key}.json", compute)


def _literal_regex(token) -> str:
    """Regex source of a STRING or REGEXP token from the grammar."""
    value = token.value
    if token.type == "REGEXP":
        body, _, flags = value[1:].rpartition("/")
        if flags:
            body = f"(?{flags}){body}"
        return body
    # STRING: a lark string literal "..."; unescape as lark does
    import ast

    return escape(ast.literal_eval(value))


_META = set("\\.+*?()|[]{}^$")


def escape(text: str) -> str:
    """Escape regex metacharacters only (valid for Python ``re`` and Rust ``regex``)."""
    return "".join("\\" + c if c in _META else c for c in text)


def terminal_names() -> list[str]:
    return list(_derived()["terms"])


def terminal_pattern(name: str) -> str:
    """The regex of terminal ``name`` (no flags other than inline ones); KeyError if there is none."""
    return _value_or_raise(_derived()["terms"][name])


def flat_rule_regex(rule: str) -> str:
    """Compile a flat rule into an anchored regex with a named group per terminal.

    A flat rule is a single sequence of string literals and terminals, each
    terminal optional at most once (``X?``).  Group names are the terminal
    names in lower case.  ValueError for a rule that is not flat.
    """
    return _value_or_raise(_derived()["flat"][rule])


def _value_or_raise(v):
    if isinstance(v, dict):
        raise ValueError(v["error"])
    return v


def _terminal_regex(tree, term) -> str:
    parts = []
    for expansion in tree.children:  # expansions -> expansion -> value -> literal
        seq = []
        for value in expansion.children:
            seq.append(_value_regex(value, term))
        parts.append("".join(seq))
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _value_regex(node, term) -> str:
    if getattr(node, "data", None) == "value":
        node = node.children[0]
    if getattr(node, "data", None) == "literal":
        return _literal_regex(node.children[0])
    if getattr(node, "data", None) == "expansions":  # a group (a | b)
        return "(?:" + "|".join("".join(_value_regex(v, term) for v in e.children) for e in node.children) + ")"
    if getattr(node, "data", None) == "expansion":
        return "".join(_value_regex(v, term) for v in node.children)
    if type(node).__name__ in ("Terminal", "NonTerminal"):
        return "(?:" + term(node.name) + ")"
    raise ValueError(f"cannot compile {node!r}")


def _flat_regex(rule: str, tree, term) -> str:
    if len(tree.children) != 1:
        raise ValueError(f"rule {rule} has alternatives; not flat")
    out = []
    for item in tree.children[0].children:
        optional = False
        if getattr(item, "data", None) == "expr":
            item, op = item.children
            if op.value != "?":
                raise ValueError(f"rule {rule}: only ? is allowed in a flat rule")
            optional = True
        node = item.children[0] if getattr(item, "data", None) == "value" else item
        if getattr(node, "data", None) == "literal":
            piece = _literal_regex(node.children[0])
        elif type(node).__name__ == "Terminal":
            piece = f"(?P<{node.name.lower()}>{term(node.name)})"
        else:
            raise ValueError(f"rule {rule}: {node!r} is not a literal or terminal")
        out.append(f"(?:{piece})?" if optional else piece)
    return "".join(out)


def envelope_regex() -> str:
    """The SGLang record envelope: optional Ray prefix, ``[ts RANKS] ``."""
    return f"^(?P<ray>{terminal_pattern('ENV_RAY')})?\\[(?P<ts>{terminal_pattern('ENV_TS')})(?P<ranks>{terminal_pattern('ENV_RANKS')})?\\] "


@functools.cache
def compiled(name: str) -> re.Pattern:
    """A terminal compiled for Python's ``re`` (used by the record layer)."""
    return re_compile(terminal_pattern(name))


@functools.cache
def re_compile(pattern: str, flags: int = 0) -> re.Pattern:
    """``re.compile`` for the patterns sglog builds from the grammar (terminals, envelopes, record
    heads, line shapes), each compiled once per process."""
    return re.compile(pattern, flags)


class _DigitSensitive(Exception):
    pass


@functools.cache
def digit_literals() -> tuple[str, ...] | None:
    """The digit-bearing literals of the parser's terminals (see ``_digit_literals``); cached on disk."""
    lits = _disk_cached("digit_literals", _digit_literals)
    return tuple(lits) if lits is not None else None


def _digit_literals() -> tuple[str, ...] | None:
    """The literal texts with digits in the parser's terminals (lower case).

    Everywhere else the terminals treat all ASCII digits alike (``\\d``,
    ``[0-9]``, ``\\w``, ``.``...).  So two messages that differ only in their
    digits, and that have these literals at the same places (or nowhere), lex
    into the same tokens at the same places: one lark parse serves both (the
    record parser's *digit-shape* memo).  None when some terminal tells digits
    apart in another way (a class like ``[1-9]``, a back-reference).
    """
    from re import _parser as P

    frags: set[str] = set()
    try:
        for term in parser().terminals:
            pat = term.pattern
            if type(pat).__name__ == "PatternStr":
                text = pat.value
                if any(c in _DIGITS for c in text):
                    frags.add(text)
            else:
                _digit_fragments(P.parse(pat.to_regexp()), frags)
    except _DigitSensitive:
        return None
    except Exception:  # an unexpected regex construct: do not guess
        return None
    return tuple(sorted({f.lower() for f in frags}))


_DIGITS = "0123456789"


def _digit_fragments(seq, frags: set[str]) -> None:
    """Add to ``frags`` the runs of literal characters with a digit in the parsed regex ``seq``
    (``re._parser``'s tree); _DigitSensitive when a part of it tells digits apart."""
    from re import _constants as C

    run: list[str] = []

    def flush() -> None:
        text = "".join(run)
        if any(c in _DIGITS for c in text):
            frags.add(text)
        run.clear()

    for op, av in seq:
        if op is C.LITERAL:
            run.append(chr(av))
            continue
        flush()
        if op is C.NOT_LITERAL:
            if chr(av) in _DIGITS:
                raise _DigitSensitive
        elif op is C.IN:
            _digit_class(av)
        elif op in (C.MAX_REPEAT, C.MIN_REPEAT, getattr(C, "POSSESSIVE_REPEAT", None)):
            _digit_fragments(av[2], frags)
        elif op is C.SUBPATTERN:
            _digit_fragments(av[-1], frags)
        elif op is C.BRANCH:
            for b in av[1]:
                _digit_fragments(b, frags)
        elif op in (C.ASSERT, C.ASSERT_NOT):
            _digit_fragments(av[1], frags)
        elif op is getattr(C, "ATOMIC_GROUP", None):
            _digit_fragments(av, frags)
        elif op in (C.ANY, C.AT, C.CATEGORY):
            pass
        else:  # back-references and anything unknown
            raise _DigitSensitive
    flush()


def _digit_class(items) -> None:
    """_DigitSensitive unless the character class ``items`` holds all ten digits or none."""
    from re import _constants as C

    hit = set()
    negate = False
    for op, av in items:
        if op is C.NEGATE:
            negate = True
        elif op is C.LITERAL:
            hit |= {chr(av)} & set(_DIGITS)
        elif op is C.RANGE:
            hit |= {c for c in _DIGITS if av[0] <= ord(c) <= av[1]}
        elif op is C.CATEGORY:
            if av in (C.CATEGORY_DIGIT, C.CATEGORY_WORD, C.CATEGORY_NOT_SPACE):
                hit |= set(_DIGITS)
            elif av not in (C.CATEGORY_NOT_DIGIT, C.CATEGORY_SPACE, C.CATEGORY_NOT_WORD, C.CATEGORY_LINEBREAK, C.CATEGORY_NOT_LINEBREAK):
                raise _DigitSensitive
            elif av is C.CATEGORY_NOT_LINEBREAK:
                hit |= set(_DIGITS)
        else:
            raise _DigitSensitive
    if negate:
        hit = set(_DIGITS) - hit
    if 0 < len(hit) < 10:
        raise _DigitSensitive
