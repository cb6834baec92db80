"""SGL603 cache-hit-collapse: the prefix-cache hit share of prefill batches collapses in a window."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog import timeline
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule
from sglog.rules.serving import change


class CacheHitCollapse(Rule):
    """The prefix cache stops hitting part-way through a run that reused prefixes well before.

    ## What it finds
    The prefill lines' prefix-cache hit share, `#cached-token / (#cached-token + #new-token)`
    summed over a window's prefill batches (every version prints both counts), in
    windows of the run (`window_s`; by lines in a log without timestamps): after at least
    `min_before` windows with `min_samples` prefill lines each (the first is warm-up) and an
    earlier level of at least `min_level`, `sustain` windows in a row at most `1 - drop` of the
    earlier windows' median and lower by at least `min_drop`.

    ## Why it matters
    Every cached token is prefill work not done: a run whose requests shared system prompts or
    conversation history and stops reusing them pays the whole prompt again, so time to first
    token and the prefill load rise together.  A collapse at one moment means the cache was
    flushed (`/flush_cache`, a weight update), evicted (a full KV pool evicts the radix tree
    first), or the traffic changed (new prompts, a router that stopped sending a session to the
    same server).

    ## Evidence
    The first prefill line of the earlier level, the first one of the collapse, and the
    windows' hit shares, with the token usage and the new tokens per prefill line in both.

    ## Suggested fix
    If token usage is at the top in the collapse: the pool is too small to keep the prefixes,
    grow it (`kv-headroom-wasted`, `--kv-cache-dtype fp8_e4m3`) or lower the load.  Otherwise
    look at what changed then: a cache flush or weight update, a new prompt template, or the
    router's session affinity (cache-aware routing in sglang-router); `--schedule-policy lpm`
    (the default) keeps reuse high when prefixes repeat.

    ## Fix safety
    A larger pool takes memory from activations (see `kv-headroom-too-small`); the other
    advice changes nothing by itself.

    ## Example
    Case: 75% of prefill tokens cached for an hour, then 5% with the pool full (healthy for a long while, then collapsed)

    Prefill lines with `#new-token: 2048, #cached-token: 6144` for an hour, then
    `#new-token: 7782, #cached-token: 410, token usage: 0.98` from 11:00: `The
    prefix-cache hit share of prefill batches fell from 75% to 5% from 11:00
    until the log ends (11:19)`; with `token usage 0.98 (0.40 before)`, sglog
    says `the KV pool is too small to keep the shared prefixes`.
    """

    code = "SGL603"
    name = "cache-hit-collapse"
    triggers = ("batches",)
    severity = "warning"
    options = {
        **change.options(),
        "drop": Option(0.5, "relative fall against the earlier hit share that counts (0.5: to half or less)"),
        "min_drop": Option(0.2, "smallest fall of the hit share that counts (0.2 = 20 points)"),
        "min_level": Option(0.3, "earlier hit share needed (a cache that hardly hit cannot collapse)"),
    }

    def _check(self, run, o) -> Iterator:
        bw = timeline.batch_windows(run, o["window_s"])
        if bw.frame.height == 0 or not bw.frame.get_column("n_prefill").sum():
            return
        ws = change.windows(bw, "n_prefill", o)
        share = (pl.col("cached_tokens") / (pl.col("cached_tokens") + pl.col("new_tokens")).clip(1)).alias("value")
        w = ws.frame.with_columns(share).rename({"new_per_prefill": "new", "prefill_usage": "usage_p"}).drop("usage").rename({"usage_p": "usage"})
        if w.height < o["min_before"] + o["sustain"]:
            return
        v = w.get_column("value").to_list()
        ref = timeline.earlier_median(w.get_column("value")).to_list()

        def crossed(k: int, s: int) -> bool:
            r = ref[s]
            return r is not None and r >= o["min_level"] and v[k] <= r * (1 - o["drop"]) and r - v[k] >= o["min_drop"]

        hit = timeline.first_change(w.height, crossed, o["sustain"], o["min_before"])
        if hit is None:
            return
        s, e = hit
        before = ref[s]
        dur, bef = w.slice(s, e - s + 1), w.slice(0, s)
        after = facts.value(dur.get_column("value").median())  # (the windows that crossed have a share)
        row_share = pl.col("cached_token") / (pl.col("cached_token") + pl.col("new_token")).clip(1)
        first = change.first_row(run.prefill, ws, w, s, row_share <= before * (1 - o["drop"]))
        sp = change.span(ws, s, e, w, first)
        rng = change.level_range(bef.get_column("value") * 100, "%")
        u0, u1 = facts.stat(bef.get_column("usage").median()), facts.stat(dur.get_column("usage").median())
        n0, n1 = facts.stat(bef.get_column("new").median()), facts.stat(dur.get_column("new").median())
        said = []
        full = u1 is not None and u1 >= 0.9
        if u1 is not None and u0 is not None and (full or abs(u1 - u0) >= 0.1):
            said.append(f"token usage {u1:.2f} ({u0:.2f} before)")
        if n1 is not None and n0 and not 2 / 3 <= n1 / n0 <= 1.5:
            said.append(f"{n1:,.0f} new tokens per prefill line ({n0:,.0f} before)")
        msg = (
            f"The prefix-cache hit share of prefill batches fell from {before:.0%} to {after:.0%} {sp.between}, {sp.before} at {rng}" + (f"; in those windows {', '.join(said)}" if said else "") + "."
        )
        note = (
            f"cached / (cached + new) prefill tokens per window ({change.width_words(ws.axis, ws.width)}): {before:.0%} over {s} windows before, {after:.0%} over {e - s + 1} windows from {sp.start}"
        )
        if full:
            summary = f"Token usage is {u1:.2f} in the collapse: the KV pool is too small to keep the shared prefixes; grow it (kv-headroom-wasted, --kv-cache-dtype fp8_e4m3) or lower the load."
        else:
            summary = f"Find what changed at {sp.start}: a cache flush or weight update, a new prompt template, or the router no longer sending a session to the same server (cache-aware routing)."
        fix = Fix(summary=summary, args={}, safety=self.fix_safety)
        yield self.finding(
            run,
            msg,
            change.evidence(run.prefill, ws, w, s, note, run, first, sp),
            fix,
            **change.details("prefix_cache_hit_share", sp, round(before, 4), round(after, 4), ws.width, usage_before=u0, usage_after=u1),
        )
