"""Deterministic generator of realistic SGLang 0.5.9 server logs, for benchmarks and tests.

The log is *constructed* (formats from /work/shared/sglang-log-formats.md, values
from a small random walk), seeded, and byte-for-byte reproducible:

* a TP=8 launch of Llama-3.1-70B with an EAGLE-3 draft model: the bare
  argument-parsing warning, the ``server_args=ServerArgs(...)`` dump, then the
  per-rank startup sequence of §7 (init, weights, tqdm shard bars, KV cache,
  CUDA graph capture with a ``\\r`` progress bar, the draft model's second
  round, the capacity summary), uvicorn start-up, the warm-up requests and
  ``The server is fired up and ready to roll!``;
* serving: ~70% decode lines (``accept len``/``accept rate``, ``cuda graph``
  mostly True), ~15% prefill, ~10% uvicorn access lines; batch lines come from
  every rank TP0-TP7 (``--enable-metrics-for-all-schedulers``); the rest is
  retractions (``KV cache pool is full. Retract requests. ...``), GC and
  uvicorn warnings, Python warnings and occasional ASGI tracebacks;
* the end: a scheduler crash (torch CUDA OOM traceback) and the main
  process's SIGQUIT line.

Usage::

    python benchmarks/generate.py                 # the standard set in benchmarks/data/
    python benchmarks/generate.py --lines 2000 --out /tmp/x.log [--seed 7]

Also importable: ``generate_lines(n, seed)`` yields the lines (tests use it).
"""

from __future__ import annotations

import argparse
import gzip
import os
import random
import sys
from collections import deque
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

DATA = Path(__file__).resolve().parent / "data"
RANKS = 8
START = datetime(2026, 2, 23, 10, 15, 0)

# the standard benchmark files: name -> (lines, seed)
STANDARD = {
    "sglang-1m.log": (1_000_000, 1),
    "sglang-5m.log": (5_000_000, 5),
    "sglang-small.log": (1_000, 3),
}

MODEL = "meta-llama/Llama-3.1-70B-Instruct"
DRAFT = "lmsys/sglang-EAGLE3-LLaMA3.1-Instruct-70B"

_SERVER_ARGS = [
    ("model_path", repr(MODEL)),
    ("tokenizer_path", repr(MODEL)),
    ("tokenizer_mode", "'auto'"),
    ("tokenizer_worker_num", "1"),
    ("skip_tokenizer_init", "False"),
    ("load_format", "'auto'"),
    ("model_loader_extra_config", "'{}'"),
    ("trust_remote_code", "False"),
    ("context_length", "None"),
    ("is_embedding", "False"),
    ("enable_multimodal", "None"),
    ("revision", "None"),
    ("model_impl", "'auto'"),
    ("host", "'0.0.0.0'"),
    ("port", "30000"),
    ("skip_server_warmup", "False"),
    ("warmups", "None"),
    ("nccl_port", "None"),
    ("dtype", "'auto'"),
    ("quantization", "None"),
    ("quantization_param_path", "None"),
    ("kv_cache_dtype", "'auto'"),
    ("enable_fp32_lm_head", "False"),
    ("mem_fraction_static", "0.871"),
    ("max_running_requests", "48"),
    ("max_queued_requests", "None"),
    ("max_total_tokens", "None"),
    ("chunked_prefill_size", "8192"),
    ("max_prefill_tokens", "16384"),
    ("schedule_policy", "'fcfs'"),
    ("enable_priority_scheduling", "False"),
    ("schedule_conservativeness", "1.0"),
    ("page_size", "1"),
    ("hybrid_kvcache_ratio", "None"),
    ("swa_full_tokens_ratio", "0.8"),
    ("disable_hybrid_swa_memory", "False"),
    ("radix_eviction_policy", "'lru'"),
    ("device", "'cuda'"),
    ("tp_size", "8"),
    ("pp_size", "1"),
    ("pp_max_micro_batch_size", "None"),
    ("stream_interval", "1"),
    ("stream_output", "False"),
    ("random_seed", "421377012"),
    ("constrained_json_whitespace_pattern", "None"),
    ("watchdog_timeout", "300"),
    ("dist_timeout", "None"),
    ("download_dir", "None"),
    ("base_gpu_id", "0"),
    ("gpu_id_step", "1"),
    ("sleep_on_idle", "False"),
    ("log_level", "'info'"),
    ("log_level_http", "None"),
    ("log_requests", "False"),
    ("log_requests_level", "2"),
    ("crash_dump_folder", "None"),
    ("show_time_cost", "False"),
    ("enable_metrics", "True"),
    ("enable_metrics_for_all_schedulers", "True"),
    ("tokenizer_metrics_custom_labels_header", "'x-custom-labels'"),
    ("bucket_time_to_first_token", "None"),
    ("bucket_inter_token_latency", "None"),
    ("bucket_e2e_request_latency", "None"),
    ("collect_tokens_histogram", "False"),
    ("prompt_tokens_buckets", "None"),
    ("generation_tokens_buckets", "None"),
    ("gc_warning_threshold_secs", "0.05"),
    ("decode_log_interval", "40"),
    ("enable_request_time_stats_logging", "False"),
    ("kv_events_config", "None"),
    ("enable_trace", "False"),
    ("otlp_traces_endpoint", "'localhost:4317'"),
    ("api_key", "None"),
    ("served_model_name", repr(MODEL)),
    ("weight_version", "'default'"),
    ("chat_template", "None"),
    ("completion_template", "None"),
    ("file_storage_path", "'sglang_storage'"),
    ("enable_cache_report", "False"),
    ("reasoning_parser", "None"),
    ("tool_call_parser", "None"),
    ("tool_server", "None"),
    ("sampling_defaults", "'model'"),
    ("dp_size", "1"),
    ("load_balance_method", "'round_robin'"),
    ("attn_cp_size", "1"),
    ("moe_dp_size", "1"),
    ("dist_init_addr", "None"),
    ("nnodes", "1"),
    ("node_rank", "0"),
    ("json_model_override_args", "'{}'"),
    ("preferred_sampling_params", "None"),
    ("enable_lora", "None"),
    ("max_lora_rank", "None"),
    ("lora_target_modules", "None"),
    ("lora_paths", "None"),
    ("max_loaded_loras", "None"),
    ("max_loras_per_batch", "8"),
    ("lora_backend", "'csgmv'"),
    ("attention_backend", "'fa3'"),
    ("decode_attention_backend", "None"),
    ("prefill_attention_backend", "None"),
    ("sampling_backend", "'flashinfer'"),
    ("grammar_backend", "'xgrammar'"),
    ("mm_attention_backend", "None"),
    ("speculative_algorithm", "'EAGLE3'"),
    ("speculative_draft_model_path", repr(DRAFT)),
    ("speculative_draft_model_revision", "None"),
    ("speculative_draft_load_format", "None"),
    ("speculative_num_steps", "3"),
    ("speculative_eagle_topk", "1"),
    ("speculative_num_draft_tokens", "4"),
    ("speculative_accept_threshold_single", "1.0"),
    ("speculative_accept_threshold_acc", "1.0"),
    ("speculative_token_map", "None"),
    ("speculative_attention_mode", "'prefill'"),
    ("ep_size", "1"),
    ("moe_a2a_backend", "'none'"),
    ("moe_runner_backend", "'auto'"),
    ("deepep_mode", "'auto'"),
    ("ep_num_redundant_experts", "0"),
    ("init_expert_location", "'trivial'"),
    ("enable_eplb", "False"),
    ("enable_hierarchical_cache", "False"),
    ("hicache_ratio", "2.0"),
    ("hicache_size", "0"),
    ("hicache_write_policy", "'write_through'"),
    ("hicache_io_backend", "'kernel'"),
    ("hicache_mem_layout", "'layer_first'"),
    ("hicache_storage_backend", "None"),
    ("enable_double_sparsity", "False"),
    ("cpu_offload_gb", "0"),
    ("offload_group_size", "-1"),
    ("disable_radix_cache", "False"),
    ("cuda_graph_max_bs", "48"),
    ("cuda_graph_bs", "[1, 2, 4, 8, 16, 24, 32, 40, 48]"),
    ("disable_cuda_graph", "False"),
    ("disable_cuda_graph_padding", "False"),
    ("enable_profile_cuda_graph", "False"),
    ("enable_cudagraph_gc", "False"),
    ("enable_nccl_nvls", "False"),
    ("enable_symm_mem", "False"),
    ("disable_flashinfer_cutlass_moe_fp4_allgather", "False"),
    ("enable_tokenizer_batch_encode", "False"),
    ("disable_outlines_disk_cache", "False"),
    ("disable_custom_all_reduce", "False"),
    ("enable_mscclpp", "False"),
    ("disable_overlap_schedule", "False"),
    ("enable_mixed_chunk", "False"),
    ("enable_dp_attention", "False"),
    ("enable_dp_lm_head", "False"),
    ("enable_two_batch_overlap", "False"),
    ("enable_torch_compile", "False"),
    ("torch_compile_max_bs", "32"),
    ("torchao_config", "''"),
    ("enable_nan_detection", "False"),
    ("enable_p2p_check", "False"),
    ("triton_attention_reduce_in_fp32", "False"),
    ("triton_attention_num_kv_splits", "8"),
    ("num_continuous_decode_steps", "1"),
    ("delete_ckpt_after_loading", "False"),
    ("enable_memory_saver", "False"),
    ("allow_auto_truncate", "False"),
    ("enable_custom_logit_processor", "False"),
    ("flashinfer_mla_disable_ragged", "False"),
    ("disable_shared_experts_fusion", "False"),
    ("disable_chunked_prefix_cache", "False"),
    ("disable_fast_image_processor", "False"),
    ("enable_return_hidden_states", "False"),
    ("scheduler_recv_interval", "1"),
    ("numa_node", "None"),
    ("debug_tensor_dump_output_folder", "None"),
    ("debug_tensor_dump_input_file", "None"),
    ("disaggregation_mode", "'null'"),
    ("disaggregation_transfer_backend", "'mooncake'"),
    ("disaggregation_bootstrap_port", "8998"),
    ("disaggregation_ib_device", "None"),
    ("num_reserved_decode_tokens", "512"),
    ("custom_weight_loader", "[]"),
    ("weight_loader_disable_mmap", "False"),
    ("enable_pdmux", "False"),
    ("sm_group_num", "3"),
    ("mm_max_concurrent_calls", "32"),
    ("mm_per_request_timeout", "10.0"),
    ("decrypted_config_file", "None"),
    ("decrypted_draft_config_file", "None"),
]

_PATHS = [
    ("POST", "/v1/chat/completions", 0.78),
    ("POST", "/generate", 0.08),
    ("GET", "/health", 0.06),
    ("GET", "/metrics", 0.05),
    ("GET", "/v1/models", 0.02),
    ("POST", "/v1/completions", 0.01),
]

_SITE = "/usr/local/lib/python3.12/dist-packages"

_ASGI_TRACEBACK = [
    "Traceback (most recent call last):",
    f'  File "{_SITE}/uvicorn/protocols/http/httptools_impl.py", line 409, in run_asgi',
    "    result = await app(  # type: ignore[func-returns-value]",
    "             ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/uvicorn/middleware/proxy_headers.py", line 60, in __call__',
    "    return await self.app(scope, receive, send)",
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/fastapi/applications.py", line 1054, in __call__',
    "    await super().__call__(scope, receive, send)",
    f'  File "{_SITE}/starlette/applications.py", line 113, in __call__',
    "    await self.middleware_stack(scope, receive, send)",
    f'  File "{_SITE}/starlette/middleware/errors.py", line 186, in __call__',
    "    raise exc",
    f'  File "{_SITE}/sglang/srt/entrypoints/openai/serving_base.py", line 91, in handle_request',
    "    adapted_request, processed_request = self._convert_to_internal_request(request, raw_request)",
    "                                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/sglang/srt/entrypoints/openai/serving_chat.py", line 187, in _convert_to_internal_request',
    "    processed_messages = self._process_messages(request, is_multimodal)",
    "                         ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "ValueError: This model's maximum context length is 131072 tokens. However, you requested {n} tokens in the messages. Please reduce the length of the messages.",
]

_CRASH_TRACEBACK = [
    "Traceback (most recent call last):",
    f'  File "{_SITE}/sglang/srt/managers/scheduler.py", line 2974, in run_scheduler_process',
    "    scheduler.event_loop_overlap()",
    f'  File "{_SITE}/torch/utils/_contextlib.py", line 120, in decorate_context',
    "    return func(*args, **kwargs)",
    "           ^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/sglang/srt/managers/scheduler.py", line 1087, in event_loop_overlap',
    "    batch_result = self.run_batch(batch)",
    "                   ^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/sglang/srt/managers/scheduler.py", line 2101, in run_batch',
    "    batch_or_worker_batch_result = self.draft_worker.forward_batch_generation(batch_or_worker_batch)",
    "                                   ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/sglang/srt/speculative/eagle_worker.py", line 298, in forward_batch_generation',
    "    logits_output, verify_output, model_worker_batch, can_run_cuda_graph = self.verify(batch, spec_info)",
    "                                                                           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    f'  File "{_SITE}/torch/nn/modules/module.py", line 1773, in _wrapped_call_impl',
    "    return self._call_impl(*args, **kwargs)",
    "           ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
    "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 3 has a total capacity of 79.19 GiB of which 1.06 GiB is free. "
    "Process 48230 has 78.12 GiB memory in use. Of the allocated memory 74.50 GiB is allocated by PyTorch, with 1.20 GiB allocated in private pools "
    "(e.g., CUDA Graphs), and 1.83 GiB is reserved by PyTorch but unallocated. If reserved but unallocated memory is large try setting "
    "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See documentation for Memory Management  "
    "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)",
    "",
]

_PY_WARNINGS = [
    (
        f"{_SITE}/sglang/srt/entrypoints/openai/protocol.py:412: UserWarning: 'max_tokens' is deprecated, use 'max_completion_tokens' instead.",
        "  warnings.warn(",
    ),
    (
        f"{_SITE}/transformers/generation/configuration_utils.py:631: UserWarning: `do_sample` is set to `False`. However, `temperature` is set to `0.6` -- this flag is only used in sample-based generation modes.",
        "  warnings.warn(",
    ),
]


# share of *lines* per serving event kind, and lines per event (batch lines and
# retractions are printed by all 8 ranks; a traceback block is 21 lines)
_MIX = [
    ("decode", 0.700, RANKS),
    ("prefill", 0.150, RANKS),
    ("access", 0.100, 1),
    ("retraction", 0.020, RANKS),
    ("gc_warning", 0.010, 1),
    ("uvicorn_warning", 0.005, 1),
    ("python_warning", 0.004, 2),
    ("asgi_traceback", 0.011, len(_ASGI_TRACEBACK) + 1),
]


def _cumulative() -> list[float]:
    weights = [share / per for _name, share, per in _MIX]
    total = sum(weights)
    out, acc = [], 0.0
    for w in weights:
        acc += w / total
        out.append(acc)
    return out


_CUM = _cumulative()


class _Clock:
    """Monotone wall clock with cached '[YYYY-MM-DD HH:MM:SS' text."""

    def __init__(self, start: datetime):
        self.t = start
        self.text = "[" + start.strftime("%Y-%m-%d %H:%M:%S")

    def advance(self, seconds: float) -> None:
        if seconds <= 0:
            return
        new = self.t + timedelta(seconds=seconds)
        if int(new.timestamp()) != int(self.t.timestamp()):
            self.text = "[" + new.strftime("%Y-%m-%d %H:%M:%S")
        self.t = new


def _startup(rng: random.Random, clock: _Clock) -> list[str]:
    out: list[str] = []
    ranks = list(range(RANKS))

    def main(msg: str) -> None:
        out.append(f"{clock.text}] {msg}")

    def each(fmt, step: float = 0.05, shuffle: bool = True) -> None:
        order = ranks[:]
        if shuffle:
            rng.shuffle(order)
        for r in order:
            out.append(f"{clock.text} TP{r}] {fmt(r)}")
            clock.advance(rng.random() * step)

    out.append("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly setting --max-running-requests.")
    main("server_args=ServerArgs(" + ", ".join(f"{k}={v}" for k, v in _SERVER_ARGS) + ")")
    clock.advance(2.1)
    main("Using default HuggingFace chat template with detected content format: string")
    clock.advance(2.7)
    each(lambda r: "Init torch distributed begin.")
    clock.advance(1.2)
    each(lambda r: f"Init torch distributed ends. elapsed={1.6 + rng.random() * 0.5:.2f} s, mem usage={0.5 + rng.random() * 0.1:.2f} GB")
    each(lambda r: "Load weight begin. avail mem=78.50 GB")
    for i, pct in enumerate((0, 3, 7, 10, 13, 17, 20, 23)):
        out.append(f"Loading safetensors checkpoint shards:  {pct:>2}% Completed | {i}/30 [00:{i * 3:02d}<01:{30 - i:02d},  {2.9 + rng.random() * 0.3:.2f}s/it]")
        clock.advance(3.0)
    out.append("Loading safetensors checkpoint shards: 100% Completed | 30/30 [01:31<00:00,  3.04s/it]")
    out.append("")
    usage = [17.1 + rng.random() * 0.2 for _ in ranks]
    each(lambda r: f"Load weight end. elapsed={91 + rng.random() * 2:.2f} s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem={78.5 - usage[r]:.2f} GB, mem usage={usage[r]:.2f} GB.")
    each(lambda r: "KV Cache is allocated. #tokens: 771906, K size: 23.56 GB, V size: 23.56 GB")
    each(lambda r: "Memory pool end. avail mem=14.92 GB")
    each(lambda r: "Capture cuda graph begin. This can take up to several minutes. avail mem=14.55 GB")
    out.append(f"{clock.text} TP0] Capture cuda graph bs [1, 2, 4, 8, 16, 24, 32, 40, 48]")
    bar = []
    for i, bs in enumerate((48, 40, 32, 24, 16, 8, 4, 2, 1)):
        done = "\u2588" * i + " " * (9 - i)
        bar.append(f"Capturing batches (bs={bs} avail_mem={14.5 - i * 0.08:.2f} GB): {i * 100 // 9:3d}%|{done}| {i}/9 [00:0{i // 2}<00:0{(9 - i) // 2}, {1.8 + rng.random():.2f}it/s]")
    out.append("\r".join(bar) + "\rCapturing batches (bs=1 avail_mem=13.76 GB): 100%|\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588\u2588| 9/9 [00:04<00:00,  2.05it/s]")
    clock.advance(5.0)
    each(lambda r: f"Capture cuda graph end. Time elapsed: {5.0 + rng.random() * 0.3:.2f} s. mem usage=0.84 GB. avail mem=13.71 GB.")
    each(lambda r: "Load weight begin. avail mem=13.71 GB")
    each(lambda r: f"Load weight end. elapsed={0.8 + rng.random() * 0.1:.2f} s, type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=12.92 GB, mem usage=0.79 GB.")
    each(lambda r: "KV Cache is allocated. #tokens: 771906, K size: 0.74 GB, V size: 0.74 GB")
    each(lambda r: "Memory pool end. avail mem=11.40 GB")
    each(lambda r: "Capture draft cuda graph begin. This can take up to several minutes. avail mem=11.40 GB")
    clock.advance(3.7)
    each(lambda r: f"Capture draft cuda graph end. Time elapsed: {3.7 + rng.random() * 0.2:.2f} s. mem usage=0.41 GB. avail mem=10.99 GB.")
    each(lambda r: "max_total_num_tokens=771906, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=48, context_len=131072, available_gpu_mem=10.40 GB")
    clock.advance(1.0)
    main("INFO:     Started server process [48211]")
    main("INFO:     Waiting for application startup.")
    main("INFO:     Application startup complete.")
    main("INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)")
    clock.advance(1.0)
    main('INFO:     127.0.0.1:57104 - "GET /model_info HTTP/1.1" 200 OK')
    each(lambda r: "Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False", shuffle=False)
    clock.advance(0.6)
    main('INFO:     127.0.0.1:57114 - "POST /generate HTTP/1.1" 200 OK')
    main("The server is fired up and ready to roll!")
    return out


def generate_lines(n: int, seed: int = 0) -> Iterator[str]:
    """Yield exactly ``n`` lines (no terminators) of a constructed 0.5.9 log."""
    rng = random.Random(seed)
    clock = _Clock(START + timedelta(seconds=rng.randrange(0, 3600)))
    crash = [
        "{ts} TP3] Scheduler hit an exception: " + _CRASH_TRACEBACK[0],
        *_CRASH_TRACEBACK[1:],
        "{ts}] Received sigquit from a child process. It usually means the child failed.",
    ]
    head = _startup(rng, clock)
    budget = n - len(crash)
    emitted = 0
    for line in head[: max(0, budget)]:
        yield line
        emitted += 1
    rnd = rng.random
    ranks = list(range(RANKS))
    tp = [f" TP{r}] " for r in ranks]
    paths = [(m, p) for m, p, _w in _PATHS]
    path_w = [w for _m, _p, w in _PATHS]
    max_tokens = 771906
    running, tokens, queue = 4, 6000, 0
    accept_len = 3.1
    pending: deque[str] = deque()
    while emitted < budget:
        if not pending:
            x = rnd()
            if x < _CUM[0]:
                clock.advance(0.4 + rnd() * 0.8)
                running = max(1, min(48, running + rng.choice((-2, -1, 0, 0, 1, 1, 2))))
                tokens = max(running * 200, min(max_tokens - 1, tokens + rng.randrange(-3000, 3600)))
                queue = max(0, queue + rng.choice((-1, 0, 0, 1)) if running >= 40 else 0)
                accept_len = min(3.95, max(1.2, accept_len + (rnd() - 0.5) * 0.2))
                usage = tokens / max_tokens
                rate = (accept_len - 1) / 3
                graph = "True" if rnd() > 0.03 else "False"
                base = running * accept_len * (38 + rnd() * 4)
                order = ranks[:]
                rng.shuffle(order)
                for r in order:
                    pending.append(
                        f"{clock.text}{tp[r]}Decode batch, #running-req: {running}, #token: {tokens}, token usage: {usage:.2f}, "
                        f"accept len: {accept_len:.2f}, accept rate: {rate:.2f}, cuda graph: {graph}, "
                        f"gen throughput (token/s): {base * (0.98 + rnd() * 0.04):.2f}, #queue-req: {queue}"
                    )
            elif x < _CUM[1]:
                clock.advance(rnd() * 0.3)
                new_seq = rng.choice((1, 1, 1, 2, 3))
                new_tok = rng.randrange(20, 8192)
                cached = rng.randrange(0, 4096) if rnd() < 0.7 else 0
                usage = tokens / max_tokens
                tput = new_tok / (0.05 + rnd() * 0.4)
                for r in ranks:
                    pending.append(
                        f"{clock.text}{tp[r]}Prefill batch, #new-seq: {new_seq}, #new-token: {new_tok}, #cached-token: {cached}, "
                        f"token usage: {usage:.2f}, #running-req: {running}, #queue-req: {queue}, "
                        f"input throughput (token/s): {tput * (0.98 + rnd() * 0.04):.2f}, cuda graph: False"
                    )
            elif x < _CUM[2]:
                method, path = rng.choices(paths, path_w)[0]
                status = "200 OK"
                y = rnd()
                if y < 0.01:
                    status = "400 Bad Request"
                elif y < 0.012:
                    status = "503 Service Unavailable"
                client = "127.0.0.1" if path in ("/health", "/metrics") else f"10.0.{rng.randrange(0, 4)}.{rng.randrange(2, 250)}"
                pending.append(f'{clock.text}] INFO:     {client}:{rng.randrange(32768, 61000)} - "{method} {path} HTTP/1.1" {status}')
            elif x < _CUM[3]:
                # KV pool full: every rank retracts
                retracted = rng.randrange(1, 6)
                gained = retracted * rng.randrange(600, 3000)
                old = 0.3 + rnd() * 0.4
                new = min(1.0, old + 0.05 + rnd() * 0.2)
                order = ranks[:]
                rng.shuffle(order)
                for r in order:
                    pending.append(f"{clock.text}{tp[r]}KV cache pool is full. Retract requests. #retracted_reqs: {retracted}, #new_tokens_gained: {gained}, #new_token_ratio: {old:.4f} -> {new:.4f}")
                running = max(1, running - retracted)
            elif x < _CUM[4]:
                r = rng.randrange(RANKS)
                g = rng.choice((0, 1, 2, 2))
                pending.append(
                    f"{clock.text}{tp[r]}LONG GARBAGE COLLECTION DETECTED | Generation {g} | Duration: {0.05 + rnd() * 0.3:.4f}s | "
                    f"# Objects: gen0={rng.randrange(0, 700)}, gen1={rng.randrange(0, 10)}, gen2={rng.randrange(10000, 900000)} | "
                    "This may cause latency jitter. Consider calling the freeze_gc API after sending a few warmup requests."
                )
            elif x < _CUM[5]:
                pending.append(f"{clock.text}] WARNING:  Invalid HTTP request received.")
            elif x < _CUM[6]:
                pending.extend(rng.choice(_PY_WARNINGS))
            else:
                pending.append(f"{clock.text}] ERROR:    Exception in ASGI application")
                pending.extend(_ASGI_TRACEBACK[:-1])
                pending.append(_ASGI_TRACEBACK[-1].format(n=rng.randrange(131073, 400000)))
        yield pending.popleft()
        emitted += 1
    clock.advance(2.0)
    for line in crash[: n - emitted]:
        yield line.replace("{ts}", clock.text)


def write_log(path: Path, n: int, seed: int = 0) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    buf: list[str] = []
    with open(tmp, "w", encoding="utf-8", newline="\n") as f:
        for line in generate_lines(n, seed):
            buf.append(line)
            if len(buf) >= 20000:
                f.write("\n".join(buf))
                f.write("\n")
                buf.clear()
        if buf:
            f.write("\n".join(buf))
            f.write("\n")
    os.replace(tmp, path)
    return path


def gzip_copy(src: Path, dst: Path) -> Path:
    tmp = dst.with_suffix(dst.suffix + ".tmp")
    with open(src, "rb") as fin, open(tmp, "wb") as raw:
        with gzip.GzipFile(filename=src.name, mode="wb", compresslevel=6, fileobj=raw, mtime=0) as gz:
            while block := fin.read(8 << 20):
                gz.write(block)
    os.replace(tmp, dst)
    return dst


def ensure_standard(data: Path = DATA, *, five_m: bool = True, quiet: bool = False) -> dict[str, Path]:
    """Create the standard benchmark files that are missing; return name -> path."""
    out = {}
    for name, (n, seed) in STANDARD.items():
        if name == "sglang-5m.log" and not five_m:
            continue
        p = data / name
        if not p.exists():
            if not quiet:
                print(f"generating {p} ({n:,} lines)", file=sys.stderr, flush=True)
            write_log(p, n, seed)
        out[name] = p
    gz = data / "sglang-1m.log.gz"
    if not gz.exists():
        if not quiet:
            print(f"compressing {gz}", file=sys.stderr, flush=True)
        gzip_copy(data / "sglang-1m.log", gz)
    out["sglang-1m.log.gz"] = gz
    return out


GB_LINES = 5_450_000  # ~185 bytes a line: a log of just over 1 GB (1e9 bytes)


def ensure_gb(data: Path = DATA, *, quiet: bool = False) -> Path:
    """The 1 GB benchmark log (``sglang-1gb.log``), written if missing."""
    p = data / "sglang-1gb.log"
    if not p.exists():
        if not quiet:
            print(f"generating {p} ({GB_LINES:,} lines, ~1 GB)", file=sys.stderr, flush=True)
        write_log(p, GB_LINES, 7)
    return p


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--lines", type=int, help="write one log of this many lines (to --out)")
    ap.add_argument("--out", type=Path, help="output path for --lines (default: benchmarks/data/sglang-N.log)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--gzip", action="store_true", help="also write a .gz copy of --out")
    ap.add_argument("--no-5m", action="store_true", help="standard set without the 5M-line file")
    args = ap.parse_args(argv)
    if args.lines:
        out = args.out or DATA / f"sglang-{args.lines}.log"
        write_log(out, args.lines, args.seed)
        if args.gzip:
            gzip_copy(out, out.with_suffix(out.suffix + ".gz"))
        print(out)
        return 0
    for name, p in ensure_standard(five_m=not args.no_5m).items():
        print(f"{name}\t{p.stat().st_size / 1e6:.1f} MB\t{p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
