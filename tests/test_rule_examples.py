"""Every rule's `## Example` is a case that this test runs, so the docs cannot drift from the rule.

An Example starts with ``Case: <title>``, the title of a case in the rule's
``tests/rules/<rule-name>.cases``.  The test runs that case as tests/test_rules.py
runs cases, checks that the rule fires (or not, for a passing case) and reads the
Example's backticked spans:

* a symbol of the rule's docs (`` `T` ``, `` `a` ``) states notation: not checked;
* a quote of the log (`` `Load weight begin. avail mem=23.2 GB` ``) must be in one
  of the case's lines (``...`` elides: its pieces in order in one line);
* anything else is what sglog says: a number (`` `0.89` ``) must be one the finding
  prints, a flag with its value (`` `--mem-fraction-static 0.89` ``) must be in the
  fix's args (or its text), other text (`` `0.80-0.90` ``) must be in the finding's
  message, fix summary, fix args or details.

A number is compared as printed (``2,718``, ``0.76``): to the precision the rule
prints it, never recomputed.  Whitespace and line breaks count as one space.
"""

from __future__ import annotations

import json
import re

import pytest

from conftest import CASES
from sglog.rules import RULES
from sglog.rules.base import example_case
from test_rules import load_cases, run_case

_SPAN = re.compile(r"`([^`]+)`")
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?%?")
_FLAGS = re.compile(r"(--[a-z][\w-]*)(?:[ =]([^\s-][^\s]*))?")


def _norm(text: str) -> str:
    return " ".join(text.split())


def _found_in(span: str, text: str) -> bool:
    """Is `span` in `text` as a whole (not the 0.8 of 0.89, not the 12 of 120)?  `...` elides."""
    pieces = [re.escape(p.strip()) for p in re.split(r"\.\.\.|…", span) if p.strip()]
    if not pieces:
        return False
    pattern = ".*?".join(pieces)
    if re.match(r"[\w.]", span):
        pattern = r"(?<![\w.])" + pattern
    if re.search(r"\w$", span):
        pattern += r"(?!\w|\.\d)"
    return re.search(pattern, text) is not None


def _in_log(span: str, lines: list[str]) -> bool:
    return any(_found_in(span, _norm(line)) for line in lines) or _found_in(span, _norm(" ".join(lines)))


def _said(finding) -> str:
    """What sglog says for the finding: message, fix summary, fix args and details, on one line."""
    parts = [finding.message]
    if finding.fix is not None:
        parts.append(finding.fix.summary)
        parts += [flag if value is None else f"{flag} {value}" for flag, value in finding.fix.args.items()]
        parts.append(json.dumps(finding.fix.args))
    parts.append(json.dumps(finding.details, default=str))
    parts += [str(v) for v in finding.details.values()]
    return _norm(" ".join(parts))


def _flags_said(span: str, finding, said: str) -> bool:
    """The span is said as it is, or it is `--flag value` pairs each in the fix's args or its text."""
    if _found_in(span, said):
        return True
    if _FLAGS.sub("", span).strip():
        return False  # more than flags and values
    args = finding.fix.args if finding.fix is not None else {}
    for flag, value in _FLAGS.findall(span):
        if flag in args and (not value or args[flag] == value or (args[flag] is None and not value)):
            continue
        if not _found_in(f"{flag} {value}".strip(), said):
            return False
    return True


def _the_case(rule) -> tuple[dict, str]:
    title, text = example_case(rule.doc.get("Example", ""))
    assert title, f"{rule.name}: the Example does not name its case ('Case: <title>' first)"
    path = CASES / f"{rule.name}.cases"
    cases = {_norm(c["title"]): c for c in load_cases(path)} if path.exists() else {}
    assert title in cases, f"{rule.name}: the Example names {title!r}, not a case of {path.name}"
    return cases[title], text


def _wrong(rule, case: dict, text: str, found: list) -> list[str]:
    """The Example's backticked spans that are neither a symbol, a quote of the case's lines nor what sglog says."""
    said = _said(found[0]) if found else ""
    symbols = rule.symbols()
    wrong = []
    for raw in _SPAN.findall(text):
        span = _norm(raw)
        if span in symbols or _in_log(span, case["lines"]):
            continue
        if not found:
            wrong.append(f"`{span}`: not in the case's lines")
        elif span.startswith("--"):
            if not _flags_said(span, found[0], said):
                wrong.append(f"`{span}`: not in the fix ({found[0].fix.args if found[0].fix else 'no fix'}) nor the case's lines")
        elif _NUMBER.fullmatch(span):
            if span not in _NUMBER.findall(said):
                wrong.append(f"`{span}`: a number sglog does not print for this case")
        elif not _found_in(span, said):
            wrong.append(f"`{span}`: neither in the case's lines nor in what sglog says")
    return wrong


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_the_example_is_a_case_and_says_what_the_rule_says(tmp_path, rule):
    case, text = _the_case(rule)
    assert text, f"{rule.name}: the Example has no text after its Case line"
    found = run_case(tmp_path, rule.name, case)
    if case["expect"] == "pass":
        assert not found, f"{rule.name}: the Example's case should not fire, got {[f.message for f in found]}"
    else:
        assert found, f"{rule.name}: the Example's case does not fire"
    wrong = _wrong(rule, case, text, found)
    said = _said(found[0]) if found else ""
    assert not wrong, f"{rule.name} ({case['title']}):\n  " + "\n  ".join(wrong) + f"\nsglog says: {said}"


def test_an_example_that_drifts_fails(tmp_path):
    """The check catches a changed suggestion, a number sglog does not print, a misquoted log line."""
    from sglog.rules import get_rule

    rule = get_rule("draft-model-exceeds-static-pool")
    case, text = _the_case(rule)
    found = run_case(tmp_path, rule.name, case)
    assert _wrong(rule, case, text, found) == []
    for old, new in [
        ("`--mem-fraction-static 0.89`", "`--mem-fraction-static 0.88`"),
        ("`0.80-0.90`", "`0.80-0.91`"),
        ("`71.5 of 94.0 GB`", "`71.4 of 94.0 GB`"),
        ("mem usage=72.33 GB", "mem usage=72.3 GB"),
    ]:
        assert old in text, old
        assert len(_wrong(rule, case, text.replace(old, new), found)) == 1, new
    assert _wrong(rule, case, text + " `0.77`", found) == ["`0.77`: a number sglog does not print for this case"]


def test_a_span_is_found_whole():
    assert _found_in("0.89", "to 0.89.") and not _found_in("0.8", "to 0.89") and not _found_in("12", "120 tokens")
    assert _found_in("Load weight end ... avail mem=5.1 GB", "Load weight end. elapsed=3 s, avail mem=5.1 GB, x")
    assert not _found_in("avail mem=5.1 GB", "avail mem=5.1 GBs")
    assert [f for f, _ in _FLAGS.findall("--speculative-num-steps 3 --speculative-eagle-topk 1")] == ["--speculative-num-steps", "--speculative-eagle-topk"]
