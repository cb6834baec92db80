"""SGL111 startup-oom: CUDA out of memory during startup after the KV pool was allocated (attention workspaces, warm-up): the static pool left too little."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, ceil_to, event_evidence, exception_evidence, floor_to
from sglog.rules.memory.budget import oom_numbers, total_gb
from sglog.rules.ownership import SIGNATURE, CrashRule


class StartupOom(CrashRule):
    """CUDA out of memory during startup after the KV pool was allocated (attention workspaces, warm-up): the static pool left too little.

    ## What it finds
    A startup crash with a CUDA OOM after the weights loaded and outside
    CUDA-graph capture and the draft model: attention-backend workspaces,
    sampler buffers, the warm-up request.

    ## Why it matters
    This OOM goes the *opposite* way from `Not enough memory`: the static pool
    (weights + KV) took so much that nothing is left for workspaces.  Lowering
    `--mem-fraction-static` is the fix.

    ## Evidence
    The `Memory pool end` line (free memory after the pools) and the OOM.

    ## Suggested fix
    `mfs_new = mfs - (headroom_gb - avail_after_pool) / T` rounded down to
    0.01, `T` = free memory at weight load (or the capacity in the OOM
    message); when the current fraction is not in the log the fix states the
    decrease.

    ## Fix safety
    The KV pool shrinks by the same amount: fewer concurrent tokens.  If the
    weights alone nearly fill the GPU, no fraction is enough: use more GPUs.

    ## Example
    Case: the attention workspace does not fit after the pools (fraction too high)

    `Memory pool end. avail mem=0.49 GB`, then `torch.OutOfMemoryError` in
    `init_attention_backend` on a 23.56 GB card with `mem_fraction_static=0.97`:
    sglog suggests `--mem-fraction-static 0.82` = `0.97 - (4 - 0.49) GB / T 23.56
    GB`.
    """

    code = "SGL111"
    name = "startup-oom"
    triggers = ("batch_oom", "kv_cache_allocated", "memory_pool_end", "memory_summary", "oom", "server_args", "weight_load_begin", "weight_load_end", "memory", "crash")
    severity = "error"
    precedence = 95
    options = {"headroom_gb": Option(4.0, "free memory to leave after the pools for workspaces and activations")}

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.oom_crash(c) else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        pool = facts.last_before(run, "memory_pool_end", rc)
        ev = ([event_evidence(pool)] if pool is not None else []) + exception_evidence(rc)
        T, t_src = total_gb(run, rc)
        avail = pool.get("avail_mem") if pool is not None else rc.get("free_gb")
        mfs = run.memory.mem_fraction_static
        nums = oom_numbers(rc)
        where = " in " + next((f for f in reversed(facts.frame_functions(rc)) if f.startswith("init_")), c.phase or "startup") if facts.frame_functions(rc) else f" during {c.phase or 'startup'}"
        msg = f"Out of GPU memory at startup{where}" + (f" ({nums})" if nums else "") + (f"; only {avail:.2f} GB was free after the memory pools." if avail is not None else ".")
        if T and avail is not None:
            delta = ceil_to(max(0.01, (o["headroom_gb"] - avail) / T))
            if mfs is not None:
                new = floor_to(mfs - delta)
                fix = Fix(
                    summary=f"Lower --mem-fraction-static from {mfs:.2f} to {new:.2f} = {mfs:.2f} - ({o['headroom_gb']:.0f} - {avail:.2f}) GB / T {T:.2f} GB ({t_src}).",
                    args={"--mem-fraction-static": f"{new:.2f}"},
                    safety=self.fix_safety,
                )
            else:
                fix = Fix(
                    summary=f"Lower --mem-fraction-static by {delta:.2f} = ({o['headroom_gb']:.0f} - {avail:.2f}) GB / T {T:.2f} GB ({t_src}); the current value is not in this log.",
                    args={},
                    safety=self.fix_safety,
                )
        else:
            fix = Fix(summary="Lower --mem-fraction-static so that 4-6 GB stay free after the memory pools.", args={}, safety=self.fix_safety)
        yield self.finding(run, msg, ev, fix)
