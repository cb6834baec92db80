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
    chosen = set(plan.findings)
    new_valid = [f for f in new_findings if _before_stop(f, outcome.stop_line)]
    new_keys = {_key(f) for f in new_valid}
    new_names = {f.name for f in new_valid} | {f.code for f in new_valid}
    persisting = tuple(k for k in plan.findings if k in new_keys or k.split(" ", 1)[-1] in new_names)
    worst: dict[str, str] = {}  # "CODE name" / name / code -> the worst severity the new run reports it with
    for f in sorted(new_valid, key=lambda f: -SEVERITY_RANK[f.severity]):
        for k in (_key(f), f.name, f.code):
            worst.setdefault(k, f.severity)
    sev_of = {k: worst.get(k) or worst.get(k.split(" ", 1)[-1], "error") for k in persisting}
    remaining = tuple((k, worst[k]) for k in dict.fromkeys(_key(f) for f in sorted(new_valid, key=lambda f: -SEVERITY_RANK[f.severity])))
    gone = tuple(k for k in plan.findings if k not in persisting)
    orig_keys = {_key(f) for f in original_findings if f.run == original.index}
    new_only = tuple(dict.fromkeys(_key(f) for f in new_valid if _key(f) not in orig_keys and _key(f) not in chosen and f.severity == "error"))

    startup_s = new_run.startup.total_s if new_run is not None and new_run.startup is not None else None
    ready_in = startup_s if startup_s is not None else outcome.ready_s
    dec_new, dec_old = _decode(new_run), _decode(original)
    was = original.ending.describe() if original.ending else None
    details = {
        "ready_in_s": None if ready_in is None else round(ready_in, 1),
        "decode_tok_s": None if dec_new is None else round(dec_new, 1),
        "original_decode_tok_s": None if dec_old is None else round(dec_old, 1),
        "original_ending": was,
        "new_ending": new_run.ending.describe() if new_run is not None and new_run.ending else None,
        "diff": diff_text,
    }

    problems: list[str] = []
    if outcome.status == "timeout":
        within = f"{outcome.timeout_s:g} s" if outcome.timeout_s else duration(outcome.elapsed_s)
        problems.append(f"no ready within {within} (stuck in {outcome.phase or 'launch'})")
    elif outcome.status == "crashed":
        desc = (
            new_run.ending.describe()
            if new_run is not None and new_run.ending and new_run.ending.status == "crashed"
            else f"crashed during {outcome.phase or 'startup'} ({outcome.cause or 'unknown cause'})"
        )
        problems.append(desc)
    elif outcome.status == "exited":
        problems.append(f"the server exited with code {outcome.returncode} before it was ready")
    elif outcome.status == "interrupted":
        problems.append("interrupted before the server was ready")
    if outcome.status == "ready" and outcome.bench is not None and not outcome.bench.get("ok"):
        problems.append(f"the server is ready but {outcome.bench.get('error') or 'the benchmark failed'}")
    errors = [k for k in persisting if sev_of[k] == "error"]
    if errors:
        problems.append(("still reported: " if outcome.status == "ready" else "and still reported: ") + ", ".join(errors))

    if problems:
        text = "not fixed: " + "; ".join(problems)
        if outcome.status == "ready" and gone:
            text += f" (gone: {', '.join(gone)})"
        return Verdict(False, text, gone, persisting, new_only, details, remaining)

    parts = []
    crashed_before = original.ending is not None and original.ending.status == "crashed"
    if gone:
        names = ", ".join(k.split(" ", 1)[-1] for k in gone)
        parts.append(f"{names} {'is' if len(gone) == 1 else 'are'} gone" + (f" (was: {was})" if crashed_before else ""))
    elif crashed_before:
        parts.append(f"the crash is gone (was: {was})")
    left = [sev for _, sev in remaining if sev != "error"]
    if left:
        words = {"warning": ("warning", "warnings"), "info": ("note", "notes")}
        counted = " and ".join(f"{left.count(sev)} {words[sev][left.count(sev) != 1]}" for sev in ("warning", "info") if sev in left)
        left_names = [k for k, sev in remaining if sev != "error"]
        shown = ", ".join(left_names[:3]) + (f" and {len(left_names) - 3} more" if len(left_names) > 3 else "")
        parts.insert(0, f"{'crash fixed' if crashed_before else 'fixed'}; {counted} remain{'s' if len(left) == 1 else ''} ({shown})")
    parts.append(f"the run reached ready in {duration(ready_in)}" if ready_in is not None else "the run reached ready")
    if dec_new is not None:
        parts.append(f"decode {dec_new:.1f} tok/s" + (f" vs {dec_old:.1f} tok/s before" if dec_old is not None else " (the original never decoded)"))
    text = ("" if left else "fixed: ") + "; ".join(parts)
    if new_only:
        text += f"; but new: {', '.join(new_only)}"
    return Verdict(True, text, gone, persisting, new_only, details, remaining)
