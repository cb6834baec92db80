"""SGL202 scheduler-too-conservative: requests wait in the queue while most of the KV cache is idle."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, row_evidence, window_evidence
from sglog.rules.scheduling.usage import steady_usage


class SchedulerTooConservative(Rule):
    """Requests wait in the queue while most of the KV cache is idle.

    ## What it finds
    Steady-state decode lines (at least `min_rows`) where `token usage <
    usage_below` *and* `#queue-req > 0` in at least `share` of the lines.

    ## Why it matters
    The scheduler reserves KV for each request's full `max_new_tokens`; when
    requests stop early (EOS, stop strings) the reservation is pessimistic and
    requests wait although memory is free.  Or the request cap
    (`max_running_requests`) is the limit, not the memory.

    ## Evidence
    The decode window (share of lines with idle KV and a queue) and one such line.

    ## Suggested fix
    If `#running-req` sits at `max_running_requests`: raise the cap to
    `0.9 x max_total_num_tokens / (tokens per running request)` (median of
    `#token / #running-req`), at most 4x.  Otherwise
    `--schedule-conservativeness 0.3` (SGLang's guide).

    ## Fix safety
    A less conservative scheduler retracts more when requests do run long (see
    `kv-retraction`); a higher request cap raises latency per request and,
    with speculative decoding, needs graphs for the larger batches.

    ## Example
    Case: requests queue at 45% token usage

    Decode lines at `token usage: 0.45` with `#queue-req: 30`: requests queue
    `while the KV cache is only 45% used in 100% of steady decode lines`, and
    sglog suggests `--schedule-conservativeness 0.3` (from 1, SGLang's tuning
    guide).
    """

    code = "SGL202"
    name = "scheduler-too-conservative"
    triggers = ("args", "memory", "batches")
    severity = "warning"
    options = {"min_rows": Option(10, "steady decode lines needed"), "usage_below": Option(0.9, "token usage that counts as idle"), "share": Option(0.5, "share of lines with idle KV and a queue")}

    def _check(self, run, o) -> Iterator:
        s, u = steady_usage(run, o["min_rows"])
        if s is None:
            return
        idle = (pl.col(u) < o["usage_below"]) & (pl.col("queue_req") > 0)
        share = s.select(idle.sum()).item() / s.height  # (counted first: most runs stop here, no copy)
        if share < o["share"]:
            return
        hit = s.filter(idle)
        m = run.memory
        mrr = m.max_running_requests
        usage = float(hit.get_column(u).median())
        queue = float(hit.get_column("queue_req").median())
        ev = [
            row_evidence(hit.head(1).to_dicts()[0]),
            window_evidence(
                run, f"{share:.0%} of {s.height} steady decode lines have token usage < {o['usage_below']} and a queue (median usage {usage:.2f}, median queue {queue:g}; {facts.line_span(s)})"
            ),
        ]
        at_cap = mrr is not None and "running_req" in hit.columns and (hit.get_column("running_req") >= mrr).mean() >= 0.5
        if at_cap:
            tok_col = "token" if "token" in hit.columns else "full_token" if "full_token" in hit.columns else None
            per_req = None
            if tok_col is not None:
                r = hit.filter(pl.col("running_req") > 0)
                if r.height:
                    per_req = float((r.get_column(tok_col) / r.get_column("running_req")).median())
            if per_req and m.max_total_num_tokens:
                new = int(min(4 * mrr, 0.9 * m.max_total_num_tokens / max(per_req, 1.0)))
                if new > mrr:
                    msg = f"Requests queue (median {queue:g}) while the KV cache is {usage:.0%} used: #running-req is pinned at max_running_requests={mrr}."
                    fix = Fix(
                        summary=f"Raise --max-running-requests from {mrr} to {new} = 0.9 x {m.max_total_num_tokens:,} pool tokens / {per_req:.0f} tokens per running request.",
                        args={"--max-running-requests": str(new)},
                        safety=self.fix_safety,
                    )
                    yield self.finding(run, msg, ev, fix, share=round(share, 3))
                    return
            return
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        if sc <= 0.3:
            return
        msg = f"Requests queue (median {queue:g}) while the KV cache is only {usage:.0%} used in {share:.0%} of steady decode lines: the scheduler reserves more than requests use."
        fix = Fix(
            summary=f"Lower --schedule-conservativeness from {sc:g} to 0.3 (SGLang's tuning guide) so the scheduler admits more requests.",
            args={"--schedule-conservativeness": "0.3"},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, share=round(share, 3))
