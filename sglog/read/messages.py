"""One record's message -> (kind, typed fields), with the lark grammar.

The rule that matched names the kind.  Its fields come from three places, all
typed by the event class's tables (sglog/events.py):

* generic key/value lists (``colon_kvs``, ``eq_kvs``) -> ``FIELDS``;
* terminals whose capture groups are the holes of a fixed sentence -> ``TERMS``
  (field names in group order, plus constant fields);
* a few kinds with structure of their own (server args, batch heads, access
  lines, progress bars, ...) are read below.

Some loggers put a prefix of their own in front of an SGLang message (level and
source file, a fork's logger format, Python's ``asctime - LEVEL -`` format);
the grammar's ``ENV_LEVEL_SOURCE`` / ``ENV_PYLOG`` / ``ENV_PYLOG_DASH``
terminals describe them, and their parts become ``log_*`` fields.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable
from typing import Any, cast

from lark import Token, Tree
from lark.exceptions import LarkError

from sglog.events import KIND_CLASSES, Event, guess, to_gb
from sglog.read import grammar

MAX_PARSE_CHARS = 1 << 20  # longer records are not given to lark (unparsed, with a reason)


def _pairs(tree: Tree[Any]) -> list[tuple[str, str]]:
    out = []
    for sub in tree.iter_subtrees_topdown():
        if sub.data in ("colon_kv", "eq_kv"):
            key, value = sub.children[0], sub.children[-1]
            out.append((str(key), str(value)))
        elif sub.data == "time_elapsed":
            out.append(("elapsed", str(sub.children[0])))
    return out


def _tokens(tree: Tree[Any], name: str) -> list[str]:
    return [str(t) for t in tree.scan_values(lambda v: isinstance(v, Token) and v.type == name)]


def _cont_lines(tree: Tree[Any]) -> list[str]:
    return [t[1:] for t in _tokens(tree, "CONT")]


# -- python literal (server args) --------------------------------------------

_PY_CONST = {"True": True, "False": False, "None": None}


def pyvalue(node: Any) -> Any:
    """Turn a parsed Python literal into Python values (calls become dicts)."""
    if isinstance(node, Token):
        if node.type == "PY_STRING":
            try:
                return ast.literal_eval(str(node))
            except (ValueError, SyntaxError):
                return str(node)[1:-1]
        if node.type == "NUMBER_LIT":
            v = str(node)
            try:
                return int(v)
            except ValueError:
                return float(v)
        if node.type == "PY_NAME":
            return _PY_CONST.get(str(node), str(node))
        return str(node)
    if node.data == "pycall":
        return _pyargs(node.children)
    if node.data == "pydict":
        return {_hashable(pyvalue(item.children[0])): pyvalue(item.children[1]) for item in node.children if isinstance(item, Tree)}
    if node.data in ("pylist", "pytuple"):
        return [pyvalue(c) for c in node.children if c is not None]
    raise ValueError(node.data)


def _pyargs(children: list[Any]) -> dict[str, Any]:
    return {str(arg.children[0]): pyvalue(arg.children[1]) for arg in children if isinstance(arg, Tree) and arg.data == "pyarg"}


def _hashable(v: Any) -> Any:
    return str(v) if isinstance(v, (dict, list)) else v


# -- fields from terminals with capture groups (the TERMS tables) -------------


def term_fields(cls: type[Event], tree: Tree[Any]) -> dict[str, Any]:
    """Fields from the capture groups of the tree's top-level tokens, named and typed by ``cls``."""
    out: dict[str, Any] = {}
    name: str | None  # (a terminal's, then its groups' field names: None for a group not read)
    for tok in tree.children:
        if not isinstance(tok, Token):
            continue
        m = None
        spec = cls.TERMS.get(tok.type)
        if spec is not None:
            m = grammar.compiled(tok.type).fullmatch(str(tok))
        elif cls.TERMS:
            # a union terminal (`SIGQUIT: SQ_CHILD | SQ_SIGNAL | ...`): find the variant that matched
            for name, candidate in cls.TERMS.items():
                m = grammar.compiled(name).fullmatch(str(tok))
                if m is not None:
                    spec = candidate
                    break
        if m is None or spec is None:
            continue
        names, consts = spec
        for name, raw in zip(names, m.groups()):
            if raw is None or name is None or name in out:
                continue
            merge = name.startswith("*")
            key = name.lstrip("*")
            conv = cls.FIELDS.get(key)
            value = conv(raw) if conv else guess(raw)
            if merge and isinstance(value, dict):
                out.update(value)
            else:
                out[key] = value
        for k, v in consts.items():
            out.setdefault(k, v)
    return out


# -- per-rule interpretation ------------------------------------------------------

_CAPTURE_SUBJECT = re.compile(r"Capture (?:(?P<role>target|draft) (?P<stage>decode|verify|prefill|extend) |(?P<draft>draft) (?P<dext>extend )?|(?P<piece>piecewise) )?(?P<device>\w+) graph")
_PROGRESS = re.compile(r"^(?P<desc>.*?):? *(?P<pct>\d{1,3})%.*?\| *(?P<n>[\d.]+[kMGTPEZY]?)(?P<unit>i?B)?/(?P<total>[\d.]+[kMGTPEZY]?)")
_PROGRESS_NO_TOTAL = re.compile(r"^(?:(?P<desc>.*?): ?)? *(?P<n>[\d.]+[kMGTPEZY]?)(?P<unit>it|i?B|[a-z]+)? \[")
_SCALE = {"k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "P": 1e15, "E": 1e18, "Z": 1e21, "Y": 1e24}
_PROGRESS_CAPTURE = re.compile(r"\((?:(?P<key>bs|num_tokens)=(?P<value>\d+) )?avail_mem=(?P<mem>[\d.]+ ?GB)\)")
_STEP = re.compile(r"\(step (\d+)\)")
_LAYER = re.compile(r"(?:^|\.)layers\.(\d+)\.")
_HSA_STATUS = re.compile(r"\b(HSA_STATUS_\w+)")
_NVSHMEM_STATUS = re.compile(r"non-zero status: (-?\d+)")
_KV_HEAD = re.compile(r"^(?:Post-capture KV sizing: (?P<pc>draft )?KV cache allocated|(?P<label>.*?) (?:is allocated|VA upper bound))\. ")


# The readers of the kinds whose fields need more than the generic reading (``_READERS``; one a
# kind, or a variant's first: None when the line is not that variant).  interpret's callers catch
# AttributeError (parse._parse, and the digit-shape memo's templates, whose retokened trees may not
# fit a rule's regex): a regex below that does not match, or a first child that is not the
# terminal the rule starts with, leaves the line unparsed.  The casts (re.Match[str], Token) say
# what the grammar guarantees and keep that behaviour.
def _read_server_args(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """server_args."""
    fields: dict[str, Any] = {}
    first = tree.children[0]
    if isinstance(first, Token) and first.type == "ARGS_TAIL":
        # an excerpt that starts inside the dump: `name=value, ..., last=value)`
        args = {str(first)[:-1]: pyvalue(tree.children[1])}
        args.update(_pyargs(tree.children[2:]))
        fields.update(args=args, style="dataclass", truncated=True)
        return fields
    value = tree.children[1]
    args = pyvalue(value)
    fields["args"] = args if isinstance(args, dict) else {"value": args}
    fields["style"] = "dict" if isinstance(value, Tree) and value.data == "pydict" else "dataclass"
    fields["truncated"] = False
    if isinstance(first, Token) and first.type == "GLOBAL_ARGS_HEAD":
        fields["updated"] = True  # `Global server args updated!` after /set_internal_state
    return fields


def _read_cuda_graph_capture(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """cuda_graph_capture_begin, cuda_graph_capture_end."""
    fields: dict[str, Any] = {}
    m = _CAPTURE_SUBJECT.match(message)
    if m:
        role = m.group("role") or ("draft" if m.group("draft") else "target")
        stage = m.group("stage") or ("extend" if m.group("dext") else ("piecewise" if m.group("piece") else "decode"))
        fields.update(role=role, stage=stage, device=m.group("device").lower())
    sm = _STEP.search(message)
    if sm:
        fields["step"] = int(sm.group(1))
    fields.update(cls.typed(_pairs(tree)))
    return fields


def _read_cuda_graph_bs(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """cuda_graph_bs."""
    fields: dict[str, Any] = {}
    values = pyvalue(tree.children[1])
    key = "num_tokens" if "num tokens" in message else "bs"
    fields[key] = values
    return fields


def _read_avail_mem(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """weight_load_begin, memory_pool_end."""
    fields: dict[str, Any] = {}
    fields["avail_mem"] = to_gb(_tokens(tree, "GB_VALUE")[0])
    return fields


def _read_weight_load_committed(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """weight_load_committed."""
    fields: dict[str, Any] = {}
    nums = [float(x) for x in _tokens(tree, "NUMBER")]
    fields.update(elapsed=nums[0], overlap_window=nums[1], overlap_total=nums[2])
    return fields


def _read_memory_summary(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """memory_summary."""
    fields: dict[str, Any] = {}
    first = _tokens(tree, "EQ_VALUE")[0]
    pairs = [("max_total_num_tokens", first)] + _pairs(tree)
    fields.update(cls.typed(pairs))
    return fields


def _read_batch(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """prefill_batch, decode_batch."""
    fields: dict[str, Any] = {}
    head = _tokens(tree, "PREFILL_HEAD" if kind == "prefill_batch" else "DECODE_HEAD")[0]
    fields.update(head_fields(kind, head))
    fields.update(cls.typed(_pairs(tree)))
    fields.update(graph_backend_field(message))
    return fields


def _read_kv_cache_allocated(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """kv_cache_allocated."""
    fields: dict[str, Any] = {}
    fields.update(term_fields(cls, tree))
    if fields:
        return fields
    m = cast("re.Match[str]", _KV_HEAD.match(message))
    post = message.startswith("Post-capture")
    fields["cache"] = ("draft KV cache" if m.group("pc") else "KV cache") if post else m.group("label")
    fields["post_capture"] = post
    fields["va_upper_bound"] = m.group(0).endswith(" VA upper bound. ")
    fields.update(cls.typed(_pairs(tree)))
    return fields


def _read_http_access(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """http_access."""
    fields: dict[str, Any] = {}
    m = cast("re.Match[str]", re.match(grammar.flat_rule_regex("http_access"), message))
    client = re.sub(r' ?- "$', "", m.group("client_sep"))
    fields.update(
        client=client,
        method=m.group("http_method"),
        path=m.group("http_path"),
        http_version=m.group("http_version"),
        status=int(m.group("http_status")),
        phrase=(m.group("http_phrase") or "").strip(),
    )
    return fields


def _read_progress(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """progress."""
    fields: dict[str, Any] = {}
    m = next((m for seg in reversed(message.split("\r")) if (m := _PROGRESS.match(seg.strip()))), None)
    if m:
        fields.update(desc=m.group("desc").strip(), percent=int(m.group("pct")), n=_count(m.group("n")), total=_count(m.group("total")))
        if m.group("unit"):
            fields["unit"] = m.group("unit")
        cm = _PROGRESS_CAPTURE.search(m.group("desc"))
        if cm:
            if cm.group("key"):
                fields[cm.group("key")] = int(cm.group("value"))
            fields["avail_mem"] = to_gb(cm.group("mem"))
    else:
        m = _PROGRESS_NO_TOTAL.match(message.strip())
        if m:  # tqdm without a total: `Processed prompts: 5it [00:01,  3.12it/s]`
            fields.update(desc=(m.group("desc") or "").strip(), n=_count(m.group("n")), total=None)
    return fields


def _read_native_backtrace(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """native_backtrace."""
    from sglog.read import blocks

    return blocks.read_native(message.split("\n"))


def _read_library_log(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """nccl_log, torch_log, glog, vllm_log, uvicorn_log, ucx_log."""
    fields: dict[str, Any] = {}
    lead = cast(Token, tree.children[0])  # (each of these rules starts with a terminal)
    text = str(tree.children[1]).strip() if len(tree.children) > 1 else ""
    if lead.type == "GLOG_PREINIT":
        fields.update(level="WARNING", message=str(lead).split(": ", 1)[1])
        return fields
    if lead.type == "NVSHMEM_SOURCE":
        fields.update(level="ERROR", message=text, source=str(lead).rstrip(":").rsplit("/", 1)[-1])
        sm = _NVSHMEM_STATUS.search(text)
        if sm:
            fields["status"] = int(sm.group(1))
        return fields
    fields["level"] = _level(kind, str(lead))
    fields["message"] = text
    if kind == "ucx_log":
        fields["source"] = str(lead).split("]")[-1].split()[0]
    elif kind == "glog":
        fields["source"] = str(lead).rstrip("]").split()[-1]  # (the writing file:line, as ucx_log's)
    return fields


def _read_python_warning_fragment(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """python_warning when cast(Token, tree.children[0]).type == "PYWARN_FRAGMENT"."""
    if not (cast(Token, tree.children[0]).type == "PYWARN_FRAGMENT"):
        return None
    fields: dict[str, Any] = {}
    lines = [line.strip() for line in message.split("\n") if line.strip()]
    echo = next(i for i, line in enumerate(lines) if line.startswith("warnings.warn"))
    fields.update(path=None, lineno=None, category=None, message="\n".join(lines[:echo]), source="\n".join(lines[echo:]), fragment=True)
    return fields


def _read_python_warning(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """python_warning."""
    fields: dict[str, Any] = {}
    head = str(tree.children[0])
    path, lineno, category = head.rsplit(":", 3)[0], head.rsplit(":", 3)[1], head.rsplit(":", 3)[2].strip()
    # the message may go on over indented lines; the last one is the source line shown by `warnings`
    rest = [line.strip() for line in _cont_lines(tree) if line.strip()]
    first = message.split("\n", 1)[0][len(head) :].strip()
    text = "\n".join([x for x in [first] + rest[:-1] if x])
    fields.update(path=path, lineno=int(lineno), category=category, message=text)
    if rest:
        fields["source"] = rest[-1]
    return fields


def _read_pip_output(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """pip_package when cast(Token, tree.children[0]).type == "PIP_OUTPUT"."""
    if not (cast(Token, tree.children[0]).type == "PIP_OUTPUT"):
        return None
    fields: dict[str, Any] = {}
    fields.update(term_fields(cls, tree))
    return fields


def _read_pip_package(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """pip_package."""
    fields: dict[str, Any] = {}
    name, version = message.split()[:2]
    fields.update(package=name, version=version)
    return fields


def _read_launch_command(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """launch_command."""
    fields: dict[str, Any] = {}
    fields["command"] = message[len("command=") :] if message.startswith("command=") else message
    return fields


def _read_watchdog_timeout(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """watchdog_timeout."""
    fields: dict[str, Any] = {}
    m = cast("re.Match[str]", re.search(r"watchdog_timeout=([\d.]+)(?:, self\.soft=(True|False))?", message))
    comp = message.split(" ", 1)[0] if not message.startswith("Watchdog") else "Scheduler"
    fields.update(component=comp, timeout=guess(m.group(1)), soft=m.group(2) == "True" if m.group(2) else False)
    return fields


def _read_scheduler_dead(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """scheduler_dead."""
    fields: dict[str, Any] = {}
    m = re.search(r"(?:exit code:? |terminated with |Exit code: )(-?\d+)", message)
    r = re.search(r"Rank (\d+)", message)
    fields.update(exit_code=int(m.group(1)) if m else None, sched_rank=int(r.group(1)) if r else None)
    p = re.match(r"Scheduler or DataParallelController (\d+) ", message)
    if p:
        fields["pid"] = int(p.group(1))
    fields["variant"] = (
        "terminated"
        if p
        else "exit_code"
        if message.startswith("Exit code")
        else "init_failed"
        if message.startswith("Initialization failed")
        else "died_during_init"
        if "died during initialization" in message
        else "dead"
    )
    return fields


def _read_gloo(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """gloo."""
    fields: dict[str, Any] = {}
    nums = [int(x) for x in re.findall(r"\d+", message)]
    fields.update(gloo_rank=nums[0], connected=nums[1], expected=nums[2])
    return fields


def _read_batch_oom(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """batch_oom."""
    return batch_oom_fields(message)


def _read_retraction(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """retraction."""
    fields: dict[str, Any] = {}
    fields.update(term_fields(cls, tree))
    if not fields:
        fields["testing"] = message.startswith("Testing")
        fields["aborted"] = False
    else:
        fields["aborted"] = True
    fields.update(cls.typed(_pairs(tree)))
    return fields


def _read_bench_driver(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """bench_driver when isinstance(tree.children[0], Token) and tree.children[0].type == "BD_NAMESPACE"."""
    if not (isinstance(tree.children[0], Token) and tree.children[0].type == "BD_NAMESPACE"):
        return None
    fields: dict[str, Any] = {}
    fields.update(event="args", args=_pyargs(tree.children[1:]))
    return fields


def _read_browser_agent_log(kind: str, cls: type[Event], tree: Tree[Any], message: str) -> dict[str, Any] | None:
    """browser_agent_log when cast(Token, tree.children[0]).type == "BA_CALL_LOG"."""
    if not (cast(Token, tree.children[0]).type == "BA_CALL_LOG"):
        return None
    fields: dict[str, Any] = {}
    fields["source"] = "playwright"
    fields["steps"] = [line.strip().lstrip("- ").strip() for line in _cont_lines(tree) if line.strip()]
    return fields


# the kinds whose fields need more than the generic reading, each kind's readers in order (the first
# that returns fields wins; None: the line is not that variant, the next reader or the generic one reads it)
_READERS: dict[str, tuple[Callable[[str, type[Event], Tree[Any], str], dict[str, Any] | None], ...]] = {
    "server_args": (_read_server_args,),
    "cuda_graph_capture_begin": (_read_cuda_graph_capture,),
    "cuda_graph_capture_end": (_read_cuda_graph_capture,),
    "cuda_graph_bs": (_read_cuda_graph_bs,),
    "weight_load_begin": (_read_avail_mem,),
    "memory_pool_end": (_read_avail_mem,),
    "weight_load_committed": (_read_weight_load_committed,),
    "memory_summary": (_read_memory_summary,),
    "prefill_batch": (_read_batch,),
    "decode_batch": (_read_batch,),
    "kv_cache_allocated": (_read_kv_cache_allocated,),
    "http_access": (_read_http_access,),
    "progress": (_read_progress,),
    "native_backtrace": (_read_native_backtrace,),
    "nccl_log": (_read_library_log,),
    "torch_log": (_read_library_log,),
    "glog": (_read_library_log,),
    "vllm_log": (_read_library_log,),
    "uvicorn_log": (_read_library_log,),
    "ucx_log": (_read_library_log,),
    "python_warning": (
        _read_python_warning_fragment,
        _read_python_warning,
    ),
    "pip_package": (
        _read_pip_output,
        _read_pip_package,
    ),
    "launch_command": (_read_launch_command,),
    "watchdog_timeout": (_read_watchdog_timeout,),
    "scheduler_dead": (_read_scheduler_dead,),
    "gloo": (_read_gloo,),
    "batch_oom": (_read_batch_oom,),
    "retraction": (_read_retraction,),
    "bench_driver": (_read_bench_driver,),
    "browser_agent_log": (_read_browser_agent_log,),
}


def interpret(kind: str, tree: Tree[Any], message: str) -> dict[str, Any]:
    """A message's typed fields from its parse tree: its kind's reader, else the generic reading
    (the capture groups of fixed-text terminals, then key/value lists, then the kind's post-step)."""
    cls = KIND_CLASSES[kind]
    for read in _READERS.get(kind, ()):
        got = read(kind, cls, tree, message)
        if got is not None:
            return got
    fields: dict[str, Any] = {}
    fields.update(term_fields(cls, tree))
    fields.update(cls.typed(_pairs(tree)))
    post_fn = _POST.get(kind)
    if post_fn:
        post_fn(fields, message)
    return fields


def _post_weight_param(fields: dict[str, Any], message: str) -> None:
    m = _LAYER.search(fields.get("param") or "")
    fields["layer"] = int(m.group(1)) if m else None


def _post_weights_uninitialized(fields: dict[str, Any], message: str) -> None:
    names = fields.get("names")
    fields["count"] = len(names) if isinstance(names, list) else None


_RID = re.compile(r"""\brid['"]?[=:] ?['"]([^'"]+)['"]""")


def _post_request(fields: dict[str, Any], message: str) -> None:
    m = _RID.search(message)
    fields["rid"] = m.group(1) if m else None


def _post_rocm(fields: dict[str, Any], message: str) -> None:
    m = _HSA_STATUS.search(message)
    if m:
        fields["hsa_status"] = m.group(1)


_POST = {
    "weight_param_not_found": _post_weight_param,
    "weights_uninitialized": _post_weights_uninitialized,
    "rocm_log": _post_rocm,
    "request_log": _post_request,
}


_OOM_TRY = re.compile(r"^Try to allocate (\d+) tokens\.?", re.M)
_OOM_AVAIL = re.compile(r"^Ava(?:li|il)able(?: (\w+))? tokens: (\d+)(?: \(available_size=(\d+) \+ evictable_size=(\d+)\))?", re.M)
_OOM_SIZE = re.compile(r"^[\w.]*\.(available_size|evictable_size)\(\)=(\d+)", re.M)


def batch_oom_fields(message: str) -> dict[str, Any]:
    """`Prefill/Decode out of memory` block: tokens requested / available, pool sizes."""
    fields: dict[str, Any] = {"phase": message.split(" ", 1)[0].lower()}
    m = _OOM_TRY.search(message)
    if m:
        fields["tokens_requested"] = int(m.group(1))
    for m in _OOM_AVAIL.finditer(message):
        prefix = f"{m.group(1)}_" if m.group(1) else ""
        fields[f"{prefix}tokens_available"] = int(m.group(2))
        if m.group(3) is not None:
            fields[f"{prefix}available_size"] = int(m.group(3))
            fields[f"{prefix}evictable_size"] = int(m.group(4))
    for m in _OOM_SIZE.finditer(message):
        fields[m.group(1)] = int(m.group(2))
    return fields


def head_fields(kind: str, head: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    m = re.search(r"\[(\d+)\]", head)
    if m:
        out["forward_iter"] = int(m.group(1))
    m = re.search(r"mixed #running-req: (\d+)", head)
    if m:
        out["mixed_running_req"] = int(m.group(1))
    return out


def graph_backend_field(message: str) -> dict[str, Any]:
    for dev in ("npu", "cpu", "musa", "xpu"):
        if f", {dev} graph: " in message:
            return {"graph_backend": dev}
    return {}


def _count(text: str) -> int | float:
    """A tqdm count: `23` -> 23, `4.97G` -> 4.97e9 (unit_scale)."""
    scale = _SCALE.get(text[-1:], 1)
    if scale != 1:
        text = text[:-1]
    value = float(text) * scale
    return int(value) if value.is_integer() and ("." not in text or scale != 1) else value


def _level(kind: str, head: str) -> str:
    head = head.strip()
    if kind == "uvicorn_log":
        return head.rstrip(": ").upper()
    if kind in ("nccl_log", "ucx_log"):
        return head.split()[-1]
    if kind == "vllm_log":
        return head.split()[0]
    letter = head.split("]:")[-1].lstrip("[")[:1]  # (torch and glog heads may start with `[rank0]:`)
    return {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}.get(letter, letter)


# -- foreign prefixes in front of a message --------------------------------------

_PREFIXES = ("ENV_LEVEL_SOURCE", "ENV_PYLOG", "ENV_PYLOG_DASH")


def strip_prefix(message: str) -> tuple[str, dict[str, Any]]:
    """Remove a logger prefix of another format; its parts as ``log_*`` fields."""
    if not message[:1].isalnum():
        return message, {}
    for name in _PREFIXES:
        m = grammar.compiled(name).match(message)
        if m:
            extra = {f"log_{k}": (int(v) if k == "pid" else v) for k, v in m.groupdict().items() if v is not None}
            return message[m.end() :], extra
    return message, {}


def parse_message(message: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, fields) of a message, or None if no rule matches."""
    if len(message) > MAX_PARSE_CHARS:
        return None
    res = _parse(message)
    if res is not None:
        return res
    if "\n" in message and message.startswith(("server_args=", "Global server args updated!")):
        # an args dump wrapped by a terminal (cut at a fixed width) or by an editor (at spaces)
        for joiner in ("", " "):
            res = _parse(joiner.join(message.split("\n")))
            if res is not None:
                return res
    rest, extra = strip_prefix(message)
    if not extra:
        return None
    res = _parse(rest)
    if res is None:
        return None
    kind, fields = res
    fields.update(extra)
    return kind, fields


def _parse(message: str) -> tuple[str, dict[str, Any]] | None:
    try:
        tree = grammar.parser().parse(message)
    except LarkError:
        return None
    except RecursionError:  # pathological nesting in an args dump
        return None
    kind = tree.data if isinstance(tree, Tree) else None
    if kind not in KIND_CLASSES:
        return None
    try:
        return kind, interpret(kind, tree, message)
    except (ValueError, IndexError, AttributeError, TypeError):
        return None
