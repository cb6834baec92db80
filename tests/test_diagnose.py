"""`sglog diagnose` end to end: the story scenarios, foreign logs, the JSON document, exit codes, the API."""

from __future__ import annotations

import json
import re
import sys
from dataclasses import replace

import pytest

import sglog
from conftest import FOREIGN, FRAGMENTS, ROOT, STORY
from sglog import timeline
from sglog.cli import main
from sglog.diagnose import diagnose_runs, document, looks_like_sglang
from sglog.fixes import merged_args
from sglog.read.parse import parse_file
from sglog.rules import RULES

FOREIGN_LOGS = sorted(FOREIGN.glob("*.log"))
# the server each foreign log must be named as (sglog/read/evidence.py::OTHER_SERVERS)
FOREIGN_SERVER = {
    "tgi-2.4.log": "TGI",
    "vllm-0.6-oom.log": "vLLM",
    "vllm-0.8-serve.log": "vLLM",
    "llamacpp-server.log": "llama.cpp",
    "ollama-serve.log": "Ollama",
    "lmdeploy-serve.log": "LMDeploy",
    "tensorrt-llm-triton.log": "TensorRT-LLM",
}
STORY_LOGS = ["baseline-cgbs512", "baseline-cgbs128", "eagle3-oom-auto", "eagle3-5step", "eagle3-10step", "eagle3-fixed-v2", "eagle3-wiring-bug"]


@pytest.fixture(scope="module")
def story():
    """Runs and findings of every story log (parsed once)."""
    out = {}
    for name in STORY_LOGS:
        runs = sglog.load(STORY / f"{name}.log")
        out[name] = (runs, diagnose_runs(runs))
    return out


def by_name(findings, name):
    return [f for f in findings if f.name == name]


def cli(monkeypatch, capsys, *argv: str, env: dict | None = None) -> tuple[int, str, str]:
    """Run ``sglog`` in-process through the real entry point (error mapping included)."""
    monkeypatch.setattr(sys, "argv", ["sglog", *argv])
    monkeypatch.delenv("SGLOG_DEBUG", raising=False)
    for k, v in (env or {}).items():
        monkeypatch.setenv(k, v)
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    out, err = capsys.readouterr()
    return code, out, err


# ------------------------------------------------------------------ the story


def test_eagle3_oom_auto_suggests_a_fraction_near_088_with_both_bounds(story):
    runs, findings = story["eagle3-oom-auto"]
    errors = [f for f in findings if f.severity == "error"]
    assert [f.name for f in errors] == ["draft-model-exceeds-static-pool"]
    f = errors[0]
    assert "0.76" in f.message and "automatic" in f.message
    suggested = float(f.fix.args["--mem-fraction-static"])
    assert 0.86 <= suggested <= 0.90
    lo, hi = map(float, re.search(r"feasible window (0\.\d\d)-(0\.\d\d)", f.fix.summary).groups())
    assert 0.76 < lo <= suggested <= hi  # the auto value sits below the window: that is why it failed
    assert "lower bound" in f.fix.summary and "upper bound" in f.fix.summary
    assert "crash came before the draft model loaded" in f.fix.summary  # an assumption, stated
    assert f.details["total_gb"] == pytest.approx(94.04, abs=0.02)
    texts = [e.text for e in f.evidence]
    assert any(t and "Not enough memory" in t for t in texts)
    assert any(t and "Load weight end" in t for t in texts)
    # the SIGQUIT fan-out is evidence only as a consequence of the root cause (issue 27: one root cause per crash)
    assert all("consequence" in (e.note or "") for e in f.evidence if e.text and "Received sigquit" in e.text)


def test_cgbs512_is_oversized_with_the_memory_it_frees(story):
    _, findings = story["baseline-cgbs512"]
    [f] = by_name(findings, "cuda-graph-bs-oversized")
    assert "512" in f.message
    new = int(f.fix.args["--cuda-graph-max-bs"])
    assert new <= 128
    assert f.details["freed_gb"] >= 2.0
    assert re.search(r"frees ~\d+\.\d\d GB", f.fix.summary)
    assert any(e.line is None and "p99 #running-req" in (e.note or "") for e in f.evidence)


@pytest.mark.parametrize("name,steps,accept", [("eagle3-5step", 5, 2.1), ("eagle3-10step", 10, 2.3)])
def test_long_drafts_are_too_large_at_accept_length_about_2(story, name, steps, accept):
    runs, findings = story[name]
    assert timeline.decode_stats(runs[0])["accept_len_p50"] == pytest.approx(accept, abs=0.1)
    [f] = by_name(findings, "draft-tree-too-large")
    best = int(f.fix.args["--speculative-num-steps"])
    assert best < steps
    assert f.fix.args["--speculative-num-draft-tokens"] == str(best + 1)
    assert not by_name(findings, "low-spec-acceptance")
    assert not by_name(findings, "speculation-unprofitable")  # one run cannot show it


def test_wiring_bug_is_low_acceptance(story):
    _, findings = story["eagle3-wiring-bug"]
    [f] = by_name(findings, "low-spec-acceptance")
    assert "1.14" in f.message and "0.19" in f.message
    assert not by_name(findings, "draft-tree-too-large")


@pytest.mark.parametrize("name", STORY_LOGS)
def test_every_story_run_loads_weights_slowly(story, name):
    _, findings = story[name]
    [f] = by_name(findings, "slow-weight-loading")
    assert 580 <= f.details["seconds"] <= 900


@pytest.mark.parametrize("name", [n for n in STORY_LOGS if n != "eagle3-oom-auto"])
def test_serving_story_runs_have_no_errors(story, name):
    _, findings = story[name]
    assert not [f.name for f in findings if f.severity == "error"]


def test_speculative_story_runs_report_the_draft_on_full_tp(story):
    for name in ("eagle3-5step", "eagle3-10step", "eagle3-fixed-v2", "eagle3-wiring-bug"):
        [f] = by_name(story[name][1], "draft-model-full-tp")
        assert "TP8" in f.message and "PCIe" in f.message


def test_merged_args_take_the_most_severe_finding_first(story):
    runs, findings = story["eagle3-5step"]
    args = merged_args(findings, runs[0].index)
    assert args["--cuda-graph-max-bs"] and args["--speculative-num-steps"] == "3"
    first = next(f for f in findings if f.fix and "--mem-fraction-static" in f.fix.args)
    assert args["--mem-fraction-static"] == first.fix.args["--mem-fraction-static"]


# ------------------------------------------------------------------ the pipeline API


def test_findings_are_sorted_by_severity_then_run():
    runs = sglog.load([str(STORY / "eagle3-5step.log")]) + []
    more = [replace(r, index=len(runs) + 1) for r in sglog.load(STORY / "eagle3-oom-auto.log")]  # (runs are frozen)
    findings = diagnose_runs(runs + more)
    ranks = [({"error": 0, "warning": 1, "info": 2}[f.severity], f.run) for f in findings]
    assert ranks == sorted(ranks)
    assert findings[0].name == "draft-model-exceeds-static-pool"


def test_batch_row_evidence_gets_its_text_from_the_file(story):
    _, findings = story["baseline-cgbs512"]
    [f] = by_name(findings, "cuda-graph-bs-oversized")
    rows = [e for e in f.evidence if e.note and e.note.startswith("peak")]
    assert rows and rows[0].text and "Decode batch" in rows[0].text
    assert rows[0].text == (STORY / "baseline-cgbs512.log").read_text().splitlines()[rows[0].line - 1]


def test_select_ignore_and_options():
    runs = sglog.load(STORY / "eagle3-oom-auto.log")
    assert {f.code[:4] for f in diagnose_runs(runs, select=["SGL5"])} == {"SGL5"}
    assert not by_name(diagnose_runs(runs, ignore=["SGL101"]), "draft-model-exceeds-static-pool")
    assert not by_name(diagnose_runs(runs, options={"slow-weight-loading": {"max_seconds": 1000}}), "slow-weight-loading")
    with pytest.raises(KeyError):
        diagnose_runs(runs, select=["nope"])
    with pytest.raises(KeyError):
        diagnose_runs(runs, options={"SGL503": {"nope": 1}})


def test_looks_like_sglang_on_parsed_logs_and_runs():
    ok, cov = looks_like_sglang([parse_file(str(STORY / "eagle3-5step.log"))])
    assert ok and cov["sglang_lines"] > 100 and 0.9 <= cov["coverage"] <= 1.0
    ok, cov = looks_like_sglang(sglog.load(STORY / "eagle3-5step.log"))
    assert ok and cov["files"][0]["sglang"]
    ok, cov = looks_like_sglang([parse_file(str(p)) for p in FOREIGN_LOGS])
    assert not ok and not any(f["sglang"] for f in cov["files"])
    assert all(f["verdict"] == "other_server" and f["other_server"] for f in cov["files"])
    ok, cov = looks_like_sglang([parse_file(str(FRAGMENTS / "generic-torch-training-oom.log"))])
    assert ok and cov["sglang_specific"] is False and cov["files"][0]["verdict"] == "no_sglang_specific_line"


def test_document_shape():
    runs = sglog.load(STORY / "eagle3-oom-auto.log")
    doc = document(runs, diagnose_runs(runs), looks_like_sglang(runs)[1])
    assert list(doc) == ["schema_version", "runs", "findings", "coverage"]
    for r in doc["runs"]:  # (the merged flag change: tests/test_actionable.py)
        assert list(r)[-4:] == ["suggested_args", "suggested_args_sources", "suggested_command", "suggested_command_base"]
    for f in doc["findings"]:
        assert list(f) == ["code", "name", "severity", "message", "run", "evidence", "fix", "superseded", "details"]
        for e in f["evidence"]:
            assert list(e) == ["file", "line", "text"]
        assert f["fix"] is None or list(f["fix"]) == ["summary", "args", "safety"]


# ------------------------------------------------------------------ the command line


def test_json_output_is_the_document_and_nothing_else(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(monkeypatch, capsys, "diagnose", "--format", "json", "fixtures/logs/story/eagle3-oom-auto.log")
    assert code == 1
    doc = json.loads(out)
    assert doc["schema_version"] == 1
    assert doc["runs"][0]["files"] == ["fixtures/logs/story/eagle3-oom-auto.log"]
    assert doc["findings"][0]["name"] == "draft-model-exceeds-static-pool"
    assert doc["findings"][0]["fix"]["args"] == {"--mem-fraction-static": "0.89"}
    assert err.startswith("sglog: 1 run, ") and err.count("\n") == 1


def test_rich_output(monkeypatch, capsys):
    monkeypatch.chdir(ROOT)
    code, out, err = cli(monkeypatch, capsys, "diagnose", "fixtures/logs/story/eagle3-oom-auto.log", env={"COLUMNS": "160"})
    assert code == 1
    assert "\x1b[" not in out  # not a terminal: no colour codes
    assert "Run 1  eagle3-oom-auto.log\n" in out
    assert "model        moonshotai/Kimi-K2.5" in out
    assert "speculative EAGLE3 (5 steps, topk 1, 6 draft tokens)" in out
    assert "ERROR   SGL101 draft-model-exceeds-static-pool" in out
    assert re.search(r"eagle3-oom-auto\.log:\d+ +RuntimeError: Not enough memory", out)
    assert "Suggested launch command change:" in out
    cmd = out.split("Suggested launch command change:")[1].strip().splitlines()[0]
    assert cmd.startswith("python3 -m sglang.launch_server") and "--mem-fraction-static 0.89" in cmd
    assert "error" in err and "coverage" in err


def test_colour_only_on_a_terminal_and_never_with_no_color(monkeypatch):
    from sglog.cli.diagnose import use_color
    from sglog.render.diagnose import render_rich

    class Tty:
        def isatty(self):
            return True

    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(Tty())
    monkeypatch.setenv("NO_COLOR", "1")
    assert not use_color(Tty())
    runs = sglog.load(STORY / "eagle3-oom-auto.log")
    findings = diagnose_runs(runs)
    assert "\x1b[" in render_rich(runs, findings, color=True)
    assert "\x1b[" not in render_rich(runs, findings, color=False)


@pytest.mark.parametrize("fail_on,expected", [("error", 0), ("warning", 1), ("info", 1)])
def test_fail_on(monkeypatch, capsys, fail_on, expected):
    code, _, _ = cli(monkeypatch, capsys, "diagnose", "-q", "--fail-on", fail_on, str(STORY / "baseline-cgbs128.log"))
    assert code == expected


def test_quiet_select_and_ignore(monkeypatch, capsys):
    log = str(STORY / "eagle3-oom-auto.log")
    code, out, err = cli(monkeypatch, capsys, "diagnose", "-q", "-f", "json", "--select", "SGL5", log)
    assert err == "" and code == 0
    assert {f["code"][:4] for f in json.loads(out)["findings"]} == {"SGL5"}
    code, out, _ = cli(monkeypatch, capsys, "diagnose", "-q", "-f", "json", "--ignore", "draft-model-exceeds-static-pool", log)
    assert code == 0 and "SGL101" not in out


@pytest.mark.parametrize("argv,needle", [(["--select", "SGL999"], "no rule matches"), (["--ignore", "nope"], "no rule matches"), (["--fail-on", "fatal"], "fatal")])
def test_usage_errors_exit_2(monkeypatch, capsys, argv, needle):
    code, out, err = cli(monkeypatch, capsys, "diagnose", *argv, str(STORY / "eagle3-oom-auto.log"))
    assert code == 2 and out == ""
    assert err.startswith("sglog: error:") and needle in err and "Traceback" not in err


def test_missing_file_exits_2(monkeypatch, capsys, tmp_path):
    code, out, err = cli(monkeypatch, capsys, "diagnose", str(tmp_path / "nope.log"))
    assert code == 2 and out == "" and "no such file" in err


def test_internal_error_exits_70(monkeypatch, capsys):
    import sglog.diagnose as d

    def boom(*a, **k):
        raise RuntimeError("bug")

    monkeypatch.setattr(d, "diagnose_runs", boom)
    code, out, err = cli(monkeypatch, capsys, "diagnose", str(STORY / "eagle3-oom-auto.log"))
    assert code == 70 and out == "" and "internal error" in err and "Traceback" not in err


@pytest.mark.parametrize("log", FOREIGN_LOGS, ids=lambda p: p.name)
@pytest.mark.parametrize("fmt", ["rich", "json"])
def test_foreign_logs_are_not_diagnosed(monkeypatch, capsys, log, fmt):
    code, out, err = cli(monkeypatch, capsys, "diagnose", "-f", fmt, str(log))
    assert code == 2 and out == ""
    line = err.strip()
    assert line.count("\n") == 0 and line.startswith("sglog: error:")
    assert "not SGLang's" in line and FOREIGN_SERVER[log.name] in line


def test_foreign_servers_are_all_covered():
    assert sorted(FOREIGN_SERVER) == sorted(p.name for p in FOREIGN_LOGS)


@pytest.mark.parametrize("fmt", ["rich", "json"])
def test_a_generic_fragment_is_diagnosed_and_says_so(monkeypatch, capsys, fmt):
    code, out, err = cli(monkeypatch, capsys, "diagnose", "-f", fmt, str(FRAGMENTS / "generic-torch-training-oom.log"))
    assert code in (0, 1) and out and "Traceback" not in err
    if fmt == "json":
        assert json.loads(out)["coverage"]["sglang_specific"] is False
    else:
        assert "no SGLang-specific line found" in err


def test_a_log_with_nothing_recognised_is_refused(monkeypatch, capsys, tmp_path):
    log = tmp_path / "notes.log"
    log.write_text("dear diary\nthe weather was fine today\nnothing else happened\n")
    code, out, err = cli(monkeypatch, capsys, "diagnose", str(log))
    assert code == 2 and out == "" and err.count("\n") == 1 and "none of its 3 non-blank lines is recognised" in err


def test_foreign_log_among_sglang_logs_is_named(monkeypatch, capsys):
    code, out, err = cli(monkeypatch, capsys, "diagnose", str(STORY / "eagle3-5step.log"), str(FOREIGN / "tgi-2.4.log"))
    assert code == 2 and out == "" and "tgi-2.4.log" in err and "eagle3-5step" not in err


def test_rules_command(monkeypatch, capsys):
    code, out, _ = cli(monkeypatch, capsys, "rules", env={"COLUMNS": "200"})
    assert code == 0
    for r in RULES:
        assert r.code in out and r.name in out
    code, out, _ = cli(monkeypatch, capsys, "rules", "--format", "json")
    doc = json.loads(out)
    assert [r["code"] for r in doc["rules"]] == [r.code for r in RULES]


@pytest.mark.parametrize("key", ["SGL101", "draft-model-exceeds-static-pool", "sgl504"])
def test_explain(monkeypatch, capsys, key):
    code, out, _ = cli(monkeypatch, capsys, "explain", key)
    assert code == 0
    for section in ("What it finds", "Why it matters", "Evidence", "Suggested fix", "Fix safety", "Example"):
        assert f"## {section}" in out
    assert "\x1b[" not in out


def test_explain_unknown_rule(monkeypatch, capsys):
    code, out, err = cli(monkeypatch, capsys, "explain", "no-such-rule")
    assert code == 2 and out == "" and "no rule" in err


# ------------------------------------------------------------------ robustness

_POOL: list[str] = []
for _p in [STORY / "eagle3-oom-auto.log", STORY / "eagle3-wiring-bug.log", *sorted((ROOT / "fixtures" / "logs" / "real").glob("0[0-2]*.log"))]:
    if _p.exists():
        _POOL += _p.read_text(encoding="utf-8", errors="replace").splitlines()[:400]


@pytest.mark.skipif(not _POOL, reason="no fixture lines")
def test_rules_never_crash_on_shuffled_and_truncated_logs(tmp_path_factory):
    from hypothesis import HealthCheck, given, settings
    from hypothesis import strategies as st

    @settings(max_examples=30, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
    @given(st.lists(st.integers(min_value=0, max_value=len(_POOL) - 1), min_size=1, max_size=120))
    def check(picks):
        path = tmp_path_factory.mktemp("mix") / "mix.log"
        path.write_text("\n".join(_POOL[i] for i in picks) + "\n", encoding="utf-8")
        runs = sglog.load(path)
        for f in diagnose_runs(runs):
            assert f.message and "\n" not in f.message
            assert f.severity in ("error", "warning", "info")

    check()


@pytest.mark.parametrize("damage", ["missing", "corrupt"])
def test_a_broken_catalogue_is_an_internal_error_naming_its_file(monkeypatch, capsys, tmp_path, damage):
    from sglog.read import catalog

    broken = tmp_path / "catalog.json.gz"
    if damage == "corrupt":
        broken.write_bytes(b"\x1f\x8b\x08\x00garbage")
    monkeypatch.setattr(catalog, "_shipped", lambda: broken)
    monkeypatch.setattr(catalog, "_cache", {})
    log = tmp_path / "x.log"
    log.write_text("[2025-06-26 07:25:31 TP0] a message that no grammar rule names, so the catalogue is asked\n")
    code, out, err = cli(monkeypatch, capsys, "diagnose", str(log))
    assert code == 70 and out == "" and err.count("\n") == 1 and str(broken) in err and "Traceback" not in err
