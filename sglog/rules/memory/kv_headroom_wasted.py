"""SGL106 kv-headroom-wasted: much more GPU memory stays free after startup than activations need: KV cache left on the table."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, floor_to
from sglog.rules.memory.budget import GiB, budget_evidence, summary_evidence


class KvHeadroomWasted(Rule):
    """Much more GPU memory stays free after startup than activations need: KV cache left on the table.

    ## What it finds
    A ready server whose `available_gpu_mem` (the `max_total_num_tokens=...`
    line) is at least `high_gb`.

    ## Why it matters
    SGLang's tuning guide: 5-8 GB free is right; 10-20 GB is too much and
    `--mem-fraction-static` should go up.  Memory that stays free is KV cache
    the scheduler cannot use: fewer concurrent requests, more queueing and
    retraction.

    ## Evidence
    The `max_total_num_tokens=..., available_gpu_mem=...` line.

    ## Suggested fix
    `mfs_new = mfs + (F - target_gb) / T` rounded down to 0.01, `F` =
    available_gpu_mem, `T` = free memory at weight load; extra KV tokens =
    `(F - target_gb)` GB / bytes per token.

    ## Fix safety
    Workloads with long prompts, big prefill chunks, logprobs or multimodal
    inputs need more activation memory: raise in steps and watch for OOMs.

    ## Example
    Case: 16.4 GB free after startup

    `available_gpu_mem=16.40 GB` in the ready line with `mem_fraction_static=0.8`
    on a card with `T` = 78.5 GB: `~10.4 GB could hold KV cache`, and sglog
    suggests `--mem-fraction-static 0.93` = `0.80 + (16.40 - 6) GB / T 78.5 GB`
    (0.932, rounded down to 0.01).
    """

    code = "SGL106"
    name = "kv-headroom-wasted"
    triggers = ("kv_cache_allocated", "memory_pool_end", "memory_summary", "server_args", "weight_load_begin", "weight_load_end", "memory", "crash")
    severity = "info"
    options = {"high_gb": Option(10.0, "free memory after startup that counts as wasted"), "target_gb": Option(6.0, "free memory to aim for (middle of 5-8 GB)")}

    def _check(self, run, o) -> Iterator:
        m = run.memory
        F = m.available_gpu_mem_gb
        if F is None or F < o["high_gb"] or facts.crash(run) is not None:
            return
        spare = F - o["target_gb"]
        tokens = f" (~{int(spare * GiB / m.bytes_per_kv_token):,} more KV tokens)" if m.bytes_per_kv_token else ""
        msg = f"{F:.2f} GB of GPU memory stays free after startup; {o['target_gb']:.0f} GB is enough for activations, so ~{spare:.1f} GB could hold KV cache{tokens}."
        if m.mem_fraction_static is not None and m.total_gb:
            new = min(0.95, floor_to(m.mem_fraction_static + spare / m.total_gb))
            if new <= m.mem_fraction_static:
                return
            fix = Fix(
                summary=f"Raise --mem-fraction-static from {m.mem_fraction_static:.2f} to {new:.2f} = {m.mem_fraction_static:.2f} + ({F:.2f} - {o['target_gb']:.0f}) GB / T {m.total_gb:.1f} GB.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety=self.fix_safety,
            )
        else:
            by = f"{spare / m.total_gb:.2f} = {spare:.1f} GB / T {m.total_gb:.1f} GB" if m.total_gb else f"{spare:.1f} GB over the memory free at weight load (no `Load weight begin` line in this log)"
            fix = Fix(
                summary=f"Raise --mem-fraction-static by about {by}" + ("; the log does not show the current fraction." if m.mem_fraction_static is None else "."), args={}, safety=self.fix_safety
            )
        yield self.finding(run, msg, budget_evidence(run)[:1] + summary_evidence(run), fix, spare_gb=round(spare, 3))
