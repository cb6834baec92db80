"""The stages only import forward.

sglog's data flows read -> runs -> timeline -> rules -> fixes/relaunch/diagnose/compare -> render/report ->
repro -> cli; a module may import its own stage, an earlier one, or a shared leaf module, never a
later stage. Every import counts: the module-level ones and the ones inside functions (a lazy import
defers the cost, it does not make a backward dependency acceptable). Read with `ast`, nothing is
imported.
"""

from __future__ import annotations

import ast

from conftest import ROOT

PACKAGE = ROOT / "sglog"
# shared leaf modules: importable from anywhere, and they import no stage
LEAVES = {"errors", "events", "schema", "findings", "jsonout", "textsafe", "config"}
# each stage's rank in the flow; the package itself (the notebook API, sglog.load) is the top
STAGES = {
    "read": 1,
    "runs": 2,
    "timeline": 3,
    "rules": 4,
    "fixes": 5,  # the findings' fixes merged, one value per flag
    "relaunch": 5,  # the pure relaunch plan built on that merge: shown by diagnose and report, run by repro
    "diagnose": 5,
    "compare": 5,
    "render": 6,
    "report": 6,
    "repro": 7,
    "cli": 8,  # the commands, and output (the one writer of -o: only the CLI writes)
    "__main__": 8,
    "": 9,
}
LEAF = 0
# backward imports not yet fixed: (importer, imported) -> why it is still there. An entry that no
# longer occurs fails test_the_allow_list_is_still_needed, so the list only shrinks.
ALLOWED: dict[tuple[str, str], str] = {}


def _module_name(path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path) -> bool:
    return path.name == "__init__.py"


def _exists(name: str) -> bool:
    rel = PACKAGE.parent.joinpath(*name.split("."))
    return rel.with_suffix(".py").is_file() or (rel / "__init__.py").is_file()


def imports(path) -> set[str]:
    """The sglog modules ``path`` imports, at module level or in a function."""
    return imports_of(path.read_text(encoding="utf-8"), _module_name(path), _is_package(path))


def imports_of(source: str, module: str, package: bool = False) -> set[str]:
    here = module if package else module.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = here.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            found.add(target)
            # `from sglog.read import parse` imports the module sglog.read.parse
            found.update(f"{target}.{a.name}" for a in node.names if _exists(f"{target}.{a.name}"))
    return {n for n in found if n == "sglog" or n.startswith("sglog.")}


def rank(module: str) -> int:
    parts = module.split(".")[1:]
    head = parts[0] if parts else ""
    return LEAF if head in LEAVES else STAGES[head]


def backward() -> dict[tuple[str, str], str]:
    """Every import of a later stage (or, from a leaf, of any stage): (importer, imported) -> why."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        me = _module_name(path)
        mine = rank(me)
        for target in sorted(imports(path)):
            theirs = rank(target)
            if target == "sglog" and me != "sglog":
                continue  # the package's own __init__ runs first anyway; only its submodules are stages
            if mine == LEAF and theirs != LEAF:
                out[(me, target)] = "a shared leaf imports a stage"
            elif mine != LEAF and theirs > mine:
                out[(me, target)] = "an earlier stage imports a later one"
    return out


def test_every_module_belongs_to_a_stage_or_is_a_leaf():
    for path in PACKAGE.rglob("*.py"):
        rank(_module_name(path))  # a KeyError names a module that is neither


def test_stages_only_import_forward():
    found = {k: v for k, v in backward().items() if k not in ALLOWED}
    assert not found, "\n".join(f"{a} imports {b}: {why}" for (a, b), why in sorted(found.items()))


def test_the_allow_list_is_still_needed():
    stale = set(ALLOWED) - set(backward())
    assert not stale, f"no longer imported backward, remove from ALLOWED: {sorted(stale)}"


def test_the_reader_sees_every_kind_of_import():
    source = """
import sglog.events
from sglog.read import parse, not_a_module
from . import said
from ..errors import UsageError
import json

def lazy():
    from sglog.repro.plan import build_plan
    import polars
"""
    assert imports_of(source, "sglog.rules.facts") == {
        "sglog.events",
        "sglog.read",
        "sglog.read.parse",
        "sglog.rules",
        "sglog.rules.said",
        "sglog.errors",
        "sglog.repro.plan",
    }
    assert imports_of("from .records import fold", "sglog.read", package=True) == {"sglog.read.records"}


def test_a_lazy_backward_import_is_found():
    # sglog/__init__.py imports its stages inside functions only; the reader still sees them
    assert "sglog.runs.build" in imports(PACKAGE / "__init__.py")


def test_a_rule_is_found_in_its_own_file():
    """RULES is every area package's rule module (named after the rule), in code order: a new rule
    is its file and its cases, and no other list names it."""
    import ast
    import re

    from sglog.rules import RULES

    files = sorted((ROOT / "sglog" / "rules").glob("*/*.py"))
    defined = {}
    for path in files:
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "code" for t in node.targets) and isinstance(node.value, ast.Constant):
                if re.fullmatch(r"SGL\d{3}", str(node.value.value)):
                    defined[node.value.value] = path.stem
    assert [r.code for r in RULES] == sorted(defined) and len(RULES) == len(defined) >= 41
    assert all(r.name.replace("-", "_") == defined[r.code] for r in RULES)
