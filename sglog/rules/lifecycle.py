"""Lifecycle rules (SGL5xx): how a run started, how long it took, how it ended."""

from __future__ import annotations

import json
from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, exception_evidence, exception_line, row_evidence
from sglog.rules.ownership import FALLBACK, SIGNATURE, CrashRule
from sglog.schema import PHASE_WORDS as RUN_PHASE_WORDS

# how a phase reads in a finding: the run's words (sglog/runs.py), with the two a finding says differently
PHASE_WORDS = {
    **RUN_PHASE_WORDS,
    "launch": "launch (before any startup step)",
    "warmup": "warm-up (startup done, not yet ready)",
}


def phase_words(phase: str | None) -> str:
    return PHASE_WORDS.get(phase or "launch", phase or "launch")


def crashed_during(run, phase: str | None) -> str:
    """'Crashed during weight loading' / 'Crashed' when the log shows no startup to place it in."""
    known = bool(run.startup and run.startup.phases) or run.first("server_args") is not None
    if phase in (None, "launch") and not known:
        return "Crashed"
    return f"Crashed during {phase_words(phase)}"


class Crash(CrashRule):
    """The run crashed; this is the root-cause exception (not the SIGQUIT / "child failed" fan-out).

    ## What it finds
    A crash no more specific rule explains.  The root cause is the first real
    error: the first `Scheduler hit an exception` / traceback / fatal error of
    the crash, never `Received sigquit from a child process. It usually means
    the child failed.`, `Rank N scheduler is dead` or the launcher's own
    `EOFError`, which are consequences.

    ## Why it matters
    With tensor parallelism every rank dies and the launcher adds its own
    messages; the line people search for is usually the last one, which names
    the symptom.  The first exception names the cause.

    ## Evidence
    The first line of the root-cause traceback and its exception line; the
    phase the run was in (from the startup timeline).

    ## Suggested fix
    None computed: the exception is the lead.  Specific crashes (OOMs, NCCL,
    architecture, missing packages, graph capture, watchdog) have their own
    rules with fixes and are not repeated here.

    ## Fix safety
    Not applicable: no change is suggested.

    ## Example
    `RuntimeError: size_k = 704, is not divisible by b_scales.size(1) = 5` in
    `fused_marlin_moe` on the first prefill of a TP2 AWQ MoE model, followed
    by `Received sigquit from a child process`.
    """

    code = "SGL501"
    name = "crash"
    severity = "error"

    def claim(self, run, c) -> int | None:
        return FALLBACK  # every crash, when no rule with a signature claims it

    def _check(self, run, o) -> Iterator:
        c = facts.crash(run)
        if c is None:
            killed = self._killed(run)
            if killed is not None:
                yield killed
            return
        if self.owned_crash(run) is None:
            return
        rc = c.event
        where = f" on {rc.rank.label}" if rc.rank else ""
        if c.truncated:
            fn = next((f for f in reversed(facts.frame_functions(rc)) if f), None)
            what = "the exception text is cut off in the log" + (f" (last frame: {fn})" if fn else "")
        else:
            what = exception_line(rc).rstrip(": ")
        msg = f"{crashed_during(run, c.phase)}{where}: {what[:200]}"
        yield self.finding(run, msg, exception_evidence(rc), None, phase=c.phase)

    def _killed(self, run):
        """A crash with no traceback: a process was killed (SIGKILL, the OOM killer)."""
        if run.ending is None or run.ending.status != "crashed":
            return None
        shut = run.first("shutdown")
        for e in run.events_of("process_killed", "scheduler_dead"):
            if e.kind == "process_killed" or e.get("exit_code") in (-9, 137):
                if shut is not None and (shut.file, shut.line) < (e.file, e.line):
                    return None
                msg = f"{crashed_during(run, run.ending.phase)}: a process was killed (SIGKILL; often the host's out-of-memory killer, see `dmesg -T | grep -i oom`)."
                return self.finding(run, msg, [event_evidence(e)], None, phase=run.ending.phase)
        return None


class ServerNeverReady(Rule):
    """The log ends before the server reported ready, with no error: it says in which startup phase.

    ## What it finds
    A run with startup lines (server args, weight loading, KV pool, capture)
    but no `The server is fired up and ready to roll!`, no batches and no
    crash: the log stops during a startup phase.

    ## Why it matters
    A startup that stops without an error is either still running (slow
    loading, a long first CUDA-graph capture that compiles kernels), hung
    (collective, JIT lock), or was killed from outside.  The phase it stopped
    in is the first clue; the last line shows how far it got.

    ## Evidence
    The line that began the phase and the last line of the run.

    ## Suggested fix
    None computed.  Weight loading: see `slow-weight-loading`; CUDA-graph
    capture: the first capture compiles kernels (minutes on some setups)
    before it progresses, so wait or test with a smaller `--cuda-graph-max-bs`;
    distributed init: check that every rank started and can reach the others.

    ## Fix safety
    Not applicable: no change is suggested.

    ## Example
    `Capture cuda graph begin` then a capture bar at `0/58` and nothing
    else: the log ends during CUDA-graph capture, 114 s into it.
    """

    code = "SGL502"
    name = "server-never-ready"
    severity = "warning"

    def _check(self, run, o) -> Iterator:
        if run.ending is None or run.ending.status != "incomplete":
            return
        if facts.crash(run) is not None:
            return
        # an excerpt that starts mid-startup does not show the launch: say so, and report it as info
        excerpt = not run.has("server_args", "launch_command", "init_dist_begin", "weight_load_begin")
        if excerpt and not run.has(*facts.STARTUP_EVENT_KINDS):
            return
        warmup = run.ending.phase == "warmup" and run.batches.height > 0  # the warm-up request ran, no ready line followed
        if run.batches.height and not warmup:
            return
        phase, begin = facts.last_startup_phase(run)
        if phase is None or warmup:
            phase = run.ending.phase
        if warmup:
            begin = run.first("prefill_batch") or begin
        last = None
        for e in reversed(run.events):
            if e.kind not in ("blank",):
                last = e
                break
        ev = []
        if begin is not None:
            ev.append(event_evidence(begin, note="the step the log stops in began here" if _phase_of(begin) == phase else "the last startup step that began"))
        if last is not None and (begin is None or last.line != begin.line):
            ev.append(event_evidence(last, note="last line of the run"))
        since = ""
        if begin is not None and begin.ts is not None and run.ending.last_ts is not None:
            secs = (run.ending.last_ts - begin.ts).total_seconds()
            if secs >= 1:
                since = f", {secs:.0f} s after it began"
        total = ""
        if run.startup and run.startup.launch and run.ending.last_ts:
            t = (run.ending.last_ts - run.startup.launch).total_seconds()
            if t >= 1:
                total = f" ({t:.0f} s after launch)"
        stalled = _seconds_without_progress(run)
        quiet = f"; the log shows no startup progress in its last {stalled:.0f} s" if stalled is not None and stalled >= 1 else ""
        if warmup:
            msg = f"The log ends in warm-up{since}{total}: the warm-up request was prefilled, but the server never reported ready and no error was logged{quiet}."
        else:
            msg = f"The log ends during {phase_words(phase)}{since}{total}: the server never reported ready and no error was logged{quiet}."
        if excerpt:
            msg += " The excerpt starts mid-startup (no launch, no server args): this assumes it runs to the end of the log; if the server went on after the pasted lines, ignore this."
        yield self.finding(run, msg, ev, None, severity="info" if excerpt else None, phase=phase, seconds_without_progress=stalled, excerpt=excerpt)


_PROGRESS_KINDS = facts.STARTUP_EVENT_KINDS + ("progress", "weight_load_committed", "cuda_graph_bs", "prefill_batch", "decode_batch")


def _seconds_without_progress(run) -> float | None:
    """From the last line that shows startup progress (a phase line, a progress bar) to the log's last
    timestamp; None when the log does not tell (no timestamps)."""
    end = run.ending.last_ts if run.ending else None
    if end is None:
        return None
    last = max((e.ts for e in run.events_of(*_PROGRESS_KINDS) if e.ts is not None), default=None)
    return None if last is None else max(0.0, (end - last).total_seconds())


def _phase_of(e) -> str | None:
    return {"init_dist_begin": "distributed_init", "weight_load_begin": "weight_load", "kv_cache_allocated": "kv_pool", "memory_summary": "warmup"}.get(e.kind) or (
        ("draft_cuda_graph_capture" if e.get("role") == "draft" else "cuda_graph_capture") if e.kind == "cuda_graph_capture_begin" else None
    )


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
    `Load weight end. elapsed=787.55 s, ... mem usage=72.33 GB` on TP8: 579 GB
    at 0.73 GB/s; at 2-5 GB/s it would take 116-289 s.
    """

    code = "SGL503"
    name = "slow-weight-loading"
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


class WatchdogTimeout(CrashRule):
    """The scheduler's watchdog killed the server: one batch ran longer than `--watchdog-timeout`.

    ## What it finds
    `Watchdog timeout (self.watchdog_timeout=300)` / `Scheduler watchdog
    timeout (...)`; with the batch it was stuck on (the last batch line before
    it) and what ran just before.

    ## Why it matters
    A forward pass that does not finish in 300 s (default) is a hang (a
    collective waiting for a dead or stuck rank, a deadlock in custom
    all-reduce) or a first batch that compiles kernels (DeepGEMM, Triton JIT)
    on a slow setup.  The batch shows which: a first prefill right after
    startup, or a batch in the middle of normal serving.

    ## Evidence
    The watchdog line, the last batch line before it (the stuck batch), the
    batch before that, and the time since the last batch.

    ## Suggested fix
    First batch after startup (nothing served before): `--watchdog-timeout`
    = max(1200, 4 x current) so JIT compilation can finish (or precompile).
    Otherwise a hang: `--disable-custom-all-reduce` (tp > 1), check NCCL
    (`NCCL_DEBUG=INFO`), `--soft-watchdog-timeout` to dump state before the kill.

    ## Fix safety
    A longer timeout also lets real hangs run longer before the restart;
    without custom all-reduce, all-reduces go through NCCL (slower on NVLink).

    ## Example
    `Prefill batch. #new-seq: 1, #new-token: 8192` at 10:02:11, then nothing
    until `Watchdog timeout (self.watchdog_timeout=300)` at 10:07:12: the first
    prefill after startup -> `--watchdog-timeout 1200`.
    """

    code = "SGL504"
    name = "watchdog-timeout"
    severity = "error"
    precedence = 10

    def claim(self, run, c) -> int | None:
        # SGLang's watchdog killed the server: whatever the dying ranks printed follows from it
        return SIGNATURE if any(not e.get("soft") for e in run.events_of("watchdog_timeout")) else None

    def _check(self, run, o) -> Iterator:
        wds = run.events_of("watchdog_timeout")
        if not wds:
            return
        wd = next((e for e in wds if not e.get("soft")), wds[0])
        soft = bool(wd.get("soft"))
        tail, before = facts.batches_before(run, wd.file, wd.line, 2)
        ev = [event_evidence(wd)]
        stuck = prev = None
        if tail:
            stuck = tail[-1]
            prev = tail[0] if len(tail) > 1 else None
        gap = ""
        if stuck is not None:
            ev.append(row_evidence(stuck, note="the batch it was stuck on (last batch before the watchdog)"))
            if stuck.get("ts") is not None and wd.ts is not None:
                gap = f", {(wd.ts - stuck['ts']).total_seconds():.0f} s after it was logged"
        if prev is not None:
            ev.append(row_evidence(prev, note="the batch before it"))
        timeout = facts.num(wd.get("timeout")) or facts.num(run.args.get("watchdog_timeout")) or 300.0
        first = stuck is not None and sum(before.values()) <= 2 and not before.get("decode_batch")
        kind = (stuck or {}).get("kind", "").replace("_batch", "")
        what = f"a {kind} batch" if kind else "a batch"
        if stuck is not None and stuck.get("new_token"):
            what += f" of {stuck['new_token']} new tokens"
        elif stuck is not None and stuck.get("running_req") is not None:
            what += f" with {stuck['running_req']} running requests"
        msg = f"{'Soft watchdog' if soft else 'Watchdog'} timeout after {timeout:g} s: the scheduler was stuck on {what if stuck is not None else 'a batch that was never logged'}{gap}."
        if first or stuck is None:
            new = int(max(1200, 4 * timeout))
            fix = Fix(
                summary=f"The first batch after startup did not finish in {timeout:g} s (kernel JIT compilation on first use is the usual cause): --watchdog-timeout {new}, or precompile (e.g. python -m sglang.compile_deep_gemm).",
                args={"--watchdog-timeout": str(new)},
                safety=self.fix_safety,
            )
        else:
            tp = facts.tp_size(run)
            args = {"--disable-custom-all-reduce": "true"} if tp > 1 and run.args.get("disable_custom_all_reduce") is not True else {}
            fix = Fix(
                summary="A batch hung in the middle of serving: treat it as a collective hang"
                + (" (--disable-custom-all-reduce)" if args else "")
                + ", check NCCL with NCCL_DEBUG=INFO, and add --soft-watchdog-timeout to dump the scheduler state next time.",
                args=args,
                safety=self.fix_safety,
            )
        yield self.finding(run, msg, ev, fix, severity="warning" if soft else None)


class SlowCudaGraphCapture(Rule):
    """CUDA-graph capture took minutes.

    ## What it finds
    A capture phase (target or draft) longer than `max_seconds` on its slowest
    rank (`Capture cuda graph end. Time elapsed` / `elapsed=`).

    ## Why it matters
    Capture runs at every start; its time grows with the number of captured
    batch sizes (and with speculative decoding, which captures verify, draft
    and draft-extend graphs), and the first capture includes kernel JIT
    compilation.

    ## Evidence
    The capture begin and end lines of the slowest rank.

    ## Suggested fix
    Capture fewer sizes: `--cuda-graph-max-bs` = the smallest captured size
    >= the p99 of `#running-req` when the run served (only when that is at
    most half the current maximum), else half the current maximum.  With a
    maximum of `min_bs_to_shrink` or less the time is kernel compilation and
    no flag is suggested.

    ## Fix safety
    Batches above the new maximum run without graphs (slower per step).

    ## Example
    `Capture cuda graph end. Time elapsed: 1334.38 s` with
    `cuda_graph_max_bs=512` -> `--cuda-graph-max-bs 256`.
    """

    code = "SGL505"
    name = "slow-cuda-graph-capture"
    severity = "info"
    options = {"max_seconds": Option(120.0, "capture slower than this is reported"), "min_bs_to_shrink": Option(32, "with fewer sizes than this, the time is kernel compilation, not the sizes")}

    def _check(self, run, o) -> Iterator:
        phases = run.startup.phases if run.startup else {}
        for key in ("cuda_graph_capture", "draft_cuda_graph_capture"):
            ph = phases.get(key)
            if ph is None or ph.duration is None or ph.duration <= o["max_seconds"]:
                continue  # (the ranks that logged their end: an excerpt may lack the others')
            rank = ph.slowest_rank
            ev = [event_evidence(e) for e in run.events_of("cuda_graph_capture_begin", "cuda_graph_capture_end") if (e.rank.label if e.rank else "-") == rank][:2]
            M = facts.max_graph_bs(run)
            d = facts.decode_rows(run)
            new = None
            if M and M > o["min_bs_to_shrink"]:
                if d.height >= 20 and "running_req" in d.columns and d.get_column("running_req").drop_nulls().len():
                    r = d.get_column("running_req").drop_nulls()
                    new = facts.round_up_capture(float(r.quantile(0.99, "higher")), facts.captured_bs(run))
                    if new > M / 2:
                        new = None  # the batches need these sizes
                else:
                    new = max(1, M // 2)
            open_ranks = [r for r, p in ph.per_rank.items() if p.end is None]
            partial = (
                f" ({len(ph.per_rank) - len(open_ranks)} of {len(ph.per_rank)} ranks logged their end; the log has no end line for {', '.join(sorted(open_ranks)[:4])}{' ...' if len(open_ranks) > 4 else ''})"
                if open_ranks
                else ""
            )
            on = f" on {rank}" if rank and rank != "-" else ""
            msg = f"{'Draft ' if key.startswith('draft') else ''}CUDA-graph capture took {ph.duration:.0f} s{on}" + (f" for batch sizes up to {M}" if M else "") + f"{partial}."
            fix = Fix(
                summary=(
                    f"Capture fewer sizes: --cuda-graph-max-bs {new}. The first capture after an install also compiles kernels."
                    if new
                    else (
                        "The captured sizes are needed by this workload; the time is mostly kernel compilation on the first capture (JIT caches make the next start faster)."
                        if M
                        else "The log does not show which batch sizes were captured (no --cuda-graph-max-bs, no bs list), so no smaller maximum is computed: if the workload's batches are small, lower --cuda-graph-max-bs; the first capture after an install also compiles kernels (JIT caches make the next start faster)."
                    )
                ),
                args={"--cuda-graph-max-bs": str(new)} if new else {},
                safety=self.safety() if new else "No flag changes.",
            )
            yield self.finding(run, msg, ev, fix, seconds=round(ph.duration, 1))
