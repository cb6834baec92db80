"""Read folded multi-line blocks (tracebacks, thread dumps, C++ aborts, native crash reports) into fields.

The line shapes are the ``TB_*``, ``NB_*`` and ``OOM_*`` terminals of the grammar.  A block may
be a fragment (a pasted excerpt that starts inside it: frames without their header, a thread
dump's middle): it is read the same way and marked ``fragment: True``.
"""

from __future__ import annotations

import ast
from typing import Any

from sglog.read import grammar
from sglog.events import to_gb


def _re(name: str):
    return grammar.compiled(name)


def _frame(fm) -> dict[str, Any]:
    return {"file": fm.group("path"), "line": int(fm.group("lineno")), "function": (fm.group("func") or "").strip()}


def read_traceback(lines: list[str]) -> tuple[str, dict[str, Any]]:
    """Return (kind, fields) for a traceback block.

    Fields: ``component`` (Scheduler, TokenizerManager ... from the preface),
    ``exc_type``/``exc_message`` of the *root* exception (the first of a chain:
    the cause the later ones were raised from), ``final_exc_type`` /
    ``final_exc_message`` (the last one, which ended the process),
    ``exceptions`` (the whole chain, oldest first), ``frames`` (of the root
    exception's traceback: file, line, function), ``truncated`` (the block's head
    or its exception line was cut off), ``hints`` (SGLang's numbered advice after
    the message), and when recognised: CUDA OOM numbers (``gpu``, ``tried_gb``,
    ``capacity_gb``, ``free_gb``, ...), ``capture_failed``, ``not_enough_memory``
    with ``mem_fraction_static``.
    """
    if lines and _re("TB_LOGGING_ERROR").match(lines[0]):
        return "logging_error", read_logging_error(lines)
    head = _re("TB_HEAD")
    frame_re = _re("TB_FRAME")
    exc_re = _re("TB_EXCEPTION")
    chain_re = _re("TB_CHAIN")
    pre_re = _re("TB_EXC_PREFACE")

    component = None
    preface = ""
    start = 0
    pm = _re("TB_PREFACE_LINE").match(lines[0]) if lines else None
    if pm and len(lines) > 1 and lines[1].startswith("Traceback (most recent call last):"):
        component = pm.group("component")
        start = 1
    hm = head.match(lines[start]) if len(lines) > start else None
    complete_head = hm is not None
    if hm and start == 0:
        preface = hm.group("preface") or ""
        pm2 = pre_re.search(preface)
        if pm2:
            component = pm2.group("component") or pm2.group("component2")

    exceptions: list[dict[str, Any]] = []
    current_frames: list[dict[str, Any]] = []
    message: list[str] | None = None  # lines of the current exception's message
    for i, text in enumerate(lines[start:]):
        if (i == 0 and hm) or text.startswith("Traceback (most recent call last):"):
            current_frames = []
            message = None
            continue
        if chain_re.match(text):
            message = None
            continue
        if message is not None:
            message.append(text)
            continue
        fm = frame_re.match(text)
        if fm:
            current_frames.append(_frame(fm))
            continue
        if text[:1].isspace() or not text.strip():
            continue  # source and caret lines under a frame
        em = exc_re.match(text)
        if em:
            message = [(em.group("message") or "").strip()]
            exceptions.append({"type": em.group("type"), "lines": message, "frames": current_frames})
            continue
    hints: list[str] = []
    for exc in exceptions:
        body, exc_hints = _split_hints(exc.pop("lines"))
        exc["message"] = "\n".join(body)
        hints.extend(exc_hints)
    root = exceptions[0] if exceptions else None
    final = exceptions[-1] if exceptions else None
    fields: dict[str, Any] = {
        "component": component,
        "exc_type": root["type"] if root else None,
        "exc_message": root["message"] if root else None,
        "final_exc_type": final["type"] if final else None,
        "final_exc_message": final["message"] if final else None,
        "exceptions": [{"type": e["type"], "message": e["message"]} for e in exceptions],
        "frames": root["frames"] if root else current_frames,
        "truncated": not complete_head or not exceptions,
    }
    if not complete_head and not component:
        fields["fragment"] = True  # the excerpt starts inside the traceback
    if preface and not component:
        fields["preface"] = preface.strip()
    if hints:
        fields["hints"] = hints
    kind = "scheduler_exception" if component else "traceback"
    messages = [e["message"] for e in exceptions]
    fields.update(_known_messages(messages))
    blob = "\n".join(messages) + " " + " ".join(e["type"] for e in exceptions)
    if _re("OOM_TEXT").search(blob):
        kind = "oom"
        fields.update(oom_numbers(blob))
    return kind, fields


def _split_hints(lines: list[str]) -> tuple[list[str], list[str]]:
    """An exception message's own lines, and SGLang's hint block after them."""
    while lines and not lines[-1].strip():
        lines = lines[:-1]
    hint_re = _re("TB_HINT_HEAD")
    for i, text in enumerate(lines):
        if hint_re.match(text.strip()):
            return lines[:i], [t.strip() for t in lines[i:] if t.strip()]
    return lines, []


def _known_messages(messages: list[str]) -> dict[str, Any]:
    """Typed facts from SGLang exception messages it is useful to act on."""
    out: dict[str, Any] = {}
    for msg in messages:
        m = _re("TB_CAPTURE_FAILED").search(msg)
        if m:
            out["capture_failed"] = True
        m = _re("TB_NOT_ENOUGH_MEMORY").search(msg)
        if m:
            out["not_enough_memory"] = True
            if m.group("value"):
                out["mem_fraction_static"] = float(m.group("value"))
        m = _re("TB_NO_KV_MEMORY").search(msg)
        if m:
            out["not_enough_memory"] = True
            out["mem_fraction_static"] = float(m.group("value"))
            out["suggested_mem_fraction_static"] = float(m.group("suggested"))
            out["minimum_mem_fraction_static"] = float(m.group("minimum"))
    return out


def oom_numbers(text: str) -> dict[str, Any]:
    """GPU number and sizes (GB) from torch's CUDA OOM message."""
    out: dict[str, Any] = {}
    for term, extra in (("OOM_TORCH", ()), ("OOM_TORCH_OLD", ("allocated",))):
        om = _re(term).search(text)
        if om:
            out.update(gpu=int(om.group("gpu")), tried_gb=to_gb(om.group("tried")), capacity_gb=to_gb(om.group("capacity")), free_gb=to_gb(om.group("free")))
            out.update((f"{group}_gb", to_gb(om.group(group))) for group in extra)
            break
    for name, group, key in (
        ("OOM_IN_USE", "in_use", "in_use_gb"),
        ("OOM_ALLOCATED", "allocated", "allocated_gb"),
        ("OOM_RESERVED", "reserved", "reserved_unallocated_gb"),
    ):
        m = _re(name).search(text)
        if m:
            out[key] = to_gb(m.group(group))
    return out


def read_logging_error(lines: list[str]) -> dict[str, Any]:
    """`--- Logging error ---`: the logging failure's exception, call stack, and the record's message."""
    trailer = _re("TB_LOGGING_TRAILER")
    tb: list[str] = []
    stack: list[dict[str, Any]] = []
    log_message = None
    log_arguments = None
    in_stack = False
    for text in lines[1:]:
        m = trailer.match(text)
        if m and text.startswith("Call stack:"):
            in_stack = True
            continue
        if m and m.group("message") is not None:
            log_message = _literal(m.group("message"))
            continue
        if m and m.group("arguments") is not None:
            log_arguments = _literal(m.group("arguments"))
            continue
        if in_stack:
            fm = _re("TB_FRAME").match(text)
            if fm:
                stack.append(_frame(fm))
            continue
        tb.append(text)
    exc: dict[str, Any] = {}
    if tb:
        _kind, exc = read_traceback(tb)
    return {
        "exc_type": exc.get("exc_type"),
        "exc_message": exc.get("exc_message"),
        "frames": exc.get("frames", []),
        "call_stack": stack,
        "log_message": log_message,
        "log_arguments": log_arguments,
        "truncated": not tb or bool(exc.get("truncated", True)),
    }


def _literal(text: str) -> Any:
    try:
        return ast.literal_eval(text.strip())
    except (ValueError, SyntaxError):
        return text.strip()


def read_fatal(lines: list[str]) -> dict[str, Any]:
    """`Fatal Python error:` and faulthandler's thread dump (or the dump's middle, ``fragment``)."""
    m = _re("TB_FATAL").match(lines[0])
    threads = sum(1 for t in lines if t.startswith(("Thread 0x", "Current thread 0x")))
    frames = [_frame(fm) for fm in (_re("TB_FRAME").match(t) for t in lines) if fm]
    out = {"exc_type": "Fatal Python error", "exc_message": m.group("message").strip() if m else "", "threads": threads, "frames": frames[:50]}
    if not m:
        out["fragment"] = True
    return out


def read_cpp(lines: list[str]) -> dict[str, Any]:
    """`terminate called after throwing ...`, `what():`, c10's `Exception raised from ...` and
    `frame #N:` lines; from an excerpt's middle too (``fragment``: frames alone, or from
    `Exception raised from`)."""
    m = _re("TB_CPP_TERMINATE").match(lines[0])
    what = ""
    raised = None
    frames: list[dict[str, Any]] = []
    for t in lines:
        s = t.strip()
        if s.startswith("frame #"):
            fm = _re("TB_CPP_FRAME_PARTS").match(s)
            if fm:
                frames.append({"function": fm.group("func"), "library": fm.group("lib") or None})
            elif _re("TB_CPP_FRAME").match(s):
                frames.append({"function": s.split(": ", 1)[1], "library": None})
            continue
        if not what:
            wm = _re("TB_CPP_WHAT").match(t)
            if wm:
                what = wm.group("message").strip()
                continue
        if raised is None:
            rm = _re("TB_CPP_RAISED").match(s)
            if rm:
                raised = {"function": rm.group("func"), "file": rm.group("location"), "line": int(rm.group("lineno")) if rm.group("lineno") else None}
    out: dict[str, Any] = {"exc_type": m.group("type") if m else None, "exc_message": what, "cpp_frames": len(frames)}
    if raised:
        out["raised_from"] = raised
    if frames:
        out["frames"] = frames[:50]
    if not m:
        out["fragment"] = True
    return out


def read_native(lines: list[str]) -> dict[str, Any]:
    """A native crash report (UCX, glog/abseil, glibc): the signal or error, and the frames."""
    out: dict[str, Any] = {"signal": None, "reason": None, "pid": None, "tid": None}
    frames: list[dict[str, Any]] = []
    head = False
    for t in lines:
        s = t.strip()
        if not s:
            continue
        m = _re("NB_UCX_SIGNAL").fullmatch(s)
        if m:
            out.update(reporter="ucx", signal=int(m.group(1)), reason=m.group(2))
            head = True
            continue
        m = _re("NB_BACKTRACE").fullmatch(s)
        if m:
            out.setdefault("reporter", "ucx")
            if m.group(1):
                out["tid"] = int(m.group(1))
            head = True
            continue
        m = _re("NB_SIGNAL").fullmatch(s)
        if m:
            out.update(reporter="glog", signal=m.group(1), address=m.group(2))
            if m.group(3):
                out["pid"] = int(m.group(3))
            head = True
            continue
        m = _re("NB_GLIBC_ERROR").fullmatch(s)
        if m:
            out.update(reporter="glibc", reason=m.group(2) or m.group(3), program=m.group(1))
            head = True
            continue
        if _re("NB_GLOG_ABORTED").fullmatch(s) or _re("NB_GLIBC_SECTION").fullmatch(s):
            out.setdefault("reporter", "glibc" if "Backtrace:" in s or "Memory map:" in s else "glog")
            head = True
            continue
        if _re("NB_PC").fullmatch(s):
            continue
        fm = _re("NB_FRAME_PARTS").fullmatch(t)
        if fm:
            addr = fm.group("addr") or fm.group("addr2") or fm.group("addr3")
            rest = (fm.group("rest") or fm.group("rest3") or "").strip()
            frames.append({"library": fm.group("lib"), "symbol": fm.group("sym") or (rest or None), "address": addr})
    out["frames"] = frames[:50]
    out["native_frames"] = len(frames)
    if not head:
        out["fragment"] = True
    return {k: v for k, v in out.items() if v is not None or k in ("signal", "reason")}
