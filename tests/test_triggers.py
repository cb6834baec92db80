"""Every rule declares its triggers (the event kinds and run facts it reads), and they are honest.

* each trigger is an event kind (``sglog.events.KIND_CLASSES``) or a run fact (``rules.base.FACTS``);
* a rule's module (with the area helpers it imports) reads no event kind it did not declare:
  the kinds passed to ``events_of`` / ``first`` / ``has`` / ``count`` / ``said`` (with the error
  blocks a named message is raised in) / ``last_before`` / ``by_kind.get`` and compared with
  ``.kind`` / ``named_kind`` (``==``, ``in``), read from the source with ``ast``;
* diagnose skips a rule on a run without any of its triggers, and that changes no finding: over
  every corpus and story log (and every rule case: tests/test_rules.py run_case), a rule that is not triggered finds nothing,
  and diagnose's findings are the same with and without the skip.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import sys

import pytest

from conftest import REAL, STORY
from sglog.events import BLOCK_KINDS, KIND_CLASSES
from sglog.rules import RULES, facts
from sglog.rules.base import FACTS, Rule
from sglog.runs.build import ERROR_KINDS

READERS = {"events_of", "first", "has", "count", "said", "last_before"}
# the kind tuples rule modules spread into a reader, by name
KNOWN = {"STARTUP_EVENT_KINDS": facts.STARTUP_EVENT_KINDS, "FANOUT_KINDS": facts.FANOUT_KINDS, "BLOCK_KINDS": BLOCK_KINDS, "ERROR_KINDS": ERROR_KINDS}


def _strings(node, consts) -> list[str] | None:
    """The strings a constant / tuple / named tuple / sum of them stands for (None when it is not one)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return [node.value]
    if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
        parts = [_strings(x, consts) for x in node.elts]
        return None if any(p is None for p in parts) else [s for p in parts for s in p]
    if isinstance(node, (ast.Name, ast.Attribute)):
        key = node.id if isinstance(node, ast.Name) else node.attr
        return list(consts[key]) if key in consts else None
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        a, b = _strings(node.left, consts), _strings(node.right, consts)
        return None if a is None or b is None else a + b
    return None


def _is_kind(node) -> bool:
    if isinstance(node, ast.Attribute) and node.attr in ("kind", "named_kind"):
        return True
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "get" and bool(node.args) and getattr(node.args[0], "value", None) == "named_kind"


def kind_reads(source: str) -> set[str]:
    """The event kinds a module's source reads (see the module docs)."""
    tree = ast.parse(source)
    consts = dict(KNOWN)
    for st in tree.body:
        if isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.targets[0], ast.Name):
            s = _strings(st.value, consts)
            if s is not None:
                consts[st.targets[0].id] = s
    out: set[str] = set()
    for n in ast.walk(tree):
        if isinstance(n, ast.Call):
            f = n.func
            name = f.attr if isinstance(f, ast.Attribute) else getattr(f, "id", None)
            by_kind = isinstance(f, ast.Attribute) and f.attr == "get" and isinstance(f.value, ast.Attribute) and f.value.attr == "by_kind"
            if name in READERS or by_kind:
                for a in n.args:
                    out |= set(_strings(a.value if isinstance(a, ast.Starred) else a, consts) or ())
                if name == "said":  # a named message, logged or raised: the error blocks are read too
                    out |= set(BLOCK_KINDS)
        elif isinstance(n, ast.Compare) and _is_kind(n.left):
            for op, c in zip(n.ops, n.comparators):
                if isinstance(op, (ast.Eq, ast.In)):
                    out |= set(_strings(c, consts) or ())
    return out


def _sources(rule: Rule) -> dict[str, str]:
    """The rule's module and the rule modules it imports from (its area's helpers), by name."""
    name = type(rule).__module__
    src = inspect.getsource(sys.modules[name])
    mods = {n.module for n in ast.walk(ast.parse(src)) if isinstance(n, ast.ImportFrom) and n.module and n.module.startswith("sglog.rules.") and n.module.count(".") == 3}
    return {name: src} | {m: inspect.getsource(importlib.import_module(m)) for m in sorted(mods - {name})}


def test_the_reader_finds_kinds_in_every_reading_form():
    src = """
X = ("a_kind",) + BLOCK_KINDS
def f(run, e):
    run.events_of("k1", *X); run.first("k2"); said(run, "k3"); run.by_kind.get("k4", ())
    if e.kind == "k5" or e.get("named_kind") in ("k6",) or e.kind not in ("not_read",) or e.kind != "nor_this":
        pass
"""
    assert kind_reads(src) == {"k1", "a_kind", *BLOCK_KINDS, "k2", "k3", "k4", "k5", "k6"}
    assert kind_reads('said(run, "k3")') == {"k3", *BLOCK_KINDS}


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_every_rule_declares_its_triggers(rule):
    t = rule.triggers
    assert "triggers" in type(rule).__dict__ and t, f"{rule.name} declares no triggers"
    assert len(set(t)) == len(t), f"{rule.name}: a trigger twice"
    unknown = [x for x in t if x not in KIND_CLASSES and x not in FACTS]
    assert not unknown, f"{rule.name}: {unknown} are neither event kinds (sglog/events.py) nor facts (rules/base.py FACTS)"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_a_rule_reads_only_the_kinds_it_declares(rule):
    for module, src in _sources(rule).items():
        undeclared = kind_reads(src) - set(rule.triggers)
        assert not undeclared, f"{rule.name}: {module} reads {sorted(undeclared)}, not in its triggers"


def test_rules_and_explain_show_the_triggers(capsys, monkeypatch):
    import json

    from conftest import run_sglog

    code, out, _ = run_sglog(capsys, monkeypatch, "rules", "--format", "json")
    assert code == 0
    assert {r["name"]: tuple(r["triggers"]) for r in json.loads(out)["rules"]} == {r.name: r.triggers for r in RULES}
    code, out, _ = run_sglog(capsys, monkeypatch, "explain", "nan-logits")
    assert code == 0 and "## Triggers" in out
    assert "`nan_logits`" in out and "`crash`, the run's crash" in out


def _logs():
    return sorted(REAL.glob("*.log")) + sorted(STORY.glob("*.log"))


@pytest.mark.slow
def test_skipping_untriggered_rules_changes_no_finding(monkeypatch):
    """Over every corpus and story log: a rule diagnose skips on a run finds nothing there, and the
    findings of diagnose are the same with the skip and without it."""
    from sglog.diagnose import diagnose_runs
    from sglog.read.parse import parse_file
    from sglog.runs.build import build_runs

    skipped = total = 0
    for path in _logs():
        runs = build_runs([parse_file(str(path))])
        for run in runs:
            for rule in RULES:
                total += 1
                if not rule.triggered(run):
                    skipped += 1
                    assert rule.check(run) == [], f"{path.name}: {rule.name} is not triggered but finds something"
        with_skip = diagnose_runs(runs)
        with monkeypatch.context() as m:
            m.setattr(Rule, "triggered", lambda self, run: True)
            without = diagnose_runs(build_runs([parse_file(str(path))]))
        assert with_skip == without, path.name
    assert skipped, "no rule was skipped on any log: the skip is never exercised"
    print(f"{skipped} of {total} (run, rule) pairs skipped")
