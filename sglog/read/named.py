"""Named messages: the templates that are one failure class get a typed event kind.

The catalogue (sglog/read/catalog.py) names every message SGLang can print, but a catalogue
match is only ``sglang_message`` with a template and its placeholders, under whatever names
the miner gave them, different in each release.  Rules need more: "a request longer than the
context", with the input length and the limit as numbers, whichever release printed it.  This
module is the table that gives them that: each chosen template -- every wording of the message
across releases, found by searching the catalogue -- maps to

* an event kind (a class in sglog/events.py, typed by its ``FIELDS`` table),
* one field name per placeholder, in order (``None``: not kept), and
* constant fields (which limit a message names, whether the request was cut or refused ...).

The reader applies it where catalogue matches are made (``RecordParser.catalogued`` in
sglog/read/parse.py): a logged line becomes an event of the named kind.  The same table names
an exception whose message is a catalogued template (``message_template`` on traceback events,
see :func:`name_block`), so a ``ValueError`` raised with SGLang's message reads like the line it
logs.  A few messages that other programs raise inside SGLang's processes (torch's sampling check)
are named the same way, by templates in the same syntax (``FOREIGN``), matched against an
exception's message.  A test checks that every template of ``SGLANG`` is in the shipped catalogue.

>>> read("Input length ({} tokens) exceeds the maximum allowed length ({} tokens). Use a shorter input or enable --allow-auto-truncate.", [160062, 59862])
('request_too_long', {'input_tokens': 160062, 'limit': 59862, 'limit_kind': 'allowed_maximum', 'action': 'rejected'})
>>> kind_of("Detected errors during sampling! NaN in the logits.")
'nan_logits'
"""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from sglog.read.catalog import Catalogue


@dataclass(frozen=True)
class Name:
    """What a template is: its event kind, its placeholders' field names, its constant fields.

    ``sources``: the name holds only for a message printed at one of these source modules
    (prefixes of the catalogue's ``source``), for a wording that another subsystem prints too.
    """

    kind: str
    fields: tuple[str | None, ...] = ()
    consts: Mapping[str, Any] = field(default_factory=dict)
    sources: tuple[str, ...] = ()

    def holds_at(self, source: str | None) -> bool:
        return not self.sources or source is None or any(source.startswith(s) for s in self.sources)


def _n(kind: str, *fields: str | None, sources: tuple[str, ...] = (), **consts: Any) -> Name:
    return Name(kind, tuple(fields), consts, sources)


# ------------------------------------------------------------------ request_too_long
# which limit a message names: the model's context length; the scheduler's allowed maximum
# (`max_req_input_len` = min(context_len, max_total_num_tokens) - 6 in 0.3-0.5: the smaller of the
# context and the KV pool); the KV pool itself (a PD decode instance's `max_total_tokens`)
class _Limit(TypedDict):
    # typed so that ``**_CTX`` is known to fill ``consts`` (a plain dict[str, str] could be ``sources``)
    limit_kind: str


_CTX: _Limit = {"limit_kind": "context_len"}
_MAX: _Limit = {"limit_kind": "allowed_maximum"}
_POOL: _Limit = {"limit_kind": "max_total_tokens"}

REQUESTS: dict[str, Name] = {
    # 0.4.1.post7-0.4.6.post5 (srt/managers/utils.py validate_input_length), logged and returned
    "Input length ({} tokens) exceeds the maximum allowed length ({} tokens). Use a shorter input or enable --allow-auto-truncate.": _n(
        "request_too_long", "input_tokens", "limit", **_MAX, action="rejected"
    ),
    # the same check with --allow-auto-truncate (0.4.1.post7-) and before it (0.2.6-0.4.1.post6)
    "Request length is longer than the KV cache pool size or the max context length. Truncated. len(req.origin_input_ids)={}, max_req_input_len={}.": _n(
        "request_too_long", "input_tokens", "limit", **_MAX, action="truncated"
    ),
    "Request length is longer than the KV cache pool size or the max context length. Truncated!!!": _n("request_too_long", **_MAX, action="truncated"),
    # the tokenizer manager's check against the model's context length (0.1.16-), raised
    "The input ({} tokens) is longer than the model's context length ({} tokens)": _n("request_too_long", "input_tokens", "limit", **_CTX, action="rejected"),
    "The input ({} tokens) is longer than the model's context length ({} tokens).": _n("request_too_long", "input_tokens", "limit", **_CTX, action="rejected"),
    "The input ({} tokens) is longer than the model's context length ({} tokens). Truncating the input.": _n("request_too_long", "input_tokens", "limit", **_CTX, action="truncated"),
    # input + max_new_tokens over the context (0.4.1.post7-): refused, or max_new_tokens cut (0.5.1-)
    "Requested token count exceeds the model's maximum context length of {} tokens. You requested a total of {} tokens: {} tokens from the input messages and {} tokens for the completion. Please reduce the number of tokens in the input messages or the completion to fit within the limit.": _n(
        "request_too_long", "limit", "total_tokens", "input_tokens", "new_tokens", **_CTX, action="rejected"
    ),
    "Requested token count ({} input + {} new) exceeds the model's context length ({} tokens). Truncating max_new_tokens.": _n(
        "request_too_long", "input_tokens", "new_tokens", "limit", **_CTX, action="new_tokens_truncated"
    ),
    # OpenAI-compatible serving (0.5.21-)
    "the prompt has {} tokens, which does not fit the context length of {} tokens": _n("request_too_long", "input_tokens", "limit", **_CTX, action="rejected"),
    # multimodal prompts after the image tokens are expanded (0.3.6.post3-0.4.6.post5; a model processor 0.5.19-)
    "Multimodal prompt is too long after expanding multimodal tokens. After expanding len(req.origin_input_ids_unpadded)={} => {} >= {}.": _n(
        "request_too_long", "unexpanded_tokens", "input_tokens", "limit", **_MAX, action="rejected", multimodal=True
    ),
    "Dots note omni expanded prompt is too long: {} > {}": _n("request_too_long", "input_tokens", "limit", **_MAX, action="rejected", multimodal=True),
    # a PD decode instance whose KV pool cannot hold the request (0.4.7.post1-)
    "Request {} exceeds the maximum number of tokens: {} > {}": _n("request_too_long", "rid", "input_tokens", "limit", **_POOL, action="rejected"),
}

# ------------------------------------------------------------------ nan_logits
NUMERICS: dict[str, Name] = {
    # the sampler's NaN check (logged 0.3.4.post2-, raised with crash_on_warnings 0.3.6-; EAGLE's
    # verify step 0.4.4.post2-0.5.9 prints the same words)
    "Detected errors during sampling! NaN in the logits.": _n("nan_logits", where="logits"),
    "Detected errors during sampling! NaN in the probability.": _n("nan_logits", where="probability"),
    # 0.3.1.post1-0.4.5.post1: the sampling kernel reported failure (NaN/inf probabilities, the usual cause)
    "Detected errors during sampling!": _n("nan_logits", where="sampling"),
    # 0.5.14-: NaN replaced before sampling, logged once
    "NaN detected in {}; values were sanitized before sampling. This usually indicates numerical overflow (e.g. fp16 activations) or an upstream bug producing NaN. Logged once; further occurrences are silent.": _n(
        "nan_logits", "where", sanitized=True
    ),
}

# ------------------------------------------------------------------ pd_bootstrap_failed
# stage: connect / register (a prefill instance to its bootstrap server), fetch_info (a decode
# instance asking the prefill's bootstrap server for its ranks), handshake (one request's
# bootstrap between the two), timeout, engine_init (the transfer engine), memory_registration
# (the KV buffers with the transfer engine), config (the transfer backend's settings)
_DISAGG = ("srt/disaggregation/", "srt/distributed/device_communicators/mooncake_transfer_engine.py")

DISAGGREGATION: dict[str, Name] = {
    "Prefill Failed to connect to bootstrap server: {}, {}": _n("pd_bootstrap_failed", "status", "error", stage="connect", side="prefill"),
    "Prefill instance failed to connect to bootstrap server: {}, {}": _n("pd_bootstrap_failed", "status", "error", stage="connect", side="prefill"),
    "Prefill Failed to register to bootstrap server: {}": _n("pd_bootstrap_failed", "error", stage="register", side="prefill"),
    "Prefill instance failed to register to bootstrap server: {}": _n("pd_bootstrap_failed", "error", stage="register", side="prefill"),
    "Prefill instance failed to register to bootstrap server after {} retries": _n("pd_bootstrap_failed", "retries", stage="register", side="prefill"),
    "torch.distributed must be initialised before CommonKVManager registers to the bootstrap server in multi-node prefill mode.": _n("pd_bootstrap_failed", stage="register", side="prefill"),
    "Could not fetch bootstrap info for engine rank: {}": _n("pd_bootstrap_failed", "engine_rank", stage="fetch_info", side="decode"),
    "Could not fetch bootstrap info for engine rank: {} and target_dp_group: {}": _n("pd_bootstrap_failed", "engine_rank", "dp_group", stage="fetch_info", side="decode"),
    "Could not fetch prefill dp_size for bootstrap_addr: {}": _n("pd_bootstrap_failed", "bootstrap_addr", stage="fetch_info", side="decode"),
    "Could not fetch prefill parallel info for bootstrap_addr: {}": _n("pd_bootstrap_failed", "bootstrap_addr", stage="fetch_info", side="decode"),
    "Could not fetch prefill parallel info from bootstrap_addr: {}": _n("pd_bootstrap_failed", "bootstrap_addr", stage="fetch_info", side="decode"),
    "Could not fetch prefill parallel info from {} after {} attempts": _n("pd_bootstrap_failed", "bootstrap_addr", "retries", stage="fetch_info", side="decode"),
    "Error fetching prefill info from bootstrap: {}": _n("pd_bootstrap_failed", "error", stage="fetch_info", side="decode"),
    "Error fetching prefill parallel info from bootstrap: {}": _n("pd_bootstrap_failed", "error", stage="fetch_info", side="decode"),
    "Error fetching prefill server info from bootstrap: {}": _n("pd_bootstrap_failed", "error", stage="fetch_info", side="decode"),
    "Error querying dp_ranks from bootstrap: {}": _n("pd_bootstrap_failed", "error", stage="fetch_info", side="decode"),
    "Decode handshake failed for request rank={} decode_req.req.rid={} decode_req.req.bootstrap_room={} with exception {}": _n(
        "pd_bootstrap_failed", "transfer_rank", "rid", "bootstrap_room", "error", stage="handshake", side="decode"
    ),
    "Prefill bootstrap failed for request rank={} req.rid={} req.bootstrap_room={} with exception {}": _n(
        "pd_bootstrap_failed", "transfer_rank", "rid", "bootstrap_room", "error", stage="handshake", side="prefill"
    ),
    "Handshake failed": _n("pd_bootstrap_failed", stage="handshake", side="decode", sources=_DISAGG),
    "Bootstrap failed": _n("pd_bootstrap_failed", stage="handshake", side="prefill", sources=_DISAGG),
    "Bootstrap worker failed": _n("pd_bootstrap_failed", stage="handshake", backend="mori"),
    "Some requests timed out when bootstrapping, which means prefill instances fail to receive the KV indices from the decode instance of this request. If a greater mean TTFT is acceptable, you can 'export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600' (10 minutes) to relax the timeout condition.": _n(
        "pd_bootstrap_failed", stage="timeout", side="prefill"
    ),
    "Mooncake Transfer Engine initialization failed.": _n("pd_bootstrap_failed", stage="engine_init", backend="mooncake", sources=_DISAGG),
    "Ascend Transfer Engine initialization failed.": _n("pd_bootstrap_failed", stage="engine_init", backend="ascend"),
    "Mooncake memory registration failed.": _n("pd_bootstrap_failed", stage="memory_registration", backend="mooncake", sources=_DISAGG),
    "Mooncake memory registration failed": _n("pd_bootstrap_failed", stage="memory_registration", backend="mooncake", sources=_DISAGG),
    "Mooncake memory registration failed (ret={})": _n("pd_bootstrap_failed", "status", stage="memory_registration", backend="mooncake", sources=_DISAGG),
    "NIXL memory registration failed for kv tensors": _n("pd_bootstrap_failed", stage="memory_registration", backend="nixl"),
    "NIXL memory registration failed for aux tensors": _n("pd_bootstrap_failed", stage="memory_registration", backend="nixl"),
    "NIXL memory registration failed for state tensors": _n("pd_bootstrap_failed", stage="memory_registration", backend="nixl"),
    "NIXL memory registration failed for {} kv tensors": _n("pd_bootstrap_failed", None, stage="memory_registration", backend="nixl"),
    "Conflicting NIXL UCX device_list in SGLANG_DISAGGREGATION_NIXL_BACKEND_PARAMS and --disaggregation-ib-device. Configure only one device selection or make them agree.": _n(
        "pd_bootstrap_failed", stage="config", backend="nixl"
    ),
    "NIXL UCX --disaggregation-ib-device requires HCA names without port suffixes (e.g. mlx5_0); NIXL appends port 1.": _n("pd_bootstrap_failed", stage="config", backend="nixl"),
}

# ------------------------------------------------------------------ kv_transfer_failed
# a request's KV transfer failed (the grammar names today's wording; these are every release's,
# matched by the catalogue where the grammar's does not fit): side, the rank, the request
TRANSFERS: dict[str, Name] = {
    "Prefill transfer failed for request rank={} req.rid={} req.bootstrap_room={} with exception {}": _n("kv_transfer_failed", "transfer_rank", "rid", "bootstrap_room", "exc_message", side="prefill"),
    "Decode transfer failed for request rank={} decode_req.req.rid={} decode_req.req.bootstrap_room={} with exception {}": _n(
        "kv_transfer_failed", "transfer_rank", "rid", "bootstrap_room", "exc_message", side="decode"
    ),
    "Decode transfer failed for request rank={} decode_req.req.rid={} decode_req.req.bootstrap_room={} with exception {}{}": _n(
        "kv_transfer_failed", "transfer_rank", "rid", "bootstrap_room", "exc_message", None, side="decode"
    ),
    "Decode transfer failed for request rank={} decode_req.req.rid={} decode_req.req.bootstrap_room={}": _n("kv_transfer_failed", "transfer_rank", "rid", "bootstrap_room", side="decode"),
    "Decode transfer failed for request rank={} decode_req.req.rid={} decode_req.req.bootstrap_room={}{}": _n("kv_transfer_failed", "transfer_rank", "rid", "bootstrap_room", None, side="decode"),
    "Decode transfer failed for request decode_req.req.rid={} decode_req.req.bootstrap_room={} with exception {}": _n("kv_transfer_failed", "rid", "bootstrap_room", "exc_message", side="decode"),
}

# ------------------------------------------------------------------ hybrid_pool_full
# stage: startup (the pool cannot hold one request), capped (it limits concurrency), request (one
# request does not fit it)
HYBRID: dict[str, Name] = {
    "SWA pool ({} tokens) cannot hold even one request: the prefill admission floor is sliding_window_size ({}) + page_size ({}). Increase --swa-full-tokens-ratio or the total KV budget.": _n(
        "hybrid_pool_full", "pool_tokens", "sliding_window", "page_size", pool="swa", stage="startup"
    ),
    "SWA pool cap ({} tokens, {} GiB) leaves no room for the full KV pool within the available {} GiB. Reduce --max-running-requests, lower SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static.": _n(
        "hybrid_pool_full", "pool_tokens", "pool_gb", "available_gb", pool="swa", stage="startup"
    ),
    "The DSV4 SWA pool cap ({} tokens, {} GB) leaves no room for the full KV pool within the available {} GB. Reduce --max-running-requests, lower --swa-prefix-tails or SGLANG_SWA_EVICTION_INTERVAL, or increase --mem-fraction-static.": _n(
        "hybrid_pool_full", "pool_tokens", "pool_gb", "available_gb", pool="swa", stage="startup"
    ),
    "Request {} exceeds the unified FULL/SWA KV byte budget: full={}, swa={}": _n("hybrid_pool_full", "rid", "full_required", "swa_required", pool="swa", stage="request"),
    "max_running_requests is capped to {} by the mamba state cache (max_mamba_cache_size={}, {} state slots per request). To raise it: increase --mamba-full-memory-ratio or --max-mamba-cache-size, or halve the state size with --mamba-ssm-dtype bfloat16.": _n(
        "hybrid_pool_full", "capped_requests", "pool_slots", "slots_per_request", pool="mamba", stage="capped"
    ),
    "MLX auxiliary-state cache is too small to serve any requests: max_mamba_cache_size={} backs only {} concurrent requests ({} slots per request). Increase --max-mamba-cache-size to at least {}, or leave it unset to size the pool from the concurrency cap.": _n(
        "hybrid_pool_full", "pool_slots", "capped_requests", "slots_per_request", "needed_slots", pool="mamba", stage="startup"
    ),
    "MLX auxiliary-state cache is too small to serve any requests: max_mamba_cache_size={} backs only {} concurrent requests per attention-DP worker (per-worker auxiliary-state cap={}, {} slots per request). Increase --max-mamba-cache-size to at least {}, or leave it unset to size the pool from the concurrency cap.": _n(
        "hybrid_pool_full", "pool_slots", "capped_requests", None, "slots_per_request", "needed_slots", pool="mamba", stage="startup"
    ),
}

# ------------------------------------------------------------------ kv_memory_insufficient
# SGLang's start-up check that the static pool leaves room for the KV cache, raised; 0.5.14+ names
# its own lower bound and counts the draft model's weights in it
MEMORY: dict[str, Name] = {
    "Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static={}. Raise --mem-fraction-static above {} (minimum viable = 1 - available/pre = {}). If using speculative decoding, draft weights are now counted.": _n(
        "kv_memory_insufficient", "mem_fraction_static", "suggested_mem_fraction_static", "minimum_mem_fraction_static", draft_counted=True
    ),
    "Not enough memory. Please try to increase --mem-fraction-static. Current value: self.server_args.mem_fraction_static={}": _n("kv_memory_insufficient", "mem_fraction_static"),
    "Not enough memory. Please try to increase --mem-fraction-static.": _n("kv_memory_insufficient"),
    "Not enough memory. Please try to increase --mem-fraction-static.{}": _n("kv_memory_insufficient", None),
    "Not enought memory. Please try to increase --mem-fraction-static.": _n("kv_memory_insufficient"),
}

# ------------------------------------------------------------------ memory_summary (old wordings)
# the capacity summary as 0.1.x printed it: the grammar names today's `max_total_num_tokens=...`
# line; these wordings carry the same numbers (a negative pool was printed, not refused, until 0.1.18)
SUMMARIES: dict[str, Name] = {
    "Rank {}: max_total_num_token={}, max_prefill_num_token={}, context_len={}, model_mode={}": _n(
        "memory_summary", "tp_rank", "max_total_num_tokens", "max_prefill_tokens", "context_len", "model_mode"
    ),
    "Rank {}: max_total_num_token={}, max_prefill_num_token={}, context_len={},": _n("memory_summary", "tp_rank", "max_total_num_tokens", "max_prefill_tokens", "context_len"),
    "[rank={}] max_total_num_tokens={}, max_prefill_tokens={}, context_len={},": _n("memory_summary", "tp_rank", "max_total_num_tokens", "max_prefill_tokens", "context_len"),
    "[gpu_id={}] max_total_num_tokens={}, max_prefill_tokens={}, context_len={},": _n("memory_summary", "gpu_id", "max_total_num_tokens", "max_prefill_tokens", "context_len"),
    "[gpu_id={}] max_total_num_tokens={}, max_prefill_tokens={}, context_len={}": _n("memory_summary", "gpu_id", "max_total_num_tokens", "max_prefill_tokens", "context_len"),
    "[gpu_id={}] max_total_num_tokens={}, max_prefill_tokens={}, max_running_requests={}, context_len={}": _n(
        "memory_summary", "gpu_id", "max_total_num_tokens", "max_prefill_tokens", "max_running_requests", "context_len"
    ),
}

# ------------------------------------------------------------------ batches (old wordings)
# the scheduler's batch lines as 0.1.x printed them (the grammar names 0.1.17+'s `Prefill batch.` /
# `Decode batch.` lines): the same numbers under today's field names, so timelines and rules read them
BATCHES: dict[str, Name] = {
    "new fill batch. #seq: {}. #cached_token: {}. #new_token: {}. #remaining_req: {}. #running_req: {}": _n("prefill_batch", "new_seq", "cached_token", "new_token", "queue_req", "running_req"),
    "new fill batch. #seq: {}. #cached_token: {}. #new_token: {}. #remaining_req: {}. #running_req: {}. tree_cache_hit_rate: {}%.": _n(
        "prefill_batch", "new_seq", "cached_token", "new_token", "queue_req", "running_req", "cache_hit_rate"
    ),
    "#running-req: {}, #token: {}, token usage: {}, gen throughput (token/s): {}, #queue-req: {}": _n(
        "decode_batch", "running_req", "token", "token_usage", "gen_throughput", "queue_req", sources=("srt/managers/router/",)
    ),
}

SGLANG: dict[str, Name] = {**REQUESTS, **NUMERICS, **DISAGGREGATION, **TRANSFERS, **HYBRID, **MEMORY, **SUMMARIES, **BATCHES}
"""SGLang's own messages (catalogue templates) -> what they are."""

FOREIGN: dict[str, Name] = {
    # torch.multinomial's input check (aten/src/ATen/native/Distributions.cpp), raised in the sampler
    "probability tensor contains either `inf`, `nan` or element < 0": _n("nan_logits", where="probability", origin_library="torch"),
}
"""Messages other programs raise inside SGLang's processes (an exception's message) -> what they are."""


# ------------------------------------------------------------------ lookups


def kind_of(template: str | None, source: str | None = None) -> str | None:
    """The event kind of an SGLang message template (its catalogue text), or None."""
    name = SGLANG.get(template) if template else None
    return name.kind if name is not None and name.holds_at(source) else None


def read(template: str | None, values: Sequence[Any], source: str | None = None, table: Mapping[str, Name] = SGLANG) -> tuple[str, dict[str, Any]] | None:
    """(kind, typed fields) of a message: its template and its placeholders' values, in order."""
    name = table.get(template) if template else None
    if name is None or not name.holds_at(source):
        return None
    return name.kind, typed(name, values)


def typed(name: Name, values: Sequence[Any]) -> dict[str, Any]:
    """A name's fields from placeholder values (text, or as the catalogue typed them), typed by its
    event class's ``FIELDS`` table; a value the table cannot read is left out."""
    from sglog.events import KIND_CLASSES, guess

    conv = KIND_CLASSES[name.kind].FIELDS
    out: dict[str, Any] = {}
    for key, value in zip(name.fields, values):
        if key is None or value is None:
            continue
        v = conv.get(key, guess)(str(value))
        if v is not None:
            out[key] = v
    out.update(name.consts)
    return out


@functools.cache
def _foreign() -> Catalogue:
    """The foreign templates as a catalogue (the same matcher as SGLang's messages)."""
    from sglog.read.catalog import Catalogue

    templates = [{"t": t, "p": [f or f"arg{i}" for i, f in enumerate(n.fields)], "l": "raise", "k": "raise", "s": "", "v": [0, 0]} for t, n in FOREIGN.items()]
    return Catalogue({"schema": 1, "releases": ["0"], "templates": templates}, "<foreign messages>")


def read_foreign(message: str | None) -> tuple[str, dict[str, Any]] | None:
    """(kind, typed fields) of a message another program raised (its first line), or None."""
    if not message:
        return None
    first = message.split("\n", 1)[0]
    m = _foreign().match(first)
    if m is None:
        return None
    return read(m.template, list(m.fields.values()), table=FOREIGN)


def name_block(fields: dict[str, Any]) -> dict[str, Any]:
    """A traceback block's fields with ``named_kind`` / ``named_fields`` when its exception's
    message is a named message: SGLang's (``message_template`` and ``message_fields``, the
    catalogue match of the message, when the reader made one) or a foreign one; unchanged
    otherwise.  The innermost exception is tried first, then the chained ones."""
    hit = read(fields.get("message_template"), list((fields.get("message_fields") or {}).values()), fields.get("message_source"))
    if hit is None:
        messages = [fields.get("exc_message")] + [x.get("message") for x in fields.get("exceptions") or [] if isinstance(x, dict)]
        hit = next((h for h in map(read_foreign, messages) if h is not None), None)
    if hit is not None:
        fields["named_kind"], fields["named_fields"] = hit
    return fields


__all__ = ["Name", "SGLANG", "FOREIGN", "kind_of", "read", "read_foreign", "name_block", "typed"]
