"""The rules: each in its own module under an area package, found there, in code order (the
order they run and are listed).

Codes are permanent and never reused; the hundreds group the rules:
SGL1xx memory, SGL2xx scheduling, SGL3xx speculative decoding, SGL4xx platform,
SGL5xx lifecycle, SGL6xx over time.  `--select` / `--ignore` take a code (`SGL101`), a name
(`runtime-oom`), a code prefix (`SGL1`), a name prefix (`cuda-graph`) or `ALL`.
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterable

from sglog.rules.base import DOC_SECTIONS, Option, Rule


def _discover() -> tuple[Rule, ...]:
    """Every rule of the area packages (``sglog/rules/<area>/<rule_name>.py``: a module named
    after the rule it defines, ``kv-transfer-failed`` in ``kv_transfer_failed.py``; an area's
    other modules are its helpers), in code order.  A new rule is its file and its cases: nothing
    else lists it."""
    found: dict[str, Rule] = {}
    for area in sorted(m.name for m in pkgutil.iter_modules(__path__) if m.ispkg):
        package = importlib.import_module(f"{__name__}.{area}")
        for mod in sorted(m.name for m in pkgutil.iter_modules(package.__path__) if not m.ispkg):
            module = importlib.import_module(f"{package.__name__}.{mod}")
            for obj in vars(module).values():
                if isinstance(obj, type) and issubclass(obj, Rule) and obj.__module__ == module.__name__ and getattr(obj, "code", None) and obj.name.replace("-", "_") == mod:
                    if obj.code in found:
                        raise RuntimeError(f"rule code {obj.code} is used twice ({found[obj.code].name}, {obj.name})")
                    found[obj.code] = obj()
    return tuple(found[code] for code in sorted(found))


RULES: tuple[Rule, ...] = _discover()

GROUPS = {"SGL1": "memory", "SGL2": "scheduling", "SGL3": "speculative decoding", "SGL4": "platform", "SGL5": "lifecycle", "SGL6": "over time"}


def get_rule(name_or_code: str) -> Rule:
    """The rule with this code or name (case-insensitive); KeyError with a hint otherwise."""
    key = name_or_code.strip().lower()
    for r in RULES:
        if r.code.lower() == key or r.name == key:
            return r
    near = [r.name for r in RULES if key and (key in r.name or r.name.startswith(key[:6]))]
    hint = f" (did you mean {', '.join(near[:3])}?)" if near else ""
    raise KeyError(f"no rule {name_or_code!r}{hint}; `sglog rules` lists them")


def matches(rule: Rule, selector: str) -> bool:
    s = selector.strip()
    if not s:
        return False
    if s.upper() == "ALL":
        return True
    low = s.lower()
    return rule.code.lower().startswith(low) or rule.name == low or rule.name.startswith(low)


def choose(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> tuple[Rule, ...]:
    """The rules `--select` / `--ignore` leave, in registry order.  Unknown selectors raise KeyError."""
    sel = [x for item in (select or []) for x in str(item).split(",") if x.strip()]
    ign = [x for item in (ignore or []) for x in str(item).split(",") if x.strip()]
    for s in sel + ign:
        if not any(matches(r, s) for r in RULES):
            raise KeyError(f"no rule matches {s!r} (a code like SGL101, a name like runtime-oom, a prefix like SGL1 or cuda-graph, or ALL)")
    chosen = [r for r in RULES if not sel or any(matches(r, s) for s in sel)]
    return tuple(r for r in chosen if not any(matches(r, s) for s in ign))


__all__ = ["RULES", "GROUPS", "DOC_SECTIONS", "Option", "Rule", "choose", "get_rule", "matches"]
