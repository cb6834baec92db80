"""What SGLang said: the named messages of a run (sglog/read/named.py), logged or raised.

A message the table names reaches a rule in one of two forms: a logged line, an event of the
named kind with typed fields; or an exception raised with it, a traceback block whose
``named_kind`` / ``named_fields`` the reader set.  Rules ask for a kind and get both, in log
order, so a `ValueError` raised with SGLang's words counts like the line it logs.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sglog.events import BLOCK_KINDS, Event


@dataclass(frozen=True)
class Said:
    """One named message: the event it is in, its typed fields, whether it was raised."""

    event: Event
    fields: dict[str, Any]
    raised: bool

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)


def said(run, kind: str) -> list[Said]:
    """Every message of this named kind in the run, logged lines and raised exceptions, in log order."""

    def compute(run) -> list[Said]:
        out = [Said(e, e.fields, False) for e in run.events_of(kind)]
        out += [Said(e, dict(e.get("named_fields") or {}), True) for e in run.events_of(*BLOCK_KINDS) if e.get("named_kind") == kind]
        out.sort(key=lambda s: (s.event.file, s.event.line))
        return out

    return run.memo(f"said:{kind}", compute)


def ranks_of(items: list[Said]) -> list[str]:
    """The rank labels the messages came from, in order of first appearance."""
    seen: dict[str, None] = {}
    for s in items:
        if s.event.rank is not None:
            seen.setdefault(s.event.rank.label, None)
    return list(seen)
