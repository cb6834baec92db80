"""The post-mortem as Markdown: a pure function of the report data and the chart names.

Section order: Summary, The launch, Startup timeline, Memory budget, Serving,
(Comparison), Findings, Appendix.  Everything that comes from a log goes
through sglog.report.escape; nothing here looks at the clock or the file
system, so the same input gives the same bytes.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any

from sglog.report.escape import code, code_block, inline
from sglog.report.model import Report, Subject
from sglog.schema import gb

if TYPE_CHECKING:
    from sglog.events import Event
    from sglog.findings import Finding
    from sglog.runs.build import Run

SEVERITY_MARK = {"error": "ERROR", "warning": "WARNING", "info": "INFO"}


def chart_ref(name: str, alt: str, html: bool = False, images: bool = True) -> str:
    """How Markdown shows a chart: the PNG, with the SVG linked (the HTML page draws it live).

    ``images=False`` (``report --no-images``: no PNG or SVG is written): a link to the chart's
    Vega-Lite spec, which is.
    """
    if html:
        return f"![{alt}]({name}.png)"
    if not images:
        return f"[{alt} (Vega-Lite spec; open it in a Vega editor)]({name}.vl.json)"
    return f"![{alt}]({name}.png)\n\n[{alt} (SVG)]({name}.svg)"


# ------------------------------------------------------------------ small helpers


def _table(header: list[str], rows: Iterable[list[str]], align: str | None = None) -> str:
    rows = list(rows)
    align = align or "l" * len(header)
    sep = ["---:" if a == "r" else "---" for a in align]
    out = ["| " + " | ".join(header) + " |", "| " + " | ".join(sep) + " |"]
    out += ["| " + " | ".join(r) + " |" for r in rows]
    return "\n".join(out)


def _num(x: float | None, fmt: str = ".2f", unit: str = "") -> str:
    if x is None:
        return "–"
    return f"{x:{fmt}}{unit}"


def _rate(x: float | None) -> str:
    """tok/s with the precision the size deserves."""
    if x is None:
        return "–"
    return f"{x:,.0f} tok/s" if x >= 1000 else f"{x:.1f} tok/s" if x >= 1 else f"{x:.2f} tok/s"


def _gb(x: float | None) -> str:
    return gb(x, missing="–")


def _secs(x: float | None) -> str:
    if x is None:
        return "–"
    if x >= 7200:
        return f"{x:.0f} s ({x / 3600:.1f} h)"
    if x >= 600:
        return f"{x:.0f} s ({x / 60:.1f} min)"
    return f"{x:.1f} s" if x < 100 else f"{x:.0f} s"


def _size(n: int) -> str:
    for unit, div in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n} B"


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def _par(run: Run) -> str:
    p = run.parallelism
    parts = [f"{k.upper()} {v}" for k, v in p.items() if k != "nnodes" and v and (v != 1 or k == "tp")]
    if p.get("nnodes", 1) and p.get("nnodes", 1) > 1:
        parts.append(f"{p['nnodes']} nodes")
    return ", ".join(parts) if parts else "not in the log"


def _spec(run: Run) -> str | None:
    sp = run.spec
    if not sp:
        return None
    bits = [inline(sp["algorithm"])]
    for key, label in (("num_steps", "steps"), ("eagle_topk", "top-k"), ("num_draft_tokens", "draft tokens")):
        if sp.get(key) is not None:
            bits.append(f"{label} {inline(sp[key])}")
    text = ", ".join(bits)
    if sp.get("draft_model_path"):
        text += f"; draft model {code(sp['draft_model_path'], in_table=True)}"
    return text


def _cols(report: Report) -> list[str]:
    return [f"{s.label}: {inline(s.run.name)}" if s.label else "value" for s in report.subjects]


def _by_subject(report: Report, label: str, fn: Callable[[Subject], str]) -> list[str]:
    return [label, *[fn(s) for s in report.subjects]]


# ------------------------------------------------------------------ summary


def verdict(s: Subject) -> str:
    """One phrase: how the run ended, weighed with the findings."""
    e = s.run.ending
    worst = s.findings[0].severity if s.findings else None
    if e is None:
        return "unknown"
    if e.status == "crashed":
        return "failed"
    if e.status == "incomplete":
        return "incomplete"
    if worst == "error":
        return "ran, with errors"
    if worst == "warning":
        return "ran, with problems"
    return "healthy"


def _what_happened(s: Subject) -> str:
    run = s.run
    who = code(run.model) if run.model else "an unnamed model"
    facts = []
    if run.version:
        facts.append(f"SGLang {inline(run.version)}")
    par = _par(run)
    if par != "not in the log":
        facts.append(par)
    if run.spec:
        facts.append(f"{inline(run.spec['algorithm'])} speculative decoding")
    intro = f"The log holds {_plural(s.runs_in_log, 'launch')}"
    intro += f"; this report covers launch {run.index}" if s.runs_in_log > 1 else ""
    intro += f": {who}" + (f" ({', '.join(facts)})" if facts else "") + "."
    e = run.ending
    st = run.startup
    ready_s = st.total_s if st else None
    second = ""
    if e is not None:
        if e.status == "crashed":
            second = f"It crashed during {_phase(e.phase)}"
            if st and st.launch and e.last_ts:
                from sglog.report.charts import launch_in_log

                after = (e.last_ts - st.launch).total_seconds()
                if launch_in_log(run):
                    second += f", {_secs(after)} after launch"
                elif after > 0:  # (the first line is not the launch: how long after it is unknown)
                    second += f", {_secs(after)} after the log's first line (the launch is not in the log)"
            second += f": {_cause(e.root_cause)}." if e.root_cause is not None else " (the log does not show the cause)."
        elif e.status == "incomplete":
            second = f"The log ends during {_phase(e.phase)}: the run was stopped or the log cut before the server was ready."
        else:
            second = f"It was ready after {_secs(ready_s)}" if ready_s is not None else "It was serving"
            from sglog import timeline

            d = timeline.decode_stats(run)
            if d:
                second += f" and logged {run.count('decode_batch'):,} decode batch lines, a median {_rate(d['p50'])} in steady state"
            elif run.count("prefill_batch"):
                second += f" and logged {run.count('prefill_batch'):,} prefill batch lines (no decode lines)"
            second += "; the log ends " + ("after a shutdown." if e.status == "stopped" else "while it is serving." if e.status == "serving" else "with the server ready.")
    n = {sev: sum(1 for f in s.findings if f.severity == sev) for sev in ("error", "warning", "info")}
    counts = [_plural(k, sev) for sev, k in n.items() if k]
    third = f"sglog found {', '.join(counts)}." if counts else "sglog found nothing to fix."
    return " ".join(x for x in (intro, second, third) if x)


def _phase(name: str | None) -> str:
    from sglog.report.charts import PHASE_LABELS

    if not name or name == "launch":
        return "the launch"
    if name == "serving":
        return "serving"
    return "the " + inline(PHASE_LABELS.get(name, name.replace("_", " ")))


def _cause(rc: Event) -> str:
    """The root cause's exception as a code span: type and the first line of its message."""
    if not rc.get("exc_type"):
        return f"a {inline(rc.kind.replace('_', ' '))} at line {rc.line} of {inline(_base(rc.file))}"
    msg = (rc.get("exc_message") or "").strip().split("\n", 1)[0]
    text = f"{rc.get('exc_type')}: {msg}" if msg else str(rc.get("exc_type"))
    return code(text if len(text) <= 240 else text[:237] + "...")


def _fix_text(f: Finding) -> str:
    if not f.fix:
        return "no automatic fix"
    text = inline(f.fix.summary)
    if f.fix.args:
        text += " (" + ", ".join(code(k if v is None else f"{k} {v}") + (" removed" if v is None else "") for k, v in f.fix.args.items()) + ")"
    return text


def summary(report: Report) -> str:
    out = ["## Summary", ""]
    for s in report.subjects:
        if report.compare:
            out += [f"**{s.label}** ({inline(s.run.name)}): {_what_happened(s)}", ""]
        else:
            out += [_what_happened(s), ""]
        v = verdict(s)
        lead = f"- **Verdict{' ' + s.label if s.label else ''}:** {v}"
        e = s.run.ending
        if e is not None and e.status in ("crashed", "incomplete"):
            lead += f", {'crashed' if e.status == 'crashed' else 'log ends'} during {_phase(e.phase)}"
        out.append(lead)
        if s.findings:
            top = s.findings[0]
            out.append(f"- **Top finding:** {SEVERITY_MARK.get(top.severity, top.severity)} {code(top.code)} {inline(top.name)}: {inline(top.message)}")
            out.append(f"- **Fix:** {_fix_text(top)}")
        out.append("")
    if report.compare and report.diff_verdict:
        out += [f"**Comparison:** {inline(report.diff_verdict)}", ""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------ launch


def _hardware(run: Run) -> str:
    bits = []
    dev = run.args.get("device")
    if dev:
        bits.append(f"device {inline(dev)}")
    if run.memory.total_gb:
        bits.append(f"{run.memory.total_gb:.2f} GB free per rank at weight load")
    if run.ranks:
        bits.append(
            _plural(len(run.ranks), "rank") + f" ({inline(run.ranks[0])} … {inline(run.ranks[-1])})" if len(run.ranks) > 2 else _plural(len(run.ranks), "rank") + f" ({inline(', '.join(run.ranks))})"
        )
    return "; ".join(bits) if bits else "not in the log"


def _fmt_value(v: Any) -> str:
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple)):
        return "[" + ", ".join(_fmt_value(x) for x in v) + "]"
    return str(v)


def _flags_table(run: Run) -> str:
    from sglog.read import args as sargs

    rows = []
    for fld in sorted(run.arg_origins):
        origin = run.arg_origins[fld]
        if origin not in ("explicit", "auto"):
            continue
        val = run.args.get(fld)
        if val is None:
            continue
        mark = "**auto**" if origin == "auto" else "explicit"
        text = _fmt_value(val)
        if len(text) > 120:
            text = text[:117] + "..."
        rows.append([code(sargs.flag_of(fld), in_table=True), code(text, in_table=True), mark])
    if not rows:
        return "The log has no server arguments."
    n_default = sum(1 for o in run.arg_origins.values() if o == "default")
    table = _table(["flag", "value", "set by"], rows)
    return table + f"\n\nAuto-chosen values were picked by SGLang at startup, not by the user. {n_default} further fields are at their defaults (`sglog runs -f json` lists every field)."


def launch(report: Report) -> str:
    out = ["## The launch", ""]
    rows = [
        _by_subject(report, "Model", lambda s: code(s.run.model, in_table=True) if s.run.model else "not in the log"),
        _by_subject(report, "Model class", lambda s: code(s.run.model_class, in_table=True) if s.run.model_class else "–"),
        _by_subject(report, "SGLang version", lambda s: inline(s.run.version) if s.run.version else "not told by the log"),
        _by_subject(report, "Hardware", lambda s: _hardware(s.run)),
        _by_subject(report, "Parallelism", lambda s: _par(s.run)),
        _by_subject(report, "Speculative decoding", lambda s: _spec(s.run) or "off"),
        _by_subject(
            report, "Quantization / dtype", lambda s: " / ".join(inline(_fmt_value(s.run.args.get(k))) for k in ("quantization", "dtype", "kv_cache_dtype") if s.run.args.get(k) is not None) or "–"
        ),
        _by_subject(report, "Log lines", lambda s: "; ".join(f"{inline(_base(f))} {a}–{b}" for f, (a, b) in s.run.line_ranges.items())),
    ]
    out += [_table(["", *_cols(report)], rows), ""]
    for s in report.subjects:
        out += [f"### Flags in effect{(' (' + s.label + ')') if s.label else ''}", "", _flags_table(s.run), ""]
        out += [f"### Relaunch with the fixes applied{(' (' + s.label + ')') if s.label else ''}", ""]
        rl = s.relaunch
        if rl is None:
            out += ["The log has neither a launch command nor server arguments to rebuild one from.", ""]
            continue
        how = "the logged launch command" if rl.source == "launch command" else "the server arguments (the log has no launch command; auto-chosen values are left for SGLang to choose again)"
        out += [f"Rebuilt from {how}.", ""]
        if rl.changes:
            rows = [
                [
                    code(c.flag, in_table=True),
                    code(_fmt_value(c.before), in_table=True) + (f" ({inline(c.before_origin)})" if c.before_origin and c.before_origin != "explicit" else "") if c.before is not None else "unset",
                    "removed" if c.after is None else code(_fmt_value(c.after), in_table=True),
                    inline(c.source),
                ]
                for c in rl.changes
            ]
            out += [_table(["flag", "was", "becomes", "from finding"], rows), ""]
        for note in rl.notes:
            out += [f"- {inline(note)}"]
        if rl.notes:
            out.append("")
        out += [code_block(" \\\n".join(rl.lines), "bash"), ""]
    return "\n".join(out).rstrip() + "\n"


def _base(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1]


# ------------------------------------------------------------------ startup


def startup(report: Report, charts: dict[str, Any], html: bool = False, images: bool = True) -> str:
    from sglog.report.charts import PHASE_LABELS, launch_in_log
    from sglog.runs.build import PHASES

    out = ["## Startup timeline", ""]
    if not any(s.run.startup and s.run.startup.phases for s in report.subjects):
        return "\n".join(out + ["The log has no startup lines (it starts after the server was up, or was cut).", ""])
    if "startup" in charts:
        out += [chart_ref("startup", "Startup timeline", html, images), ""]
    else:  # (charts.drawn_startup: a bar of no length would fill the axis)
        out += ["No chart: the startup lines all fall within one second of the log's first line, so there is no span of time to draw.", ""]
    rows = []
    for name in PHASES:
        cells = [PHASE_LABELS[name]]
        present = False
        for s in report.subjects:
            st = s.run.startup
            ph = st.phases.get(name) if st else None
            if st is None or ph is None:
                cells.append("–")
                continue
            present = True
            t0 = st.launch
            extra = ""
            if len(ph.per_rank) > 1 and ph.skew:
                extra = f"; slowest {inline(ph.slowest_rank)}, spread {ph.skew:.1f} s"
            if ph.start is None and ph.end is not None and t0:  # (its begin line is not in the log)
                cells.append(f"ended at +{(ph.end - t0).total_seconds():.0f} s (its start is not in the log{extra})")
                continue
            at = f"+{(ph.start - t0).total_seconds():.0f} s" if ph.start and t0 else "?"
            dur = _secs(ph.duration) if ph.complete else "did not finish"
            cells.append(f"{dur} (from {at}{extra})")
        if present:
            rows.append(cells)

    def ready(s: Subject) -> str:
        total = s.run.startup.total_s if s.run.startup else None
        if total is None:
            return "not ready"
        return _secs(total) if launch_in_log(s.run) else f"over {_secs(total)} (ready {_secs(total)} after the log's first line)"

    rows.append(["launch → ready", *[ready(s) for s in report.subjects]])
    since = "since launch" if all(launch_in_log(s.run) for s in report.subjects) else "since the log's first line"
    header = ["phase", *[f"{s.label}: duration (start)" if s.label else f"duration (start {since})" for s in report.subjects]]
    out += [_table(header, rows), ""]
    out += ["Durations are the slowest rank's (the others wait for it); with second-resolution timestamps SGLang's own `elapsed=` is used where it is longer.", ""]
    unknown = [s for s in report.subjects if not launch_in_log(s.run)]
    if unknown:
        whose = "the log" if not report.compare else " and ".join(f"{s.label}'s log" for s in unknown)
        out += [f"The launch (its command or the server arguments) is not in {whose}: times count from the log's first line, not from the launch.", ""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------ memory


def _memory_story(s: Subject) -> str | None:
    m = s.run.memory
    if not m.total_gb or m.static_pool_gb is None:
        return None
    w = (m.target_weights_gb or 0) + (m.draft_weights_gb or 0)
    pool = m.static_pool_gb
    origin = f" ({m.mem_fraction_static_origin})" if m.mem_fraction_static_origin else ""
    who = f"**{s.label}**: " if s.label else ""
    if m.target_weights_gb and m.target_weights_gb > pool:
        return (
            f"{who}the target weights alone ({m.target_weights_gb:.2f} GB) exceed the static pool of "
            f"{m.mem_fraction_static:g}{origin} × {m.total_gb:.2f} GB = {pool:.2f} GB: nothing is left for the KV cache."
        )
    if m.draft_weights_gb and w > pool and m.kv_gb is None:
        return (
            f"{who}target + draft weights ({m.target_weights_gb:.2f} + {m.draft_weights_gb:.2f} = {w:.2f} GB) exceed the static pool of "
            f"{m.mem_fraction_static:g}{origin} × {m.total_gb:.2f} GB = {pool:.2f} GB."
        )
    t, kv, d = m.target_weights_gb, m.kv_gb, m.draft_weights_gb
    if t and kv is not None:
        # (the KV line is what SGLang allocated: the prose says it, as the table does, and where
        # the draft model went; SGLang versions differ on whether the draft is inside the pool)
        text = f"{who}of the {pool:.2f} GB static pool ({m.mem_fraction_static:g}{origin} × {m.total_gb:.2f} GB), the target weights take {t:.2f} GB and the KV cache {kv:.2f} GB"
        if d:
            rest = pool - t - kv
            dkv = f"{m.draft_kv_gb:.2f} GB of KV cache" if m.draft_kv_gb else ""
            if rest >= d - 0.05:
                text += f"; the draft model's {d:.2f} GB of weights fit in the remaining {rest:.2f} GB" + (f", its {dkv} is allocated beyond it" if dkv else "")
            else:
                text += f"; the draft model's {d:.2f} GB of weights" + (f" and {dkv}" if dkv else "") + " are allocated beyond it"
        return text[0].upper() + text[1:] + "." if not who else text + "."
    if w:
        return f"{who}weights take {w:.2f} GB of the {pool:.2f} GB static pool ({m.mem_fraction_static:g}{origin} × {m.total_gb:.2f} GB); {max(pool - w, 0):.2f} GB remain for the KV cache."
    return None


def memory(report: Report, charts: dict[str, Any], html: bool = False, images: bool = True) -> str:
    out = ["## Memory budget", ""]
    if not any(s.run.memory.total_gb for s in report.subjects):
        return "\n".join(out + ["The log has no memory lines (`Load weight begin. avail mem=...`).", ""])
    if "memory" in charts:
        out += [chart_ref("memory", "Memory budget", html, images), ""]
    rows = [
        _by_subject(report, "free at weight load (T)", lambda s: _gb(s.run.memory.total_gb)),
        _by_subject(report, "target weights", lambda s: _gb(s.run.memory.target_weights_gb)),
        _by_subject(report, "draft weights", lambda s: _gb(s.run.memory.draft_weights_gb)),
        _by_subject(report, "KV cache", lambda s: _gb(s.run.memory.kv_gb) + (f" ({s.run.memory.kv_tokens:,} tokens)" if s.run.memory.kv_tokens else "")),
        _by_subject(report, "draft KV cache", lambda s: _gb(s.run.memory.draft_kv_gb)),
        _by_subject(report, "CUDA graphs", lambda s: _gb(s.run.memory.cuda_graph_gb)),
        _by_subject(report, "draft CUDA graphs", lambda s: _gb(s.run.memory.draft_cuda_graph_gb)),
        _by_subject(report, "free after startup (available_gpu_mem)", lambda s: _gb(s.run.memory.available_gpu_mem_gb)),
        _by_subject(
            report,
            "mem_fraction_static",
            lambda s: (
                (f"{s.run.memory.mem_fraction_static:g}" + (f" ({s.run.memory.mem_fraction_static_origin})" if s.run.memory.mem_fraction_static_origin else ""))
                if s.run.memory.mem_fraction_static is not None
                else "–"
            ),
        ),
        _by_subject(report, "static pool (fraction × T)", lambda s: _gb(s.run.memory.static_pool_gb)),
        _by_subject(report, "KV bytes per token", lambda s: _num(s.run.memory.bytes_per_kv_token, ",.0f", " B")),
    ]
    rows = [r for r in rows if any(c != "–" for c in r[1:])]
    out += [_table(["per rank", *_cols(report)], rows, "l" + "r" * len(report.subjects)), ""]
    for s in report.subjects:
        story = _memory_story(s)
        if story:
            out += [story[0].upper() + story[1:] if not s.label else story, ""]
    out += ["GB are GiB as SGLang prints them; the minimum across ranks for free memory and the maximum for what was used.", ""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------ serving


def serving(report: Report, charts: dict[str, Any], html: bool = False, images: bool = True) -> str:
    from sglog import timeline

    out = ["## Serving", ""]
    if not any(s.run.batches.height for s in report.subjects):
        return "\n".join(out + ["The log has no prefill or decode batch lines: the server never served, or batch logging was off.", ""])
    if "serving" in charts:
        out += [chart_ref("serving", "Serving timeline", html, images), ""]
    stats = {s.label: timeline.decode_stats(s.run) for s in report.subjects}
    pstats = {s.label: timeline.prefill_stats(s.run) for s in report.subjects}

    def st(key: str, fmt: str = ".1f", unit: str = "") -> Callable[[Subject], str]:
        return lambda s: _num(stats[s.label].get(key), fmt, unit)

    def rate(key: str) -> Callable[[Subject], str]:
        return lambda s: _rate(stats[s.label].get(key))

    def retractions(s: Subject) -> str:
        return str(sum(1 for e in s.run.events if e.kind == "retraction"))

    rows = [
        _by_subject(report, "decode batch lines", lambda s: f"{s.run.count('decode_batch'):,}"),
        _by_subject(report, "prefill batch lines", lambda s: f"{s.run.count('prefill_batch'):,}"),
        _by_subject(report, "warm-up decode lines (excluded)", lambda s: str(stats[s.label].get("warmup_rows", "–"))),
        _by_subject(report, "decode throughput p10", rate("p10")),
        _by_subject(report, "decode throughput p50", rate("p50")),
        _by_subject(report, "decode throughput p90", rate("p90")),
        _by_subject(report, "prefill throughput p50", lambda s: _rate(pstats[s.label].get("p50"))),
        _by_subject(report, "running requests p50 / max", lambda s: f"{_num(stats[s.label].get('running_p50'), '.0f')} / {_num(stats[s.label].get('running_max'), '.0f')}"),
        _by_subject(report, "queued requests p50 / max", lambda s: f"{_num(stats[s.label].get('queue_p50'), '.0f')} / {_num(stats[s.label].get('queue_max'), '.0f')}"),
        _by_subject(report, "KV token usage p50 / max", lambda s: f"{_num(stats[s.label].get('token_usage_p50'), '.0%')} / {_num(stats[s.label].get('token_usage_max'), '.0%')}"),
        _by_subject(report, "decode batches on CUDA graph", lambda s: _num(stats[s.label].get("cuda_graph_share"), ".0%")),
        _by_subject(report, "accept length mean", st("accept_len_mean", ".2f", " tokens")),
        _by_subject(report, "accept rate mean", lambda s: _num(stats[s.label].get("accept_rate_mean"), ".0%")),
        _by_subject(report, "KV retractions", retractions),
    ]
    rows = [r for r in rows if any(c not in ("–", "– / –", "0") for c in r[1:])]
    out += [_table(["steady state", *_cols(report)], rows, "l" + "r" * len(report.subjects)), ""]
    out += [
        f"Statistics are over steady-state decode lines (after warm-up, with requests running). The charts aggregate {report.window} windows so a chart has at most a few hundred points.",
        "",
    ]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------ comparison


def comparison(report: Report) -> str:
    if not report.compare:
        return ""
    out = ["## Comparison", ""]
    out.append((report.diff_markdown or "").strip())
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------ findings

EVIDENCE_MAX_LINES = 12


def _evidence(f: Finding) -> list[str]:
    out = []
    for ev in f.evidence:
        text = ev.text
        where = inline(_base(ev.file)) + (f", line {ev.line}" if ev.line is not None else "")
        if ev.note:
            out.append(f"- {where}: {inline(ev.note)}")
        else:
            out.append(f"- {where}")
        if text:
            lines = text.split("\n")
            n0 = ev.line or 0
            numbered: list[tuple[int | None, str]] = [(n0 + i, ln) for i, ln in enumerate(lines)]
            if len(numbered) > EVIDENCE_MAX_LINES:
                head, tail = numbered[:3], numbered[-(EVIDENCE_MAX_LINES - 4) :]
                numbered = [*head, (None, f"... {len(lines) - len(head) - len(tail)} lines ..."), *tail]
            width = len(str(max((n for n, _ in numbered if n is not None), default=0)))
            body = [f"{(str(n) if n is not None else '').rjust(width)} | {_cut(ln)}" if ev.line is not None else _cut(ln) for n, ln in numbered]
            out += ["", _indent(code_block(body), "  "), ""]
    return out


def _cut(line: str, limit: int = 300) -> str:
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _indent(text: str, pad: str) -> str:
    return "\n".join(pad + ln if ln else ln for ln in text.split("\n"))


def findings(report: Report) -> str:
    out = ["## Findings", ""]
    for s in report.subjects:
        if report.compare:
            out += [f"### {s.label}: {inline(s.run.name)}", ""]
        fs = s.findings
        if not fs:
            out += ["No findings: none of sglog's rules fired on this run.", ""]
            continue
        h = "####" if report.compare else "###"
        for i, f in enumerate(fs, 1):
            out += [f"{h} {i}. {SEVERITY_MARK.get(f.severity, inline(f.severity))} {code(f.code)} {inline(f.name)}", ""]
            out += [inline(f.message), ""]
            if f.evidence:
                out += ["Evidence:", ""] + _evidence(f) + [""]
            if f.fix:
                fix = _fix_text(f)
                out += [f"**Fix:** {fix}{'' if fix.endswith('.') else '.'}"]
                if f.fix.safety:
                    out += ["", f"Safety: {inline(f.fix.safety)}"]
                out.append("")
    return "\n".join(_squeeze(out)).rstrip() + "\n"


def _squeeze(lines: list[str]) -> list[str]:
    out: list[str] = []
    for ln in lines:
        if ln == "" and out and out[-1] == "":
            continue
        out.append(ln)
    return out


# ------------------------------------------------------------------ appendix


def appendix(report: Report) -> str:
    files = [f for s in report.subjects for f in s.files]
    out = ["## Appendix", "", "### Coverage", ""]
    out += [
        _table(
            ["file", "lines", "blank", "unrecognised", "coverage"],
            [[inline(f.name), f"{f.lines:,}", f"{f.blank:,}", f"{f.unparsed:,}", f"{f.coverage:.2%}"] for f in files],
            "lrrrr",
        ),
        "",
        "Coverage is the share of non-blank lines sglog recognised; unrecognised lines are kept and listed below, never dropped.",
        "",
    ]
    for f in files:
        if not f.unparsed_groups:
            continue
        out += [f"### Unrecognised lines in {inline(f.name)}", ""]
        rows = [[str(g.count), str(g.first_line), code(g.pattern, in_table=True)] for g in f.unparsed_groups]
        out += [_table(["lines", "first at", "pattern (numbers as N, hex as #)"], rows, "rrl"), ""]
        shown = sum(g.count for g in f.unparsed_groups)
        if shown < f.unparsed:
            out += [f"{f.unparsed - shown:,} more unrecognised lines in smaller groups.", ""]
    out += ["### Input files", ""]
    out += [_table(["file", "size", "compression", "sha256"], [[inline(f.name), _size(f.size), f.compression, code(f.sha256)] for f in files]), ""]
    return "\n".join(out).rstrip() + "\n"


# ------------------------------------------------------------------ the whole document


def title(report: Report, plain: bool = False) -> str:
    esc = str if plain else inline
    if report.compare:
        a, b = report.subjects
        return f"Post-mortem: {esc(a.run.name)} vs {esc(b.run.name)}"
    s = report.subjects[0]
    return f"Post-mortem: {esc(s.run.name)} ({verdict(s)})"


def render_markdown(report: Report, charts: dict[str, Any] | None = None, html: bool = False, images: bool = True) -> str:
    """The whole post-mortem; ``charts`` are the chart specs (only their names matter here).

    ``html=True``: the variant the HTML page is rendered from (no SVG links).  ``images=False``:
    no PNG or SVG exists, so the charts link their specs.
    """
    charts = charts or {}
    parts = [
        f"# {title(report)}\n",
        summary(report),
        launch(report),
        startup(report, charts, html, images),
        memory(report, charts, html, images),
        serving(report, charts, html, images),
        comparison(report),
        findings(report),
        appendix(report),
    ]
    return "\n".join(p for p in parts if p).rstrip() + "\n"
