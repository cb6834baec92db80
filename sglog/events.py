"""Typed events: one class per event kind (= one grammar rule, or one block kind).

An event is one record of the log (one physical line, or a folded block such
as a traceback).  Every event has the common envelope (file, line span,
timestamp, rank, text) and a ``fields`` dict typed by its class's ``FIELDS``
table.  Keys the table does not know are kept (typed by their look), never
dropped.

Units: memory in GB (GiB, as SGLang prints "GB"), time in seconds, usage and
rates as fractions 0..1 (percent values are divided by 100).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

# ---------------------------------------------------------------- rank


RANK_AXES = ("dp", "pp", "attn_cp", "moe_dp", "tp", "ep")
_RANK_TAG = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")


@dataclass(frozen=True, slots=True)
class Rank:
    """A scheduler's rank tags, as an unordered set of axes (``DP0 TP3 EP3``)."""

    dp: int | None = None
    pp: int | None = None
    attn_cp: int | None = None
    moe_dp: int | None = None
    tp: int | None = None
    ep: int | None = None

    @classmethod
    def parse(cls, tags: str | None) -> Rank | None:
        if not tags or not tags.strip():
            return None
        values = {name.lower(): int(num) for name, num in _RANK_TAG.findall(tags)}
        return cls(**values) if values else None

    @property
    def label(self) -> str:
        return " ".join(f"{axis.upper()}{getattr(self, axis)}" for axis in RANK_AXES if getattr(self, axis) is not None)

    def to_dict(self) -> dict[str, int]:
        return {axis: getattr(self, axis) for axis in RANK_AXES if getattr(self, axis) is not None}

    def __str__(self) -> str:
        return self.label


# ---------------------------------------------------------------- value typing

_UNIT_GB = {"b": 1 / 2**30, "bytes": 1 / 2**30, "kb": 1 / 2**20, "kib": 1 / 2**20, "mb": 1 / 1024, "mib": 1 / 1024, "gb": 1.0, "gib": 1.0, "tb": 1024.0, "tib": 1024.0}
_NUM = re.compile(r"^-?\d+(?:\.\d+)?(?:e[+-]?\d+)?$", re.I)
_WITH_UNIT = re.compile(r"^(-?\d+(?:\.\d+)?) ?([A-Za-z]+|%)$")


def to_gb(text: str) -> float | None:
    """'23.56 GB' / '384.00 MiB' / '1024 bytes' / '1.23GB' -> GB (GiB) as float."""
    m = _WITH_UNIT.match(text.strip().rstrip("."))
    if not m:
        return None
    factor = _UNIT_GB.get(m.group(2).lower())
    return None if factor is None else float(m.group(1)) * factor


def guess(text: str) -> Any:
    """Type a value by its look: int, float, bool, None, GB, seconds, percent, list, str."""
    t = text.strip()
    if t.endswith(".") and not t.endswith(".."):
        t = t[:-1]
    if t in ("True", "False"):
        return t == "True"
    if t == "None":
        return None
    if _NUM.match(t):
        return int(t) if re.fullmatch(r"-?\d+", t) else float(t)
    m = _WITH_UNIT.match(t)
    if m:
        unit = m.group(2)
        if unit == "%":
            return float(m.group(1)) / 100.0
        if unit.lower() in _UNIT_GB:
            return float(m.group(1)) * _UNIT_GB[unit.lower()]
        if unit == "s":
            return float(m.group(1))
    if t.startswith("[") and t.endswith("]"):
        inner = t[1:-1].strip()
        if not inner:
            return []
        items = [guess(x) for x in inner.split(",")]
        return items
    if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"":
        return t[1:-1]
    return t


def to_int(text: str) -> int | None:
    v = guess(text)
    return int(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def to_float(text: str) -> float | None:
    v = guess(text)
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def to_bool(text: str) -> bool | None:
    v = guess(text)
    return v if isinstance(v, bool) else None


def to_str(text: str) -> str:
    return text.strip().rstrip(".") if text.strip().endswith(".") and " " not in text.strip() else text.strip()


_KEY_CLEAN = re.compile(r"[^0-9a-z]+")
_KEY_ALIASES = {
    # batch lines
    "gen_throughput_token_s": "gen_throughput",
    "input_throughput_token_s": "input_throughput",
    "npu_graph": "cuda_graph",
    "cpu_graph": "cuda_graph",
    "musa_graph": "cuda_graph",
    "xpu_graph": "cuda_graph",
    "unbootstrapped_req": "bootstrap_req",
    "transferring_req": "inflight_req",
    # weight load / capture
    "time_elapsed": "elapsed",
    "avail_mem": "avail_mem",
    "mem_usage": "mem_usage",
    "k_size": "k_size",
    "v_size": "v_size",
    "kv_size": "kv_size",
    "tokens": "tokens",
}


def normalise_key(key: str) -> str:
    """'#running-req' -> 'running_req'; 'gen throughput (token/s)' -> 'gen_throughput'."""
    k = _KEY_CLEAN.sub("_", key.lower()).strip("_")
    return _KEY_ALIASES.get(k, k)


# ---------------------------------------------------------------- events

KIND_CLASSES: dict[str, type[Event]] = {}


@dataclass
class Event:
    """One record of a log.  ``line``/``end_line`` are 1-based physical lines."""

    kind: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Any]] = {}
    DOC: ClassVar[str] = ""

    file: str
    line: int
    end_line: int
    ts: datetime | None = None
    ts_has_date: bool = True
    rank: Rank | None = None
    text: str = ""
    fields: dict[str, Any] = field(default_factory=dict)

    def __init_subclass__(cls, **kw):
        super().__init_subclass__(**kw)
        if cls.kind:
            KIND_CLASSES[cls.kind] = cls

    def get(self, name: str, default: Any = None) -> Any:
        return self.fields.get(name, default)

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "kind": self.kind,
            "file": self.file,
            "line": self.line,
            "end_line": self.end_line,
            "ts": self.ts.isoformat(sep=" ") if self.ts else None,
            "ts_has_date": self.ts_has_date,
            "rank": self.rank.to_dict() if self.rank else None,
        }
        for k, v in self.fields.items():
            out.setdefault(k, v)
        out["text"] = self.text
        return out

    @classmethod
    def typed(cls, pairs: list[tuple[str, str]]) -> dict[str, Any]:
        """Type raw (key, value) pairs with the class table; unknown keys by their look."""
        out: dict[str, Any] = {}
        for raw_key, raw_value in pairs:
            key = normalise_key(raw_key)
            conv = cls.FIELDS.get(key)
            if key == "new_token_ratio" and "->" in raw_value:
                a, _, b = raw_value.partition("->")
                out["new_token_ratio_before"] = to_float(a)
                out["new_token_ratio"] = to_float(b)
                continue
            value = conv(raw_value) if conv else guess(raw_value)
            out[key] = value
        return out


def _k(**fields):
    return fields


# --- SGLang events -----------------------------------------------------------


class ServerArgs(Event):
    kind = "server_args"
    DOC = "The launch arguments in effect (dataclass repr <=0.5.18, dict repr >=0.5.19)."


class WeightLoadBegin(Event):
    kind = "weight_load_begin"
    FIELDS = _k(avail_mem=to_gb)
    DOC = "A model runner starts loading weights (again for a speculative draft model)."


class WeightLoadEnd(Event):
    kind = "weight_load_end"
    FIELDS = _k(elapsed=to_float, type=to_str, dtype=to_str, quant=to_str, avail_mem=to_gb, mem_usage=to_gb)
    DOC = "Weights loaded: model class, dtype/quant, elapsed s, free memory and weight memory (GB)."


class WeightLoadCommitted(Event):
    kind = "weight_load_committed"
    DOC = "0.5.18+ overlapped load: real weights committed after CUDA graph capture."


class KvCacheAllocated(Event):
    kind = "kv_cache_allocated"
    FIELDS = _k(tokens=to_int, k_size=to_gb, v_size=to_gb, kv_size=to_gb, dtype=to_str, avail_mem=to_gb)
    DOC = "KV pool allocated: #tokens, K/V size (MHA) or KV size (MLA), in GB."


class MemoryPoolEnd(Event):
    kind = "memory_pool_end"
    FIELDS = _k(avail_mem=to_gb)
    DOC = "Memory pools are set up; free GPU memory left."


class MemorySummary(Event):
    kind = "memory_summary"
    FIELDS = _k(
        max_total_num_tokens=to_int,
        chunked_prefill_size=to_int,
        max_prefill_tokens=to_int,
        max_running_requests=to_int,
        context_len=to_int,
        available_gpu_mem=to_gb,
        available_cpu_mem=to_gb,
    )
    DOC = "The scheduler's capacity summary printed when a rank is ready."


class CudaGraphCaptureBegin(Event):
    kind = "cuda_graph_capture_begin"
    FIELDS = _k(avail_mem=to_gb, bs=guess, num_tokens=guess, backend=to_str)
    DOC = "CUDA (or NPU/CPU) graph capture starts: role (target/draft), stage (decode/verify/extend/prefill/piecewise)."


class CudaGraphCaptureEnd(Event):
    kind = "cuda_graph_capture_end"
    FIELDS = _k(elapsed=to_float, mem_usage=to_gb, avail_mem=to_gb, bs=guess)
    DOC = "Graph capture finished: elapsed s, graph memory and free memory (GB)."


class CudaGraphBs(Event):
    kind = "cuda_graph_bs"
    DOC = "The list of batch sizes (or token counts, piecewise) being captured."


_BATCH_FIELDS = _k(
    new_seq=to_int,
    new_token=to_int,
    cached_token=to_int,
    cache_hit_rate=to_float,
    token_usage=to_float,
    full_token_usage=to_float,
    swa_token_usage=to_float,
    mamba_usage=to_float,
    running_req=to_int,
    queue_req=to_int,
    pending_token=to_int,
    token=to_int,
    full_token=to_int,
    swa_token=to_int,
    mamba_num=to_int,
    accept_len=to_float,
    accept_rate=to_float,
    cuda_graph=to_bool,
    gen_throughput=to_float,
    input_throughput=to_float,
    pre_allocated_usage=to_float,
    prealloc_req=to_int,
    transfer_req=to_int,
    retracted_req=to_int,
    inflight_req=to_int,
    bootstrap_req=to_int,
)


class PrefillBatch(Event):
    kind = "prefill_batch"
    FIELDS = _BATCH_FIELDS
    DOC = "One scheduled prefill batch: new/cached tokens, usage, running/queue, input throughput."


class DecodeBatch(Event):
    kind = "decode_batch"
    FIELDS = _BATCH_FIELDS
    DOC = "Decode statistics every decode_log_interval steps: running, usage, accept len/rate, cuda graph, gen throughput."


class Retraction(Event):
    kind = "retraction"
    FIELDS = _k(retracted_reqs=to_int, new_tokens_gained=to_int, aborted_retracted_reqs=to_int)
    DOC = "KV pool full: requests retracted (`KV cache pool is full. Retract requests.` / `Decode out of memory happened.`)."


class BatchOom(Event):
    kind = "batch_oom"
    DOC = "Prefill/Decode out of memory while allocating KV slots for a batch."


class ServerReady(Event):
    kind = "server_ready"
    DOC = "`The server is fired up and ready to roll!`"


class InitDistBegin(Event):
    kind = "init_dist_begin"
    DOC = "Distributed (torch/NCCL) initialisation starts on a rank."


class InitDistEnd(Event):
    kind = "init_dist_end"
    FIELDS = _k(elapsed=to_float, mem_usage=to_gb)
    DOC = "Distributed initialisation done on a rank."


class MemoryBaseline(Event):
    kind = "memory_baseline"
    FIELDS = _k(mem_usage=to_gb)
    DOC = "0.5.21+: memory baseline after parallel init."


class Sigquit(Event):
    kind = "sigquit"
    DOC = "The main process was told a child failed (a pointer to a crash, not its cause)."


class Shutdown(Event):
    kind = "shutdown"
    DOC = "SIGTERM / graceful exit / process-tree kill."


class SchedulerDead(Event):
    kind = "scheduler_dead"
    DOC = "A scheduler process died or exited (`Rank N scheduler is dead`, `terminated with N`)."


class WatchdogTimeout(Event):
    kind = "watchdog_timeout"
    DOC = "The scheduler's watchdog fired: one forward batch took longer than --watchdog-timeout."


# --- lines of other programs ---------------------------------------------------


class HttpAccess(Event):
    kind = "http_access"
    DOC = "uvicorn access line: client, method, path, status."


class UvicornLog(Event):
    kind = "uvicorn_log"
    DOC = "uvicorn's own lines (`Started server process`, `Uvicorn running on ...`, errors)."


class NcclLog(Event):
    kind = "nccl_log"
    DOC = "NCCL / NVSHMEM library line (`host:pid:tid [dev] NCCL WARN ...`)."


class TorchLog(Event):
    kind = "torch_log"
    DOC = "PyTorch C++ logging (`[rank0]:[W207 ...] ...`, c10d, ProcessGroupNCCL watchdog)."


class Glog(Event):
    kind = "glog"
    DOC = "Google-logging line (mooncake transfer engine and other C++ libraries)."


class Gloo(Event):
    kind = "gloo"
    DOC = "Gloo rendezvous: `[Gloo] Rank N is connected to M peer ranks`."


class VllmLog(Event):
    kind = "vllm_log"
    DOC = "vLLM's logger, used inside SGLang 0.2-0.4 (`WARNING 09-02 10:15:06 config.py:1] ...`)."


class Progress(Event):
    kind = "progress"
    DOC = "A tqdm progress bar (weight shards, CUDA graph capture, benchmark)."


class PythonWarning(Event):
    kind = "python_warning"
    DOC = "Python `warnings.warn` output (`file.py:N: UserWarning: ...` and its source line)."


class ProcessKilled(Event):
    kind = "process_killed"
    DOC = "The shell's `Killed` (the process got SIGKILL, often the OOM killer)."


class LaunchCommand(Event):
    kind = "launch_command"
    DOC = "The launch command line (`python -m sglang.launch_server ...` / `sglang serve ...`)."


class PipPackage(Event):
    kind = "pip_package"
    DOC = "A `pip list` row: package and version."


# --- blocks (folded multi-line records) -------------------------------------------


class Traceback(Event):
    kind = "traceback"
    DOC = "A Python traceback (exception type, message, frames, chained exceptions)."


class SchedulerException(Event):
    kind = "scheduler_exception"
    DOC = "`Scheduler hit an exception:` (or another component's) traceback."


class Oom(Event):
    kind = "oom"
    DOC = "A CUDA out-of-memory error (torch OutOfMemoryError) with tried/capacity/free in GB."


class FatalError(Event):
    kind = "fatal_error"
    DOC = "`Fatal Python error:` with its thread dump (a hard crash: abort, segfault)."


class CppException(Event):
    kind = "cpp_exception"
    DOC = "`terminate called after throwing an instance of ...` with `what():` and C++ frames."


class Blank(Event):
    kind = "blank"
    DOC = "One or more blank lines."


class Unparsed(Event):
    kind = "unparsed"
    DOC = "A record no grammar rule recognises; its text is kept."


BLOCK_KINDS = ("traceback", "scheduler_exception", "oom", "fatal_error", "cpp_exception")
SPECIAL_KINDS = ("blank", "unparsed")
HOT_KINDS = ("decode_batch", "prefill_batch", "http_access")


def make(kind: str, **kw) -> Event:
    return KIND_CLASSES[kind](**kw)
