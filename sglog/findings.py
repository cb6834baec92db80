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
class Finding:
    code: str  # permanent, e.g. "SGL101"
    name: str  # kebab-case rule name, e.g. "draft-model-exceeds-static-pool"
    severity: str  # error | warning | info
    message: str
    run: int  # Run.index
    evidence: tuple[Evidence, ...] = ()
    fix: Fix | None = None
    details: dict[str, Any] = field(default_factory=dict)  # computed numbers (for diff/report)

    def to_dict(self) -> dict[str, Any]:
        return {
            "code": self.code,
            "name": self.name,
            "severity": self.severity,
            "message": self.message,
            "run": self.run,
            "evidence": [e.to_dict() for e in self.evidence],
            "fix": self.fix.to_dict() if self.fix else None,
        }
