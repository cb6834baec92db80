"""SGL113 hybrid-pool-full: a hybrid model's SWA or mamba pool fills up before its full-attention KV pool."""

from __future__ import annotations

import math
from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules.base import Option, event_evidence, row_evidence, window_evidence
from sglog.rules.ownership import SIGNATURE, CrashRule
from sglog.rules.said import said

# the usage column of each hybrid pool in the batch lines, and SGLang's flag that sizes it
POOLS = {"swa": "swa_token_usage", "mamba": "mamba_usage"}
RATIO_FLAG = {"swa": "--swa-full-tokens-ratio", "mamba": "--mamba-full-memory-ratio"}
RATIO_ARG = {"swa": "swa_full_tokens_ratio", "mamba": "mamba_full_memory_ratio"}
RATIO_DEFAULT = {"swa": 0.8, "mamba": 0.9}  # ServerArgs defaults (0.5.x)
POOL_WORDS = {"swa": "sliding-window (SWA)", "mamba": "mamba state"}


class HybridPoolFull(CrashRule):
    """A hybrid model's SWA or mamba pool fills up (or cannot hold a request) while the full KV pool has room.

    ## What it finds
    Hybrid models (sliding-window attention, mamba / linear attention) keep a
    second pool beside the full-attention KV pool, sized from it by
    `--swa-full-tokens-ratio` or `--mamba-full-memory-ratio`.  It finds: batch
    lines whose `swa token usage` or `mamba usage` reaches `full_usage` on at
    least `min_rows` lines while `full token usage` stays at least `gap`
    lower (retractions in the same stretch are counted); and SGLang's own
    messages: `SWA pool (N tokens) cannot hold even one request`, `SWA pool
    cap ... leaves no room for the full KV pool`, `max_running_requests is
    capped to N by the mamba state cache`, `MLX auxiliary-state cache is too
    small`, `Request ... exceeds the unified FULL/SWA KV byte budget`.  A
    startup message that ended the run is its crash.  A pool that cannot
    serve at all is an error, a full pool while serving a warning, a cap on
    concurrency an info.

    ## Why it matters
    The scheduler admits a request only when every pool has room: a full
    second pool stops admission, retracts running requests and queues the
    rest, while the full-attention KV pool (the number most tuning looks at)
    still looks half empty.  Raising `--mem-fraction-static` helps little;
    the split between the pools is what is wrong.

    ## Evidence
    The fullest batch line, the retractions in the stretch, or SGLang's
    message; a summary with the pools' peak usage and the lines counted.

    ## Suggested fix
    Give the second pool a larger share: `ratio_new = min(1, ratio x target /
    full_peak)`, where `ratio` is the run's `--swa-full-tokens-ratio` (default
    0.8) or `--mamba-full-memory-ratio` (default 0.9), `full_peak` the full
    pool's usage when the second pool was full and `target` (0.9) the usage
    the full pool may reach, rounded to 0.05; when both pools are full
    (`ratio_new` no larger than `ratio`) grow both (`--mem-fraction-static`)
    or cap `--max-running-requests` at 90% of the running requests at the
    peak.  For a mamba pool that caps concurrency, SGLang's own advice:
    `--max-mamba-cache-size`, `--mamba-full-memory-ratio` or `--mamba-ssm-dtype
    bfloat16`.

    ## Fix safety
    Moving memory to the second pool shrinks the full KV pool: long prompts
    and prefix caching get less room (check `full token usage` in the next
    run).  A ratio of 1 gives the SWA layers as many tokens as the full ones,
    which wastes memory for short windows.

    ## Example
    Case: SWA pool full while the full pool is at 0.45 (decode line format of corpus 015, SGLang 0.5.16), with retractions

    A Gemma-3 SWA model with `swa_full_tokens_ratio=0.8`: decode lines at `swa
    token usage: 1.00` with `full token usage: 0.45` and a retraction: the SWA
    pool `is full on 6 batch lines` while the full pool `peaks at 0.45`, so
    sglog suggests `--swa-full-tokens-ratio 1.00` (0.8 x 0.90 / 0.45 = 1.6,
    capped at 1).
    """

    code = "SGL113"
    name = "hybrid-pool-full"
    triggers = ("cpp_exception", "fatal_error", "hybrid_pool_full", "logging_error", "oom", "retraction", "scheduler_exception", "traceback", "args", "batches", "crash")
    severity = "error"
    options = {
        "full_usage": Option(0.98, "the second pool's usage from which it counts as full"),
        "min_rows": Option(3, "batch lines at that usage needed for a finding"),
        "gap": Option(0.15, "how much lower the full pool's usage must stay (else both pools are full: kv-capacity-bound's case)"),
        "target": Option(0.9, "the full pool's usage the suggested ratio aims at"),
    }
    precedence = 45

    def claim(self, run, c) -> int | None:
        return SIGNATURE if c.event.get("named_kind") == "hybrid_pool_full" else None

    def _check(self, run, o) -> Iterator:
        messages = said(run, "hybrid_pool_full")
        if messages:
            yield self._from_message(run, messages)
            return
        for pool, column in POOLS.items():
            f = self._from_batches(run, o, pool, column)
            if f is not None:
                yield f
                return

    # ------------------------------------------------------------ SGLang's messages
    def _from_message(self, run, messages):
        s = messages[0]
        pool = str(s.get("pool") or "swa")
        stage = str(s.get("stage") or "startup")
        flag = RATIO_FLAG[pool]
        ratio = run.args.get(RATIO_ARG[pool]) if run.args else None
        ratio_txt = f" (now {ratio})" if ratio is not None else ""
        if stage == "capped":
            msg = f"The {POOL_WORDS[pool]} pool caps concurrency: max_running_requests is capped to {s.get('capped_requests')} ({s.get('pool_slots')} slots, {s.get('slots_per_request')} per request)."
            fix = Fix(
                summary=f"To run more than {s.get('capped_requests')} requests at once: raise --max-mamba-cache-size above {s.get('pool_slots')} or {flag}{ratio_txt}, or halve the state with --mamba-ssm-dtype bfloat16.",
                args={},
                safety="A larger mamba pool takes memory from the full KV pool; bfloat16 SSM state is less precise than float32.",
            )
            return self.finding(run, msg, [event_evidence(s.event)], fix, severity="info", pool=pool, stage=stage)
        severity = None if stage == "startup" else "warning"  # a pool that cannot serve at all is an error
        if stage == "request":
            msg = f"A request does not fit the hybrid KV budget: {s.get('rid')} needs {s.get('full_required')} full and {s.get('swa_required')} SWA bytes."
        elif pool == "swa" and s.get("pool_tokens") is not None and s.get("sliding_window") is not None:
            msg = f"The SWA pool ({s.get('pool_tokens'):,} tokens) cannot hold one request: admission needs the sliding window ({s.get('sliding_window'):,}) + a page ({s.get('page_size')})."
        else:
            msg = f"The {POOL_WORDS[pool]} pool is too small to serve requests: {(s.event.text or '').split(chr(10))[0].strip()[-160:]}"
        if pool == "swa" and s.get("pool_tokens") and s.get("sliding_window"):
            need = s.get("sliding_window") + (s.get("page_size") or 0)
            r = float(ratio) if isinstance(ratio, (int, float)) else RATIO_DEFAULT[pool]
            new = min(1.0, math.ceil(r * need / s.get("pool_tokens") * 20) / 20)
            fix = Fix(
                summary=f"Raise {flag} from {r:g} to {new:.2f} (x {need:,} / {s.get('pool_tokens'):,} tokens: the window plus a page), or grow the whole KV budget with --mem-fraction-static.",
                args={flag: f"{new:.2f}"},
                safety=f"At {new:.2f} the SWA pool takes memory from the full KV pool.",
            )
        else:
            fix = Fix(
                summary=f"Give the {POOL_WORDS[pool]} pool more: raise {flag}{ratio_txt}"
                + (" or --max-mamba-cache-size" if pool == "mamba" else "")
                + ", or grow the whole KV budget (--mem-fraction-static) / lower --max-running-requests.",
                args={},
                safety=self.fix_safety,
            )
        return self.finding(run, msg, [event_evidence(s.event)], fix, severity=severity, pool=pool, stage=stage)

    # ------------------------------------------------------------ batch lines
    def _from_batches(self, run, o, pool, column):
        frames = [f for f in (run.decode, run.prefill) if f.height and column in f.columns and "full_token_usage" in f.columns]
        if not frames:
            return None
        keep = ["file", "line", "ts", "rank", "running_req", "queue_req", "full_token_usage", column]
        rows = pl.concat([f.select([c for c in keep if c in f.columns]) for f in frames], how="diagonal_relaxed")
        full = rows.filter((pl.col(column) >= o["full_usage"]) & (pl.col("full_token_usage") <= pl.col(column) - o["gap"]))
        if full.height < o["min_rows"]:
            return None
        peak_full = float(full.get_column("full_token_usage").max() or 0.0)
        worst = full.sort(["full_token_usage", "line"], descending=[True, False]).row(0, named=True)
        running = int(full.get_column("running_req").max() or 0) if "running_req" in full.columns else 0
        lo, hi = int(full.get_column("line").min()), int(full.get_column("line").max())
        file = worst.get("file") or (run.files[0] if run.files else "")
        retractions = [e for e in run.events_of("retraction") if e.file == file and lo <= e.line <= hi]
        mamba_gained = sum(int(e.get("mamba_num_gained") or 0) for e in retractions)
        ratio_arg = run.args.get(RATIO_ARG[pool]) if run.args else None
        ratio = float(ratio_arg) if isinstance(ratio_arg, (int, float)) and not isinstance(ratio_arg, bool) else RATIO_DEFAULT[pool]
        assumed = "" if isinstance(ratio_arg, (int, float)) else f" (assumed the default {RATIO_FLAG[pool]} {ratio:g}: the log has no server args)"
        wanted = math.ceil(ratio * o["target"] / max(peak_full, 0.05) * 20) / 20
        new = min(1.0, wanted)
        rounding = "rounded up to 0.05" if new == wanted else f"{wanted:.2f} rounded up to 0.05, capped at 1.00 (the whole budget)"
        retr = f"; {len(retractions)} retraction{'s' if len(retractions) != 1 else ''} in that stretch" + (f" (freeing {mamba_gained} mamba slots)" if mamba_gained else "") if retractions else ""
        msg = (
            f"The {POOL_WORDS[pool]} pool is full on {full.height} batch lines (usage {o['full_usage']:.2f}+, up to {running} running requests) "
            f"while the full-attention KV pool peaks at {peak_full:.2f}{retr}: the {pool} pool limits admission."
        )
        ev = [row_evidence(worst, note=f"{column} {worst.get(column):.2f}, full_token_usage {worst.get('full_token_usage'):.2f}")]
        ev += [event_evidence(e) for e in retractions[:1]]
        ev.append(window_evidence(run, f"{full.height} lines with {column} >= {o['full_usage']:.2f} and full_token_usage <= {peak_full:.2f} (lines {lo}-{hi}); {len(retractions)} retractions"))
        if new > ratio + 0.01:
            fix = Fix(
                summary=f"Raise {RATIO_FLAG[pool]} from {ratio:g} to {new:.2f} = {ratio:g} x {o['target']:.2f} / {peak_full:.2f} (the full pool's peak), {rounding}{assumed}.",
                args={RATIO_FLAG[pool]: f"{new:.2f}"},
                safety=f"At {new:.2f} the {pool} pool takes memory from the full KV pool, whose peak was {peak_full:.2f}: check full token usage in the next run.",
            )
        else:
            cap = max(1, int(running * 0.9))
            fix = Fix(
                summary=f"Both pools are near full ({RATIO_FLAG[pool]} is already {ratio:g}): grow the KV budget (--mem-fraction-static) or cap --max-running-requests at {cap} (90% of the {running} running at the peak).",
                args={"--max-running-requests": str(cap)} if running else {},
                safety=f"--max-running-requests {cap} queues requests beyond it; a higher fraction leaves less memory for activations.",
            )
        return self.finding(run, msg, ev, fix, severity="warning", pool=pool, lines=full.height, peak_full_usage=peak_full, ratio=ratio, suggested_ratio=new, retractions=len(retractions))
