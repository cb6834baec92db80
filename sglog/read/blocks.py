"""Read folded multi-line blocks (tracebacks, thread dumps, C++ aborts, native crash reports) into fields.

The line shapes are the ``TB_*``, ``NB_*``, ``OOM_*`` and ``COLL_*`` terminals of the grammar.  A
block may be a fragment (a pasted excerpt that starts inside it: frames without their header, a
thread dump's middle): it is read the same way and marked ``fragment: True``.

Every error block then gets the same typed identity (:func:`enrich`), so that rules read fields
and never the text: ``sglang_frame`` / ``sglang_chain`` / ``phase`` from its frames
(sglog/read/frames.py), ``rank``, ``collective`` (c10d's collectives: :func:`collective`, shared
with torch's log lines) and, when the exception's message is one SGLang raises,
``message_template`` / ``message_source`` / ``message_fields`` from the catalogue.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Iterable
from typing import Any

from sglog.events import Rank, to_gb
from sglog.read import frames as pyframes
from sglog.read import grammar, signatures

# (text, preferred source) -> the catalogued SGLang message it is: template, source, fields (or None)
Catalogued = Callable[[str, "str | None"], "dict[str, Any] | None"]


def _re(name: str):
    return grammar.compiled(name)


def _frame(fm) -> dict[str, Any]:
    return {"file": fm.group("path"), "line": int(fm.group("lineno")), "function": (fm.group("func") or "").strip()}


_TB_START = "Traceback (most recent call last):"


def read_traceback(lines: list[str], catalogued: Catalogued | None = None) -> tuple[str, dict[str, Any]]:
    """Return (kind, fields) for a traceback block.

    Fields: ``component`` (Scheduler, TokenizerManager ... from the preface),
    ``exc_type``/``exc_message`` of the *root* exception (the first of a chain:
    the cause the later ones were raised from), ``final_exc_type`` /
    ``final_exc_message`` (the last one, which ended the process),
    ``exceptions`` (the whole chain, oldest first), ``frames`` (of the root
    exception's traceback: file, line, function), ``truncated`` (the block's head
    or its exception line was cut off), ``hints`` (SGLang's numbered advice after
    the message), ``sglang_frame`` / ``sglang_chain`` / ``phase`` (sglog/read/frames.py, from
    the root exception's whole stack: the later exceptions of a chain show the frames above
    it; a block cut before its exception line counts the call its last source line makes),
    ``message_template`` / ``message_source`` / ``message_fields`` (``_named_message``, with
    ``catalogued``), and when recognised: CUDA OOM numbers (``gpu``, ``tried_gb``,
    ``capacity_gb``, ``free_gb``, ...), ``capture_failed``, ``not_enough_memory``
    with ``mem_fraction_static``.
    """
    if lines and _re("TB_LOGGING_ERROR").match(lines[0]):
        return "logging_error", read_logging_error(lines)
    component, preface, start, complete_head = _traceback_head(lines)
    chain = _Chain()
    chain.read(lines[start:], complete_head)
    hints = _settle_messages(chain.exceptions)
    fields = _chain_fields(chain, component, complete_head)
    if catalogued is not None:
        fields.update(_named_message(chain.exceptions, catalogued))
    if not complete_head and not component:
        fields["fragment"] = True  # the excerpt starts inside the traceback
    if preface and not component:
        fields["preface"] = preface.strip()
    if hints:
        fields["hints"] = hints
    oom, facts = _message_facts(chain.exceptions)
    fields.update(facts)
    return ("oom" if oom else "scheduler_exception" if component else "traceback"), fields


def _traceback_head(lines: list[str]) -> tuple[str | None, str, int, bool]:
    """(component, preface, start, complete head) of a traceback block: the component named by a
    preface line above ``Traceback (most recent call last):`` or by the text before it on its own
    line (that text is the ``preface``), the index of the traceback's head line, and whether the
    head line is there (not an excerpt's middle)."""
    component = None
    preface = ""
    start = 0
    pm = _re("TB_PREFACE_LINE").match(lines[0]) if lines else None
    if pm and len(lines) > 1 and lines[1].startswith(_TB_START):
        component = pm.group("component")
        start = 1
    hm = _re("TB_HEAD").match(lines[start]) if len(lines) > start else None
    if hm and start == 0:
        preface = hm.group("preface") or ""
        pm2 = _re("TB_EXC_PREFACE").search(preface)
        if pm2:
            component = pm2.group("component") or pm2.group("component2")
    return component, preface, start, hm is not None


class _Chain:
    """The exceptions of a traceback block, read line by line (oldest first): each one's ``type``,
    message ``lines``, ``frames`` and ``raise_line`` (the source line under its last frame)."""

    __slots__ = ("exceptions", "frames", "message", "source")

    def __init__(self) -> None:
        self.exceptions: list[dict[str, Any]] = []
        self.frames: list[dict[str, Any]] = []  # the current traceback's
        self.message: list[str] | None = None  # lines of the current exception's message
        self.source: str | None = None  # the source line under the last frame (a cut block: the call it was making)

    def read(self, lines: list[str], has_head: bool) -> None:
        """Read a traceback's lines (``has_head``: the first one is its head line)."""
        chain_re = _re("TB_CHAIN")
        frame_re = _re("TB_FRAME")
        exc_re = _re("TB_EXCEPTION")
        any_exc_re = _re("TB_EXCEPTION_ANY")
        for i, text in enumerate(lines):
            if (i == 0 and has_head) or text.startswith(_TB_START):
                self.frames = []  # a (chained exception's) traceback starts
                self.message = None
            elif chain_re.match(text):
                self.message = None  # `During handling of the above exception ...`
            elif self.message is not None:
                self.message.append(text)  # the message goes on
            else:
                fm = frame_re.match(text)
                if fm:
                    self.frames.append(_frame(fm))
                    self.source = None
                elif text[:1].isspace() or not text.strip():
                    if self.source is None and self.frames and text.strip():
                        self.source = text.strip()  # the frame's source line (then caret lines, blank ones)
                else:
                    self._exception_line(text, exc_re, any_exc_re)

    def _exception_line(self, text: str, exc_re: re.Pattern, any_exc_re: re.Pattern) -> None:
        """An unindented line: the exception's, when it reads as one (any such line where frames end)."""
        em = exc_re.match(text)
        if em is None and self.frames:
            em = any_exc_re.match(text)
        if em:
            self.message = [(em.group("message") or "").strip()]
            self.exceptions.append({"type": em.group("type"), "lines": self.message, "frames": self.frames, "raise_line": self.source})

    def pending_call(self) -> dict[str, Any] | None:
        """A block cut before its exception line: the call its last frame's source line was making."""
        if self.exceptions or not self.frames or not self.source:
            return None
        cm = _re("TB_SOURCE_CALL").match(self.source)
        return {"file": self.frames[-1]["file"], "line": None, "function": cm.group("call")} if cm else None


def _settle_messages(exceptions: list[dict[str, Any]]) -> list[str]:
    """Join each exception's message ``lines`` into its ``message``; return the hints after them."""
    hints: list[str] = []
    for exc in exceptions:
        body, exc_hints = _split_hints(exc.pop("lines"))
        exc["message"] = "\n".join(body)
        hints.extend(exc_hints)
    return hints


def _chain_fields(chain: _Chain, component: str | None, complete_head: bool) -> dict[str, Any]:
    """A traceback's root and final exceptions, its chain, the root's frames and what they say."""
    exceptions = chain.exceptions
    root = exceptions[0] if exceptions else None
    final = exceptions[-1] if exceptions else None
    fields: dict[str, Any] = {
        "component": component,
        "exc_type": root["type"] if root else None,
        "exc_message": root["message"] if root else None,
        "final_exc_type": final["type"] if final else None,
        "final_exc_message": final["message"] if final else None,
        "exceptions": [{"type": e["type"], "message": e["message"]} for e in exceptions],
        "frames": root["frames"] if root else chain.frames,
        "truncated": not complete_head or not exceptions,
    }
    fields.update(pyframes.describe([e["frames"] for e in exceptions] if exceptions else [chain.frames], chain.pending_call()))
    return fields


def _message_facts(exceptions: list[dict[str, Any]]) -> tuple[bool, dict[str, Any]]:
    """(CUDA OOM?, facts) from a chain's messages: :func:`_known_messages`, and the OOM's numbers."""
    messages = [e["message"] for e in exceptions]
    facts = _known_messages(messages)
    blob = "\n".join(messages) + " " + " ".join(e["type"] for e in exceptions)
    if not _re("OOM_TEXT").search(blob):
        return False, facts
    facts.update(oom_numbers(blob))
    return True, facts


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
        "exceptions": exc.get("exceptions", []),
        **pyframes.describe([stack + list(exc.get("frames", []))]),
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
    """`Fatal Python error:` and faulthandler's thread dump (or the dump's middle, ``fragment``).

    ``sglang_frame`` / ``sglang_chain`` / ``phase`` are read from the thread that crashed (the
    dump's ``Current thread``, else its first thread); the dump lists frames innermost first."""
    m = _re("TB_FATAL").match(lines[0])
    frame_re = _re("TB_FRAME")
    threads = 0
    frames: list[dict[str, Any]] = []
    stacks: list[tuple[bool, list[dict[str, Any]]]] = []  # (current thread?, frames innermost first)
    for t in lines:
        if t.startswith(("Thread 0x", "Current thread 0x")):
            threads += 1
            stacks.append((t.startswith("Current"), []))
            continue
        fm = frame_re.match(t)
        if fm:
            frames.append(_frame(fm))
            if not stacks:
                stacks.append((False, []))
            stacks[-1][1].append(frames[-1])
    out = {"exc_type": "Fatal Python error", "exc_message": m.group("message").strip() if m else "", "threads": threads, "frames": frames[:50]}
    crashed = next((s for current, s in stacks if current), stacks[0][1] if stacks else [])
    out.update(pyframes.describe([crashed[::-1]]))
    if not m:
        out["fragment"] = True
    return out


def read_cpp(lines: list[str]) -> dict[str, Any]:
    """`terminate called after throwing ...`, `what():`, c10's `Exception raised from ...` and
    `frame #N:` lines; from an excerpt's middle too (``fragment``: frames alone, or from
    `Exception raised from`)."""
    m = _re("TB_CPP_TERMINATE").match(lines[0])
    what_lines: list[str] | None = None
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
        if what_lines is not None and raised is None and not frames and not s.startswith("Exception raised from"):
            what_lines.append(s)  # the message goes on (c10's messages span lines) until its location line
            continue
        if what_lines is None:
            wm = _re("TB_CPP_WHAT").match(t)
            if wm:
                what_lines = [wm.group("message").strip()]
                continue
        if raised is None:
            rm = _re("TB_CPP_RAISED").match(s)
            if rm:
                raised = {"function": rm.group("func"), "file": rm.group("location"), "line": int(rm.group("lineno")) if rm.group("lineno") else None}
    what = "\n".join(what_lines or []).strip()
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


# ---------------------------------------------------------------- the typed identity of an error

_COLL_KEYS = {"SeqNum": "seq_num", "OpType": "op_type", "NumelIn": "numel_in", "NumelOut": "numel_out", "Timeout(ms)": "timeout_ms"}


def collective(text: str, cpp_functions: Iterable[str] = ()) -> dict[str, Any] | None:
    """What c10d's words say about a collective, or None when they say nothing.

    From ProcessGroupNCCL's watchdog, wherever it is printed (a torch log line, an exception's
    message, a C++ ``what():``): ``op_type``, ``seq_num``, ``timeout_ms``, ``ran_ms``,
    ``numel_in``, ``numel_out`` (``WorkNCCL(...)``), ``rank`` and ``pg`` (``[PG ID 2 PG GUID 3
    Rank 4]``; ``pg_name`` when the GUID names it), ``last_enqueued`` / ``last_completed``
    (``Timeout at NCCL work: ...``), ``timeout`` (True when the words or the C++ frames
    ``checkTimeout`` / ``watchdogHandler`` / ``ncclCommWatchdog`` say it timed out),
    ``watchdog_stuck_s`` (the heartbeat monitor's).  Markdown emphasis (``**``) a web page kept is
    read through.
    """
    if "**" in text:
        text = text.replace("**", "")
    out: dict[str, Any] = {}
    wm = _re("COLL_WORK").search(text)
    if wm:
        for km in _re("COLL_WORK_KV").finditer(wm.group("work")):
            key = _COLL_KEYS.get(km.group("key"))
            if key is not None:
                value = km.group("value")
                out[key] = int(value) if value.lstrip("-").isdigit() else value
        if wm.group("ran"):
            out["ran_ms"] = int(wm.group("ran"))
    pm = _re("COLL_PG").search(text)
    if pm:
        out["rank"] = int(pm.group("rank"))
        if pm.group("pg"):
            out["pg"] = int(pm.group("pg"))
        guid = pm.group("guid") or ""
        name = pm.group("name") or (guid.partition("(")[2].rstrip(")") if "(" in guid else "")
        if name:
            out["pg_name"] = name
    am = _re("COLL_AT_WORK").search(text)
    if am:
        out.setdefault("seq_num", int(am.group("seq")))
        out["last_enqueued"] = int(am.group("enqueued"))
        out["last_completed"] = int(am.group("completed"))
    dog = _re("COLL_WATCHDOG").search(text)
    if dog and dog.group("stuck"):
        out["watchdog_stuck_s"] = int(dog.group("stuck"))
    frame_re = _re("COLL_CPP_FRAME")
    if _re("COLL_TIMED_OUT").search(text) or any(frame_re.search(f) for f in cpp_functions):
        out["timeout"] = True
    if not (wm or am or dog or out.get("timeout")):
        return None  # a `[Rank N]` alone is no collective
    return out


def rank_in(text: str) -> int | None:
    """The rank a block's words name (``RANK_IN_TEXT``): torch's ``[rank3]:`` prefix first, then a
    bracketed ``[... Rank 15]``, ``rank15`` / ``Rank 15``, ``TP3``, a CUDA OOM's ``GPU 1``."""
    best: tuple[int, int] | None = None
    order = ("prefix", "bracket", "word", "tp", "gpu")
    for m in _re("RANK_IN_TEXT").finditer(text):
        name = m.lastgroup
        if name is None:
            continue
        rank = (order.index(name), int(m.group(name)))
        if best is None or rank[0] < best[0]:
            best = rank
            if rank[0] == 0:
                break
    return best[1] if best else None


def rank_of(tags: Rank | None) -> int | None:
    """The rank number of a record's rank tags: its TP rank, else its one tag's number."""
    if tags is None:
        return None
    if tags.tp is not None:
        return tags.tp
    values = list(tags.to_dict().values())
    return values[0] if values else None


def _rank_text(kind: str, fields: dict[str, Any], lines: list[str]) -> str:
    """The words of a block that may name its rank: the messages and the block's head, not its
    frames' paths and source lines."""
    parts = [lines[0] if lines else ""]
    for e in fields.get("exceptions") or ():
        parts.append(str(e.get("message") or ""))
    if not fields.get("exceptions"):
        parts.append(str(fields.get("exc_message") or ""))
    if kind in ("cpp_exception", "native_backtrace", "fatal_error"):
        parts.extend(f.get("function") or f.get("symbol") or "" for f in fields.get("frames") or ())
        parts.extend(f.get("library") or "" for f in fields.get("frames") or ())
    return "\n".join(p for p in parts if p)


def enrich(kind: str, fields: dict[str, Any], lines: list[str], rank: Rank | None = None) -> dict[str, Any]:
    """Add an error block's typed identity to its fields (in place; returned).

    ``rank``: the record's rank tag's number (:func:`rank_of`), else the rank its words name
    (:func:`rank_in`), with ``rank_from`` ("tag" or "text"); ``collective`` (:func:`collective`)
    when c10d's watchdog speaks.  ``phase`` / ``sglang_frame`` / ``sglang_chain`` are set by the
    readers (None and [] when the block has no Python frames).
    """
    for key in ("sglang_frame", "sglang_chain", "phase"):
        fields.setdefault(key, [] if key == "sglang_chain" else None)
    number = rank_of(rank)
    if number is not None:
        fields["rank"], fields["rank_from"] = number, "tag"
    else:
        number = rank_in(_rank_text(kind, fields, lines))
        fields["rank"] = number
        if number is not None:
            fields["rank_from"] = "text"
    messages = [str(e.get("message") or "") for e in fields.get("exceptions") or ()] or [str(fields.get("exc_message") or "")]
    cpp = [str(f.get("function") or "") for f in fields.get("frames") or ()] if kind == "cpp_exception" else []
    if kind == "cpp_exception" and fields.get("raised_from"):
        cpp.append(str(fields["raised_from"].get("function") or ""))
    coll = collective("\n".join(messages), cpp)
    if coll is not None:
        if fields["rank"] is not None:
            coll.setdefault("rank", fields["rank"])
        fields["collective"] = coll
    fields.update(signatures.classify(kind, fields))
    return fields


def _named_message(exceptions: list[dict[str, Any]], catalogued: Catalogued) -> dict[str, Any]:
    """``message_template`` / ``message_source`` / ``message_fields``: the first exception of the
    chain (root first) whose message's first line is a message SGLang raises (the catalogue,
    ``catalogued``, with the raising frame as the preferred source).  SGLang raised it only if
    the exception's innermost frame is SGLang's own and, when its source line is shown, that
    line raises (``raise ...`` / ``assert ...``): an error the interpreter raised in SGLang's code
    (``'NoneType' object has no attribute 'cpu'``) is not one of SGLang's messages, even where
    SGLang words one the same way; without its source line, the template must come from a file
    of the raising frame's name.  An exception shown without frames is taken at its word."""
    for exc in exceptions:
        first = str(exc.get("message") or "").split("\n", 1)[0].strip()
        if not first:
            continue
        frames = exc.get("frames") or []
        at = frames[-1] if frames else None
        source = None
        if at is not None:
            module = pyframes.module_of(at.get("file"))
            if not pyframes.is_sglang(module):
                continue
            line = str(exc.get("raise_line") or "")
            if line and not line.startswith(("raise", "assert")):
                continue
            if module and module.startswith("sglang.") and at.get("line") is not None:
                source = "/".join(module.split(".")[1:]) + f".py:{at['line']}"
        named = catalogued(first, source)
        if not named:
            continue
        if at is not None and not exc.get("raise_line") and _basename(named["source"]) != _basename(str(at.get("file") or "")):
            continue  # (no source line to tell: the template must come from a file of the raising frame's name)
        return {"message_template": named["template"], "message_source": named["source"], "message_fields": named["fields"]}
    return {}


def _basename(path: str) -> str:
    return path.replace("\\", "/").rsplit("/", 1)[-1].partition(":")[0]
