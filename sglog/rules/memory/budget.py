"""The memory rules' shared arithmetic: T (free memory at weight load), the budget evidence, the OOM numbers."""

from __future__ import annotations

from sglog.findings import Evidence
from sglog.rules.base import event_evidence, gb

GiB = 2**30


def budget_evidence(run) -> list[Evidence]:
    """Server args, weight load and KV lines: where the budget numbers come from."""
    out = []
    sa = run.first("server_args")
    if sa is not None:
        out.append(event_evidence(sa, note="server args in effect"))
    begins = [e for e in run.events_of("weight_load_begin") if e.get("avail_mem") is not None]
    rank = min(begins, key=lambda e: e.get("avail_mem")).rank if begins else None
    label = rank.label if rank else None
    seen = set()
    for e in run.events_of("weight_load_begin", "weight_load_end", "kv_cache_allocated", "memory_pool_end"):
        if e.kind not in seen:
            if label is not None and e.rank is not None and e.rank.label != label:
                continue
            seen.add(e.kind)
            out.append(event_evidence(e))
    return out


def total_gb(run, rc=None) -> tuple[float | None, str]:
    """T and where it came from."""
    m = run.memory
    if m.total_gb:
        return m.total_gb, "free memory at `Load weight begin`"
    if rc is not None and rc.get("capacity_gb"):
        return rc.get("capacity_gb"), "GPU capacity in the OOM message"
    return None, ""


def oom_numbers(e) -> str:
    parts = []
    if e.get("tried_gb") is not None:
        parts.append(f"tried to allocate {gb(e.get('tried_gb'))}")
    if e.get("free_gb") is not None:
        parts.append(f"{gb(e.get('free_gb'))} free")
    if e.get("capacity_gb") is not None:
        parts.append(f"of {gb(e.get('capacity_gb'))}")
    return ", ".join(parts)


def summary_evidence(run) -> list[Evidence]:
    e = run.first("memory_summary")
    return [event_evidence(e)] if e is not None else []
