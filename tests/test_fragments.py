"""Rules on what users paste (issue 27 item 3): a tail, a head, no dates, no rank tags.

Every failing case of every rule (tests/rules/*.cases: most are real corpus lines) is cut the ways
a pasted excerpt is cut, and the rule must still fire on each cut that keeps its evidence:

* tail: from the first line the full finding cites (the server args and the startup before it go);
  for a rule that compares a window with the time before it, from the first serving line;
* head: up to the end of the last block the finding cites, for findings whose evidence is lines (a
  finding over a window of batch lines needs its window: the cases are as small as each rule's minimum,
  so a head cut of them is a different case, and a rule comparing a window with the time before it has
  nothing to find in a head that stops before the change);
* no dates: `[2026-02-23 10:15:00 TP0]` becomes `[10:15:00 TP0]`;
* no rank tags: `[2026-02-23 10:15:00 TP0]` becomes `[2026-02-23 10:15:00]`.

A finding on a cut that lacks what the rule would normally read (server args, a launch) says what it
assumed; those are the rules' own cases (the `excerpt` / `assum` wording in their messages).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import sglog
from sglog.rules import get_rule
from test_rules import CASES, load_cases

DATE = re.compile(r"(?<=\[)\d{4}-\d\d-\d\d ")
RANK = re.compile(r"^(\[[^\]]*?) (?:TP|DP|PP|EP)\d+(?: (?:TP|DP|PP|EP)\d+)*\]")
WINDOW_AREA = "sglog.rules.serving"  # rules that compare a window with what came before it


def findings(tmp_path: Path, rule, lines: list[str], name: str = "case.log"):
    log = tmp_path / name
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    runs = sglog.load(log)
    return runs, [f for run in runs for f in rule.check(run)]


def cuts(tmp_path: Path, rule, case: dict) -> dict[str, list[str]]:
    lines = case["lines"]
    runs, full = findings(tmp_path, rule, lines)
    cited = sorted({e.line for f in full for e in f.evidence if e.line})
    if not full or not cited:
        return {}
    out = {
        "tail": lines[cited[0] - 1 :],
        "no-dates": [DATE.sub("", x) for x in lines],
        "no-ranks": [RANK.sub(r"\1]", x) for x in lines],
    }
    if type(rule).__module__.startswith(WINDOW_AREA):
        # the change needs its "before": the tail is the serving part, without the launch and startup
        first = min((r for run in runs for r in _served_lines(run)), default=cited[0])
        out["tail"] = lines[first - 1 :]
        return out
    if all(e.line for f in full for e in f.evidence):
        last = cited[-1]
        block = next((e for run in runs for e in run.events if e.line == last), None)
        end = last + (block.text.count("\n") if block is not None and block.text else 0)
        out["head"] = lines[:end]
    return out


def _served_lines(run) -> list[int]:
    """The lines of a run's batches and request lines."""
    rows = run.batches.get_column("line").to_list() if run.batches.height and "line" in run.batches.columns else []
    return rows + [e.line for e in run.events_of("request_log", "retraction")]


def failing_cases():
    for path in sorted(CASES.glob("*.cases")):
        for i, case in enumerate(load_cases(path)):
            if case["expect"] == "fail":
                yield pytest.param(path.stem, case, id=f"{path.stem}-{i}")


@pytest.mark.parametrize(("rule_name", "case"), list(failing_cases()))
def test_the_rule_still_fires_on_a_pasted_fragment(tmp_path, rule_name, case):
    rule = get_rule(rule_name)
    missed = []
    for cut, lines in cuts(tmp_path, rule, case).items():
        _runs, got = findings(tmp_path, rule, lines, f"{cut}.log")
        if not got:
            missed.append(cut)
    assert not missed, f"{rule_name}: {case['title']}: no finding on the {', '.join(missed)} cut"


def test_a_fragment_without_a_launch_says_what_it_assumes(tmp_path):
    """The startup excerpt with no launch line: reported, as info, with its assumption."""
    case = next(c for c in load_cases(CASES / "server-never-ready.cases") if c["title"].startswith("the log stops in CUDA-graph capture"))
    rule = get_rule("server-never-ready")
    tail = cuts(tmp_path, rule, case)["tail"]
    _runs, got = findings(tmp_path, rule, tail)
    (f,) = got
    assert f.severity == "info" and "assumes" in f.message


def corpus_findings():
    """(corpus log, rule) for every finding the rule makes on a real corpus log."""
    from test_corpus_expected import EXPECTED, path_of

    out = []
    for name in sorted(EXPECTED):
        if "not-sglang" in name:
            continue
        for run in sglog.load(path_of(name)):
            for rule_name in sorted({f.name for f in __import__("sglog.diagnose", fromlist=["diagnose_runs"]).diagnose_runs([run])}):
                out.append(pytest.param(name, rule_name, id=f"{name[:3]}-{rule_name}"))
    return out


# cuts of a corpus log on which a rule does not fire yet, each with why (the test fails when one starts
# to fire, so the list only shrinks)
KNOWN_GAPS = {
    # the tail keeps 2 of the 3 prefill lines the rule needs when no decode line is logged
    ("219", "kv-capacity-bound", "tail"),
    # the tail drops the `Capture cuda graph bs [...]` line: the largest captured size is unknown
    ("225", "decode-batch-exceeds-cuda-graph", "tail"),
}


@pytest.mark.parametrize(("name", "rule_name"), corpus_findings())
def test_the_rule_still_fires_on_a_fragment_of_a_corpus_log(tmp_path, name, rule_name):
    """The same cuts, of the real corpus logs (fixtures/logs/real): each finding survives them."""
    from test_corpus_expected import path_of

    rule = get_rule(rule_name)
    lines = path_of(name).read_text(encoding="utf-8", errors="replace").splitlines()
    missed = []
    for cut, part in cuts(tmp_path, rule, {"lines": lines}).items():
        _runs, got = findings(tmp_path, rule, part, f"{cut}.log")
        if not got:
            missed.append(cut)
    known = {cut for (log, rule_, cut) in KNOWN_GAPS if name.startswith(log) and rule_ == rule_name}
    assert set(missed) == known, f"{rule_name} on {name}: no finding on the {', '.join(missed) or '(none)'} cut; known gaps: {', '.join(sorted(known)) or 'none'}"
