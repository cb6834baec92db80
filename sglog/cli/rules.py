"""``sglog rules``: the registry, one line per rule (``sglog explain NAME`` prints one rule's docs)."""

from __future__ import annotations

import sys
from enum import Enum
from typing import Annotated

import typer

from sglog import jsonout
from sglog.cli import app
from sglog.schema import SCHEMA_VERSION


class RulesFormat(str, Enum):
    table = "table"
    json = "json"


@app.command(
    example="""
sglog rules
sglog rules --select SGL1 -f json
""",
)
def rules(
    fmt: Annotated[RulesFormat, typer.Option("--format", "-f", metavar="FORMAT", help="table or json.")] = RulesFormat.table,
    select: Annotated[list[str] | None, typer.Option("--select", metavar="RULE", help="Only these rules: code, name or prefix.")] = None,
) -> None:
    """List the rules: code, name, severity, what each finds."""

    from sglog.cli.diagnose import term_width, use_color
    from sglog.errors import UsageError
    from sglog.rules import choose

    try:
        chosen = choose(select, None)
    except KeyError as e:
        raise UsageError(e.args[0]) from None
    if fmt == RulesFormat.json:
        doc = {
            "schema_version": SCHEMA_VERSION,
            "rules": [
                {
                    "code": r.code,
                    "name": r.name,
                    "severity": r.severity,
                    "summary": r.summary,
                    "triggers": list(r.triggers),
                    "options": {k: {"default": o.default, "help": o.help} for k, o in r.options.items()},
                    "doc": r.doc,
                }
                for r in chosen
            ],
        }
        sys.stdout.write(jsonout.dumps(doc, indent=2) + "\n")
        return
    from sglog.render.diagnose import rules_table

    sys.stdout.write(rules_table(chosen, color=use_color(sys.stdout), width=term_width()))
