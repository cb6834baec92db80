"""What a rule is: permanent code, kebab-case name, severity, declared options, documentation, pure check.

A rule reads one :class:`~sglog.runs.Run` and returns findings.  It never
prints, reads files, looks at the clock or starts processes.  Its thresholds
are declared :class:`Option` values (overridable per call), and its docstring
holds the documentation sections `sglog explain` prints::

    One-line summary.

    ## What it finds
    ## Why it matters
    ## Evidence
    ## Suggested fix
    ## Fix safety
    ## Example

Args patches map SGLang flags to values: `"0.88"`; `None` removes the
flag; `"true"` turns on a switch that takes no value (`--disable-custom-all-reduce`).
"""

from __future__ import annotations

import inspect
import math
import re
from dataclasses import dataclass
from typing import Any, ClassVar, Iterable, Iterator

from sglog.findings import SEVERITIES, SEVERITY_RANK, Evidence, Finding, Fix

DOC_SECTIONS = ("What it finds", "Why it matters", "Evidence", "Suggested fix", "Fix safety", "Example")
_HEADING = re.compile(r"^## (.+?)\s*$", re.M)


@dataclass(frozen=True)
class Option:
    """A threshold of a rule: its default and what it means."""

    default: Any
    help: str


def parse_doc(docstring: str | None) -> tuple[str, dict[str, str]]:
    """(summary, {section: text}) of a rule docstring."""
    text = inspect.cleandoc(docstring or "")
    parts = _HEADING.split(text)
    summary = parts[0].strip().split("\n\n")[0].replace("\n", " ").strip()
    sections: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        sections[parts[i].strip()] = parts[i + 1].strip()
    return summary, sections


class Rule:
    """Base class; subclasses set the class attributes and implement `_check`."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[str] = "warning"
    options: ClassVar[dict[str, Option]] = {}

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.code:
            assert cls.severity in SEVERITIES, (cls.code, cls.severity)
            cls.summary, cls.doc = parse_doc(cls.__doc__)

    summary: ClassVar[str] = ""
    doc: ClassVar[dict[str, str]] = {}

    # -- options
    def resolve(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Declared defaults, updated with `overrides` (unknown keys are an error)."""
        values = {k: o.default for k, o in self.options.items()}
        for k, v in (overrides or {}).items():
            key = k.replace("-", "_")
            if key not in values:
                raise KeyError(f"{self.name}: no option {k!r} (options: {', '.join(values) or 'none'})")
            values[key] = v
        return values

    # -- checking
    def check(self, run, options: dict[str, Any] | None = None) -> list[Finding]:
        """Findings of this rule for one run (pure)."""
        return list(self._check(run, self.resolve(options)))

    def _check(self, run, o: dict[str, Any]) -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    def finding(self, run, message: str, evidence: Iterable[Evidence] = (), fix: Fix | None = None, severity: str | None = None, **details: Any) -> Finding:
        """A finding of this rule; `severity` may lower (never raise) the rule's for a weaker signature."""
        if severity is not None and SEVERITY_RANK[severity] > SEVERITY_RANK[self.severity]:
            raise ValueError(f"{self.name}: a finding cannot be more severe than its rule")
        return Finding(
            code=self.code,
            name=self.name,
            severity=severity or self.severity,
            message=message,
            run=run.index,
            evidence=tuple(dedupe(evidence)),
            fix=fix,
            details=details,
        )

    @property
    def fix_safety(self) -> str:
        """The docs' `Fix safety` section on one line, as a fix carries it."""
        return self.doc["Fix safety"].replace("\n", " ")

    def __repr__(self) -> str:
        return f"<{self.code} {self.name}>"


# ------------------------------------------------------------------ evidence helpers


def dedupe(evidence: Iterable[Evidence]) -> list[Evidence]:
    seen = set()
    out = []
    for e in evidence:
        key = (e.file, e.line, e.note if e.line is None else None)
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out


def first_line(text: str | None) -> str:
    return (text or "").split("\n", 1)[0].rstrip("\r")


def event_evidence(e, note: str | None = None) -> Evidence:
    """The first physical line of an event."""
    return Evidence(file=e.file, line=e.line, text=first_line(e.text), note=note)


def exception_evidence(e) -> list[Evidence]:
    """A traceback block: its first line and the line naming the exception (when present)."""
    out = [event_evidence(e)]
    lines = (e.text or "").split("\n")
    exc_type = e.get("exc_type")
    if exc_type and len(lines) > 1:
        for i in range(len(lines) - 1, 0, -1):
            s = lines[i]
            if s.startswith(exc_type) or (":" in s and s.split(":", 1)[0].endswith(exc_type.rsplit(".", 1)[-1]) and not s[:1].isspace()):
                out.append(Evidence(file=e.file, line=e.line + i, text=s.rstrip("\r")))
                break
    return out


def exception_line(e) -> str:
    """`Type: first line of the message` of an error event."""
    return f"{e.get('exc_type')}: {(e.get('exc_message') or '').splitlines()[0] if e.get('exc_message') else ''}"


def text_line_evidence(e, needle: str) -> Evidence | None:
    """The physical line of a block that contains `needle` (case-insensitive)."""
    low = needle.lower()
    for i, s in enumerate((e.text or "").split("\n")):
        if low in s.lower():
            return Evidence(file=e.file, line=e.line + i, text=s.rstrip("\r"))
    return None


def nearby_line_evidence(run, e, patterns: Iterable[str], before: int = 5) -> Evidence | None:
    """The first line naming one of `patterns` (tried in order) in block `e` or the events up to `before` lines above it."""
    near = [e] + run.events_between(e.file, e.line - before, e.line)
    for pat in patterns:
        for x in near:
            hit = text_line_evidence(x, pat)
            if hit is not None:
                return hit
    return None


def pick_remedy(text: str, remedies: Iterable[tuple[Any, dict[str, str | None], str]], default: tuple[dict[str, str | None], str]) -> tuple[dict[str, str | None], str]:
    """(args, advice) of the first remedy whose pattern (a string or a tuple of them) occurs in `text`; `default` if none does."""
    for pats, args, advice in remedies:
        if any(p in text for p in ((pats,) if isinstance(pats, str) else pats)):
            return dict(args), advice
    return default


def row_evidence(row: dict[str, Any], note: str | None = None) -> Evidence:
    """A batch-frame row; its text is filled in by the pipeline (sglog.diagnose)."""
    return Evidence(file=row.get("file") or "", line=row.get("line"), text=None, note=note)


def window_evidence(run, note: str) -> Evidence:
    """A metric over a window of the run (no single line proves it)."""
    return Evidence(file=run.files[0] if run.files else "", line=None, text=None, note=note)


# ------------------------------------------------------------------ number helpers


def floor_to(x: float, step: float = 0.01) -> float:
    return math.floor(x / step + 1e-9) * step


def ceil_to(x: float, step: float = 0.01) -> float:
    return math.ceil(x / step - 1e-9) * step


def fmt_frac(x: float) -> str:
    return f"{x:.2f}"


def gb(x: float | None) -> str:
    return "?" if x is None else f"{x:.2f} GB"
