"""Run names (issue 29, item 8): the file's name an operator knows, ``#N`` only when a file holds
several launches, ``node0.log + 1 more`` for a launch over several files; the same name in
runs, diagnose, diff and report, in text and JSON, whatever order the files are given in."""

from __future__ import annotations

import doctest
import json
import shutil

import pytest

from conftest import CONSTRUCTED, ROOT, run_sglog
from sglog.runs import build as sruns
from sglog.runs.build import load_runs

TWO = CONSTRUCTED / "two-launches.log"  # a crash and a relaunch in one file
NODE0, NODE1 = CONSTRUCTED / "node0.log", CONSTRUCTED / "node1.log"  # one launch over two nodes
OOM = ROOT / "fixtures" / "logs" / "story" / "eagle3-oom-auto.log"


sglog = run_sglog  # (tests/conftest.py)


def test_run_names_doctests():
    assert doctest.testmod(sruns).failed == 0


def test_one_launch_in_a_file_is_the_file_name():
    (run,) = load_runs([str(OOM)])
    assert run.name == "eagle3-oom-auto.log"  # no directory, no '#1'


def test_several_launches_in_a_file_are_numbered_as_diff_takes_them():
    found = load_runs([str(TWO)])
    assert [r.name for r in found] == ["two-launches.log#1", "two-launches.log#2"]
    from sglog.compare.diff import resolve_run_spec

    for r in found:  # (the name's FILE#N is the spec that picks the run)
        assert resolve_run_spec(str(CONSTRUCTED / r.name)).line_ranges == r.line_ranges


@pytest.mark.parametrize("order", [(NODE0, NODE1), (NODE1, NODE0)])
def test_a_launch_over_several_files_is_named_after_the_first_whatever_the_order(order):
    (run,) = load_runs([str(p) for p in order])
    assert len(run.files) == 2 and run.name == "node0.log + 1 more"


def test_files_of_one_name_in_two_folders_keep_their_folder(tmp_path):
    for d, log in (("a", OOM), ("b", ROOT / "fixtures" / "logs" / "story" / "baseline-cgbs512.log")):
        (tmp_path / d).mkdir()
        shutil.copy(log, tmp_path / d / "server.log")
    found = load_runs([str(tmp_path / "a" / "server.log"), str(tmp_path / "b" / "server.log")])
    assert [r.name for r in found] == ["a/server.log", "b/server.log"]


def test_stdin_is_named_stdin(capsys, monkeypatch):
    code, out, _ = sglog(capsys, monkeypatch, "runs", "-f", "jsonl", stdin=OOM.read_text())
    assert code == 0 and json.loads(out.splitlines()[0])["name"] == "stdin"


def test_one_name_in_every_command_and_format(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("COLUMNS", "160")
    # runs: the table and the JSON
    _, out, _ = sglog(capsys, monkeypatch, "runs", "-f", "json", str(TWO))
    assert [r["name"] for r in json.loads(out)["runs"]] == ["two-launches.log#1", "two-launches.log#2"]
    _, out, _ = sglog(capsys, monkeypatch, "runs", str(NODE1), str(NODE0))
    cells = [c.strip() for line in out.splitlines() for c in line.split("│")]
    assert "node0.log + 1 more" in cells and not any("+1#" in c or c.endswith("#1") for c in cells)
    # diagnose: the run headings and the JSON
    _, out, _ = sglog(capsys, monkeypatch, "diagnose", "-q", str(TWO))
    assert "Run 1  two-launches.log#1\n" in out and "Run 2  two-launches.log#2\n" in out
    _, out, _ = sglog(capsys, monkeypatch, "diagnose", "-q", "-f", "json", str(NODE0), str(NODE1))
    assert [r["name"] for r in json.loads(out)["runs"]] == ["node0.log + 1 more"]
    # diff: the JSON's names (the specs stay as typed)
    _, out, _ = sglog(capsys, monkeypatch, "diff", "-f", "json", f"{TWO}#1", f"{TWO}#2")
    doc = json.loads(out)
    assert (doc["a"]["name"], doc["b"]["name"]) == ("two-launches.log#1", "two-launches.log#2")
    assert doc["a"]["spec"] == f"{TWO}#1"
    # report: the title names the run
    code, _, _ = sglog(capsys, monkeypatch, "report", str(NODE1), str(NODE0), "--no-images", "--no-html", "-o", str(tmp_path / "rep"))
    assert code == 0
    assert (tmp_path / "rep" / "index.md").read_text().splitlines()[0] == "# Post-mortem: node0.log + 1 more (ran, with problems)"
