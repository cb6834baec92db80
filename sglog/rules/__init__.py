"""The rules: one explicit registry, in the order they run and are listed.

Codes are permanent and never reused; the hundreds group the rules:
SGL1xx memory, SGL2xx scheduling, SGL3xx speculative decoding, SGL4xx platform,
SGL5xx lifecycle, SGL6xx over time.  `--select` / `--ignore` take a code (`SGL101`), a name
(`runtime-oom`), a code prefix (`SGL1`), a name prefix (`cuda-graph`) or `ALL`.
"""

from __future__ import annotations

from collections.abc import Iterable

from sglog.rules.base import DOC_SECTIONS, Option, Rule
from sglog.rules.capacity.hybrid_pool_full import HybridPoolFull
from sglog.rules.capacity.kv_pool_smaller_than_request import KvPoolSmallerThanRequest
from sglog.rules.disaggregation.pd_bootstrap_failed import PdBootstrapFailed
from sglog.rules.lifecycle import Crash, ServerNeverReady, SlowCudaGraphCapture, SlowWeightLoading, WatchdogTimeout
from sglog.rules.memory import (
    CudaGraphBsOversized,
    CudaGraphCaptureFailed,
    CudaGraphCaptureOom,
    DraftModelExceedsStaticPool,
    KvHeadroomTooSmall,
    KvHeadroomWasted,
    KvPoolStarvedByWeights,
    RuntimeOom,
    StartupOom,
    TpMemoryImbalance,
    WeightsExceedGpuMemory,
)
from sglog.rules.numerics.nan_logits import NanLogits
from sglog.rules.platform import IllegalMemoryAccess, KvTransferFailed, MissingDependency, NcclTimeout, UnsupportedGpuArch
from sglog.rules.requests.request_too_long import RequestTooLong
from sglog.rules.scheduling import CudaGraphsNeverCaptured, DecodeBatchExceedsCudaGraph, KvCapacityBound, KvRetraction, SchedulerTooConservative
from sglog.rules.serving import AcceptanceDrop, CacheHitCollapse, QueueGrowth, RetractionSpike, ThroughputDrop, TtftRegression
from sglog.rules.speculative import DraftModelFullTp, DraftTreeTooLarge, LowSpecAcceptance, SpeculationUnprofitable

RULES: tuple[Rule, ...] = (
    # memory
    DraftModelExceedsStaticPool(),
    KvPoolStarvedByWeights(),
    CudaGraphCaptureOom(),
    CudaGraphCaptureFailed(),
    CudaGraphBsOversized(),
    KvHeadroomWasted(),
    KvHeadroomTooSmall(),
    RuntimeOom(),
    TpMemoryImbalance(),
    WeightsExceedGpuMemory(),
    StartupOom(),
    KvPoolSmallerThanRequest(),
    HybridPoolFull(),
    # scheduling
    KvRetraction(),
    SchedulerTooConservative(),
    KvCapacityBound(),
    DecodeBatchExceedsCudaGraph(),
    CudaGraphsNeverCaptured(),
    RequestTooLong(),
    # speculative decoding
    LowSpecAcceptance(),
    DraftTreeTooLarge(),
    DraftModelFullTp(),
    SpeculationUnprofitable(),
    # platform
    UnsupportedGpuArch(),
    MissingDependency(),
    NcclTimeout(),
    IllegalMemoryAccess(),
    KvTransferFailed(),
    NanLogits(),
    PdBootstrapFailed(),
    # lifecycle
    Crash(),
    ServerNeverReady(),
    SlowWeightLoading(),
    WatchdogTimeout(),
    SlowCudaGraphCapture(),
    # over time (the run's timeline in windows)
    AcceptanceDrop(),
    ThroughputDrop(),
    CacheHitCollapse(),
    RetractionSpike(),
    QueueGrowth(),
    TtftRegression(),
)

GROUPS = {"SGL1": "memory", "SGL2": "scheduling", "SGL3": "speculative decoding", "SGL4": "platform", "SGL5": "lifecycle", "SGL6": "over time"}


def get_rule(name_or_code: str) -> Rule:
    """The rule with this code or name (case-insensitive); KeyError with a hint otherwise."""
    key = name_or_code.strip().lower()
    for r in RULES:
        if r.code.lower() == key or r.name == key:
            return r
    near = [r.name for r in RULES if key and (key in r.name or r.name.startswith(key[:6]))]
    hint = f" (did you mean {', '.join(near[:3])}?)" if near else ""
    raise KeyError(f"no rule {name_or_code!r}{hint}; `sglog rules` lists them")


def matches(rule: Rule, selector: str) -> bool:
    s = selector.strip()
    if not s:
        return False
    if s.upper() == "ALL":
        return True
    low = s.lower()
    return rule.code.lower().startswith(low) or rule.name == low or rule.name.startswith(low)


def choose(select: Iterable[str] | None = None, ignore: Iterable[str] | None = None) -> tuple[Rule, ...]:
    """The rules `--select` / `--ignore` leave, in registry order.  Unknown selectors raise KeyError."""
    sel = [x for item in (select or []) for x in str(item).split(",") if x.strip()]
    ign = [x for item in (ignore or []) for x in str(item).split(",") if x.strip()]
    for s in sel + ign:
        if not any(matches(r, s) for r in RULES):
            raise KeyError(f"no rule matches {s!r} (a code like SGL101, a name like runtime-oom, a prefix like SGL1 or cuda-graph, or ALL)")
    chosen = [r for r in RULES if not sel or any(matches(r, s) for s in sel)]
    return tuple(r for r in chosen if not any(matches(r, s) for s in ign))


__all__ = ["RULES", "GROUPS", "DOC_SECTIONS", "Option", "Rule", "choose", "get_rule", "matches"]
