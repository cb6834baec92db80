"""Speculative-decoding rules (SGL3xx): acceptance, draft tree size, draft parallelism, profitability.

The cycle-time model (failure-modes.md §C):

* `L` = accept length (tokens per draft+verify cycle, bonus token included),
  stable across versions; the logged `accept rate` changed meaning in 0.5.11
  (before: accepted / (steps x draft tokens), bonus included; since: drafts only).
* chain (topk 1) acceptance with `s` draft positions:
  `L(s) = (1 - a^(s+1)) / (1 - a)`, `a` = per-position acceptance.
* speculation wins iff `L > L* = t_cycle / t_base`.

One rule per module, named after the rule; what they share is in ``chain``.
"""
