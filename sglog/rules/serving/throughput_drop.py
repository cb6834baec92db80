"""SGL602 throughput-drop: decode throughput falls, in a window, against the run's rolling best at a like load."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog import timeline
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule
from sglog.rules.serving import change


class ThroughputDrop(Rule):
    """Decode throughput collapses part-way through a run while the load stays the same.

    ## What it finds
    The decode lines' `gen throughput (token/s)`, in windows of the run (`window_s`; by lines in
    a log without timestamps): after at least `min_before` windows with `min_samples` steady decode
    lines each (the first is warm-up), `sustain` windows in a row whose median is at most
    `1 - drop` of the rolling best (the best median held over `sustain` windows in a row
    before), while the load (median `#running-req`) is at least `1 - load_tol` of the load the
    best was held at.  A quieter period (fewer running requests) is not a drop, and windows
    before the load ramps up or after it stops (median `#running-req` under `quiet_load` of the
    run's median window) are left out.

    ## Why it matters
    The same number of running requests decoding at half the speed means each user waits twice
    as long per token, and a whole-run median hides it when the run was fast for an hour first.
    What else changed in the same windows usually names the cause: decode batches that no
    longer fit the captured CUDA graphs, a full KV pool (retractions), acceptance that fell
    (speculative decoding), contexts that grew, or something else on the GPU.

    ## Evidence
    The first decode line of the best level, the first one of the drop, and the windows'
    medians (throughput, load, CUDA-graph share, token usage, tokens per request, accept
    length) before and during the drop.

    ## Suggested fix
    Follow what changed with it: CUDA graphs no longer used -> raise `--cuda-graph-max-bs` to
    the batch size (see `decode-batch-exceeds-cuda-graph`); KV usage at the top -> see
    `kv-retraction` and `kv-capacity-bound`; accept length fell -> `acceptance-drop`; tokens per
    running request grew -> the workload's contexts grew (expected); none of these -> look
    outside SGLang at that time (another process on the GPU, clocks, thermal throttling).

    ## Fix safety
    The advice only names where to look; each linked rule's fix has its own cost.

    ## Example
    Case: 900 token/s at 40 running requests for an hour, then 450 at 40 with CUDA graphs off (healthy for a long while, then collapsed)

    `gen throughput (token/s): 905.00`-`930.00` with `cuda graph: True` for an
    hour, then `gen throughput (token/s): 450.00` with `cuda graph: False` from
    11:00: `Decode throughput fell from 930 to 450 token/s from 11:00 until the
    log ends (11:19) at #running-req 36 (best at 30)`, and `CUDA graphs ran in 0%
    of decode lines (100% before)`, so sglog says to raise
    `--cuda-graph-max-bs` to the batch size.
    """

    code = "SGL602"
    name = "throughput-drop"
    triggers = ("batches",)
    severity = "warning"
    options = {
        **change.options(),
        "drop": Option(0.4, "fall against the rolling best that counts (0.4: to 60% or less)"),
        "load_tol": Option(0.3, "how much lower the load may be than at the best for the two to compare (0.3: 70% of it or more)"),
        "quiet_load": Option(0.25, "windows whose median #running-req is under this share of the run's median window are ramp-up or tail"),
    }

    def _check(self, run, o) -> Iterator:
        dw = timeline.decode_windows(run, o["window_s"])
        if dw.frame.height == 0 or not dw.frame.get_column("n_gen_throughput").sum() or dw.frame.get_column("running").null_count() == dw.frame.height:
            return
        ws = change.windows(dw, "n_gen_throughput", o)
        w = change.active(ws.frame.rename({"gen_throughput": "value", "running": "load", "accept_len": "accept", "tokens_per_req": "per_req"}), o["quiet_load"])
        w = w.filter(pl.col("load").is_not_null())
        if w.height < o["min_before"] + o["sustain"]:
            return
        v, load = w.get_column("value").to_list(), w.get_column("load").to_list()
        best = timeline.earlier_best(w.get_column("value"), w.get_column("load"), o["sustain"])
        top_at, load_at = best.get_column("best").to_list(), best.get_column("best_load").to_list()

        def crossed(k: int, s: int) -> bool:
            b, bl = top_at[s], load_at[s]
            return b is not None and bl is not None and v[k] <= b * (1 - o["drop"]) and load[k] >= (1 - o["load_tol"]) * bl

        hit = timeline.first_change(w.height, crossed, o["sustain"], o["min_before"])
        if hit is None:
            return
        s, e = hit
        top, top_load = top_at[s], load_at[s]
        dur = w.slice(s, e - s + 1)
        bef = w.slice(0, s)
        after, la = facts.value(dur.get_column("value").median()), facts.value(dur.get_column("load").median())
        first = change.first_row(timeline.decode_series(run), ws, w, s, pl.col("gen_throughput") <= top * (1 - o["drop"]))
        sp = change.span(ws, s, e, w, first)
        same = "the same load" if abs(la - top_load) <= 0.1 * max(top_load, 1) else f"#running-req {la:.0f} (best at {top_load:.0f})"
        causes, fix_hint = self._causes(bef, dur)
        msg = f"Decode throughput fell from {top:.0f} to {after:.0f} token/s {sp.between} at {same}, {sp.before} of serving" + (f"; in those windows {causes}" if causes else "") + "."
        note = f"median gen throughput per window ({change.width_words(ws.axis, ws.width)}): best held {top:.0f} token/s at #running-req {top_load:.0f}; {after:.0f} over {e - s + 1} windows from {sp.start} at #running-req {la:.0f}"
        fix = Fix(summary=fix_hint, args={}, safety=self.fix_safety)
        yield self.finding(
            run,
            msg,
            change.evidence(timeline.decode_series(run), ws, w, s, note, run, first, sp),
            fix,
            **change.details("gen_throughput", sp, round(top, 2), round(after, 2), ws.width, load_before=top_load, load_after=la),
        )

    @staticmethod
    def _causes(bef: pl.DataFrame, dur: pl.DataFrame) -> tuple[str, str]:
        """(what else changed in the drop's windows, in words; where to look)."""

        def med(f, c):
            return f.get_column(c).median() if c in f.columns and f.get_column(c).drop_nulls().len() else None

        said, hints = [], []
        g0, g1 = med(bef, "graph"), med(dur, "graph")
        if g0 is not None and g1 is not None and g0 - g1 >= 0.3:
            said.append(f"CUDA graphs ran in {g1:.0%} of decode lines ({g0:.0%} before)")
            hints.append("decode batches no longer fit the captured CUDA graphs: raise --cuda-graph-max-bs to the batch size (decode-batch-exceeds-cuda-graph)")
        u0, u1 = med(bef, "usage"), med(dur, "usage")
        if u0 is not None and u1 is not None and u1 >= 0.9 and u1 - u0 >= 0.1:
            said.append(f"token usage was {u1:.2f} ({u0:.2f} before)")
            hints.append("the KV pool is full: see kv-retraction and kv-capacity-bound")
        a0, a1 = med(bef, "accept"), med(dur, "accept")
        if a0 is not None and a1 is not None and a1 <= 0.8 * a0:
            said.append(f"accept length was {a1:.2f} ({a0:.2f} before)")
            hints.append("speculative acceptance fell: see acceptance-drop")
        p0, p1 = med(bef, "per_req"), med(dur, "per_req")
        if p0 and p1 is not None and p1 >= 1.5 * p0:
            said.append(f"each running request held {p1:,.0f} tokens ({p0:,.0f} before)")
            hints.append("contexts grew: longer sequences decode slower (expected for this traffic)")
        if not hints:
            hints.append("nothing in the decode lines changed with it: look outside SGLang at that time (another process on the GPU, clocks, thermal throttling)")
        hint = "; ".join(hints)
        return ", ".join(said), hint[:1].upper() + hint[1:] + "."
