"""SGL301 low-spec-acceptance: the draft model's tokens are rarely accepted for its draft length."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, fill, row_evidence, window_evidence
from sglog.rules.speculative.chain import CHAIN_ALGOS, accept_stats, solve_alpha, spec_evidence


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
    Case: the EAGLE-3 wiring bug: accept len 1.14 over 5 steps (story item 4)

    EAGLE-3 with 5 draft steps and `accept len: 1.14` on every decode line: `only
    12% per-position acceptance`, so the draft is not predicting this target.
    sglog says to check the draft against the target (hidden-state layer ids,
    revision, chat template) and meanwhile `--speculative-num-steps 1
    --speculative-eagle-topk 1 --speculative-num-draft-tokens 2`, the draft that
    wastes the least.
    """

    code = "SGL301"
    name = "low-spec-acceptance"
    triggers = ("server_args", "args", "version", "batches")
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
        ev = spec_evidence(run) + [
            row_evidence(s_rows.head(1).to_dicts()[0]),
            window_evidence(run, f"median accept len {L:.2f} over {s_rows.height} steady decode lines ({facts.line_span(s_rows)}); a = {a:.2f} from L = (1 - a^{d + 1}) / (1 - a)"),
        ]
        algo = facts.spec_algo(run) or ""
        args: dict[str, str | None] = {"--speculative-num-steps": "1", "--speculative-eagle-topk": "1", "--speculative-num-draft-tokens": "2"} if algo in CHAIN_ALGOS and d > 1 else {}
        fix = Fix(
            summary="Check that the draft matches the target (EAGLE-3 hidden-state layer ids, target revision, chat template) against a reference benchmark at temperature 0; meanwhile one draft step wastes the least.",
            args=args,
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, accept_len=L, alpha=round(a, 4), positions=d)
