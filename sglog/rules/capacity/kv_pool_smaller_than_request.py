"""SGL112 kv-pool-smaller-than-request: the KV pool cannot hold one request of the full context length."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules.base import Option, Rule, event_evidence
from sglog.rules.capacity.fit import PoolFit, pool_fit
from sglog.rules.memory.budget import budget_evidence
from sglog.rules.said import said


def _refused(run, ctx: int) -> list:
    """The requests refused for the pool: rejected as too long against max_total_tokens (or a limit below the context)."""
    return [s for s in said(run, "request_too_long") if s.get("action") == "rejected" and (s.get("limit_kind") == "max_total_tokens" or (isinstance(s.get("limit"), int) and s.get("limit") < ctx - 8))]


def _message(pool: int, ctx: int, where: str, refused: list) -> str:
    if pool <= 0:
        msg = f"The KV pool is empty{where}: the profiled max_total_num_tokens is {pool:,}, so no request of any length fits (context_len {ctx:,})."
    else:
        msg = f"The KV pool{where} holds {pool:,} tokens, less than one request of the full context length ({ctx:,} tokens): longer prompts are refused."
    if refused:
        msg = msg[:-1] + f"; {len({s.get('input_tokens') for s in refused})} refused for it."
    return msg


def _raise_fix(fit: PoolFit, ctx: int) -> Fix:
    """The fraction that holds `ctx` tokens and keeps the headroom."""
    return Fix(
        summary=f"Raise --mem-fraction-static to {fit.mfs_needed:.2f} = {fit.basis} to hold {ctx:,} tokens; at most {fit.mfs_upper:.2f} keeps {fit.headroom_gb:.1f} GB free for activations.",
        args={"--mem-fraction-static": f"{fit.mfs_needed:.2f}"},
        safety=f"At {fit.mfs_needed:.2f} less memory stays free for activations and CUDA graphs; check available_gpu_mem (5-8 GB) in the next run.",
    )


def _no_fraction(fit: PoolFit, ctx: int) -> str:
    """Why no fraction is suggested, as the start of a sentence."""
    if fit.mfs_needed is not None and fit.mfs_upper is not None:
        why = f"no fraction fits: {ctx:,} tokens need {fit.mfs_needed:.2f} of the card, at most {fit.mfs_upper:.2f} leaves {fit.headroom_gb:.1f} GB for activations"
    else:
        why = f"the log lacks {' and '.join(fit.missing) or 'the memory lines'} to compute a fraction"
    return f"{why[:1].upper()}{why[1:]}"


def _cap_fix(fit: PoolFit, pool: int, cap: int, why: str) -> Fix:
    """--context-length to what the pool holds (grown to the largest fraction that keeps the headroom, if that is more)."""
    reach = fit.reachable_pool
    grow = reach is not None and reach > pool and fit.mfs_upper is not None
    args: dict[str, str | None] = {"--context-length": str(cap)}
    if grow:
        args = {"--mem-fraction-static": f"{fit.mfs_upper:.2f}", **args}
        pool_txt = f"--mem-fraction-static {fit.mfs_upper:.2f} grows the pool from {pool:,} to ~{reach:,} tokens and --context-length {cap} makes the limit that pool's"
    else:
        pool_txt = f"--context-length {cap} makes the limit the pool's ({pool:,} tokens, rounded down to 1024)"
    return Fix(
        summary=f"{why}: {pool_txt}; more capacity needs --kv-cache-dtype fp8_e4m3, more GPUs (--tp) or a quantized checkpoint.",
        args=args,
        safety=f"--context-length {cap} refuses prompts longer than {cap:,} tokens up front; an fp8 KV cache can cost accuracy.",
    )


def _fix(fit: PoolFit, pool: int, ctx: int) -> Fix:
    """A fraction that holds `ctx` tokens, else a context the pool holds, else more memory."""
    if fit.fits:
        return _raise_fix(fit, ctx)
    why = _no_fraction(fit, ctx)
    cap = fit.context_cap
    if cap and pool > 0:
        return _cap_fix(fit, pool, cap, why)
    return Fix(
        summary=f"{why}: raise --mem-fraction-static until the pool is positive, or use more GPUs (--tp), a quantized checkpoint or --kv-cache-dtype fp8_e4m3.",
        args={},
        safety="A higher fraction leaves less memory for activations; an fp8 KV cache can cost accuracy.",
    )


def _offered_only(fix: Fix) -> Fix:
    """No request was refused for it: a shorter context is a choice to offer, not a change to make."""
    return Fix(
        summary=fix.summary + " (Not in the suggested change: no request was refused for it in this log.)",
        args={k: v for k, v in fix.args.items() if k != "--context-length"},
        safety=fix.safety,
    )


class KvPoolSmallerThanRequest(Rule):
    """The KV pool is smaller than one request of the full context length (or empty).

    ## What it finds
    A ready summary (`max_total_num_tokens=P, ..., context_len=C`, and the
    0.1.x wordings `Rank 0: max_total_num_token=P, ..., context_len=C`) whose
    pool `P` (the minimum over ranks) is below `C`: an error when `P <= 0`
    (a starved pool: the profiler found no memory for it; 0.1.x printed it
    and went on), a warning when requests were refused for it
    (request-too-long with the KV pool binding), an info otherwise.

    ## Why it matters
    The server advertises `C` tokens of context but can never hold a request
    that long: such prompts are refused (or cut) with "exceeds the maximum
    allowed length", and long requests queue behind each other.  With `P <= 0`
    nothing can be served at all: the first request fails (0.1.x: `'NoneType'
    object has no attribute ...` when the pool hands out no slots).

    ## Evidence
    The ready summary, the weight-load and KV lines (`T`, `A_w`,
    bytes/token), and the refused requests if any.

    ## Suggested fix
    The fraction that holds `C` tokens: `mfs = mfs_now + (C - P) x bytes/token
    / T` (a starved pool: `(T - A_w + C x bytes/token) / T`, or
    `min_kv_gb_if_unknown` when the log has no KV line), rounded up to 0.01,
    when it leaves `min(headroom_gb, headroom_share x T)` free (and, with a
    ready summary, no more than the free memory `F` minus that headroom);
    otherwise cap `--context-length` to what the pool holds (`P` rounded down
    to 1024), or shrink the KV cache (`--kv-cache-dtype fp8_e4m3`) / add GPUs.

    ## Fix safety
    A higher fraction leaves less memory for activations and CUDA graphs:
    check `available_gpu_mem` (5-8 GB) in the next run.  A shorter
    `--context-length` refuses longer prompts up front.

    ## Example
    Case: a pool of 29,163 tokens for a 32,768-token context (SGLang 0.4.6 formats): the fraction that holds one full request

    `KV Cache is allocated. #tokens: 29163` on a 23.2 GB card with
    `mem_fraction_static=0.8` and `context_len=32768`: the pool `holds 29,163
    tokens`, less than one full-context request, so sglog suggests
    `--mem-fraction-static 0.82` = `0.80 + 0.44 GB (3,605 tokens x 128.0 KB) / T
    23.2 GB`, `at most 0.90`.
    """

    code = "SGL112"
    name = "kv-pool-smaller-than-request"
    triggers = (
        "cpp_exception",
        "fatal_error",
        "kv_cache_allocated",
        "logging_error",
        "memory_pool_end",
        "memory_summary",
        "oom",
        "request_too_long",
        "scheduler_exception",
        "server_args",
        "traceback",
        "weight_load_begin",
        "weight_load_end",
        "memory",
    )
    severity = "error"
    options = {
        "headroom_gb": Option(5.0, "activation memory that must stay outside the static pool (as kv-pool-starved-by-weights)"),
        "headroom_share": Option(0.10, "the same as a share of T (whichever is smaller applies: small cards)"),
        "min_kv_gb_if_unknown": Option(2.0, "KV pool to aim for when the log has no KV line (a starved pool)"),
    }

    def _check(self, run, o) -> Iterator:
        summaries = [e for e in run.events_of("memory_summary") if isinstance(e.get("max_total_num_tokens"), int)]
        if not summaries:
            return
        pool_ev = min(summaries, key=lambda e: e.get("max_total_num_tokens"))
        pool = pool_ev.get("max_total_num_tokens")
        ctx = pool_ev.get("context_len") if isinstance(pool_ev.get("context_len"), int) else run.memory.context_len
        if not ctx or pool >= ctx:
            return
        refused = _refused(run, ctx)
        fit = pool_fit(run, ctx, o["headroom_gb"], o["headroom_share"], o["min_kv_gb_if_unknown"])
        where = f" on {pool_ev.rank.label}" if pool_ev.rank is not None and len(summaries) > 1 else ""
        fix = _fix(fit, pool, ctx)
        ev = [event_evidence(pool_ev)] + [x for x in budget_evidence(run) if x.line != pool_ev.line] + [event_evidence(s.event) for s in refused[:1]]
        severity = None if pool <= 0 else ("warning" if refused else "info")
        if severity == "info" and fix.args.get("--context-length"):
            fix = _offered_only(fix)
        yield self.finding(
            run, _message(pool, ctx, where, refused), ev, fix, severity=severity, pool_tokens=pool, context_len=ctx, mfs_needed=fit.mfs_needed, mfs_upper=fit.mfs_upper, refused=len(refused)
        )
