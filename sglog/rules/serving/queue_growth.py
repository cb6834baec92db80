"""SGL605 queue-growth: the request queue builds up in a window, while KV is idle (scheduler-bound) or full (capacity-bound)."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog import timeline
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule
from sglog.rules.serving import change


class QueueGrowth(Rule):
    """Requests pile up in the queue part-way through a run, and the KV usage says why.

    ## What it finds
    `#queue-req` of the batch lines (decode and prefill), in windows of the run (`window_s`; by
    lines in a log without timestamps): after at least `min_before` windows with `min_samples` batch
    lines each (the first is warm-up), `sustain` windows in a row whose median queue is at
    least `min_growth` requests above the earlier windows' median and at least `factor` x it.
    The token usage in those windows names the cause: at least `full_usage` -> capacity-bound
    (the KV pool is full, requests wait for memory); at most `idle_usage`, or `#running-req` at
    `--max-running-requests` -> scheduler-bound (memory is free, the scheduler does not admit
    them).  A queue that grows with usage between the two is left alone.

    ## Why it matters
    A queue that grows is time to first token that grows for every new request, and a server
    past its capacity.  The two causes have opposite fixes: a full pool needs more KV memory or
    less load; an idle pool with a queue needs a less pessimistic scheduler or a higher request
    cap, and more memory would change nothing.

    ## Evidence
    The first batch line of the earlier level, the first one of the growth, and the windows'
    median queue, token usage and running requests before and during it.

    ## Suggested fix
    Capacity-bound: grow the KV pool (`kv-headroom-wasted`, `--kv-cache-dtype fp8_e4m3`), add
    replicas (`--dp`, more servers behind the router) or lower the load.  Scheduler-bound:
    with `#running-req` at `--max-running-requests` raise the cap; else
    `--schedule-conservativeness 0.3` (SGLang's guide; see `scheduler-too-conservative`).

    ## Fix safety
    A higher cap or a less conservative scheduler admits more requests: more retractions when
    they run long (`kv-retraction`) and higher latency per request; a larger pool takes memory
    from activations (`kv-headroom-too-small`).

    ## Example
    Case: no queue for an hour, then 80 queued requests with the KV pool full (capacity-bound)

    `#queue-req: 0` for an hour, then `token usage: 0.97` with `#queue-req: 80`
    from 11:00: `The request queue grew from 0 to 80 (peak 80) from 11:00 until
    the log ends (11:19)`, and `Capacity-bound: KV usage was 0.97, the pool is
    full and requests wait for memory`; sglog says to grow the KV pool
    (`--kv-cache-dtype fp8_e4m3`), add replicas or lower the load.
    """

    code = "SGL605"
    name = "queue-growth"
    triggers = ("memory", "batches")
    severity = "warning"
    options = {
        **change.options(),
        "min_growth": Option(10, "queued requests above the earlier level that count"),
        "factor": Option(2.0, "times the earlier level the queue must reach"),
        "full_usage": Option(0.9, "token usage at or above which the pool is full (capacity-bound)"),
        "idle_usage": Option(0.6, "token usage at or below which the pool is idle (scheduler-bound)"),
    }

    def _check(self, run, o) -> Iterator:
        bw = timeline.batch_windows(run, o["window_s"])
        if bw.frame.height == 0 or not bw.frame.get_column("n_queue").sum():
            return
        ws = change.windows(bw, "n_queue", o)
        w = ws.frame.rename({"queue": "value", "running": "load", "running_max": "load_max"})
        if w.height < o["min_before"] + o["sustain"]:
            return
        q = w.get_column("value").to_list()
        ref = timeline.earlier_median(w.get_column("value")).to_list()

        def crossed(k: int, s: int) -> bool:
            r = ref[s]
            return r is not None and q[k] >= r + o["min_growth"] and q[k] >= o["factor"] * r

        hit = timeline.first_change(w.height, crossed, o["sustain"], o["min_before"])
        if hit is None:
            return
        s, e = hit
        dur, bef = w.slice(s, e - s + 1), w.slice(0, s)
        # (the windows that crossed have a queue length: after and peak are there)
        before, after = ref[s], facts.value(dur.get_column("value").median())
        peak = facts.value(dur.get_column("value").max())
        usage, running = facts.stat(dur.get_column("usage").median()), facts.stat(dur.get_column("load").median())
        cap = run.memory.max_running_requests
        top, low = facts.stat(dur.get_column("load_max").max()), facts.stat(dur.get_column("load").min())
        at_cap = cap is not None and top is not None and top >= cap
        assumed = ""
        if cap is None and top and low is not None and low >= top:
            # an excerpt without the summary line: #running-req pinned at one value while the queue grows is a cap
            cap, at_cap = int(top), True
            assumed = " (the log does not show --max-running-requests: a #running-req pinned at one value while the queue grows is taken as the cap)"
        if usage is not None and usage >= o["full_usage"]:
            kind, why = "capacity-bound", f"KV usage was {usage:.2f}, the pool is full and requests wait for memory"
            summary = "Capacity-bound: grow the KV pool (kv-headroom-wasted, --kv-cache-dtype fp8_e4m3), add replicas (--dp or more servers) or lower the load."
        elif at_cap:
            kind, why = (
                "scheduler-bound",
                (f"#running-req reached --max-running-requests ({cap}) with KV usage {usage:.2f}" if usage is not None else f"#running-req reached --max-running-requests ({cap})") + assumed,
            )
            summary = f"Scheduler-bound by the request cap: raise --max-running-requests above {cap} (scheduler-too-conservative computes a value)."
        elif usage is not None and usage <= o["idle_usage"]:
            kind, why = "scheduler-bound", f"KV usage was only {usage:.2f}, memory is free but the scheduler does not admit them"
            summary = "Scheduler-bound: --schedule-conservativeness 0.3 (SGLang's guide; see scheduler-too-conservative), or raise --max-running-requests if it is the limit."
        else:
            return
        first = change.first_row(run.batches, ws, w, s, pl.col("queue_req") >= before + o["min_growth"])
        sp = change.span(ws, s, e, w, first)
        rb = facts.stat(bef.get_column("load").median())
        load_words = f" (#running-req {running:.0f}, {rb:.0f} before)" if running is not None and rb is not None else ""
        msg = f"The request queue grew from {before:.0f} to {after:.0f} (peak {peak:.0f}) {sp.between}, {sp.before} of serving{load_words}. {kind.capitalize()}: {why}."
        note = f"median #queue-req per window ({change.width_words(ws.axis, ws.width)}): {before:.0f} over {s} windows before, {after:.0f} over {e - s + 1} windows from {sp.start}; token usage {'?' if usage is None else f'{usage:.2f}'}"
        fix = Fix(summary=summary, args={}, safety=self.fix_safety)
        yield self.finding(
            run, msg, change.evidence(run.batches, ws, w, s, note, run, first, sp), fix, **change.details("queue_req", sp, before, after, ws.width, bound=kind, usage=usage, running=running, peak=peak)
        )
