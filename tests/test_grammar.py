"""Golden tests of the grammar: every format variant of every event kind.

``fixtures/lines/<kind>.log`` holds the cases of one kind.  A case starts with a
``# ...`` header line (at the top of the file or after a blank line) naming the
SGLang version(s) and variant; the lines after it, up to the next header, are
the raw log text (CRLF, ANSI codes and ``\\r`` progress updates kept byte for
byte).  ``fixtures/lines/<kind>.expected.json`` holds one expectation per case:
the event kind, the exact typed fields, and the envelope (timestamp, whether it
had a date, rank tags, number of physical lines folded into the record).

Parity: every alternative of the grammar's ``message`` rule has an event class
of the same kind and at least one case; every event class is a grammar rule or
a block/special kind; every fixture file is named after a kind.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from conftest import LINES
from sglog.events import BLOCK_KINDS, KIND_CLASSES, SPECIAL_KINDS
from sglog.read import grammar
from sglog.read.parse import RecordParser
from sglog.read.records import fold

# ---------------------------------------------------------------- loading


def load_cases(path: Path) -> list[tuple[str, list[str]]]:
    """(header, raw physical lines) of every case in a fixture file."""
    raw_lines = path.read_bytes().decode("utf-8").split("\n")
    if raw_lines and raw_lines[-1] == "":
        raw_lines.pop()
    cases: list[tuple[str, list[str]]] = []
    prev_blank = True
    for raw in raw_lines:
        blank = not raw.strip()
        if prev_blank and raw.startswith("# "):
            cases.append((raw[2:].strip(), []))
        elif cases:
            cases[-1][1].append(raw)
        else:
            raise AssertionError(f"{path.name}: text before the first '# ' header: {raw!r}")
        prev_blank = blank
    for _header, lines in cases:
        while lines and not lines[-1].strip():
            lines.pop()
    return cases


def run_case(kind: str, lines: list[str]) -> dict[str, Any]:
    """Fold and parse one case; it must make exactly one non-blank record."""
    records = [r for r in fold(list(enumerate(lines, start=1))) if r.mode != "blank"]
    assert len(records) == 1, f"expected one record, got {[(r.line, r.end_line, r.mode) for r in records]}"
    rec = records[0]
    ev = RecordParser(f"{kind}.log")(rec)
    if ev.ts is None:
        ts = None
    elif ev.ts_has_date:
        ts = ev.ts.isoformat(sep=" ")
    else:
        ts = ev.ts.time().isoformat()
    return {
        "kind": ev.kind,
        "fields": json.loads(json.dumps(ev.fields)),
        "ts": ts,
        "ts_has_date": ev.ts_has_date,
        "rank": ev.rank.to_dict() if ev.rank else None,
        "lines": rec.end_line - rec.line + 1,
    }


def fixture_kinds() -> list[str]:
    return sorted(p.name[: -len(".log")] for p in LINES.glob("*.log"))


def _params():
    out = []
    for kind in fixture_kinds():
        path = LINES / f"{kind}.log"
        for i, (header, lines) in enumerate(load_cases(path)):
            out.append(pytest.param(kind, i, header, lines, id=f"{kind}-{i}"))
    return out


# ---------------------------------------------------------------- golden cases


@pytest.mark.parametrize(("kind", "index", "header", "lines"), _params())
def test_case(kind: str, index: int, header: str, lines: list[str]) -> None:
    expected = json.loads((LINES / f"{kind}.expected.json").read_text(encoding="utf-8"))
    assert index < len(expected), f"{kind}.expected.json has no entry for case {index} ({header})"
    want = expected[index]
    assert want.get("case") == header, f"{kind} case {index}: expectation is for {want.get('case')!r}, case is {header!r}"
    got = run_case(kind, lines)
    assert got["kind"] == kind, f"{header}: parsed as {got['kind']}: {got['fields']}"
    assert got["fields"] == want["fields"], header
    for key in ("ts", "ts_has_date", "rank", "lines"):
        assert got[key] == want[key], f"{header}: {key}"


def test_expectations_match_cases() -> None:
    """One expectation per case, in order, none left over."""
    for kind in fixture_kinds():
        cases = load_cases(LINES / f"{kind}.log")
        expected = json.loads((LINES / f"{kind}.expected.json").read_text(encoding="utf-8"))
        assert [c[0] for c in cases] == [e["case"] for e in expected], kind


def test_every_case_names_its_versions() -> None:
    """Each header says which SGLang version(s) the case is from (or that it is a foreign line)."""
    import re

    version = re.compile(r"\d+\.\d+\.\d+|\bany\b|~v?0\.\d|foreign|not SGLang", re.I)
    for kind in fixture_kinds():
        for header, lines in load_cases(LINES / f"{kind}.log"):
            assert version.search(header), f"{kind}: header without a version: {header!r}"
            assert lines, f"{kind}: empty case {header!r}"


# ---------------------------------------------------------------- parity


def _message_alternatives() -> list[str]:
    from lark.load_grammar import load_grammar

    g, _ = load_grammar(grammar.grammar_text(), "<sglang.lark>", None, False)
    rules = {name: tree for name, _params, tree, _opts in g.rule_defs}
    names = []
    for expansion in rules["message"].children:
        items = list(expansion.scan_values(lambda v: hasattr(v, "name")))
        assert len(items) == 1, "every alternative of `message` is a single rule"
        assert type(items[0]).__name__ == "NonTerminal", items[0]
        names.append(items[0].name)
    return names


def test_every_message_alternative_has_a_class_and_cases() -> None:
    kinds = set(fixture_kinds())
    for name in _message_alternatives():
        assert name in KIND_CLASSES, f"grammar rule {name} has no event class"
        assert name in kinds, f"grammar rule {name} has no fixtures/lines/{name}.log"
        assert load_cases(LINES / f"{name}.log"), name


def test_every_class_is_a_rule_or_a_block_kind() -> None:
    alternatives = set(_message_alternatives())
    for kind in KIND_CLASSES:
        assert kind in alternatives or kind in BLOCK_KINDS or kind in SPECIAL_KINDS, kind
    for kind in BLOCK_KINDS + SPECIAL_KINDS:
        assert kind in KIND_CLASSES, kind
        assert kind not in alternatives, kind


def test_every_block_kind_has_cases() -> None:
    kinds = set(fixture_kinds())
    for kind in BLOCK_KINDS:
        assert kind in kinds, f"no fixtures/lines/{kind}.log"


def test_every_fixture_file_is_a_kind() -> None:
    for kind in fixture_kinds():
        assert kind in KIND_CLASSES, f"fixtures/lines/{kind}.log is not a kind"
    for path in LINES.glob("*.json"):
        assert path.name.endswith(".expected.json") and (LINES / path.name.replace(".expected.json", ".log")).exists(), path.name


def test_terms_tables_name_real_terminals() -> None:
    """Every TERMS entry is a terminal of the grammar with as many capture groups as names."""
    import re

    terminals = set(grammar.terminal_names())
    for kind, cls in KIND_CLASSES.items():
        for name, (fields, _consts) in cls.TERMS.items():
            assert name in terminals, f"{kind}: {name} is not a grammar terminal"
            assert re.compile(grammar.terminal_pattern(name)).groups == len(fields), f"{kind}: {name} groups vs {fields}"


def test_every_class_is_documented() -> None:
    for kind, cls in KIND_CLASSES.items():
        assert cls.DOC, kind


def test_events_are_compact() -> None:
    """Every event class keeps its fields in slots (no per-event dict: tens of thousands of events
    per log, #7), and an event still pickles (parse_files returns them from worker processes)."""
    import pickle
    from dataclasses import replace

    for kind, cls in KIND_CLASSES.items():
        e = cls("f.log", 1, 1, text="x", fields={"a": 1})
        assert not hasattr(e, "__dict__"), kind
        assert e.kind == kind
        assert pickle.loads(pickle.dumps(e)) == e
        assert replace(e, text="y").text == "y"


def test_fast_path_terminals_stay_portable() -> None:
    """Terminals the polars fast path compiles must not use look-around or named groups (Rust regex)."""
    for name in (
        "ENV_RAY",
        "ENV_TS",
        "ENV_RANKS",
        "PREFILL_HEAD",
        "DECODE_HEAD",
        "COLON_VALUE",
        "END",
        "UVICORN_LEVEL",
        "CLIENT_SEP",
        "HTTP_METHOD",
        "HTTP_PATH",
        "HTTP_VERSION",
        "HTTP_STATUS",
        "HTTP_PHRASE",
    ):
        pat = grammar.terminal_pattern(name)
        for bad in ("(?=", "(?!", "(?<=", "(?<!", "(?P<"):
            assert bad not in pat, f"{name}: {bad}"
