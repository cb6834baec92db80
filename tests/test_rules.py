"""The rules: registry, documentation, purity, and every rule's failing and passing cases.

Cases live in ``tests/rules/<rule-name>.cases`` (sqlfluff's YAML cases, in a
plain-text shape so log lines stay verbatim)::

    # title: what the case shows
    # expect: fail                 (fail = the rule fires, pass = it does not)
    # severity: info               (optional: the finding's severity)
    # contains: 0.80-0.90          (optional, repeatable: in message, fix summary or args)
    # args: {"--mem-fraction-static": "0.89"}    (optional: the exact args patch)
    # repeat 30 from 10:20:00 every 2: [{t} TP0] Decode batch, ...   ({t}: date and time, {time}: time of day, {i}: 0..N-1)
    <log lines>
"""

from __future__ import annotations

import ast
import json
import re
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import sglog
from conftest import CASES, ROOT
from sglog.findings import SEVERITIES, SEVERITY_RANK
from sglog.rules import DOC_SECTIONS, RULES, choose, get_rule

_REPEAT = re.compile(r"^# repeat (\d+) from (\d\d:\d\d:\d\d)(?: on (\d{4}-\d\d-\d\d))?(?: every (\d+))?: (.*)$")


def load_cases(path: Path) -> list[dict]:
    cases: list[dict] = []
    cur: dict | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        if raw.startswith("# title:"):
            cur = {"title": raw[len("# title:") :].strip(), "expect": None, "contains": [], "args": None, "severity": None, "lines": []}
            cases.append(cur)
            continue
        assert cur is not None, f"{path.name}: text before the first '# title:'"
        if raw.startswith("# expect:"):
            cur["expect"] = raw.split(":", 1)[1].strip()
            continue
        if raw.startswith("# contains:"):
            cur["contains"].append(raw.split(":", 1)[1].strip())
            continue
        if raw.startswith("# args:"):
            cur["args"] = json.loads(raw.split(":", 1)[1])
            continue
        if raw.startswith("# severity:"):
            cur["severity"] = raw.split(":", 1)[1].strip()
            continue
        m = _REPEAT.match(raw)
        if m:
            n, start, day, every, template = int(m.group(1)), m.group(2), m.group(3) or "2026-02-23", int(m.group(4) or 2), m.group(5)
            t0 = datetime.strptime(f"{day} {start}", "%Y-%m-%d %H:%M:%S")
            for i in range(n):
                t = (t0 + timedelta(seconds=every * i)).strftime("%Y-%m-%d %H:%M:%S")
                at = t0 + timedelta(seconds=every * i)
                cur["lines"].append(template.replace("{t}", t).replace("{time}", at.strftime("%H:%M:%S")).replace("{i}", str(i)))
            continue
        cur["lines"].append(raw)
    for c in cases:
        assert c["expect"] in ("fail", "pass"), f"{path.name}: {c['title']}: '# expect: fail|pass' missing"
        while c["lines"] and not c["lines"][-1].strip():
            c["lines"].pop()
    return cases


def all_cases():
    for path in sorted(CASES.glob("*.cases")):
        for i, case in enumerate(load_cases(path)):
            yield pytest.param(path.stem, case, id=f"{path.stem}-{i}-{case['expect']}")


def run_case(tmp_path: Path, rule_name: str, case: dict):
    log = tmp_path / "case.log"
    log.write_text("\n".join(case["lines"]) + "\n", encoding="utf-8")
    runs = sglog.load(log)
    rule = get_rule(rule_name)
    found = [f for run in runs for f in rule.check(run)]
    # diagnose skips a rule on a run without any of its triggers: that must lose no finding
    assert all(rule.triggered(run) for run in runs if rule.check(run)), f"{rule_name} finds something on a run without its triggers"
    return found


# ------------------------------------------------------------------ registry


def test_codes_and_names_are_unique_and_well_formed():
    codes = [r.code for r in RULES]
    names = [r.name for r in RULES]
    assert len(set(codes)) == len(codes)
    assert len(set(names)) == len(names)
    for r in RULES:
        assert re.fullmatch(r"SGL[1-6]\d\d", r.code), r.code
        assert re.fullmatch(r"[a-z0-9]+(-[a-z0-9]+)*", r.name), r.name
        assert r.severity in SEVERITIES


def test_registry_is_ordered_by_code():
    assert [r.code for r in RULES] == sorted(r.code for r in RULES)


def test_required_rules_are_registered():
    required = """draft-model-exceeds-static-pool kv-pool-starved-by-weights cuda-graph-capture-oom cuda-graph-capture-failed
    cuda-graphs-never-captured decode-batch-exceeds-cuda-graph cuda-graph-bs-oversized kv-headroom-wasted kv-headroom-too-small
    runtime-oom kv-retraction kv-capacity-bound scheduler-too-conservative low-spec-acceptance draft-tree-too-large
    draft-model-full-tp speculation-unprofitable slow-weight-loading server-never-ready crash nccl-timeout illegal-memory-access
    unsupported-gpu-arch missing-dependency tp-memory-imbalance watchdog-timeout""".split()
    names = {r.name for r in RULES}
    assert not set(required) - names


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_documentation_is_complete(rule):
    assert rule.summary and rule.summary.endswith("."), rule.name
    for section in DOC_SECTIONS:
        assert rule.doc.get(section, "").strip(), f"{rule.name}: section '{section}' is empty"
    assert set(rule.doc) <= set(DOC_SECTIONS), f"{rule.name}: unknown sections {set(rule.doc) - set(DOC_SECTIONS)}"
    for key, opt in rule.options.items():
        assert opt.help, f"{rule.name}: option {key} has no help"
        assert re.search(rf"\b{key}\b", "\n".join(rule.doc.values())), f"{rule.name}: option {key} is not explained in the docs"


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.name)
def test_every_rule_has_failing_and_passing_cases(rule):
    path = CASES / f"{rule.name}.cases"
    assert path.exists(), f"no cases for {rule.name}"
    expects = {c["expect"] for c in load_cases(path)}
    assert expects == {"fail", "pass"}, f"{rule.name}: needs both failing and passing cases"


def test_case_files_name_registered_rules():
    names = {r.name for r in RULES}
    assert {p.stem for p in CASES.glob("*.cases")} <= names


def test_get_rule_by_name_or_code():
    assert get_rule("SGL101").name == "draft-model-exceeds-static-pool"
    assert get_rule("sgl101") is get_rule("draft-model-exceeds-static-pool")
    with pytest.raises(KeyError, match="no rule"):
        get_rule("no-such-rule")


def test_select_and_ignore_by_code_name_and_prefix():
    assert {r.code[:4] for r in choose(["SGL1"])} == {"SGL1"}
    assert [r.name for r in choose(["runtime-oom"])] == ["runtime-oom"]
    assert {r.name for r in choose(["cuda-graph"])} == {"cuda-graph-capture-oom", "cuda-graph-capture-failed", "cuda-graph-bs-oversized", "cuda-graphs-never-captured"}
    assert "runtime-oom" not in {r.name for r in choose(None, ["SGL108"])}
    assert len(choose(["ALL"], ["SGL5"])) == len(RULES) - len(choose(["SGL5"]))
    assert [r.code for r in choose(["SGL101,SGL102"])] == ["SGL101", "SGL102"]
    with pytest.raises(KeyError):
        choose(["SGL999"])


def test_options_are_declared_and_overridable():
    rule = get_rule("slow-weight-loading")
    assert rule.resolve()["max_seconds"] == 300.0
    assert rule.resolve({"max-seconds": 10})["max_seconds"] == 10
    with pytest.raises(KeyError):
        rule.resolve({"nope": 1})


def test_rules_are_pure():
    """No printing, files, clocks or processes in rule modules."""
    banned_calls = {"print", "open", "input", "exec", "eval"}
    banned_attrs = {("datetime", "now"), ("time", "time"), ("time", "perf_counter"), ("os", "system"), ("subprocess", "run"), ("Path", "read_text")}
    for path in sorted((ROOT / "sglog" / "rules").glob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                if isinstance(f, ast.Name):
                    assert f.id not in banned_calls, f"{path.name}:{node.lineno}: {f.id}()"
                if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name):
                    assert (f.value.id, f.attr) not in banned_attrs, f"{path.name}:{node.lineno}: {f.value.id}.{f.attr}()"
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                for m in mods:
                    assert m.split(".")[0] not in ("subprocess", "socket", "time", "random"), f"{path.name}: imports {m}"


# ------------------------------------------------------------------ cases


@pytest.mark.parametrize("rule_name,case", list(all_cases()))
def test_rule_case(tmp_path, rule_name, case):
    found = run_case(tmp_path, rule_name, case)
    if case["expect"] == "pass":
        assert not found, f"{case['title']}: expected no finding, got {[f.message for f in found]}"
        return
    assert found, f"{case['title']}: expected {rule_name} to fire"
    rule = get_rule(rule_name)
    for f in found:
        assert f.code == rule.code and f.name == rule.name
        assert SEVERITY_RANK[f.severity] <= SEVERITY_RANK[rule.severity]
        assert f.message and "\n" not in f.message
        assert f.evidence, "a finding needs evidence"
        for e in f.evidence:
            assert e.file.endswith("case.log")
            assert e.line is None or e.line >= 1
        if f.fix is not None:
            assert f.fix.summary and f.fix.safety
            for flag, value in f.fix.args.items():
                assert flag.startswith("--") and (value is None or isinstance(value, str))
    f = found[0]
    blob = f.message + " " + (f.fix.summary if f.fix else "") + " " + json.dumps(f.fix.args if f.fix else {})
    for needle in case["contains"]:
        assert needle in blob, f"{case['title']}: {needle!r} not in {blob!r}"
    if case["args"] is not None:
        assert f.fix is not None and f.fix.args == case["args"], f.fix.args if f.fix else None
    if case["severity"]:
        assert f.severity == case["severity"]


def test_kv_failure_lines_are_the_ones_the_reader_signs(tmp_path):
    """kv-transfer-failed reads no text: its failures are the kv_transfer_failed events (every
    release's wording) and the errors and untyped lines the reader signed ``kv_transfer`` (lines
    from corpus 013 and the rule's cases)."""
    from sglog.rules.disaggregation import kv_transfer_failed

    log = tmp_path / "x.log"
    log.write_text(
        "[2026-02-26 15:09:35 TP1] Prefill transfer failed for request rank=1 req.rid='eb17' req.bootstrap_room=804716023469713517 with exception "
        "KVTransferError(bootstrap_room=804716023469713517): Decode instance could be dead, remote mooncake session 10.99.91.49:16711 is not alive\n"
        "[2026-02-26 15:09:36 TP0] Decode transfer failed for request decode_req.req.rid=eb17 decode_req.req.bootstrap_room=804716023469713517 with exception boom\n"
        'INFO:     10.0.0.1:5000 - "POST /generate HTTP/1.1" 500 Internal Server Error\n'
        "[2026-02-26 15:09:37 TP0] a fork's own wording: KVTransferError on room 804716023469713517\n"
        "Traceback (most recent call last):\n"
        '  File "/sgl-workspace/sglang/python/sglang/srt/disaggregation/decode.py", line 300, in pop_transferred\n'
        "    raise KVTransferError(room, msg)\n"
        "sglang.srt.disaggregation.base.conn.KVTransferError: Failed to get kvcache from prefill instance, it might be dead\n",
        encoding="utf-8",
    )
    (run,) = sglog.load(log)
    got = kv_transfer_failed._kv_failures(run)
    assert [(e.kind, e.line) for e in got] == [("kv_transfer_failed", 1), ("kv_transfer_failed", 2), ("unparsed", 4), ("traceback", 5)]
    assert got[0].get("peer_session") == "10.99.91.49:16711" and got[1].get("side") == "decode"


def test_the_cuda_graph_banner_says_graphs_are_disabled(tmp_path):
    """0.4.5.post3 prints "CUDA Graph is DISABLED." under --disable-cuda-graph: an excerpt without
    the args still counts as graphs disabled (no graph memory in the startup budget)."""
    from sglog.read.parse import parse_file
    from sglog.rules import facts
    from sglog.runs.build import build_runs

    banner = (
        "[2025-04-20 10:00:01 TP0] \n\nCUDA Graph is DISABLED.\nThis will cause significant performance degradation.\n"
        "CUDA Graph should almost never be disabled in most usage scenarios.\n"
        "If you encounter OOM issues, please try setting --mem-fraction-static to a lower value (such as 0.8 or 0.7) instead of disabling CUDA Graph.\n\n"
    )
    load = "[2025-04-20 10:00:00 TP0] Load weight begin. avail mem=78.00 GB\n"
    with_banner, without = tmp_path / "a.log", tmp_path / "b.log"
    with_banner.write_text(load + banner)
    without.write_text(load)
    (run,) = build_runs([parse_file(str(with_banner))])
    assert facts.graphs_disabled(run) and facts.cuda_graph_banner(run).line == 2
    (run,) = build_runs([parse_file(str(without))])
    assert not facts.graphs_disabled(run) and facts.cuda_graph_banner(run) is None


def test_logged_draft_positions_never_guess(tmp_path):
    """Without the args, the draft length comes from accept len and rate only when exactly one rate
    definition gives one whole number (no rows, tiny rates or both definitions fitting: None)."""
    import polars as pl

    from sglog.read.parse import parse_file
    from sglog.rules.speculative.low_spec_acceptance import logged_draft_positions
    from sglog.runs.build import build_runs

    def rows(L: float, r: float | None, n: int = 12) -> pl.DataFrame:
        return pl.DataFrame({"accept_len": [L] * n, "accept_rate": [r] * n}, schema={"accept_len": pl.Float64, "accept_rate": pl.Float64})

    log = tmp_path / "x.log"
    log.write_text("[2026-02-23 10:16:00 TP0] Decode batch, #running-req: 1, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 48.00, #queue-req: 0\n")
    (run,) = build_runs([parse_file(str(log))])
    assert logged_draft_positions(run, rows(1.14, 0.19), 5)[0] == 5
    assert logged_draft_positions(run, rows(1.16, 0.14), 5)[0] == 7
    assert logged_draft_positions(run, rows(3.33, 0.78), 5)[0] == 3
    assert logged_draft_positions(run, rows(1.25, 0.12), 5) is None  # 9 before 0.5.11 or 2 since
    assert logged_draft_positions(run, rows(1.02, 0.01), 0) is None  # no whole number at this rounding
    assert logged_draft_positions(run, rows(1.5, None), 0) is None  # no rate: no rows (min_rows 0 too)
    assert logged_draft_positions(run, rows(1.5, 0.25, 0), 0) is None
