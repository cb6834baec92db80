"""What a post-mortem is made of: frozen, plain data gathered once (sglog/report/collect.py)
and turned into Markdown, chart specs and HTML by pure functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from sglog.findings import Finding
    from sglog.runs.build import Run

MAX_POINTS = 500  # a serving chart never has more windows than this


@dataclass(frozen=True)
class UnparsedGroup:
    """Unrecognised lines that look alike (numbers and hex masked)."""

    pattern: str
    count: int  # physical lines
    first_line: int
    example: str


@dataclass(frozen=True)
class InputFile:
    name: str  # base name (reports never show absolute paths)
    size: int
    sha256: str
    compression: str
    lines: int
    blank: int
    unparsed: int
    coverage: float
    unparsed_groups: tuple[UnparsedGroup, ...] = ()


@dataclass(frozen=True)
class Change:
    """A flag the relaunch changes (from sglog.relaunch)."""

    flag: str
    before: Any
    before_origin: str | None
    after: Any  # None: the flag is removed
    source: str  # "CODE name" of the finding
    reason: str


@dataclass(frozen=True)
class Relaunch:
    lines: tuple[str, ...]  # the command, one flag per line, shell-quoted
    source: str  # "launch command" | "server arguments" (how the base command was found)
    changes: tuple[Change, ...] = ()
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class Subject:
    """One run under report, with everything the renderers need about it."""

    label: str  # "A" / "B" in a comparison, "" alone
    run: Run
    runs_in_log: int
    files: tuple[InputFile, ...]
    findings: tuple[Finding, ...]  # most severe first
    relaunch: Relaunch | None

    @property
    def title(self) -> str:
        return f"{self.label}: {self.run.name}" if self.label else self.run.name


@dataclass(frozen=True)
class Report:
    subjects: tuple[Subject, ...]  # one, or two for --compare
    window: str  # serving window width, e.g. "10s"
    diff_markdown: str | None = None  # sglog.render.diff output, when comparing
    diff_verdict: str | None = None

    @property
    def compare(self) -> bool:
        return len(self.subjects) > 1
