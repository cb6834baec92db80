"""The command line as a user meets it: exit codes, files written, help screens, formats."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from conftest import STORY, run_sglog

OOM = STORY / "eagle3-oom-auto.log"
FIXED = STORY / "eagle3-fixed-v2.log"


sglog = run_sglog  # (tests/conftest.py)


# ------------------------------------------------------------------ runs: formats and -o


def test_runs_jsonl_is_one_object_per_line(capsys, monkeypatch):
    code, out, _ = sglog(capsys, monkeypatch, "runs", "-f", "jsonl", str(OOM), str(FIXED))
    lines = out.splitlines()
    assert code == 0 and len(lines) == 2
    rows = [json.loads(line) for line in lines]
    assert [r["run"] for r in rows] == [1, 2] and rows[0]["status"] == "crashed" and rows[0]["tp"] == 8
    assert rows[0]["ranks"][:2] == ["TP0", "TP1"] and rows[0]["last_ts"].startswith("2026-02-27")


def test_runs_csv_and_parquet_files_have_one_schema(capsys, monkeypatch, tmp_path):
    import polars as pl

    from sglog.render.export import RUN_SCHEMA

    csv, parquet, jsonl = tmp_path / "runs.csv", tmp_path / "runs.parquet", tmp_path / "runs.jsonl"
    for fmt, out in (("csv", csv), ("parquet", parquet), ("jsonl", jsonl)):
        code, stdout, _ = sglog(capsys, monkeypatch, "runs", "-f", fmt, "-o", str(out), str(OOM))
        assert code == 0 and stdout == "" and out.exists(), fmt
    frame = pl.read_parquet(parquet)
    assert dict(frame.schema) == RUN_SCHEMA
    assert frame["crash_line"].to_list() == [112] and frame["last_ts"].dtype == pl.Datetime("us")
    head = csv.read_text().splitlines()[0].split(",")
    assert head == list(RUN_SCHEMA) == list(json.loads(jsonl.read_text().splitlines()[0]))
    import csv as csvlib

    [row] = list(csvlib.DictReader(csv.open()))
    assert json.loads(row["ranks"])[:2] == ["TP0", "TP1"] and row["crash_line"] == "112"  # (a list cell is its JSON text in CSV)


def test_runs_table_to_a_file(capsys, monkeypatch, tmp_path):
    out = tmp_path / "runs.txt"
    code, stdout, _ = sglog(capsys, monkeypatch, "runs", "-o", str(out), str(OOM))
    assert code == 0 and stdout == "" and "0.5.9" in out.read_text() and "\x1b[" not in out.read_text()


def test_runs_parquet_needs_a_file(capsys, monkeypatch):
    code, out, err = sglog(capsys, monkeypatch, "runs", "-f", "parquet", str(OOM))
    assert code == 2 and out == "" and "needs -o FILE" in err


# ------------------------------------------------------------------ crash messages: whole in data, cut with an ellipsis on a terminal

CUT = "mem_fraction_static=0.7)"  # (the logged value is 0.76)


def test_the_crash_message_is_whole_in_every_output(capsys, monkeypatch):
    code, out, _ = sglog(capsys, monkeypatch, "runs", "-f", "json", str(OOM))
    ending = json.loads(out)["runs"][0]["ending"]
    assert ending["description"].endswith("mem_fraction_static=0.76)")
    code, out, _ = sglog(capsys, monkeypatch, "diff", "-f", "json", str(OOM), str(FIXED))
    assert "mem_fraction_static=0.76)" in json.dumps(json.loads(out)) and CUT not in out
    code, out, _ = sglog(capsys, monkeypatch, "repro", str(OOM))
    assert "mem_fraction_static=0.76)" in out and CUT not in out
    monkeypatch.setenv("COLUMNS", "80")
    for args in (["runs", str(OOM)], ["diff", str(OOM), str(FIXED)], ["diagnose", str(OOM)]):
        code, out, _ = sglog(capsys, monkeypatch, *args)
        flat = " ".join(out.split())
        assert CUT not in flat.replace(" ", ""), args
        assert "0.76" in flat, args


def test_clip_cuts_at_a_space_with_an_ellipsis():
    from sglog.render.text import clip

    text = "RuntimeError: Not enough memory. Current value: mem_fraction_static=0.76"
    for width in range(10, len(text) + 1):
        cut = clip(text, width)
        assert cut == text or (cut.endswith(" …") and text.startswith(cut[:-2]) and text[len(cut) - 2] == " "), width
        assert len(cut) <= width or " " not in cut[:-2], width


def test_text_helpers_doctests():
    import doctest

    from sglog.render import text

    assert doctest.testmod(text).failed == 0


# ------------------------------------------------------------------ help screens

COMMANDS = ("diagnose", "explain", "diff", "report", "repro", "events", "runs", "timeline", "rules")


@pytest.mark.parametrize("columns", ["80", "120"])
def test_help_screens_read_as_usage_lines_do(capsys, monkeypatch, columns):
    monkeypatch.setenv("COLUMNS", columns)
    width = min(int(columns), 100)  # (help screens are at most 100 columns wide)
    for args in ([], ["--help"], *([c, "--help"] for c in COMMANDS)):
        code, out, err = sglog(capsys, monkeypatch, *args)
        assert code == 0 and err == "" and out.startswith("Usage: sglog"), args
        for bad in ("{", "<str>", "<int>", "<float", "<path>", "<rich", "<table", "x>=", "..."[:0] + "…"):
            assert bad not in out, (args, bad)
        assert max(map(len, out.splitlines())) <= width, args
        if args and args[0] in COMMANDS:
            assert "Examples:\n\n    sglog " + args[0] in out, args
    _, out, _ = sglog(capsys, monkeypatch, "diff", "--help")
    assert out.startswith("Usage: sglog diff [OPTIONS] RUN_A RUN_B\n")
    _, out, _ = sglog(capsys, monkeypatch, "diagnose", "-h")
    assert out.startswith("Usage: sglog diagnose [OPTIONS] [LOG...]\n") and "--fail-on SEVERITY" in out  # (none: stdin, when piped)
    _, out, _ = sglog(capsys, monkeypatch, "runs", "--help")
    assert "table, json (one document), jsonl (a run per line), csv or parquet" in " ".join(out.split())


def test_version(capsys, monkeypatch):
    from sglog import __version__

    for flag in ("--version", "-V"):
        assert sglog(capsys, monkeypatch, flag) == (0, f"sglog {__version__}\n", "")


def test_usage_errors_are_one_line_and_exit_2(capsys, monkeypatch):
    for args, words in (
        (["explain"], "Missing argument 'RULE'"),
        (["diagnose", "--nope", str(OOM)], "No such option: --nope"),
        (["diagnos"], "No such command 'diagnos'"),
        (["diagnose", "-f", "xml", str(OOM)], "xml"),
    ):
        code, out, err = sglog(capsys, monkeypatch, *args)
        assert code == 2 and out == "" and err.startswith("sglog: error: ") and words in err and err.count("\n") == 1, (args, err)


# ------------------------------------------------------------------ wrong input names: listed, exit 2


def test_events_unknown_kind_lists_the_kinds(capsys, monkeypatch):
    code, out, err = sglog(capsys, monkeypatch, "events", str(OOM), "-k", "decode_bach")
    assert code == 2 and out == "" and "did you mean decode_batch" in err and "prefill_batch, process_killed" in err
    code, out, _ = sglog(capsys, monkeypatch, "events", str(FIXED), "-k", "decode_batch", "-f", "jsonl")
    assert code == 0 and out and all(json.loads(line)["kind"] == "decode_batch" for line in out.splitlines())


@pytest.mark.slow
def test_report_without_images_links_only_files_it_wrote(capsys, monkeypatch, tmp_path):
    import re

    out_dir = tmp_path / "rep"
    code, out, _ = sglog(capsys, monkeypatch, "report", str(OOM), "--no-images", "-o", str(out_dir))
    assert code == 0 and out.strip() == str(out_dir / "index.md")
    md = (out_dir / "index.md").read_text()
    links = re.findall(r"\]\(([^)#:]+)\)", md)
    assert links and "memory.vl.json" in links
    assert [link for link in links if not (out_dir / link).exists()] == []


# ------------------------------------------------------------------ internal names stay out of the text


def test_text_says_phases_in_words_and_no_markup(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")
    code, out, _ = sglog(capsys, monkeypatch, "runs", "-f", "json", str(OOM))
    ending = json.loads(out)["runs"][0]["ending"]
    assert ending["phase"] == "kv_pool" and ending["description"].startswith("crashed during KV-pool allocation (")  # (the data keeps the name)
    code, out, _ = sglog(capsys, monkeypatch, "rules")
    assert "*not*" not in out and "that is not an out-of-memory" in out and "diagnose shows each finding's own" in out
    code, out, _ = sglog(capsys, monkeypatch, "diff", "-f", "markdown", str(STORY / "baseline-cgbs128.log"), str(STORY / "eagle3-5step.log"))
    assert "-&gt;" not in out and "default → explicit" in out and "speculation-slower-than-baseline" not in out


# ------------------------------------------------------------------ widths


def test_one_width_when_piped_and_no_word_split(capsys, monkeypatch):
    monkeypatch.delenv("COLUMNS", raising=False)
    for args in (["runs", str(OOM), str(FIXED)], ["diff", str(OOM), str(FIXED)], ["diagnose", str(OOM)]):
        _, out, _ = sglog(capsys, monkeypatch, *args)
        text = out.split("Suggested launch command change:")[0]  # (the command is kept whole: it is pasted)
        assert max(map(len, text.splitlines())) <= 120, args  # (piped: 120 columns for every command)
    _, out, _ = sglog(capsys, monkeypatch, "runs", str(OOM), str(FIXED))
    assert max(map(len, out.splitlines())) == 120
    monkeypatch.setenv("COLUMNS", "200")
    _, out, _ = sglog(capsys, monkeypatch, "timeline", str(STORY / "baseline-cgbs128.log"))
    assert "2026-02-27 09:23:00" in out  # (the time column does not wrap)
    monkeypatch.setenv("COLUMNS", "120")
    _, out, _ = sglog(capsys, monkeypatch, "runs", str(OOM), str(FIXED))
    cells = [c.strip() for line in out.splitlines() for c in line.split("│")]
    assert "eagle3-oom-auto.log" in cells and "version" in out


def test_evidence_keeps_the_part_it_is_evidence_of(capsys, monkeypatch):
    monkeypatch.setenv("COLUMNS", "80")
    _, out, _ = sglog(capsys, monkeypatch, "diagnose", str(OOM))
    server_args = next(line for line in out.splitlines() if "eagle3-oom-auto.log:4 " in line)
    assert "mem_fraction_static=0.76" in server_args and server_args.rstrip().endswith("…")
    assert not any(line.rstrip().endswith(("i …", "fracti …")) for line in out.splitlines())


# ------------------------------------------------------------------ exports: one typed schema


def test_event_exports_share_one_schema(capsys, monkeypatch, tmp_path):
    import csv as csvlib

    import polars as pl

    _, out, _ = sglog(capsys, monkeypatch, "events", str(OOM), "-k", "weight_load_begin", "-f", "jsonl")
    first = json.loads(out.splitlines()[0])
    parquet, csv = tmp_path / "e.parquet", tmp_path / "e.csv"
    sglog(capsys, monkeypatch, "events", str(OOM), "-k", "weight_load_begin", "-f", "parquet", "-o", str(parquet))
    sglog(capsys, monkeypatch, "events", str(OOM), "-k", "weight_load_begin", "-f", "csv", "-o", str(csv))
    frame = pl.read_parquet(parquet)
    row = next(csvlib.DictReader(csv.open()))
    assert frame.schema["ts"] == pl.Datetime("us") and str(frame["ts"][0]) == first["ts"]  # (the API's datetime)
    assert first["rank"] == frame["rank"][0] == row["rank"] and first["rank"].startswith("TP")


def test_timeline_numbers_are_rounded_in_csv(capsys, monkeypatch):
    _, out, _ = sglog(capsys, monkeypatch, "timeline", str(STORY / "baseline-cgbs128.log"), "-f", "csv")
    numbers = [c for line in out.splitlines()[1:] for c in line.split(",") if "." in c and c.replace(".", "").isdigit()]
    assert numbers and all(len(n.split(".")[1]) <= 6 for n in numbers)


# ------------------------------------------------------------------ conventions of ruff, uv, lnav, jq users

SGLOG = [str(Path(sys.executable).parent / "sglog")]


@pytest.mark.slow
def test_piped_log_without_dash_and_a_directory(tmp_path):
    import shutil
    import subprocess

    p = subprocess.run([*SGLOG, "diagnose", "-q", "-f", "json"], stdin=OOM.open("rb"), capture_output=True, timeout=120)
    assert p.returncode == 1 and json.loads(p.stdout)["findings"], p.stderr
    for log in (OOM, FIXED):
        shutil.copy(log, tmp_path / log.name)
    (tmp_path / "notes.md").write_text("not a log\n")
    p = subprocess.run([*SGLOG, "runs", "-f", "jsonl", str(tmp_path)], capture_output=True, timeout=120)
    assert p.returncode == 0 and len(p.stdout.splitlines()) == 2, p.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    p = subprocess.run([*SGLOG, "runs", str(empty)], capture_output=True, timeout=120)
    assert p.returncode == 2 and b"no log files" in p.stderr


def test_color_auto_always_never(capsys, monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    from sglog.cli import _common

    try:
        assert "\x1b[" not in sglog(capsys, monkeypatch, "rules")[1]  # (auto, piped)
        assert "\x1b[" in sglog(capsys, monkeypatch, "--color", "always", "rules")[1]
        monkeypatch.setenv("FORCE_COLOR", "1")
        assert "\x1b[" in sglog(capsys, monkeypatch, "rules")[1]
        assert "\x1b[" not in sglog(capsys, monkeypatch, "--color", "never", "rules")[1]
        monkeypatch.delenv("FORCE_COLOR")
        monkeypatch.setenv("NO_COLOR", "1")
        assert "\x1b[" not in sglog(capsys, monkeypatch, "rules")[1]
    finally:
        _common.COLOR["when"] = "auto"


def test_diff_fail_on_regression(capsys, monkeypatch):
    base, spec = STORY / "baseline-cgbs128.log", STORY / "eagle3-5step.log"
    code, _, err = sglog(capsys, monkeypatch, "diff", "--fail-on", "regression", str(base), str(spec))
    assert code == 1 and "regression: B (EAGLE3, 5 steps) decodes 20.3% slower" in err
    assert sglog(capsys, monkeypatch, "diff", "--fail-on", "regression", str(spec), str(base))[0] == 0
    assert sglog(capsys, monkeypatch, "diff", "--fail-on", "regression", str(FIXED), str(OOM))[0] == 1  # (B crashed, A did not)
    assert sglog(capsys, monkeypatch, "diff", str(base), str(spec))[0] == 0  # (without --fail-on: 0)


def test_diagnose_to_a_file_and_in_ci_formats(capsys, monkeypatch, tmp_path):
    out = tmp_path / "d.txt"
    code, stdout, _ = sglog(capsys, monkeypatch, "diagnose", "-q", str(OOM), "-o", str(out))
    assert code == 1 and stdout == "" and "SGL101 draft-model-exceeds-static-pool" in out.read_text()
    code, stdout, _ = sglog(capsys, monkeypatch, "diagnose", "-q", "-f", "sarif", str(OOM))
    doc = json.loads(stdout)
    assert code == 1 and doc["version"] == "2.1.0" and doc["runs"][0]["tool"]["driver"]["name"] == "sglog"
    results = doc["runs"][0]["results"]
    assert results[0]["ruleId"] == "SGL101" and results[0]["level"] == "error"
    assert results[0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("eagle3-oom-auto.log")
    assert {r["id"] for r in doc["runs"][0]["tool"]["driver"]["rules"]} >= {r["ruleId"] for r in results}
    code, stdout, _ = sglog(capsys, monkeypatch, "diagnose", "-q", "-f", "github", str(OOM))
    lines = stdout.splitlines()
    assert code == 1 and lines[0].startswith("::error file=") and ",line=4,title=SGL101 draft-model-exceeds-static-pool::" in lines[0]
    assert all(line.startswith(("::error ", "::warning ", "::notice ")) for line in lines)


def test_ci_doctests():
    import doctest

    from sglog.render import ci, diagnose

    assert doctest.testmod(ci).failed == 0 and doctest.testmod(diagnose).failed == 0


# ------------------------------------------------------------------ the configuration file


def test_config_file_sets_defaults_and_rule_options(capsys, monkeypatch, tmp_path):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "pyproject.toml").write_text('[tool.sglog]\nfail-on = "warning"\nignore = ["SGL303"]\nformat = "json"\n\n[tool.sglog.rules.draft-model-exceeds-static-pool]\nheadroom_gb = 7.0\n')
    code, out, _ = sglog(capsys, monkeypatch, "diagnose", "-q", str(FIXED))
    codes = [f["code"] for f in json.loads(out)["findings"]]  # (format = "json")
    assert code == 1 and codes and "SGL303" not in codes and "SGL101" not in codes  # (fail-on warning: the warnings fail it)
    code, out, _ = sglog(capsys, monkeypatch, "diagnose", "-q", "--fail-on", "error", "-f", "rich", str(FIXED))
    assert code == 0 and out.startswith("Run 1")  # (the command line wins)
    code, out, _ = sglog(capsys, monkeypatch, "explain", "SGL101")
    assert f"`headroom_gb` = `7.0` (from {tmp_path / 'pyproject.toml'}; default `6.0`)" in out
    assert "`headroom_share` = `0.1` (default)" in out
    # sglog.toml wins in its directory; a wrong key or option is a usage error
    (tmp_path / "sglog.toml").write_text("[rules.SGL101]\nheadroom = 7\n")
    code, _, err = sglog(capsys, monkeypatch, "diagnose", "-q", str(FIXED))
    assert code == 2 and "no option 'headroom'" in err
    (tmp_path / "sglog.toml").write_text('fail_on = "x"\n')
    code, _, err = sglog(capsys, monkeypatch, "diagnose", "-q", str(FIXED))
    assert code == 2 and "unknown key fail_on" in err and "sglog.toml" in err


def test_shell_completion_script():
    import subprocess

    p = subprocess.run([*SGLOG, "--show-completion", "bash"], capture_output=True, text=True, timeout=60)
    assert p.returncode == 0 and "_sglog_completion" in p.stdout and "complete " in p.stdout


def test_events_since_until_and_rank(capsys, monkeypatch):
    code, out, _ = sglog(capsys, monkeypatch, "events", str(OOM), "--since", "2026-02-27 10:14:44", "--until", "10:14:47", "--rank", "TP6", "-f", "jsonl")
    rows = [json.loads(line) for line in out.splitlines()]
    assert code == 0 and rows and all(r["rank"] == "TP6" and "2026-02-27 10:14:44" <= r["ts"] <= "2026-02-27 10:14:47" for r in rows)
    code, _, err = sglog(capsys, monkeypatch, "events", str(OOM), "--since", "yesterday")
    assert code == 2 and "--since 'yesterday'" in err
