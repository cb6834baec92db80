"""SGL604 retraction-spike: retractions cluster in a window, far above the run's earlier rate."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog import timeline
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule
from sglog.rules.serving import change


class RetractionSpike(Rule):
    """Retractions cluster in one stretch of a run that rarely retracted before.

    ## What it finds
    Requests retracted per window of the run (`window_s`; by lines in a log without timestamps),
    counted from the retraction lines (`KV cache pool is full. Retract requests.`, their
    `#retracted_reqs`) and from the rises of the PD decode lines' `#retracted-req` gauge (the
    retracted requests waiting to be admitted again, per rank: a rise is new retractions, a
    lower bound); a window takes the larger of the two counts, so a server that prints both is
    not counted twice.  A window is served when it has `min_samples` batch or retraction lines.  After at
    least `min_before` served windows (the first is warm-up), `sustain` windows in a row with at
    least `min_count` retracted requests, at least `factor` x the earlier windows' mean and (on
    the time axis) more than `min_per_minute` a minute.

    ## Why it matters
    A retracted request loses its KV cache and is prefilled again later: a burst of them is a
    latency spike for every request in flight and prefill work done twice.  A burst at one
    moment, in a run that was fine before, is a load burst (more or longer requests) meeting a
    scheduler that admitted more than the pool could finish; `kv-retraction` judges the
    whole-run rate, this rule says when.

    ## Evidence
    The first batch line of the earlier level, the first line of the burst's window, and the
    counts per window with the token usage and load in both.

    ## Suggested fix
    `--schedule-conservativeness` = max(1.3, current x 1.3) (SGLang's guide, as `kv-retraction`
    computes it), so that the scheduler reserves more KV per admitted request; if bursts of
    long requests are the workload, grow the pool (`kv-headroom-wasted`, `--kv-cache-dtype
    fp8_e4m3`) or cap admissions (`--max-running-requests`).

    ## Fix safety
    A more conservative scheduler admits fewer requests at once: lower peak concurrency and
    slightly lower throughput when bursts are rare.

    ## Example
    Case: no retraction for an hour, then 36 requests retracted in five minutes (healthy for a long while, then a burst)

    No retraction for an hour, then `KV cache pool is full. Retract requests.
    #retracted_reqs: 3` every 20 s from 11:00: `Retractions clustered between
    11:00 and 11:03: 36 requests retracted (7.2/min) against 0.00/min in the 60
    min before`, and sglog suggests `--schedule-conservativeness 1.3` (from 1).
    """

    code = "SGL604"
    name = "retraction-spike"
    triggers = ("retraction", "args", "batches")
    severity = "warning"
    options = {
        **change.options(sustain=1),
        "min_count": Option(5, "retracted requests a window needs"),
        "factor": Option(4.0, "times the earlier windows' mean a window needs"),
        "min_per_minute": Option(1.0, "retracted requests per minute a window needs (time axis; SGLang's guide: about once a minute is fine)"),
    }

    def _check(self, run, o) -> Iterator:
        rt = timeline.retraction_series(run)
        if rt.height == 0:
            return
        ws = change.windows(timeline.retraction_windows(run, o["window_s"]), "served", o)
        w = ws.frame.rename({"retracted": "value"})
        if w.height < o["min_before"] + o["sustain"]:
            return
        v = w.get_column("value").cast(pl.Float64).to_list()
        ref = timeline.earlier_mean(w.get_column("value").cast(pl.Float64)).to_list()
        per_min = 60.0 / ws.width if ws.axis == "time" else None

        def crossed(k: int, s: int) -> bool:
            r = ref[s]
            if r is None or v[k] < o["min_count"] or v[k] < o["factor"] * r:
                return False
            return per_min is None or v[k] * per_min > o["min_per_minute"]

        hit = timeline.first_change(w.height, crossed, o["sustain"], o["min_before"])
        if hit is None:
            return
        s, e = hit
        before = ref[s]
        total = int(sum(v[s : e + 1]))
        first = change.first_row(rt, ws, w, s, pl.col("retracted") > 0)
        sp = change.span(ws, s, e, w, first)
        if per_min is not None:
            minutes = (e - s + 1) * ws.width / 60
            rate_a, rate_b = total / minutes, before * per_min
            counts = f"{total} requests retracted ({rate_a:.1f}/min) against {rate_b:.2f}/min in the {sp.before[len('after ') :]} before"
            after_value, before_value = round(rate_a, 3), round(rate_b, 3)
            metric = "retracted_per_min"
        else:
            counts = f"{total} requests retracted in {e - s + 1} windows of {ws.width:g} lines against {before:.2f} per window in the {sp.before[len('after ') :]} before"
            after_value, before_value = round(total / (e - s + 1), 3), round(before, 3)
            metric = "retracted_per_window"
        sources = set(rt.get_column("source").unique().to_list())
        how = " (from the #retracted-req gauge of the decode lines)" if sources == {"counter"} else ""
        msg = f"Retractions clustered {sp.between}: {counts}{how}."
        note = f"retracted requests per window ({change.width_words(ws.axis, ws.width)}): {total} over {e - s + 1} windows from {sp.start}; earlier mean {before:.2f} per window over {s} windows"
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        new = max(1.3, round(sc * 1.3, 2))
        fix = Fix(
            summary=f"Raise --schedule-conservativeness from {sc:g} to {new:g} so that a burst admits no more than the pool can finish; or grow the KV pool.",
            args={"--schedule-conservativeness": f"{new:g}"},
            safety=self.fix_safety,
        )
        yield self.finding(
            run, msg, change.evidence(rt, ws, w, s, note, run, first, sp), fix, **change.details(metric, sp, before_value, after_value, ws.width, retracted=total, sources=sorted(sources))
        )
