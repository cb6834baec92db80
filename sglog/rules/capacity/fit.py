"""Which `--mem-fraction-static` makes a KV pool hold a number of tokens (shared by the capacity
and request rules).  The arithmetic is the memory rules' (sglog/rules/memory/, whose notation
this follows: `T`, `A_w`, bytes/token, `F`, headroom `H`), and SGLang's own sizing:
`max_total_num_tokens = (avail - T x (1 - mfs)) / bytes_per_token`, so each extra token costs
bytes/token of the fraction's share `1 / T`.
"""

from __future__ import annotations

from dataclasses import dataclass

from sglog.rules.base import ceil_to, floor_to
from sglog.rules.memory.budget import GiB, total_gb

CONTEXT_STEP = 1024  # a suggested --context-length is a multiple of this


@dataclass(frozen=True)
class PoolFit:
    """How the run's KV pool compares with `tokens`, and the fraction that would hold them."""

    tokens: int  # what the pool must hold
    pool: int | None  # max_total_num_tokens (minimum over ranks)
    total_gb: float | None  # T
    bytes_per_token: float | None
    mfs: float | None  # the fraction in effect
    mfs_needed: float | None  # the fraction that holds `tokens` (None: the log lacks a number)
    mfs_upper: float | None  # the largest fraction that keeps `headroom_gb` free
    headroom_gb: float | None
    basis: str  # how mfs_needed was computed, with the run's numbers
    missing: tuple[str, ...]  # what the log lacks for the computation

    @property
    def fits(self) -> bool:
        """A fraction holds the tokens and still leaves the headroom."""
        return self.mfs_needed is not None and self.mfs_upper is not None and self.mfs_needed <= self.mfs_upper

    @property
    def reachable_pool(self) -> int | None:
        """The pool at the largest fraction that keeps the headroom (`mfs_upper`): the current pool
        plus what the memory left free would hold; the current pool when no more fits."""
        if not self.pool or self.pool <= 0:
            return None
        if self.mfs_upper is None or self.mfs is None or not self.total_gb or not self.bytes_per_token or self.mfs_upper <= self.mfs:
            return self.pool
        return self.pool + int((self.mfs_upper - self.mfs) * self.total_gb * GiB / self.bytes_per_token)

    @property
    def context_cap(self) -> int | None:
        """The largest --context-length (a multiple of CONTEXT_STEP) the reachable pool holds."""
        reach = self.reachable_pool
        if not reach or reach <= CONTEXT_STEP:
            return None
        return (reach - 8) // CONTEXT_STEP * CONTEXT_STEP


def pool_fit(run, tokens: int, headroom_gb: float, headroom_share: float, min_kv_gb: float) -> PoolFit:
    """The fraction that makes the run's KV pool hold `tokens`, from the log's memory numbers.

    With a pool, bytes/token and the fraction: `mfs + (tokens - pool) x bytes/token / T`.  Without
    a usable pool (none allocated, or a negative profiled size): `(T - A_w + kv) / T`, `kv` =
    `tokens` x bytes/token, or `min_kv_gb` when the log has no KV line.  The upper bound keeps
    `min(headroom_gb, headroom_share x T)` outside the static pool, and (when the ready summary
    shows `F`) takes the extra KV from what stayed free."""
    m = run.memory
    T, _ = total_gb(run)
    bpt = m.bytes_per_kv_token
    mfs = m.mem_fraction_static
    pool = m.max_total_num_tokens
    missing = []
    if not T:
        missing.append("the free memory at `Load weight begin`")
    if mfs is None:
        missing.append("--mem-fraction-static")
    needed, basis = None, ""
    if T and pool is not None and pool > 0 and bpt and mfs is not None:
        extra = max(0, tokens - pool) * bpt / GiB
        needed = ceil_to(mfs + extra / T)
        basis = f"{mfs:.2f} + {extra:.2f} GB ({max(0, tokens - pool):,} tokens x {bpt / 1024:.1f} KB) / T {T:.1f} GB"
    elif T and m.avail_after_weights_gb is not None:
        used = T - m.avail_after_weights_gb
        kv = tokens * bpt / GiB if bpt else min_kv_gb
        needed = ceil_to((used + kv) / T)
        kv_txt = f"{tokens:,} tokens x {bpt / 1024:.1f} KB" if bpt else "assumed: the log has no KV line"
        basis = f"(weights {used:.1f} GB + KV {kv:.2f} GB, {kv_txt}) / T {T:.1f} GB"
    elif T and not bpt:
        missing.append("a `KV Cache is allocated` line (bytes per token)")
    headroom = upper = None
    if T:
        headroom = min(headroom_gb, headroom_share * T)
        upper = floor_to(1 - headroom / T)
        F = m.available_gpu_mem_gb
        if F is not None and mfs is not None and pool is not None and pool > 0:
            upper = min(upper, floor_to(mfs + max(0.0, F - headroom) / T))
    return PoolFit(tokens, pool, T, bpt, mfs, needed, upper, headroom, basis, tuple(missing))
