"""``--since/--until/--rank`` on events, timeline and diagnose (issue 29, item 9): one window
(sglog/cli/window.py) for the three, checked here against what ``events`` says of the
same lines."""

from __future__ import annotations

import doctest
import json
from pathlib import Path

import pytest

from conftest import LOGS, run_sglog
from sglog.cli import window as window_module

TWO = LOGS / "constructed" / "two-launches.log"  # a crash (08:17, TP2) and a relaunch (08:18-08:30) in one file
SERVING = LOGS / "story" / "baseline-cgbs128.log"  # decode batches 09:23-09:29, TP0
DP4 = LOGS / "real" / "019-deepseek-r1-w4a8-ascend-npu-tp16-dp4-ep-eagle-benchmark.log"  # decode batches of DP0..DP3


sglog = run_sglog  # (tests/conftest.py)


def rows_of(capsys, monkeypatch, log: Path, *args: str) -> list[dict]:
    code, out, _ = sglog(capsys, monkeypatch, "events", str(log), "-f", "jsonl", *args)
    assert code == 0
    return [json.loads(line) for line in out.splitlines()]


def test_window_doctests():
    assert doctest.testmod(window_module).failed == 0


# ------------------------------------------------------------------ diagnose


def where(rows: list[dict]):
    """(time, rank) of a line, from the events that hold it (``events`` as the oracle)."""

    def at(line: int):
        for r in rows:
            if r["line"] <= line <= r["end_line"]:
                return r["ts"], r["rank"]
        return None

    return at


def diagnosis(capsys, monkeypatch, log: Path, *args: str) -> tuple[int, dict, str]:
    code, out, err = sglog(capsys, monkeypatch, "diagnose", "-f", "json", str(log), *args)
    return code, json.loads(out), err


@pytest.mark.parametrize("since, until", [("2026-02-27 08:18:00", None), (None, "2026-02-27 08:18:00"), ("08:18:26", "08:28:29")])
def test_a_time_window_keeps_the_findings_with_evidence_in_it(capsys, monkeypatch, since, until):
    _, whole, _ = diagnosis(capsys, monkeypatch, TWO)
    args = [*(["--since", since] if since else []), *(["--until", until] if until else [])]
    code, cut, err = diagnosis(capsys, monkeypatch, TWO, *args)
    at = where(rows_of(capsys, monkeypatch, TWO))

    def inside(ts: str | None) -> bool:
        if ts is None:
            return False
        mine = ts if " " in (since or until or "") else ts.split(" ")[1]
        return (since is None or mine >= since) and (until is None or mine[: len(until)] <= until)

    expected = [f for f in whole["findings"] if any(inside(at(e["line"])[0]) for e in f["evidence"] if e["line"])]
    assert expected and len(expected) < len(whole["findings"])  # (the window leaves some out)
    assert [(f["run"], f["code"]) for f in cut["findings"]] == [(f["run"], f["code"]) for f in expected]
    assert {r["run"] for r in cut["runs"]} >= {f["run"] for f in expected}
    assert cut["window"] == {"since": since, "until": until, "ranks": []}
    assert code == (1 if any(f["severity"] == "error" for f in expected) else 0)
    assert err.rstrip().endswith(")") and "(in the window: " in err


def test_a_rank_keeps_the_findings_on_its_lines(capsys, monkeypatch):
    _, whole, _ = diagnosis(capsys, monkeypatch, TWO)
    at = where(rows_of(capsys, monkeypatch, TWO))
    for rank in ("TP2", "TP4"):
        _, cut, _ = diagnosis(capsys, monkeypatch, TWO, "--rank", rank)
        expected = [f for f in whole["findings"] if any(rank in (at(e["line"])[1] or "").split() for e in f["evidence"] if e["line"])]
        assert expected and [(f["run"], f["code"]) for f in cut["findings"]] == [(f["run"], f["code"]) for f in expected]
        assert cut["window"]["ranks"] == [rank]
    # TP2 logged the first launch's crash, TP4 the second launch's slow loading
    _, cut, _ = diagnosis(capsys, monkeypatch, TWO, "--rank", "tp2")
    assert "SGL401" in {f["code"] for f in cut["findings"]} and "SGL503" not in {f["code"] for f in cut["findings"]}


def test_a_window_with_no_line_says_so(capsys, monkeypatch):
    code, out, err = sglog(capsys, monkeypatch, "diagnose", str(TWO), "--since", "2030-01-01 00:00")
    assert code == 0 and out == "No line of the logs is in the window (since 2030-01-01 00:00:00).\n"
    assert err.startswith("sglog: 0 runs, 0 findings")


# ------------------------------------------------------------------ timeline


def timeline(capsys, monkeypatch, log: Path, *args: str) -> list[dict]:
    code, out, _ = sglog(capsys, monkeypatch, "timeline", str(log), "-f", "jsonl", *args)
    assert code == 0
    return [json.loads(line) for line in out.splitlines()]


def test_timeline_aggregates_the_batch_lines_in_the_window(capsys, monkeypatch):
    whole = timeline(capsys, monkeypatch, SERVING)
    cut = timeline(capsys, monkeypatch, SERVING, "--since", "09:24:05", "--until", "2026-02-27 09:25:00")
    decodes = rows_of(capsys, monkeypatch, SERVING, "-k", "decode_batch", "--since", "09:24:05", "--until", "2026-02-27 09:25:00")
    assert 0 < len(cut) < len(whole)
    assert all("2026-02-27 09:24:00" <= w["window_start"] <= "2026-02-27 09:25:00" for w in cut)
    assert sum(w["n_decode"] for w in cut) == len(decodes) > 0  # (the same lines as events picks)
    first = next(w for w in whole if w["window_start"] == "2026-02-27 09:24:00")
    assert next(w for w in cut if w["window_start"] == "2026-02-27 09:24:00")["n_decode"] < first["n_decode"]  # (09:24:00-09:24:04 left out)


@pytest.mark.slow
def test_timeline_of_one_rank(capsys, monkeypatch):
    decodes = rows_of(capsys, monkeypatch, DP4, "-k", "decode_batch")
    per_rank = {r["rank"] for r in decodes}
    assert len(per_rank) == 4
    total = sum(w["n_decode"] for w in timeline(capsys, monkeypatch, DP4))
    counts = {dp: sum(w["n_decode"] for w in timeline(capsys, monkeypatch, DP4, "--rank", dp)) for dp in ("DP0", "DP1", "DP2", "DP3")}
    assert counts == {dp: sum(1 for r in decodes if dp in r["rank"].split()) for dp in counts}
    assert all(counts.values()) and sum(counts.values()) == total
    assert sum(w["n_decode"] for w in timeline(capsys, monkeypatch, DP4, "--rank", "DP0,DP1")) == counts["DP0"] + counts["DP1"]


def test_timeline_keeps_the_run_numbers_of_the_whole_logs(capsys, monkeypatch):
    cut = timeline(capsys, monkeypatch, TWO, "--since", "2026-02-27 08:18:00")
    assert cut and {w["run"] for w in cut} == {2}  # (run 1 ends before: run 2 is still run 2)


# ------------------------------------------------------------------ events


def test_a_line_without_a_time_is_at_the_time_of_the_line_before_it(capsys, monkeypatch):
    rows = rows_of(capsys, monkeypatch, TWO)
    since = "2026-02-27 08:18:26"
    kept = rows_of(capsys, monkeypatch, TWO, "--since", since)
    last, expected = None, []
    for r in rows:  # (one file, in line order)
        last = r["ts"] or last
        if last is not None and last >= since:
            expected.append(r["line"])
    assert [r["line"] for r in kept] == expected
    assert any(r["ts"] is None for r in kept)  # (untimed lines after 08:18:26: progress bars, blanks)
    assert all(r["ts"] is None or r["ts"] >= since for r in kept)


# ------------------------------------------------------------------ bad values, help


@pytest.mark.parametrize("command", ["diagnose", "timeline", "events"])
@pytest.mark.parametrize(
    "args, message",
    [
        (("--since", "yesterday"), "--since 'yesterday': give a time as"),
        (("--until", "25:00"), "--until '25:00': give a time as"),
        (("--rank", "foo"), "--rank 'foo': give a rank as an axis and a number"),
        (("--rank", "TP"), "--rank 'TP': give a rank"),
        (("--since", "10:00", "--until", "09:00"), "--since '10:00' is after --until '09:00'"),
    ],
)
def test_bad_values_are_one_line_and_exit_2(capsys, monkeypatch, command, args, message):
    code, out, err = sglog(capsys, monkeypatch, command, str(TWO), *args)
    assert code == 2 and out == ""
    assert err.count("\n") == 1 and err.startswith(f"sglog: error: {message}")


@pytest.mark.parametrize("command", ["diagnose", "timeline", "events"])
@pytest.mark.parametrize("columns", ["80", "120"])
def test_help_names_the_window_options_with_an_example(capsys, monkeypatch, command, columns):
    monkeypatch.setenv("COLUMNS", columns)
    code, out, _ = sglog(capsys, monkeypatch, command, "--help")
    assert code == 0 and all(len(line) <= int(columns) for line in out.splitlines())
    for option in ("--since TIME", "--until TIME", "--rank RANK"):
        assert option in out
    example = out.split("Examples:", 1)[1]
    assert "--since" in example and "--rank" in example
