"""SGL102 kv-pool-starved-by-weights: the weights leave (almost) nothing for the KV cache: startup fails with `Not enough memory`."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, ceil_to, exception_evidence, floor_to
from sglog.rules.memory.budget import GiB, budget_evidence, total_gb
from sglog.rules.memory.sglang_check import suggested_above
from sglog.rules.ownership import SIGNATURE, CrashRule

_SAFETY = "Less memory stays free for activations and CUDA graphs."


def _unmeasured_fix(c, mfs: float | None) -> Fix:
    """Without `T` or `A_w`: SGLang's own minimum, else the current value + 0.05, else just the direction."""
    above = suggested_above(c)
    if above is not None:
        new = ceil_to(above + 0.005)
        return Fix(f"Raise --mem-fraction-static to {new:.2f} (SGLang's message names {above:.3f} as the minimum).", {"--mem-fraction-static": f"{new:.2f}"}, _SAFETY)
    if mfs is not None:
        new = ceil_to(min(0.95, mfs + 0.05))
        return Fix(f"Raise --mem-fraction-static (try {new:.2f}); the log lacks the weight-load lines needed to compute the value.", {"--mem-fraction-static": f"{new:.2f}"}, _SAFETY)
    return Fix("Raise --mem-fraction-static; the log lacks the weight-load lines and the current value needed to compute one.", {}, _SAFETY)


def _kv_need(m, o) -> tuple[float, str]:
    """The KV pool to make room for (GB): one full context, else `min_kv_gb_if_unknown`; and how it was computed."""
    bpt = m.bytes_per_kv_token
    if bpt and m.context_len:
        return m.context_len * bpt / GiB, f"one full context ({m.context_len:,} tokens x {bpt / 1024:.1f} KB)"
    kv_need = o["min_kv_gb_if_unknown"]
    return kv_need, f"{kv_need:.1f} GB (assumed: no KV line in the log)"


def _needed(c, used: float, kv_need: float, T: float) -> float:
    """mfs = (A_w + kv_need) / T rounded up, at least above the minimum SGLang's message names."""
    new = ceil_to((used + kv_need) / T)
    above = suggested_above(c)
    if above is not None:
        new = max(new, ceil_to(above + 0.005))
    return new


def _message(mfs: float | None, mfs_txt: str, T: float, used: float) -> str:
    if mfs is None:
        return f"Startup failed: the weights use {used:.1f} of {T:.1f} GB and leave no room for the KV pool."
    return f"Startup failed: {mfs_txt} reserves {mfs * T:.1f} of {T:.1f} GB, about what the weights use ({used:.1f} GB), so the KV pool is empty."


def _no_fit_fix(run, new: float, upper: float, headroom: float) -> Fix:
    """No fraction leaves the headroom: more GPUs, a quantized checkpoint, an fp8 KV cache (the args, when the cache is 16-bit)."""
    return Fix(
        summary=f"No fraction fits: the weights plus a minimal KV pool need {new:.2f} of the card but at most {upper:.2f} leaves {headroom:.1f} GB for activations. "
        "Use more GPUs (--tp), a quantized checkpoint or --kv-cache-dtype fp8_e4m3.",
        args={"--kv-cache-dtype": "fp8_e4m3"} if str(run.args.get("kv_cache_dtype") or "auto") in ("auto", "bfloat16", "float16", "bf16") else {},
        safety="An fp8 KV cache halves KV memory but can cost accuracy on some models.",
    )


class KvPoolStarvedByWeights(CrashRule):
    """The weights leave (almost) nothing for the KV cache: startup fails with `Not enough memory`.

    ## What it finds
    (error) A crash with `Not enough memory. Please try to increase
    --mem-fraction-static` / `Loaded weights leave no GPU memory for the KV
    cache` (speculative runs with an automatic fraction are
    `draft-model-exceeds-static-pool` instead).  A server that starts with a
    KV pool smaller than one full-length request is
    `kv-pool-smaller-than-request`.

    ## Why it matters
    `mem_fraction_static x T` must hold the weights *and* the KV pool.  When
    the weights use nearly all of it the pool is empty (startup fails) or tiny
    (long prompts are rejected, requests queue).  Lowering the fraction, the
    usual OOM advice, makes this worse.

    ## Evidence
    The weight-load lines (`T`, `A_w`), the KV/ready lines and the exception.

    ## Suggested fix
    Raise the fraction to `mfs = (T - A_w + kv_need) / T` rounded up to 0.01,
    where `kv_need` = `context_len` x bytes/token for a small pool (for a
    crash without a KV line: `min_kv_gb_if_unknown`).  If that leaves less than
    `min(headroom_gb, headroom_share x T)` free (`mfs > 1 - headroom/T`) no fraction works: the fix
    then caps `--context-length` to what the pool holds (small pool) or asks
    for more GPUs / a quantized checkpoint / `--kv-cache-dtype fp8_e4m3`.

    ## Fix safety
    A higher fraction leaves less memory for activations and CUDA graphs: check
    that `available_gpu_mem` stays at 5-8 GB in the next run.  A shorter
    `--context-length` rejects longer prompts.

    ## Example
    Case: weights fill the static pool: Not enough memory, raise the fraction

    `Load weight begin. avail mem=23.20 GB` then `Load weight end ... avail
    mem=5.10 GB, mem usage=18.10 GB` with `mem_fraction_static=0.78`: the
    fraction reserves `18.1 of 23.2 GB`, all of it weights, and the server dies
    with `Not enough memory`.  sglog suggests `--mem-fraction-static 0.87` =
    `(weights 18.1 GB + KV 2.0 GB ... / T 23.2 GB` (the KV share assumed: the log
    has no KV line), `at most 0.90`.
    """

    code = "SGL102"
    name = "kv-pool-starved-by-weights"
    triggers = ("kv_cache_allocated", "kv_memory_insufficient", "memory_pool_end", "memory_summary", "server_args", "weight_load_begin", "weight_load_end", "args", "memory", "crash")
    severity = "error"
    precedence = 70
    options = {
        "headroom_gb": Option(5.0, "activation memory that must stay outside the static pool"),
        "headroom_share": Option(0.10, "the same as a share of T (whichever is smaller applies: small cards)"),
        "min_kv_gb_if_unknown": Option(2.0, "KV pool to aim for when the log has no KV line (crash before allocation)"),
    }

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.not_enough_memory(c) and not facts.is_spec_auto(run) else None

    def _check(self, run, o) -> Iterator:
        c = facts.crash(run)
        if c is not None and self.owned_crash(run) is not None:
            yield self._crash(run, o, c)
            return
        # (a server whose pool is smaller than one full-length request is kv-pool-smaller-than-request's)

    def _crash(self, run, o, c):
        m = run.memory
        T, _ = total_gb(run, c.event)
        ev = budget_evidence(run) + exception_evidence(c.event)
        mfs = m.mem_fraction_static
        mfs_txt = f"--mem-fraction-static {mfs:.2f}" if mfs is not None else "--mem-fraction-static"
        if not T or m.avail_after_weights_gb is None:
            msg = f"Startup failed: the weights leave no memory for the KV cache under {mfs_txt}."
            return self.finding(run, msg, ev, _unmeasured_fix(c, mfs))
        used = T - m.avail_after_weights_gb
        kv_need, kv_src = _kv_need(m, o)
        new = _needed(c, used, kv_need, T)
        headroom = min(o["headroom_gb"], o["headroom_share"] * T)
        upper = floor_to(1 - headroom / T)
        if new <= upper:
            fix = Fix(
                summary=f"Raise --mem-fraction-static to {new:.2f} = (weights {used:.1f} GB + KV {kv_src}) / T {T:.1f} GB; at most {upper:.2f} keeps {headroom:.1f} GB for activations.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety="Less memory stays free for activations and CUDA graphs; check available_gpu_mem (5-8 GB) in the next run.",
            )
        else:
            fix = _no_fit_fix(run, new, upper, headroom)
        return self.finding(run, _message(mfs, mfs_txt, T, used), ev, fix, mfs_needed=new, mfs_upper=upper)
