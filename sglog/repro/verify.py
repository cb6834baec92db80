"""Original run + relaunched run -> was the fix a fix?  (pure)

Fixed = the relaunch reached ready, the smoke/benchmark (if asked) worked, and
no error whose fix was applied is reported again.  A warning or note that remains (say, slow
weight loading) does not undo a fixed crash: the verdict says "crash fixed; 1 warning remains"
and lists it in ``remaining``; whether it fails the command is ``--fail-on``'s choice.  Findings
whose evidence lies only after sglog began stopping the server (line
``stop_line`` of the new log) are the stop's doing and do not count.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from sglog.findings import SEVERITY_RANK, Finding

if TYPE_CHECKING:
    from sglog.relaunch import Plan
    from sglog.runs.build import Run


@dataclass(frozen=True)
class Outcome:
    """What the launch observed, live."""

    status: str  # ready | crashed | timeout | exited | interrupted
    log: str
    elapsed_s: float
    ready_s: float | None = None  # wall seconds from launch to ready
    phase: str | None = None  # the phase it was in when it crashed / timed out
    cause: str | None = None  # root cause seen live
    returncode: int | None = None
    signals: tuple[str, ...] = ()
    stop_line: int | None = None
    timeout_s: float | None = None
    bench: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "status": self.status,
            "log": self.log,
            "elapsed_s": round(self.elapsed_s, 2),
            "ready_s": None if self.ready_s is None else round(self.ready_s, 2),
            "phase": self.phase,
            "cause": self.cause,
            "returncode": self.returncode,
            "signals": list(self.signals),
            "stop_line": self.stop_line,
            "bench": self.bench,
        }


@dataclass(frozen=True)
class Verdict:
    fixed: bool
    text: str
    gone: tuple[str, ...] = ()
    persisting: tuple[str, ...] = ()
    new: tuple[str, ...] = ()
    details: dict[str, Any] = field(default_factory=dict)
    remaining: tuple[tuple[str, str], ...] = ()  # (finding key, severity) of the new run's findings, worst first

    def to_dict(self) -> dict[str, Any]:
        return {
            "fixed": self.fixed,
            "text": self.text,
            "gone": list(self.gone),
            "persisting": list(self.persisting),
            "new": list(self.new),
            "remaining": [{"finding": k, "severity": sev} for k, sev in self.remaining],
            **self.details,
        }

    def fails(self, fail_on: str = "error") -> bool:
        """Not fixed, or a finding of the new run at or above ``fail_on`` remains."""
        from sglog.findings import SEVERITY_RANK

        return not self.fixed or any(SEVERITY_RANK[sev] >= SEVERITY_RANK[fail_on] for _, sev in self.remaining)


def _key(f: Finding) -> str:
    return f"{f.code} {f.name}"


def _before_stop(f: Finding, stop_line: int | None) -> bool:
    if stop_line is None:
        return True
    lines = [e.line for e in f.evidence if e.line is not None]
    return not lines or min(lines) <= stop_line


def duration(s: float | None) -> str:
    """A duration the way a person says it.

    >>> duration(42.0), duration(720.0), duration(424.0), duration(9000.0)
    ('42 s', '12 min', '7.1 min', '2.5 h')
    """
    if s is None:
        return "?"
    if s < 90:
        return f"{s:.0f} s"
    if s < 90 * 60:
        m = s / 60
        return f"{m:.0f} min" if abs(m - round(m)) < 0.05 else f"{m:.1f} min"
    return f"{s / 3600:.1f} h"


def _decode(run: Run | None) -> float | None:
    if run is None:
        return None
    from sglog import timeline

    v = timeline.decode_stats(run).get("p50")
    return float(v) if isinstance(v, (int, float)) else None


def verdict(plan: Plan, original: Run, original_findings: Sequence[Finding], new_run: Run | None, new_findings: Sequence[Finding], outcome: Outcome, diff_text: str | None = None) -> Verdict:
    """The verdict line and its parts."""
    c = _compare(plan, original, original_findings, new_findings, outcome.stop_line)
    m = _measure(original, new_run, outcome)
    details = _details(m, diff_text)
    problems = _problems(outcome, new_run, [k for k in c.persisting if c.severity[k] == "error"])
    if problems:
        return Verdict(False, _not_fixed_text(problems, outcome, c.gone), c.gone, c.persisting, c.new, details, c.remaining)
    return Verdict(True, _fixed_text(original, c, m), c.gone, c.persisting, c.new, details, c.remaining)


@dataclass(frozen=True)
class _Compared:
    """The plan's findings against the new run's (those before the stop)."""

    gone: tuple[str, ...]  # fixed findings the new run no longer reports
    persisting: tuple[str, ...]  # fixed findings it still reports
    new: tuple[str, ...]  # errors neither the original run nor the plan had
    remaining: tuple[tuple[str, str], ...]  # (finding key, severity) of the new run's findings, worst first
    severity: dict[str, str]  # persisting finding -> the worst severity the new run reports it with


def _compare(plan: Plan, original: Run, original_findings: Sequence[Finding], new_findings: Sequence[Finding], stop_line: int | None) -> _Compared:
    new_valid = [f for f in new_findings if _before_stop(f, stop_line)]
    persisting = _persisting(plan.findings, new_valid)
    worst = _worst(new_valid)
    chosen = set(plan.findings)
    orig_keys = {_key(f) for f in original_findings if f.run == original.index}
    return _Compared(
        gone=tuple(k for k in plan.findings if k not in persisting),
        persisting=persisting,
        new=tuple(dict.fromkeys(_key(f) for f in new_valid if _key(f) not in orig_keys and _key(f) not in chosen and f.severity == "error")),
        remaining=tuple((k, worst[k]) for k in dict.fromkeys(_key(f) for f in _worst_first(new_valid))),
        severity={k: worst.get(k) or worst.get(k.split(" ", 1)[-1], "error") for k in persisting},
    )


def _persisting(keys: Sequence[str], new: Sequence[Finding]) -> tuple[str, ...]:
    """The "CODE name" keys the new run reports again, by key, name or code."""
    new_keys = {_key(f) for f in new}
    new_names = {f.name for f in new} | {f.code for f in new}
    return tuple(k for k in keys if k in new_keys or k.split(" ", 1)[-1] in new_names)


def _worst_first(findings: Sequence[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: -SEVERITY_RANK[f.severity])


def _worst(findings: Sequence[Finding]) -> dict[str, str]:
    """ "CODE name" / name / code -> the worst severity the findings report it with."""
    worst: dict[str, str] = {}
    for f in _worst_first(findings):
        for k in (_key(f), f.name, f.code):
            worst.setdefault(k, f.severity)
    return worst


@dataclass(frozen=True)
class _Measures:
    """What the verdict says of the two runs besides findings."""

    ready_in: float | None  # seconds to ready: the new run's startup, else as seen live
    decode: float | None  # the new run's decode tok/s (p50)
    decode_before: float | None  # the original's
    was: str | None  # how the original ended
    ending: str | None  # how the new run ended


def _measure(original: Run, new_run: Run | None, outcome: Outcome) -> _Measures:
    startup_s = new_run.startup.total_s if new_run is not None and new_run.startup is not None else None
    return _Measures(
        ready_in=startup_s if startup_s is not None else outcome.ready_s,
        decode=_decode(new_run),
        decode_before=_decode(original),
        was=original.ending.describe() if original.ending else None,
        ending=new_run.ending.describe() if new_run is not None and new_run.ending else None,
    )


def _details(m: _Measures, diff_text: str | None) -> dict[str, Any]:
    return {
        "ready_in_s": None if m.ready_in is None else round(m.ready_in, 1),
        "decode_tok_s": None if m.decode is None else round(m.decode, 1),
        "original_decode_tok_s": None if m.decode_before is None else round(m.decode_before, 1),
        "original_ending": m.was,
        "new_ending": m.ending,
        "diff": diff_text,
    }


def _problems(outcome: Outcome, new_run: Run | None, errors: Sequence[str]) -> list[str]:
    """Why the fix is not a fix (none: it is): the launch, the benchmark, errors still reported."""
    problems: list[str] = []
    launch = _launch_problem(outcome, new_run)
    if launch is not None:
        problems.append(launch)
    if outcome.status == "ready" and outcome.bench is not None and not outcome.bench.get("ok"):
        problems.append(f"the server is ready but {outcome.bench.get('error') or 'the benchmark failed'}")
    if errors:
        problems.append(("still reported: " if outcome.status == "ready" else "and still reported: ") + ", ".join(errors))
    return problems


def _launch_problem(outcome: Outcome, new_run: Run | None) -> str | None:
    """How the relaunch failed to get ready (None: it got ready)."""
    if outcome.status == "timeout":
        within = f"{outcome.timeout_s:g} s" if outcome.timeout_s else duration(outcome.elapsed_s)
        return f"no ready within {within} (stuck in {outcome.phase or 'launch'})"
    if outcome.status == "crashed":
        if new_run is not None and new_run.ending and new_run.ending.status == "crashed":
            return new_run.ending.describe()
        return f"crashed during {outcome.phase or 'startup'} ({outcome.cause or 'unknown cause'})"
    if outcome.status == "exited":
        return f"the server exited with code {outcome.returncode} before it was ready"
    if outcome.status == "interrupted":
        return "interrupted before the server was ready"
    return None


def _not_fixed_text(problems: Sequence[str], outcome: Outcome, gone: Sequence[str]) -> str:
    text = "not fixed: " + "; ".join(problems)
    if outcome.status == "ready" and gone:
        text += f" (gone: {', '.join(gone)})"
    return text


def _fixed_text(original: Run, c: _Compared, m: _Measures) -> str:
    """'fixed: X is gone (was: ...); the run reached ready in 42 s; decode ...', or 'fixed; 1 warning remains (...); ...'."""
    crashed_before = original.ending is not None and original.ending.status == "crashed"
    left = _left_part(c.remaining, crashed_before)
    parts = [*left, *_gone_part(c.gone, m.was, crashed_before)]
    parts.append(f"the run reached ready in {duration(m.ready_in)}" if m.ready_in is not None else "the run reached ready")
    if m.decode is not None:
        parts.append(f"decode {m.decode:.1f} tok/s" + (f" vs {m.decode_before:.1f} tok/s before" if m.decode_before is not None else " (the original never decoded)"))
    text = ("" if left else "fixed: ") + "; ".join(parts)
    if c.new:
        text += f"; but new: {', '.join(c.new)}"
    return text


def _gone_part(gone: Sequence[str], was: str | None, crashed_before: bool) -> list[str]:
    if gone:
        names = ", ".join(k.split(" ", 1)[-1] for k in gone)
        return [f"{names} {'is' if len(gone) == 1 else 'are'} gone" + (f" (was: {was})" if crashed_before else "")]
    return [f"the crash is gone (was: {was})"] if crashed_before else []


_COUNTED = {"warning": ("warning", "warnings"), "info": ("note", "notes")}


def _left_part(remaining: Sequence[tuple[str, str]], crashed_before: bool) -> list[str]:
    """'fixed; 1 warning and 2 notes remain (A, B, C and 1 more)': the new run's findings below error."""
    left = [sev for _, sev in remaining if sev != "error"]
    if not left:
        return []
    counted = " and ".join(f"{left.count(sev)} {_COUNTED[sev][left.count(sev) != 1]}" for sev in ("warning", "info") if sev in left)
    left_names = [k for k, sev in remaining if sev != "error"]
    shown = ", ".join(left_names[:3]) + (f" and {len(left_names) - 3} more" if len(left_names) > 3 else "")
    return [f"{'crash fixed' if crashed_before else 'fixed'}; {counted} remain{'s' if len(left) == 1 else ''} ({shown})"]
