"""What SGLang's launch arguments mean: flag spellings, defaults, auto-chosen fields.

The server-args dump shows every value in effect; which of them the user set
comes from the launch command when the log has it, and otherwise from
SGLang's defaults (a value different from the default was set explicitly; a
field whose default is "choose at startup" holds an auto-chosen value).
"""

from __future__ import annotations

import shlex
from typing import Any

# fields SGLang fills in at startup when the user leaves them unset (default None)
AUTO_FIELDS = frozenset(
    {
        "mem_fraction_static",
        "cuda_graph_max_bs",
        "cuda_graph_bs",
        "chunked_prefill_size",
        "max_running_requests",
        "max_prefill_tokens",
        "attention_backend",
        "decode_attention_backend",
        "prefill_attention_backend",
        "sampling_backend",
        "speculative_num_steps",
        "speculative_eagle_topk",
        "speculative_num_draft_tokens",
        "piecewise_cuda_graph_max_tokens",
        "context_length",
        "dtype",
        "kv_cache_dtype",
        "tokenizer_path",
        "served_model_name",
        "device",
        "disable_overlap_schedule",
    }
)

# defaults of common ServerArgs fields (0.4 - 0.5.x); used when the log has no launch command
DEFAULTS: dict[str, Any] = {
    "tp_size": 1,
    "dp_size": 1,
    "pp_size": 1,
    "ep_size": 1,
    "nnodes": 1,
    "node_rank": 0,
    "host": "127.0.0.1",
    "port": 30000,
    "trust_remote_code": False,
    "disable_cuda_graph": False,
    "disable_radix_cache": False,
    "enable_dp_attention": False,
    "enable_torch_compile": False,
    "disable_custom_all_reduce": False,
    "schedule_policy": "fcfs",
    "schedule_conservativeness": 1.0,
    "speculative_algorithm": None,
    "speculative_draft_model_path": None,
    "quantization": None,
    "load_format": "auto",
    "log_level": "info",
    "watchdog_timeout": 300,
    "random_seed": None,
    "enable_metrics": False,
    "decode_log_interval": 40,
    "stream_interval": 1,
    "disaggregation_mode": "null",
    "skip_server_warmup": False,
    "enable_mixed_chunk": False,
    "moe_a2a_backend": "none",
    "kv_cache_dtype": "auto",
    "page_size": 1,
}

# flag -> field where the spelling is not simply --field-name
FLAG_ALIASES = {
    "--tp": "tp_size",
    "--tensor-parallel-size": "tp_size",
    "--dp": "dp_size",
    "--data-parallel-size": "dp_size",
    "--pp": "pp_size",
    "--pipeline-parallel-size": "pp_size",
    "--ep": "ep_size",
    "--expert-parallel-size": "ep_size",
    "--model": "model_path",
    "--model-path": "model_path",
    "--nnodes": "nnodes",
    "--node-rank": "node_rank",
}
FIELD_FLAGS = {
    "tp_size": "--tp",
    "dp_size": "--dp",
    "pp_size": "--pp",
    "ep_size": "--ep",
}

# fields that never belong on a rebuilt command line (derived or process-local)
NOT_FLAGS = frozenset({"random_seed", "tokenizer_path", "served_model_name", "base_gpu_id", "dist_init_addr_resolved", "device"})


def flag_of(field: str) -> str:
    return FIELD_FLAGS.get(field, "--" + field.replace("_", "-"))


def field_of(flag: str) -> str:
    flag = flag.split("=", 1)[0]
    return FLAG_ALIASES.get(flag, flag.lstrip("-").replace("-", "_"))


def parse_command(command: str) -> dict[str, Any]:
    """Flags of a launch command -> {field: raw value (str, list of str, or True)}."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    out: dict[str, Any] = {}
    i = 0
    while i < len(words):
        w = words[i]
        if w.startswith("--"):
            if "=" in w:
                out[field_of(w)] = w.split("=", 1)[1]
                i += 1
                continue
            vals = []
            j = i + 1
            while j < len(words) and not words[j].startswith("--"):
                vals.append(words[j])
                j += 1
            out[field_of(w)] = True if not vals else vals[0] if len(vals) == 1 else vals
            i = j
            continue
        i += 1
    return out


def origins(args: dict[str, Any], command: str | None) -> dict[str, str]:
    """field -> 'explicit' | 'auto' | 'default' for every field of the dump.

    With a launch command: flags on it are explicit, AUTO_FIELDS not on it are
    auto, the rest default.  Without one: values that differ from a known
    default are explicit, AUTO_FIELDS are auto, the rest default.
    """
    out: dict[str, str] = {}
    given = parse_command(command) if command else None
    for field, value in args.items():
        if given is not None:
            if field in given:
                out[field] = "explicit"
            elif field in AUTO_FIELDS and value is not None:
                out[field] = "auto"
            else:
                out[field] = "default"
            continue
        if field in AUTO_FIELDS and value is not None:
            out[field] = "auto"
        elif field in DEFAULTS and value != DEFAULTS[field]:
            out[field] = "explicit"
        elif field == "model_path":
            out[field] = "explicit"
        else:
            out[field] = "default"
    return out
