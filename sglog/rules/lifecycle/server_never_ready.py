"""SGL502 server-never-ready: the log ends before the server reported ready, with no error: it says in which startup phase."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.rules import facts
from sglog.rules.base import Rule, event_evidence
from sglog.rules.lifecycle.phases import phase_words


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
    Case: corpus 016 (verbatim, the whole log; a DFLASH server on a GB10): the log ends with the target prefill graph capture bar at 0/58, 650 s after launch

    `Capture target prefill CUDA graph begin`, then a capture bar at `0/58`
    (`Capturing num tokens (num_tokens=8192 avail_mem=11.78 GB)`) and nothing
    else but a `resource_tracker` warning: `The log ends during CUDA-graph capture
    (650 s after launch)`, with no error logged.
    """

    code = "SGL502"
    name = "server-never-ready"
    triggers = (
        "cuda_graph_bs",
        "cuda_graph_capture_begin",
        "cuda_graph_capture_end",
        "decode_batch",
        "init_dist_begin",
        "init_dist_end",
        "kv_cache_allocated",
        "launch_command",
        "memory_pool_end",
        "memory_summary",
        "prefill_batch",
        "progress",
        "server_args",
        "warmup",
        "weight_load_begin",
        "weight_load_committed",
        "weight_load_end",
        "startup",
        "batches",
        "ending",
        "crash",
    )
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
        _stop, begin = facts.last_startup_phase(run)  # (the line that began it, for evidence)
        phase = run.ending.phase  # (the run's reading: the summary's `ended` line says the same)
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
