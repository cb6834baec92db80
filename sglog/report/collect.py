"""Gather what a post-mortem needs: the only part of sglog.report that reads files.

``collect`` parses the logs, builds their runs, picks the run under report,
asks the diagnosis, relaunch-plan and (for two runs) diff stages for their
results, and hashes the inputs.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from sglog.errors import UsageError
from sglog.report.model import MAX_POINTS, Change, InputFile, Relaunch, Report, Subject, UnparsedGroup

if TYPE_CHECKING:
    from sglog.findings import Finding
    from sglog.read.parse import ParsedLog
    from sglog.runs.build import Run

WINDOW_LADDER = ("1s", "2s", "5s", "10s", "15s", "30s", "1m", "2m", "5m", "10m", "15m", "30m", "1h", "2h", "6h", "12h", "1d")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400}


def window_seconds(every: str) -> int:
    return int(every[:-1]) * _SECONDS[every[-1]]


def pick_window(span_s: float, gap_s: float = 0.0, max_points: int = MAX_POINTS, lines_per_window: int = 5) -> str:
    """The narrowest window of the ladder that keeps a chart under ``max_points`` windows and
    holds about ``lines_per_window`` batch lines (``gap_s``: median gap between batch lines).

    >>> pick_window(120), pick_window(3600), pick_window(6 * 3600), pick_window(30 * 86400)
    ('1s', '10s', '1m', '2h')
    >>> pick_window(400, gap_s=1.0)
    '5s'
    """
    for every in WINDOW_LADDER:
        n = window_seconds(every)
        if span_s / n < max_points and n >= lines_per_window * gap_s:
            return every
    return WINDOW_LADDER[-1]


def serving_span(run: Run) -> tuple[float, float]:
    """Seconds between the first and last timestamped batch line, and the median gap between lines."""
    b = run.decode if run.decode.height else run.batches
    if b.height == 0 or "ts" not in b.columns:
        return 0.0, 0.0
    ts = b.get_column("ts").drop_nulls().sort()
    if ts.len() == 0:
        return 0.0, 0.0
    gaps = ts.diff().dt.total_milliseconds().drop_nulls()
    gaps = gaps.filter(gaps > 0)
    median = gaps.median() if gaps.len() else None
    gap = float(median) / 1000.0 if isinstance(median, (int, float)) else 0.0
    first, last = ts.min(), ts.max()
    return ((last - first).total_seconds() if isinstance(first, datetime) and isinstance(last, datetime) else 0.0), gap


# ------------------------------------------------------------------ inputs

_MASK = (
    (re.compile(r"\b0x[0-9a-fA-F]+\b|\b[0-9a-fA-F]{8,}\b"), "#"),
    (re.compile(r"\d+(?:\.\d+)?"), "N"),
)


def _pattern(message: str) -> str:
    first = message.split("\n", 1)[0].strip()
    for rx, rep in _MASK:
        first = rx.sub(rep, first)
    return first[:120]


def unparsed_groups(log: ParsedLog, limit: int = 20) -> tuple[UnparsedGroup, ...]:
    """Unrecognised lines of a parsed log grouped by their look, most frequent first."""
    counts: Counter[str] = Counter()
    first: dict[str, tuple[int, str]] = {}
    for e in log.events:
        if e.kind != "unparsed":
            continue
        msg = e.get("message") or e.text or ""
        key = _pattern(msg)
        counts[key] += e.end_line - e.line + 1
        first.setdefault(key, (e.line, (e.text or msg).split("\n", 1)[0][:200]))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], first[kv[0]][0]))
    return tuple(UnparsedGroup(pattern=k, count=n, first_line=first[k][0], example=first[k][1]) for k, n in ranked[:limit])


def input_file(log: ParsedLog) -> InputFile:
    src = log.source
    return InputFile(
        name=Path(src.name).name if src.name != "-" else "(stdin)",
        size=src.size,
        sha256=src.sha256(),
        compression=src.compression,
        lines=log.lines,
        blank=log.blank,
        unparsed=log.unparsed,
        coverage=log.coverage,
        unparsed_groups=unparsed_groups(log),
    )


# ------------------------------------------------------------------ fixes and the diff


def relaunch_command(run: Run, findings: Sequence[Finding]) -> Relaunch | None:
    """The relaunch with every fix applied (sglog.fixes decides which fix holds a flag)."""
    from sglog.relaunch import build_plan, final_lines

    try:
        plan = build_plan(run, findings)  # most severe first: its fix decides a flag
    except UsageError:
        return None  # neither a launch command nor server arguments
    changes = tuple(Change(flag=c.flag, before=c.before, before_origin=c.before_origin, after=c.after, source=c.source, reason=c.reason) for c in plan.changes if c.applied)
    return Relaunch(
        lines=tuple(final_lines(plan)),  # the new command only: what a user pastes
        source="launch command" if run.launch_command else "server arguments",
        changes=changes,
        notes=tuple(plan.notes),
    )


def _diff(a: Subject, b: Subject) -> tuple[str, str]:
    """The diff stage's Markdown (headings under the report's '## Comparison') and its verdict."""
    from sglog.compare.diff import compare
    from sglog.render.diff import render_markdown

    result = compare(a.run, b.run, list(a.findings), list(b.findings))
    return render_markdown(result, level=3), result.verdict.text


# ------------------------------------------------------------------ the whole report


def subject(paths: list[str], run_no: int | None, label: str) -> Subject:
    from sglog.diagnose import diagnose_runs
    from sglog.read.parse import parse_file
    from sglog.runs.build import build_runs

    logs = [parse_file(p) for p in paths]
    runs = build_runs(logs)
    if not runs:
        raise UsageError(f"{', '.join(paths)}: no server launch found in the log")
    if run_no is None:
        run = runs[-1]
    else:
        chosen = [r for r in runs if r.index == run_no]
        if not chosen:
            raise UsageError(f"--run {run_no}: the log holds {len(runs)} run(s)")
        run = chosen[0]
    mine = tuple(f for f in diagnose_runs(runs) if f.run == run.index)  # most severe first, evidence text filled in
    files = tuple(input_file(log) for log in logs if log.source.name in run.files)
    return Subject(
        label=label,
        run=run,
        runs_in_log=len(runs),
        files=files,
        findings=mine,
        relaunch=relaunch_command(run, mine),
    )


def collect(logs: list[str], run: int | None = None, compare: list[str] | None = None, compare_run: int | None = None) -> Report:
    subjects = [subject(logs, run, "A" if compare else "")]
    if compare:
        subjects.append(subject(compare, compare_run, "B"))
    spans = [serving_span(s.run) for s in subjects]
    window = pick_window(max(sp for sp, _ in spans), max(g for _, g in spans))
    diff_md = verdict = None
    if compare:
        diff_md, verdict = _diff(subjects[0], subjects[1])
    return Report(subjects=tuple(subjects), window=window, diff_markdown=diff_md, diff_verdict=verdict)
