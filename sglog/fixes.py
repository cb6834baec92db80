"""Fixes -> one value per flag: which finding's fix holds a flag two fixes set, and why the others lose.

The one merge of fixes: ``diagnose`` (its ``suggested_args``), ``report`` and ``repro`` (the
relaunch, ``sglog.relaunch.build_plan``) all take it from here.  Pure: findings (and the run
they are about) in, decisions out.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from sglog.findings import SEVERITY_RANK, Finding, Superseded

# ------------------------------------------------------------------ one value per flag: which fix wins


def fix_order(findings: Iterable[Finding]) -> list[Finding]:
    """The order in which findings' fixes claim the flags they set: the first to set a flag decides it.

    1. the more severe finding: what broke the run comes before what slows it;
    2. the fix that changes more flags: its values are computed together (a smaller
       ``--cuda-graph-max-bs`` and the ``--mem-fraction-static`` that gives the freed memory to the
       KV pool; the removal of every ``--speculative-*`` flag), so one of them alone is not what it
       computed;
    3. the rule order (``sglog rules``).
    """
    from sglog.rules import RULES

    order = {r.code: i for i, r in enumerate(RULES)}
    return sorted(findings, key=lambda f: (-SEVERITY_RANK[f.severity], -len(f.fix.args) if f.fix is not None else 0, order.get(f.code, len(order))))


@dataclass(frozen=True)
class FlagDecision:
    """The value one flag gets when every finding's fix is applied, the fix it comes from, and the others."""

    flag: str  # SGLang's spelling (``--tp``, ``--mem-fraction-static``)
    value: str | None  # None: remove the flag
    won: Finding
    overridden: tuple[tuple[Finding, str | None], ...] = ()  # (finding, its other value)
    agreed: tuple[Finding, ...] = ()  # later fixes with the same value


def _same_value(a: str | None, b: str | None) -> bool:
    if a is None or b is None:
        return a is b
    try:
        return float(a) == float(b)
    except ValueError:
        return a.strip().lower() == b.strip().lower()


def decide(findings: Iterable[Finding], run_index: int | None = None) -> dict[str, FlagDecision]:
    """Flag -> its decision, over the fixes of one run's findings (all given, or those of ``run_index``).

    The one merge of fixes: ``diagnose`` (``suggested_args``), ``report`` and ``repro`` (the
    relaunch, ``sglog.relaunch``) all take it from here.  Flags are keyed by SGLang's spelling
    (``--tp-size`` and ``--tp`` are one flag).
    """
    from sglog.read import args as sargs

    out: dict[str, FlagDecision] = {}
    for f in fix_order(x for x in findings if run_index is None or x.run == run_index):
        for flag, value in (f.fix.args if f.fix is not None else {}).items():
            key = sargs.flag_of(sargs.field_of(flag))
            d = out.get(key)
            if d is None:
                out[key] = FlagDecision(key, value, f)
            elif d.won is f or any(x is f for x, _ in d.overridden) or any(x is f for x in d.agreed):
                continue
            elif _same_value(d.value, value):
                out[key] = replace(d, agreed=d.agreed + (f,))
            else:
                out[key] = replace(d, overridden=d.overridden + ((f, value),))
    return out


def _direction(run, flag: str, value: str | None) -> str:
    """How a value moves a flag from what the run had: up, down, remove, set."""
    if value is None:
        return "remove"
    from sglog.read import args as sargs

    cur = (run.args or {}).get(sargs.field_of(flag)) if run is not None else None
    if cur is None:
        return "set"
    try:
        new, old = float(value), float(cur)
    except (TypeError, ValueError):
        return "set"
    return "up" if new > old else "down" if new < old else "same"


def why_holds(d: FlagDecision, lost: Finding) -> str:
    """Why the decision's value holds over ``lost``'s: the reason of :func:`fix_order` in this run's words."""
    from sglog.read import args as sargs

    won = d.won
    if SEVERITY_RANK[won.severity] > SEVERITY_RANK[lost.severity]:
        return f"{won.name} is {_a(won.severity)}, this finding {_a(lost.severity)}: the more severe finding's fix decides"
    won_args = won.fix.args if won.fix is not None else {}  # (a decision's findings all have fixes)
    lost_args = lost.fix.args if lost.fix is not None else {}
    if len(won_args) > len(lost_args):
        others = ", ".join(k if v is None else f"{k} {v}" for k, v in won_args.items() if sargs.flag_of(sargs.field_of(k)) != d.flag)
        return f"{won.name} {'removes' if d.value is None else 'sets'} it together with {others}, a value computed for that change (the fix that changes more flags decides the ones it shares)"
    return f"{won.name} comes first in the rule order (sglog rules) among fixes of the same severity and size"


def _a(severity: str) -> str:
    return f"{'an' if severity[:1] in 'aeiou' else 'a'} {severity}"


def reconcile(findings: list[Finding], runs=()) -> list[Finding]:
    """The findings, each that loses a flag to another fix (:func:`decide`) carrying why: its
    ``superseded`` entries name the flag, both values, the finding that decides it and the reason."""
    by_run = {r.index: r for r in runs}
    lost: dict[int, list[Superseded]] = {}
    for run_index in dict.fromkeys(f.run for f in findings):
        run = by_run.get(run_index)
        for flag, d in decide(findings, run_index).items():
            up = _direction(run, flag, d.value)
            for f, value in d.overridden:
                mine = _direction(run, flag, value)
                opposite = {up, mine} == {"up", "down"} or (up == "remove") != (mine == "remove")
                lost.setdefault(id(f), []).append(Superseded(flag, value, d.won.name, d.value, why_holds(d, f), opposite))
    if not lost:
        return findings
    return [replace(f, superseded=f.superseded + tuple(lost[id(f)])) if id(f) in lost else f for f in findings]


def merged_args(findings: list[Finding], run_index: int) -> dict[str, str | None]:
    """The args patch of a run's findings, one value per flag (:func:`decide`)."""
    return {flag: d.value for flag, d in decide(findings, run_index).items()}
