"""SGL501 crash: the run crashed; this is the root-cause exception (not the SIGQUIT / "child failed" fan-out)."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.rules import facts
from sglog.rules.base import event_evidence, exception_evidence, exception_line
from sglog.rules.lifecycle.phases import phase_words
from sglog.rules.ownership import FALLBACK, CrashRule


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
    Case: the root cause is the first traceback, not the sigquit

    A TP2 server, after startup and before ready: `RuntimeError: size_k = 704,
    is not divisible by b_scales.size(1) = 5` in `fused_marlin_moe` on TP1,
    followed by `Received sigquit from a child process` and `Rank 1 scheduler is
    dead`.  sglog names the first traceback as the cause: `Crashed during
    warm-up (startup done, not yet ready) on TP1`.
    """

    code = "SGL501"
    name = "crash"
    triggers = ("process_killed", "scheduler_dead", "server_args", "shutdown", "startup", "ending", "crash")
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
