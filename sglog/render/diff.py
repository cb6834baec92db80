"""Render a ``sglog.compare.diff.DiffResult``: a rich renderable for the terminal, or Markdown text.

What is shown (the verdict and the sections, in order, with their rows) is
built once, as data, by ``sglog.render.diff_sections.build``; these functions
only lay it out: rich panels and tables, or Markdown headings, tables and lists.
Renderers return values; only the CLI writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sglog.render.diff_sections import Cell, Code, Message, Section, build

if TYPE_CHECKING:
    from rich.console import Group
    from rich.table import Table

    from sglog.compare.diff import DiffResult

_VERDICT_STYLE = {"faster": "green", "slower": "red", "not-comparable": "yellow", "no-data": "yellow"}
_TONE_STYLE = {"plain": "", "note": "yellow", "aside": "dim"}


def _clause(sentence: str) -> str:
    """A section's sentence as the terminal writes it after the section's name ("no changed flags")."""
    return sentence[:1].lower() + sentence[1:].removesuffix(".")


# ------------------------------------------------------------------ rich


def render_rich(result: DiffResult) -> Group:
    """A rich renderable (Group of panels and tables)."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.text import Text

    view = build(result)
    verdict = Text(view.verdict, style=_VERDICT_STYLE.get(view.verdict_kind, ""))
    parts: list[Any] = [Panel(verdict, title=f"{view.title}: verdict", title_align="left")]
    for section in view.sections:
        parts += _rich_section(section)
    return Group(*parts)


def _rich_section(s: Section) -> list[Any]:
    from rich.text import Text

    if not s.measured:
        return []
    if s.text:
        parts: list[Any] = [Text(f"{(s.heading or s.caption).lower()}: {_clause(s.text.text)}", style=_TONE_STYLE[s.text.tone])]
    else:
        parts = [_rich_table(s)]
    for note in s.notes:
        parts.append(Text(f"note: {note.text}" if note.tone == "note" else note.text, style=_TONE_STYLE[note.tone]))
    return parts


def _rich_table(s: Section) -> Table:
    from rich.table import Table

    t = Table(title=s.caption, title_justify="left", show_lines=False)
    for i, column in enumerate(s.columns):
        t.add_column(column, justify="right" if (s.numeric and i > 0) else "left", overflow="fold")
    for row in s.rows:
        t.add_row(*(c.plain or c.text if isinstance(c, Code) else c for c in row))
    if not s.rows and s.empty:
        t.add_row("-", _clause(s.empty), *[""] * (len(s.columns) - 2))
    return t


# ------------------------------------------------------------------ markdown


def _row(*cells: str) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(result: DiffResult, level: int = 1) -> str:
    """The diff as GitHub-flavoured Markdown; log-derived text goes through ``sglog.report.escape.inline``.

    ``level``: heading level of the title (sections are one deeper), so a report can embed it.
    """
    from sglog.report.escape import inline

    view = build(result)
    out = [f"{'#' * level} {view.title}", "", f"**Verdict:** {inline(view.verdict)}", ""]
    for section in view.sections:
        out += _md_section(section, "#" * (level + 1))
    return "\n".join(out).rstrip("\n") + "\n"


def _md_section(s: Section, h2: str) -> list[str]:
    out = [f"{h2} {s.heading}", ""] if s.heading else []
    if s.about:
        out += [s.about, ""]
    if s.text:
        out += [_md_message(s.text), ""]
    elif not s.rows and s.empty:
        out += [_md_message(Message(s.empty)), ""]
    elif s.groups:
        out += _md_lists(s)
    else:
        out += [*_md_table(s), ""]
    if s.notes:
        out += [*map(_md_message, s.notes), ""]
    return out


def _md_message(m: Message) -> str:
    from sglog.report.escape import inline

    return f"> Note: {inline(m.text)}" if m.tone == "note" else inline(m.text)


def _md_table(s: Section) -> list[str]:
    right = s.numeric if s.markdown_numeric is None else s.markdown_numeric
    rule = ["---:" if (right and i > 0) else "---" for i in range(len(s.columns))]
    return [_row(*s.columns), _row(*rule), *(_row(*map(_md_cell, row)) for row in s.rows)]


def _md_cell(c: Cell) -> str:
    """A table cell: code, or inline-escaped text (block starts such as "1." or "-" mean nothing in a cell)."""
    from sglog.report.escape import code, inline

    return code(c.text, in_table=True) if isinstance(c, Code) else inline("x" + str(c))[1:]


def _md_lists(s: Section) -> list[str]:
    """Each group's rows as a bulleted list under its title: "- name (qualifier): text"."""
    from sglog.report.escape import code, inline

    out: list[str] = []
    for key, title in s.groups:
        items = [row[1:] for row in s.rows if row[0] == key]
        if items:
            out += [f"**{title}:**", ""]
            for name, qualifier, text in items:
                out.append(f"- {code(name.text if isinstance(name, Code) else name)} ({inline(qualifier)}): {inline(text)}")
            out.append("")
    return out
