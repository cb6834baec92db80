"""Speculative-decoding rules (SGL3xx): acceptance, draft tree size, draft parallelism, profitability.

The cycle-time model (failure-modes.md §C):

* `L` = accept length (tokens per draft+verify cycle, bonus token included),
  stable across versions; the logged `accept rate` changed meaning in 0.5.11
  (before: accepted / (steps x draft tokens), bonus included; since: drafts only).
* chain (topk 1) acceptance with `s` draft positions:
  `L(s) = (1 - a^(s+1)) / (1 - a)`, `a` = per-position acceptance.
* speculation wins iff `L > L* = t_cycle / t_base`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, fill, row_evidence, window_evidence

CHAIN_ALGOS = ("EAGLE", "EAGLE3", "NEXTN", "MTP")


def chain_len(alpha: float, s: int) -> float:
    """Expected accept length with `s` chained draft positions."""
    if abs(1 - alpha) < 1e-9:
        return s + 1.0
    return (1 - alpha ** (s + 1)) / (1 - alpha)


def solve_alpha(L: float, s: int) -> float:
    """Per-position acceptance that gives accept length `L` over `s` positions (bisection)."""
    if s <= 0:
        return 0.0
    L = min(max(L, 1.0), s + 1.0)
    lo, hi = 0.0, 1.0
    for _ in range(60):
        mid = (lo + hi) / 2
        if chain_len(mid, s) < L:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


def draft_positions(run) -> int | None:
    """How many draft tokens one cycle verifies (chain of `steps` for topk 1)."""
    steps, topk, ndt = facts.spec_steps(run)
    algo = facts.spec_algo(run) or ""
    if algo in CHAIN_ALGOS and steps:
        return steps
    if ndt and ndt > 1:
        return ndt - 1
    return steps


# the logged accept rate, by its definition: (name, d from accept len L and rate r, how far the
# two-decimal rounding of L and r (+-0.005 each) can move that d)
_RATE_FORMS = (
    ("before 0.5.11, bonus token included: `rate = L / (s + 1)`", lambda L, r: L / r - 1, lambda L, r: 0.005 * (r + L) / r**2),
    ("since 0.5.11, draft tokens only: `rate = (L - 1) / s`", lambda L, r: (L - 1) / r, lambda L, r: 0.005 * (r + L - 1) / r**2),
)


def logged_draft_positions(run, s: pl.DataFrame, min_rows: int) -> tuple[int, str] | None:
    """Draft tokens per cycle worked out from the decode lines' accept len and accept rate, for a
    log without the speculative args (an excerpt): (d, the rate definition used), or None.

    The rate's definition changed in 0.5.11; the log's version picks it when known.  A definition
    fits when the d it gives from the median accept len and rate (with a fixed d, L grows with
    the rate under either definition: the medians belong together) is a whole number to within
    what the two-decimal figures allow; when both fit, or neither, or the rounding allows more
    than one whole d, there is no answer."""
    if s.height == 0 or "accept_rate" not in s.columns or "accept_len" not in s.columns:
        return None
    rows = s.select("accept_len", "accept_rate").drop_nulls().filter(pl.col("accept_rate") > 0)
    if rows.height == 0 or rows.height < min_rows:
        return None
    L, r = (float(v) for v in rows.select(pl.col("accept_len").median(), pl.col("accept_rate").median()).row(0))
    new = facts.at_least(run, (0, 5, 11))
    fits = []
    for i, (name, form, err) in enumerate(_RATE_FORMS):
        if new is not None and i != int(new):
            continue
        est, tol = form(L, r), err(L, r)
        d = round(est)
        if tol >= 0.5 or (d >= 1 and abs(est - d) <= tol):  # (with the rounding this loose, any d fits)
            fits.append((d, name, tol < 0.5))
    if len(fits) != 1 or not fits[0][2]:
        return None
    return fits[0][0], fits[0][1]


def accept_stats(run, min_rows: int):
    """(steady rows with accept len, median L, median accept rate or None); once per run (three
    rules ask, and the medians of millions of rows are not free)."""
    return run.memo(f"accept_stats:{min_rows}", lambda run: _accept_stats(run, min_rows))


def _accept_stats(run, min_rows: int):
    s = facts.steady(run)
    if s.height == 0 or "accept_len" not in s.columns:
        return None, None, None
    s = facts.present(s, "accept_len")
    if s.height < min_rows:
        return None, None, None
    # (both medians in one query: polars sorts the two columns side by side)
    has_rate = "accept_rate" in s.columns and s.get_column("accept_rate").drop_nulls().len() > 0
    meds = s.select(pl.col("accept_len").median(), *([pl.col("accept_rate").drop_nulls().median()] if has_rate else [])).row(0)
    return s, float(meds[0]), (float(meds[1]) if has_rate else None)


def _spec_evidence(run):
    sa = run.first("server_args")
    if sa is None:
        return []
    steps, topk, ndt = facts.spec_steps(run)
    return [event_evidence(sa, note=f"speculative_algorithm={facts.spec_algo(run)}, num_steps={steps}, eagle_topk={topk}, num_draft_tokens={ndt}")]


def _rate_definition(run) -> str:
    new = facts.at_least(run, (0, 5, 11))
    if new is True:
        return "since 0.5.11 it counts draft tokens only"
    if new is False:
        return "before 0.5.11 it includes the bonus token"
    return "its definition changed in 0.5.11, so accept len is used"


class LowSpecAcceptance(Rule):
    """The draft model's tokens are rarely accepted for its draft length.

    ## What it finds
    A speculative run whose steady-state median accept length `L`, over `s`
    draft positions, means a per-position acceptance `a` below `min_alpha`
    (`L = (1 - a^(s+1)) / (1 - a)`), over at least `min_rows` decode lines.
    `s` comes from the speculative args; a log without them (an excerpt) gets
    it from the decode lines' accept len and accept rate (`rate = L / (s + 1)`
    before 0.5.11, `(L - 1) / s` since; the log's version picks one when it
    can), when the two-decimal figures leave exactly one whole `s` (both
    definitions fitting, or a rate too small to tell, is no answer).

    ## Why it matters
    Speculation is lossless, so a broken draft produces correct text and no
    error, only lost speed: every cycle pays for `s` draft steps and a
    verify of `s+1` tokens and keeps little more than the bonus token.
    Typical causes: EAGLE-3 hidden-state taps wired to the wrong target layers
    (the story: ~19% acceptance until the wiring was fixed), a draft trained for
    another target revision or chat template, a version regression.  The
    `accept rate` printed by SGLang changed meaning in 0.5.11 (drafts only
    since, bonus token included before), so the rule works from `accept len`,
    which did not change, and reports the rate with its definition.

    ## Evidence
    The server-args line (algorithm, steps, draft tokens) and the decode window
    with the median accept length and rate.

    ## Suggested fix
    No flag fixes a mismatched draft: check that the draft matches the target
    (`eagle_aux_hidden_state_layer_ids` vs the layers the target exports, the
    exact target revision), A/B at temperature 0 against a reference benchmark,
    or pin a known-good SGLang version.  Until then `s* = 1` step
    (`--speculative-num-steps 1 --speculative-eagle-topk 1
    --speculative-num-draft-tokens 2`) wastes the least.

    ## Fix safety
    Fewer steps cap the accept length at 2; switching the draft or version
    changes nothing else on the command line.

    ## Example
    EAGLE-3, 5 steps, `accept len: 1.18` (a = 0.16) -> the draft is not
    predicting this target; 3 and 10 steps give the same picture.
    """

    code = "SGL301"
    name = "low-spec-acceptance"
    severity = "warning"
    options = {"min_alpha": Option(0.35, "per-position acceptance below which the draft is mismatched"), "min_rows": Option(5, "decode lines with accept len needed")}

    def _check(self, run, o) -> Iterator:
        if not (facts.is_spec(run) or (run.spec or {}).get("algorithm")):
            return
        s_rows, L, rate = accept_stats(run, o["min_rows"])
        if s_rows is None:
            return
        d, worked_out = draft_positions(run), None
        if not d:  # (no speculative args: an excerpt)
            d, worked_out = logged_draft_positions(run, s_rows, o["min_rows"]) or (None, None)
        if not d:
            return
        a = solve_alpha(L, d)
        if a >= o["min_alpha"]:
            return
        if worked_out:
            rate_txt = f"; the log has no speculative args: {d} draft positions is what its accept len and accept rate ({rate:.2f}) give, with the rate's definition {fill(worked_out, {'rate': f'{rate:.2f}', 'L': f'{L:.2f}', 's': d})}"
        else:
            rate_txt = f"; the logged accept rate is {rate:.2f} ({_rate_definition(run)})" if rate is not None else ""
        msg = f"Draft tokens are rarely accepted: median accept length {L:.2f} over {d} draft positions means only {a:.0%} per-position acceptance{rate_txt}."
        ev = _spec_evidence(run) + [
            row_evidence(s_rows.head(1).to_dicts()[0]),
            window_evidence(run, f"median accept len {L:.2f} over {s_rows.height} steady decode lines ({facts.line_span(s_rows)}); a = {a:.2f} from L = (1 - a^{d + 1}) / (1 - a)"),
        ]
        algo = facts.spec_algo(run) or ""
        args = {"--speculative-num-steps": "1", "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": "2"} if algo in CHAIN_ALGOS and d > 1 else {}
        fix = Fix(
            summary="Check that the draft matches the target (EAGLE-3 hidden-state layer ids, target revision, chat template) against a reference benchmark at temperature 0; meanwhile one draft step wastes the least.",
            args=args,
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, accept_len=L, alpha=round(a, 4), positions=d)


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
    5 steps with accept length 2.10 -> a = 0.53, a^4 = 0.08 < 0.1 ->
    `--speculative-num-steps 3 --speculative-eagle-topk 1
    --speculative-num-draft-tokens 4` (expected accept length 1.97).
    """

    code = "SGL302"
    name = "draft-tree-too-large"
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
        ev = _spec_evidence(run) + [
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


class DraftModelFullTp(Rule):
    """The draft model runs with the target's tensor parallelism: every draft step pays all-reduces.

    ## What it finds
    A speculative run with a draft model (EAGLE family, STANDALONE, DFLASH...)
    and `--tp` > 1.  SGLang runs the draft in the target's TP group; there is
    no flag to give it its own.

    ## Why it matters
    A one-token draft forward is tiny, so its all-reduces (two per layer) and
    kernel launches across all GPUs dominate it; on PCIe (no NVLink) each
    all-reduce costs tens of microseconds.  `steps` draft forwards per cycle
    multiply this.  The story: a 2.6B single-layer EAGLE-3 draft on TP8 over PCIe.

    ## Evidence
    The server-args line (`tp_size`, algorithm) and, when present, the
    `Custom allreduce is disabled ... PCIe` line.

    ## Suggested fix
    Fewer draft steps (see `draft-tree-too-large`); if memory allows, smaller
    TP with data parallelism (`--tp` half, `--dp 2`); follow the upstream
    draft-TP work (a TP-1 draft per rank).

    ## Fix safety
    Halving TP doubles the weights per GPU; only possible when they fit.

    ## Example
    `tp_size=8, speculative_algorithm='EAGLE3'` on 8 PCIe GPUs: each of the 5
    draft steps all-reduces across 8 GPUs.
    """

    code = "SGL303"
    name = "draft-model-full-tp"
    severity = "info"

    def _check(self, run, o) -> Iterator:
        algo = facts.spec_algo(run)
        if not algo or algo == "NGRAM":
            return
        tp = facts.tp_size(run)
        if tp < 2:
            return
        ev = _spec_evidence(run)
        pcie = next((e for e in run.events if "PCIe" in (e.text or "") and "allreduce" in (e.text or "").lower()), None) if run.mentions("PCIe") else None
        if pcie is not None:
            ev.append(event_evidence(pcie))
        steps, _, _ = facts.spec_steps(run)
        per = f"each of the {steps} draft steps" if steps else "every draft step"
        msg = f"The {algo} draft runs on the target's TP{tp} group: {per} all-reduces across {tp} GPUs{' over PCIe' if pcie is not None else ''}."
        fix = Fix(
            summary=f"SGLang has no separate draft TP: use fewer draft steps, or --tp {tp // 2} --dp 2 if the weights fit in half the GPUs.",
            args={},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, tp=tp)


class SpeculationUnprofitable(Rule):
    """The run itself shows speculation costing more than it gains.

    ## What it finds
    Only what one run can prove, with the cycle-time model: (a) a median accept
    length of at most `max_useless_accept_len` (every cycle yields about the
    one token a plain step yields, while costing a verify forward plus the
    draft steps); or (b) decode lines of the same run with and without
    speculation (accept len present/absent, at least `min_rows` of each) at
    the same `#running-req` where the speculative ones are slower.  Comparing against a separate baseline
    run is `sglog diff`'s job; without such evidence this rule does not fire.

    ## Why it matters
    Speculation pays when `L > L* = t_cycle / t_base`.  `t_cycle` >= one
    target forward, so `L` ~ 1 can never pay; within one run (b) measures
    `L* = L x tok/s(plain) / tok/s(spec)` directly.

    ## Evidence
    The decode window with the accept length and the throughputs compared.

    ## Suggested fix
    Disable speculation for this deployment (remove the `--speculative-*`
    flags), or fix acceptance first (`low-spec-acceptance`) and shorten the
    draft (`draft-tree-too-large`).

    ## Fix safety
    Without speculation, single-stream latency is that of plain decoding; at
    low concurrency a well-matched draft can still win: re-test after fixing
    acceptance.

    ## Example
    `accept len: 1.00` on every decode line -> speculation only adds cost.
    """

    code = "SGL304"
    name = "speculation-unprofitable"
    severity = "warning"
    options = {"max_useless_accept_len": Option(1.05, "accept length that proves no gain"), "min_rows": Option(5, "decode lines needed on each side")}

    def _check(self, run, o) -> Iterator:
        d = facts.decode_rows(run)
        if d.height == 0 or "accept_len" not in d.columns:
            return
        if not (facts.is_spec(run) or d.get_column("accept_len").drop_nulls().len()):
            return
        flags = {
            f"--{k.replace('_', '-')}": None
            for k in ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
            if run.args.get(k) is not None
        }
        fix = Fix(summary="Serve without speculative decoding (remove the --speculative-* flags), or fix the draft's acceptance first.", args=flags, safety=self.fix_safety)
        s_rows, L, _ = accept_stats(run, o["min_rows"])
        if s_rows is not None and L <= o["max_useless_accept_len"]:
            msg = f"Median accept length is {L:.2f}: each speculative cycle yields about one token, the same as a plain decode step, while also paying the draft steps."
            ev = _spec_evidence(run) + [
                row_evidence(s_rows.head(1).to_dicts()[0]),
                window_evidence(run, f"median accept len {L:.2f} over {s_rows.height} steady decode lines ({facts.line_span(s_rows)})"),
            ]
            yield self.finding(run, msg, ev, fix, accept_len=L)
            return
        if "gen_throughput" not in d.columns or "running_req" not in d.columns:
            return
        if not d.get_column("accept_len").null_count():
            return  # (no decode line without speculation to compare with)
        d = d.select("file", "line", "running_req", "gen_throughput", "accept_len") if "file" in d.columns else d.select("line", "running_req", "gen_throughput", "accept_len")
        on = d.filter(pl.col("accept_len").is_not_null() & (pl.col("running_req") > 0))
        off = d.filter(pl.col("accept_len").is_null() & (pl.col("running_req") > 0))
        if on.height < o["min_rows"] or off.height < o["min_rows"]:
            return
        both = set(on.get_column("running_req").to_list()) & set(off.get_column("running_req").to_list())
        if not both:
            return
        on_b = on.filter(pl.col("running_req").is_in(list(both)))
        off_b = off.filter(pl.col("running_req").is_in(list(both)))
        if on_b.height < o["min_rows"] or off_b.height < o["min_rows"]:
            return
        tps_on = float(on_b.get_column("gen_throughput").median())
        tps_off = float(off_b.get_column("gen_throughput").median())
        L_on = float(on_b.get_column("accept_len").median())
        if tps_on >= tps_off or tps_on <= 0:
            return
        l_star = L_on * tps_off / tps_on
        msg = f"At the same concurrency, decode with speculation ran {tps_on:.1f} tok/s vs {tps_off:.1f} without: accept length {L_on:.2f} is below the break-even L* = {l_star:.2f}."
        ev = [
            row_evidence(on_b.head(1).to_dicts()[0], note="with speculation"),
            row_evidence(off_b.head(1).to_dicts()[0], note="without speculation"),
            window_evidence(run, f"{on_b.height} vs {off_b.height} decode lines at #running-req in {sorted(both)[:6]}"),
        ]
        yield self.finding(run, msg, ev, fix, accept_len=L_on, l_star=round(l_star, 3))
