"""SGL107 kv-headroom-too-small: too little GPU memory stays free after startup: activations will run out under load."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules.base import Option, Rule, floor_to
from sglog.rules.memory.budget import GiB, budget_evidence, summary_evidence


class KvHeadroomTooSmall(Rule):
    """Too little GPU memory stays free after startup: activations will run out under load.

    ## What it finds
    A ready server whose `available_gpu_mem` is below
    `min(low_gb, low_share x T)` (the share keeps small cards from being
    judged by the 80 GB-card band).

    ## Why it matters
    After the static pool and the CUDA graphs, this memory holds activations,
    sampling buffers and allocator slack.  SGLang's guide: below 5 GB you risk
    out-of-memory errors later (long prefills, large batches, logprobs).

    ## Evidence
    The `max_total_num_tokens=..., available_gpu_mem=...` line.

    ## Suggested fix
    `mfs_new = mfs - (target_gb - F) / T` rounded down to 0.01 (`target_gb`
    capped at 1.2 x `low_share` x T on small cards); or keep the
    fraction and shrink activations (`--chunked-prefill-size 4096`) or graphs
    (`--cuda-graph-max-bs`).

    ## Fix safety
    A lower fraction shrinks the KV pool: fewer concurrent tokens.

    ## Example
    Case: 2.1 GB free after startup

    `available_gpu_mem=2.10 GB` in the ready line with `mem_fraction_static=0.9`
    on a card with `T` = 78.5 GB: sglog suggests `--mem-fraction-static 0.85` =
    `0.90 - (6.0 - 2.10) GB / T 78.5 GB`, or `--chunked-prefill-size 4096` with
    the fraction kept.
    """

    code = "SGL107"
    name = "kv-headroom-too-small"
    triggers = ("kv_cache_allocated", "memory_pool_end", "memory_summary", "server_args", "weight_load_begin", "weight_load_end", "memory")
    severity = "warning"
    options = {
        "low_gb": Option(5.0, "free memory below which activations may run out"),
        "low_share": Option(0.10, "the same as a share of T (whichever is smaller applies)"),
        "target_gb": Option(6.0, "free memory to aim for (scaled down with low_share on small cards)"),
    }

    def _check(self, run, o) -> Iterator:
        m = run.memory
        F = m.available_gpu_mem_gb
        if F is None:
            return
        T = m.total_gb
        low = min(o["low_gb"], o["low_share"] * T) if T else o["low_gb"]
        if F >= low:
            return
        target = min(o["target_gb"], 1.2 * o["low_share"] * T) if T else o["target_gb"]
        msg = f"Only {F:.2f} GB of GPU memory stays free after startup (less than {low:.1f} GB): long prefills or large batches may run out of memory."
        if m.mem_fraction_static is not None and T:
            new = floor_to(m.mem_fraction_static - (target - F) / T)
            fix = Fix(
                summary=f"Lower --mem-fraction-static from {m.mem_fraction_static:.2f} to {new:.2f} = {m.mem_fraction_static:.2f} - ({target:.1f} - {F:.2f}) GB / T {T:.1f} GB; or keep it and use --chunked-prefill-size 4096.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety=self.fix_safety
                + f" Here: {(m.mem_fraction_static - new) * T:.1f} GB less KV"
                + (f" (~{int((m.mem_fraction_static - new) * T * GiB / m.bytes_per_kv_token):,} tokens)." if m.bytes_per_kv_token else "."),
            )
        else:
            by = (
                f"{(target - F) / T:.2f} = ({target:.1f} - {F:.2f}) GB / T {T:.1f} GB"
                if T
                else f"({target:.1f} - {F:.2f}) GB over the memory free at weight load (no `Load weight begin` line in this log)"
            )
            fix = Fix(summary=f"Lower --mem-fraction-static by about {by}, or use --chunked-prefill-size 4096.", args={}, safety=self.fix_safety)
        yield self.finding(run, msg, budget_evidence(run)[:1] + summary_evidence(run), fix)
