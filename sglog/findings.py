"""Findings: what a rule reports about a run.  Frozen, plain data; renderers turn them into text.

A finding = message (what is wrong, one line) + evidence (the lines that prove
it, or a metric window) + fix (summary, args patch, safety).  An args patch maps
SGLang flags to new values: ``{"--mem-fraction-static": "0.88"}``; a flag to
remove is ``None``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

SEVERITIES = ("error", "warning", "info")
SEVERITY_RANK = {"info": 0, "warning": 1, "error": 2}


@dataclass(frozen=True)
class Evidence:
    file: str
    line: int | None  # 1-based physical line; None for a metric window
    text: str | None  # the line's text (filled in by the pipeline for batch rows)
    note: str | None = None  # e.g. "p99 #running-req over 512 decode lines = 4"

    def to_dict(self) -> dict[str, Any]:
        d = {"file": self.file, "line": self.line, "text": self.text}
        if self.note:
            d["note"] = self.note
        return d


@dataclass(frozen=True)
class Fix:
    summary: str
    args: dict[str, str | None] = field(default_factory=dict)
    safety: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"summary": self.summary, "args": dict(self.args), "safety": self.safety}


@dataclass(frozen=True)
class Superseded:
    """A flag of this finding's fix that another finding's fix decides instead, and why.

    The pipeline (:func:`sglog.fixes.reconcile`) sets it: the finding stands, its value
    for ``flag`` is not the one to use.
    """

    flag: str
    value: str | None  # this finding's value (None: remove the flag)
    by: str  # the winning finding's rule name
    by_value: str | None  # the value that holds
    reason: str  # why the other value holds: "it is set together with --cuda-graph-max-bs 8, ..."
    opposite: bool = False  # the two fixes turn the flag opposite ways (raise/lower, set/remove)

    def to_dict(self) -> dict[str, Any]:
        return {"flag": self.flag, "value": self.value, "by": self.by, "by_value": self.by_value, "opposite": self.opposite, "reason": self.reason}

    def text(self) -> str:
        """One line: ``--flag 0.85 superseded by rule's 0.89 (opposite ways): reason``."""
        show = lambda v: "removal" if v is None else v  # noqa: E731
        return (
            f"{self.flag} {'removal' if self.value is None else self.value} superseded by {self.by}'s {show(self.by_value)}{' (the two turn it opposite ways)' if self.opposite else ''}: {self.reason}"
        )


@dataclass(frozen=True)
class Finding:
    code: str  # permanent, e.g. "SGL101"
    name: str  # kebab-case rule name, e.g. "draft-model-exceeds-static-pool"
    severity: str  # error | warning | info
    message: str
    run: int  # Run.index
    evidence: tuple[Evidence, ...] = ()
    fix: Fix | None = None
    details: dict[str, Any] = field(default_factory=dict)  # computed numbers (for diff/report)
    superseded: tuple[Superseded, ...] = ()  # flags of the fix another finding decides (sglog.fixes.reconcile)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "run": self.run,
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix.to_dict() if self.fix else None,
            "superseded": [x.to_dict() for x in self.superseded],
        }
