"""SGL205 cuda-graphs-never-captured: every decode batch ran without CUDA graphs."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, row_evidence, window_evidence


class CudaGraphsNeverCaptured(Rule):
    """Every decode batch ran without CUDA graphs.

    ## What it finds
    At least `min_rows` decode lines, all with `cuda graph: False`, at batch
    sizes the graphs would cover (at most `--cuda-graph-max-bs` when known).
    A shorter log (an excerpt pasted into an issue) with at least
    `min_rows_info` such lines gets an info finding that says how few lines it
    is based on: each decode line summarises ~40 decode steps, so even two
    lines without a graph are a signal, but not proof that the whole run
    lacked graphs.

    ## Why it matters
    Without graphs each decode step pays the CPU cost of launching every
    kernel: small-batch decode is often 2-3x slower.  Either graphs are
    disabled (`--disable-cuda-graph`) or capture silently did not happen.

    ## Evidence
    The server-args line (`disable_cuda_graph`) and a decode line.

    ## Suggested fix
    Remove `--disable-cuda-graph` when it is set (an explicit choice is
    reported as info); otherwise check the startup log for the capture lines
    (`Capture cuda graph begin/end`) and whether the platform supports them.

    ## Fix safety
    Capture costs startup time and memory (less KV); on some platforms (ROCm
    consumer cards, new architectures) it can fail: keep the flag there.

    ## Example
    Case: --disable-cuda-graph is set (a choice: info)

    `disable_cuda_graph=True` and 8 decode lines with `cuda graph: False` at
    `#running-req: 2`: `All 8 decode lines ran without CUDA graphs`, a choice
    reported as info; sglog suggests dropping `--disable-cuda-graph` if the
    platform supports graphs.
    """

    code = "SGL205"
    name = "cuda-graphs-never-captured"
    triggers = ("cuda_graph_bs", "cuda_graph_capture_begin", "cuda_graph_capture_end", "feature_disabled", "server_args", "args", "batches")
    severity = "warning"
    options = {
        "min_rows": Option(5, "decode lines needed for a warning"),
        "min_rows_info": Option(2, "decode lines needed for an info finding that names how few lines it rests on"),
    }

    def _check(self, run, o) -> Iterator:
        d = facts.decode_rows(run)
        least = min(o["min_rows"], o["min_rows_info"])
        if d.height < least or "cuda_graph" not in d.columns:
            return
        g = facts.present(d, "cuda_graph")
        if g.height < least or g.get_column("cuda_graph").any():
            return
        few = g.height < o["min_rows"]
        only = f" (based on only {g.height} decode lines)" if few else ""
        lines = "The log's decode lines" if few else f"All {g.height} decode lines"
        M = facts.max_graph_bs(run)
        if M and "running_req" in g.columns and facts.value((g.get_column("running_req") > M).mean()) > 0.5:
            return  # decode-batch-exceeds-cuda-graph explains it
        ev = []
        sa = run.first("server_args")
        disabled = facts.graphs_disabled(run)
        if sa is not None:
            ev.append(event_evidence(sa, note=f"disable_cuda_graph={run.args.get('disable_cuda_graph')}"))
        ev.append(row_evidence(g.head(1).to_dicts()[0]))
        ev.append(window_evidence(run, f"{g.height} decode lines, none with cuda graph: True ({facts.line_span(g)})"))
        label = "npu graph" if "graph_backend" in g.columns and (g.get_column("graph_backend") == "npu").any() else "cuda graph"
        if disabled:
            msg = f"{lines} ran without CUDA graphs: --disable-cuda-graph is set{only}."
            fix = Fix(summary="Remove --disable-cuda-graph to capture decode graphs (if the platform supports them).", args={"--disable-cuda-graph": None}, safety=self.fix_safety)
            yield self.finding(run, msg, ev, fix, severity="info")
            return
        msg = f"{lines} report {label}: False although graphs are not disabled: capture did not happen or does not cover these batches{only}."
        fix = Fix(
            summary="Check the startup log for `Capture cuda graph begin/end`; make sure --cuda-graph-max-bs covers the running batch and that the attention backend supports graphs.",
            args={},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, severity="info" if few else None)
