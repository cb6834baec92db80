"""SGL504 watchdog-timeout: the scheduler's watchdog killed the server: one batch ran longer than `--watchdog-timeout`."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import event_evidence, row_evidence
from sglog.rules.ownership import SIGNATURE, CrashRule


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
    Case: the first prefill after startup never finished (JIT compile)

    `Prefill batch, #new-seq: 1, #new-token: 8192` at 10:16:00, the first batch
    after `The server is fired up and ready to roll!`, then nothing until
    `Watchdog timeout (self.watchdog_timeout=300)` at 10:21:01: the scheduler was
    `stuck on a prefill batch of 8192 new tokens, 301 s after it was logged`, most
    likely compiling kernels on first use -> `--watchdog-timeout 1200`.
    """

    code = "SGL504"
    name = "watchdog-timeout"
    triggers = ("watchdog_timeout", "args", "batches", "crash")
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
            args: dict[str, str | None] = {"--disable-custom-all-reduce": "true"} if tp > 1 and run.args.get("disable_custom_all_reduce") is not True else {}
            fix = Fix(
                summary="A batch hung in the middle of serving: treat it as a collective hang"
                + (" (--disable-custom-all-reduce)" if args else "")
                + ", check NCCL with NCCL_DEBUG=INFO, and add --soft-watchdog-timeout to dump the scheduler state next time.",
                args=args,
                safety=self.fix_safety,
            )
        yield self.finding(run, msg, ev, fix, severity="warning" if soft else None)
