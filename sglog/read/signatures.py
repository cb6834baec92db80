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

IMPORT_ERRORS = ("ImportError", "ModuleNotFoundError")
_MODULE = re.compile(r"No module named '([^']+)'|cannot import name '([^']+)'|([A-Za-z][\w.]*) is not installed", re.I)


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


def exception_types(fields: dict[str, Any]) -> list[str]:
    """The short names of the exception types of an error (the chain's, else its own)."""
    types = [str(x.get("type") or "") for x in fields.get("exceptions") or ()] + [str(fields.get("exc_type") or "")]
    return [t.rsplit(".", 1)[-1] for t in types if t]


def classify(kind: str, fields: dict[str, Any]) -> dict[str, Any]:
    """``signatures`` (and ``missing_module``) of an error event's fields, to add to them."""
    found = of_text("\n".join(texts(fields)))
    types = exception_types(fields)
    out: dict[str, Any] = {}
    if any(t in IMPORT_ERRORS for t in types):
        found.append("missing_module")
        m = _MODULE.search("\n".join(texts(fields)))
        if m:
            out["missing_module"] = next(g for g in m.groups() if g)
    # older builds index torch symmetric memory's size table by the major version: KeyError: 12 on SM12x
    if "KeyError" in types and any("torch_symm_mem" in str(f.get("file") or "") for f in fields.get("frames") or ()):
        found.append("arch_unsupported")
    out["signatures"] = _unique(found)
    return out


def _unique(xs: Iterable[str]) -> list[str]:
    return list(dict.fromkeys(xs))
