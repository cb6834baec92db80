"""Chart specs (Vega-Lite, built with altair) for a post-mortem, and their PNG/SVG renderings.

The builders are pure: report data in, a spec dict out, the same dict for the
same input (snapshotted as JSON).  Rendering goes through vl-convert, which
needs neither a browser nor the network.

* ``startup``: a Gantt chart of the startup phases (one row per phase, or one
  row per rank for multi-rank runs), seconds since launch (since the log's first
  line when the launch is not in it); none for a run whose startup lines span no
  time (a bar would be drawn out of nothing).
* ``memory``: the GPU memory budget as a waterfall, free memory at weight load
  -> weights -> draft -> KV cache -> CUDA graphs -> free, with the static pool
  (``mem_fraction_static`` x total) drawn as a line.
* ``serving``: aggregated windows (never more than ~500 per run): decode
  throughput, running / queued requests, KV token usage, CUDA-graph coverage
  and, for speculative runs, accept length; retractions marked.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from types import ModuleType
from typing import TYPE_CHECKING, Any

from sglog.report.model import Report, Subject

if TYPE_CHECKING:
    import altair

    from sglog.runs.build import Run

WIDTH = 640
PHASE_LABELS = {
    "distributed_init": "distributed init",
    "weight_load": "weight load",
    "kv_pool": "KV cache pool",
    "cuda_graph_capture": "CUDA graph capture",
    "draft_weight_load": "draft weight load",
    "draft_kv_pool": "draft KV cache pool",
    "draft_cuda_graph_capture": "draft CUDA graph capture",
}
RUN_COLORS = ("#4c78a8", "#f58518")


def _alt() -> ModuleType:
    """altair, imported when a chart is drawn (its import is slow); its charts are then untyped."""
    import altair as alt

    return alt


def _r(x: float | None, nd: int = 3) -> float | None:
    return None if x is None else round(float(x), nd)


def _subtitle(report: Report) -> list[str]:
    return [s.title for s in report.subjects]


def crash_point(s: Subject) -> tuple[datetime, str] | None:
    """When a crashed run died (its root cause's time, else the log's last) and the exception's name."""
    e = s.run.ending
    if e is None or e.status != "crashed":
        return None
    rc = e.root_cause
    at = (rc.ts if rc is not None else None) or e.last_ts
    if at is None:
        return None
    return at, str((rc.get("exc_type") or rc.kind) if rc is not None else "unknown cause")[:80]


# ------------------------------------------------------------------ startup


def launch_in_log(run: Run) -> bool:
    """Whether the log shows the launch (its command or the server arguments SGLang prints first):
    only then is the first line's time the launch's, and "seconds since launch" true."""
    return run.launch_command is not None or run.has("server_args")


def startup_rows(s: Subject) -> list[dict[str, Any]]:
    """One row per (rank, phase): start and end in seconds since launch (since the log's first line
    when the launch is not in it); unfinished phases run to the log's end.  ``bar_end_s`` is where
    the bar ends: at least half a second after its start, so a phase shorter than the timestamps'
    resolution still shows."""
    from sglog.runs.build import PHASES, _rank_key

    st = s.run.startup
    if st is None or not st.phases or st.launch is None:
        return []
    t0 = st.launch
    last = st.ready or (s.run.ending.last_ts if s.run.ending else None)
    rows = []
    for name in PHASES:
        ph = st.phases.get(name)
        if ph is None:
            continue
        for rank, rp in sorted(ph.per_rank.items(), key=lambda kv: _rank_key(kv[0])):
            start = rp.start or ph.start
            end = rp.end
            if start is None:
                continue
            finished = end is not None
            if end is None:
                end = last if last and last >= start else start
            a = (start - t0).total_seconds()
            b = (end - t0).total_seconds()
            rows.append(
                {
                    "run": s.label or s.run.name,
                    "rank": rank if rank != "-" else "all",
                    "phase": PHASE_LABELS.get(name, name),
                    "start_s": _r(a, 2),
                    "end_s": _r(b, 2),
                    "bar_end_s": _r(max(b, a + 0.5), 2),
                    "duration_s": _r(rp.duration if finished else b - a, 2),
                    "status": "finished" if finished else "did not finish",
                }
            )
    return rows


def crash_mark(s: Subject) -> dict[str, Any] | None:
    """A crash in seconds since launch."""
    cp, st = crash_point(s), s.run.startup
    if cp is None or st is None or st.launch is None:
        return None
    return {"run": s.label or s.run.name, "crash_s": _r((cp[0] - st.launch).total_seconds(), 2), "label": cp[1]}


def _titled(report: Report, title: str, panels: list[tuple[str, altair.LayerChart]], extra: list[str]) -> dict[str, Any]:
    """One panel per run: alone, or stacked with one shared x scale so the runs compare at a glance."""
    alt = _alt()
    sub = [] if len(panels) > 1 else _subtitle(report)  # stacked panels carry the run names
    if len(panels) == 1:
        chart = panels[0][1]
    else:
        chart = alt.vconcat(*[p.properties(title=alt.Title(label, anchor="start", fontSize=12)) for label, p in panels], spacing=24).resolve_scale(x="shared")
    return chart.properties(title=alt.Title(title, subtitle=[*sub, *extra])).to_dict()


def drawn_startup(s: Subject) -> list[dict[str, Any]]:
    """The startup rows worth a chart: none when they span no time at all (every phase begins and
    ends at the log's first second, e.g. an excerpt from just before a crash), where the bars
    would only be their minimum width stretched over the whole axis."""
    rows = startup_rows(s)
    return rows if any(max(r["start_s"], r["end_s"]) > 0 for r in rows) else []


def startup_bars(base: altair.Chart, y: Any, phases: list[str], per_rank: bool, known: bool, since: str) -> altair.Chart:
    """The phases' bars: coloured by phase, an unfinished one faded."""
    alt = _alt()
    # (one legend, the phases' colours, and only when the rows are ranks; an unfinished phase is
    # its colour faded, said in the subtitle: a legend of opacities drew grey squares like no bar)
    return base.mark_bar(height={"band": 0.7}).encode(
        x=alt.X("start_s:Q", title="seconds since launch" if known else "seconds since the log's first line", scale=alt.Scale(zero=True)),
        x2="bar_end_s:Q",
        y=y,
        color=alt.Color("phase:N", scale=alt.Scale(domain=phases), title="phase", legend=alt.Legend(orient="bottom", columns=4) if per_rank else None),
        opacity=alt.Opacity("status:O", scale=alt.Scale(domain=["finished", "did not finish"], range=[1.0, 0.35]), legend=None),
        tooltip=[
            alt.Tooltip("run:N"),
            alt.Tooltip("rank:N"),
            alt.Tooltip("phase:N"),
            alt.Tooltip("start_s:Q", title=f"start (s since {since})", format=".1f"),
            alt.Tooltip("duration_s:Q", title="duration (s)", format=".1f"),
            alt.Tooltip("status:N"),
        ],
    )


def duration_labels(base: altair.Chart, y: Any) -> altair.Chart:
    """Each phase's duration after its bar (and whether it did not finish)."""
    seconds = "(datum.duration_s >= 10 ? format(datum.duration_s, '.0f') : format(datum.duration_s, '.1f')) + ' s'"
    label = f"datum.status == 'finished' ? {seconds} : datum.duration_s > 0 ? {seconds} + ' (did not finish)' : 'did not finish'"
    return base.mark_text(align="left", dx=4, fontSize=11).encode(x="bar_end_s:Q", y=y, text="label:N").transform_calculate(label=label)


def ready_rule(s: Subject, since: str) -> tuple[altair.Chart, str] | None:
    """A green line where the server was ready, and what the subtitle says of it."""
    st = s.run.startup
    if st is None or st.total_s is None:
        return None
    alt = _alt()
    ready = {"run": s.label or s.run.name, "ready_s": _r(st.total_s, 2), "label": f"ready after {st.total_s:.0f} s"}
    rule = alt.Chart(alt.Data(values=[ready])).mark_rule(color="#2ca02c", strokeWidth=2).encode(x="ready_s:Q", tooltip=[alt.Tooltip("label:N", title="server ready")])
    return rule, f"green line: server ready {st.total_s:.0f} s after {since}"


def startup_crash_rule(s: Subject, since: str) -> tuple[altair.Chart, str] | None:
    """A red dashed line where the run crashed, and what the subtitle says of it."""
    c = crash_mark(s)
    if c is None:
        return None
    alt = _alt()
    rule = alt.Chart(alt.Data(values=[c])).mark_rule(color="#d62728", strokeWidth=2, strokeDash=[4, 2]).encode(x="crash_s:Q", tooltip=[alt.Tooltip("label:N", title="crash")])
    return rule, f"red dashed line: crashed {c['crash_s']:.0f} s after {since} ({c['label']})"


def startup_panel(s: Subject, rows: list[dict[str, Any]], phases: list[str], known: bool, who: str) -> tuple[altair.LayerChart, list[str]]:
    """One run's startup (one row per phase, or per rank, each phase's duration shown when the rows
    are phases; its ready and crash lines), and the subtitle's notes on it."""
    alt = _alt()
    ranks = list(dict.fromkeys(r["rank"] for r in rows))
    per_rank = len(ranks) > 1
    y = alt.Y("rank:N" if per_rank else "phase:N", sort=ranks if per_rank else phases, title=None, axis=alt.Axis(labelLimit=220))
    base = alt.Chart(alt.Data(values=rows))
    since = "launch" if launch_in_log(s.run) else "the log's first line"
    layers = [startup_bars(base, y, phases, per_rank, known, since)]
    if not per_rank:
        layers.append(duration_labels(base, y))
    notes = []
    if not launch_in_log(s.run):
        notes.append(f"{who}the launch is not in the log: times count from its first line")
    if any(r["status"] != "finished" for r in rows):
        notes.append(f"{who}faded bars: phases not finished when the log ends")
    for mark in (ready_rule(s, since), startup_crash_rule(s, since)):
        if mark is not None:
            layers.append(mark[0])
            notes.append(who + mark[1])
    n_rows = len(ranks) if per_rank else len({r["phase"] for r in rows})
    return alt.layer(*layers).properties(width=WIDTH, height=max(60, 24 * n_rows)), notes


def startup_chart(report: Report) -> dict[str, Any] | None:
    per_subject = [(s, rows) for s in report.subjects if (rows := drawn_startup(s))]
    if not per_subject:
        return None
    known = all(launch_in_log(s.run) for s, _ in per_subject)
    seen = {r["phase"] for _, rows in per_subject for r in rows}
    phases = [label for label in PHASE_LABELS.values() if label in seen]
    panels, extra = [], []
    for s, rows in per_subject:
        panel, notes = startup_panel(s, rows, phases, known, f"{s.label}: " if report.compare else "")
        panels.append((s.title, panel))
        extra += notes
    return _titled(report, "Startup timeline", panels, extra)


# ------------------------------------------------------------------ memory


def memory_rows(s: Subject) -> list[dict[str, Any]]:
    """Waterfall steps in GB: each item starts where the previous one ended."""
    m = s.run.memory
    if not m.total_gb:
        return []
    run = s.label or s.run.name
    rows: list[dict[str, Any]] = [{"run": run, "item": "free at weight load (T)", "start": 0.0, "end": _r(m.total_gb), "gb": _r(m.total_gb), "kind": "total"}]
    at = 0.0
    # (in SGLang's order: the static pool is the target's weights and KV cache, mem_fraction_static
    # x T; the draft model's weights and KV cache are allocated after it, then the CUDA graphs)
    for item, value in (
        ("target weights", m.target_weights_gb),
        ("KV cache", m.kv_gb),
        ("draft weights", m.draft_weights_gb),
        ("draft KV cache", m.draft_kv_gb),
        ("CUDA graphs", m.cuda_graph_gb),
        ("draft CUDA graphs", m.draft_cuda_graph_gb),
    ):
        if value is None:
            continue
        rows.append({"run": run, "item": item, "start": _r(at), "end": _r(at + value), "gb": _r(value), "kind": "static" if "graph" not in item else "graphs"})
        at += value
    if m.available_gpu_mem_gb is not None:
        free_from = m.total_gb - m.available_gpu_mem_gb
        if free_from - at > 0.005:
            rows.append({"run": run, "item": "other (activations, buffers)", "start": _r(at), "end": _r(free_from), "gb": _r(free_from - at), "kind": "other"})
        rows.append({"run": run, "item": "free after startup", "start": _r(free_from), "end": _r(m.total_gb), "gb": _r(m.available_gpu_mem_gb), "kind": "free"})
    return rows


MEMORY_ORDER = [
    "free at weight load (T)",
    "target weights",
    "KV cache",
    "draft weights",
    "draft KV cache",
    "CUDA graphs",
    "draft CUDA graphs",
    "other (activations, buffers)",
    "free after startup",
]
KIND_COLORS = {"total": "#bab0ac", "static": "#4c78a8", "graphs": "#72b7b2", "other": "#eeca3b", "free": "#54a24b"}


def memory_bars(base: altair.Chart, y: Any, kinds: list[str]) -> altair.Chart:
    """The waterfall's bars, coloured by kind of item."""
    alt = _alt()
    return base.mark_bar(height={"band": 0.7}).encode(
        x=alt.X("start:Q", title="memory per rank (GB)", scale=alt.Scale(zero=True)),
        x2="end:Q",
        y=y,
        color=alt.Color("kind:N", scale=alt.Scale(domain=kinds, range=[KIND_COLORS[k] for k in kinds]), legend=None),
        tooltip=[alt.Tooltip("run:N"), alt.Tooltip("item:N"), alt.Tooltip("gb:Q", title="GB", format=".2f"), alt.Tooltip("start:Q", format=".2f"), alt.Tooltip("end:Q", format=".2f")],
    )


def static_pool_layers(s: Subject) -> list[altair.Chart]:
    """The static pool (mem_fraction_static x T) as a red dashed line, labelled on the side with room."""
    m = s.run.memory
    pool_gb, total_gb, fraction = m.static_pool_gb, m.total_gb, m.mem_fraction_static
    if pool_gb is None or total_gb is None or fraction is None:  # (a pool is known only with both)
        return []
    alt = _alt()
    origin = f", {m.mem_fraction_static_origin}" if m.mem_fraction_static_origin else ""
    pool = {
        "run": s.label or s.run.name,
        "gb": _r(pool_gb),
        "label": f"static pool {fraction:g} × {total_gb:.2f} = {pool_gb:.2f} GB (mem_fraction_static{origin})",
    }
    right = pool_gb > 0.5 * total_gb
    marks = alt.Chart(alt.Data(values=[pool]))
    return [
        marks.mark_rule(color="#d62728", strokeWidth=2, strokeDash=[6, 3]).encode(x="gb:Q", tooltip=[alt.Tooltip("label:N", title="static pool")]),
        marks.mark_text(align="right" if right else "left", baseline="bottom", dx=-4 if right else 4, dy=-3, color="#d62728", fontSize=11).encode(x="gb:Q", y=alt.value(0), text="label:N"),
    ]


def memory_note(s: Subject) -> str | None:
    """For a run that ended before serving: its later items were never allocated."""
    e = s.run.ending
    if e is None or e.status not in ("crashed", "incomplete") or e.phase == "serving":
        return None
    return f"{'crashed' if e.status == 'crashed' else 'log ends'} during {PHASE_LABELS.get(e.phase or '', e.phase or 'startup')}: later items were never allocated"


def memory_chart(report: Report) -> dict[str, Any] | None:
    alt = _alt()
    all_rows = [r for s in report.subjects for r in memory_rows(s)]
    items = [i for i in MEMORY_ORDER if any(r["item"] == i for r in all_rows)]
    kinds = [k for k in KIND_COLORS if any(r["kind"] == k for r in all_rows)]
    panels, extra = [], []
    for s in report.subjects:
        rows = memory_rows(s)
        if not rows:
            continue
        base = alt.Chart(alt.Data(values=rows))
        y = alt.Y("item:N", sort=items, title=None, axis=alt.Axis(labelLimit=220))
        labels = base.mark_text(align="left", dx=4, fontSize=11).encode(x="end:Q", y=y, text="label:N").transform_calculate(label="format(datum.gb, '.2f') + ' GB'")
        layers = [memory_bars(base, y, kinds), labels, *static_pool_layers(s)]
        if (note := memory_note(s)) is not None:
            extra.append((f"{s.label}: " if report.compare else "") + note)
        panels.append((s.title, alt.layer(*layers).properties(width=WIDTH, height=26 * len(items))))
    if not panels:
        return None
    return _titled(report, "Memory budget (per rank; minimum free, maximum used across ranks)", panels, extra)


# ------------------------------------------------------------------ serving


def serving_rows(s: Subject, every: str) -> tuple[list[dict[str, Any]], datetime | None]:
    """Aggregated windows of one run; ``t`` = seconds since its first window (returned too)."""
    from sglog import timeline

    w = timeline.windows(s.run, every)
    if w.height == 0:
        return [], None
    t0 = w.get_column("window_start").min()
    if not isinstance(t0, datetime):  # (windows with no start: nothing to place on a time axis)
        return [], None
    rows = []
    for d in w.iter_rows(named=True):
        rows.append(
            {
                "run": s.label or s.run.name,
                "t": (d["window_start"] - t0).total_seconds(),
                "time": d["window_start"].strftime("%Y-%m-%d %H:%M:%S"),
                "decode_p10": _r(d["decode_tps_p10"], 2),
                "decode_p50": _r(d["decode_tps_p50"], 2),
                "decode_p90": _r(d["decode_tps_p90"], 2),
                "prefill_p50": _r(d["prefill_tps_p50"], 1),
                "running": d["running_max"],
                "queue": d["queue_max"],
                "token_usage": _r(d["token_usage_mean"], 4),
                "cuda_graph": _r(d["cuda_graph_share"], 4),
                "accept_len": _r(d["accept_len_mean"], 3),
                "retractions": int(d["retractions"] or 0),
            }
        )
    return rows, t0


def serving_crash(s: Subject, t0: datetime | None) -> dict[str, Any] | None:
    """A crash while serving, in seconds since the first window."""
    cp = crash_point(s)
    e = s.run.ending
    if t0 is None or cp is None or e is None or e.phase != "serving":
        return None
    return {"run": s.label or s.run.name, "t": (cp[0] - t0).total_seconds(), "time": cp[0].strftime("%Y-%m-%d %H:%M:%S"), "label": cp[1]}


def time_unit(span_s: float) -> tuple[str, float]:
    """Axis unit for a time span: seconds up to 3 minutes, minutes up to 6 hours, then hours."""
    return ("hours", 3600.0) if span_s > 6 * 3600 else ("minutes", 60.0) if span_s > 180 else ("seconds", 1.0)


def _has(rows: list[dict[str, Any]], key: str) -> bool:
    return any(r.get(key) is not None for r in rows)


def serving_data(report: Report) -> tuple[list[dict[str, Any]], list[dict[str, Any]], str]:
    """Every run's windows and crashes while serving, ``t`` in the unit of the longest span (returned too)."""
    rows: list[dict[str, Any]] = []
    crashes: list[dict[str, Any]] = []
    for s in report.subjects:
        got, t0 = serving_rows(s, report.window)
        rows += got
        if (c := serving_crash(s, t0)) is not None:
            crashes.append(c)
    if not rows:
        return [], [], "seconds"
    unit, div = time_unit(max(r["t"] for r in rows + crashes))
    return [r | {"t": _r(r["t"] / div, 4)} for r in rows], [c | {"t": _r(c["t"] / div, 4)} for c in crashes], unit


@dataclass(frozen=True)
class ServingLook:
    """What the serving panels share: the runs' colours (``first_color`` the same, carrying the one
    legend of the runs when comparing: the first panel's), the window's tooltip, whether each window
    is drawn as a point (few windows), and the crash rule (none when no run crashed while serving)."""

    color: Any
    first_color: Any
    tip_time: list[Any]
    points: bool
    compare: bool
    crash: Any


def serving_look(report: Report, rows: list[dict[str, Any]], crashes: list[dict[str, Any]]) -> ServingLook:
    """The encodings and marks every panel of this report's serving chart draws with."""
    alt = _alt()
    runs = [s.label or s.run.name for s in report.subjects]
    run_scale = alt.Scale(domain=runs, range=list(RUN_COLORS[: len(runs)]))
    color = alt.Color("run:N", scale=run_scale, title="run", legend=None)
    legend = alt.Legend(orient="right", symbolType="stroke", symbolOpacity=1, symbolStrokeWidth=3)
    return ServingLook(
        color=color,
        first_color=alt.Color("run:N", scale=run_scale, title="run", legend=legend) if report.compare else color,
        tip_time=[alt.Tooltip("run:N"), alt.Tooltip("time:N", title="window start")],
        points=len(rows) <= 150 * len(runs),
        compare=report.compare,
        crash=serving_crash_rule(crashes),
    )


def serving_crash_rule(crashes: list[dict[str, Any]]) -> altair.Chart | None:
    """The crashes while serving as dark red dashed lines, with their own data."""
    if not crashes:
        return None
    alt = _alt()
    tooltip = [alt.Tooltip("run:N"), alt.Tooltip("time:N", title="crash at"), alt.Tooltip("label:N", title="cause")]
    return alt.Chart(alt.Data(values=crashes)).mark_rule(color="#7f0000", strokeWidth=2, strokeDash=[6, 3]).encode(tooltip=tooltip)


def _line(look: ServingLook, field: str, **kw: Any) -> altair.Chart:
    """A line of one field over the windows that have it."""
    alt = _alt()
    mark = {"point": alt.OverlayMarkDef(size=14)} if look.points else {}
    return alt.Chart().transform_filter(f"isValid(datum.{field})").mark_line(**mark, **kw)


def throughput_panel(rows: list[dict[str, Any]], look: ServingLook) -> altair.LayerChart | None:
    """Decode throughput (median line, p10-p90 band), else prefill throughput; the crashes marked."""
    alt = _alt()
    crash = [look.crash] if look.crash is not None else []
    note = "; dark red: crash" if crash else ""
    if _has(rows, "decode_p50"):
        tps = [alt.Tooltip(f"decode_{p}:Q", title=f"{p} tok/s", format=".1f") for p in ("p50", "p10", "p90")]
        band = alt.Chart().transform_filter("isValid(datum.decode_p50)").mark_area(opacity=0.2).encode(y="decode_p10:Q", y2="decode_p90:Q", color=look.first_color)
        mid = _line(look, "decode_p50").encode(y=alt.Y("decode_p50:Q", title="decode tok/s"), color=look.first_color, tooltip=[*look.tip_time, *tps])
        return alt.layer(band, mid, *crash).properties(title="Decode throughput per window, tok/s (line: median, band: p10–p90)" + note)
    if _has(rows, "prefill_p50"):
        tip = [*look.tip_time, alt.Tooltip("prefill_p50:Q", format=".1f")]
        pre = _line(look, "prefill_p50").encode(y=alt.Y("prefill_p50:Q", title="prefill tok/s"), color=look.first_color, tooltip=tip)
        return alt.layer(pre, *crash).properties(title="Prefill (input) throughput per window, tok/s (median)" + note)
    return None


def requests_panel(rows: list[dict[str, Any]], look: ServingLook) -> altair.Chart | None:
    """Running (solid) and queued (dashed) requests, a window's maximum; coloured by run when comparing."""
    if not (_has(rows, "running") or _has(rows, "queue")):
        return None
    alt = _alt()
    series = ["running", "queue"]
    scale = alt.Scale(domainMin=0) if any(r["running"] or r["queue"] for r in rows) else alt.Scale(domain=[0, 1])
    by_series = alt.Color("series:N", title=None, scale=alt.Scale(domain=series, range=["#4c78a8", "#e45756"]), legend=alt.Legend(orient="right"))
    return (
        alt.Chart()
        .transform_fold(series, as_=["series", "requests"])
        .transform_filter("isValid(datum.requests)")
        .mark_line(interpolate="step-after")
        .encode(
            y=alt.Y("requests:Q", title="requests", scale=scale),
            color=look.color if look.compare else by_series,
            strokeDash=alt.StrokeDash("series:N", title=None, scale=alt.Scale(domain=series, range=[[1, 0], [5, 3]]), legend=alt.Legend(orient="right")),
            detail="run:N",
            tooltip=[*look.tip_time, alt.Tooltip("series:N"), alt.Tooltip("requests:Q")],
        )
        .properties(title="Requests per window: running (solid) and queued (dashed), maximum")
    )


def retractions_panel(rows: list[dict[str, Any]], look: ServingLook) -> altair.Chart | None:
    """KV cache retractions per window, as bars of rules; none when there were none."""
    if not any(r["retractions"] for r in rows):
        return None
    alt = _alt()
    return (
        alt.Chart()
        .transform_filter("datum.retractions > 0")
        .mark_rule(color="#d62728", strokeWidth=2)
        .encode(
            y=alt.Y("retractions:Q", title="retractions", scale=alt.Scale(zero=True)),
            y2=alt.datum(0),
            detail="run:N",
            tooltip=[*look.tip_time, alt.Tooltip("retractions:Q", title="KV retractions")],
        )
        .properties(title="KV cache retractions per window (requests pushed back because the KV pool was full)", height=70)
    )


def token_usage_panel(rows: list[dict[str, Any]], look: ServingLook) -> altair.Chart | None:
    if not _has(rows, "token_usage"):
        return None
    alt = _alt()
    return (
        _line(look, "token_usage")
        .encode(
            y=alt.Y("token_usage:Q", title="KV token usage", axis=alt.Axis(format="%"), scale=alt.Scale(domain=[0, 1])),
            color=look.color,
            tooltip=[*look.tip_time, alt.Tooltip("token_usage:Q", title="token usage", format=".1%")],
        )
        .properties(title="KV cache token usage (mean per window)")
    )


def cuda_graph_panel(rows: list[dict[str, Any]], look: ServingLook) -> altair.Chart | None:
    if not _has(rows, "cuda_graph"):
        return None
    alt = _alt()
    return (
        _line(look, "cuda_graph", interpolate="step-after")
        .encode(
            y=alt.Y("cuda_graph:Q", title="on CUDA graph", axis=alt.Axis(format="%", tickCount=3), scale=alt.Scale(domain=[0, 1])),
            color=look.color,
            tooltip=[*look.tip_time, alt.Tooltip("cuda_graph:Q", title="decode batches on CUDA graph", format=".0%")],
        )
        .properties(title="CUDA-graph coverage: share of decode batches run as a captured graph", height=70)
    )


def accept_len_panel(rows: list[dict[str, Any]], look: ServingLook) -> altair.Chart | None:
    if not _has(rows, "accept_len"):
        return None
    alt = _alt()
    return (
        _line(look, "accept_len")
        .encode(
            y=alt.Y("accept_len:Q", title="accept length (tokens)", scale=alt.Scale(zero=True)),
            color=look.color,
            tooltip=[*look.tip_time, alt.Tooltip("accept_len:Q", title="accept length", format=".2f")],
        )
        .properties(title="Speculative decoding: mean accept length per window (tokens)")
    )


# the serving chart's panels, top to bottom: each builds one, or None when the runs have nothing for it
SERVING_PANELS = (throughput_panel, requests_panel, retractions_panel, token_usage_panel, cuda_graph_panel, accept_len_panel)


def on_one_x(panels: list[Any], ts: list[float], unit: str) -> list[Any]:
    """The panels on one x scale (``ts``' extent), sized; only the bottom panel carries the axis title."""
    alt = _alt()
    scale = alt.Scale(domain=[min(ts), max(ts)], nice=False)
    sized = []
    for i, p in enumerate(panels):
        last = i == len(panels) - 1
        p = p.encode(x=alt.X("t:Q", title=f"{unit} since the first batch line" if last else None, scale=scale))
        sized.append(p.properties(width=WIDTH, height=p.height if isinstance(p.height, int) else 120))
    return sized


def serving_chart(report: Report) -> dict[str, Any] | None:
    alt = _alt()
    rows, crashes, unit = serving_data(report)
    if not rows:
        return None
    look = serving_look(report, rows, crashes)
    panels = [p for build in SERVING_PANELS if (p := build(rows, look)) is not None]
    sized = on_one_x(panels, [r["t"] for r in rows + crashes], unit)
    title = alt.Title(f"Serving, aggregated in {report.window} windows", subtitle=_subtitle(report), anchor="start")
    chart = alt.vconcat(*sized, data=alt.Data(values=rows), spacing=16).properties(title=title)
    chart = chart.resolve_scale(color="independent").resolve_legend(color="independent", strokeDash="independent").configure_title(anchor="start")
    return chart.to_dict()


# ------------------------------------------------------------------ all charts, rendering

CHARTS = (("startup", startup_chart), ("memory", memory_chart), ("serving", serving_chart))


def chart_specs(report: Report) -> dict[str, dict[str, Any]]:
    """name -> Vega-Lite spec, for the charts this report has data for (in report order)."""
    out = {}
    for name, build in CHARTS:
        spec = build(report)
        if spec is not None:
            out[name] = spec
    return out


def to_png(spec: dict[str, Any], scale: float = 2.0) -> bytes:
    """PNG at twice the CSS size (sharp on high-density screens); no URL may be fetched."""
    import vl_convert as vlc

    return vlc.vegalite_to_png(spec, scale=scale, allowed_base_urls=[])


def to_svg(spec: dict[str, Any]) -> str:
    import vl_convert as vlc

    return vlc.vegalite_to_svg(spec, allowed_base_urls=[])
