"""SGL505 slow-cuda-graph-capture: CUDA-graph capture took minutes."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence


class SlowCudaGraphCapture(Rule):
    """CUDA-graph capture took minutes.

    ## What it finds
    A capture phase (target or draft) longer than `max_seconds` on its slowest
    rank (`Capture cuda graph end. Time elapsed` / `elapsed=`).

    ## Why it matters
    Capture runs at every start; its time grows with the number of captured
    batch sizes (and with speculative decoding, which captures verify, draft
    and draft-extend graphs), and the first capture includes kernel JIT
    compilation.

    ## Evidence
    The capture begin and end lines of the slowest rank.

    ## Suggested fix
    Capture fewer sizes: `--cuda-graph-max-bs` = the smallest captured size
    >= the p99 of `#running-req` when the run served (only when that is at
    most half the current maximum), else half the current maximum.  With a
    maximum of `min_bs_to_shrink` or less the time is kernel compilation and
    no flag is suggested.

    ## Fix safety
    Batches above the new maximum run without graphs (slower per step).

    ## Example
    Case: 1334 s of capture for sizes up to 512

    `Capture cuda graph end. Time elapsed: 1334.38 s` with
    `cuda_graph_max_bs=512`: `CUDA-graph capture took 1334 s on TP0 for batch
    sizes up to 512`, so sglog suggests capturing fewer sizes:
    `--cuda-graph-max-bs 256`.
    """

    code = "SGL505"
    name = "slow-cuda-graph-capture"
    triggers = ("cuda_graph_bs", "cuda_graph_capture_begin", "cuda_graph_capture_end", "args", "startup", "batches")
    severity = "info"
    options = {"max_seconds": Option(120.0, "capture slower than this is reported"), "min_bs_to_shrink": Option(32, "with fewer sizes than this, the time is kernel compilation, not the sizes")}

    def _check(self, run, o) -> Iterator:
        phases = run.startup.phases if run.startup else {}
        for key in ("cuda_graph_capture", "draft_cuda_graph_capture"):
            ph = phases.get(key)
            if ph is None or ph.duration is None or ph.duration <= o["max_seconds"]:
                continue  # (the ranks that logged their end: an excerpt may lack the others')
            rank = ph.slowest_rank
            ev = [event_evidence(e) for e in run.events_of("cuda_graph_capture_begin", "cuda_graph_capture_end") if (e.rank.label if e.rank else "-") == rank][:2]
            M = facts.max_graph_bs(run)
            d = facts.decode_rows(run)
            new = None
            if M and M > o["min_bs_to_shrink"]:
                if d.height >= 20 and "running_req" in d.columns and d.get_column("running_req").drop_nulls().len():
                    r = d.get_column("running_req").drop_nulls()
                    new = facts.round_up_capture(float(facts.value(r.quantile(0.99, "higher"))), facts.captured_bs(run))
                    if new > M / 2:
                        new = None  # the batches need these sizes
                else:
                    new = max(1, M // 2)
            open_ranks = [r for r, p in ph.per_rank.items() if p.end is None]
            partial = (
                f" ({len(ph.per_rank) - len(open_ranks)} of {len(ph.per_rank)} ranks logged their end; the log has no end line for {', '.join(sorted(open_ranks)[:4])}{' ...' if len(open_ranks) > 4 else ''})"
                if open_ranks
                else ""
            )
            on = f" on {rank}" if rank and rank != "-" else ""
            msg = f"{'Draft ' if key.startswith('draft') else ''}CUDA-graph capture took {ph.duration:.0f} s{on}" + (f" for batch sizes up to {M}" if M else "") + f"{partial}."
            fix = Fix(
                summary=(
                    f"Capture fewer sizes: --cuda-graph-max-bs {new}. The first capture after an install also compiles kernels."
                    if new
                    else (
                        "The captured sizes are needed by this workload; the time is mostly kernel compilation on the first capture (JIT caches make the next start faster)."
                        if M
                        else "The log does not show which batch sizes were captured (no --cuda-graph-max-bs, no bs list), so no smaller maximum is computed: if the workload's batches are small, lower --cuda-graph-max-bs; the first capture after an install also compiles kernels (JIT caches make the next start faster)."
                    )
                ),
                args={"--cuda-graph-max-bs": str(new)} if new else {},
                safety=self.safety() if new else "No flag changes.",
            )
            yield self.finding(run, msg, ev, fix, seconds=round(ph.duration, 1))
