"""SGL109 tp-memory-imbalance: GPUs of one tensor-parallel group have different amounts of free memory."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.events import Event
from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, event_evidence, exception_evidence
from sglog.rules.ownership import SIGNATURE, CrashRule


class TpMemoryImbalance(CrashRule):
    """GPUs of one tensor-parallel group have different amounts of free memory.

    ## What it finds
    (error) A crash with `The memory capacity is unbalanced. Some GPUs may be
    occupied by other processes.`  (warning) Per-rank free memory at weight
    load (`Load weight begin. avail mem`) differing by more than
    `max_imbalance` (1 - min/max).

    ## Why it matters
    SGLang sizes every rank's pools by the smallest one: memory on the other
    GPUs is wasted, and older versions refuse to start when the spread is over
    10%.  The usual cause is another process (a second server, a notebook, a
    display) holding memory on one GPU.

    ## Evidence
    The per-rank `Load weight begin` lines with the smallest and largest free
    memory, or the exception.

    ## Suggested fix
    Free the GPU (`nvidia-smi`: stop the stray process), or move the server to
    other GPUs with `CUDA_VISIBLE_DEVICES`.  `SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0`
    only silences the check (pools stay sized to the smallest GPU).  The fix
    reports the wasted memory per rank = max - min.

    ## Fix safety
    Nothing changes on the command line; killing a process on a shared machine
    may hurt someone else's job.

    ## Example
    Case: one GPU has 16 GB less free memory (another process)

    A TP2 server: `TP0] Load weight begin. avail mem=78.50 GB`, `TP1] Load weight
    begin. avail mem=62.10 GB`: the ranks differ by `21%`, the pools are sized to
    the smallest and `16.40 GB per GPU is wasted`; sglog says to free that GPU
    (`nvidia-smi: stop the other process`) or exclude it with
    `CUDA_VISIBLE_DEVICES`.
    """

    code = "SGL109"
    name = "tp-memory-imbalance"
    triggers = ("weight_load_begin", "args", "crash")
    severity = "error"
    precedence = 20
    options = {"max_imbalance": Option(0.10, "1 - min/max of per-rank free memory at weight load")}

    def claim(self, run, c) -> int | None:
        return SIGNATURE if "memory_imbalance" in c.signatures else None

    def _check(self, run, o) -> Iterator:
        c = facts.crash(run)
        per: dict[str, Event] = {}
        loads = [e for e in run.events_of("weight_load_begin") if e.get("avail_mem") is not None]
        untagged = bool(loads) and all(e.rank is None for e in loads) and len(loads) <= max(facts.tp_size(run), 1) and not facts.is_spec(run)
        for e in loads:
            # (a log without rank tags: each target weight load is one rank's, as long as there are no more than TP of them)
            per.setdefault(f"line {e.line}" if untagged else (e.rank.label if e.rank else "-"), e)
        assumed = " (the log has no rank tags: each `Load weight begin` line is taken as a different rank)" if untagged and len(per) > 1 else ""
        fix = Fix(
            summary="Free the GPU that has less memory (nvidia-smi: stop the other process) or exclude it with CUDA_VISIBLE_DEVICES; SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 only silences the check.",
            args={},
            safety=self.fix_safety,
        )
        if c is not None and self.owned_crash(run) is not None:
            ev = exception_evidence(c.event)
            if len(per) > 1:
                lo = min(per.values(), key=lambda e: e.get("avail_mem"))
                hi = max(per.values(), key=lambda e: e.get("avail_mem"))
                ev = [event_evidence(lo), event_evidence(hi)] + ev
            yield self.finding(run, "Startup refused: the GPUs of the tensor-parallel group have unbalanced free memory (another process is using one of them).", ev, fix)
            return
        if len(per) < 2:
            return
        lo = min(per.values(), key=lambda e: e.get("avail_mem"))
        hi = max(per.values(), key=lambda e: e.get("avail_mem"))
        a, b = lo.get("avail_mem"), hi.get("avail_mem")
        if not b or 1 - a / b <= o["max_imbalance"]:
            return
        imb = 1 - a / b
        label = lo.rank.label if lo.rank else "one rank"
        msg = f"Free memory at weight load differs across ranks by {imb:.0%} ({label}: {a:.2f} GB vs {b:.2f} GB): pools are sized to the smallest, {b - a:.2f} GB per GPU is wasted{assumed}."
        yield self.finding(run, msg, [event_evidence(lo), event_evidence(hi)], fix, severity="warning", imbalance=round(imb, 4), wasted_gb=round(b - a, 3))
