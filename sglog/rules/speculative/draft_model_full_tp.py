"""SGL303 draft-model-full-tp: the draft model runs with the target's tensor parallelism: every draft step pays all-reduces."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Rule, event_evidence
from sglog.rules.speculative.chain import spec_evidence


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
    Case: EAGLE-3 on TP8 over PCIe (story item 5)

    `tp_size=8` and `speculative_algorithm='EAGLE3'` on PCIe GPUs: `each of the 5
    draft steps all-reduces across 8 GPUs over PCIe`.  SGLang has no separate
    draft TP: sglog suggests fewer draft steps, or `--tp 4 --dp 2` if the weights
    fit in half the GPUs.
    """

    code = "SGL303"
    name = "draft-model-full-tp"
    triggers = ("feature_disabled", "server_args", "args", "batches")
    severity = "info"

    def _check(self, run, o) -> Iterator:
        algo = facts.spec_algo(run)
        if not algo or algo == "NGRAM":
            return
        tp = facts.tp_size(run)
        if tp < 2:
            return
        ev = spec_evidence(run)
        # (SGLang's reason for switching custom all-reduce off, a typed field of its line)
        pcie = next((e for e in run.events_of("feature_disabled") if e.get("feature") == "custom_allreduce" and "PCIe" in str(e.get("reason") or "")), None)
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
