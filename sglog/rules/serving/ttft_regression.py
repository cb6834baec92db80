"""SGL606 ttft-regression: time to first token rises, in a window, against the run's earlier level."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog import timeline
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule
from sglog.rules.serving import change


class TtftRegression(Rule):
    """Time to first token climbs part-way through a run that answered fast before.

    ## What it finds
    The time to first token of finished requests (`--log-requests` `Finish:` lines, text or
    JSON: the output's `meta_info`, its `ttft` when printed, else `prefill_finished_ts -
    request_received_ts`, which SGLang adds with `--enable-metrics`), in windows of the run
    (`window_s`; by lines when the request lines have no timestamps): after at least
    `min_before` windows with `min_samples` requests each (the first is warm-up), `sustain`
    windows in a row whose median is at least `factor` x the earlier windows' median and higher
    by at least `min_rise` seconds.

    ## Why it matters
    Time to first token is what a user of a chat or agent service waits before anything
    happens; a run that answered in 0.3 s for an hour and then in 4 s has a problem that a
    whole-run median calls mild.  It rises when requests queue (load beyond capacity, a full KV
    pool, a scheduler that admits too little), when prefill work grows (a lost prefix cache,
    longer prompts) or when decode batches crowd out prefill.

    ## Evidence
    The first request line of the earlier level, the first one of the rise, and the windows'
    medians, with the batch lines' median queue in both when the run has them.

    ## Suggested fix
    Look at the same windows' other findings: `queue-growth` (capacity- or scheduler-bound),
    `cache-hit-collapse`, `retraction-spike`.  Without one of them, longer prompts are the
    usual cause: a smaller `--chunked-prefill-size` interleaves long prefills with decoding,
    and a larger pool or more replicas absorb the load.

    ## Fix safety
    The advice only names where to look; each linked rule's fix has its own cost.

    ## Example
    Case: TTFT 0.30 s for an hour, then 4.10 s for 20 minutes (healthy for a long while, then regressed)

    Finished requests whose metrics give a 0.30 s time to first token for an
    hour, then 4.10 s from 11:00: `Time to first token rose from 0.30 s to 4.10 s
    from 11:00 until the log ends (11:19), after 60 min at 0.30 s`; sglog points
    at what else changed at 11:00 (`queue-growth, cache-hit-collapse,
    retraction-spike`).
    """

    code = "SGL606"
    name = "ttft-regression"
    triggers = ("request_log", "batches")
    severity = "warning"
    options = {
        **change.options(),
        "factor": Option(2.0, "times the earlier level that counts"),
        "min_rise": Option(0.5, "smallest rise that counts, in seconds"),
    }

    def _check(self, run, o) -> Iterator:
        r = timeline.request_series(run)
        if r.height == 0:
            return
        ws = change.windows(timeline.request_windows(run, o["window_s"]), "n", o)
        w = ws.frame.rename({"ttft": "value"})
        if w.height < o["min_before"] + o["sustain"]:
            return
        v = w.get_column("value").to_list()
        ref = timeline.earlier_median(w.get_column("value")).to_list()

        def crossed(k: int, s: int) -> bool:
            b = ref[s]
            return b is not None and v[k] >= o["factor"] * b and v[k] - b >= o["min_rise"]

        hit = timeline.first_change(w.height, crossed, o["sustain"], o["min_before"])
        if hit is None:
            return
        s, e = hit
        before, after = ref[s], facts.value(w.get_column("value").slice(s, e - s + 1).median())
        first = change.first_row(r, ws, w, s, pl.col("ttft") >= before + o["min_rise"])
        sp = change.span(ws, s, e, w, first)
        rng = change.level_range(w.get_column("value").slice(0, s))
        queue = self._queue(run, ws, s, e, w)
        msg = f"Time to first token rose from {before:.2f} s to {after:.2f} s {sp.between}, {sp.before} at {rng} s" + (f"; {queue}" if queue else "") + "."
        note = f"median TTFT of finished requests per window ({change.width_words(ws.axis, ws.width)}): {before:.2f} s over {s} windows before, {after:.2f} s over {e - s + 1} windows from {sp.start}"
        fix = Fix(
            summary=f"Look at what else changed at {sp.start} (queue-growth, cache-hit-collapse, retraction-spike); without one of them, longer prompts: a smaller --chunked-prefill-size, a larger pool or more replicas.",
            args={},
            safety=self.fix_safety,
        )
        yield self.finding(
            run,
            msg,
            change.evidence(r, ws, w, s, note, run, first, sp),
            fix,
            **change.details("ttft_s", sp, round(before, 4), round(after, 4), ws.width, requests=int(w.get_column("n").slice(s, e - s + 1).sum())),
        )

    @staticmethod
    def _queue(run, ws: change.Windows, s: int, e: int, w: pl.DataFrame) -> str:
        """The batch lines' median queue before and during the rise (time axis only), in words."""
        b = run.batches
        if ws.axis != "time" or b.height == 0 or "queue_req" not in b.columns or "ts" not in b.columns:
            return ""
        t0, t1, tb = w["t_start"][s], w["t_end"][e], w["t_start"][0]
        q = b.select(
            pl.col("queue_req").filter((pl.col("ts") >= tb) & (pl.col("ts") < t0)).median().alias("before"),
            pl.col("queue_req").filter((pl.col("ts") >= t0) & (pl.col("ts") <= t1)).median().alias("during"),
        ).row(0)
        if q[0] is None or q[1] is None:
            return ""
        return f"the batch lines' median #queue-req was {q[1]:.0f} ({q[0]:.0f} before)"
