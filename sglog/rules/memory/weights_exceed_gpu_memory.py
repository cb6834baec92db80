"""SGL110 weights-exceed-gpu-memory: the model's weights do not fit: CUDA out of memory while loading them."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import event_evidence, exception_evidence
from sglog.rules.memory.budget import oom_numbers
from sglog.rules.ownership import SIGNATURE, CrashRule


class WeightsExceedGpuMemory(CrashRule):
    """The model's weights do not fit: CUDA out of memory while loading them.

    ## What it finds
    A crash whose root cause is a CUDA OOM raised while the weights load
    (`weight_load` phase, or `load_model`/`load_weights` frames).

    ## Why it matters
    No fraction or batch setting helps: the per-GPU shard of the checkpoint
    (plus the CUDA context) is larger than the GPU.

    ## Evidence
    The `Load weight begin` line and the OOM line (capacity, free memory).

    ## Suggested fix
    Shard over more GPUs: `--tp 2 x current`; or a quantized checkpoint
    (AWQ/GPTQ/FP8), or `--cpu-offload-gb` for the part that does not fit.

    ## Fix safety
    Doubling TP needs twice the GPUs and adds all-reduce traffic; CPU offload is
    much slower per token.

    ## Example
    Case: OOM while the weights load

    A TP2 server: `Load weight begin. avail mem=31.42 GB`, then in `load_weights`
    `CUDA out of memory. Tried to allocate 384.00 MiB. GPU 1 has a total capacity
    of 31.86 GiB of which 124.00 MiB is free`: `the model does not fit on 2 GPUs`
    -> `--tp 4`, a quantized checkpoint or `--cpu-offload-gb`.
    """

    code = "SGL110"
    name = "weights-exceed-gpu-memory"
    triggers = ("batch_oom", "kv_cache_allocated", "memory_pool_end", "memory_summary", "oom", "server_args", "weight_load_begin", "weight_load_end", "args", "memory", "crash")
    severity = "error"
    precedence = 90

    def claim(self, run, c) -> int | None:
        loading = c.phase in ("weight_load", "distributed_init") or any(fn in ("load_model", "load_weights") for fn in facts.frame_functions(c.event))
        return SIGNATURE if facts.oom_crash(c) and loading else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        ev = []
        b = run.first("weight_load_begin")
        if b is not None:
            ev.append(event_evidence(b))
        ev += exception_evidence(rc)
        tp = facts.tp_size(run)
        nums = oom_numbers(rc)
        msg = "Out of GPU memory while loading the weights" + (f" ({nums})" if nums else "") + f": the model does not fit on {tp} GPU{'s' if tp > 1 else ''}."
        fix = Fix(
            summary=f"Shard the weights over more GPUs (--tp {2 * tp}), use a quantized checkpoint, or offload part of it with --cpu-offload-gb.",
            args={"--tp": str(2 * tp)},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix)
