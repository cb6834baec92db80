"""Text helpers for terminal output: cutting a long line so that no number or word is cut.

Data (JSON, CSV, Parquet) is never cut; only a terminal line is, and then with an ellipsis.
"""

from __future__ import annotations

ELLIPSIS = "…"


def clip(text: str, width: int) -> str:
    """``text`` in at most ``width`` characters, cut at a space and ended by `` …``.

    The cut is never inside a word or a number: a first word longer than ``width`` is kept
    whole (the line is then longer, never wrong).

    >>> clip("Current value: mem_fraction_static=0.76", 30)
    'Current value: …'
    >>> clip("short", 30)
    'short'
    >>> clip("mem_fraction_static=0.76 and more", 10)
    'mem_fraction_static=0.76 …'
    """
    if len(text) <= width:
        return text
    room = max(width - len(ELLIPSIS) - 1, 0)
    cut = text.rfind(" ", 0, room + 1)
    if cut <= 0:  # (no space early enough: keep the first word whole)
        cut = text.find(" ")
        if cut < 0:
            return text
    return text[:cut].rstrip() + " " + ELLIPSIS


def first_line(text: str | None) -> str:
    """The first non-blank line of ``text`` (``""`` for none)."""
    for line in (text or "").splitlines():
        if line.strip():
            return line.strip()
    return ""
