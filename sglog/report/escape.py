"""Log text -> Markdown that cannot break or inject anything; log names -> safe file names.

Everything a log supplies (messages, argument values, model names, file
names, evidence lines) goes through one of these before it reaches the report:

* ``inline(text)``: one line of prose or a table cell.  Control characters
  and ANSI colour codes become visible, newlines become spaces, every
  character CommonMark/GFM gives a meaning to is backslash-escaped and ``<``
  ``>`` ``&`` become entities, so a log line renders as itself.
* ``code(text)``: an inline code span whose fence is longer than any run of
  backticks in the text.
* ``code_block(lines)``: a fenced block, same rule for the fence.
* ``safe_name(text)``: a file or directory name made of ``[A-Za-z0-9._-]``.

>>> print(inline("**bold** <script>alert(1)</script> | x"))
\\*\\*bold\\*\\* &lt;script&gt;alert(1)&lt;/script&gt; \\| x
>>> print(inline("# not a heading"))
\\# not a heading
>>> code("a `b` c")
'`` a `b` c ``'
>>> safe_name("../../etc/passwd")
'etc-passwd'
"""

from __future__ import annotations

import re

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
# C0/C1 controls except tab; bidi overrides and isolates; zero-width marks that hide text
_INVISIBLE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff]")
_MD_PUNCT = re.compile(r"([\\`*_\[\]#|~$])")  # meaningful anywhere in a line
# meaningful at the start of a line: list markers (followed by a space), thematic breaks, setext underlines
_BLOCK_START = re.compile(r"^(\d{1,9})([.)])(?=\s|$)|^([-+=])(?=[\s\-+=]|$)")
_BACKTICKS = re.compile(r"`+")


def _visible(ch: str) -> str:
    if ch == "\r":
        return "\u240d"  # ␍ (progress bars redraw with carriage returns)
    if ch == "\n":
        return "\n"
    return f"\\u{ord(ch):04x}" if ord(ch) > 0xFF else f"\\x{ord(ch):02x}"


def clean(text: str) -> str:
    """Strip ANSI colour codes; make control, bidi and zero-width characters visible."""
    text = _ANSI.sub("", text)
    return _INVISIBLE.sub(lambda m: _visible(m.group(0)), text)


def inline(text: object) -> str:
    """Text as a Markdown inline: every meaningful character escaped, one line."""
    s = clean(str(text)).replace("\n", " ").replace("\t", " ").strip()
    s = s.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    s = _MD_PUNCT.sub(r"\\\1", s)
    return _BLOCK_START.sub(lambda m: f"{m.group(1)}\\{m.group(2)}" if m.group(1) else f"\\{m.group(3)}", s)


def code(text: object, in_table: bool = False) -> str:
    """Text as an inline code span (literal, nothing inside is interpreted).

    In a GFM table row a '|' ends the cell even inside a code span unless escaped.
    """
    s = clean(str(text)).replace("\n", " ").replace("\t", " ")
    if in_table:
        s = s.replace("|", "\\|")
    longest = max((len(m) for m in _BACKTICKS.findall(s)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if (s.startswith("`") or s.endswith("`") or longest) else ""
    return f"{fence}{pad}{s}{pad}{fence}"


def code_block(lines: list[str] | str, info: str = "text") -> str:
    """A fenced code block that the text cannot close early."""
    body = clean(lines if isinstance(lines, str) else "\n".join(lines))
    longest = max((len(m) for m in _BACKTICKS.findall(body)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}{info}\n{body}\n{fence}"


_UNSAFE_NAME = re.compile(r"[^A-Za-z0-9._-]+")


def safe_name(text: str, max_len: int = 80) -> str:
    """A file or directory name made only of letters, digits, '.', '_' and '-' (never '.' or '..')."""
    s = _UNSAFE_NAME.sub("-", clean(str(text))).strip("-.")
    s = re.sub(r"-{2,}", "-", s)
    s = re.sub(r"\.{2,}", ".", s)
    s = s[:max_len].rstrip("-.")
    return s or "report"
