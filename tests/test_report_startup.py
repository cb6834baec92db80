"""The report's startup chart (issue 29, item 7): every legend entry is something drawn, and a log
whose launch is not in it says so instead of drawing a bar out of nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from conftest import LOGS
from sglog.report import chart_specs, collect, render_markdown
from sglog.report.charts import drawn_startup, launch_in_log, startup_chart, startup_rows

# the launch is not in these logs (each is a real excerpt; fixtures/logs/real/SOURCES.md):
CRASH_AT_FIRST_SECOND = LOGS / "real" / "001-glm45-air-tp2-3090-startup-oom-flashinfer-workspace.log"  # capture begins, OOM, same second
NO_LAUNCH_WITH_SPAN = LOGS / "real" / "027-deepseek-r1-4node-a100-tp32-load-weights-before-watchdog.log"  # 118 s of weight loading
ENDS_MID_STARTUP = LOGS / "constructed" / "ends-mid-startup.log"  # launched; weight loading never ends
SERVING = LOGS / "story" / "baseline-cgbs128.log"  # launched, ready, serving


def report(*logs: Path, compare: Path | None = None):
    return collect([str(p) for p in logs], compare=[str(compare)] if compare else None)


def _layers(spec: dict[str, Any]):
    """Every unit chart of a spec (layers inside vconcat panels)."""
    stack = [spec]
    while stack:
        node = stack.pop()
        if isinstance(node, dict):
            if "mark" in node:
                yield node
            for key in ("layer", "vconcat", "hconcat", "concat"):
                stack.extend(node.get(key, []))


def _legends(spec: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(channel, encoding) of every encoding that draws a legend (a field on a legend channel
    whose legend is not switched off)."""
    out = []
    for unit in _layers(spec):
        for channel, enc in (unit.get("encoding") or {}).items():
            if channel in ("color", "fill", "stroke", "opacity", "fillOpacity", "shape", "size", "strokeDash") and isinstance(enc, dict) and "field" in enc:
                if enc.get("legend", {}) is not None:
                    out.append((channel, enc))
    return out


def _values(spec: dict[str, Any]) -> list[dict[str, Any]]:
    """The rows the spec draws (inline, or in its named datasets, as altair writes them)."""
    named = spec.get("datasets") or {}
    rows, stack = [], [spec]
    while stack:
        node = stack.pop()
        data = node.get("data") or {}
        rows += data.get("values") or named.get(data.get("name"), [])
        for key in ("layer", "vconcat", "hconcat", "concat"):
            stack.extend(node.get(key, []))
    return rows


@pytest.mark.parametrize("log", [ENDS_MID_STARTUP, SERVING, NO_LAUNCH_WITH_SPAN, LOGS / "real" / "018-laguna-nvfp4-dflash-gb10-aborted-during-weight-load.log"])
def test_every_legend_entry_is_drawn(log):
    spec = startup_chart(report(log))
    assert spec is not None
    drawn_phases = {row["phase"] for row in _values(spec) if "phase" in row}
    legends = _legends(spec)
    # the phases' colours are the only legend; its entries are the phases drawn, each in the colour drawn
    assert all(channel == "color" and enc["field"] == "phase" for channel, enc in legends), legends
    for _, enc in legends:
        assert set(enc["scale"]["domain"]) == drawn_phases
    # an unfinished phase is drawn faded, and the subtitle (not a grey legend square) says what fading means
    faded = any(row.get("status") == "did not finish" for row in _values(spec))
    subtitle = " ".join(spec["title"]["subtitle"])
    assert ("faded bars: phases not finished when the log ends" in subtitle) == faded
    assert faded == (log != SERVING)


def test_compared_runs_share_one_legend_of_the_phases_of_both():
    spec = startup_chart(report(SERVING, compare=ENDS_MID_STARTUP))
    domains = {tuple(enc["scale"]["domain"]) for _, enc in _legends(spec)}
    assert len(domains) == 1 and set(next(iter(domains))) == {row["phase"] for row in _values(spec) if "phase" in row}


def test_a_log_whose_startup_spans_no_time_gets_no_bar_and_says_why():
    rep = report(CRASH_AT_FIRST_SECOND)
    (s,) = rep.subjects
    assert not launch_in_log(s.run)
    rows = startup_rows(s)
    assert rows and all(r["start_s"] == r["end_s"] == 0 for r in rows)  # (what used to fill the axis as "0.0 s")
    assert drawn_startup(s) == [] and "startup" not in chart_specs(rep)
    md = render_markdown(rep, chart_specs(rep))
    section = md.split("## Startup timeline", 1)[1].split("\n## ", 1)[0]
    assert "startup.png" not in section and "No chart: the startup lines all fall within one second" in section
    assert "| CUDA graph capture | did not finish (from +0 s) |" in section
    assert "| KV cache pool | ended at +0 s (its start is not in the log) |" in section
    assert "The launch (its command or the server arguments) is not in the log" in section
    summary = md.split("## Summary", 1)[1].split("\n## ", 1)[0]
    assert "after launch" not in summary and "It crashed during the attention backend init: " in summary  # (its frames: not the capture TP1 began)


def test_times_count_from_the_first_line_when_the_launch_is_not_in_the_log():
    rep = report(NO_LAUNCH_WITH_SPAN)
    spec = startup_chart(rep)
    bars = [u for u in _layers(spec) if u["mark"].get("type") == "bar" if isinstance(u["mark"], dict)]
    assert bars and bars[0]["encoding"]["x"]["title"] == "seconds since the log's first line"
    assert "the launch is not in the log: times count from its first line" in spec["title"]["subtitle"]
    md = render_markdown(rep, chart_specs(rep))
    assert "| phase | duration (start since the log's first line) |" in md


def test_a_launched_run_counts_from_its_launch():
    rep = report(SERVING)
    (s,) = rep.subjects
    assert launch_in_log(s.run)
    spec = startup_chart(rep)
    bars = [u for u in _layers(spec) if isinstance(u["mark"], dict) and u["mark"].get("type") == "bar"]
    assert bars[0]["encoding"]["x"]["title"] == "seconds since launch"
    subtitle = spec["title"]["subtitle"]
    assert not any("not in the log" in line for line in subtitle) and any(line.startswith("green line: server ready ") and line.endswith(" s after launch") for line in subtitle)
    # (a bar is at least half a second wide, where a phase is shorter than the timestamps' resolution)
    assert all(r["bar_end_s"] == max(r["end_s"], r["start_s"] + 0.5) for r in startup_rows(s))
    md = render_markdown(rep, chart_specs(rep))
    assert "| phase | duration (start since launch) |" in md and "is not in the log" not in md
