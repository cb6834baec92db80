"""SGL206 request-too-long: a request longer than the context length or the allowed maximum."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules.base import Option, Rule, event_evidence, window_evidence
from sglog.rules.capacity.fit import pool_fit
from sglog.rules.said import ranks_of, said

# SGLang's allowed maximum (`max_req_input_len`) is min(context_len, max_total_num_tokens) less a
# few tokens (1 + 5 in 0.3-0.5): a limit within this many tokens of one of them is that one
MARGIN = 8

_LIMIT_WORDS = {
    "context_len": "the model's context length",
    "kv_pool": "the KV pool",
    "allowed_maximum": "the allowed maximum",
    "max_total_tokens": "the KV pool",
}


class RequestTooLong(Rule):
    """A request was longer than the context length or the allowed maximum, and was refused or cut.

    ## What it finds
    SGLang's messages for an over-long request, logged or raised, in every
    release's wording: `Input length (N tokens) exceeds the maximum allowed
    length (L tokens)` (the scheduler's allowed maximum, 0.4.x), `The input (N
    tokens) is longer than the model's context length (L tokens)` (refused,
    or cut with `Truncating the input`), `Requested token count exceeds the
    model's maximum context length` (input plus max_new_tokens), `Request
    length is longer than the KV cache pool size or the max context length.
    Truncated`, the multimodal `prompt is too long after expanding`, and a PD
    decode instance's `Request ... exceeds the maximum number of tokens`.  For
    each limit `L` it reports the requests, the longest input `N` and which
    limit binds.

    ## Why it matters
    The client gets an error (HTTP 400) or an answer computed from a cut
    prompt.  The scheduler's allowed maximum is min(`context_len`,
    `max_total_num_tokens`) less a few tokens: when it is far below the
    context length the server advertises, the KV pool is what refuses long
    prompts, and no client setting can fix that.

    ## Evidence
    The first messages, and a summary: how many, the longest input, the
    limit, the ranks; the context length and KV pool from the ready summary
    when the log has it.  Refused requests are a warning, requests only cut
    an info.  A crash that follows is the crash rules' (the request does not
    explain a scheduler's own bug).

    ## Suggested fix
    Depends on the limit that binds.  The model's context length: cut the
    request (or `--allow-auto-truncate`); raise `--context-length` only when
    the launch set it below what the model supports (its `config.json`
    `max_position_embeddings`), to `N + new tokens` rounded up to 1024.  The
    KV pool: grow it to hold `N + margin` tokens, `mfs = mfs_now + (N + margin -
    pool) x bytes/token / T` (as kv-pool-smaller-than-request computes it,
    keeping `min(headroom_gb, headroom_share x T)` free), else
    `--kv-cache-dtype fp8_e4m3` or more GPUs.  When the log shows neither the
    context nor the pool it says both are possible.

    ## Fix safety
    Cutting a request changes its answer; `--allow-auto-truncate` does it
    silently.  A longer `--context-length` than the model was trained for
    gives wrong outputs (SGLang refuses it without
    `SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1`).  A higher
    `--mem-fraction-static` leaves less memory for activations and CUDA graphs.

    ## Example
    Case: corpus 218 (sgl-project/sglang #4048), tail only: 160,062 tokens against the allowed maximum 59,862, logged by two ranks

    `Input length (160062 tokens) exceeds the maximum allowed length (59862
    tokens)` on TP5 and TP1 of a DeepSeek-R1 TP8 server: `1 request refused
    (logged by TP5, TP1)`.  The excerpt shows `neither the context length nor the
    KV pool`, so sglog explains that the allowed maximum is the smaller of the
    two: if the KV pool binds, a higher `--mem-fraction-static` (or
    `--kv-cache-dtype fp8_e4m3`) raises it; otherwise cut the prompt `to at most
    59,862 tokens`.  (The issue's server was launched with a context length of
    163,840: there the pool bound.)
    """

    code = "SGL206"
    name = "request-too-long"
    triggers = ("cpp_exception", "fatal_error", "logging_error", "oom", "request_too_long", "scheduler_exception", "traceback", "args", "memory")
    severity = "warning"
    options = {
        "headroom_gb": Option(5.0, "activation memory that must stay outside the static pool (as kv-pool-starved-by-weights)"),
        "headroom_share": Option(0.10, "the same as a share of T (whichever is smaller applies)"),
    }

    def _check(self, run, o) -> Iterator:
        items = [s for s in said(run, "request_too_long") if s.get("action")]
        if not items:
            return
        groups: dict[tuple, list] = {}
        for s in items:
            groups.setdefault((s.get("limit_kind"), s.get("limit"), s.get("action") == "rejected"), []).append(s)
        # one finding per limit: refused requests first (they fail), then the largest limit
        for (kind, limit, refused), group in sorted(groups.items(), key=lambda kv: (not kv[0][2], -(kv[0][1] or 0))):
            yield self._finding(run, o, kind, limit, refused, group)

    def _finding(self, run, o, kind, limit, refused, group):
        m = run.memory
        ctx, pool = m.context_len, m.max_total_num_tokens
        inputs = [s.get("input_tokens") for s in group if isinstance(s.get("input_tokens"), int)]
        longest = max(inputs) if inputs else None
        news = [s.get("new_tokens") or 0 for s in group if isinstance(s.get("input_tokens"), int) and s.get("input_tokens") == longest]
        new_tokens = max(news) if news else 0
        binds, assumed = self._binding(kind, limit, ctx, pool)
        ranks = ranks_of(group)
        # every rank of a tensor-parallel group logs the same request: count it once
        per_rank: dict[str | None, int] = {}
        for s in group:
            key = s.event.rank.label if s.event.rank is not None else None
            per_rank[key] = per_rank.get(key, 0) + 1
        n = max(per_rank.values())
        what = "refused" if refused else ("cut to fit" if all(s.get("action") == "truncated" for s in group) else "given fewer new tokens")
        lim_txt = f"{limit:,} tokens" if isinstance(limit, int) else "the limit"
        where = f" (logged by {', '.join(ranks[:4])}{' ...' if len(ranks) > 4 else ''})" if len(ranks) > 1 else (f" on {ranks[0]}" if ranks else "")
        binds_txt = {
            "context_len": "the model's context length",
            "kv_pool": f"the KV pool ({pool:,} tokens)" if pool else (f"the KV pool (~{limit + 6:,} tokens)" if isinstance(limit, int) else "the KV pool"),
        }.get(binds or "", "")
        if kind == "allowed_maximum" and binds:
            limit_words = f"the allowed maximum of {lim_txt}, set by {binds_txt}" + (f" not the context length ({ctx:,})" if binds == "kv_pool" and ctx else "")
        else:
            limit_words = f"{_LIMIT_WORDS.get(kind, 'the limit')} ({lim_txt})"
        inp = f"{'its' if n == 1 else 'the longest'} input ({longest:,} tokens)" if longest else ("its input" if n == 1 else "their inputs")
        msg = f"{n} request{'s' if n != 1 else ''} {what}{where}: {inp} {'is' if n == 1 or longest else 'are'} longer than {limit_words}."
        if assumed:
            msg = msg[:-1] + f" ({assumed})."
        fix = self._fix(run, o, binds, limit, longest, new_tokens, ctx, refused)
        ev = [event_evidence(s.event) for s in group[:2]]
        note = [f"{len(group)} message{'s' if len(group) != 1 else ''}", f"limit {lim_txt} ({kind})"]
        if longest:
            note.append(f"longest input {longest:,} tokens")
        if ranks:
            note.append(f"ranks {', '.join(ranks)}")
        if ctx:
            note.append(f"context_len {ctx:,}")
        if pool:
            note.append(f"max_total_num_tokens {pool:,}")
        ev.append(window_evidence(run, "; ".join(note)))
        raised = sorted({str(s.event.get("exc_type")) for s in group if s.raised and s.event.get("exc_type")})
        if raised:
            msg = msg[:-1] + f" (raised as {', '.join(raised)})."
        return self.finding(
            run,
            msg,
            ev,
            fix,
            severity=None if refused else "info",
            requests=n,
            limit=limit,
            limit_kind=kind,
            binds=binds,
            longest_input=longest,
            ranks=ranks,
            action="rejected" if refused else "truncated",
        )

    @staticmethod
    def _binding(kind, limit, ctx, pool) -> tuple[str | None, str | None]:
        """Which limit binds ("context_len" / "kv_pool" / None) and what was assumed to say so."""
        if kind == "context_len":
            return "context_len", None
        if kind == "max_total_tokens":
            return "kv_pool", None
        if not isinstance(limit, int):
            return None, "the log does not say which limit"
        if pool and ctx:
            return ("kv_pool" if pool < ctx else "context_len"), None
        if ctx:
            return ("kv_pool" if limit < ctx - MARGIN else "context_len"), None
        if pool:
            return ("kv_pool" if abs(pool - limit) <= MARGIN else "context_len"), None
        return None, "the log shows neither the context length nor the KV pool: the allowed maximum is the smaller of the two, less a few tokens"

    def _fix(self, run, o, binds, limit, longest, new_tokens, ctx, refused) -> Fix:
        if not refused:
            return Fix(
                summary=f"These requests were cut to the limit{f' of {limit:,} tokens' if isinstance(limit, int) else ''}: the answers saw a shortened prompt. Send shorter prompts, or raise the limit as for refused requests if the full prompt matters.",
                args={},
                safety="Cutting changes the answers; a larger limit costs memory or needs a model that supports it.",
            )
        need = (longest or 0) + new_tokens
        ctx_arg = run.args.get("context_length") if run.args else None
        explicit = run.origin("context_length") == "explicit" or isinstance(ctx_arg, int)
        cut = f"cut the prompt to at most {limit:,} tokens" if isinstance(limit, int) else "cut the prompt"
        if binds == "context_len":
            if explicit and isinstance(ctx_arg, int) and need > ctx_arg:
                new = -(-need // 1024) * 1024
                return Fix(
                    summary=f"The launch capped the context at --context-length {ctx_arg:,}: raise it to {new:,} (input {longest:,} + {new_tokens:,} new tokens, rounded up to 1024) only if the model supports it (config.json max_position_embeddings); otherwise {cut}.",
                    args={"--context-length": str(new)},
                    safety=f"A --context-length {new:,} beyond what the model was trained for gives wrong outputs; it also makes the longest request need {new:,} tokens of KV pool.",
                )
            return Fix(
                summary=f"The limit is the model's own context length{f' ({limit:,})' if isinstance(limit, int) else ''}: {cut} on the client, or launch with --allow-auto-truncate to have SGLang cut it. Do not raise --context-length past what the model supports.",
                args={},
                safety="Cutting a prompt changes the answer; --allow-auto-truncate does it silently for every request.",
            )
        tokens = need + MARGIN
        fit = pool_fit(run, tokens, o["headroom_gb"], o["headroom_share"], 2.0)
        if binds == "kv_pool" and fit.fits:
            return Fix(
                summary=f"The KV pool refuses the request, not the context: raise --mem-fraction-static to {fit.mfs_needed:.2f} = {fit.basis} so it holds {tokens:,} tokens (input {longest:,} + {new_tokens:,} new + {MARGIN}); at most {fit.mfs_upper:.2f} keeps {fit.headroom_gb:.1f} GB free. Or {cut}.",
                args={"--mem-fraction-static": f"{fit.mfs_needed:.2f}"},
                safety=f"At {fit.mfs_needed:.2f} less memory stays free for activations and CUDA graphs; check available_gpu_mem (5-8 GB) in the next run.",
            )
        if binds == "kv_pool":
            why = (
                f"no fraction fits: holding {tokens:,} tokens needs {fit.mfs_needed:.2f} of the card, at most {fit.mfs_upper:.2f} leaves {fit.headroom_gb:.1f} GB for activations"
                if fit.mfs_needed is not None and fit.mfs_upper is not None
                else f"the log lacks {' and '.join(fit.missing) or 'the memory lines'} to compute the fraction"
            )
            return Fix(
                summary=f"The KV pool refuses the request, not the context ({why}): {cut}, or grow the pool with --kv-cache-dtype fp8_e4m3, more GPUs (--tp) or a higher --mem-fraction-static.",
                args={},
                safety="An fp8 KV cache can cost accuracy; a higher fraction leaves less memory for activations.",
            )
        return Fix(
            summary=f"The allowed maximum{f' ({limit:,} tokens)' if isinstance(limit, int) else ''} is the smaller of the context length and the KV pool: if the server's context length is larger, the KV pool binds and a higher --mem-fraction-static (or --kv-cache-dtype fp8_e4m3) raises it; otherwise {cut}. The next run's `max_total_num_tokens=... context_len=...` line tells which.",
            args={},
            safety="A higher fraction leaves less memory for activations; cutting a prompt changes the answer.",
        )
