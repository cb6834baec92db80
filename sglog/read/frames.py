"""Python frames -> the module each one is in, SGLang's frames among them, and the phase they tell.

A traceback's frame names a file; :func:`module_of` turns it into the dotted module it is,
whatever the install prefix (``site-packages``, a source checkout such as
``/sgl-workspace/sglang/python``, a fork's folder, a virtualenv named ``sglang``): the path after
the last package root (``site-packages``, ``dist-packages``, the standard library's
``pythonX.Y``), or from the last folder named after one of SGLang's packages.

``PHASES`` is the one table of which SGLang functions (and a few of torch's and vLLM's, which
old releases called for the same work) belong to which phase of a server's life
(``schema.ERROR_PHASES``).  Its names were checked against the frames of the real corpus, the
catalogue's source modules and ../shared/failure-modes.md, across releases: 0.1's
``managers/router/model_rpc.py``, 0.2-0.3's vLLM helpers, 0.4-0.5's ``model_runner.py``,
``cuda_graph_runner.py``, ``disaggregation/`` and the graph runners of other devices.  Each row
is ``(module pattern, function patterns, phase)``; ``*`` matches any text (dots too), ``|``
separates function names; the first row that matches a frame gives its phase, and a row with
phase ``None`` marks frames that tell nothing although a broader row below would match them.

>>> module_of("/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py")
'sglang.srt.managers.scheduler'
>>> module_of("/home/u/sglang-v0512/lib/python3.12/site-packages/torch/nn/modules/module.py")
'torch.nn.modules.module'
>>> stack = [{"file": "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", "line": 9, "function": "__init__"},
...          {"file": "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", "line": 5, "function": "init_cuda_graphs"},
...          {"file": "/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", "line": 7, "function": "forward_decode"}]
>>> phase_of(stack), sglang_chain(stack)[-1], sglang_frame(stack)["module"]
('cuda_graph_capture', 'sglang.srt.model_executor.model_runner:forward_decode', 'sglang.srt.model_executor.model_runner')
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from sglog.schema import ERROR_PHASES, FORWARD_PHASES

SGLANG_PACKAGES = ("sglang", "sgl_kernel")  # SGLang's own code: the server and its kernel library

# (module pattern, function patterns, phase): the first row matching a frame names its phase
PHASES: tuple[tuple[str, str, str | None], ...] = (
    # -- rows that tell nothing, ahead of the broader rows below that would take them
    ("sglang.srt.disaggregation.*", "event_loop_*|run_batch|process_batch_result|get_next_disagg_*|get_new_prebuilt_batch|process_prebuilt*", None),
    ("sglang.srt.model_loader.utils", "*", None),  # architecture lookups: also run by the tokenizer manager
    ("sglang.srt.layers.attention.vision*", "*", None),  # model layers, built while the weights load
    # -- distributed init
    (
        "sglang.*",
        "init_torch_distributed|init_distributed_environment|initialize_model_parallel|ensure_model_parallel_initialized"
        "|init_model_parallel_group|init_world_group|initialize_dp_attention|init_distributed|init_process_group",
        "distributed_init",
    ),
    ("sglang.srt.distributed.parallel_state", "__init__", "distributed_init"),  # GroupCoordinator
    ("sglang.srt.distributed.bootstrap", "*", "distributed_init"),  # (0.5.2x)
    ("sglang.srt.distributed.gated_launch", "*", "distributed_init"),
    ("sglang.srt.distributed.device_communicators.*", "__init__|ncclCommInitRank|ncclGetUniqueId|ncclCommInitRankConfig", "distributed_init"),
    ("vllm.distributed.*", "init_distributed_environment|initialize_model_parallel|ensure_model_parallel_initialized|init_model_parallel_group|init_world_group|__init__", "distributed_init"),
    ("vllm.model_executor.parallel_utils.*", "initialize_model_parallel|init_distributed_environment", "distributed_init"),
    (
        "torch.distributed.*",
        "init_process_group|rendezvous|_create_c10d_store|_new_process_group_helper|new_group|_env_rendezvous_handler|_tcp_rendezvous_handler|_store_based_barrier|init_device_mesh",
        "distributed_init",
    ),
    # -- shutdown
    (
        "sglang.*",
        "kill_process_tree|kill_itself_when_parent_died|shutdown|_shutdown|graceful_shutdown|sigterm_handler|sigquit_handler"
        "|running_phase_sigquit_handler|destroy_model_parallel|destroy_distributed_environment|cleanup_dist_env_and_memory",
        "shutdown",
    ),
    ("torch.distributed.*", "destroy_process_group", "shutdown"),
    ("threading", "_shutdown", "shutdown"),
    ("multiprocessing.util", "_exit_function|_run_finalizers", "shutdown"),
    # -- PD disaggregation: transfer engines, bootstrap, the queues around them
    ("sglang.srt.disaggregation.*", "process_batch_result_disagg_prefill", "prefill"),
    ("sglang.srt.disaggregation.*", "*", "pd_transfer"),
    ("sglang.srt.managers.scheduler", "init_disaggregation", "pd_transfer"),
    # -- weights
    (
        "sglang.*",
        "load_model|load_weights|load_weights_and_postprocess|update_weights_from_disk|update_weights_from_tensor"
        "|update_weights_from_distributed|post_load_weights|load_kv_cache_scales|process_weights_after_loading|weight_loader*",
        "weight_load",
    ),
    ("sglang.srt.model_loader.loader", "*", "weight_load"),
    ("sglang.srt.model_loader.model_loader", "*", "weight_load"),
    ("sglang.srt.model_executor.model_runner_components.*weight*", "*", "weight_load"),  # startup_weight_load, weight_updater (0.5.2x)
    ("sglang.srt.model_executor.model_runner_components.load_model_utils", "*", "weight_load"),
    ("sglang.srt.model_loader.weight_utils", "*", "weight_load"),
    ("sglang.srt.model_loader.*", "load_*|_load_*|*_weights_iterator|download_*", "weight_load"),
    ("sglang.srt.layers.*", "create_weights", "weight_load"),  # quantized layers made while the model is built
    ("vllm.model_executor.model_loader*", "*", "weight_load"),
    ("vllm.model_executor.weight_utils", "*", "weight_load"),
    # -- memory pools (KV cache, request-to-token, host pools), sized and allocated
    (
        "sglang.*",
        "init_memory_pool|profile_max_num_token|_profile_max_num_token|init_memory_pool_and_cache|init_cache_with_memory_pool|_init_pools|init_kv_cache*|handle_max_mamba_cache|set_num_token_hybrid",
        "kv_pool",
    ),
    ("sglang.srt.mem_cache.*pool*", "__init__|_create_buffers|create_buffers|_init_buffers|init_buffers", "kv_pool"),
    ("sglang.srt.model_executor.pool_configurator", "*", "kv_pool"),  # the pool's size (0.5.10+)
    ("sglang.srt.mem_cache.kv_cache_configurator", "*", "kv_pool"),
    ("sglang.srt.mem_cache.kv_cache_builder", "*", "kv_pool"),
    # -- attention backends (made once, before any graph is captured)
    ("sglang.*", "init_attention_backend|_get_attention_backend|_get_attention_backend_from_str|init_attention_backends|init_flashinfer|init_double_sparsity_channel_config", "attention_backend_init"),
    ("sglang.srt.layers.attention.attention_registry", "create_*", "attention_backend_init"),
    ("sglang.srt.model_executor.model_runner_components.attention_backend_setup", "*", "attention_backend_init"),
    ("sglang.srt.layers.attention.*backend*", "__init__", "attention_backend_init"),
    # -- graph capture (CUDA, piecewise, NPU/CPU graph runners, draft graphs)
    (
        "sglang.*",
        "init_cuda_graphs|init_device_graphs|init_piecewise_cuda_graphs|init_cuda_graph_state|init_forward_metadata_capture_cuda_graph|graph_capture|capture_one_batch_size",
        "cuda_graph_capture",
    ),
    ("sglang.srt.model_executor.model_runner_components.cuda_graph_setup", "*", "cuda_graph_capture"),
    # a graph runner's replay is serving, not capture: prefill graphs (piecewise, ViT) run prefills
    ("sglang.*piecewise*graph_runner*", "replay*", "prefill"),
    ("sglang.*prefill*graph_runner*", "replay*", "prefill"),
    ("sglang.srt.multimodal.*graph_runner*", "replay*|run*|forward*", "prefill"),
    ("sglang.*graph_runner*", "replay*|can_run", "decode"),
    ("sglang.*graph_runner*", "*", "cuda_graph_capture"),
    ("torch.cuda.graphs", "capture_begin|capture_end|__enter__|__exit__", "cuda_graph_capture"),
    # -- warm-up (server warm-up requests, kernel autotuning, DeepGEMM's JIT)
    (
        "sglang.*",
        "_wait_and_warmup|_execute_server_warmup|execute_warmups|kernel_warmup|_flashinfer_autotune|warmup_deep_gemm*|_maybe_compile_deep_gemm*|_compile_deep_gemm*|deep_gemm_warmup",
        "warmup",
    ),
    ("sglang.srt.entrypoints.warmup", "*", "warmup"),
    ("sglang.srt.layers.*deep_gemm_wrapper.compile_utils", "*", "warmup"),
    # -- a forward pass, its mode when a frame tells it
    ("sglang.*", "forward_draft_extend_after_decode", "decode"),
    (
        "sglang.*",
        "forward_extend|forward_split_prefill|forward_target_extend|forward_draft_extend|process_batch_result_prefill"
        "|get_new_batch_prefill|_get_new_batch_prefill_raw|prepare_for_extend|forward_fill_batch|forward_prefill",
        "prefill",
    ),
    ("sglang.*", "forward_decode|process_batch_result_decode|update_running_batch|prepare_for_decode|forward_decode_batch|forward_draft_decode|draft_forward|forward_target_verify", "decode"),
    ("sglang.srt.speculative.*", "draft|verify|_draft_preprocess_decode", "decode"),
    ("sglang.srt.layers.attention.*decode_attention*", "*", "decode"),  # the decode attention kernels
    ("sglang.srt.layers.sampler", "*", "forward"),  # sampling and the logits: the end of every forward step
    ("sglang.srt.layers.logits_processor", "*", "forward"),
    (
        "sglang.*",
        "forward|forward_idle|_forward_raw|forward_batch_generation|forward_batch_speculative_generation|forward_batch_embedding"
        "|run_batch|forward_step|process_batch_result|forward_thread_func|forward_thread_func_|resolve_last_batch_result|resolve_batch_result",
        "forward",
    ),
)

_STDLIB_DIR = re.compile(r"python\d+(?:\.\d+)*")
_ROOTS = ("site-packages", "dist-packages")
_SOURCE_EXT = (".py", ".pyx", ".pxi", ".pyc")


@functools.lru_cache(maxsize=4096)
def module_of(path: str | None) -> str | None:
    """The dotted module a frame's file is (``None`` for ``<string>``, an unnamed path ...)."""
    if not path:
        return None
    p = path.replace("\\", "/")
    if p.startswith("<") and "/" not in p:
        m = re.fullmatch(r"<frozen ([\w.]+)>", p)
        return m.group(1) if m else None
    parts = [x.strip("<>") for x in p.split("/") if x and x != "."]  # (`<site-packages>/...`: a path shortened by hand)
    if not parts or not parts[-1].endswith(_SOURCE_EXT):
        return None
    stem = parts[-1].rsplit(".", 1)[0]
    parts = parts[:-1] + ([] if stem == "__init__" else [stem])
    cut = -1
    for i, x in enumerate(parts):
        if x in _ROOTS or _STDLIB_DIR.fullmatch(x):
            cut = i
    for i in range(len(parts) - 1, cut, -1):  # the last folder named after an SGLang package, a module path after it
        if parts[i] in SGLANG_PACKAGES and all(x.isidentifier() for x in parts[i:]):
            return ".".join(parts[i:])
    rest = parts[cut + 1 :]
    if cut >= 0 and rest and all(x.isidentifier() for x in rest):
        return ".".join(rest)
    return None


def is_sglang(module: str | None) -> bool:
    return bool(module) and module.split(".", 1)[0] in SGLANG_PACKAGES  # type: ignore[union-attr]


def _pattern(glob: str) -> str:
    return "|".join(".*".join(re.escape(piece) for piece in alt.split("*")) for alt in glob.split("|"))


@functools.cache
def _table() -> tuple[re.Pattern[str], tuple[str | None, ...]]:
    """One regex over ``module:function`` (an alternative per row, in order) and each row's phase."""
    for _mod, _funcs, phase in PHASES:
        assert phase is None or phase in ERROR_PHASES, phase
    alts = [f"(?P<r{i}>(?:{_pattern(mod)}):(?:{_pattern(funcs)}))" for i, (mod, funcs, _phase) in enumerate(PHASES)]
    return re.compile("|".join(alts)), tuple(phase for _m, _f, phase in PHASES)


@functools.lru_cache(maxsize=8192)
def frame_phase(module: str | None, function: str) -> str | None:
    """The phase one frame tells (``PHASES``), or None."""
    if not module:
        return None
    rx, phases = _table()
    m = rx.fullmatch(f"{module}:{function}")
    return phases[int(m.lastgroup[1:])] if m and m.lastgroup else None


def _module(frame: Mapping[str, Any]) -> str | None:
    return module_of(frame.get("file"))


def phase_of(stack: Sequence[Mapping[str, Any]]) -> str | None:
    """The phase a call stack (outermost frame first) was in.

    The innermost frame naming a context (distributed init, weight load, KV pool, attention
    backend, graph capture, warm-up, PD transfer, shutdown) wins: a forward pass inside a graph
    capture or a warm-up is that capture or warm-up.  Else a forward pass: its mode is told by
    the outermost frame that names prefill or decode (a speculative verify step runs extend
    kernels inside a decode step), else ``forward``; None when no frame tells.
    """
    phases = [frame_phase(_module(f), str(f.get("function") or "")) for f in stack]
    for p in reversed(phases):
        if p is not None and p not in FORWARD_PHASES:
            return p
    for p in phases:
        if p in ("prefill", "decode"):
            return p
    return "forward" if "forward" in phases else None


def sglang_frame(stack: Sequence[Mapping[str, Any]]) -> dict[str, Any] | None:
    """The innermost of SGLang's frames: ``{module, function, file, line}``."""
    for f in reversed(stack):
        mod = _module(f)
        if is_sglang(mod):
            return {"module": mod, "function": f.get("function") or None, "file": f.get("file"), "line": f.get("line")}
    return None


def sglang_chain(stack: Sequence[Mapping[str, Any]]) -> list[str]:
    """SGLang's frames of a call stack, outermost first, as ``module:function``."""
    out = []
    for f in stack:
        mod = _module(f)
        if is_sglang(mod):
            out.append(f"{mod}:{f.get('function') or '?'}")
    return out


def stitch(stacks: Sequence[Sequence[Mapping[str, Any]]]) -> list[Mapping[str, Any]]:
    """The whole call stack of the first exception of a chain (``stacks``: each exception's own
    frames, oldest exception first).  A chained exception's traceback starts at the frame that
    caught it; the one raised while handling it (or from it) shows the frames above that one."""
    if not stacks:
        return []
    full = list(stacks[-1])
    for own in reversed(stacks[:-1]):
        own = list(own)
        if not own:
            continue  # (an exception printed without frames: it was raised somewhere in the later one's stack)
        top = (own[0].get("file"), own[0].get("function"))
        at = next((i for i in range(len(full) - 1, -1, -1) if (full[i].get("file"), full[i].get("function")) == top), None)
        full = full[:at] + own if at is not None else own
    return full


def describe(stacks: Iterable[Sequence[Mapping[str, Any]]], pending: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """``sglang_frame``, ``sglang_chain`` and ``phase`` of an error from its exceptions' stacks
    (oldest first): read from the first exception's whole stack, the phase from a later one's when
    the first tells none.  ``pending``: a call under way below the innermost frame (a block cut
    before its exception: the call its last source line makes), counted for the phase only."""
    stacks = [list(s) for s in stacks]
    stack = stitch(stacks)
    phase = phase_of(stack + [pending] if pending else stack)
    for later in stacks[1:]:
        if phase is not None:
            break
        phase = phase_of(later)
    return {"sglang_frame": sglang_frame(stack), "sglang_chain": sglang_chain(stack), "phase": phase}
