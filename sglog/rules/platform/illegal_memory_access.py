"""SGL404 illegal-memory-access: a GPU kernel faulted: illegal memory access (CUDA) or a hardware exception (ROCm/HSA)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

from sglog.findings import Fix
from sglog.read.signatures import PHRASES
from sglog.rules.base import exception_evidence, nearby_line_evidence
from sglog.rules.ownership import SIGNATURE, CrashRule


class IllegalMemoryAccess(CrashRule):
    """A GPU kernel faulted: illegal memory access (CUDA) or a hardware exception (ROCm/HSA).

    ## What it finds
    A crash whose root cause is `CUDA error: an illegal memory access was
    encountered` (or an illegal instruction, misaligned address, unspecified
    launch failure) or ROCm's `HSA_STATUS_ERROR_EXCEPTION` / `Memory access
    fault by GPU`.

    ## Why it matters
    The process and its CUDA context are dead; every rank follows.  Causes: a
    kernel bug for this shape/backend, an out-of-memory in disguise (SGLang's
    troubleshooting notes it), a mismatched build.  The failing kernel is often
    not the one in the traceback (errors are asynchronous).

    ## Evidence
    The error line (and the Python exception carrying it).

    ## Suggested fix
    Treat it as an OOM in disguise first: lower `--mem-fraction-static` by
    `step` (0.05).  To find the kernel, rerun with `CUDA_LAUNCH_BLOCKING=1`
    (and `--disable-cuda-graph` to bisect graphs); try another
    `--attention-backend`; update SGLang / the kernels.

    ## Fix safety
    A lower fraction shrinks the KV pool; `CUDA_LAUNCH_BLOCKING=1` and
    `--disable-cuda-graph` are for diagnosis only (much slower).

    ## Example
    Case: ROCm hardware exception before a fatal abort

    A ROCm server serving decode batches: `HSA_STATUS_ERROR_EXCEPTION: An HSAIL
    operation resulted in a hardware exception`, then `Fatal Python error:
    Aborted`, with `mem_fraction_static=0.85`: an out-of-memory in disguise is the
    common cause, so sglog suggests `--mem-fraction-static 0.80` and
    `CUDA_LAUNCH_BLOCKING=1` to locate the kernel.
    """

    code = "SGL404"
    name = "illegal-memory-access"
    triggers = ("memory", "crash", "text")
    severity = "error"
    precedence = 40
    signature = "device_fault"

    def claim(self, run, c) -> int | None:
        return SIGNATURE if self.signature in c.signatures else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        ev = exception_evidence(rc)
        hit = nearby_line_evidence(run, rc, PHRASES[self.signature])
        if hit is not None:
            low = (hit.text or "").lower()
            at = min((low.find(p) for p in PHRASES[self.signature] if p in low), default=-1)
            if at > 0:
                hit = replace(hit, note=(hit.text or "")[at:].split(":", 1)[0])
            ev.insert(0, hit)
        mfs = run.memory.mem_fraction_static
        args: dict[str, str | None] = {"--mem-fraction-static": f"{mfs - 0.05:.2f}"} if mfs is not None else {}
        fix = Fix(
            summary=("Lower --mem-fraction-static by 0.05 (an OOM in disguise is the common cause); " if mfs is not None else "")
            + "locate the kernel with CUDA_LAUNCH_BLOCKING=1 (and --disable-cuda-graph to bisect), try another --attention-backend, update the kernels.",
            args=args,
            safety=self.fix_safety,
        )
        detail = (rc.get("exc_message") or "").split("\n")[0]
        if hit is not None and hit.text:
            low = hit.text.lower()
            at = min((low.find(p) for p in PHRASES[self.signature] if p in low), default=0)
            detail = hit.text[at:].strip()
        detail = detail[:180]
        msg = f"A GPU kernel faulted during {c.phase or 'the run'}: {detail}"
        yield self.finding(run, msg, ev, fix)
