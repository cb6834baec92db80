"""SGL204 decode-batch-exceeds-cuda-graph: decode batches larger than the biggest captured CUDA graph run without graphs."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, row_evidence, window_evidence


class DecodeBatchExceedsCudaGraph(Rule):
    """Decode batches larger than the biggest captured CUDA graph run without graphs.

    ## What it finds
    Decode lines with `cuda graph: False` and `#running-req` above the largest
    captured batch size, in at least `min_rows` lines or `min_share` of them.
    Without the server args and the capture lines (a pasted tail), the largest
    size is taken as the biggest batch that ran with graphs, and the finding
    says so.

    ## Why it matters
    A batch above `--cuda-graph-max-bs` runs eagerly: per-step CPU launch
    overhead multiplies the time per token, requests stay longer and the batch
    stays large (a self-sustaining slow state).  `max_running_requests` and
    `cuda_graph_max_bs` are chosen independently, so this happens by default.

    ## Evidence
    The server-args line and decode lines running without graphs above the maximum.

    ## Suggested fix
    `--cuda-graph-max-bs` = p95 of `#running-req` on those lines, rounded up to
    SGLang's capture grid (multiples of 8 up to 256, of 16 above); graph memory
    grows about `G x new / old`.  Or cap `--max-running-requests` at the
    current maximum.

    ## Fix safety
    More graph sizes cost memory (less KV) and capture time; a lower request cap
    queues requests instead.

    ## Example
    Case: graphs up to 32, batches of 48-67 run eagerly

    `cuda_graph_max_bs=32` and decode lines at `#running-req: 48` to
    `#running-req: 67` with `cuda graph: False`: `12 decode lines (100%)` ran
    without graphs, and sglog suggests `--cuda-graph-max-bs 72` (`p95 67 rounded
    up to the capture grid`; the graphs grow `from 0.40 to ~0.90 GB`).
    """

    code = "SGL204"
    name = "decode-batch-exceeds-cuda-graph"
    triggers = ("cuda_graph_bs", "cuda_graph_capture_begin", "cuda_graph_capture_end", "feature_disabled", "server_args", "args", "memory", "batches")
    severity = "warning"
    options = {"min_rows": Option(3, "decode lines above the graphs needed"), "min_share": Option(0.05, "or this share of decode lines")}

    def _check(self, run, o) -> Iterator:
        M = facts.max_graph_bs(run)
        d = facts.decode_rows(run)
        if facts.graphs_disabled(run) or d.height == 0 or "cuda_graph" not in d.columns or "running_req" not in d.columns:
            return
        assumed, largest = "", None
        if not M:
            # a fragment without the args and the capture lines: the decode lines still show the
            # largest size that ran with graphs; a batch above every one of them ran without
            with_graphs = d.filter(pl.col("cuda_graph") == True)  # noqa: E712
            M = int(facts.stat(with_graphs.get_column("running_req").max()) or 0) if with_graphs.height else 0
            if not M:
                return
            largest = with_graphs.filter(pl.col("running_req") == M).head(1).to_dicts()[0]
            assumed = f" (the log shows no captured sizes: taken as {M}, the largest batch that ran with CUDA graphs)"
        over = d.filter((pl.col("cuda_graph") == False) & (pl.col("running_req") > M))  # noqa: E712
        if over.height < o["min_rows"] and over.height < o["min_share"] * d.height or over.height == 0:
            return
        p95 = float(facts.value(over.get_column("running_req").quantile(0.95, "higher")))
        new = facts.round_up_capture(p95)
        m = run.memory
        cost = f"; graphs grow from {m.cuda_graph_gb:.2f} to ~{m.cuda_graph_gb * new / M:.2f} GB" if m.cuda_graph_gb else ""
        ev = []
        sa = run.first("server_args")
        if sa is not None:
            ev.append(event_evidence(sa, note=f"cuda_graph_max_bs={M}"))
        if largest is not None:
            ev.append(row_evidence(largest, note=f"the largest batch with CUDA graphs: {M}"))
        ev += [row_evidence(r) for r in over.head(2).to_dicts()]
        ev.append(window_evidence(run, f"{over.height} of {d.height} decode lines ran without CUDA graphs above batch size {M} (p95 #running-req {p95:g})"))
        msg = f"{over.height} decode lines ({over.height / d.height:.0%}) ran {p95:g}-request batches without CUDA graphs: the largest captured size is {M}{assumed}."
        fix = Fix(
            summary=f"Capture graphs for the batches that occur: --cuda-graph-max-bs {new} (p95 {p95:g} rounded up to the capture grid){cost}; or cap --max-running-requests at {M}.",
            args={"--cuda-graph-max-bs": str(new)},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, new_max_bs=new)
