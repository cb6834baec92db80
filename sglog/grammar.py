"""Load the lark grammar (``grammars/sglang.lark``) and derive what the fast path needs.

The grammar is the one source of syntax.  Besides the LALR parser for whole
records, this module compiles

* single terminals (``terminal_pattern``) into Python/Rust-compatible regexes, and
* *flat* rules (a fixed sequence of literals and terminals, e.g. ``http_access``)
  into anchored regexes with one named group per terminal (``flat_rule_regex``),

so that the vectorised polars path (sglog/fastpath.py) reads exactly the syntax
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
    here = Path(__file__).resolve().parent.parent / "grammars" / GRAMMAR_FILE
    return here.read_text(encoding="utf-8")


@functools.cache
def parser():
    """The LALR parser for one record's message (start symbol ``message``)."""
    import lark

    return lark.Lark(
        grammar_text(),
        start="message",
        parser="lalr",
        lexer="contextual",
        maybe_placeholders=False,
        cache=False,
        propagate_positions=False,
    )


@functools.cache
def _definitions():
    from lark.load_grammar import load_grammar

    grammar, _ = load_grammar(grammar_text(), "<sglang.lark>", None, False)
    terms = {name: tree for name, (tree, _prio) in grammar.term_defs}
    rules = {name: tree for name, _params, tree, _opts in grammar.rule_defs}
    return terms, rules


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
    return list(_definitions()[0])


@functools.cache
def terminal_pattern(name: str) -> str:
    """The regex of terminal ``name`` (no flags other than inline ones)."""
    tree = _definitions()[0][name]
    parts = []
    for expansion in tree.children:  # expansions -> expansion -> value -> literal
        seq = []
        for value in expansion.children:
            seq.append(_value_regex(value))
        parts.append("".join(seq))
    return parts[0] if len(parts) == 1 else "(?:" + "|".join(parts) + ")"


def _value_regex(node) -> str:
    if getattr(node, "data", None) == "value":
        node = node.children[0]
    if getattr(node, "data", None) == "literal":
        return _literal_regex(node.children[0])
    if getattr(node, "data", None) == "expansions":  # a group (a | b)
        return "(?:" + "|".join("".join(_value_regex(v) for v in e.children) for e in node.children) + ")"
    if getattr(node, "data", None) == "expansion":
        return "".join(_value_regex(v) for v in node.children)
    if type(node).__name__ in ("Terminal", "NonTerminal"):
        return "(?:" + terminal_pattern(node.name) + ")"
    raise ValueError(f"cannot compile {node!r}")


@functools.cache
def flat_rule_regex(rule: str) -> str:
    """Compile a flat rule into an anchored regex with a named group per terminal.

    A flat rule is a single sequence of string literals and terminals, each
    terminal optional at most once (``X?``).  Group names are the terminal
    names in lower case.
    """
    tree = _definitions()[1][rule]
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
            piece = f"(?P<{node.name.lower()}>{terminal_pattern(node.name)})"
        else:
            raise ValueError(f"rule {rule}: {node!r} is not a literal or terminal")
        out.append(f"(?:{piece})?" if optional else piece)
    return "".join(out)


def envelope_regex() -> str:
    """The SGLang record envelope: optional Ray prefix, ``[ts RANKS] ``."""
    return (
        f"^(?P<ray>{terminal_pattern('ENV_RAY')})?"
        f"\\[(?P<ts>{terminal_pattern('ENV_TS')})(?P<ranks>{terminal_pattern('ENV_RANKS')})?\\] "
    )


@functools.cache
def compiled(name: str) -> re.Pattern:
    """A terminal compiled for Python's ``re`` (used by the record layer)."""
    return re.compile(terminal_pattern(name))
