"""``sglog diff`` and ``sglog.compare.diff.compare``: what changed between two runs, and whether it helped."""

from __future__ import annotations

import json
import random

import pytest
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from typer.testing import CliRunner

from conftest import ROOT
from sglog.cli import app
from sglog.compare import diff as sdiff
from sglog.errors import InputError, UsageError
from sglog.render.diff import render_markdown, render_rich

STORY_DIR = "fixtures/logs/story"
TWO_LAUNCHES = "fixtures/logs/constructed/two-launches.log"


def story(name: str) -> str:
    """A story fixture, relative to the repository root (tests run from there: snapshots hold relative paths only)."""
    return f"{STORY_DIR}/{name}.log"


class MarkdownSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "md"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)


@pytest.fixture
def md_snapshot(snapshot):
    return snapshot.use_extension(MarkdownSnapshot)


@pytest.fixture
def json_snapshot(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def diff(a: str, b: str) -> sdiff.DiffResult:
    return sdiff.diff_specs(a, b)


def change(result: sdiff.DiffResult, flag: str) -> sdiff.ConfigChange:
    found = [c for c in result.config_changes if c.flag == flag]
    assert found, f"{flag} not among {[c.flag for c in result.config_changes]}"
    return found[0]


# ------------------------------------------------------------------ statistics


def test_mann_whitney_separated_samples():
    p, prob = sdiff.mann_whitney([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
    assert p == pytest.approx(0.00508, abs=2e-4)  # z = (18 - 0.5) / sqrt(39)
    assert prob == 1.0


def test_mann_whitney_is_symmetric_and_handles_ties():
    rng = random.Random(7)
    a = [round(rng.gauss(80, 3), 1) for _ in range(60)]
    b = [round(rng.gauss(82, 3), 1) for _ in range(50)]
    p_ab, prob_ab = sdiff.mann_whitney(a, b)
    p_ba, prob_ba = sdiff.mann_whitney(b, a)
    assert p_ab == pytest.approx(p_ba)
    assert prob_ab == pytest.approx(1 - prob_ba)
    assert sdiff.mann_whitney([3.0] * 10, [3.0] * 12) == (1.0, 0.5)


def test_bootstrap_is_seeded_and_covers_the_shift():
    rng = random.Random(3)
    a = [rng.gauss(82, 2.5) for _ in range(150)]
    b = [x + 7.5 for x in a]
    lo, hi = sdiff.bootstrap_median_diff(a, b)
    assert (lo, hi) == sdiff.bootstrap_median_diff(a, b)
    assert lo < 7.5 < hi


def test_significance_of_noise_and_of_a_real_shift():
    rng = random.Random(11)
    a = [rng.gauss(89.5, 2.5) for _ in range(120)]
    same = [rng.gauss(89.5, 2.5) for _ in range(120)]
    faster = [rng.gauss(89.5 * 1.05, 2.5) for _ in range(120)]
    assert not sdiff.significance(a, same).significant
    s = sdiff.significance(a, faster)
    assert s.significant and s.ci_low > 0 and s.p_value < sdiff.ALPHA
    tiny = sdiff.significance(a, [x * 1.004 for x in a])  # real but under MIN_EFFECT_PCT
    assert not tiny.significant
    few = sdiff.significance(a[:3], faster[:3])
    assert few.p_value is None and not few.significant and "too few" in few.note


# ------------------------------------------------------------------ run specs


def test_split_run_spec():
    assert sdiff.split_run_spec("crash.log#2") == ("crash.log", 2)
    assert sdiff.split_run_spec("server.log") == ("server.log", None)
    for bad in ("crash.log#0", "crash.log#x", "crash.log#"):
        with pytest.raises(UsageError):
            sdiff.split_run_spec(bad)


def test_resolve_run_spec():
    run = sdiff.resolve_run_spec(story("baseline-cgbs512"))
    assert run.name == "baseline-cgbs512.log"
    assert sdiff.resolve_run_spec(story("baseline-cgbs512") + "#1") is run
    with pytest.raises(UsageError, match="holds 1 run"):
        sdiff.resolve_run_spec(story("baseline-cgbs512") + "#2")
    with pytest.raises(InputError, match="no such file"):
        sdiff.resolve_run_spec("fixtures/logs/story/missing.log")


def test_resolve_run_spec_needs_n_when_a_file_holds_several_runs():
    with pytest.raises(UsageError, match=r"holds 2 runs; pick one with .*two-launches.log#1"):
        sdiff.resolve_run_spec(TWO_LAUNCHES)
    first, second = sdiff.resolve_run_spec(TWO_LAUNCHES + "#1"), sdiff.resolve_run_spec(TWO_LAUNCHES + "#2")
    assert (first.index_in_file, second.index_in_file) == (1, 2)


# ------------------------------------------------------------------ story pairs


def test_baseline_cuda_graph_max_bs_512_vs_128():
    r = diff(story("baseline-cgbs512"), story("baseline-cgbs128"))
    v = r.verdict
    assert r.comparable and v.kind == "faster" and v.significant
    assert v.change_pct == pytest.approx(9.1, abs=0.6)
    assert v.a == pytest.approx(82.0, abs=1.0) and v.b == pytest.approx(89.5, abs=1.0)
    assert v.text.startswith(f"B decodes {v.change_pct:.1f}% faster ({v.b:.1f} vs {v.a:.1f} tok/s median)")
    cg = change(r, "cuda_graph_max_bs")
    assert (cg.a, cg.b, cg.origin) == (512, 128, "explicit")
    mfs = change(r, "mem_fraction_static")
    assert mfs.origin == "auto" and mfs.b > mfs.a
    assert [c.flag for c in r.config_changes if c.origin == "explicit"] == ["cuda_graph_max_bs"]
    kv = r.memory["kv_gb"]
    assert kv["delta"] > 0
    assert r.memory["kv_tokens"]["delta"] > 0
    assert "config change is cuda_graph_max_bs 512 (auto) -> 128 (explicit)" in v.text
    assert f"left {kv['delta']:.2f} GB more for KV cache (+{r.memory['kv_tokens']['delta']:,} tokens)" in v.text
    assert r.memory["cuda_graph_gb"]["delta"] < 0 and "cut CUDA-graph memory" in v.text
    sizes = r.cuda_graph
    assert sizes["a"]["max"] == 512 and sizes["b"]["max"] == 128
    assert r.significance.p_value < sdiff.ALPHA and r.significance.ci_low > 0
    assert r.speculation is None


def test_eagle3_5_vs_10_steps():
    r = diff(story("eagle3-5step"), story("eagle3-10step"))
    assert r.comparable and r.speculation is None
    steps = change(r, "speculative_num_steps")
    assert (steps.a, steps.b) == (5, 10)
    la, lb = r.serving["accept_len_median"]["a"], r.serving["accept_len_median"]["b"]
    assert la == pytest.approx(2.1, abs=0.15)
    assert f"accept length {la:.2f} -> {lb:.2f}" in r.verdict.text
    assert r.verdict.kind in ("faster", "slower", "no-change")
    assert "speculative_num_steps 5 -> 10" in r.verdict.text


def test_eagle3_vs_improved_baseline_is_slower_with_break_even():
    r = diff(story("baseline-cgbs128"), story("eagle3-5step"))
    s = r.speculation
    assert s is not None and s.spec_side == "b"
    assert s.finding == "speculation-slower-than-baseline"
    assert s.speedup_pct < 0 and r.verdict.kind == "slower" and r.verdict.significant
    assert s.break_even == pytest.approx(2.6, abs=0.15)
    assert s.accept_len == pytest.approx(2.1, abs=0.1)
    assert s.margin == pytest.approx(s.accept_len - s.break_even)
    # L* = t_cycle / t_base = L * baseline / spec  (per request)
    assert s.break_even == pytest.approx(s.accept_len * s.baseline_tok_s / s.spec_tok_s)
    assert f"break-even accept length L* = {s.break_even:.2f}, achieved {s.accept_len:.2f}" in r.verdict.text
    # the other way round: the speculative run is A
    r2 = diff(story("eagle3-5step"), story("baseline-cgbs128"))
    assert r2.speculation.spec_side == "a" and r2.speculation.break_even == pytest.approx(s.break_even)
    assert r2.verdict.kind == "faster"  # B (the baseline) is the faster one


def test_identical_runs_no_significant_change():
    r = diff(story("baseline-cgbs128"), story("baseline-cgbs128"))
    assert r.comparable and r.verdict.kind == "no-change" and not r.verdict.significant
    assert r.verdict.change_pct == 0
    assert r.config_changes == ()
    assert r.verdict.text.startswith("No significant change in decode throughput")
    assert "no config changes" in r.verdict.text
    assert r.findings["added"] == [] and r.findings["removed"] == []


def test_oom_then_fixed_has_no_throughput_verdict():
    r = diff(story("eagle3-oom-auto"), story("eagle3-fixed-v2"))
    assert r.verdict.kind == "no-data"
    assert r.verdict.text.startswith("No throughput comparison: A crashed")
    mfs = change(r, "mem_fraction_static")
    assert (mfs.origin_a, mfs.origin_b) == ("auto", "explicit") and mfs.b > mfs.a


def test_two_runs_of_one_file():
    r = diff(TWO_LAUNCHES + "#1", TWO_LAUNCHES + "#2")
    assert r.a.spec.endswith("#1") and r.b.spec.endswith("#2")
    assert r.verdict.text


def test_different_models_are_not_comparable(tmp_path, monkeypatch):
    base = (ROOT / story("baseline-cgbs128")).read_text()
    model = sdiff.resolve_run_spec(story("baseline-cgbs128")).args["model_path"]
    (tmp_path / "a.log").write_text(base)
    (tmp_path / "other-model.log").write_text(base.replace(model, "/models/Qwen3-235B-A22B"))
    monkeypatch.chdir(tmp_path)
    r = diff("a.log", "other-model.log")
    assert not r.comparable and r.verdict.kind == "not-comparable" and not r.verdict.significant
    assert r.verdict.text.startswith("Not comparable: different models (")
    assert "Qwen3-235B-A22B" in r.verdict.text
    assert r.speculation is None


def test_very_different_concurrency_is_not_comparable(tmp_path, monkeypatch):
    import re

    base = (ROOT / story("baseline-cgbs128")).read_text()
    busy = re.sub(r"#running-req: \d+", "#running-req: 32", base)
    (tmp_path / "a.log").write_text(base)
    (tmp_path / "busy.log").write_text(busy)
    monkeypatch.chdir(tmp_path)
    r = diff("a.log", "busy.log")
    assert not r.comparable
    assert "different workload shape" in r.verdict.text


# ------------------------------------------------------------------ API shape used by report / repro


def test_compare_api_and_json_shape():
    a, b = sdiff.resolve_run_spec(story("baseline-cgbs512")), sdiff.resolve_run_spec(story("baseline-cgbs128"))
    r = sdiff.compare(a, b, [], [])
    d = r.to_dict()
    assert d["schema_version"] == 1
    assert set(d["verdict"]) >= {"text", "metric", "a", "b", "change_pct", "significant"}
    assert set(d) >= {"config_changes", "startup", "memory", "serving", "findings", "comparable"}
    assert set(d["findings"]) >= {"added", "removed", "unchanged"}
    assert all(set(c) >= {"flag", "a", "b"} for c in d["config_changes"])
    assert r.verdict.text == str(r.verdict) == d["verdict"]["text"]
    json.dumps(d)  # plain data only
    assert render_markdown(r, level=2).startswith("## sglog diff\n")


def test_findings_added_gone_unchanged():
    from sglog.findings import Finding

    def f(name: str, run: int = 1) -> Finding:
        return Finding(code="SGL000", name=name, severity="warning", message=f"{name} happened", run=run)

    d = sdiff.findings_section([f("kept"), f("fixed")], [f("kept"), f("new-one")])
    assert [x["name"] for x in d["added"]] == ["new-one"]
    assert [x["name"] for x in d["removed"]] == ["fixed"]
    assert [x["name"] for x in d["unchanged"]] == ["kept"]
    assert sdiff.findings_section(None, []) == {"available": False, "added": [], "removed": [], "unchanged": []}


def test_markdown_escapes_log_text(tmp_path, monkeypatch):
    base = (ROOT / story("baseline-cgbs128")).read_text()
    model = sdiff.resolve_run_spec(story("baseline-cgbs128")).args["model_path"]
    (tmp_path / "a.log").write_text(base)
    (tmp_path / "evil.log").write_text(base.replace(model, "/m/<script>x</script>|*bold*"))
    monkeypatch.chdir(tmp_path)
    md = render_markdown(diff("a.log", "evil.log"))
    assert "<script>" not in md and "*bold*" not in md
    assert "&lt;script&gt;" in md and "\\|\\*bold\\*" in md


def test_rich_renders(capsys):
    from rich.console import Console

    r = diff(story("baseline-cgbs128"), story("eagle3-5step"))
    console = Console(width=120, record=True, no_color=True)
    console.print(render_rich(r))
    text = console.export_text()
    assert r.verdict.text.split(";")[0][:60] in " ".join(text.split())
    assert "break-even accept length" in text


# ------------------------------------------------------------------ snapshots (json and markdown)

PAIRS = {
    "baseline_512_vs_128": ("baseline-cgbs512", "baseline-cgbs128"),
    "eagle3_5_vs_10_steps": ("eagle3-5step", "eagle3-10step"),
    "baseline_128_vs_eagle3_5": ("baseline-cgbs128", "eagle3-5step"),
    "eagle3_oom_vs_fixed": ("eagle3-oom-auto", "eagle3-fixed-v2"),
    "identical": ("baseline-cgbs128", "baseline-cgbs128"),
}


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_snapshot_json(pair, json_snapshot):
    a, b = PAIRS[pair]
    d = diff(story(a), story(b)).to_dict()
    assert "/work" not in json.dumps(d) and not any(str(ROOT) in str(v) for v in d.values())
    assert d == json_snapshot


@pytest.mark.parametrize("pair", sorted(PAIRS))
def test_snapshot_markdown(pair, md_snapshot):
    a, b = PAIRS[pair]
    md = render_markdown(diff(story(a), story(b)))
    assert str(ROOT) not in md
    assert md == md_snapshot


# ------------------------------------------------------------------ CLI

runner = CliRunner()


def test_cli_json_is_json_only():
    res = runner.invoke(app, ["diff", story("baseline-cgbs512"), story("baseline-cgbs128"), "--format", "json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    assert d["schema_version"] == 1 and d["verdict"]["significant"] is True


def test_cli_markdown_and_rich():
    res = runner.invoke(app, ["diff", story("baseline-cgbs512"), story("baseline-cgbs128"), "-f", "markdown"])
    assert res.exit_code == 0 and res.stdout.startswith("# sglog diff\n\n**Verdict:** B decodes")
    res = runner.invoke(app, ["diff", story("baseline-cgbs512"), story("baseline-cgbs128")])
    assert res.exit_code == 0 and "verdict" in res.stdout


def test_cli_output_file(tmp_path):
    out = tmp_path / "diff.md"
    res = runner.invoke(app, ["diff", story("baseline-cgbs512"), story("baseline-cgbs128"), "-f", "markdown", "-o", str(out)])
    assert res.exit_code == 0 and res.stdout == ""
    assert out.read_text().startswith("# sglog diff")


@pytest.mark.parametrize(
    "argv, message",
    [
        (["diff", "fixtures/logs/story/missing.log", story("baseline-cgbs128")], "missing.log: no such file"),
        (["diff", story("baseline-cgbs512") + "#3", story("baseline-cgbs128")], "holds 1 run"),
        (["diff", story("baseline-cgbs512") + "#x", story("baseline-cgbs128")], "bad run number"),
        (["diff", TWO_LAUNCHES, story("baseline-cgbs128")], "pick one with"),
        (["diff", story("baseline-cgbs512")], "Missing argument"),
    ],
)
def test_cli_bad_input_exits_2_with_one_line(argv, message, monkeypatch, capsys):
    from sglog.cli import main

    monkeypatch.setattr("sys.argv", ["sglog", *argv])
    with pytest.raises(SystemExit) as exc:
        main()
    assert exc.value.code == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.startswith("sglog: error: ") and message in err
