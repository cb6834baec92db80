"""What SGLang's own start-up check said of a memory crash (the reader's ``kv_memory_insufficient``)."""

from __future__ import annotations


def sglang_bound(c) -> dict:
    """What SGLang's start-up check said of the crash ``c`` (the reader's ``kv_memory_insufficient``,
    sglog/read/named.py): 0.5.14+ names its own lower bound, ``suggested_mem_fraction_static``
    (`Raise --mem-fraction-static above 0.812`), and ``draft_counted`` (the draft weights are in
    it); {} for another error or an older wording."""
    e = c.event
    return dict(e.get("named_fields") or {}) if e.get("named_kind") == "kv_memory_insufficient" else {}


def suggested_above(c) -> float | None:
    """SGLang's own lower bound for --mem-fraction-static, when its message names one."""
    v = sglang_bound(c).get("suggested_mem_fraction_static")
    return float(v) if v is not None else None
