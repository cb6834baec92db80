"""Findings in the formats CI systems read: SARIF 2.1.0 (code scanning) and GitHub annotations.

Pure: findings in, a string out; the CLI writes it.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from sglog import jsonout
from sglog.findings import Finding

if TYPE_CHECKING:
    from sglog.rules.base import Rule

SARIF_LEVEL = {"error": "error", "warning": "warning", "info": "note"}
SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"


def _first_location(f: Finding) -> tuple[str | None, int | None]:
    for e in f.evidence:
        if e.file and e.line is not None:
            return e.file, e.line
    return (f.evidence[0].file, None) if f.evidence else (None, None)


def _text(f: Finding) -> str:
    """The message, the fix and, for each flag another finding's fix decides, that it is superseded."""
    return f.message + (f" Fix: {f.fix.summary}" if f.fix is not None and f.fix.summary else "") + "".join(f" Superseded: {x.text()}." for x in f.superseded)


def sarif(findings: Iterable[Finding], rules: Iterable[Rule]) -> str:
    """A SARIF 2.1.0 log: one run of the tool ``sglog``, its rules, a result per finding.

    >>> import json
    >>> from sglog.findings import Evidence, Finding
    >>> doc = json.loads(sarif([Finding("SGL101", "x", "error", "m", 1, evidence=(Evidence("a.log", 4, None),))], []))
    >>> r = doc["runs"][0]["results"][0]
    >>> r["ruleId"], r["level"], r["locations"][0]["physicalLocation"]["region"]["startLine"]
    ('SGL101', 'error', 4)
    """
    from sglog import __version__

    results: list[dict[str, Any]] = []
    for f in findings:
        file, line = _first_location(f)
        result: dict[str, Any] = {"ruleId": f.code, "level": SARIF_LEVEL[f.severity], "message": {"text": _text(f)}, "properties": {"name": f.name, "run": f.run}}
        if file:
            loc: dict[str, Any] = {"artifactLocation": {"uri": file}}
            if line is not None:
                loc["region"] = {"startLine": line}
            result["locations"] = [{"physicalLocation": loc}]
        results.append(result)
    driver = {
        "name": "sglog",
        "version": __version__,
        "rules": [
            {"id": r.code, "name": r.name, "shortDescription": {"text": r.summary}, "defaultConfiguration": {"level": SARIF_LEVEL[r.severity]}, "help": {"text": f"sglog explain {r.code}"}}
            for r in rules
        ],
    }
    doc = {"$schema": SARIF_SCHEMA, "version": "2.1.0", "runs": [{"tool": {"driver": driver}, "results": results}]}
    return jsonout.dumps(doc, indent=2, ensure_ascii=False) + "\n"


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def github(findings: Iterable[Finding]) -> str:
    """GitHub Actions workflow commands: an ``::error``/``::warning``/``::notice`` line per finding.

    >>> from sglog.findings import Evidence, Finding
    >>> print(github([Finding("SGL101", "x", "warning", "a, b: 50%", 1, evidence=(Evidence("a.log", 4, None),))]), end="")
    ::warning file=a.log,line=4,title=SGL101 x::a, b: 50%25
    """
    level = {"error": "error", "warning": "warning", "info": "notice"}
    out = []
    for f in findings:
        file, line = _first_location(f)
        props = ([f"file={_escape_property(file)}"] if file else []) + ([f"line={line}"] if line is not None else []) + [f"title={_escape_property(f'{f.code} {f.name}')}"]
        out.append(f"::{level[f.severity]} {','.join(props)}::{_escape_data(_text(f))}\n")
    return "".join(out)
