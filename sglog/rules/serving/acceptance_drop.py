"""SGL601 acceptance-drop: speculative acceptance falls, in a window, below the run's earlier level."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog import timeline
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule
from sglog.rules.serving import change


class AcceptanceDrop(Rule):
    """Speculative acceptance collapses part-way through a run that accepted well before.

    ## What it finds
    The decode lines' `accept len` (or `accept rate` when only it is printed), in windows of the
    run (`window_s`; a log without timestamps is cut by lines): after at least `min_before` windows
    with `min_samples` steady decode lines each (the first window is warm-up), `sustain` windows
    in a row whose median is at most `1 - drop` of the earlier windows' median and lower by at
    least `min_drop_len` tokens (accept len) or `min_drop_rate` (accept rate).  Windows before the
    load ramps up and after it stops (median `#running-req` under `quiet_load` of the run's
    median window) are left out.

    ## Why it matters
    Speculative decoding pays for its draft only while drafts are accepted: when the accept
    length falls from 3 to 1.4 the same GPUs deliver about half the tokens per second, and a
    whole-run median hides it when the run was healthy for an hour first.  A drop at one moment
    points at something that changed then: the traffic (a new client, another language or task
    than the draft was trained on), sampling settings (higher temperature), or the draft weights.

    ## Evidence
    The first decode line of the earlier level, the first one of the drop, and the windows'
    medians (before and after, with the load in both).

    ## Suggested fix
    Find what changed at the drop's start (the request mix, the sampling parameters, a weight
    update).  If the new traffic is here to stay, retrain or swap the draft for it, or use fewer
    draft steps (`--speculative-num-steps`) so that a failed draft costs less; see
    `speculation-unprofitable` for whether speculation still pays at the new accept length.

    ## Fix safety
    Fewer draft steps lower the best-case speed-up for the traffic that still accepts well.

    ## Example
    Case: accept len 3.0-3.2 for an hour, then 1.40 for 20 minutes (healthy for a long while, then collapsed)

    Decode lines at `accept len: 3.05` and `accept len: 3.15` from 10:00, then
    `accept len: 1.40` from 11:00 at the same `#running-req: 40`: `The accept
    length fell from 3.15 to 1.40 from 11:00 until the log ends (11:19), after 60
    min at 3.05-3.15`.  sglog says to find what changed at 11:00 (request mix,
    temperature, draft weights) and, if it stays, to retrain the draft or use
    fewer `--speculative-num-steps`.
    """

    code = "SGL601"
    name = "acceptance-drop"
    triggers = ("batches",)
    severity = "warning"
    options = {
        **change.options(),
        "drop": Option(0.25, "relative fall against the earlier level that counts (0.25: to 75% or less)"),
        "min_drop_len": Option(0.3, "smallest fall of the accept length that counts, in tokens"),
        "min_drop_rate": Option(0.05, "smallest fall of the accept rate that counts (when only it is printed)"),
        "quiet_load": Option(0.25, "windows whose median #running-req is under this share of the run's median window are ramp-up or tail"),
    }

    def _check(self, run, o) -> Iterator:
        dw = timeline.decode_windows(run, o["window_s"])
        f = dw.frame
        metric = next((c for c in ("accept_len", "accept_rate") if c in f.columns and f.get_column(f"n_{c}").sum()), None)
        if metric is None:
            return
        ws = change.windows(dw, f"n_{metric}", o)
        w = change.active(ws.frame.rename({metric: "value", "running": "load"}), o["quiet_load"])
        if w.height < o["min_before"] + o["sustain"]:
            return
        v = w.get_column("value").to_list()
        ref = timeline.earlier_median(w.get_column("value")).to_list()
        min_abs = o["min_drop_len"] if metric == "accept_len" else o["min_drop_rate"]

        def crossed(k: int, s: int) -> bool:
            r = ref[s]
            return r is not None and v[k] <= r * (1 - o["drop"]) and r - v[k] >= min_abs

        hit = timeline.first_change(w.height, crossed, o["sustain"], o["min_before"])
        if hit is None:
            return
        s, e = hit
        before, after = ref[s], facts.value(w.get_column("value").slice(s, e - s + 1).median())
        first = change.first_row(timeline.decode_series(run), ws, w, s, pl.col(metric) <= before * (1 - o["drop"]))
        sp = change.span(ws, s, e, w, first)
        word = "accept length" if metric == "accept_len" else "accept rate"
        rng = change.level_range(w.get_column("value").slice(0, s))
        loads = w.get_column("load")
        lb, la = facts.stat(loads.slice(0, s).median()), facts.stat(loads.slice(s, e - s + 1).median())
        load_words = f" (#running-req {lb:.0f} before, {la:.0f} during)" if lb is not None and la is not None else ""
        msg = f"The {word} fell from {before:.2f} to {after:.2f} {sp.between}, {sp.before} at {rng}{load_words}."
        note = f"median {metric} per window ({change.width_words(ws.axis, ws.width)}): {before:.2f} over {s} windows before, {after:.2f} over {e - s + 1} windows from {sp.start}"
        fix = Fix(
            summary=f"Find what changed at {sp.start} (the request mix, the sampling temperature, the draft weights); if it stays, retrain the draft for the new traffic or use fewer --speculative-num-steps.",
            args={},
            safety=self.fix_safety,
        )
        yield self.finding(
            run,
            msg,
            change.evidence(timeline.decode_series(run), ws, w, s, note, run, first, sp),
            fix,
            **change.details(metric, sp, round(before, 4), round(after, 4), ws.width, load_before=lb, load_after=la),
        )
