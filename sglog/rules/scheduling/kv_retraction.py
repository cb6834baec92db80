"""SGL201 kv-retraction: the KV pool fills up and the scheduler retracts running requests, more often than about once a minute."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, window_evidence


class KvRetraction(Rule):
    """The KV pool fills up and the scheduler retracts running requests, more often than about once a minute.

    ## What it finds
    `KV cache pool is full. Retract requests.` (`Decode out of memory
    happened.` in old versions) at least `min_count` times and more than
    `max_per_minute` times per minute of serving; or, however rare, a
    retraction followed within `crash_within_seconds` by a crash while
    serving, with no batch between them.

    ## Why it matters
    A retracted request loses its KV cache and is prefilled again later:
    wasted compute, latency spikes, and in bad cases a throughput collapse.
    SGLang's guide: about once a minute is fine, frequent retraction is not.

    ## Evidence
    The first retraction lines and the rate over the serving window.

    ## Suggested fix
    `--schedule-conservativeness` = max(1.3, current x 1.3) (the guide's
    value): the scheduler then reserves more KV per admitted request.  If the
    pool is simply too small grow it (`kv-headroom-wasted`,
    `cuda-graph-bs-oversized`, `--kv-cache-dtype fp8_e4m3`).

    ## Fix safety
    A more conservative scheduler admits fewer requests at once: lower peak
    concurrency, slightly lower throughput when retraction was rare.

    ## Example
    Case: six retractions in a minute of serving

    `KV cache pool is full. Retract requests. #retracted_reqs: 2` six times in a
    minute of serving at `token usage: 0.97`: the pool `filled up 6 times (6.0 per
    minute)`, `retracting 12 running requests`, and sglog suggests
    `--schedule-conservativeness 1.3` (from 1).
    """

    code = "SGL201"
    name = "kv-retraction"
    triggers = ("retraction", "args", "batches", "crash")
    severity = "warning"
    options = {
        "min_count": Option(3, "retractions needed before judging the rate"),
        "max_per_minute": Option(1.0, "acceptable retractions per minute of serving"),
        "crash_within_seconds": Option(30.0, "a retraction this close before a crash while serving (no batch between) is reported however rare"),
    }

    def _check(self, run, o) -> Iterator:
        evs = run.events_of("retraction")
        rts = list(itertools.compress(evs, map(operator.not_, facts.field_of(evs, "testing"))))
        if len(rts) < o["min_count"]:
            before = self._before_crash(run, rts, o)
            if before is not None:
                yield before
            return
        minutes = facts.serving_minutes(run)
        ts = list(filter(None, map(operator.attrgetter("ts"), rts)))
        if ts and len(ts) > 1:
            span = (max(ts) - min(ts)).total_seconds() / 60
            minutes = max(minutes or 0, span)
        minutes = max(minutes or 0.0, 1.0)
        rate = len(rts) / minutes
        if rate <= o["max_per_minute"]:
            return
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        new = max(1.3, round(sc * 1.3, 2))
        retracted = sum(filter(None, facts.field_of(rts, "retracted_reqs")))
        ev = [event_evidence(e) for e in rts[:3]]
        ev.append(window_evidence(run, f"{len(rts)} retractions ({retracted} requests) in {minutes:.1f} min of serving = {rate:.1f}/min"))
        msg = f"The KV pool filled up {len(rts)} times ({rate:.1f} per minute), retracting {retracted} running requests that must be prefilled again."
        fix = Fix(
            summary=f"Raise --schedule-conservativeness from {sc:g} to {new:g} so fewer requests are admitted than the pool can finish; or grow the KV pool.",
            args={"--schedule-conservativeness": f"{new:g}"},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, rate_per_min=round(rate, 3))

    def _before_crash(self, run, rts, o):
        """Too few retractions for a rate, but the last one came just before the crash: the pool ran out
        and the next step died (retraction paths are where speculative decoding's bookkeeping breaks)."""
        c = facts.crash(run)
        if c is None or not rts or c.phase not in (None, "launch", "serving", "prefill", "decode", "forward"):
            return None  # (a retraction happens only while serving: a tail that shows no startup is serving)
        rc = c.event
        label = rc.rank.label if rc.rank else None
        last = next((e for e in reversed(rts) if (e.file, e.line) < (rc.file, rc.line) and (label is None or e.rank is None or e.rank.label == label)), None)
        if last is None:
            return None
        tail, _counts = facts.batches_before(run, rc.file, rc.line, 1)
        if tail and tail[-1].get("line", 0) > last.line:
            return None  # the server kept serving after the retraction
        gap = (rc.ts - last.ts).total_seconds() if rc.ts is not None and last.ts is not None else None
        if gap is not None and gap > o["crash_within_seconds"]:
            return None
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        new = max(1.3, round(sc * 1.3, 2))
        n = last.get("retracted_reqs")
        when = f"{gap:.0f} s before the crash" if gap is not None else "right before the crash"
        msg = (
            f"The KV pool ran out while serving: {n if n is not None else 'running'} request(s) were retracted {when}, with no batch logged between them"
            + (f" ({len(rts)} retraction{'s' if len(rts) != 1 else ''} in the log)" if len(rts) > 1 else "")
            + "; the crash is in the step after the retraction."
        )
        fix = Fix(
            summary=f"Keep the pool from running out: raise --schedule-conservativeness from {sc:g} to {new:g} (fewer requests admitted than the pool can finish), or grow the KV pool. If the same crash follows a retraction again, report its traceback upstream: the retraction path is where it broke.",
            args={"--schedule-conservativeness": f"{new:g}"},
            safety=self.fix_safety,
        )
        return self.finding(run, msg, [event_evidence(last, note="the last retraction"), event_evidence(rc, note="the crash that followed")], fix, before_crash=True)
