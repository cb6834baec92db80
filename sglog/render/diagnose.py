"""Render a diagnosis (runs + findings) for a terminal; returns strings, the CLI writes them.

Per run: a header (model, version, parallelism, speculative settings, how it
ended), the findings by severity with evidence excerpts and line numbers and
the fix (and, where another finding's fix decides one of its flags, which and why), then the
merged flag change and the relaunch command, copy-pasteable.
"""

from __future__ import annotations

import io
import re
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group, RenderableType
from rich.padding import Padding
from rich.table import Table
from rich.text import Text

from sglog.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from sglog.rules.base import Rule
    from sglog.runs.build import Run

STYLE = {"error": "bold red", "warning": "yellow", "info": "cyan"}
EVIDENCE_WIDTH = 150


_TRAILING = re.compile(r"[ \t]+((?:\x1b\[[0-9;]*m)*)$", re.M)


def _clean(text: str) -> str:
    """No trailing blanks (rich pads wrapped lines to the width)."""
    return _TRAILING.sub(r"\1", text)


def _console(color: bool, width: int) -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    con = Console(file=buf, width=width, force_terminal=color, no_color=not color, color_system="standard" if color else None, highlight=False, emoji=False, soft_wrap=False)
    return con, buf


def _basename(path: str) -> str:
    return path.rsplit("/", 1)[-1]


def _parallelism(p: dict[str, int]) -> str:
    parts = [f"{k.upper()}{v}" for k, v in p.items() if k != "nnodes" and (v != 1 or k == "tp")]
    if p.get("nnodes", 1) > 1:
        parts.append(f"{p['nnodes']} nodes")
    return " ".join(parts) or "?"


def _spec(spec: dict[str, Any] | None) -> str | None:
    if not spec:
        return None
    algo = spec.get("algorithm")
    bits = []
    if spec.get("num_steps") is not None:
        bits.append(f"{spec['num_steps']} step{'s' if spec['num_steps'] != 1 else ''}")
    if spec.get("eagle_topk") is not None:
        bits.append(f"topk {spec['eagle_topk']}")
    if spec.get("num_draft_tokens") is not None:
        bits.append(f"{spec['num_draft_tokens']} draft tokens")
    return f"{algo}" + (f" ({', '.join(bits)})" if bits else "")


def excerpt(text: str | None, note: str | None, width: int = EVIDENCE_WIDTH, needles: tuple[str, ...] = ()) -> str:
    """One evidence line in ``width`` characters, keeping the part it is evidence of.

    That part is the first of the note's ``key=`` names and ``needles`` (the fix's flags, as
    ``--flag`` and ``field``) found in the line: when a plain cut would lose it, the line's head
    (its ``[time rank]`` envelope) is kept, then `` … `` and the text from the match on.  Every cut
    is at a space or comma and shows an ellipsis, never inside a word or number.

    >>> line = "[2026-02-27 10:04:51] server_args=ServerArgs(model_path='m', tp_size=8, mem_fraction_static=0.76, port=30000)"
    >>> excerpt(line, None, 60, ("mem_fraction_static",))
    '[2026-02-27 10:04:51] … mem_fraction_static=0.76, …'
    >>> excerpt(line, None, 70)
    "[2026-02-27 10:04:51] server_args=ServerArgs(model_path='m', …"
    """
    from sglog.render.text import clip

    t = (text or "").replace("\t", " ").rstrip()
    if len(t) <= width:
        return t
    keys = [part.split("=", 1)[0] + "=" for part in (note or "").replace(",", " ").split() if "=" in part] or ([note] if note else [])
    for key in [*keys, *needles]:
        i = t.find(key) if key else -1
        if i < 0:
            continue
        plain = clip(t, width)
        if i + len(key) <= len(plain) - 2:  # (the plain cut keeps it)
            return plain
        env = t.find("] ")
        head = t[: env + 1] if 0 < env < min(48, width // 2) else clip(t[: width // 4], width // 4).removesuffix(" …")
        start = max(t.rfind(sep, 0, i) for sep in (" ", ",", "(")) + 1
        if i - start > 16:
            start = i
        return f"{head} … " + clip(t[start:], max(width - len(head) - 3, len(key) + 2))
    return clip(t, width)


def _value(v: Any) -> str:
    """A flag's value as the change shows it."""
    if v is None:
        return "(unset)"
    if v is True:
        return "(set)"
    if isinstance(v, (list, tuple)):
        return " ".join(map(str, v))
    return str(v)


BASE_WORDS = {
    "launch_line": "the log's launch command",
    "server_args": "python -m sglang.launch_server and the flags the server args show were set (the log has no launch command)",
    "assumed": "python -m sglang.launch_server only (assumed: the log shows neither the launch command nor the server args; add the model path and the original flags)",
}


def suggested_change(run: Run, findings: list[Finding]) -> tuple[Text | None, list[RenderableType]]:
    """The run's merged flag change: the relaunch command on one copy-pasteable line (None when it
    cannot be built), then what it is built on and one line per flag (``was -> now``, the fix that
    decides it and the ones it overrides); nothing when no fix changes a flag."""
    from sglog.diagnose import relaunch
    from sglog.fixes import decide
    from sglog.read import args as sargs
    from sglog.relaunch import quote

    decisions = decide(findings, run.index)
    if not decisions:
        return None, []
    out: list[RenderableType] = []
    plan = relaunch(run, findings)
    command = Text("    " + " ".join(quote(w) for w in plan.argv)) if plan is not None else None
    if plan is not None:
        out.append(Text(f"  built on {BASE_WORDS.get(plan.base, plan.base)}; every fix merged, one value per flag:", style="dim"))
    for flag, d in decisions.items():
        field = sargs.field_of(flag)
        now = "(removed)" if d.value is None else d.value
        if field not in (run.args or {}):
            t = Text(f"{flag} {now}")
        elif _value(run.args.get(field)) == now or (run.args.get(field) is True and now == "true"):
            t = Text(f"{flag} {now} (already so)")
        else:
            t = Text(f"{flag} {_value(run.args.get(field))} -> {now}")
        t.append(f"  {d.won.name}", style="dim")
        if d.overridden:
            t.append(" over " + ", ".join(f"{f.name}'s {'removal' if v is None else v}" for f, v in d.overridden), style="dim")
        out.append(_indented(t))
    return command, out


# ------------------------------------------------------------------ rendering


def _ending(run: Run) -> str:
    from sglog.rules.lifecycle.phases import phase_words

    e = run.ending
    if e is None:
        return "?"
    if e.status == "crashed" and e.root_cause is None and run.first("shutdown") is not None:
        return "stopped (SIGTERM shutdown; the children's exit codes are the shutdown, not a crash)"
    if e.status == "crashed":
        rc = e.root_cause
        what = e.cause() if rc is not None else ""  # (whole: the line wraps under its label)
        where = f" during {phase_words(e.phase)}" if e.phase and e.phase != "launch" else ""
        return f"crashed{where}" + (f" ({what})" if what else "")
    if e.status == "incomplete":
        return f"log ends during {phase_words(e.phase)}"
    return e.describe()


def _labelled(rows: list[tuple[str, str]]) -> Padding:
    """``label  value`` lines whose values wrap under themselves, not back to column 0."""
    grid = Table.grid(padding=(0, 2, 0, 0))
    grid.add_column(width=11, no_wrap=True)
    grid.add_column(overflow="fold")
    for label, value in rows:
        grid.add_row(Text(label), Text(value))
    return Padding(grid, (0, 0, 0, 2))


def _indented(text: Text, left: int = 4) -> Padding:
    return Padding(text, (0, 0, 0, left), expand=False)


def _needles(f: Finding) -> tuple[str, ...]:
    """What a finding's evidence lines are evidence of: its fix's flags, as ``--flag`` and as ``field``."""
    flags = list((f.fix.args or {}) if f.fix is not None else {})
    return tuple(dict.fromkeys(w for flag in flags for w in (flag.lstrip("-").replace("-", "_") + "=", flag)))


def _finding(f: Finding, files: set[str], width: int) -> list[RenderableType]:
    out: list[RenderableType] = []
    head = Text("  ")
    head.append(f"{f.severity.upper():<7}", style=STYLE[f.severity])
    head.append(f" {f.code} ", style="bold")
    head.append(f.name, style="bold")
    out.append(head)
    out.append(_indented(Text(f.message)))
    needles = _needles(f)
    for e in f.evidence:
        where = _basename(e.file) if len(files) <= 1 else e.file
        if e.line is None:  # (a note: it wraps under itself, not back to column 0)
            t = Text(f"{where}: ", style="dim")
            t.append(e.note or "", style="italic")
            out.append(_indented(t))
            continue
        t = Text("    ", no_wrap=True, overflow="ellipsis")
        loc = f"{where}:{e.line}"
        t.append(loc, style="dim")
        t.append("  ")
        room = max(40, width - len(loc) - 7)
        t.append(excerpt(e.text, e.note, room, needles))
        if e.note and e.text and len(e.text) + len(e.note) + 5 <= room:
            t.append(f"   ({e.note})", style="dim italic")
        out.append(t)
    if f.fix is not None:
        t = Text("fix: ", style="green")
        t.append(f.fix.summary, style="")
        out.append(_indented(t))
        if f.fix.safety:
            s = Text("safety: ", style="dim")
            s.append(f.fix.safety, style="dim")
            out.append(_indented(s))
    for x in f.superseded:
        out.append(_indented(Text(x.text(), style="yellow")))
    return out


def render_rich(runs: Sequence[Run], findings: list[Finding], coverage: dict[str, Any] | None = None, *, color: bool = False, width: int = 120) -> str:
    con, buf = _console(color, width)
    for k, run in enumerate(runs):
        if k:
            con.print()
        mine = [f for f in findings if f.run == run.index]
        title = Text(f"Run {run.index}", style="bold")
        title.append(f"  {run.name}", style="bold")
        model = run.model or "?"
        if run.model_class and run.model_class not in model:
            model += f" ({run.model_class})"
        bits = f"{run.version or '?'}    parallelism {_parallelism(run.parallelism)}"
        spec = _spec(run.spec)
        if spec:
            bits += f"    speculative {spec}"
        rows = [("model", model), ("version", bits)] + ([("ended", _ending(run))] if run.ending is not None else [])
        con.print(Group(title, _labelled(rows)))
        con.print()
        if not mine:
            con.print(Text("  no findings", style="green"))
            continue
        files = set(run.files)
        for f in sorted(mine, key=lambda f: -SEVERITY_RANK[f.severity]):
            con.print(Group(*_finding(f, files, width)))
            con.print()
        command, change = suggested_change(run, mine)
        if change:
            con.print(Text("  Suggested launch command change:", style="bold"))
            if command is not None:  # (one line, never wrapped: it is pasted)
                con.print(command, soft_wrap=True, crop=False, overflow="ignore")
            con.print(Group(*change))
    return _clean(buf.getvalue())


def summary_line(runs: Sequence[Run], findings: list[Finding], coverage: dict[str, Any] | None = None) -> str:
    from sglog.diagnose import counts

    c = counts(findings)
    n = len(findings)
    cov = f"; coverage {coverage['coverage']:.1%} of {coverage['lines']} lines" if coverage else ""
    if coverage and coverage.get("sglang_specific") is False:
        cov += "; no SGLang-specific line found (generic torch/NCCL/CUDA output: read as an SGLang fragment)"
    from sglog.runs.formats import assumed_note

    cov += assumed_note(runs)  # (a release newer than sglog knows, #28)
    return (
        f"sglog: {len(runs)} run{'s' if len(runs) != 1 else ''}, {n} finding{'s' if n != 1 else ''} "
        f"({c['error']} error{'s' if c['error'] != 1 else ''}, {c['warning']} warning{'s' if c['warning'] != 1 else ''}, {c['info']} info){cov}"
    )


# ------------------------------------------------------------------ rules and their docs


_EMPHASIS = re.compile(r"(?<![\w*])\*{1,2}([^*\s][^*]*?)\*{1,2}(?![\w*])|`([^`]+)`")


def _plain(text: str) -> str:
    """A docstring's one-line summary for a terminal: Markdown emphasis and code marks dropped.

    >>> _plain("an error that is *not* an out-of-memory (`--mem-fraction-static`)")
    'an error that is not an out-of-memory (--mem-fraction-static)'
    """
    return _EMPHASIS.sub(lambda m: m.group(1) or m.group(2), text)


def rules_table(rules: Sequence[Rule], *, color: bool = False, width: int = 120) -> str:
    from rich.table import Table

    from sglog.rules import GROUPS

    con, buf = _console(color, width)
    t = Table(show_edge=False, box=None, pad_edge=False)
    for col in ("code", "name", "severity", "what it finds"):
        t.add_column(col, overflow="fold" if col == "what it finds" else "ellipsis", no_wrap=col != "what it finds")
    group = None
    for r in rules:
        g = GROUPS.get(r.code[:4])
        if g != group and g:
            t.add_row("", Text(g, style="bold underline"), "", "")
            group = g
        t.add_row(r.code, r.name, Text(r.severity, style=STYLE[r.severity]), _plain(r.summary))
    con.print(t)
    con.print()
    con.print(Text("severity: the most a rule reports; some report less for a weaker signature (diagnose shows each finding's own).", style="dim"))
    return _clean(buf.getvalue())


def triggers_text(rule: Rule) -> str:
    """What a rule reads, as explain shows it: its event kinds, then its run facts with what they are."""
    from sglog.rules.base import FACTS

    kinds = [t for t in rule.triggers if t not in FACTS]
    facts = [t for t in rule.triggers if t in FACTS]
    out = []
    if kinds:
        out.append("Event kinds: " + ", ".join(f"`{k}`" for k in kinds) + ".")
    if facts:
        out.append("Run facts: " + "; ".join(f"`{f}`, {FACTS[f]}" for f in facts) + ".")
    out.append("Diagnose skips the rule on a run that has none of them.")
    return "\n".join(out)


def rule_doc_markdown(rule: Rule, overrides: dict[str, Any] | None = None, source: str | None = None) -> str:
    """A rule's documentation as Markdown (what ``sglog explain`` prints); each option with the
    value in effect and where it comes from (``overrides`` from the configuration file ``source``)."""
    from sglog.rules import DOC_SECTIONS
    from sglog.rules.base import example_case

    out = [f"# {rule.code} {rule.name} ({rule.severity})", "", rule.summary, ""]
    for section in DOC_SECTIONS:
        text = rule.doc.get(section, "").strip()
        if section == "Example":
            title, text = example_case(text)
            if title:
                text = f'From the case "{title}" (tests/rules/{rule.name}.cases):\n\n{text}'
        out += [f"## {section}", "", text, ""]
    out += ["## Triggers", "", triggers_text(rule), ""]
    if rule.options:
        out += ["## Options", ""]
        overrides = overrides or {}
        for k, o in rule.options.items():
            where = f"from {source}; default `{o.default}`" if k in overrides else "default"
            out.append(f"- `{k}` = `{overrides.get(k, o.default)}` ({where}): {o.help}")
        out.append("")
    return "\n".join(out)


def explain(rule: Rule, *, color: bool = False, width: int = 100, overrides: dict[str, Any] | None = None, source: str | None = None) -> str:
    text = rule_doc_markdown(rule, overrides, source)
    if not color:
        return text
    from rich.markdown import Markdown

    con, buf = _console(color, width)
    con.print(Markdown(text))
    return _clean(buf.getvalue())
