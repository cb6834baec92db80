"""Render a ``sglog.compare.diff.DiffResult``: a rich renderable for the terminal, or Markdown text.

Both show the same sections in the same order: verdict, the two runs, launch
configuration changes, startup, memory budget, CUDA graphs, serving (steady
state, with the significance method), speculative vs baseline, findings.
Renderers return values; only the CLI writes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Group

    from sglog.compare.diff import DiffResult

PHASE_TITLES = {
    "distributed_init": "distributed init",
    "weight_load": "weight load",
    "kv_pool": "KV pool",
    "cuda_graph_capture": "CUDA graph capture",
    "draft_weight_load": "draft weight load",
    "draft_kv_pool": "draft KV pool",
    "draft_cuda_graph_capture": "draft CUDA graph capture",
}

MEMORY_ROWS = (
    ("total_gb", "free at weight load (GB)"),
    ("target_weights_gb", "weights (GB)"),
    ("draft_weights_gb", "draft weights (GB)"),
    ("avail_after_weights_gb", "free after weights (GB)"),
    ("mem_fraction_static", "mem_fraction_static"),
    ("static_pool_gb", "static pool (GB)"),
    ("kv_gb", "KV cache (GB)"),
    ("kv_tokens", "KV cache (tokens)"),
    ("draft_kv_gb", "draft KV cache (GB)"),
    ("bytes_per_kv_token", "bytes per KV token"),
    ("cuda_graph_gb", "CUDA graphs (GB)"),
    ("draft_cuda_graph_gb", "draft CUDA graphs (GB)"),
    ("available_gpu_mem_gb", "free after startup (GB)"),
    ("max_total_num_tokens", "max_total_num_tokens"),
    ("max_running_requests", "max_running_requests"),
    ("context_len", "context length"),
)

SERVING_ROWS = (
    ("decode_tok_s_per_request_median", "decode tok/s per request, median"),
    ("prefill_tok_s_median", "prefill tok/s, median"),
    ("prefill_tok_s_p90", "prefill tok/s, p90"),
    ("running_median", "running requests, median"),
    ("running_max", "running requests, max"),
    ("queue_median", "queued requests, median"),
    ("queue_max", "queued requests, max"),
    ("token_usage_median", "KV token usage, median"),
    ("token_usage_max", "KV token usage, max"),
    ("cuda_graph_share", "decode lines on CUDA graphs"),
    ("retractions", "retractions"),
    ("retracted_requests", "retracted requests"),
    ("accept_len_median", "accept length, median"),
    ("accept_rate_median", "accept rate, median"),
)


# ------------------------------------------------------------------ formatting


def fmt(x: Any) -> str:
    """A value for a table cell (no markup)."""
    if x is None:
        return "-"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, float):
        if abs(x) >= 1000:
            return f"{x:,.0f}"
        if abs(x) >= 100:
            return f"{x:.1f}"
        return f"{x:.2f}" if abs(x) >= 1 or x == 0 else f"{x:.3f}"
    if isinstance(x, int):
        return f"{x:,}" if abs(x) >= 10000 else str(x)
    if isinstance(x, (list, tuple)):
        if len(x) > 8:
            return f"[{', '.join(map(fmt, x[:4]))}, ..., {fmt(x[-1])}] ({len(x)} values)"
        return "[" + ", ".join(map(fmt, x)) + "]"
    if isinstance(x, dict):
        return ", ".join(f"{k}={fmt(v)}" for k, v in x.items())
    return str(x)


def fmt_delta(pair: dict[str, Any]) -> str:
    d = pair.get("delta")
    if d is None:
        return ""
    if d == 0:
        return "="
    s = fmt(d)
    s = s if s.startswith("-") else "+" + s
    pct = pair.get("change_pct")
    return f"{s} ({pct:+.1f}%)" if pct is not None and abs(pct) >= 0.05 else s


def _dist(d: dict[str, Any] | None) -> str:
    if not d:
        return "-"
    return f"{fmt(d['p50'])} (p10 {fmt(d['p10'])}, p90 {fmt(d['p90'])}; n={d['n']})"


# the diff's speculation finding (data: its name in JSON), as a sentence
_SPEC_FINDING = {"speculation-slower-than-baseline": "speculation is slower than the baseline"}


def _origin(c: dict[str, Any]) -> str:
    oa, ob = c.get("origin_a"), c.get("origin_b")
    if oa == ob:
        return oa or "-"
    return f"{oa or 'absent'} → {ob or 'absent'}"  # (an arrow, not "->": Markdown escapes ">")


def _sig_line(sig: dict[str, Any] | None) -> str | None:
    if not sig:
        return None
    if sig.get("p_value") is None:
        return f"Significance: {sig.get('note') or 'not computed'}."
    verdict = "real" if sig["significant"] else ("real but small" if sig["statistically_significant"] else "within the noise")
    return (
        f"Median difference B - A: {fmt(sig['median_diff'])} tok/s, {int(sig['confidence'] * 100)}% interval "
        f"[{fmt(sig['ci_low'])}, {fmt(sig['ci_high'])}], Mann-Whitney p = {sig['p_value']:.3g}, "
        f"P(B sample > A sample) = {fmt(sig['prob_b_greater'])}: {verdict}. Method: {sig['method']}; "
        f"significant = p < {sig['alpha']}, interval excludes 0 and |change| >= {sig['min_effect_pct']:g}%."
    )


def _spec_rows(s: dict[str, Any]) -> list[tuple[str, str]]:
    who = "B" if s["spec_side"] == "b" else "A"
    algo = s.get("algorithm") or "speculation"
    steps = f", {s['num_steps']} steps" if s.get("num_steps") else ""
    rows = [
        ("speculative run", f"{who} ({algo}{steps})"),
        ("decode tok/s per request (spec vs baseline)", f"{fmt(s['spec_tok_s_per_request'])} vs {fmt(s['baseline_tok_s_per_request'])}"),
        ("running requests, median (spec vs baseline)", f"{fmt(s['spec_running'])} vs {fmt(s['baseline_running'])}"),
        ("speed-up", f"{s['speedup_pct']:+.1f}%" + ("" if s["significant"] else " (not significant)")),
        ("t_base = 1 / baseline tok/s", f"{fmt(s['t_base_ms'])} ms"),
        ("t_cycle = L / spec tok/s", f"{fmt(s['t_cycle_ms'])} ms" if s.get("t_cycle_ms") is not None else "-"),
        ("break-even accept length L* = t_cycle / t_base", fmt(s["break_even_accept_len"])),
        ("achieved accept length L", fmt(s["accept_len"])),
        ("margin L - L*", (f"{s['margin']:+.2f}" if s.get("margin") is not None else "-")),
    ]
    if s.get("accept_rate") is not None:
        rows.append(("achieved accept rate (as logged)", fmt(s["accept_rate"])))
    rows.append(("verdict", _SPEC_FINDING.get(s.get("finding") or "", s.get("finding") or "-")))
    return rows


def _steps_rows(s: dict[str, Any]) -> list[tuple[str, str, str]]:
    return [
        ("draft steps", fmt(s["steps_a"]), fmt(s["steps_b"])),
        ("t_cycle = L / tok/s per request (ms)", fmt(s["t_cycle_ms_a"]), fmt(s["t_cycle_ms_b"])),
        ("fit t_cycle = fixed + per_step x steps", f"fixed {fmt(s['fixed_ms'])} ms", f"per step {fmt(s['ms_per_step'])} ms"),
        ("accept length gained per extra step", "", f"{s['accept_len_per_step']:+.3f}"),
    ]


def _memory_rows(d: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(title, A, B, change) of the memory rows either run has; the fraction with its origin."""
    rows = []
    for key, title in MEMORY_ROWS:
        p = d["memory"][key]
        if p["a"] is None and p["b"] is None:
            continue
        a, b = fmt(p["a"]), fmt(p["b"])
        if key == "mem_fraction_static":
            a += f" ({p.get('origin_a')})" if p.get("origin_a") else ""
            b += f" ({p.get('origin_b')})" if p.get("origin_b") else ""
        rows.append((title, a, b, fmt_delta(p)))
    return rows


def _run_rows(d: dict[str, Any]) -> list[tuple[str, str, str]]:
    a, b = d["a"], d["b"]

    def spec(x: dict[str, Any]) -> str:
        s = x.get("speculative")
        if not s:
            return "-"
        steps = f", {s['num_steps']} steps" if s.get("num_steps") else ""
        return f"{s.get('algorithm')}{steps}"

    def par(p: dict[str, Any]) -> str:
        return " ".join(f"{k}{v}" for k, v in p.items() if v != 1 or k == "tp") or "-"

    return [
        ("run", a["spec"], b["spec"]),
        ("model", a.get("model") or "-", b.get("model") or "-"),
        ("SGLang version", a.get("version") or "?", b.get("version") or "?"),
        ("parallelism", par(a["parallelism"]), par(b["parallelism"])),
        ("speculative decoding", spec(a), spec(b)),
        ("how it ended", a.get("ending") or "-", b.get("ending") or "-"),
    ]


# ------------------------------------------------------------------ rich


def render_rich(result: DiffResult) -> Group:
    """A rich renderable (Group of panels and tables)."""
    from rich.console import Group
    from rich.panel import Panel
    from rich.table import Table
    from rich.text import Text

    d = result.to_dict()
    parts: list[Any] = []
    style = {"faster": "green", "slower": "red", "not-comparable": "yellow", "no-data": "yellow"}.get(d["verdict"]["kind"], "")
    parts.append(Panel(Text(d["verdict"]["text"], style=style), title="sglog diff: verdict", title_align="left"))

    def table(title: str, columns: tuple[str, ...], numeric: bool = True) -> Table:
        t = Table(title=title, title_justify="left", show_lines=False)
        for i, c in enumerate(columns):
            t.add_column(c, justify="right" if (numeric and i > 0) else "left", overflow="fold")
        return t

    t = table("runs", ("", "A", "B"), numeric=False)
    for row in _run_rows(d):
        t.add_row(*row)
    parts.append(t)
    for line in d["caveats"]:
        parts.append(Text(f"note: {line}", style="yellow"))

    if not d["args_known"]:
        parts.append(Text("launch configuration: the server arguments are not in both logs"))
    elif d["config_changes"]:
        t = table("launch configuration: changed flags", ("flag", "A", "B", "origin"), numeric=False)
        for c in d["config_changes"]:
            t.add_row(c["flag"], fmt(c["a"]), fmt(c["b"]), _origin(c))
        parts.append(t)
    else:
        parts.append(Text("launch configuration: no changed flags"))

    st = d["startup"]
    if st["phases"] or st["total_s"]["a"] is not None or st["total_s"]["b"] is not None:
        t = table("startup (s, slowest rank)", ("phase", "A", "B", "change"))
        for ph in st["phases"]:
            t.add_row(PHASE_TITLES.get(ph["name"], ph["name"]), _phase_cell(ph, "a"), _phase_cell(ph, "b"), fmt_delta(ph))
        t.add_row("launch to ready", fmt(st["total_s"]["a"]), fmt(st["total_s"]["b"]), fmt_delta(st["total_s"]))
        parts.append(t)

    t = table("memory budget (per GPU; min free / max used across ranks)", ("", "A", "B", "change"))
    for memory_row in _memory_rows(d):
        t.add_row(*memory_row)
    parts.append(t)

    cg = d["cuda_graph"]
    t = table("CUDA graphs (target, decode)", ("", "A", "B"))
    t.add_row("disabled", fmt(cg["a"]["disabled"]), fmt(cg["b"]["disabled"]))
    t.add_row("cuda_graph_max_bs", fmt(cg["a"]["max_bs_arg"]), fmt(cg["b"]["max_bs_arg"]))
    t.add_row("captured batch sizes", _sizes(cg["a"]), _sizes(cg["b"]))
    parts.append(t)

    sv = d["serving"]
    t = table("serving, steady state (warm-up excluded)", ("", "A", "B", "change"))
    dec = sv["decode_tok_s"]
    t.add_row("decode tok/s, median (p10, p90)", _dist(dec["a"]), _dist(dec["b"]), fmt_delta(dec))
    for key, title in SERVING_ROWS:
        p = sv[key]
        if p["a"] is None and p["b"] is None:
            continue
        t.add_row(title, fmt(p["a"]), fmt(p["b"]), fmt_delta(p))
    parts.append(t)
    line = _sig_line(sv.get("significance"))
    if line:
        parts.append(Text(line, style="dim"))

    if d["speculation"]:
        t = table("speculative decoding vs baseline (cycle-time model, per request)", ("", "value"))
        for k, v in _spec_rows(d["speculation"]):
            t.add_row(k, v)
        parts.append(t)

    if d.get("spec_steps"):
        t = table("draft steps: cost and gain per step (two-point fit)", ("", "A", "B"))
        for row in _steps_rows(d["spec_steps"]):
            t.add_row(*row)
        parts.append(t)

    f = d["findings"]
    if not f.get("available"):
        parts.append(Text("findings: the rules engine is not available", style="dim"))
    else:
        t = table("findings (by rule)", ("change", "rule", "severity", "message"), numeric=False)
        for change, key in (("added", "added"), ("gone", "removed"), ("unchanged", "unchanged")):
            for it in f[key]:
                t.add_row(change, it["name"], it["severity"], it["message"])
        if not (f["added"] or f["removed"] or f["unchanged"]):
            t.add_row("-", "no findings in either run", "", "")
        parts.append(t)
    return Group(*parts)


def _phase_cell(ph: dict[str, Any], side: str) -> str:
    v = ph.get(side)
    if v is None:
        return "unfinished" if ph.get(f"complete_{side}") is False else "-"
    s = fmt(v)
    if ph.get(f"complete_{side}") is False:
        s += " (unfinished)"
    return s


def _sizes(c: dict[str, Any]) -> str:
    if not c.get("sizes"):
        return "-"
    sizes = c["sizes"]
    return f"{c['count']} ({sizes[0]} ... {sizes[-1]})" if len(sizes) > 1 else f"1 ({sizes[0]})"


# ------------------------------------------------------------------ markdown


def _row(*cells: Any) -> str:
    return "| " + " | ".join(cells) + " |"


def render_markdown(result: DiffResult, level: int = 1) -> str:
    """The diff as GitHub-flavoured Markdown; log-derived text goes through ``sglog.report.escape.inline``.

    ``level``: heading level of the title (sections are one deeper), so a report can embed it.
    """
    from sglog.report.escape import code, inline

    def e(text: Any) -> str:  # a table cell: inline-escaped; block starts ("1.", "-") mean nothing in a cell
        return inline("x" + str(text))[1:]

    h1, h2 = "#" * level, "#" * (level + 1)
    d = result.to_dict()
    out: list[str] = [f"{h1} sglog diff", "", f"**Verdict:** {inline(d['verdict']['text'])}", ""]
    out += [_row("", "A", "B"), _row("---", "---", "---")]
    for k, a, b in _run_rows(d):
        out.append(_row(e(k), e(a), e(b)))
    out.append("")
    for line in d["caveats"]:
        out.append(f"> Note: {inline(line)}")
    if d["caveats"]:
        out.append("")

    out += [f"{h2} Launch configuration", ""]
    if not d["args_known"]:
        out.append("The server arguments are not in both logs.")
    elif d["config_changes"]:
        out += [_row("flag", "A", "B", "origin"), _row("---", "---", "---", "---")]
        for c in d["config_changes"]:
            out.append(_row(code(c["cli_flag"], in_table=True), e(fmt(c["a"])), e(fmt(c["b"])), e(_origin(c))))
    else:
        out.append("No changed flags.")
    out.append("")

    st = d["startup"]
    out += [f"{h2} Startup", "", "Seconds, slowest rank.", "", _row("phase", "A", "B", "change"), _row("---", "---:", "---:", "---:")]
    for ph in st["phases"]:
        out.append(_row(PHASE_TITLES.get(ph["name"], ph["name"]), e(_phase_cell(ph, "a")), e(_phase_cell(ph, "b")), e(fmt_delta(ph))))
    out.append(_row("launch to ready", e(fmt(st["total_s"]["a"])), e(fmt(st["total_s"]["b"])), e(fmt_delta(st["total_s"]))))
    out.append("")

    out += [f"{h2} Memory budget", "", "Per GPU: minimum free and maximum used across ranks.", "", _row("", "A", "B", "change"), _row("---", "---:", "---:", "---:")]
    for row in _memory_rows(d):
        out.append(_row(*map(e, row)))
    out.append("")

    cg = d["cuda_graph"]
    out += [f"{h2} CUDA graphs", "", _row("", "A", "B"), _row("---", "---", "---")]
    out.append(_row("disabled", fmt(cg["a"]["disabled"]), fmt(cg["b"]["disabled"])))
    out.append(_row("`--cuda-graph-max-bs`", e(fmt(cg["a"]["max_bs_arg"])), e(fmt(cg["b"]["max_bs_arg"]))))
    out.append(_row("captured batch sizes", e(_sizes(cg["a"])), e(_sizes(cg["b"]))))
    out.append("")

    sv = d["serving"]
    out += [f"{h2} Serving (steady state, warm-up excluded)", "", _row("", "A", "B", "change"), _row("---", "---:", "---:", "---:")]
    dec = sv["decode_tok_s"]
    out.append(_row("decode tok/s, median (p10, p90)", e(_dist(dec["a"])), e(_dist(dec["b"])), e(fmt_delta(dec))))
    for key, title in SERVING_ROWS:
        p = sv[key]
        if p["a"] is None and p["b"] is None:
            continue
        out.append(_row(e(title), e(fmt(p["a"])), e(fmt(p["b"])), e(fmt_delta(p))))
    out.append("")
    line = _sig_line(sv.get("significance"))
    if line:
        out += [inline(line), ""]

    if d["speculation"]:
        out += [f"{h2} Speculative decoding vs baseline", "", "Cycle-time model, per request (throughput divided by running requests).", "", _row("", "value"), _row("---", "---:")]
        for k, v in _spec_rows(d["speculation"]):
            out.append(_row(e(k), e(v)))
        out.append("")

    if d.get("spec_steps"):
        out += [f"{h2} Draft steps: cost and gain per step", "", "Two-point fit of the cycle time over the draft steps (failure-modes §C).", "", _row("", "A", "B"), _row("---", "---:", "---:")]
        for k, a, b in _steps_rows(d["spec_steps"]):
            out.append(_row(e(k), e(a), e(b)))
        out.append("")

    f = d["findings"]
    out += [f"{h2} Findings", ""]
    if not f.get("available"):
        out.append("The rules engine is not available.")
    elif not (f["added"] or f["removed"] or f["unchanged"]):
        out.append("No findings in either run.")
    else:
        for title, key in (("Added in B", "added"), ("Gone in B", "removed"), ("Unchanged", "unchanged")):
            if f[key]:
                out.append(f"**{title}:**")
                out.append("")
                for it in f[key]:
                    out.append(f"- {code(it['name'])} ({inline(it['severity'])}): {inline(it['message'])}")
                out.append("")
    return "\n".join(out).rstrip("\n") + "\n"
