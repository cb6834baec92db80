"""What a run-vs-run diff shows, as plain data: the verdict and the sections, in order.

``build(result)`` turns a ``sglog.compare.diff.DiffResult`` into a ``DiffView``:
verdict, the two runs, launch configuration changes, startup, memory budget,
CUDA graphs, serving (steady state, with the significance method), speculative
vs baseline, findings.  Each ``Section`` holds its titles, columns, rows (cells
already formatted) and notes; ``sglog.render.diff`` only lays them out, in rich
for the terminal and in Markdown.  Cells and messages are plain text (log text
included: the Markdown renderer escapes it), or ``Code`` for names.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
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

# the findings' groups: (the change as the table says it, the result's key, the group's title in a list)
FINDING_GROUPS = (("added", "added", "Added in B"), ("gone", "removed", "Gone in B"), ("unchanged", "unchanged", "Unchanged"))

# the diff's speculation finding (data: its name in JSON), as a sentence
_SPEC_FINDING = {"speculation-slower-than-baseline": "speculation is slower than the baseline"}


# ------------------------------------------------------------------ the data


@dataclass(frozen=True)
class Code:
    """A name set as code in Markdown; the terminal writes ``plain`` (by default the name itself)."""

    text: str
    plain: str | None = None


Cell = str | Code


@dataclass(frozen=True)
class Message:
    """A sentence. ``note``: a caveat, called out; ``aside``: secondary (dimmed in the terminal)."""

    text: str
    tone: Literal["plain", "note", "aside"] = "plain"


@dataclass(frozen=True)
class Section:
    """One section: a table (or a sentence in its place) and the notes under it."""

    heading: str | None  # the Markdown heading (None: none, the table follows the verdict)
    caption: str  # the terminal's title of the table
    columns: tuple[str, ...] = ()
    rows: tuple[tuple[Cell, ...], ...] = ()
    about: str | None = None  # Markdown: a sentence under the heading
    numeric: bool = True  # the value columns (all but the first) are right-aligned
    markdown_numeric: bool | None = None  # Markdown's alignment when it differs (None: ``numeric``)
    text: Message | None = None  # said in place of the table
    empty: str | None = None  # what the section says when the table has no rows
    notes: tuple[Message, ...] = ()  # under the table
    measured: bool = True  # False: nothing measured; the terminal leaves the section out
    groups: tuple[tuple[str, str], ...] = ()  # Markdown: a list per (first cell, title) instead of a table


@dataclass(frozen=True)
class DiffView:
    title: str
    verdict: str
    verdict_kind: str  # sglog.compare.diff.Verdict.kind: faster, slower, not-comparable, no-data, ...
    sections: tuple[Section, ...]


def build(result: DiffResult) -> DiffView:
    """The verdict and the sections of ``result``, in the order both renderers show them."""
    d = result.to_dict()
    parts = (_runs(d), _config(d), _startup(d), _memory(d), _cuda_graphs(d), _serving(d), _speculation(d), _spec_steps(d), _findings(d))
    return DiffView("sglog diff", d["verdict"]["text"], d["verdict"]["kind"], tuple(s for s in parts if s is not None))


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


def _origin(c: dict[str, Any]) -> str:
    oa, ob = c.get("origin_a"), c.get("origin_b")
    if oa == ob:
        return oa or "-"
    return f"{oa or 'absent'} → {ob or 'absent'}"  # (an arrow, not "->": Markdown escapes ">")


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


# ------------------------------------------------------------------ the sections


def _runs(d: dict[str, Any]) -> Section:
    a, b = d["a"], d["b"]

    def spec(x: dict[str, Any]) -> str:
        s = x.get("speculative")
        if not s:
            return "-"
        steps = f", {s['num_steps']} steps" if s.get("num_steps") else ""
        return f"{s.get('algorithm')}{steps}"

    def par(p: dict[str, Any]) -> str:
        return " ".join(f"{k}{v}" for k, v in p.items() if v != 1 or k == "tp") or "-"

    rows = (
        ("run", a["spec"], b["spec"]),
        ("model", a.get("model") or "-", b.get("model") or "-"),
        ("SGLang version", a.get("version") or "?", b.get("version") or "?"),
        ("parallelism", par(a["parallelism"]), par(b["parallelism"])),
        ("speculative decoding", spec(a), spec(b)),
        ("how it ended", a.get("ending") or "-", b.get("ending") or "-"),
    )
    notes = tuple(Message(line, "note") for line in d["caveats"])
    return Section(None, "runs", ("", "A", "B"), rows, numeric=False, notes=notes)


def _config(d: dict[str, Any]) -> Section:
    heading, caption, columns = "Launch configuration", "launch configuration: changed flags", ("flag", "A", "B", "origin")
    if not d["args_known"]:
        return Section(heading, caption, columns, numeric=False, text=Message("The server arguments are not in both logs."))
    if not d["config_changes"]:
        return Section(heading, caption, columns, numeric=False, text=Message("No changed flags."))
    rows = tuple((Code(c["cli_flag"], c["flag"]), fmt(c["a"]), fmt(c["b"]), _origin(c)) for c in d["config_changes"])
    return Section(heading, caption, columns, rows, numeric=False)


def _startup(d: dict[str, Any]) -> Section:
    st = d["startup"]
    rows = tuple((PHASE_TITLES.get(ph["name"], ph["name"]), _phase_cell(ph, "a"), _phase_cell(ph, "b"), fmt_delta(ph)) for ph in st["phases"])
    total = st["total_s"]
    rows += (("launch to ready", fmt(total["a"]), fmt(total["b"]), fmt_delta(total)),)
    measured = bool(st["phases"]) or total["a"] is not None or total["b"] is not None
    return Section("Startup", "startup (s, slowest rank)", ("phase", "A", "B", "change"), rows, about="Seconds, slowest rank.", measured=measured)


def _memory(d: dict[str, Any]) -> Section:
    """The memory rows either run has; the fraction with its origin."""
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
    about = "Per GPU: minimum free and maximum used across ranks."
    return Section("Memory budget", "memory budget (per GPU; min free / max used across ranks)", ("", "A", "B", "change"), tuple(rows), about=about)


def _cuda_graphs(d: dict[str, Any]) -> Section:
    a, b = d["cuda_graph"]["a"], d["cuda_graph"]["b"]
    rows = (
        ("disabled", fmt(a["disabled"]), fmt(b["disabled"])),
        (Code("--cuda-graph-max-bs", "cuda_graph_max_bs"), fmt(a["max_bs_arg"]), fmt(b["max_bs_arg"])),
        ("captured batch sizes", _sizes(a), _sizes(b)),
    )
    return Section("CUDA graphs", "CUDA graphs (target, decode)", ("", "A", "B"), rows, markdown_numeric=False)


def _serving(d: dict[str, Any]) -> Section:
    sv = d["serving"]
    dec = sv["decode_tok_s"]
    rows = [("decode tok/s, median (p10, p90)", _dist(dec["a"]), _dist(dec["b"]), fmt_delta(dec))]
    for key, title in SERVING_ROWS:
        p = sv[key]
        if p["a"] is not None or p["b"] is not None:
            rows.append((title, fmt(p["a"]), fmt(p["b"]), fmt_delta(p)))
    line = _sig_line(sv.get("significance"))
    notes = (Message(line, "aside"),) if line else ()
    return Section("Serving (steady state, warm-up excluded)", "serving, steady state (warm-up excluded)", ("", "A", "B", "change"), tuple(rows), notes=notes)


def _speculation(d: dict[str, Any]) -> Section | None:
    s = d["speculation"]
    if not s:
        return None
    who = "B" if s["spec_side"] == "b" else "A"
    steps = f", {s['num_steps']} steps" if s.get("num_steps") else ""
    rows = [
        ("speculative run", f"{who} ({s.get('algorithm') or 'speculation'}{steps})"),
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
    about = "Cycle-time model, per request (throughput divided by running requests)."
    caption = "speculative decoding vs baseline (cycle-time model, per request)"
    return Section("Speculative decoding vs baseline", caption, ("", "value"), tuple(rows), about=about)


def _spec_steps(d: dict[str, Any]) -> Section | None:
    s = d.get("spec_steps")
    if not s:
        return None
    rows = (
        ("draft steps", fmt(s["steps_a"]), fmt(s["steps_b"])),
        ("t_cycle = L / tok/s per request (ms)", fmt(s["t_cycle_ms_a"]), fmt(s["t_cycle_ms_b"])),
        ("fit t_cycle = fixed + per_step x steps", f"fixed {fmt(s['fixed_ms'])} ms", f"per step {fmt(s['ms_per_step'])} ms"),
        ("accept length gained per extra step", "", f"{s['accept_len_per_step']:+.3f}"),
    )
    about = "Two-point fit of the cycle time over the draft steps (failure-modes §C)."
    return Section("Draft steps: cost and gain per step", "draft steps: cost and gain per step (two-point fit)", ("", "A", "B"), rows, about=about)


def _findings(d: dict[str, Any]) -> Section:
    f = d["findings"]
    heading, caption, columns = "Findings", "findings (by rule)", ("change", "rule", "severity", "message")
    if not f.get("available"):
        return Section(heading, caption, columns, numeric=False, text=Message("The rules engine is not available.", "aside"))
    rows = tuple((change, Code(it["name"]), it["severity"], it["message"]) for change, key, _ in FINDING_GROUPS for it in f[key])
    groups = tuple((change, title) for change, _, title in FINDING_GROUPS)
    return Section(heading, caption, columns, rows, numeric=False, empty="No findings in either run.", groups=groups)
