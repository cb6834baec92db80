"""What class of failure an error's words name: the one table of error signatures.

An error event (a traceback, a C++ abort, a fatal error, a third-party error line) says in its
*message* what failed -- "CUDA error: an illegal memory access was encountered", "NCCL error",
"No module named 'deep_ep'" -- in the words of CUDA, HIP, NCCL, torch or SGLang, which change
across their releases.  The reader turns those words into signature names, once, here; rules
claim crashes by signature (``"device_fault" in crash.signatures``) and never read the text.

Each signature is a set of phrases, matched case-insensitively against the error's typed text
fields (exception types and messages of the whole chain, a C++ ``what()``, a log line's message),
never against the frames or the block's layout; a few are read from the exception type or the
frames instead (``missing_module``, ``arch_unsupported`` from torch's symmetric-memory table).

Beside the signatures, ``causes`` (``CAUSES``) name the part that failed -- the kernel, backend or
layer -- from the same texts and the frames' modules, for rules whose advice depends on it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# name -> phrases (lower case); the order is documentation only: an error can have several
PHRASES: dict[str, tuple[str, ...]] = {
    # a collective failed or timed out (NCCL, c10d's watchdog, the socket layer under them)
    "collective_failure": (
        "nccl error",
        "ncclinternalerror",
        "ncclsystemerror",
        "ncclremoteerror",
        "nccl communicator",
        "processgroupnccl",
        "collective operation timeout",
        "nccl watchdog",
        "nccl timeout",
        "socketpollconnect",
    ),
    # a PD-disaggregation KV transfer failed (SGLang's KVTransferError and its messages on both sides)
    "kv_transfer": (
        "kvtransfererror",
        "prefill transfer failed",
        "decode transfer failed",
        "failed to get kvcache from prefill instance",
        "failed due to an unknown reason from another rank",
    ),
    # a GPU kernel faulted (CUDA and HIP/HSA wordings)
    "device_fault": (
        "illegal memory access",
        "an illegal instruction was encountered",
        "misaligned address",
        "hsa_status_error_exception",
        "memory access fault by gpu",
        "unspecified launch failure",
    ),
    # a kernel, backend or data type does not exist for this GPU architecture
    "arch_unsupported": (
        "no kernel image is available",
        "unsupported architecture",
        "not supported in this architecture",
        "is only supported on blackwell",
        "backends are supported on blackwell",
        "requires gpus with sm",
        "no supported cuda architectures found",
        "torchsymmmemcommunicator: device capability",
        "sm120",
        "sm_120",
        "sm_121",
    ),
    # an allocation failed on the device (torch's CUDA/NPU wordings)
    "out_of_memory": ("out of memory", "outofmemoryerror"),
    # SGLang's own start-up check: the static pool leaves no room for the KV cache
    "kv_memory_insufficient": (
        "not enough memory. please try to increase --mem-fraction-static",
        "leave no gpu memory for the kv cache",
        "not enough gpu memory for hybrid",
    ),
    # SGLang's wrapper around a failed CUDA-graph capture
    "capture_failed": ("capture cuda graph failed", "capture prefill cuda graph failed", "capture npu graph failed"),
    # SGLang's check that the TP ranks have the same free memory
    "memory_imbalance": ("memory capacity is unbalanced",),
}

# What an error names as the part that failed, finer than its signature: the kernel, backend or
# layer whose fix differs (rules choose their advice by cause: a Triton fp8 kernel on an sm_86
# card and a Blackwell-only attention kernel are both ``arch_unsupported``, fixed by different
# flags).  Phrases (lower case) are matched against the error's typed texts and, for
# ``FRAME_CAUSES``, against its frames' files and functions: the failing layer is often named only
# by the module it raised in (torch/_dynamo, custom_all_reduce.py).  The order is documentation only.
CAUSES: dict[str, tuple[str, ...]] = {
    # arch_unsupported: which kernel or library has no build for this GPU
    "triton_fp8e4nv": ("fp8e4nv",),
    "torch_symm_mem": ("torchsymmmemcommunicator", "torch_symm_mem"),
    "blackwell_only_kernel": ("trtllm", "tllmgen", "only supported on blackwell", "backends are supported on blackwell"),
    "flashinfer": ("flashinfer",),
    "cuda_arch_list": ("no supported cuda architectures found", "requires gpus with sm"),
    "no_kernel_image": ("no kernel image is available",),
    # capture_failed: which layer broke a CUDA-graph capture
    "custom_all_reduce": ("custom_all_reduce", "custom allreduce", "cudaipc", "ipc handle"),
    "torch_compile": ("dynamo", "inductor", "torch.compile", "torch._"),
    "piecewise_graph": ("piecewise",),
    "capture_collective": ("operation not permitted when stream is capturing", "operation failed due to a previous error during capture"),
    "nccl": ("nccl",),
    # collective_failure: the network under the collective, or NVSHMEM instead of NCCL
    "network": ("network", "socket", "connection", "remote process"),
    "nvshmem": ("nvshmem",),
}

# the causes a frame's module or function names as well as a message (``torch/_dynamo/...``,
# ``custom_all_reduce.py``); the others only from messages (a frame in
# multiprocessing/connection.py is no network failure)
FRAME_CAUSES = frozenset({"triton_fp8e4nv", "torch_symm_mem", "blackwell_only_kernel", "flashinfer", "custom_all_reduce", "torch_compile", "piecewise_graph"})

IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")
_MODULE = re.compile(r"No module named '([^']+)'|cannot import name '([^']+)'(?: from '([^']+)')?|([A-Za-z][\w.]*) is not installed", re.I)


def texts(fields: dict[str, Any]) -> list[str]:
    """The typed text fields of an error: every exception's type and message, else the message."""
    out = [f"{x.get('type') or ''}: {x.get('message') or ''}" for x in fields.get("exceptions") or ()]
    if not out and (fields.get("exc_type") or fields.get("exc_message")):
        out.append(f"{fields.get('exc_type') or ''}: {fields.get('exc_message') or ''}")
    if fields.get("message") and not out:
        out.append(str(fields["message"]))
    return out


def of_text(text: str) -> list[str]:
    """The signature names whose phrases occur in `text`, in table order."""
    low = text.lower()
    return [name for name, phrases in PHRASES.items() if any(p in low for p in phrases)]


def causes_of(text: str) -> list[str]:
    """The cause names whose phrases occur in ``text``, in table order."""
    low = text.lower()
    return [name for name, phrases in CAUSES.items() if any(p in low for p in phrases)]


def frame_names(fields: dict[str, Any]) -> list[str]:
    """The files and functions of an error's frames (Python and C++), as text to read causes from."""
    frames = list(fields.get("frames") or ())
    if isinstance(fields.get("raised_from"), dict):
        frames.append(fields["raised_from"])
    return [f"{f.get('file') or ''} {f.get('function') or ''}" for f in frames if isinstance(f, dict)]


def describe(text: str) -> dict[str, list[str]]:
    """``signatures`` and ``causes`` of a single message (a log line's), each only when it names one."""
    low = text.lower()  # (once: both tables read it)
    out = {}
    found = of_text(low)
    if found:
        out["signatures"] = found
    causes = causes_of(low)
    if causes:
        out["causes"] = causes
    return out


_PEER_SESSION = re.compile(r"mooncake session (\S+?) is not alive", re.I)


def transfer_fields(message: str | None) -> dict[str, Any]:
    """What a failed KV transfer's exception message names: ``peer_session``, the remote Mooncake
    session (``ip:port``) that was not alive (SGLang's `KVTransferError`: `Decode instance could
    be dead, remote mooncake session 10.99.91.49:15366 is not alive`)."""
    m = _PEER_SESSION.search(message or "")
    return {"peer_session": m.group(1)} if m else {}


def exception_types(fields: dict[str, Any]) -> list[str]:
    """The short names of the exception types of an error (the chain's, else its own)."""
    types = [str(x.get("type") or "") for x in fields.get("exceptions") or ()] + [str(fields.get("exc_type") or "")]
    return [t.rsplit(".", 1)[-1] for t in types if t]


def classify(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``signatures``, ``causes`` (and ``missing_module``) of an error event's fields, to add to them."""
    said = texts(fields)
    text = "\n".join(said)
    low = text.lower()  # (once: both tables read it)
    found = of_text(low)
    types = exception_types(fields)
    out: dict[str, Any] = {}
    if any(t in IMPORT_ERRORS for t in types):
        found.append("missing_module")
        m = _MODULE.search(text)
        if m:
            out["missing_module"] = next(g for g in m.groups() if g)
            if m.group(3):  # (cannot import name 'x' from 'package.module')
                out["missing_from"] = m.group(3)
    causes = causes_of(low)
    causes += [c for c in causes_of("\n".join(frame_names(fields))) if c in FRAME_CAUSES]
    # older builds index torch symmetric memory's size table by the major version: KeyError: 12 on SM12x
    if "KeyError" in types and any("torch_symm_mem" in str(f.get("file") or "") for f in fields.get("frames") or ()):
        found.append("arch_unsupported")
        causes.append("torch_symm_mem")
    for line in said:
        out.update(transfer_fields(line))
    out["signatures"] = _unique(found)
    if causes:  # (set only when the error names one)
        out["causes"] = _unique(causes)
    return out


def _unique(xs: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(xs))
