"""SGL108 runtime-oom: the server ran out of memory while serving (prefill or decode)."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import exception_evidence, row_evidence
from sglog.rules.memory.budget import oom_numbers
from sglog.rules.ownership import SIGNATURE, CrashRule


class RuntimeOom(CrashRule):
    """The server ran out of memory while serving (prefill or decode).

    ## What it finds
    A crash after the server was ready whose root cause is a CUDA OOM or
    SGLang's `Prefill/Decode out of memory. Try to lower your batch size.`

    ## Why it matters
    The static pool fit at startup, but a batch needed more activation (or KV)
    memory than was left.  Which knob helps depends on the phase: prefill
    activations scale with the tokens per forward, decode with the number of
    running requests.

    ## Evidence
    The OOM lines and the last batch line before them (the batch that ran out).

    ## Suggested fix
    Prefill: halve `--chunked-prefill-size` (from its value, or 8192) until
    `1.5 MB x chunked_prefill_size <= F - 2 GB` (SGLang's own activation
    coefficient; `F` = available_gpu_mem), at least 1024.  Decode:
    `--max-running-requests = 0.8 x #running-req at the crash`, rounded down
    to a captured graph size.

    ## Fix safety
    Smaller prefill chunks lengthen time-to-first-token for long prompts; a
    lower running cap limits concurrency (requests queue).

    ## Example
    Case: a 16k-token prefill runs out of memory

    `Prefill batch, #new-seq: 1, #new-token: 16384` while serving, then
    `torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 3.50 GiB`, with
    `available_gpu_mem=5.20 GB` after startup: sglog suggests
    `--chunked-prefill-size 2048` (`half of 8192, halved until 1.5 MB x 2048 = 3.0
    GB fits in available 5.20 GB - 2 GB`).
    """

    code = "SGL108"
    name = "runtime-oom"
    triggers = (
        "batch_oom",
        "cuda_graph_bs",
        "cuda_graph_capture_begin",
        "cuda_graph_capture_end",
        "kv_cache_allocated",
        "memory_pool_end",
        "memory_summary",
        "oom",
        "server_args",
        "weight_load_begin",
        "weight_load_end",
        "args",
        "memory",
        "batches",
        "crash",
    )
    severity = "error"
    precedence = 85

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.oom_crash(c) and c.phase == "serving" else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        tail, _counts = facts.batches_before(run, rc.file, rc.line, 1)
        last = tail[-1] if tail else None
        phase = rc.get("phase")
        if phase not in ("prefill", "decode"):
            fns = " ".join(facts.frame_functions(rc)).lower()  # (the reader's phase is None without SGLang frames: the functions of the others)
            if "extend" in fns or "prefill" in fns:
                phase = "prefill"
            elif "decode" in fns:
                phase = "decode"
            elif last is not None:
                phase = "prefill" if last.get("kind") == "prefill_batch" else "decode"
            else:
                phase = "prefill"
        ev = exception_evidence(rc)
        if last is not None:
            ev.append(row_evidence(last, note="last batch before the OOM"))
        m = run.memory
        if phase == "prefill":
            cps = m.chunked_prefill_size if m.chunked_prefill_size and m.chunked_prefill_size > 0 else 8192
            F = m.available_gpu_mem_gb
            new = cps // 2
            if F is not None:
                while new > 1024 and 1.5 * new / 1024 > F - 2:
                    new //= 2
            new = max(1024, new)
            act = 1.5 * new / 1024  # (GB of prefill activations: SGLang's 1.5 MB per token)
            basis = f"half of {cps}" + (f", halved until 1.5 MB x {new} = {act:.1f} GB {'fits in' if act <= F - 2 else 'comes closest to'} available {F:.2f} GB - 2 GB" if F is not None else "")
            fix = Fix(summary=f"Prefill ran out of memory: --chunked-prefill-size {new} ({basis}).", args={"--chunked-prefill-size": str(new)}, safety=self.fix_safety)
        else:
            r = (last or {}).get("running_req")
            if r:
                sizes = facts.captured_bs(run)
                cap = int(0.8 * r)
                below = [s for s in sizes if s <= cap]
                new = max(below) if below else max(1, cap)
                fix = Fix(
                    summary=f"Decode ran out of memory at {r} running requests: --max-running-requests {new} (0.8 x {r}, rounded down to a captured size).",
                    args={"--max-running-requests": str(new)},
                    safety=self.fix_safety,
                )
            else:
                fix = Fix(summary="Decode ran out of memory: lower --max-running-requests (the running count at the crash is not in the log).", args={}, safety=self.fix_safety)
        nums = oom_numbers(rc)
        msg = f"Out of GPU memory during {phase} while serving" + (f" ({nums})" if nums else "") + "."
        yield self.finding(run, msg, ev, fix, phase=phase)
