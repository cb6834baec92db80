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
from sglog.rules.disaggregation.kv_transfer_failed import KvTransferFailed
from sglog.rules.disaggregation.pd_bootstrap_failed import PdBootstrapFailed
from sglog.rules.lifecycle.crash import Crash
from sglog.rules.lifecycle.server_never_ready import ServerNeverReady
from sglog.rules.lifecycle.slow_cuda_graph_capture import SlowCudaGraphCapture
from sglog.rules.lifecycle.slow_weight_loading import SlowWeightLoading
from sglog.rules.lifecycle.watchdog_timeout import WatchdogTimeout
from sglog.rules.memory.cuda_graph_bs_oversized import CudaGraphBsOversized
from sglog.rules.memory.cuda_graph_capture_failed import CudaGraphCaptureFailed
from sglog.rules.memory.cuda_graph_capture_oom import CudaGraphCaptureOom
from sglog.rules.memory.draft_model_exceeds_static_pool import DraftModelExceedsStaticPool
from sglog.rules.memory.kv_headroom_too_small import KvHeadroomTooSmall
from sglog.rules.memory.kv_headroom_wasted import KvHeadroomWasted
from sglog.rules.memory.kv_pool_starved_by_weights import KvPoolStarvedByWeights
from sglog.rules.memory.runtime_oom import RuntimeOom
from sglog.rules.memory.startup_oom import StartupOom
from sglog.rules.memory.tp_memory_imbalance import TpMemoryImbalance
from sglog.rules.memory.weights_exceed_gpu_memory import WeightsExceedGpuMemory
from sglog.rules.numerics.nan_logits import NanLogits
from sglog.rules.platform.illegal_memory_access import IllegalMemoryAccess
from sglog.rules.platform.missing_dependency import MissingDependency
from sglog.rules.platform.nccl_timeout import NcclTimeout
from sglog.rules.platform.unsupported_gpu_arch import UnsupportedGpuArch
from sglog.rules.requests.request_too_long import RequestTooLong
from sglog.rules.scheduling.cuda_graphs_never_captured import CudaGraphsNeverCaptured
from sglog.rules.scheduling.decode_batch_exceeds_cuda_graph import DecodeBatchExceedsCudaGraph
from sglog.rules.scheduling.kv_capacity_bound import KvCapacityBound
from sglog.rules.scheduling.kv_retraction import KvRetraction
from sglog.rules.scheduling.scheduler_too_conservative import SchedulerTooConservative
from sglog.rules.serving import AcceptanceDrop, CacheHitCollapse, QueueGrowth, RetractionSpike, ThroughputDrop, TtftRegression
from sglog.rules.speculative.draft_model_full_tp import DraftModelFullTp
from sglog.rules.speculative.draft_tree_too_large import DraftTreeTooLarge
from sglog.rules.speculative.low_spec_acceptance import LowSpecAcceptance
from sglog.rules.speculative.speculation_unprofitable import SpeculationUnprofitable

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
