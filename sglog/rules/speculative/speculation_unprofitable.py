"""SGL304 speculation-unprofitable: the run itself shows speculation costing more than it gains."""

from __future__ import annotations

from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, row_evidence, window_evidence
from sglog.rules.speculative.chain import accept_stats, spec_evidence


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
    Case: accept len 1.00: speculation only adds cost

    `accept len: 1.00` on every decode line: `each speculative cycle yields about
    one token`, the same as a plain decode step, while paying the draft steps, so
    sglog suggests serving without speculation: drop `--speculative-algorithm`
    and the other `--speculative-*` flags.
    """

    code = "SGL304"
    name = "speculation-unprofitable"
    triggers = ("server_args", "args", "batches")
    severity = "warning"
    options = {"max_useless_accept_len": Option(1.05, "accept length that proves no gain"), "min_rows": Option(5, "decode lines needed on each side")}

    def _check(self, run, o) -> Iterator:
        d = facts.decode_rows(run)
        if d.height == 0 or "accept_len" not in d.columns:
            return
        if not (facts.is_spec(run) or d.get_column("accept_len").drop_nulls().len()):
            return
        flags: dict[str, str | None] = {
            f"--{k.replace('_', '-')}": None
            for k in ("speculative_algorithm", "speculative_draft_model_path", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
            if run.args.get(k) is not None
        }
        fix = Fix(summary="Serve without speculative decoding (remove the --speculative-* flags), or fix the draft's acceptance first.", args=flags, safety=self.fix_safety)
        s_rows, L, _ = accept_stats(run, o["min_rows"])
        if s_rows is not None and L <= o["max_useless_accept_len"]:
            msg = f"Median accept length is {L:.2f}: each speculative cycle yields about one token, the same as a plain decode step, while also paying the draft steps."
            ev = spec_evidence(run) + [
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
        tps_on = float(facts.value(on_b.get_column("gen_throughput").median()))
        tps_off = float(facts.value(off_b.get_column("gen_throughput").median()))
        L_on = float(facts.value(on_b.get_column("accept_len").median()))
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
