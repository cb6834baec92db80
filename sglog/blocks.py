"""Read folded multi-line blocks (tracebacks, thread dumps, C++ aborts) into fields.

The line shapes are the ``TB_*`` and ``OOM_TORCH`` terminals of the grammar.
"""

from __future__ import annotations

from typing import Any

from sglog import grammar
from sglog.events import to_gb


def _re(name: str):
    return grammar.compiled(name)


def read_traceback(lines: list[str]) -> tuple[str, dict[str, Any]]:
    """Return (kind, fields) for a traceback block.

    Fields: ``component`` (Scheduler, TokenizerManager ... from the preface),
    ``exc_type``/``exc_message`` of the last exception (the one that ended the
    process), ``exceptions`` (the whole chain, oldest first), ``frames`` (of the
    last traceback: file, line, function), ``truncated`` (the block's head was
    cut off), and OOM numbers (``tried_gb``, ``capacity_gb``, ``free_gb``, ``gpu``).
    """
    head = _re("TB_HEAD")
    frame_re = _re("TB_FRAME")
    exc_re = _re("TB_EXCEPTION")
    chain_re = _re("TB_CHAIN")
    pre_re = _re("TB_EXC_PREFACE")

    component = None
    preface = ""
    truncated = True
    exceptions: list[dict[str, Any]] = []
    frames: list[dict[str, Any]] = []
    current_frames: list[dict[str, Any]] = []
    message_lines: list[str] | None = None

    for i, text in enumerate(lines):
        m = head.match(text)
        if m:
            if i == 0:
                truncated = False
                preface = m.group("preface") or ""
                pm = pre_re.search(preface)
                if pm:
                    component = pm.group("component") or pm.group("component2")
            current_frames = []
            message_lines = None
            continue
        if i == 0 and text.startswith("--- Logging error ---"):
            truncated = False
            component = "logging"
            continue
        if chain_re.match(text):
            message_lines = None
            continue
        fm = frame_re.match(text)
        if fm:
            current_frames.append({"file": fm.group("path"), "line": int(fm.group("lineno")), "function": (fm.group("func") or "").strip()})
            message_lines = None
            continue
        if not text[:1].isspace() and text.strip():
            em = exc_re.match(text)
            if em and message_lines is None:
                exceptions.append({"type": em.group("type"), "message": (em.group("message") or "").strip()})
                frames = current_frames
                message_lines = [exceptions[-1]["message"]]
                continue
            if message_lines is not None and exceptions:
                message_lines.append(text)
                exceptions[-1]["message"] = "\n".join(x for x in message_lines if x)
                continue
            if not exceptions and i == 0:
                preface = text
    fields: dict[str, Any] = {
        "component": component,
        "exc_type": exceptions[-1]["type"] if exceptions else None,
        "exc_message": exceptions[-1]["message"] if exceptions else None,
        "exceptions": exceptions,
        "frames": frames or current_frames,
        "truncated": truncated or not exceptions,
    }
    if preface and not component:
        fields["preface"] = preface.strip()
    kind = "scheduler_exception" if component and component != "logging" else "traceback"
    blob = "\n".join(e["message"] for e in exceptions) + " " + " ".join(e["type"] for e in exceptions)
    om = _re("OOM_TORCH").search(blob)
    if om or "OutOfMemoryError" in blob or "CUDA out of memory" in blob or "CUDA error: out of memory" in blob:
        kind = "oom"
        if om:
            fields.update(
                gpu=int(om.group("gpu")),
                tried_gb=to_gb(om.group("tried")),
                capacity_gb=to_gb(om.group("capacity")),
                free_gb=to_gb(om.group("free")),
            )
    return kind, fields


def read_fatal(lines: list[str]) -> dict[str, Any]:
    m = _re("TB_FATAL").match(lines[0])
    threads = sum(1 for t in lines if t.startswith(("Thread 0x", "Current thread 0x")))
    frames = [
        {"file": fm.group("path"), "line": int(fm.group("lineno")), "function": (fm.group("func") or "").strip()}
        for fm in (_re("TB_FRAME").match(t) for t in lines)
        if fm
    ]
    return {"exc_type": "Fatal Python error", "exc_message": m.group("message").strip() if m else "", "threads": threads, "frames": frames[:50]}


def read_cpp(lines: list[str]) -> dict[str, Any]:
    m = _re("TB_CPP_TERMINATE").match(lines[0])
    what = ""
    for t in lines[1:]:
        wm = _re("TB_CPP_WHAT").match(t)
        if wm:
            what = wm.group("message").strip()
            break
    frames = sum(1 for t in lines if _re("TB_CPP_FRAME").match(t.strip()))
    return {"exc_type": m.group("type") if m else None, "exc_message": what, "cpp_frames": frames}
