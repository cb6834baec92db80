"""SGL105 cuda-graph-bs-oversized: CUDA graphs are captured for batch sizes far above what the run ever decoded."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, floor_to, row_evidence, window_evidence
from sglog.rules.memory.budget import GiB


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
        M = facts.max_graph_bs(run)
        d = facts.decode_rows(run)
        if not M or d.height < o["min_decode_lines"] or "running_req" not in d.columns:
            return
        running = d.get_column("running_req").drop_nulls()
        running = running.filter(running > 0)
        if running.len() < o["min_decode_lines"]:
            return
        p99 = float(facts.value(running.quantile(0.99, "higher")))
        peak = int(facts.value(running.max()))
        if M < o["ratio"] * max(p99, 1.0):
            return
        sizes = facts.captured_bs(run)
        n = facts.round_up_capture(max(p99, o["min_bs"]), sizes)
        if n >= M:
            return
        m = run.memory
        if m.cuda_graph_gb:
            freed = m.cuda_graph_gb * (1 - n / M)
            how = f"{m.cuda_graph_gb:.2f} GB of target graphs x (1 - {n}/{M})"
        else:
            freed = 2 * (M - n) / 1024
            how = f"2 MB x ({M} - {n}), SGLang's reservation per size"
        if freed < o["min_free_gb"]:
            return
        tokens = f", ~{int(freed * GiB / m.bytes_per_kv_token):,} more KV tokens" if m.bytes_per_kv_token else ""
        args: dict[str, str | None] = {"--cuda-graph-max-bs": str(n)}
        more = ""
        mfs, T, F = m.mem_fraction_static, m.total_gb, m.available_gpu_mem_gb
        if mfs is not None and T and F is not None:
            new = floor_to(mfs + (F + freed - o["target_free_gb"]) / T)
            how_mfs = f"{mfs:.2f} + ({F:.2f} free + {freed:.2f} freed - {o['target_free_gb']:.0f}) GB / T {T:.1f} GB"
            args["--mem-fraction-static"] = f"{new:.2f}"
            if new > mfs + 0.005:
                more = f"; then --mem-fraction-static {new:.2f} = {how_mfs} gives it to the KV pool"
            else:
                more = f"; set --mem-fraction-static {new:.2f} = {how_mfs} to keep {o['target_free_gb']:.0f} GB free"
        elif mfs is not None and T and m.mem_fraction_static_origin == "explicit":
            new = floor_to(mfs + freed / T)
            if new >= mfs + 0.01:
                args["--mem-fraction-static"] = f"{new:.2f}"
                more = f"; then --mem-fraction-static {new:.2f} = {mfs:.2f} + {freed:.2f} GB / T {T:.1f} GB gives it to the KV pool"
        elif m.mem_fraction_static_origin == "auto":
            more = f"; the automatic --mem-fraction-static grows by only 2 MB per size ({2 * (M - n) / 1024:.2f} GB): set it explicitly to give the rest to the KV pool"
        floor_note = f", at least {o['min_bs']}" if p99 < o["min_bs"] else ""
        ev = []
        sa = run.first("server_args")
        if sa is not None:
            ev.append(event_evidence(sa, note=f"cuda_graph_max_bs={M}"))
        ce = next((e for e in run.events_of("cuda_graph_capture_end") if e.get("role", "target") == "target"), None)
        if ce is not None:
            ev.append(event_evidence(ce))
        peak_row = d.filter(d.get_column("running_req") == peak).head(1).to_dicts()
        if peak_row:
            ev.append(row_evidence(peak_row[0], note=f"peak #running-req {peak}"))
        ev.append(window_evidence(run, f"p99 #running-req = {p99:g} over {running.len()} decode lines ({facts.line_span(d)})"))
        msg = (
            f"CUDA graphs are captured up to batch size {M} but decode batches peaked at {peak} running request{'s' if peak != 1 else ''} (p99 {p99:g}): ~{freed:.2f} GB of graph memory is never used."
        )
        fix = Fix(
            summary=f"Lower --cuda-graph-max-bs to {n} (smallest captured size >= p99 {p99:g}{floor_note}); frees ~{freed:.2f} GB ({how}){tokens}{more}.",
            args=args,
            safety=self.safety({"N": n}),
        )
        yield self.finding(run, msg, ev, fix, new_max_bs=n, freed_gb=round(freed, 3), p99_running=p99, peak_running=peak)
