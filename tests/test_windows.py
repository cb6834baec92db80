"""Findings in time: the timeline's windows (sglog/timeline.py), the reader's request numbers, and
the SGL6xx rules on whole logs (a realistic multi-rank log with a collapse put in, the healthy
real logs, the story logs).  Each rule's small cases are in tests/rules/<name>.cases."""

from __future__ import annotations

import re
import sys
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest

import sglog
from conftest import ROOT
from sglog import schema, timeline
from sglog.events import to_request_meta
from sglog.rules import choose, get_rule

T0 = datetime(2026, 2, 23, 10, 0, 0)


def frame(values: list[float], every_s: float = 20, start: datetime = T0, dated: bool = True) -> pl.DataFrame:
    n = len(values)
    return pl.DataFrame(
        {
            "line": list(range(1, n + 1)),
            "file": ["x.log"] * n,
            "ts": [start + timedelta(seconds=every_s * i) for i in range(n)] if dated else [None] * n,
            "v": values,
        },
        schema={"line": pl.Int64, "file": pl.String, "ts": pl.Datetime("ms"), "v": pl.Float64},
    )


# ------------------------------------------------------------------ axis, width, windows


def test_axis_is_time_with_timestamps_and_lines_without():
    assert timeline.series_axis(frame([1.0] * 10)) == "time"
    assert timeline.series_axis(frame([1.0] * 10, dated=False)) == "line"
    mostly = frame([1.0] * 10).with_columns(pl.when(pl.col("line") == 1).then(None).otherwise(pl.col("ts")).alias("ts"))
    assert timeline.series_axis(mostly) == "time"  # one row in ten without a time
    assert timeline.series_axis(pl.DataFrame()) == "line"


@pytest.mark.parametrize(("minutes", "width"), [(5, 60), (80, 300), (70, 180), (600, 600), (3000, 600)])
def test_time_width_is_the_span_over_24_rounded_up_to_a_round_width(minutes, width):
    f = frame([1.0, 1.0], every_s=minutes * 60)
    assert timeline.series_width(f, "time") == width
    assert timeline.series_width(f, "time", width=42) == 42


def test_line_width_is_the_span_of_lines_over_24():
    assert timeline.series_width(frame([1.0] * 240, dated=False), "line") == 10
    assert timeline.series_width(frame([1.0] * 7, dated=False), "line") == 1


def test_windows_aggregate_their_rows():
    values = [3.0] * 15 + [3.2] * 15 + [1.0] * 15 + [1.4] * 15  # 20 minutes, a row every 20 s
    sw = timeline.series_windows(frame(values), [pl.col("v").median().alias("value")], width=300)
    w = sw.frame
    assert sw.axis == "time" and sw.width == 300 and sw.origin == T0 and sw.last == T0 + timedelta(seconds=20 * 59)
    assert list(w.columns[: len(schema.SERIES_COLUMNS)]) == list(schema.SERIES_COLUMNS)
    assert w.get_column("window").to_list() == [0, 1, 2, 3]
    assert w.get_column("n").to_list() == [15, 15, 15, 15]
    assert w.get_column("value").to_list() == [3.0, 3.2, 1.0, 1.4]
    assert w.get_column("line_start").to_list() == [1, 16, 31, 46]
    assert w["t_start"][1] == T0 + timedelta(minutes=5) and w["t_end"][1] == T0 + timedelta(minutes=5, seconds=280)


def test_windows_by_line_without_timestamps_and_on_another_frames_grid():
    sw = timeline.series_windows(frame([2.0] * 30 + [4.0] * 30, dated=False), [pl.col("v").mean().alias("value")], width=None)
    assert sw.axis == "line" and sw.width == 3
    assert sw.frame.height == 20 and sw.frame["t_start"].null_count() == 20
    assert sw.frame.get_column("value").to_list() == [2.0] * 10 + [4.0] * 10
    # a second frame on the first one's grid: the same window numbers for the same lines
    other = frame([1.0] * 6, dated=False).with_columns((pl.col("line") * 10).alias("line"))
    on = timeline.series_windows(other, [pl.col("v").sum().alias("s")], grid=sw)
    assert on.frame.get_column("window").to_list() == [3, 6, 9, 13, 16, 19]


def test_gaps_leave_no_window_and_null_times_are_dropped_on_the_time_axis():
    f = pl.concat([frame([1.0] * 15), frame([2.0] * 15, start=T0 + timedelta(hours=2))])
    f = f.with_columns(pl.int_range(1, f.height + 1).alias("line"))
    f = pl.concat([f, pl.DataFrame({"line": [99], "file": ["x.log"], "ts": [None], "v": [50.0]}, schema=f.schema)])
    w = timeline.series_windows(f, [pl.col("v").max().alias("top")], width=300).frame
    assert w.get_column("window").to_list() == [0, 24]
    assert w.get_column("top").to_list() == [1.0, 2.0]


# ------------------------------------------------------------------ levels and changes


def test_earlier_levels():
    v = pl.Series([3.0, 3.2, 3.1, 1.0, 1.1])
    assert timeline.earlier_median(v).to_list() == [None, 3.0, 3.1, 3.1, 3.05]
    assert timeline.earlier_mean(pl.Series([0.0, 0.0, 6.0, 3.0])).to_list() == [None, 0.0, 0.0, 2.0]
    best = timeline.earlier_best(pl.Series([100.0, 900.0, 100.0, 800.0, 800.0, 300.0]), pl.Series([10.0, 40.0, 10.0, 30.0, 30.0, 30.0]), sustain=2)
    # one window at 900 is no held best; two at 800 are (held at load 30)
    assert best.get_column("best").to_list() == [None, None, 500.0, 500.0, 500.0, 800.0]
    assert best.get_column("best_load").to_list() == [None, None, 25.0, 25.0, 25.0, 30.0]


def test_active_span_leaves_out_ramp_up_and_tail():
    assert timeline.active_span(pl.Series([1.0, 40.0, 38.0, 41.0, 2.0, 1.0]), 0.25) == (1, 3)
    assert timeline.active_span(pl.Series([], dtype=pl.Float64), 0.25) is None


def test_first_change_needs_a_before_and_a_sustained_change():
    v = [3.0, 3.1, 3.0, 3.1, 1.4, 1.5, 1.4, 3.0]
    ref = timeline.earlier_median(pl.Series(v)).to_list()

    def crossed(k, s):
        return ref[s] is not None and v[k] <= 0.75 * ref[s]

    assert timeline.first_change(len(v), crossed, sustain=2, min_before=3) == (4, 6)
    assert timeline.first_change(len(v), crossed, sustain=4, min_before=3) is None  # three low windows, not four
    assert timeline.first_change(len(v), crossed, sustain=2, min_before=5) is None  # too little before the change
    spike = [3.0, 3.0, 3.0, 3.0, 1.0, 3.0, 3.0]
    assert timeline.first_change(len(spike), lambda k, s: spike[k] < 2, sustain=2, min_before=3) is None


# ------------------------------------------------------------------ the reader's numbers


def test_request_meta_numbers_and_ttft():
    out = "out={'text': 'x', 'meta_info': {'id': 'a', 'finish_reason': {'type': 'length', 'length': 8}, 'prompt_tokens': 5, 'completion_tokens': 8, 'e2e_latency': 0.41, 'request_received_ts': 100.25, 'prefill_finished_ts': 100.5}}"
    m = to_request_meta("GenerateReqInput(text='hi'), " + out)
    assert m == {"prompt_tokens": 5, "completion_tokens": 8, "e2e_latency": 0.41, "request_received_ts": 100.25, "prefill_finished_ts": 100.5, "ttft": 0.25}
    assert "length" not in m  # only the keys sglog reads
    # the request object, printed first, may quote anything: the output's meta_info is the last one
    m = to_request_meta("GenerateReqInput(text=\"'meta_info': {'ttft': 99}\"), out={'meta_info': {'e2e_latency': 2.0}}")
    assert m == {"e2e_latency": 2.0}
    assert to_request_meta('"out": {"meta_info": {"ttft": 0.7, "e2e_latency": 3.5}}')["ttft"] == 0.7
    assert "ttft" not in to_request_meta("'meta_info': {'request_received_ts': 9.0, 'prefill_finished_ts': 8.0}")
    assert to_request_meta("out={'text': 'no meta'}") == {}


def write(tmp_path: Path, lines: list[str]) -> list:
    log = tmp_path / "w.log"
    log.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return sglog.load(log)


def test_retraction_series_counts_events_and_the_gauges_rises_per_rank(tmp_path):
    pd = "Decode batch, #running-req: 64, #token: 92160, token usage: 0.22, pre-allocated usage: 0.03, #prealloc-req: 2, #transfer-req: 1, #retracted-req: {n}, cuda graph: True, gen throughput (token/s): 2811.04, #queue-req: 0"
    gauges = {"DP0 TP0": [3, 5, 5, 8, 2], "DP1 TP1": [0, 1, 0, 3, 3]}  # rises: 2 + 3 and 1 + 3 (the first value is no rise)
    lines = []
    for i in range(5):
        for rank, g in gauges.items():
            lines.append(f"[2026-02-23 10:00:{10 * i:02d} {rank}] " + pd.format(n=g[i]))
    lines.append("[2026-02-23 10:00:45 TP0] KV cache pool is full. Retract requests. #retracted_reqs: 4, #new_tokens_gained: 5632, #new_token_ratio: 0.4200 -> 0.5567")
    lines.append("[2026-02-23 10:00:46 TP0] Testing retraction. #retracted_reqs: 9, #new_tokens_gained: 5632")
    rt = timeline.retraction_series(write(tmp_path, lines)[0])
    by = dict(rt.group_by("source").agg(pl.col("retracted").sum()).iter_rows())
    assert by == {"counter": 9, "event": 4}
    assert rt.filter(pl.col("source") == "counter").get_column("retracted").sort().to_list() == [1, 2, 3, 3]


def test_request_series_reads_text_and_json_lines(tmp_path):
    finish = "Finish: obj=GenerateReqInput(rid='r{i}'), out={{'meta_info': {{'id': 'r{i}', 'e2e_latency': 2.0, 'request_received_ts': 100.0, 'prefill_finished_ts': {p}}}}}"
    lines = [
        "[2026-02-23 10:00:00] " + finish.format(i=0, p=100.4),
        '{"timestamp": "2026-02-23T10:00:05.5", "event": "request.finished", "rid": "r1", "out": {"meta_info": {"ttft": 0.9}}}',
        "[2026-02-23 10:00:06] Finish: obj=GenerateReqInput(rid='r2'), out={'meta_info': {'e2e_latency': 2.0}}",
        "[2026-02-23 10:00:07] Receive: obj=GenerateReqInput(rid='r3')",
    ]
    r = timeline.request_series(write(tmp_path, lines)[0])
    assert r.get_column("ttft").to_list() == pytest.approx([0.4, 0.9])
    assert r.get_column("ts").to_list() == [datetime(2026, 2, 23, 10, 0, 0), datetime(2026, 2, 23, 10, 0, 5, 500000)]


# ------------------------------------------------------------------ whole logs


def _generated(n: int, seed: int) -> list[str]:
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        from generate import generate_lines
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    return list(generate_lines(n, seed))


_ACCEPT = re.compile(r"accept len: [\d.]+, accept rate: [\d.]+")
_TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")


def _with_acceptance(lines: list[str], cut: datetime, before: float, after: float) -> list[str]:
    """The generated log with every decode line's accept len set: ``before`` until ``cut``, ``after`` from it."""
    out = []
    for line in lines:
        m = _TS.match(line)
        if m and "Decode batch" in line:
            a = before if datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") < cut else after
            line = _ACCEPT.sub(f"accept len: {a:.2f}, accept rate: {(a - 1) / 3:.2f}", line)
        out.append(line)
    return out


def _decode_times(lines: list[str]) -> list[datetime]:
    return [datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") for line in lines if "Decode batch" in line and (m := _TS.match(line))]


def test_a_realistic_log_healthy_for_a_long_while_then_collapsed(tmp_path):
    """The benchmark generator's TP8 EAGLE-3 log (ranks interleaved, prefill, retractions, access
    lines, a crash at the end): accept len 3.10 for its first 70% of serving, then 1.40."""
    lines = _generated(40000, 11)
    times = _decode_times(lines)
    cut = times[0] + (times[-1] - times[0]) * 0.7
    healthy = write(tmp_path, _with_acceptance(lines, cut, 3.10, 3.10))[0]
    assert not get_rule("acceptance-drop").check(healthy)
    collapsed = _with_acceptance(lines, cut, 3.10, 1.40)
    run = write(tmp_path, collapsed)[0]
    (f,) = get_rule("acceptance-drop").check(run)
    start = datetime.fromisoformat(f.details["window_start"])
    assert abs((start - cut).total_seconds()) <= 60
    assert f.details["before"] == pytest.approx(3.10) and f.details["after"] == pytest.approx(1.40)
    assert f.details["to_the_end"] and f.details["before_minutes"] >= 0.6 * (times[-1] - times[0]).total_seconds() / 60
    assert f"fell from 3.10 to 1.40 from {start:%H:%M} until the log ends" in f.message
    lines_cited = [e.line for e in f.evidence if e.line is not None]
    assert len(lines_cited) == 2 and "accept len: 1.40" in collapsed[lines_cited[1] - 1]


def _healthy_names() -> list[str]:
    text = (ROOT / "tests" / "test_diagnose_real.py").read_text(encoding="utf-8")
    block = text[text.index("HEALTHY = (") : text.index(")", text.index("HEALTHY = ("))]
    return re.findall(r'"([^"]+\.log)"', block)


@pytest.mark.parametrize("path", [ROOT / "fixtures/logs/real" / n for n in _healthy_names()] + sorted((ROOT / "fixtures/logs/story").glob("*.log")), ids=lambda p: p.name)
def test_no_change_found_in_healthy_real_logs_and_story_logs(path):
    if not path.exists():
        pytest.skip(f"{path.name} not in fixtures")
    found = [f.name for run in sglog.load(path) for r in choose(["SGL6"]) for f in r.check(run)]
    assert not found
