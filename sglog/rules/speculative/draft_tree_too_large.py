"""SGL302 draft-tree-too-large: more draft steps than the acceptance pays for: late steps are rarely accepted but always paid."""

from __future__ import annotations

import math
from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, window_evidence
from sglog.rules.speculative.chain import CHAIN_ALGOS, accept_stats, chain_len, solve_alpha, spec_evidence


class DraftTreeTooLarge(Rule):
    """More draft steps than the acceptance pays for: late steps are rarely accepted but always paid.

    ## What it finds
    An EAGLE-family run (chain or tree) whose per-position acceptance `a`
    (from the median accept length and `--speculative-num-steps`; at least
    `min_alpha`, below which `low-spec-acceptance` applies) makes the
    `k`-th draft token worth less than `min_marginal` tokens (`a^k`) for
    some `k <= steps`, over at least `min_rows` decode lines; with
    `--speculative-eagle-topk > 1` the tree itself is also oversized.

    ## Why it matters
    Each step costs a draft forward; each draft token costs verify compute
    (more on MoE targets, where more tokens read more experts).  The `k`-th
    token is accepted with probability ~`a^k`, so the tail of a long chain
    adds cost and almost no tokens.  In the story 5 and 10 steps gave accept
    lengths of ~2.1 and ~2.3: twice the draft work for 0.2 tokens.

    ## Evidence
    The server-args line and the decode window with the median accept length.

    ## Suggested fix
    `s* = floor(log(min_marginal) / log(a))` clamped to 1..steps (the rule
    fires when `s* < steps`, or for any tree with topk > 1), with
    `--speculative-eagle-topk 1 --speculative-num-draft-tokens s*+1`; the
    fix states the accept length expected at `s*`: `(1 - a^(s*+1)) / (1 - a)`.

    ## Fix safety
    The accept length drops a little (the fix says by how much); the cycle gets
    `steps - s*` draft steps and verify tokens shorter.  Measure tok/s at the
    real concurrency before and after.

    ## Example
    Case: 5 steps at accept len 2.10: steps 4 and 5 rarely pay (story item 3)

    5 steps with a median accept length of `2.10`: `53% per-position
    acceptance`, so `token 4 onward is accepted less than 10% of the time`.
    sglog suggests `--speculative-num-steps 3 --speculative-eagle-topk 1
    --speculative-num-draft-tokens 4` (`expected accept length 1.97 vs 2.10`).
    """

    code = "SGL302"
    name = "draft-tree-too-large"
    triggers = ("server_args", "args", "batches")
    severity = "warning"
    options = {
        "min_marginal": Option(0.1, "smallest worthwhile acceptance probability of the last draft token"),
        "min_rows": Option(5, "decode lines with accept len needed"),
        "min_alpha": Option(0.35, "below this per-position acceptance the draft is mismatched (low-spec-acceptance), not too long"),
    }

    def _check(self, run, o) -> Iterator:
        algo = facts.spec_algo(run) or ""
        steps, topk, ndt = facts.spec_steps(run)
        if algo not in CHAIN_ALGOS or not steps or steps < 2:
            return
        s_rows, L, rate = accept_stats(run, o["min_rows"])
        if s_rows is None:
            return
        a = solve_alpha(L, steps)
        if a < o["min_alpha"] or a >= 1.0:
            return
        best = int(math.floor(math.log(o["min_marginal"]) / math.log(a)))
        best = max(1, min(steps, best))
        tree = (topk or 1) > 1
        if best >= steps and not tree:
            return
        L_new = chain_len(a, best)
        msg = f"{steps} draft steps{f' x topk {topk}' if tree else ''} for a median accept length of {L:.2f}: with {a:.0%} per-position acceptance, token {best + 1} onward is accepted less than {o['min_marginal']:.0%} of the time."
        ev = spec_evidence(run) + [
            window_evidence(
                run, f"median accept len {L:.2f} over {s_rows.height} steady decode lines; a = {a:.2f}; marginal value of step k = a^k: " + ", ".join(f"{k}:{a**k:.2f}" for k in range(1, steps + 1))
            )
        ]
        fix = Fix(
            summary=f"Shorten the draft to {best} step{'s' if best > 1 else ''}: --speculative-num-steps {best} --speculative-eagle-topk 1 --speculative-num-draft-tokens {best + 1} "
            f"(expected accept length {L_new:.2f} vs {L:.2f}, with {steps - best} fewer draft steps and {(ndt or steps + 1) - (best + 1)} fewer verify tokens per cycle).",
            args={"--speculative-num-steps": str(best), "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": str(best + 1)},
            safety=self.safety({"steps": steps, "s*": best}),
        )
        yield self.finding(run, msg, ev, fix, alpha=round(a, 4), best_steps=best, expected_accept_len=round(L_new, 3))
