"""SGL203 kv-capacity-bound: the KV cache is full and requests queue: throughput is bounded by KV capacity."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, floor_to, row_evidence, window_evidence
from sglog.rules.scheduling.usage import steady_usage, usage_rows


class KvCapacityBound(Rule):
    """The KV cache is full and requests queue: throughput is bounded by KV capacity.

    ## What it finds
    Steady-state decode lines (at least `min_rows`) with `token usage >=
    usage_at_least` *and* `#queue-req > 0` in at least `share` of the lines.
    A run with no decode lines (a PD prefill server, or an excerpt of one) is
    read from its prefill lines (at least `min_prefill_rows`); when most of
    the pool is held by requests waiting for their KV transfer
    (`#transferring-req` / `#inflight-req`), the decode side is the bottleneck.

    ## Why it matters
    With the pool full the scheduler cannot admit queued requests: throughput
    plateaus and latency grows with the queue.  More KV (or less KV per
    request) is the only lever.

    ## Evidence
    The decode window and one line at high usage with a queue.

    ## Suggested fix
    In order: if `available_gpu_mem` exceeds `target_gb`, raise
    `--mem-fraction-static` by `(F - target_gb) / T`; else if the KV cache is
    16-bit, `--kv-cache-dtype fp8_e4m3` (about twice the tokens); else add
    GPUs with data parallelism (`--dp`, or more replicas behind the router).

    ## Fix safety
    A higher fraction leaves less activation memory; an fp8 KV cache can cost
    accuracy on some models; data parallelism needs more GPUs.

    ## Example
    Case: the pool is full and requests queue (16-bit KV cache)

    Decode lines at `token usage: 0.95` with `#queue-req: 20` and
    `kv_cache_dtype='auto'`: `throughput is bound by KV capacity`, and sglog
    suggests `--kv-cache-dtype fp8_e4m3` to fit about twice the tokens in the
    same memory.
    """

    code = "SGL203"
    name = "kv-capacity-bound"
    triggers = ("args", "memory", "batches")
    severity = "warning"
    options = {
        "min_rows": Option(5, "steady decode lines needed"),
        "min_prefill_rows": Option(3, "prefill lines needed when the run logs no decode lines (a PD prefill server)"),
        "usage_at_least": Option(0.9, "token usage that counts as full"),
        "share": Option(0.5, "share of lines full with a queue"),
        "target_gb": Option(6.0, "free memory to keep when raising the fraction"),
    }

    def _check(self, run, o) -> Iterator:
        s, u = steady_usage(run, o["min_rows"])
        lines = "steady decode lines"
        if s is None and run.decode.height == 0:
            # a PD prefill server logs no decode lines: its prefill lines show the pool (and an excerpt may hold only them)
            s, u = usage_rows(run.prefill, o["min_prefill_rows"])
            lines = "prefill lines (the run logs no decode lines: a PD prefill server, or an excerpt of one)"
        if s is None:
            return
        hit = s.select([c for c in ("file", "line", u, "queue_req", "transfer_req", "inflight_req") if c in s.columns]).filter((pl.col(u) >= o["usage_at_least"]) & (pl.col("queue_req") > 0))
        share = hit.height / s.height
        if share < o["share"]:
            return
        usage = float(hit.get_column(u).median())
        queue = float(hit.get_column("queue_req").median())
        held = next(
            (
                f"; a median {float(hit.get_column(c).median()):g} requests hold their KV while it is sent to the decode server"
                for c in ("transfer_req", "inflight_req")
                if c in hit.columns and hit.get_column(c).drop_nulls().len() and hit.get_column(c).median()
            ),
            "",
        )
        ev = [
            row_evidence(hit.head(1).to_dicts()[0]),
            window_evidence(
                run, f"{share:.0%} of {s.height} {lines.split(' (')[0]} have token usage >= {o['usage_at_least']} and a queue (median usage {usage:.2f}, median queue {queue:g}; {facts.line_span(s)})"
            ),
        ]
        m = run.memory
        F, T, mfs = m.available_gpu_mem_gb, m.total_gb, m.mem_fraction_static
        kvd = str(run.args.get("kv_cache_dtype") or "")
        waiting = max((float(hit.get_column(c).median() or 0) for c in ("transfer_req", "inflight_req") if c in hit.columns and hit.get_column(c).drop_nulls().len()), default=0.0)
        if waiting > queue:
            fix = Fix(
                summary=f"Most of this prefill server's pool holds requests already prefilled and waiting to be sent (a median {waiting:g}, against {queue:g} queued): the decode side or the KV transfer is the bottleneck. Add decode capacity or check the transfer backend's throughput; a bigger prefill pool would only hold more waiting requests.",
                args={},
                safety=self.fix_safety,
            )
        elif F is not None and T and mfs is not None and F > o["target_gb"] + 1:
            new = floor_to(mfs + (F - o["target_gb"]) / T)
            fix = Fix(
                summary=f"Grow the KV pool: --mem-fraction-static {new:.2f} = {mfs:.2f} + ({F:.2f} - {o['target_gb']:.0f}) GB free / T {T:.1f} GB.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety=self.fix_safety,
            )
        elif kvd in ("auto", "bfloat16", "float16", "bf16", "fp16"):
            fix = Fix(summary="Fit about twice the tokens in the same memory: --kv-cache-dtype fp8_e4m3.", args={"--kv-cache-dtype": "fp8_e4m3"}, safety=self.fix_safety)
        else:
            fix = Fix(
                summary="More KV capacity is needed: an fp8 KV cache (--kv-cache-dtype fp8_e4m3) if not already used, or more GPUs with data parallelism (--dp or more replicas).",
                args={},
                safety=self.fix_safety,
            )
        msg = f"The KV cache is full (median token usage {usage:.2f}) while requests queue (median {queue:g}) in {share:.0%} of {lines}{held}: throughput is bound by KV capacity."
        yield self.finding(run, msg, ev, fix, share=round(share, 3))
