"""SGL105 cuda-graph-bs-oversized: CUDA graphs are captured for batch sizes far above what the run ever decoded."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, floor_to, row_evidence, window_evidence
from sglog.rules.memory.budget import GiB


@dataclass(frozen=True)
class _Oversized:
    """The captured maximum against the batches the run decoded, and what lowering it frees."""

    max_bs: int  # M: --cuda-graph-max-bs
    new_bs: int  # N: the smallest captured size >= the p99 (at least min_bs)
    p99: float  # of #running-req
    peak: int
    decode: pl.DataFrame  # the decode rows
    lines: int  # decode lines with a positive #running-req
    freed: float  # GB
    how: str  # how freed was computed


def _running(run, o) -> tuple[pl.DataFrame, pl.Series] | None:
    """The decode rows and their positive #running-req, when there are enough to trust a p99."""
    d = facts.decode_rows(run)
    if d.height < o["min_decode_lines"] or "running_req" not in d.columns:
        return None
    running = d.get_column("running_req").drop_nulls()
    running = running.filter(running > 0)
    if running.len() < o["min_decode_lines"]:
        return None
    return d, running


def _freed(m, M: int, n: int) -> tuple[float, str]:
    """The graph memory (GB) lowering the maximum from M to n frees, and how it was computed."""
    if m.cuda_graph_gb:
        return m.cuda_graph_gb * (1 - n / M), f"{m.cuda_graph_gb:.2f} GB of target graphs x (1 - {n}/{M})"
    return 2 * (M - n) / 1024, f"2 MB x ({M} - {n}), SGLang's reservation per size"


def _oversized(run, o) -> _Oversized | None:
    """The run's graphs, when the maximum is `ratio` x the p99 #running-req and a smaller captured size exists."""
    M = facts.max_graph_bs(run)
    got = _running(run, o) if M else None
    if not M or got is None:
        return None
    d, running = got
    p99 = float(facts.value(running.quantile(0.99, "higher")))
    peak = int(facts.value(running.max()))
    if M < o["ratio"] * max(p99, 1.0):
        return None
    n = facts.round_up_capture(max(p99, o["min_bs"]), facts.captured_bs(run))
    if n >= M:
        return None
    freed, how = _freed(run.memory, M, n)
    return _Oversized(M, n, p99, peak, d, running.len(), freed, how)


def _to_kv_pool(m, o, g: _Oversized) -> tuple[str | None, str]:
    """The --mem-fraction-static that gives the freed memory to the KV pool (None: none to suggest), and the fix's words for it."""
    M, n, freed = g.max_bs, g.new_bs, g.freed
    mfs, T, F = m.mem_fraction_static, m.total_gb, m.available_gpu_mem_gb
    if mfs is not None and T and F is not None:
        new = floor_to(mfs + (F + freed - o["target_free_gb"]) / T)
        how_mfs = f"{mfs:.2f} + ({F:.2f} free + {freed:.2f} freed - {o['target_free_gb']:.0f}) GB / T {T:.1f} GB"
        if new > mfs + 0.005:
            return f"{new:.2f}", f"; then --mem-fraction-static {new:.2f} = {how_mfs} gives it to the KV pool"
        return f"{new:.2f}", f"; set --mem-fraction-static {new:.2f} = {how_mfs} to keep {o['target_free_gb']:.0f} GB free"
    if mfs is not None and T and m.mem_fraction_static_origin == "explicit":
        new = floor_to(mfs + freed / T)
        if new >= mfs + 0.01:
            return f"{new:.2f}", f"; then --mem-fraction-static {new:.2f} = {mfs:.2f} + {freed:.2f} GB / T {T:.1f} GB gives it to the KV pool"
        return None, ""
    if m.mem_fraction_static_origin == "auto":
        return None, f"; the automatic --mem-fraction-static grows by only 2 MB per size ({2 * (M - n) / 1024:.2f} GB): set it explicitly to give the rest to the KV pool"
    return None, ""


def _evidence(run, g: _Oversized) -> list:
    """The server args (the maximum), the target's capture end (G), the peak batch, the decode window's p99."""
    ev = []
    sa = run.first("server_args")
    if sa is not None:
        ev.append(event_evidence(sa, note=f"cuda_graph_max_bs={g.max_bs}"))
    ce = next((e for e in run.events_of("cuda_graph_capture_end") if e.get("role", "target") == "target"), None)
    if ce is not None:
        ev.append(event_evidence(ce))
    d = g.decode
    peak_row = d.filter(d.get_column("running_req") == g.peak).head(1).to_dicts()
    if peak_row:
        ev.append(row_evidence(peak_row[0], note=f"peak #running-req {g.peak}"))
    ev.append(window_evidence(run, f"p99 #running-req = {g.p99:g} over {g.lines} decode lines ({facts.line_span(d)})"))
    return ev


class CudaGraphBsOversized(Rule):
    """CUDA graphs are captured for batch sizes far above what the run ever decoded.

    ## What it finds
    A run that served at least `min_decode_lines` decode batches whose
    99th-percentile `#running-req` is a small fraction (`ratio`) of
    `--cuda-graph-max-bs` (auto-chosen up to 512 on large cards with TP >= 4),
    when lowering it frees at least `min_free_gb`.

    ## Why it matters
    Every captured size costs graph memory, taken from the memory that would
    otherwise hold KV cache (with the automatic fraction SGLang also reserves
    2 MB per size).  Graphs for batches that never occur buy nothing.  In the
    story, 512 -> 128 freed memory for KV and raised single-stream decode from
    82 to 89.5 tok/s.

    ## Evidence
    The server-args line (`cuda_graph_max_bs`), the capture-end line (graph
    memory `G`) and the decode window with the p99 of `#running-req`.

    ## Suggested fix
    `--cuda-graph-max-bs N` with `N` = the smallest captured size >= p99
    `#running-req` (at least `min_bs`).  Memory freed ~ `G x (1 - N/old)`
    (measured graph memory, linear in the largest size) or `2 MB x (old - N)`
    (SGLang's reservation) when `G` is not in the log; the KV tokens it buys =
    freed / bytes per token.  To hand the memory to the KV pool, set
    `--mem-fraction-static` = `mfs + (F + freed - target_free_gb) / T` rounded
    down (`F` = available_gpu_mem; without `F`, an explicit fraction grows by
    `freed / T`).  The automatic fraction grows by only SGLang's 2 MB per size.

    ## Fix safety
    The p99 is of *this* log's traffic: if concurrency grows, batches above
    `N` run without graphs (see `decode-batch-exceeds-cuda-graph`); cap them
    with `--max-running-requests N` when latency matters more than peak
    throughput.

    ## Example
    Case: graphs up to 512 for a single-stream workload (story item 2)

    `cuda_graph_max_bs=512`, `Capture cuda graph end ... mem usage=3.10 GB`, and
    the decode lines run one request at a time (`p99 1`): sglog suggests
    `--cuda-graph-max-bs 8`, which `frees ~3.05 GB` (`~49,989 more KV tokens`),
    and `--mem-fraction-static 0.91` to give it to the KV pool.
    """

    code = "SGL105"
    name = "cuda-graph-bs-oversized"
    triggers = (
        "cuda_graph_bs",
        "cuda_graph_capture_begin",
        "cuda_graph_capture_end",
        "feature_disabled",
        "kv_cache_allocated",
        "memory_pool_end",
        "memory_summary",
        "server_args",
        "weight_load_begin",
        "weight_load_end",
        "args",
        "memory",
        "batches",
        "crash",
    )
    severity = "warning"
    options = {
        "ratio": Option(4.0, "fire when max bs >= ratio x p99 #running-req"),
        "min_decode_lines": Option(20, "decode lines needed to trust the p99"),
        "min_free_gb": Option(1.0, "do not report when less than this would be freed"),
        "min_bs": Option(8, "never suggest a maximum below this (a few concurrent requests stay in graphs)"),
        "target_free_gb": Option(6.0, "free memory to keep when the freed memory goes to the KV pool"),
    }

    def _check(self, run, o) -> Iterator:
        if facts.graphs_disabled(run) or facts.crash(run) is not None:
            return
        g = _oversized(run, o)
        if g is None or g.freed < o["min_free_gb"]:
            return
        peak = g.peak
        msg = f"CUDA graphs are captured up to batch size {g.max_bs} but decode batches peaked at {peak} running request{'s' if peak != 1 else ''} (p99 {g.p99:g}): ~{g.freed:.2f} GB of graph memory is never used."
        yield self.finding(run, msg, _evidence(run, g), self._fix(run, o, g), new_max_bs=g.new_bs, freed_gb=round(g.freed, 3), p99_running=g.p99, peak_running=peak)

    def _fix(self, run, o, g: _Oversized) -> Fix:
        """--cuda-graph-max-bs N, and the fraction that hands the freed memory to the KV pool."""
        m = run.memory
        tokens = f", ~{int(g.freed * GiB / m.bytes_per_kv_token):,} more KV tokens" if m.bytes_per_kv_token else ""
        args: dict[str, str | None] = {"--cuda-graph-max-bs": str(g.new_bs)}
        mfs, more = _to_kv_pool(m, o, g)
        if mfs is not None:
            args["--mem-fraction-static"] = mfs
        floor_note = f", at least {o['min_bs']}" if g.p99 < o["min_bs"] else ""
        return Fix(
            summary=f"Lower --cuda-graph-max-bs to {g.new_bs} (smallest captured size >= p99 {g.p99:g}{floor_note}); frees ~{g.freed:.2f} GB ({g.how}){tokens}{more}.",
            args=args,
            safety=self.safety({"N": g.new_bs}),
        )
