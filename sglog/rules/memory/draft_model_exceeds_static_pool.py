"""SGL101 draft-model-exceeds-static-pool: a speculative run whose automatic `--mem-fraction-static` left no room: it crashed sizing the memory pool."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, ceil_to, exception_evidence, floor_to, fmt_frac
from sglog.rules.memory.budget import GiB, budget_evidence, total_gb
from sglog.rules.memory.sglang_check import sglang_bound, suggested_above
from sglog.rules.ownership import SIGNATURE, CrashRule


def _graph_gb(run, o, spec: bool) -> tuple[float, str | None]:
    """G measured, or estimated from --cuda-graph-max-bs (then an assumption to state)."""
    m = run.memory
    if m.cuda_graph_gb is not None:
        return (m.cuda_graph_gb or 0.0) + (m.draft_cuda_graph_gb or 0.0), None
    if facts.graphs_disabled(run):
        return 0.0, None
    bs = facts.max_graph_bs(run) or 160
    per = o["graph_mb_per_bs"] * (2 if spec else 1)
    est = per * bs / 1024
    return est, f"CUDA graphs {est:.2f} GB (not captured yet: {o['graph_mb_per_bs']:g} MB per batch size x max bs {bs}{' x target+draft' if spec else ''})"


def _kv_min_gb(m, o) -> tuple[float, str | None, str | None]:
    """The smallest useful KV pool (GB), how it was computed, and the assumption made (None: measured)."""
    bpt = m.bytes_per_kv_token
    if bpt:
        return o["min_kv_tokens"] * bpt / GiB, f"{o['min_kv_tokens']} tokens x {bpt / 1024:.1f} KB", None
    kv_min = o["min_kv_gb_if_unknown"]
    return kv_min, None, f"minimum KV pool {kv_min:.1f} GB (no KV Cache line: bytes/token unknown)"


def _draft_weights_gb(m, o, algo: str) -> tuple[float, str | None]:
    """W_d measured, or assumed when the crash came before the draft loaded (then the assumption)."""
    if m.draft_weights_gb is not None:
        return m.draft_weights_gb, None
    w_d = o["standalone_draft_weights_gb_if_unknown"] if algo == "STANDALONE" else o["draft_weights_gb_if_unknown"]
    return w_d, f"draft weights {w_d:.1f} GB (the crash came before the draft model loaded)"


@dataclass(frozen=True)
class _Window:
    """The feasible --mem-fraction-static window and the numbers it comes from (GB)."""

    total: float  # T
    used: float  # A_w: the target weights
    kv_min: float
    kv_src: str | None  # how kv_min was computed (None: assumed)
    draft: float  # W_d + K_d
    graphs: float  # G
    headroom: float  # H
    draft_counted: bool  # the build already budgets the draft (0.5.14+)
    mfs_min: float
    mfs_max: float
    assumptions: list[str]

    @property
    def lo(self) -> float:
        return ceil_to(self.mfs_min)

    @property
    def hi(self) -> float:
        return floor_to(self.mfs_max)

    @property
    def suggestion(self) -> float:
        """The most KV that keeps the headroom."""
        return floor_to(self.mfs_max - 0.01)

    @property
    def basis(self) -> str:
        """Both bounds, with the run's numbers."""
        T = self.total
        return (
            f"lower bound {self.lo:.2f} = (weights {self.used:.1f} GB + minimum KV {self.kv_min:.1f} GB{' ' + self.kv_src if self.kv_src else ''}) / T {T:.1f} GB; "
            f"upper bound {self.hi:.2f} = 1 - (headroom {self.headroom:.1f} + CUDA graphs {self.graphs:.1f}" + ("" if self.draft_counted else f" + draft {self.draft:.1f}") + f" GB) / T {T:.1f} GB"
        )

    @property
    def assumed(self) -> str:
        return (" Assumed: " + "; ".join(self.assumptions) + ".") if self.assumptions else ""


def _window(run, o, c, T: float, algo: str) -> _Window:
    """mfs_min = (A_w + kv_min [+ W_d + K_d when the build counts the draft]) / T, at least SGLang's own
    minimum; mfs_max = 1 - (H + G [+ W_d + K_d when it does not]) / T."""
    m = run.memory
    used = T - m.avail_after_weights_gb
    kv_min, kv_src, kv_assumed = _kv_min_gb(m, o)
    w_d, w_assumed = _draft_weights_gb(m, o, algo)
    k_d = m.draft_kv_gb or 0.0
    g, g_assumed = _graph_gb(run, o, spec=True)
    h = min(o["headroom_gb"], o["headroom_share"] * T)
    draft_counted = bool(sglang_bound(c).get("draft_counted"))
    mfs_min = (used + kv_min + ((w_d + k_d) if draft_counted else 0.0)) / T
    above = suggested_above(c)
    if above is not None:
        mfs_min = max(mfs_min, above)
    outside = h + g + (0.0 if draft_counted else w_d + k_d)
    assumptions = [a for a in (kv_assumed, w_assumed, g_assumed) if a]
    return _Window(T, used, kv_min, kv_src, w_d + k_d, g, h, draft_counted, mfs_min, 1 - outside / T, assumptions)


def _message(algo: str, mfs: float | None, w: _Window) -> str:
    T, used = w.total, w.used
    static = (mfs or 0) * T
    if mfs is not None and static < used:
        why = f"reserves {static:.1f} of {T:.1f} GB, less than the {used:.1f} GB the target weights already use"
    elif mfs is not None:
        why = f"reserves {static:.1f} of {T:.1f} GB, leaving {static - used:.1f} GB beyond the target weights ({used:.1f} GB) for KV cache and the draft"
    else:
        why = f"does not leave room beyond the {used:.1f} GB of target weights"
    mfs_txt = f" {mfs:.2f}" if mfs is not None else ""
    return f"{algo} run crashed setting up the memory pool: the automatic --mem-fraction-static{mfs_txt} {why}; the draft model is not budgeted."


def _shrink_fix(run, w: _Window) -> Fix:
    """No fraction fits: the lower bound, and smaller graphs / draft tree / prefill chunks."""
    bs = facts.max_graph_bs(run)
    smaller = facts.round_up_capture((bs or 32) / 4) if bs else 8
    args: dict[str, str | None] = {"--mem-fraction-static": f"{w.lo:.2f}", "--cuda-graph-max-bs": str(smaller)}
    return Fix(
        summary=f"No fraction fits: the lower bound {w.lo:.2f} is above the upper bound {w.hi:.2f} ({w.basis}). "
        f"Shrink what lives outside the static pool: --cuda-graph-max-bs {smaller}, a smaller draft tree "
        f"(--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4), --chunked-prefill-size 4096; or use more GPUs.{w.assumed}",
        args=args,
        safety="With fewer graph sizes, batches above the largest one run without CUDA graphs (slower); at the lower bound the KV pool is minimal and long prompts queue.",
    )


class DraftModelExceedsStaticPool(CrashRule):
    """A speculative run whose automatic `--mem-fraction-static` left no room: it crashed sizing the memory pool.

    ## What it finds
    A run with `--speculative-algorithm` (EAGLE, EAGLE3, NEXTN, STANDALONE...)
    and an automatic (not explicitly set) `mem_fraction_static` that dies while
    the memory pools are set up: `Not enough memory. Please try to increase
    --mem-fraction-static` or a CUDA out-of-memory error in `init_memory_pool`,
    the draft model's load, its KV pool or its CUDA-graph capture.

    ## Why it matters
    SGLang's automatic fraction is computed as if only the target model existed:
    it adds a flat reservation (2 GB for EAGLE-family drafts, 6 GB for
    STANDALONE) but never the draft's weights, its KV pool or its graphs.  When
    the target weights fill most of the card the static pool ends up smaller
    than the weights, so the KV pool size is negative.  The error tells you to
    *increase* the fraction while the generic advice for OOMs is to *decrease*
    it: only the numbers say which way to turn it.

    ## Evidence
    The server-args line (algorithm, the automatic fraction), the `Load weight
    begin/end` lines (`T`, `A_w`) and the exception line.

    ## Suggested fix
    Set `--mem-fraction-static` explicitly to a value inside the feasible window:

    * lower bound `mfs_min = (T - A_w + kv_min) / T`: the weights plus a minimal
      KV pool of `min_kv_tokens` tokens (bytes/token from the KV line; if the
      log has none, `min_kv_gb_if_unknown`).  If SGLang's own message names a
      minimum (`Raise --mem-fraction-static above X`), the larger is used.
    * upper bound `mfs_max = 1 - (H + G + W_d + K_d) / T`: leave the activation
      headroom `H` (`headroom_gb`, at most `headroom_share` x T), the CUDA graphs `G` and the draft's
      weights `W_d` and KV `K_d` outside the static pool (builds that already
      budget the draft, 0.5.14+, use `1 - (H + G) / T`).
    * suggestion: `mfs_max - 0.01` rounded down to 0.01 (the most KV that keeps
      the headroom), if it is not below `mfs_min`.

    Values not in the log are assumptions and the fix says so: the draft
    weights when the crash came before the draft loaded
    (`draft_weights_gb_if_unknown`, `standalone_draft_weights_gb_if_unknown`
    for STANDALONE drafts), the graph memory before any capture
    (`graph_mb_per_bs` x `--cuda-graph-max-bs`, doubled for target + draft).
    When the window is empty the fix says so and shrinks the graphs instead.

    ## Fix safety
    A higher fraction reserves memory up front: if the draft, its KV pool or its
    graphs are larger than assumed the server can still fail at draft load or
    capture, and with less than `H` GB of activation room a long prefill can
    run out of memory at runtime.  Check `available_gpu_mem` in the ready line
    of the next run (5-8 GB is the target).

    ## Example
    Case: EAGLE-3 with the automatic fraction 0.76 dies in init_memory_pool (the story)

    EAGLE-3 on 8 x 96 GB: `Load weight begin. avail mem=94.04 GB`, then `Load
    weight end ... mem usage=72.33 GB`.  The automatic `mem_fraction_static=0.76`
    reserves `71.5 of 94.0 GB`, less than the `72.3 GB` the target weights use,
    and the server dies with `Not enough memory`.  sglog suggests
    `--mem-fraction-static 0.89` (feasible window `0.80-0.90`); 0.88 is what
    worked.
    """

    code = "SGL101"
    name = "draft-model-exceeds-static-pool"
    triggers = (
        "batch_oom",
        "cuda_graph_bs",
        "cuda_graph_capture_begin",
        "cuda_graph_capture_end",
        "feature_disabled",
        "kv_cache_allocated",
        "kv_memory_insufficient",
        "memory_pool_end",
        "memory_summary",
        "oom",
        "server_args",
        "weight_load_begin",
        "weight_load_end",
        "args",
        "memory",
        "crash",
    )
    severity = "error"
    precedence = 70
    options = {
        "headroom_gb": Option(6.0, "H: activation memory to keep outside the static pool (SGLang's guide: 5-8 GB)"),
        "headroom_share": Option(0.10, "H as a share of T on small cards (whichever is smaller applies)"),
        "min_kv_tokens": Option(32768, "smallest useful KV pool, in tokens (lower bound)"),
        "min_kv_gb_if_unknown": Option(2.0, "smallest useful KV pool in GB when the log has no KV line"),
        "draft_weights_gb_if_unknown": Option(2.0, "W_d assumed when the draft never loaded (SGLang's own EAGLE reservation)"),
        "standalone_draft_weights_gb_if_unknown": Option(6.0, "W_d assumed for STANDALONE drafts"),
        "graph_mb_per_bs": Option(4.0, "graph memory per batch size (MB) when no capture happened yet"),
    }

    def claim(self, run, c) -> int | None:
        # the draft model is what the auto-chosen static pool did not budget for
        if not facts.is_spec_auto(run):
            return None
        if facts.not_enough_memory(c):
            return SIGNATURE
        if facts.oom_crash(c) and (c.phase in facts.DRAFT_PHASES or "init_memory_pool" in facts.frame_functions(c.event)):
            return SIGNATURE
        return None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        m = run.memory
        T, t_src = total_gb(run, c.event)
        algo = facts.spec_algo(run) or "speculative"
        mfs = m.mem_fraction_static
        evidence = budget_evidence(run) + exception_evidence(c.event)
        if not T or m.avail_after_weights_gb is None:
            yield self._unmeasured(run, o, c, algo, evidence)
            return
        w = _window(run, o, c, T, algo)
        fix = self._fraction_fix(w) if w.suggestion >= w.lo - 1e-9 else _shrink_fix(run, w)
        yield self.finding(
            run,
            _message(algo, mfs, w),
            evidence,
            fix,
            total_gb=T,
            total_source=t_src,
            mfs=mfs,
            mfs_min=round(w.mfs_min, 4),
            mfs_max=round(w.mfs_max, 4),
            suggested=w.suggestion,
            assumptions=w.assumptions,
        )

    def _unmeasured(self, run, o, c, algo: str, evidence: list):
        """Without `T` or `A_w` no window: the automatic value + 0.05."""
        mfs = run.memory.mem_fraction_static
        msg = f"{algo} run with automatic --mem-fraction-static{'' if mfs is None else f' {mfs:.2f}'} crashed setting up the memory pool ({(c.event.get('exc_type') or 'error')})"
        fix = Fix(
            summary="Set --mem-fraction-static explicitly: the automatic value does not budget the draft model. "
            "The log lacks the `Load weight begin/end` lines needed to compute a value; start from the automatic value + 0.05 and watch `available_gpu_mem`.",
            args={"--mem-fraction-static": fmt_frac(min(0.95, (mfs or 0.8) + 0.05))} if mfs else {},
            safety=self.safety({"H": o["headroom_gb"]}),
        )
        return self.finding(run, msg, evidence, fix)

    def _fraction_fix(self, w: _Window) -> Fix:
        return Fix(
            summary=f"Set --mem-fraction-static {w.suggestion:.2f} explicitly (feasible window {w.lo:.2f}-{w.hi:.2f}: {w.basis}).{w.assumed}",
            args={"--mem-fraction-static": f"{w.suggestion:.2f}"},
            safety=self.safety({"H": round(w.headroom, 1)}),
        )
