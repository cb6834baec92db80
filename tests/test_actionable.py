"""Findings a user can act on (issue 27, item 6).

* every message, fix and fix-safety text shows the run's numbers, never a symbol of the docs
  (the symbols are derived from the docs: ``Rule.symbols``);
* no two findings on one run give contradicting advice: where two fixes set one flag to different
  values, one decides (``sglog.fixes.decide``) and the other finding says it is superseded, by
  what and why;
* ``diagnose --format json`` carries, per run, the merged flag change and the relaunch command,
  built by the implementation ``repro`` and ``report`` use (``sglog.relaunch.build_plan``).
"""

from __future__ import annotations

import json

import polars as pl
import pytest

import sglog
from conftest import LOGS, STORY
from sglog.diagnose import diagnose_runs, document, looks_like_sglang, suggested_change
from sglog.findings import Evidence, Finding, Fix
from sglog.fixes import decide, fix_order, reconcile
from sglog.relaunch import build_plan, quote
from sglog.rules import RULES, get_rule
from sglog.rules.base import bare_symbols, doc_symbols
from sglog.runs.build import Run
from test_rules import CASES, all_cases, load_cases, run_case

FIXTURE_LOGS = sorted(p for p in LOGS.rglob("*") if p.is_file() and p.suffix in (".log", ".gz", ".zst") and "foreign" not in p.parts)
FAILING = [c for c in all_cases() if c.values[1]["expect"] == "fail"]


def texts(f: Finding) -> dict[str, str]:
    return {"message": f.message, "fix": f.fix.summary if f.fix else "", "safety": f.fix.safety if f.fix else ""}


@pytest.fixture(scope="module")
def story():
    out = {}
    for p in sorted(STORY.glob("*.log")):
        runs = sglog.load(p)
        out[p.stem] = (runs, diagnose_runs(runs))
    return out


# ------------------------------------------------------------------ 1. numbers, not symbols


def test_the_symbols_come_from_the_docs():
    """The derivation finds the notation the docs compute with, and not the log's own words."""
    wasted = get_rule("kv-headroom-wasted").symbols()
    assert {"F", "T", "mfs", "mfs_new", "target_gb", "high_gb"} <= wasted
    assert not {"available_gpu_mem", "max_total_num_tokens", "mem_fraction_static", "GB"} & wasted
    assert {"L", "a", "s*", "min_marginal"} <= get_rule("draft-tree-too-large").symbols()
    assert {"N", "A_c", "bs_reached", "reserve_gb"} <= get_rule("cuda-graph-capture-oom").symbols()
    for rule in RULES:  # every option is a symbol (its value belongs in the text, not its name)
        assert set(rule.options) <= rule.symbols(), rule.name
    assert doc_symbols("`mfs_max = 1 - (H + G) / T`; check `available_gpu_mem=5 GB`") == {"mfs_max", "H", "G", "T"}


@pytest.mark.parametrize(
    "text,bare",
    [
        ("Lower it by about (6.0 - 2.60) GB / T, or use --chunked-prefill-size 4096.", ["T"]),  # the text this test caught
        ("upper bound 0.90 = 1 - (headroom 6.0 + CUDA graphs 1.0 + draft 2.0 GB) / T).", ["T"]),
        ("with less than `H` GB of activation room", ["H"]),
        ("the cycle gets `steps - s*` draft steps shorter", ["s*", "steps"]),
        ("0.88 - (6.0 - 2.60) GB / T 94.0 GB; a lower fraction shrinks the pool by 2 steps", []),
        ("a = 0.53, L* = 2.31 and 48 tok/s: a batch of 3 steps", []),
    ],
)
def test_bare_symbols_are_the_ones_without_a_value(text, bare):
    symbols = {"T", "H", "s*", "steps", "a", "L*", "s"}
    assert bare_symbols(text, symbols) == bare


@pytest.mark.parametrize("rule_name,case", FAILING)
def test_failing_cases_show_numbers_not_symbols(tmp_path, rule_name, case):
    rule = get_rule(rule_name)
    found = run_case(tmp_path, rule_name, case)
    assert found
    for f in found:
        for part, text in texts(f).items():
            assert not bare_symbols(text, rule.symbols()), f"{case['title']}: {part} names {bare_symbols(text, rule.symbols())} without a value: {text}"
            assert "\n" not in text, f"{case['title']}: {part} is not one line"


@pytest.mark.parametrize("path", FIXTURE_LOGS, ids=lambda p: str(p.relative_to(LOGS)))
def test_fixture_logs_show_numbers_not_symbols(path):
    for f in diagnose_runs(sglog.load(path)):
        for part, text in texts(f).items():
            assert not bare_symbols(text, get_rule(f.name).symbols()), f"{f.name} {part}: {text}"


def test_safety_text_carries_the_runs_numbers(story):
    """The safety section is the docs' with the run's values: the doc keeps `N`, the finding says 8."""
    rule = get_rule("cuda-graph-bs-oversized")
    assert "`N`" in rule.doc["Fix safety"] and "N" in rule.symbols()
    [f] = [f for f in story["baseline-cgbs512"][1] if f.name == rule.name]
    n = f.fix.args["--cuda-graph-max-bs"]
    assert f"batches above {n} run without graphs" in f.fix.safety
    assert f"`--max-running-requests {n}`" in f.fix.safety
    [t] = [f for f in story["eagle3-5step"][1] if f.name == "draft-tree-too-large"]
    steps, best = 5, int(t.fix.args["--speculative-num-steps"])
    assert f"the cycle gets {steps - best} draft steps" in t.fix.safety


# ------------------------------------------------------------------ 2. no contradicting advice


def _sources():
    """Every case (failing and passing) and every fixture log: (label, runs, findings)."""
    for path in sorted(CASES.glob("*.cases")):
        for i, case in enumerate(load_cases(path)):
            yield f"{path.stem}-{i}", "\n".join(case["lines"]) + "\n"
    for p in FIXTURE_LOGS:
        yield str(p.relative_to(LOGS)), p


@pytest.fixture(scope="module")
def everything(tmp_path_factory):
    out = []
    tmp = tmp_path_factory.mktemp("cases")
    for label, src in _sources():
        if isinstance(src, str):
            path = tmp / f"{label}.log"
            path.write_text(src, encoding="utf-8")
        else:
            path = src
        runs = sglog.load(path)
        out.append((label, runs, diagnose_runs(runs)))
    return out


@pytest.mark.slow
def test_one_value_per_flag_and_every_loser_says_why(everything):
    """Per run, the fixes that still hold (their flags not superseded) never disagree on a flag, and
    each superseded flag names the finding whose value holds, with that value and a reason."""
    losers = 0
    for label, runs, findings in everything:
        for run in runs:
            mine = [f for f in findings if f.run == run.index]
            decided = suggested_change(run, findings)["suggested_args"]
            held: dict[str, set] = {}
            for f in mine:
                lost = {x.flag: x for x in f.superseded}
                for flag, value in (f.fix.args if f.fix else {}).items():
                    if flag in lost:
                        x = lost[flag]
                        winner = next(w for w in mine if w.name == x.by)
                        assert winner.fix.args[flag] == x.by_value == decided[flag], (label, flag)
                        assert x.value == value and x.reason and x.by in x.reason, (label, x)
                        losers += 1
                    else:
                        held.setdefault(flag, set()).add(value)
            for flag, values in held.items():
                assert len(values) == 1, f"{label}: {flag} set to {values} by findings that all still hold"
                assert decided[flag] in values
    assert losers >= 4  # the story runs and the cases below do have such pairs


def test_no_finding_says_there_is_no_room_while_another_finds_room(story):
    """baseline-cgbs512: kv-headroom-wasted finds ~9 GB to spare; kv-pool-smaller-than-request says a
    full-length request does not fit even with that memory, and sizes its --context-length to the pool
    that memory makes, not to today's pool."""
    _, findings = story["baseline-cgbs512"]
    [wasted] = [f for f in findings if f.name == "kv-headroom-wasted"]
    [small] = [f for f in findings if f.name == "kv-pool-smaller-than-request"]
    assert "no room" not in small.fix.summary
    assert "grows the pool from 15,603 to" in small.fix.summary
    cap = int(small.fix.summary.split("--context-length ", 1)[1].split(" ", 1)[0])
    assert "--context-length" not in small.fix.args  # (info: no request was refused, so not in the suggested change)
    more = int(wasted.message.rsplit("(~", 1)[1].split(" more KV tokens", 1)[0].replace(",", ""))
    assert cap > 15_603 + more * 0.9  # the cap counts the memory the other finding gives the pool


def test_a_lower_fraction_loses_to_the_one_computed_with_smaller_graphs(story):
    """eagle3-5step: kv-headroom-too-small lowers --mem-fraction-static, cuda-graph-bs-oversized
    raises it with the graph memory it frees: the opposite advice is settled, and said."""
    runs, findings = story["eagle3-5step"]
    [small] = [f for f in findings if f.name == "kv-headroom-too-small"]
    [big] = [f for f in findings if f.name == "cuda-graph-bs-oversized"]
    [x] = small.superseded
    assert (x.flag, x.value, x.by, x.by_value, x.opposite) == ("--mem-fraction-static", small.fix.args["--mem-fraction-static"], big.name, big.fix.args["--mem-fraction-static"], True)
    assert "--cuda-graph-max-bs 8" in x.reason
    assert not big.superseded
    assert suggested_change(runs[0], findings)["suggested_args"]["--mem-fraction-static"] == big.fix.args["--mem-fraction-static"]


def test_removing_speculation_supersedes_tuning_it(tmp_path):
    """speculation-unprofitable removes the --speculative-* flags; low-spec-acceptance's one-step
    draft is superseded (the removal changes more flags, computed together)."""
    [case] = [c for c in load_cases(CASES / "speculation-unprofitable.cases")[:1]]
    log = tmp_path / "case.log"
    log.write_text("\n".join(case["lines"]) + "\n")
    findings = diagnose_runs(sglog.load(log))
    [low] = [f for f in findings if f.name == "low-spec-acceptance"]
    assert {x.flag for x in low.superseded} == set(low.fix.args)
    assert all(x.by == "speculation-unprofitable" and x.by_value is None and x.opposite for x in low.superseded)


def _finding(name: str, severity: str, args: dict, run: int = 1) -> Finding:
    rule = get_rule(name)
    return Finding(rule.code, rule.name, severity, "m", run, (Evidence("f.log", 1, "x"),), Fix("s", args, "safe"))


def test_which_fix_decides_a_flag():
    """Severity first, then the fix that changes more flags, then the rule order."""
    info = _finding("kv-headroom-wasted", "info", {"--mem-fraction-static": "0.90"})
    warn = _finding("kv-headroom-too-small", "warning", {"--mem-fraction-static": "0.80"})
    joint = _finding("cuda-graph-bs-oversized", "warning", {"--cuda-graph-max-bs": "8", "--mem-fraction-static": "0.86"})
    later = _finding("kv-capacity-bound", "warning", {"--mem-fraction-static": "0.84"})
    assert [f.name for f in fix_order([info, later, warn, joint])] == ["cuda-graph-bs-oversized", "kv-headroom-too-small", "kv-capacity-bound", "kv-headroom-wasted"]
    d = decide([info, later, warn, joint])["--mem-fraction-static"]
    assert d.won is joint and [f.name for f, _ in d.overridden] == ["kv-headroom-too-small", "kv-capacity-bound", "kv-headroom-wasted"]
    reasons = {f.name: x.reason for f in reconcile([info, later, warn, joint]) for x in f.superseded}
    assert "more severe" in reasons["kv-headroom-wasted"]
    assert "together with --cuda-graph-max-bs 8" in reasons["kv-headroom-too-small"]
    assert "together with --cuda-graph-max-bs 8" in reasons["kv-capacity-bound"]  # (the reason is the winner's, over each loser)
    first = decide([later, warn])["--mem-fraction-static"]
    assert first.won is warn and "rule order" in [x for f in reconcile([later, warn]) for x in f.superseded][0].reason
    same = _finding("kv-capacity-bound", "warning", {"--mem-fraction-static": "0.860"})
    d = decide([joint, same])["--mem-fraction-static"]
    assert d.agreed == (same,) and not d.overridden  # the same value is agreement, not a conflict
    assert not [x for f in reconcile([joint, same]) for x in f.superseded]
    two = decide([_finding("watchdog-timeout", "error", {"--tp": "4"}), _finding("weights-exceed-gpu-memory", "error", {"--tp-size": "8"})])
    assert list(two) == ["--tp"] and two["--tp"].value == "8"  # one flag in two spellings; SGL110 before SGL504


# ------------------------------------------------------------------ 3. the merged change in JSON


def test_json_carries_the_merged_change_per_run(story):
    runs, findings = story["eagle3-5step"]
    doc = document(runs, findings, looks_like_sglang(runs)[1])
    run = doc["runs"][0]
    assert list(run)[-4:] == ["suggested_args", "suggested_args_sources", "suggested_command", "suggested_command_base"]
    args, sources = run["suggested_args"], run["suggested_args_sources"]
    want = {}
    for f in fix_order(findings):
        for flag, value in (f.fix.args if f.fix else {}).items():
            want.setdefault(flag, value)
    assert args == want
    mfs = sources["--mem-fraction-static"]
    assert mfs["won"] == "cuda-graph-bs-oversized" and mfs["value"] == args["--mem-fraction-static"]
    assert [o["rule"] for o in mfs["overridden"]] == ["kv-headroom-too-small"] and mfs["overridden"][0]["reason"]
    assert sources["--speculative-num-steps"] == {"won": "draft-tree-too-large", "value": "3", "overridden": []}
    # the command is repro's and report's: the log's launch command with the flags applied
    plan = build_plan(runs[0], findings)
    assert run["suggested_command"] == plan.argv and run["suggested_command_base"] == "launch_line"
    argv = run["suggested_command"]
    assert argv[:3] == ["python3", "-m", "sglang.launch_server"]
    for flag, value in args.items():
        i = argv.index(flag)
        assert argv[i + 1] == value, flag
        assert argv.count(flag) == 1
    # the finding that lost carries why, in JSON too
    [small] = [f for f in doc["findings"] if f["name"] == "kv-headroom-too-small"]
    assert small["superseded"][0]["by"] == "cuda-graph-bs-oversized" and small["superseded"][0]["opposite"] is True
    assert all(f["superseded"] == [] for f in doc["findings"] if f["name"] != "kv-headroom-too-small")
    json.dumps(doc)  # plain data


def test_the_command_base_says_what_the_log_showed(tmp_path):
    """server_args: no launch line, the flags the dump shows were set; assumed: neither, only the fixes' flags."""

    def first_fail(name: str, want_args: bool) -> list[str]:
        for case in load_cases(CASES / f"{name}.cases"):
            if case["expect"] == "fail" and any(line.startswith("[") and "server_args=" in line for line in case["lines"]) == want_args:
                return case["lines"]
        raise AssertionError(name)

    log = tmp_path / "a.log"
    log.write_text("\n".join(first_fail("kv-headroom-wasted", True)) + "\n")
    runs = sglog.load(log)
    got = suggested_change(runs[0], diagnose_runs(runs))
    assert got["suggested_command_base"] == "server_args"
    argv = got["suggested_command"]
    assert argv[:3] == ["python", "-m", "sglang.launch_server"] and argv[argv.index("--model-path") + 1] == runs[0].args["model_path"]
    assert argv[argv.index("--mem-fraction-static") + 1] == got["suggested_args"]["--mem-fraction-static"]

    log.write_text("\n".join(first_fail("kv-retraction", False)) + "\n")
    runs = sglog.load(log)
    assert not runs[0].args and not runs[0].launch_command
    got = suggested_change(runs[0], diagnose_runs(runs))
    assert got["suggested_command_base"] == "assumed"
    assert got["suggested_command"] == ["python", "-m", "sglang.launch_server", *[w for flag, v in got["suggested_args"].items() for w in (flag, v)]]


def test_no_change_no_command(story):
    runs, findings = story["baseline-cgbs128"]
    quiet = [f for f in findings if not (f.fix and f.fix.args)]
    assert suggested_change(runs[0], quiet) == {"suggested_args": {}, "suggested_args_sources": {}, "suggested_command": None, "suggested_command_base": None}


def test_a_switch_from_a_fix_is_a_bare_flag():
    """A fix's "true" turns on a switch: ``--disable-piecewise-cuda-graph``, not ``... true``, even
    when the log's server args do not know the flag; None removes a flag; other values replace."""
    cmd = "python3 -m sglang.launch_server --model-path m --tp 8 --mem-fraction-static=0.76 --disable-cuda-graph --cuda-graph-max-bs 512"
    run = Run(1, ["f.log"], {}, [], pl.DataFrame(), pl.DataFrame(), launch_command=cmd)
    f = _finding("cuda-graph-capture-failed", "error", {"--mem-fraction-static": "0.88", "--disable-cuda-graph": None, "--cuda-graph-max-bs": "128", "--disable-piecewise-cuda-graph": "true"})
    got = suggested_change(run, [f])
    assert got["suggested_command"] == [
        "python3",
        "-m",
        "sglang.launch_server",
        "--model-path",
        "m",
        "--tp",
        "8",
        "--mem-fraction-static",
        "0.88",
        "--cuda-graph-max-bs",
        "128",
        "--disable-piecewise-cuda-graph",
    ]
    assert got["suggested_command_base"] == "launch_line"


def test_the_terminal_shows_the_merged_change_and_who_lost(story):
    from sglog.render.diagnose import render_rich

    runs, findings = story["eagle3-5step"]
    out = render_rich(runs, findings, width=160)
    head, change = out.split("Suggested launch command change:\n", 1)
    assert "--mem-fraction-static 0.85 superseded by cuda-graph-bs-oversized's 0.89 (the two turn it opposite ways)" in " ".join(head.split())
    lines = change.splitlines()
    argv = suggested_change(runs[0], findings)["suggested_command"]
    assert lines[0].strip() == " ".join(quote(w) for w in argv)  # one pasteable line, first
    assert lines[1].strip() == "built on the log's launch command; every fix merged, one value per flag:"
    assert "--mem-fraction-static 0.88 -> 0.89  cuda-graph-bs-oversized over kv-headroom-too-small's 0.85" in [line.strip() for line in lines]
    assert "--speculative-eagle-topk 1 (already so)  draft-tree-too-large" in [line.strip() for line in lines]
    assert len(lines) == 2 + len(suggested_change(runs[0], findings)["suggested_args"])


def test_ci_formats_say_a_fix_is_superseded(story):
    from sglog.render.ci import github, sarif

    _, findings = story["eagle3-5step"]
    doc = json.loads(sarif(findings, RULES))
    [r] = [r for r in doc["runs"][0]["results"] if r["properties"]["name"] == "kv-headroom-too-small"]
    assert "Superseded: --mem-fraction-static 0.85 superseded by cuda-graph-bs-oversized's 0.89" in r["message"]["text"]
    assert "Superseded: --mem-fraction-static" in github(findings)
