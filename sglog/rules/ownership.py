"""Who explains a crash: each crash rule says whether it owns it; the strongest claim wins.

A run has at most one crash (:func:`sglog.rules.facts.crash`: the root-cause
error, the phase, the fan-out).  Every rule that explains crashes subclasses
:class:`CrashRule` and answers :meth:`CrashRule.claim` from the crash's typed
fields: ``None`` (not mine), or how specific its evidence is, on one scale
shared by all rules (lower is stronger):

* :data:`SIGNATURE` - the error itself names the failure class (a collective
  timeout, an illegal address, a missing module, an out-of-memory ...);
* :data:`CONTEXT` - the error is unspecific, the lines around it name the
  class (NCCL warnings just before an unexplained crash);
* :data:`FALLBACK` - nothing names it (the generic `crash` rule).

Rules with a signature add their :attr:`CrashRule.precedence` to it, so that the
more specific of two signatures wins (a watchdog kill that shows an NCCL error
is a watchdog timeout).  No central switch knows the rules: adding a crash rule
is one class with its `claim`.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar

from sglog.findings import Finding
from sglog.rules.base import Rule, dedupe, event_evidence

SIGNATURE = 0
CONTEXT = 1000
FALLBACK = 10_000


class CrashRule(Rule):
    """A rule that explains crashes; subclasses implement :meth:`claim`."""

    precedence: ClassVar[int] = 500  # within a level: lower wins (more specific signatures)

    def claim(self, run, crash) -> int | None:  # pragma: no cover - abstract
        """How strongly this rule explains `crash` (lower is stronger), or None."""
        raise NotImplementedError

    def owned_crash(self, run):
        """The run's crash when this rule is the one that explains it, else None."""
        c = _crash(run)
        return c if c is not None and owner(run) == self.name else None

    def check(self, run, options: dict[str, Any] | None = None) -> list[Finding]:
        """The rule's findings; the one explaining the crash carries the crash's fan-out as evidence."""
        found = super().check(run, options)
        c = self.owned_crash(run)
        if c is None or not c.fanout or not found:
            return found
        extra = [event_evidence(e, note=_fanout_note(e, c.event)) for e in c.fanout[:MAX_FANOUT]]
        if len(c.fanout) > MAX_FANOUT:
            extra[-1] = replace(extra[-1], note=f"{extra[-1].note}; {len(c.fanout) - MAX_FANOUT} more lines like these follow")
        first = replace(found[0], evidence=tuple(dedupe(list(found[0].evidence) + extra)))
        return [first, *found[1:]]


MAX_FANOUT = 3


def _fanout_note(e, root) -> str:
    """What a fan-out line is, said as a consequence of the root cause."""
    if e.kind in ("sigquit", "sigquit_handler"):
        return "a consequence: the launcher saw a child process die"
    if e.kind == "scheduler_dead":
        return "a consequence: the launcher found the scheduler dead"
    if e.kind == "process_killed":
        return "a consequence: the process was killed after the error"
    where = f" on {e.rank.label}" if e.rank else ""
    return f"the same {e.get('exc_type')}{where}: every rank fails the same way"


def _crash(run):
    from sglog.rules import facts

    return facts.crash(run)


def claims(run) -> list[tuple[int, str]]:
    """Every crash rule's claim on the run's crash, strongest first: [(strength, rule name)]."""
    from sglog.rules import RULES

    c = _crash(run)
    if c is None:
        return []
    out = []
    for i, rule in enumerate(RULES):
        if isinstance(rule, CrashRule):
            level = rule.claim(run, c)
            if level is not None:
                out.append((level + rule.precedence, i, rule.name))
    out.sort()
    return [(level, name) for level, _i, name in out]


def owner(run) -> str | None:
    """The name of the rule that explains the run's crash (None when it did not crash); once per run."""
    return run.memo("crash_owner", lambda r: next((name for _level, name in claims(r)), None))
