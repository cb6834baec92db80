"""Crash ownership (issue 27): each crash rule claims a crash from its typed fields; the strongest claim wins.

No central switch: the owner is whichever rule's ``claim`` is strongest, one root cause per crash,
and the fan-out (SIGQUIT, "child failed", the same error on other ranks) is the owner's evidence.
"""

from __future__ import annotations

import ast

import pytest

import sglog
import sglog.rules
from conftest import ROOT
from sglog.rules import RULES, facts, ownership
from sglog.rules.ownership import SIGNATURE, CrashRule
from test_rules import CASES, load_cases

CRASH_RULES = [r for r in RULES if isinstance(r, CrashRule)]


def crash_cases():
    for path in sorted(CASES.glob("*.cases")):
        for i, case in enumerate(load_cases(path)):
            if case["expect"] == "fail" and get(path.stem) in CRASH_RULES:
                yield pytest.param(path.stem, case, id=f"{path.stem}-{i}")


def get(name):
    return next((r for r in RULES if r.name == name), None)


def load(tmp_path, case):
    log = tmp_path / "case.log"
    log.write_text("\n".join(case["lines"]) + "\n", encoding="utf-8")
    return sglog.load(log)


def test_no_central_switch():
    """facts knows no rule names: it has no classify and no crash_of, and no rule reads a category."""
    tree = ast.parse((ROOT / "sglog/rules/facts.py").read_text(encoding="utf-8"))
    defined = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    assert not {"classify", "crash_of"} & defined
    names = {r.name for r in RULES}
    strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
    assert not names & strings, f"facts.py names rules: {names & strings}"
    for path in (ROOT / "sglog/rules").rglob("*.py"):
        assert ".category" not in path.read_text(encoding="utf-8"), path


def test_every_crash_rule_claims_for_itself():
    assert get("crash") in CRASH_RULES
    for r in CRASH_RULES:
        assert type(r).claim is not CrashRule.claim, f"{r.name} must implement claim()"


@pytest.mark.parametrize(("rule_name", "case"), list(crash_cases()))
def test_a_crash_has_exactly_one_owner_and_it_is_the_case_rule(tmp_path, rule_name, case):
    for run in load(tmp_path, case):
        c = facts.crash(run)
        if c is None:
            continue
        owners = [r.name for r in CRASH_RULES if r.owned_crash(run) is not None]
        assert len(owners) == 1, owners
        assert ownership.claims(run) == ownership.claims(run)  # pure
        if rule_name != "crash" and any(f.name == rule_name for f in get(rule_name).check(run)):
            assert owners == [rule_name]


def test_the_generic_rule_claims_only_what_nothing_else_names(tmp_path):
    case = next(c for c in load_cases(CASES / "crash.cases") if c["title"].startswith("the root cause is the first traceback"))
    (run,) = load(tmp_path, case)
    levels = ownership.claims(run)
    assert levels[-1][1] == "crash" and levels[-1][0] >= ownership.FALLBACK
    assert ownership.owner(run) == "crash"


def test_the_fanout_is_the_owners_evidence(tmp_path):
    case = next(c for c in load_cases(CASES / "crash.cases") if c["title"].startswith("the root cause is the first traceback"))
    (run,) = load(tmp_path, case)
    c = facts.crash(run)
    assert {e.kind for e in c.fanout} >= {"sigquit", "scheduler_dead"}
    (finding,) = get("crash").check(run)
    notes = [e.note or "" for e in finding.evidence]
    assert any("consequence" in n for n in notes)
    assert finding.evidence[0].line < min(e.line for e in c.fanout)  # the root cause first


def test_a_new_crash_rule_is_one_class(tmp_path, monkeypatch):
    """A rule added to the registry with a stronger claim takes the crash; nothing else changes."""

    class SizeKRule(CrashRule):
        """Marlin MoE kernels reject the split.

        ## What it finds
        x
        ## Why it matters
        x
        ## Evidence
        x
        ## Suggested fix
        x
        ## Fix safety
        x
        ## Example
        x
        """

        code = "SGL599"
        name = "marlin-split"
        severity = "error"
        precedence = 1

        def claim(self, run, c):
            return SIGNATURE if "size_k" in (c.event.get("exc_message") or "") else None

        def _check(self, run, o):
            if self.owned_crash(run) is not None:
                yield self.finding(run, "marlin split")

    monkeypatch.setattr(sglog.rules, "RULES", (*RULES, SizeKRule()))
    case = next(c for c in load_cases(CASES / "crash.cases") if c["title"].startswith("the root cause is the first traceback"))
    (run,) = load(tmp_path, case)
    assert ownership.owner(run) == "marlin-split"
    assert get("crash").check(run) == []
