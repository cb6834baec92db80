"""SGL503 slow-weight-loading: loading the weights took minutes."""

from __future__ import annotations

import json
from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence


class SlowWeightLoading(Rule):
    """Loading the weights took minutes.

    ## What it finds
    A weight-loading phase (target or draft) longer than `max_seconds` on its
    slowest rank (`Load weight end. elapsed=` or the timestamps of `Load
    weight begin/end`).

    ## Why it matters
    Every restart (a crash, a config change, a scale-up) pays it again.  It is
    usually storage- or page-cache-bound: network filesystems, a cold cache,
    each TP rank reading the checkpoint; the story's Kimi-K2.5 took 584-900 s.

    ## Evidence
    The `Load weight begin` and `Load weight end` lines of the slowest rank.

    ## Suggested fix
    Multi-threaded loading: `--model-loader-extra-config
    '{"enable_multithread_load": true, "num_threads": 8}'` (threads doubled,
    up to 64, when it is already on).  Load rate = weights per rank x TP /
    seconds; the fix reports the time at 2 and 5 GB/s.  Keep the checkpoint on
    local NVMe and the page cache warm; pre-sharded checkpoints avoid every
    rank reading every file.

    ## Fix safety
    More loader threads use more host memory and I/O bandwidth; on a saturated
    network filesystem they may not help.

    ## Example
    Case: 584 s to load Kimi-K2.5 on TP8 (story item 7)

    `Load weight end. elapsed=584.31 s, ... mem usage=72.33 GB` on TP8: `579 GB
    at 0.99 GB/s`.  sglog suggests loading with 8 threads
    (`--model-loader-extra-config '{"enable_multithread_load": true,
    "num_threads": 8}'`) from local NVMe: `at 2-5 GB/s it would take 116-289 s`.
    """

    code = "SGL503"
    name = "slow-weight-loading"
    triggers = ("weight_load_begin", "weight_load_end", "args", "memory", "startup")
    severity = "warning"
    options = {"max_seconds": Option(300.0, "weight loading slower than this is reported")}

    def _check(self, run, o) -> Iterator:
        phases = run.startup.phases if run.startup else {}
        for key, what in (("weight_load", "weights"), ("draft_weight_load", "draft weights")):
            ph = phases.get(key)
            if ph is None or ph.duration is None or ph.duration <= o["max_seconds"]:
                continue
            rank = ph.slowest_rank
            begin = end = None
            for e in run.events_of("weight_load_begin", "weight_load_end"):
                label = e.rank.label if e.rank else "-"
                if label != rank:
                    continue
                if e.kind == "weight_load_begin" and begin is None and (key == "weight_load" or (e.ts and ph.per_rank[rank].start and e.ts >= ph.per_rank[rank].start)):
                    begin = e
                if e.kind == "weight_load_end" and begin is not None and end is None and (e.file, e.line) > (begin.file, begin.line):
                    end = e
            ev = [event_evidence(x) for x in (begin, end) if x is not None]
            per_rank_gb = (end.get("mem_usage") if end is not None else None) or (run.memory.target_weights_gb if key == "weight_load" else run.memory.draft_weights_gb)
            tp = facts.tp_size(run)
            rate = ""
            at = ""
            if per_rank_gb:
                total = per_rank_gb * tp
                rate = f" ({total:.0f} GB at {total / ph.duration:.2f} GB/s)"
                at = f"; at 2-5 GB/s it would take {total / 5:.0f}-{total / 2:.0f} s"
            cfg = run.args.get("model_loader_extra_config")
            threads = 8
            try:
                cur = json.loads(cfg) if isinstance(cfg, str) and cfg.strip() else (cfg if isinstance(cfg, dict) else {})
            except ValueError:
                cur = {}
            if cur.get("enable_multithread_load"):
                threads = min(64, 2 * int(cur.get("num_threads") or 8))
            value = json.dumps({**cur, "enable_multithread_load": True, "num_threads": threads})
            msg = f"Loading the {what} took {ph.duration:.0f} s{f' on {rank}' if rank and rank != '-' else ''}{rate}."
            fix = Fix(
                summary=f"Load with {threads} threads (--model-loader-extra-config '{value}'), keep the checkpoint on local NVMe with a warm page cache{at}.",
                args={"--model-loader-extra-config": value},
                safety=self.fix_safety,
            )
            yield self.finding(run, msg, ev, fix, seconds=round(ph.duration, 1), phase=key)
