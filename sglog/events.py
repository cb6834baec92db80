"""Typed events: one class per event kind (= one grammar rule, or one block kind).

An event is one record of the log (one physical line, or a folded block such
as a traceback).  Every event has the common envelope (file, line span,
timestamp, rank, text) and a ``fields`` dict typed by its class's ``FIELDS``
table.  Keys the table does not know are kept (typed by their look), never
dropped.  A class's ``TERMS`` table names the capture groups of the grammar
terminals that spell its sentences (in order) and adds constant fields, e.g.
which variant of the kind matched (``variant``, ``stage``, ``scope`` ...).

Units: memory in GB (GiB, as SGLang prints "GB"), time in seconds, usage and
rates as fractions 0..1 (percent values are divided by 100).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, ClassVar

# ---------------------------------------------------------------- rank


RANK_AXES = ("dp", "pp", "attn_cp", "moe_dp", "tp", "ep")
_RANK_TAG = re.compile(r"(DP|PP|ATTN_CP|MOE_DP|TP|EP)(\d+)")


@dataclass(frozen=True)
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

    @functools.cached_property
    def label(self) -> str:  # (cached: a log has a few distinct ranks and asks for their labels ~100k times)
        return " ".join(f"{axis.upper()}{value}" for axis, value in self.to_dict().items())

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
        if re.fullmatch(r"-?\d+", t):
            return _in_range(int(t)) if len(t) <= 20 else None  # (int() refuses 4,300 digits or more)
        return _in_range(float(t))
    m = _WITH_UNIT.match(t)
    if m:
        unit = m.group(2)
        if unit == "%":
            return round(float(m.group(1)) / 100.0, 10)
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


_INT64 = 1 << 63


def _in_range(v: int | float) -> int | float | None:
    """A number a frame column can hold (int64, a finite float), else None: out-of-range values
    become null and the line is kept (#28: a 20-digit rank, 1e400)."""
    if isinstance(v, float):
        return v if math.isfinite(v) else None
    return v if -_INT64 <= v < _INT64 else None


def to_int(text: str) -> int | None:
    v = guess(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    if isinstance(v, float) and not (math.isfinite(v) and -_INT64 <= v < _INT64):
        return None  # (1e308 in an integer field)
    return int(v)


def to_float(text: str) -> float | None:
    v = guess(text)
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        return None
    f = float(v)
    return f if math.isfinite(f) else None


def to_bool(text: str) -> bool | None:
    v = guess(text)
    return v if isinstance(v, bool) else None


def to_str(text: str) -> str:
    return text.strip().rstrip(".") if text.strip().endswith(".") and " " not in text.strip() else text.strip()


def to_lower(text: str) -> str:
    return text.strip().lower()


def to_snake(text: str) -> str:
    """'torch distributed' -> 'torch_distributed'."""
    return re.sub(r"[^0-9a-z]+", "_", text.strip().lower()).strip("_")


def to_fraction(text: str) -> float | None:
    """'87.20%' -> 0.872; a plain number stays as it is (typed by its look)."""
    return to_float(text)


def to_literal(text: str) -> Any:
    """A Python literal (dict, list, set, tuple, str, number) -> Python value; sets become sorted lists."""
    import ast

    try:
        v = ast.literal_eval(text.strip())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return guess(text)
    if isinstance(v, (set, frozenset)):
        return sorted(v, key=str)
    if isinstance(v, tuple):
        return list(v)
    return v


_KV_PAIR = re.compile(r"([A-Za-z_][\w.]*)=('[^']*'|\[[^\]]*\]|[^,\s]+)")


def to_kv_dict(text: str) -> dict[str, Any]:
    """'a=1, b=x' or 'a=1 b=True' -> {'a': 1, 'b': 'x'} (values typed by their look)."""
    return {k: guess(v) for k, v in _KV_PAIR.findall(text)}


def to_flag(text: str) -> bool:
    """An optional piece of text that is there: True."""
    return True


_COMPONENT = re.compile(r"<\w+\.(\w+): \d+>")


def to_components(text: str) -> list[str]:
    """'<ComponentType.FULL: 0>, <ComponentType.SWA: 1>' -> ['FULL', 'SWA']."""
    return _COMPONENT.findall(text)


def percent_to_fraction(text: str) -> float | None:
    """'33' (a percentage without its sign, e.g. pytest's `[ 33%]`) -> 0.33."""
    v = to_float(text)
    return None if v is None else round(v / 100.0, 10)


def mib_to_gb(text: str) -> float | None:
    v = to_float(text)
    return None if v is None else v / 1024.0


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


class _Compact(type):
    """The event classes' metaclass: a subclass (one per kind) adds no instance fields, so it gets
    an empty ``__slots__``, and an event is one compact object with no dict of its own.  A
    multi-hour log has tens of thousands of events that the reading makes and every rule walks:
    slots make both cheaper (#7)."""

    def __new__(mcls, name: str, bases: tuple[type, ...], ns: dict[str, Any], **kw: Any) -> _Compact:
        if bases:
            ns.setdefault("__slots__", ())
        return super().__new__(mcls, name, bases, ns, **kw)


@dataclass(slots=True)
class Event(metaclass=_Compact):
    """One record of a log.  ``line``/``end_line`` are 1-based physical lines."""

    kind: ClassVar[str] = ""
    FIELDS: ClassVar[dict[str, Callable[[str], Any]]] = {}
    # terminal name -> (field names of its capture groups, in order; constant fields)
    TERMS: ClassVar[dict[str, tuple[tuple[str | None, ...], dict[str, Any]]]] = {}
    DOC: ClassVar[str] = ""
    # who wrote the record: "sglang" (its own messages), "third_party" (another program's
    # output of a known shape: NCCL, torch, tqdm, pip, a shell ...: never evidence that a log is
    # SGLang's), "block" (a folded block -- traceback, thread dump -- whose origin its content
    # tells: its frames' paths), "catalogue" (an SGLang message the message catalogue names, not
    # the grammar: sglang_message and the named kinds); the one table coverage accounting reads
    SOURCE: ClassVar[str] = "sglang"
    # a kind only SGLang writes: one such event is evidence that a log is SGLang's (sglog/read/evidence.py)
    SGLANG_ONLY: ClassVar[bool] = False

    file: str
    line: int
    end_line: int
    ts: datetime | None = None
    ts_has_date: bool = True
    rank: Rank | None = None
    text: str = ""
    fields: dict[str, Any] = field(default_factory=dict)

    def __init_subclass__(cls, **kw: Any) -> None:
        super(Event, cls).__init_subclass__(**kw)  # (not super(): dataclass(slots=True) made a new class)
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


def _k(**fields: Callable[[str], Any]) -> dict[str, Callable[[str], Any]]:
    return fields


def _t(*names: str | None, **consts: Any) -> tuple[tuple[str | None, ...], dict[str, Any]]:
    """One TERMS entry: the names of a terminal's capture groups, and constant fields.

    A name starting with ``*`` merges its (dict) value into the fields; ``None`` skips a group.
    """
    return names, consts


# --- SGLang events -----------------------------------------------------------


class ServerArgs(Event):
    kind = "server_args"
    SGLANG_ONLY = True
    DOC = "The launch arguments in effect (dataclass repr <=0.5.18, dict repr >=0.5.19)."


class WeightLoadBegin(Event):
    kind = "weight_load_begin"
    SGLANG_ONLY = True
    FIELDS = _k(avail_mem=to_gb)
    DOC = "A model runner starts loading weights (again for a speculative draft model)."


class WeightLoadEnd(Event):
    kind = "weight_load_end"
    SGLANG_ONLY = True
    FIELDS = _k(elapsed=to_float, type=to_str, dtype=to_str, quant=to_str, avail_mem=to_gb, mem_usage=to_gb)
    DOC = "Weights loaded: model class, dtype/quant, elapsed s, free memory and weight memory (GB)."


class WeightLoadCommitted(Event):
    kind = "weight_load_committed"
    SGLANG_ONLY = True
    DOC = "0.5.18+ overlapped load: real weights committed after CUDA graph capture."


class KvCacheAllocated(Event):
    kind = "kv_cache_allocated"
    SGLANG_ONLY = True
    FIELDS = _k(
        tokens=to_int,
        k_size=to_gb,
        v_size=to_gb,
        kv_size=to_gb,
        dtype=to_str,
        avail_mem=to_gb,
        max_mamba_cache_size=to_int,
        conv_state_size=to_gb,
        ssm_state_size=to_gb,
        intermediate_ssm_state_cache_size=to_gb,
        intermediate_conv_window_cache_size=to_gb,
    )
    TERMS = {
        "MAMBA_CACHE": _t(
            "max_mamba_cache_size",
            "conv_state_size",
            "ssm_state_size",
            "intermediate_ssm_state_cache_size",
            "intermediate_conv_window_cache_size",
            cache="Mamba Cache",
            post_capture=False,
            va_upper_bound=False,
        )
    }
    DOC = (
        "KV pool allocated: #tokens, K/V size (MHA) or KV size (MLA), in GB; `cache` names the pool "
        "(`KV Cache`, `SWA KV Cache`, `Mamba Cache`, ...), `va_upper_bound` (0.5.18+ post-capture mode) "
        "and `post_capture` (the pool re-sized after CUDA graph capture)."
    )


class MemoryPoolEnd(Event):
    kind = "memory_pool_end"
    SGLANG_ONLY = True
    FIELDS = _k(avail_mem=to_gb)
    DOC = "Memory pools are set up; free GPU memory left."


class MemorySummary(Event):
    kind = "memory_summary"
    SGLANG_ONLY = True
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
    SGLANG_ONLY = True
    FIELDS = _k(avail_mem=to_gb, bs=guess, num_tokens=guess, backend=to_str)
    DOC = "CUDA (or NPU/CPU) graph capture starts: role (target/draft), stage (decode/verify/extend/prefill/piecewise)."


class CudaGraphCaptureEnd(Event):
    kind = "cuda_graph_capture_end"
    SGLANG_ONLY = True
    FIELDS = _k(elapsed=to_float, mem_usage=to_gb, avail_mem=to_gb, bs=guess)
    DOC = "Graph capture finished: elapsed s, graph memory and free memory (GB)."


class CudaGraphBs(Event):
    kind = "cuda_graph_bs"
    SGLANG_ONLY = True
    DOC = "The list of batch sizes (or token counts, piecewise) being captured."


class CudaGraphAddresses(Event):
    kind = "cuda_graph_addresses"
    FIELDS = _k(count=to_int)
    TERMS = {"CUDA_GRAPH_ADDRESSES": _t("count")}
    DOC = "Piecewise CUDA graph: number of tensor addresses registered for the graphs."


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
    optimistic_req=to_int,
    host_receive_req=to_int,
    waiting_image_req=to_int,
    replay_token=to_int,
    largest_len=to_int,
    time=to_float,
    cap_len=to_float,
    block_accept_len=to_float,
    gpu_token=to_int,
    gpu_token_usage=to_float,
    cpu_token=to_int,
    cpu_token_usage=to_float,
    # percent suffixes (typed by their look: '87.20%' -> 0.872)
    fwd_occupancy=to_fraction,
    fwd_idle_occupancy=to_fraction,
    est_prefill_tflops_s_per_gpu=to_float,
    est_decode_tflops_s_per_gpu=to_float,
    est_read_bw_gb_s_per_gpu=to_float,
    est_write_bw_gb_s_per_gpu=to_float,
)


class PrefillBatch(Event):
    kind = "prefill_batch"
    SGLANG_ONLY = True
    FIELDS = _BATCH_FIELDS
    DOC = "One scheduled prefill batch: new/cached tokens, usage, running/queue, input throughput."


class DecodeBatch(Event):
    kind = "decode_batch"
    SGLANG_ONLY = True
    FIELDS = _BATCH_FIELDS
    DOC = "Decode statistics every decode_log_interval steps: running, usage, accept len/rate, cuda graph, gen throughput."


class Retraction(Event):
    kind = "retraction"
    SGLANG_ONLY = True
    FIELDS = _k(
        retracted_reqs=to_int,
        new_tokens_gained=to_int,
        aborted_retracted_reqs=to_int,
        mamba_num_gained=to_int,
        aborted_rid=to_str,
        reason=to_str,
    )
    TERMS = {
        "RETRACT_ABORT_OOM": _t("aborted_rid", testing=False, reason="OOM"),
        "RETRACT_ABORT": _t("aborted_rid", "reason", testing=False),
    }
    DOC = "KV pool full: requests retracted (`KV cache pool is full. Retract requests.` / `Decode out of memory happened.`)."


class BatchOom(Event):
    kind = "batch_oom"
    SGLANG_ONLY = True
    DOC = "Prefill/Decode out of memory while allocating KV slots for a batch."


class ServerReady(Event):
    kind = "server_ready"
    SGLANG_ONLY = True
    DOC = "`The server is fired up and ready to roll!`"


class InitDistBegin(Event):
    kind = "init_dist_begin"
    SGLANG_ONLY = True
    FIELDS = _k(phase=to_snake)
    TERMS = {"INIT_BEGIN": _t("phase")}
    DOC = "Distributed (torch/NCCL) initialisation starts on a rank."


class InitDistEnd(Event):
    kind = "init_dist_end"
    SGLANG_ONLY = True
    FIELDS = _k(phase=to_snake, elapsed=to_float, mem_usage=to_gb)
    TERMS = {"INIT_END": _t("phase")}
    DOC = "Distributed initialisation done on a rank."


class MemoryBaseline(Event):
    kind = "memory_baseline"
    SGLANG_ONLY = True
    FIELDS = _k(mem_usage=to_gb)
    DOC = "0.5.21+: memory baseline after parallel init."


class Sigquit(Event):
    kind = "sigquit"
    SGLANG_ONLY = True
    FIELDS = _k(signum=guess, frame=guess, subprocess=to_str, pid=to_int, exit_code=to_int)
    TERMS = {
        "SQ_CHILD": _t(variant="child_failed"),
        "SQ_SIGNAL": _t("signum", "frame", variant="signal"),
        "SQ_SUBPROCESS": _t("subprocess", "pid", "exit_code", variant="subprocess_crashed"),
    }
    DOC = "The main process was told a child failed (a pointer to a crash, not its cause)."


class SigquitHandler(Event):
    kind = "sigquit_handler"
    FIELDS = _k(handler=to_str)
    TERMS = {"SQ_HANDLER": _t("handler")}
    DOC = "0.5.7+: a custom SIGQUIT handler is installed (configuration, not a failure)."


class Shutdown(Event):
    kind = "shutdown"
    FIELDS = _k(
        signum=guess,
        frame=guess,
        remaining_requests=to_int,
        remaining_rids=to_literal,
        parent_pid=to_int,
        include_parent=to_bool,
        pid=to_int,
        alive=to_int,
        after_s=to_float,
        wait_s=to_float,
        pids=to_literal,
    )
    TERMS = {
        "SD_SIGTERM": _t("signum", "frame", variant="sigterm"),
        "SD_GRACEFUL": _t("remaining_requests", "remaining_rids", variant="graceful_exit"),
        "SD_FORCE": _t("remaining_requests", variant="force_exit"),
        "SD_KILL_TREE": _t("parent_pid", "include_parent", "pid", variant="kill_process_tree"),
        "SD_KILL_WAIT": _t("alive", "after_s", "wait_s", "pids", variant="kill_process_tree_waiting"),
    }
    DOC = "SIGTERM / graceful exit / process-tree kill (`variant` says which)."


class SchedulerDead(Event):
    kind = "scheduler_dead"
    SGLANG_ONLY = True
    DOC = "A scheduler process died or exited (`Rank N scheduler is dead`, `terminated with N`)."


class WatchdogTimeout(Event):
    kind = "watchdog_timeout"
    SGLANG_ONLY = True
    DOC = "The scheduler's watchdog fired: one forward batch took longer than --watchdog-timeout."


class HealthCheckFailed(Event):
    kind = "health_check_failed"
    FIELDS = _k(timeout=to_int, tic_time=guess, last_heartbeat=guess)
    TERMS = {"HEALTH_CHECK_FAILED": _t("timeout", "tic_time", "last_heartbeat")}
    DOC = "The HTTP server got no response from the detokenizer within the health-check timeout (s)."


_META_NUMBER = re.compile(r"""['"](\w+)['"]: (-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)(?=[,}\s])""")
# the numbers of a finished request's `meta_info` that sglog reads (SGLang's tokenizer manager;
# the timestamps and queue_time only with --enable-metrics)
_META_KEYS = frozenset({"prompt_tokens", "completion_tokens", "cached_tokens", "e2e_latency", "ttft", "time_to_first_token", "queue_time", "request_received_ts", "prefill_finished_ts"})


def to_request_meta(text: str) -> dict[str, Any]:
    """The numbers of a finished request's `meta_info` (`'e2e_latency': 1.23`, ...), and its time
    to first token in seconds as `ttft`: printed (`ttft`, `time_to_first_token`), else
    `prefill_finished_ts - request_received_ts`.  The last `meta_info` of the line is the output's
    (the request object, printed first, may quote anything)."""
    at = text.rfind("meta_info")
    if at < 0:
        return {}
    out: dict[str, Any] = {}
    for key, value in _META_NUMBER.findall(text[at:]):
        if key in _META_KEYS and key not in out:
            v = to_float(value)
            if v is not None:
                out[key] = int(v) if key.endswith("_tokens") and v.is_integer() else v
    ttft = out.get("ttft", out.get("time_to_first_token"))
    if ttft is None and out.get("prefill_finished_ts") is not None and out.get("request_received_ts") is not None:
        ttft = out["prefill_finished_ts"] - out["request_received_ts"]
    if ttft is not None and ttft >= 0:
        out["ttft"] = round(ttft, 6)
    return out


class RequestLog(Event):
    kind = "request_log"
    FIELDS = _k(obj_type=to_str, log_ts=to_str, meta=to_request_meta)
    TERMS = {
        "REQ_RECEIVE": _t("obj_type", None, event="received", format="text"),
        "REQ_FINISH": _t("obj_type", "*meta", event="finished", format="text"),
        "REQ_JSON": _t("log_ts", "event", "*meta", format="json"),
    }
    DOC = "`--log-requests` lines: a request received / finished (`rid` when printed; a finished one's `meta_info` numbers: `e2e_latency`, token counts, `ttft` s)."


class LongGc(Event):
    kind = "long_gc"
    FIELDS = _k(generation=to_int, duration_s=to_float, gen0=to_int, gen1=to_int, gen2=to_int)
    TERMS = {"LONG_GC": _t("generation", "duration_s", "gen0", "gen1", "gen2")}
    DOC = "0.5.1.post3+: a long Python garbage collection pause (latency jitter)."


class CrashDiagnostics(Event):
    kind = "crash_diagnostics"
    FIELDS = _k(sleep_s=to_int, folder=guess)
    TERMS = {
        "CD_SLEEP": _t("sleep_s", action="sleep"),
        "CD_NO_SCHEDULER": _t(action="skipped_no_scheduler"),
        "CD_DUMP": _t("folder", action="dump_requests"),
    }
    DOC = "Crash handling: dumping requests, py-spy / CUDA core dump collection (`action`)."


# --- lines of other programs ---------------------------------------------------


class HttpAccess(Event):
    kind = "http_access"
    SOURCE = "third_party"
    DOC = "uvicorn access line: client, method, path, status."


class AiohttpAccess(Event):
    kind = "aiohttp_access"
    FIELDS = _k(client=to_str, time=to_str, method=to_str, path=to_str, http_version=to_str, status=to_int, size=to_int, referer=to_str, user_agent=to_str)
    TERMS = {"AIOHTTP_ACCESS": _t("client", "time", "method", "path", "http_version", "status", "size", "referer", "user_agent")}
    SOURCE = "third_party"
    DOC = "aiohttp's access log line (PD bootstrap server, mooncake metadata server): client, method, path, status, size."


class UvicornLog(Event):
    kind = "uvicorn_log"
    SOURCE = "third_party"
    DOC = "uvicorn's own lines (`Started server process`, `Uvicorn running on ...`, errors)."


class NcclLog(Event):
    kind = "nccl_log"
    SOURCE = "third_party"
    DOC = "NCCL / NVSHMEM library line (`host:pid:tid [dev] NCCL WARN ...`, or NVSHMEM's `/.../init.cu:1045: ...` error prints)."


class TorchLog(Event):
    kind = "torch_log"
    SOURCE = "third_party"
    DOC = (
        "PyTorch C++ logging (`[rank0]:[W207 ...] ...`, c10d, ProcessGroupNCCL watchdog); the watchdog's lines "
        "carry `collective` ({op_type, seq_num, timeout_ms, ran_ms, numel_in, numel_out, rank, pg, last_enqueued, "
        "last_completed, timeout}: what is present), read as in the error blocks."
    )


class Glog(Event):
    kind = "glog"
    SOURCE = "third_party"
    DOC = "Google-logging line (mooncake transfer engine and other C++ libraries), incl. `WARNING: Logging before InitGoogleLogging()`."


class Gloo(Event):
    kind = "gloo"
    SOURCE = "third_party"
    DOC = "Gloo rendezvous: `[Gloo] Rank N is connected to M peer ranks`."


class VllmLog(Event):
    kind = "vllm_log"
    SOURCE = "third_party"
    DOC = "vLLM's logger, used inside SGLang 0.2-0.4 (`WARNING 09-02 10:15:06 config.py:1] ...`)."


class Progress(Event):
    kind = "progress"
    SOURCE = "third_party"
    DOC = "A tqdm progress bar (weight shards, CUDA graph capture, benchmark)."


class PythonWarning(Event):
    kind = "python_warning"
    SOURCE = "third_party"
    DOC = "Python `warnings.warn` output (`file.py:N: UserWarning: ...` and its source line)."


class ProcessKilled(Event):
    kind = "process_killed"
    SOURCE = "third_party"
    DOC = "The shell's `Killed` (the process got SIGKILL, often the OOM killer)."


class LaunchCommand(Event):
    kind = "launch_command"
    SGLANG_ONLY = True
    DOC = "The launch command line (`python -m sglang.launch_server ...` / `sglang serve ...`)."


class PipPackage(Event):
    kind = "pip_package"
    FIELDS = _k(requirement=to_str, required_by=to_str, file=to_str, size=to_str, location=to_str, packages=str.split, detail=to_str, level=to_str, message=to_str)
    TERMS = {
        "PIP_COLLECTING": _t("requirement", "required_by", event="collecting"),
        "PIP_DOWNLOADING": _t("file", "size", event="downloading"),
        "PIP_SATISFIED": _t("requirement", "location", event="already_satisfied"),
        "PIP_INSTALLING": _t("packages", event="installing"),
        "PIP_INSTALLED": _t("event", "packages"),
        "PIP_UNINSTALL": _t("requirement", event="uninstalling"),
        "PIP_BUILD": _t("detail", event="building"),
        "PIP_NOTICE": _t("level", "message", event="notice"),
    }
    SOURCE = "third_party"
    DOC = (
        "pip's output: a `pip list` row (`package`, `version`), or a line of `pip install` (`event`: "
        "collecting, downloading, already_satisfied, installing, installed, uninstalled, built, "
        "uninstalling, building, notice)."
    )


class NativeBacktrace(Event):
    kind = "native_backtrace"
    SOURCE = "third_party"
    DOC = (
        "A native crash report (UCX's `Caught signal 11 (Segmentation fault: ...)` and `==== backtrace ====`, "
        "glog's `*** SIGSEGV ... received by PID`, glibc's `*** Error in ...` / `======= Backtrace: =========`): "
        "`signal`, `reason`, `frames` (library, symbol, address); `fragment` when the excerpt starts inside it; "
        "`rank` / `rank_from` as the error blocks (`sglang_frame`, `sglang_chain`, `phase` empty)."
    )


class UcxLog(Event):
    kind = "ucx_log"
    SOURCE = "third_party"
    DOC = "UCX's logger (`[1700000000.123456] [host:pid:0]  ucp_worker.c:1543 UCX  ERROR ...`): level, source file, message."


class ShellPrompt(Event):
    kind = "shell_prompt"
    FIELDS = _k(venv=to_str, user=to_str, host=to_str, cwd=to_str, command=to_str)
    TERMS = {"SHELL_PROMPT": _t("venv", "user", "host", "cwd", "user", "host", "cwd", "command")}
    SOURCE = "third_party"
    DOC = "A shell prompt pasted with its command (`$ cmd`, `user@host:~$ cmd`, `(venv) root@host:/p# cmd`, `[user@host dir]$ cmd`)."


class EnvVar(Event):
    kind = "env_var"
    FIELDS = _k(name=to_str, value=str)
    TERMS = {"VAR_ASSIGN": _t("name", "value")}
    SOURCE = "third_party"
    DOC = "A line of an environment dump (`NAME=value`, UPPER_SNAKE names; `export`/`declare -x` forms): `name`, `value` (as printed)."


class LibraryLog(Event):
    kind = "library_log"
    FIELDS = _k(level=to_str, message=to_str, module=to_str, original=to_str, log_ts=to_str, logger=to_str, library=to_str, template=to_str, source=to_str, versions=to_str, origin=to_str)
    TERMS = {
        "LIB_TRANSFORMERS": _t("message", library="transformers"),
        "LIB_TRANSFORMERS_MODULE_NAME": _t("message", "module", "original", library="transformers", level="WARNING"),
        "LIB_HF_HUB": _t("message", library="huggingface_hub", level="WARNING"),
        "LIB_LMCACHE": _t("level", "message", library="lmcache"),
        "LIB_FLASHINFER": _t("logger", "message", library="flashinfer"),
        "LIB_PDLB": _t("log_ts", "level", "message", library="sglang_pd_mini_lb"),
    }
    SOURCE = "third_party"
    DOC = (
        "A line of a library running in the server (`[transformers] ...`, huggingface_hub warnings, `LMCache INFO: ...`, "
        "`flashinfer.jit: Loading JIT ops: ...`): `library`, `level`, `message`.  A message the catalogue names from a library's "
        "source (uvicorn, rpyc, huggingface-hub, transformers, flashinfer: tools/catalog/mine.py LIBRARIES) also carries "
        "`template`, `source` (module:line in the library), `versions` (its first-last release mined), `origin` and one field per placeholder."
    )


class RocmLog(Event):
    kind = "rocm_log"
    FIELDS = _k(source=to_str, source_line=to_int, time_us=to_int, message=to_str, status=to_int, error=to_str)
    TERMS = {
        "ROCM_CALLBACK": _t("source", "source_line", "time_us", "message", event="callback"),
        "ROCM_CORE_DUMP_FAILED": _t(event="core_dump_failed"),
        "ROCM_COREDUMP_HANDLER": _t("status", event="coredump_handler_error"),
        "ROCM_QUEUES_SNAPSHOT": _t(event="queues_snapshot_failed"),
        "ROCM_SEGMENT_PIPE": _t("error", event="segment_write_failed"),
    }
    SOURCE = "third_party"
    DOC = "ROCm runtime lines (`:0:rocdevice.cpp :3586: ... HSA_STATUS_ERROR_EXCEPTION ...`) and its GPU core dump."


class BrowserAgentLog(Event):
    kind = "browser_agent_log"
    FIELDS = _k(url=to_str)
    TERMS = {
        "BA_CALL_LOG": _t(source="playwright"),
        "BA_NAVIGATED": _t("url", source="browser_use"),
    }
    SOURCE = "third_party"
    DOC = "Agent frameworks driving SGLang in the same log: Playwright `Call log:` blocks, browser-use navigation lines."


class BenchDriver(Event):
    kind = "bench_driver"
    FIELDS = _k(
        params=to_literal,
        run=to_int,
        runs=to_int,
        path=to_str,
        version=to_str,
        command=to_str,
        input_tokens=to_int,
        output_tokens=to_int,
        warmup_seqs=to_int,
        metric=to_str,
        value=guess,
        title=to_str,
    )
    TERMS = {
        "BD_START": _t("params", event="start"),
        "BD_RUNNING": _t("run", "runs", event="run"),
        "BD_METRICS_FILE": _t("path", event="metrics_file"),
        "BD_CANN": _t("version", event="cann_version"),
        "BD_COMMAND": _t("command", event="command"),
        "BD_NAMESPACE": _t(event="args"),
        "BD_INPUT_TOKENS": _t("input_tokens", event="dataset"),
        "BD_OUTPUT_TOKENS": _t("output_tokens", event="dataset"),
        "BD_WARMUP_START": _t("warmup_seqs", event="warmup_start"),
        "BD_WARMUP_DONE": _t("warmup_seqs", event="warmup_done"),
        "BD_RESULT": _t("metric", "value", event="result"),
        "BD_BANNER": _t("title", "title", event="banner"),
    }
    DOC = "Benchmark driver output (`sglang.bench_serving`, CI throughput tests): parameters, progress, results."


class TestDriver(Event):
    __test__ = False  # not a pytest test class
    kind = "test_driver"
    FIELDS = _k(
        test_class=to_str,
        test_method=to_str,
        settings=to_kv_dict,
        time=to_str,
        label=to_str,
        title=to_str,
        os=to_str,
        python=to_str,
        pytest=to_str,
        executable=to_str,
        key=to_str,
        value=to_str,
        collected=to_int,
        deselected=to_int,
        selected=to_int,
        node=to_str,
        outcome=to_str,
        progress=percent_to_fraction,
        reason=to_str,
        output=to_str,
    )
    TERMS = {
        "TD_CI_METHOD": _t("test_class", "test_method", event="ci_test_method"),
        "TD_CI_LAUNCH": _t("settings", event="ci_launch_server"),
        "TD_START": _t("time", "label", event="script_start"),
        "TD_PYTEST_BANNER": _t("title", event="pytest_banner"),
        "TD_PYTEST_PLATFORM": _t("os", "python", "pytest", "executable", event="pytest_platform"),
        "TD_PYTEST_HEADER": _t("key", "value", event="pytest_header"),
        "TD_PYTEST_COLLECTED": _t("collected", "deselected", "selected", event="pytest_collected"),
        "TD_PYTEST_RESULT": _t("node", "outcome", "progress", "outcome", "node", "reason", event="pytest_result"),
        "TD_PYTEST_NODE": _t("node", "output", event="pytest_node_output"),
    }
    SOURCE = "third_party"
    DOC = (
        "Test harness / launch script lines around the server (`[CI Test Method] ...`, `START 23:37:33 ...`), "
        "and pytest's session header, banners, result lines (`tests/x.py::t PASSED [ 50%]`) and node ids with the test's output glued on."
    )


class Comment(Event):
    kind = "comment"
    FIELDS = _k(comment=to_str)
    TERMS = {"COMMENT": _t("comment")}
    SOURCE = "third_party"
    DOC = "A `# ...` line (shell comment; constructed fixture logs start with one saying so)."


class Annotation(Event):
    kind = "annotation"
    FIELDS = _k(note=to_str)
    TERMS = {"ANNOTATION": _t("note")}
    SOURCE = "third_party"
    DOC = "A note written into a pasted log by its author (a line of Cyrillic words), not log output."


# --- SGLang: startup, configuration and environment ----------------------------


class ArgAdjusted(Event):
    kind = "arg_adjusted"
    FIELDS = _k(value=guess, previous=guess)
    TERMS = {
        "ARG_MAX_RUNNING": _t("value", arg="max_running_requests", reason="speculative_decoding"),
        "ARG_DP_CHUNKED": _t("value", arg="chunked_prefill_size", reason="dp_attention"),
        "ARG_DEEPEP_EP": _t("value", arg="ep_size", reason="deepep_moe"),
        "ARG_SPEC_OVERLAP": _t(arg="overlap_schedule", value=True, reason="spec_v2"),
        "ARG_MM_MEM_FRACTION": _t("value", arg="mem_fraction_static", reason="multimodal"),
        "ARG_MM_MEM_FRACTION_FROM": _t("previous", "value", arg="mem_fraction_static", reason="multimodal"),
        "ARG_MM_OLD": _t(arg="chunked_prefill_size", reason="multimodal"),
        "ARG_NUM_DRAFT_TOKENS": _t(arg="speculative_num_draft_tokens", reason="eagle_topk_1"),
        "ARG_TOKEN_MAP": _t(arg="speculative_token_map", value=None, reason="eagle3_builtin_token_map"),
    }
    DOC = "A server argument changed automatically while the arguments were checked (`arg`, new `value`, `reason`)."


class FeatureDisabled(Event):
    kind = "feature_disabled"
    FIELDS = _k(reason=to_str, moe_runner_backend=to_str, quant_method=to_str, model=to_str)
    TERMS = {
        "FD_CUDA_GRAPH_BANNER": _t(feature="cuda_graph", reason="--disable-cuda-graph is set"),
        "FD_PIECEWISE": _t("reason", feature="piecewise_cuda_graph"),
        "FD_TRTLLM_MOE": _t("moe_runner_backend", "quant_method", feature="trtllm_moe_deferred_finalize"),
        "FD_DFLASH_FUSED": _t("reason", feature="dflash_fused_kv_materialization"),
        "FD_SHARED_EXPERTS": _t(feature="shared_experts_fusion", reason="unsupported platform"),
        "FD_OVERLAP_SINCE": _t("reason", feature="overlap_schedule"),
        "FD_OVERLAP_EAGLE": _t(feature="overlap_schedule", reason="eagle speculative decoding"),
        "FD_MULTIMODAL": _t("model", feature="multimodal", reason="--enable-multimodal not set"),
        "FD_CUSTOM_AR": _t("reason", feature="custom_allreduce"),
        "FD_CUSTOM_AR_FAILED": _t("reason", feature="custom_allreduce"),
    }
    DOC = "An optimisation or feature is switched off (`feature`), with the reason SGLang gives."


class DeprecatedArg(Event):
    kind = "deprecated_arg"
    FIELDS = _k(arg=to_str, replacement=to_str)
    TERMS = {"DEPRECATED_ARG": _t("arg", "replacement")}
    DOC = "A deprecated command-line flag was used (and its replacement)."


class AttentionBackend(Event):
    kind = "attention_backend"
    FIELDS = _k(backend=to_str, arch=to_str, model=to_str, decode_backend=to_str, prefill_backend=to_str)
    TERMS = {
        "AB_DEFAULT": _t("backend", scope="default"),
        "AB_MM_DEFAULT": _t("backend", scope="multimodal"),
        "AB_MM_USING": _t("backend", scope="multimodal"),
        "AB_DRAFT": _t("backend", scope="draft"),
        "AB_MODEL": _t("backend", "arch", "model", scope="model"),
        "AB_HYBRID": _t("decode_backend", "prefill_backend", scope="hybrid"),
    }
    DOC = "The attention backend chosen (default, multimodal, draft model, model-specific, hybrid decode/prefill)."


class ChatTemplate(Event):
    kind = "chat_template"
    FIELDS = _k(content_format=to_str, template=to_str, features=to_kv_dict)
    TERMS = {
        "CT_HF_DEFAULT": _t("content_format", template="huggingface_default"),
        "CT_USE": _t("template"),
        "CT_FEATURES": _t("features"),
    }
    DOC = "The chat template in use (HF default + content format, a named template) or auto-detected template features."


class GenerationConfig(Event):
    kind = "generation_config"
    FIELDS = _k(sampling_params=to_literal, model=to_str, error=to_str)
    TERMS = {
        "GEN_SAMPLING": _t("sampling_params", loaded=True),
        "GEN_MISSING": _t("model", "error", loaded=False),
    }
    DOC = "The model's generation config: default sampling params taken from it, or that it could not be loaded."


class TokenizerLoad(Event):
    kind = "tokenizer_load"
    FIELDS = _k(model=to_str, retry_with=to_str, reload_via=to_str, add_bos_token=to_bool, previous=to_bool)
    TERMS = {
        "TOK_STILL": _t("model", stage="still_generic_after_retries"),
        "TOK_RETRY": _t("model", "retry_with", stage="generic_retry"),
        "TOK_DIRECT": _t("model", stage="direct_tokenizers_backend"),
        "TOK_GENERIC": _t("model", stage="generic_loaded"),
        "TOK_PROCESSOR": _t("model", "reload_via", stage="processor_reload"),
        "TOK_ADD_BOS": _t("add_bos_token", "model", "previous", stage="add_bos_restored"),
    }
    DOC = "Tokenizer loading fallbacks (generic TokenizersBackend, retries, add_bos_token fix-up): `stage` says which."


class MmProcessorRetry(Event):
    kind = "mm_processor_retry"
    FIELDS = _k(processor=to_str, kwargs=to_literal)
    TERMS = {"MM_PROCESSOR_RETRY": _t("processor", "kwargs")}
    DOC = "A multimodal processor rejected keyword arguments; SGLang retried without them."


class ModelImportError(Event):
    kind = "model_import_error"
    FIELDS = _k(module=to_str, config=to_str, error=to_str)
    TERMS = {
        "IMPORT_IGNORED": _t("module", "error"),
        "AUTOMODEL_SKIPPED": _t("config", "error"),
    }
    DOC = "A model module (or transformers AutoModel mapping) failed to import and was skipped; harmless unless it is your model."


class ModelArch(Event):
    kind = "model_arch"
    FIELDS = _k(hybrid=to_lower, architectures=guess, cache_shape=guess)
    TERMS = {
        "ARCH_HYBRID": _t("hybrid", "architectures"),
        "ARCH_ATTN_GATE": _t(attn_output_gate=True),
        "ARCH_CACHE_SHAPE": _t("cache_shape"),
    }
    DOC = "Model-specific architecture lines (hybrid SWA/linear layers, attention output gate, MLA cache shape)."


class DeviceProbeFailed(Event):
    kind = "device_probe_failed"
    FIELDS = _k(error=to_str, fallback=to_str, per_device_mib=guess, gpu_mem=mib_to_gb)
    TERMS = {
        "PROBE_CAPABILITY": _t("error", probe="device_capability"),
        "PROBE_AMDSMI": _t("error", probe="amdsmi"),
        "PROBE_NVIDIA_SMI": _t("fallback", "per_device_mib", "gpu_mem", probe="nvidia_smi_memory"),
    }
    DOC = "A device/platform probe failed (nvcc, amdsmi, nvidia-smi) and SGLang fell back; `gpu_mem` in GB."


class CpuAffinity(Event):
    kind = "cpu_affinity"
    FIELDS = _k(pid=to_int, gpu_id=to_int, cpus=guess)
    TERMS = {"CPU_AFFINITY": _t("pid", "gpu_id", "cpus")}
    DOC = "A scheduler process pinned to a set of CPU cores (NUMA binding)."


class NcclVersion(Event):
    kind = "nccl_version"
    FIELDS = _k(version=to_str)
    TERMS = {"NCCL_VERSION": _t("version")}
    DOC = "`sglang is using nccl==X` (tp > 1)."


class AllreducePath(Event):
    kind = "allreduce_path"
    FIELDS = _k(path=to_str, note=to_str)
    TERMS = {"ALLREDUCE_PATH": _t("path", "note")}
    DOC = "Which all-reduce implementation is used (`[AR] All-reduce call path: NCCL (custom AR disabled)`)."


class KernelConfig(Event):
    kind = "kernel_config"
    FIELDS = _k(backend=to_str, default=to_flag, down_moe=to_bool, config_file=to_str)
    TERMS = {
        "KC_MAMBA": _t("backend", component="mamba_selective_state_update"),
        "KC_MOE": _t("default", "down_moe", "config_file", component="fused_moe_triton", tuned=False),
    }
    DOC = "Kernel configuration: Mamba kernel backend; fused-MoE tuning config missing (default config, sub-optimal speed)."


class QuantNotOptimized(Event):
    kind = "quant_not_optimized"
    FIELDS = _k(quant=to_str)
    TERMS = {"QUANT_NOT_OPTIMIZED": _t("quant")}
    DOC = "`<method> quantization is not fully optimized yet`: kernels for this quantization are slow."


class QuantMethod(Event):
    kind = "quant_method"
    FIELDS = _k(method=to_str)
    TERMS = {
        "QM_USING": _t("method", fallback=False),
        "QM_FALLBACK": _t("method", fallback=True),
    }
    DOC = "The quantized linear/MoE method in use (compressed-tensors schemes), or an unquantized fallback."


class DtypeCast(Event):
    kind = "dtype_cast"
    FIELDS = _k(from_dtype=to_str, to_dtype=to_str)
    TERMS = {"DTYPE_CAST": _t("from_dtype", "to_dtype")}
    DOC = "The model's dtype is cast (`--dtype half` on a bf16 checkpoint)."


class WeightSource(Event):
    kind = "weight_source"
    FIELDS = _k(model=to_str, path=to_str, formats=guess, load_format=to_str)
    TERMS = {
        "WS_HF_SNAPSHOT": _t("model", "path", source="local_hf_snapshot"),
        "WS_FORMAT": _t("formats"),
        "WS_DRAFT_FORMAT": _t("load_format", draft=True),
    }
    DOC = "Where and how weights are read (local HF snapshot, weight file format, draft load format)."


class WeightParamNotFound(Event):
    kind = "weight_param_not_found"
    FIELDS = _k(param=to_str)
    TERMS = {"WEIGHT_PARAM_NOT_FOUND": _t("param")}
    DOC = "A checkpoint tensor has no parameter in the model (`Parameter X not found in params_dict`); skipped."


class WeightsUninitialized(Event):
    kind = "weights_uninitialized"
    FIELDS = _k(names=to_literal)
    TERMS = {
        "WU_WEIGHTS": _t("names", what="weights"),
        "WU_BUFFERS": _t("names", what="persistent_buffers"),
    }
    DOC = "Model weights / buffers missing from the checkpoint (left at their initial values); `count` of names."


class KvCacheDtype(Event):
    kind = "kv_cache_dtype"
    FIELDS = _k(dtype=to_str, default_scale=to_float)
    TERMS = {
        "KVD_USING": _t("dtype"),
        "KVD_FP8_NO_SCALES": _t("default_scale", dtype="fp8", scales_missing=True),
    }
    DOC = "The KV cache dtype; FP8 KV cache without scaling factors (may reduce accuracy)."


class KvCacheBudget(Event):
    kind = "kv_cache_budget"
    FIELDS = _k(avail_mem=to_gb)
    TERMS = {"KV_BUDGET": _t("avail_mem")}
    DOC = "Memory available for the KV cache before the pool is sized (GB; NPU model runner)."


class SwaPool(Event):
    kind = "swa_pool"
    FIELDS = _k(full_tokens=to_int, swa_tokens=to_int, mem_usage=to_gb)
    TERMS = {
        "SWA_USE": _t("full_tokens", "swa_tokens"),
        "SWA_POOL_MEM": _t("mem_usage", "swa_tokens", "full_tokens"),
    }
    DOC = "Sliding-window (hybrid SWA) memory pool: full-layer and SWA-layer token capacity, pool memory (GB)."


class DraftRunner(Event):
    kind = "draft_runner"
    FIELDS = _k(algorithm=to_str, tp=to_int, block_size=to_int, model=to_str, attention_backend=to_str)
    TERMS = {
        "DR_INIT": _t("algorithm", state="initialized"),
        "DR_READY": _t("algorithm", state="ready"),
        "DR_GREEDY": _t("algorithm", "tp", state="greedy_head_folded"),
    }
    DOC = "DFLASH / DSpark draft runner set-up (0.5.11+): its settings as typed fields."


class TreeCacheInit(Event):
    kind = "tree_cache_init"
    FIELDS = _k(components=to_components, settings=to_kv_dict)
    TERMS = {
        "TC_UNIFIED": _t("components", impl="UnifiedRadixTree"),
        "TC_INIT": _t("*settings"),
    }
    DOC = "The prefix (radix) tree cache implementation and its options."


class HicacheHostAlloc(Event):
    kind = "hicache_host_alloc"
    FIELDS = _k(host_mem=to_gb)
    TERMS = {"HICACHE_HOST_ALLOC": _t("host_mem")}
    DOC = "Hierarchical cache: host memory allocated for the KV cache (GB)."


class HicacheStorage(Event):
    kind = "hicache_storage"
    FIELDS = _k(backend=to_str, backend_class=to_str, source=to_str, required_version=to_str)
    TERMS = {
        "HS_CREATE": _t("backend", "backend_class", action="create"),
        "HS_MOONCAKE_CONFIG": _t("source", backend="mooncake", action="config_loaded"),
        "HS_MOONCAKE_ALLOCATOR": _t("required_version", backend="mooncake", action="allocator_fallback"),
    }
    DOC = "Hierarchical cache storage backend set-up (mooncake store, ...)."


class Warmup(Event):
    kind = "warmup"
    FIELDS = _k(name=to_str, mode=to_snake, status=to_int, resp=to_literal)
    TERMS = {
        "WARMUP_ENDED": _t(stage="ended"),
        "WARMUP_RUNNING": _t("name", stage="running"),
        "WARMUP_PD_START": _t("mode", stage="start"),
        "WARMUP_PD_END": _t("status", "resp", stage="end"),
    }
    DOC = "Server warm-up requests (`--warmups`, PD disaggregation warm-up) and their status."


class KvTransferFailed(Event):
    kind = "kv_transfer_failed"
    FIELDS = _k(side=to_lower, transfer_rank=to_int, rid=to_str, bootstrap_room=to_int, exc_type=to_str, exc_message=to_str, peer_session=to_str)
    TERMS = {
        "KVT_FAILED": _t("side", "transfer_rank", "rid", "bootstrap_room", "exc_type", "exc_message", truncated=False),
        "KVT_TAIL": _t("bootstrap_room", "exc_type", "exc_message", truncated=True),
        "KVT_MESSAGE_TAIL": _t("exc_message", truncated=True),
    }
    DOC = "PD disaggregation: a request's KV transfer failed on the prefill or decode side (`KVTransferError`); `peer_session`: the remote Mooncake session the message names."


# --- blocks (folded multi-line records) -------------------------------------------


# the typed identity every error block carries (sglog/read/blocks.py::enrich, sglog/read/frames.py)
ERROR_FIELDS_DOC = (
    " Typed identity (rules read these, never the text): `exc_type` and the whole `exc_message` of the root "
    "exception (multi-line messages kept); `sglang_frame` ({module, function, file, line}: the innermost of "
    "SGLang's frames, module dotted from the path whatever the install prefix), `sglang_chain` (SGLang's "
    "frames outermost first, `module:function`), `phase` (sglog.schema.ERROR_PHASES, from the frames; null "
    "when they do not tell); `rank` (the rank tag's TP number, else the rank the text names: `[Rank 15]`, "
    "`[rank3]:`, `rank15`, `TP3`, `GPU 1`) with `rank_from` (tag|text); `collective` for c10d watchdog "
    "errors ({op_type, seq_num, timeout_ms, ran_ms, numel_in, numel_out, rank, pg, pg_name, last_enqueued, "
    "last_completed, timeout}: what is present); `message_template` / `message_source` / `message_fields` "
    "when the message's first line is one SGLang raises (the catalogue's template, module:line and typed "
    "placeholders)."
)


class Traceback(Event):
    kind = "traceback"
    SOURCE = "block"
    DOC = "A Python traceback (exception type, message, frames, chained exceptions)." + ERROR_FIELDS_DOC


class SchedulerException(Event):
    kind = "scheduler_exception"
    SGLANG_ONLY = True
    SOURCE = "block"
    DOC = "`Scheduler hit an exception:` (or another component's) traceback." + ERROR_FIELDS_DOC


class Oom(Event):
    kind = "oom"
    SOURCE = "block"
    DOC = "A CUDA out-of-memory error (torch OutOfMemoryError) with tried/capacity/free in GB." + ERROR_FIELDS_DOC


class FatalError(Event):
    kind = "fatal_error"
    SOURCE = "block"
    DOC = "`Fatal Python error:` with its thread dump (a hard crash: abort, segfault); frames, chain and phase from the thread that crashed." + ERROR_FIELDS_DOC


class CppException(Event):
    kind = "cpp_exception"
    SOURCE = "third_party"
    DOC = (
        "`terminate called after throwing an instance of ...` with `what():` (its whole message, up to c10's "
        "`Exception raised from`) and C++ frames; `collective` also from the watchdog's frames alone "
        "(`checkTimeout`, `watchdogHandler`, `ncclCommWatchdog`: `{timeout: true}`)." + ERROR_FIELDS_DOC
    )


class LoggingError(Event):
    kind = "logging_error"
    SOURCE = "block"
    DOC = "`--- Logging error ---`: Python's logging failed to emit a record (its traceback, `Message:` and `Arguments:`)." + ERROR_FIELDS_DOC


class Blank(Event):
    kind = "blank"
    DOC = "One or more blank lines."


class Unparsed(Event):
    kind = "unparsed"
    DOC = "A record no grammar rule recognises; its text is kept."


class SglangMessage(Event):
    kind = "sglang_message"
    SOURCE = "catalogue"
    FIELDS = _k(template=to_str, source=to_str, level=to_str, versions=to_str, origin=to_str, shared=to_str, cut=to_str, package=to_str)
    DOC = (
        "An SGLang message that no grammar rule names, named by the catalogue mined from SGLang's source "
        "(sglog/read/catalog.py): `template` (its first line, `{}` for each placeholder), `source` "
        "(module:line), `level`, `versions` (first-last release that has it), `origin` (log, warn, print, "
        'progress, str, raise), `shared` ("vllm" when vLLM prints it too), and one field per placeholder; '
        '`cut` = "start" on a file\'s first line that is the rest of the message (a paste begun mid-line); '
        "`package` when a package of SGLang's project prints it (sglang-omni), whose releases `versions` names."
    )


def to_id(text: str) -> str:
    """A request id as printed, its repr quotes removed ('a1b2' -> a1b2)."""
    t = text.strip()
    return t[1:-1] if len(t) >= 2 and t[0] == t[-1] and t[0] in "'\"" else t


# --- named SGLang messages: catalogue templates with a kind of their own (sglog/read/named.py) ----
# Each class is what a set of templates says, in every release's wording; it keeps the catalogue
# fields of `sglang_message` (template, source, versions ...) and adds typed ones.  A traceback
# whose exception message is one of them carries `named_kind` and `named_fields` instead.


class RequestTooLong(SglangMessage):
    kind = "request_too_long"
    SOURCE = "catalogue"
    FIELDS = {
        **SglangMessage.FIELDS,
        **_k(input_tokens=to_int, limit=to_int, limit_kind=to_str, action=to_str, new_tokens=to_int, total_tokens=to_int, unexpanded_tokens=to_int, rid=to_id, multimodal=to_bool),
    }
    DOC = (
        "A request longer than a limit: `input_tokens` (and `new_tokens`, `total_tokens` when the message "
        "counts max_new_tokens), `limit`, `limit_kind` (context_len: the model's context length; "
        "allowed_maximum: the scheduler's max_req_input_len, the smaller of the context and the KV pool; "
        "max_total_tokens: the KV pool), `action` (rejected, truncated, new_tokens_truncated), `multimodal`."
    )


class NanLogits(SglangMessage):
    kind = "nan_logits"
    SOURCE = "catalogue"
    FIELDS = {**SglangMessage.FIELDS, **_k(where=to_str, sanitized=to_bool, origin_library=to_str)}
    DOC = "NaN in the logits or the sampling probabilities (`Detected errors during sampling! NaN in the logits.`): `where`, `sanitized` (replaced before sampling, 0.5.14+)."


class PdBootstrapFailed(SglangMessage):
    kind = "pd_bootstrap_failed"
    SOURCE = "catalogue"
    FIELDS = {
        **SglangMessage.FIELDS,
        **_k(
            stage=to_str,
            side=to_str,
            backend=to_str,
            status=guess,
            error=to_str,
            bootstrap_addr=to_str,
            engine_rank=to_int,
            dp_group=to_int,
            transfer_rank=to_int,
            rid=to_id,
            bootstrap_room=to_int,
            retries=to_int,
        ),
    }
    DOC = (
        "PD disaggregation could not set up or hand over a request: `stage` (connect, register, fetch_info, "
        "handshake, timeout, engine_init, memory_registration, config), `side` (prefill, decode), `backend`, "
        "and what the message names (`bootstrap_addr`, `status`, `error`, `rid`, `bootstrap_room`, `transfer_rank`)."
    )


class KvMemoryInsufficient(SglangMessage):
    kind = "kv_memory_insufficient"
    SOURCE = "catalogue"
    FIELDS = {**SglangMessage.FIELDS, **_k(mem_fraction_static=to_float, suggested_mem_fraction_static=to_float, minimum_mem_fraction_static=to_float, draft_counted=to_bool)}
    DOC = (
        "SGLang's start-up check: the static pool leaves no room for the KV cache (`Not enough memory. Please try to "
        "increase --mem-fraction-static.`): `mem_fraction_static`; 0.5.14+ also `suggested_mem_fraction_static` (its "
        "own lower bound), `minimum_mem_fraction_static`, and `draft_counted` (the draft model's weights are in the bound)."
    )


class HybridPoolFull(SglangMessage):
    kind = "hybrid_pool_full"
    SOURCE = "catalogue"
    FIELDS = {
        **SglangMessage.FIELDS,
        **_k(
            pool=to_str,
            stage=to_str,
            pool_tokens=to_int,
            sliding_window=to_int,
            page_size=to_int,
            pool_gb=to_float,
            available_gb=to_float,
            rid=to_id,
            full_required=to_int,
            swa_required=to_int,
            capped_requests=to_int,
            pool_slots=to_int,
            slots_per_request=to_int,
            needed_slots=to_int,
        ),
    }
    DOC = (
        "A hybrid model's second pool (`pool`: swa, mamba) is too small: `stage` startup (cannot hold one request), "
        "capped (it caps max_running_requests to `capped_requests`), request (one request exceeds it); its size "
        "(`pool_tokens`, `pool_slots`, `pool_gb`) and what was needed."
    )


NAMED_KINDS = tuple(k for k, c in KIND_CLASSES.items() if c.SOURCE == "catalogue" and k != "sglang_message")
"""Kinds the catalogue names (sglog/read/named.py), not a grammar rule."""


BLOCK_KINDS = ("traceback", "scheduler_exception", "oom", "fatal_error", "cpp_exception", "logging_error")
SPECIAL_KINDS = ("blank", "unparsed", "sglang_message") + NAMED_KINDS


def make(kind: str, **kw: Any) -> Event:
    return KIND_CLASSES[kind](**kw)
