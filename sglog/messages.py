"""One record's message -> (kind, typed fields), with the lark grammar.

The rule that matched names the kind; its generic key/value lists are typed
by the event class's ``FIELDS`` table (sglog/events.py).
"""

from __future__ import annotations

import re
from typing import Any

from lark import Token, Tree
from lark.exceptions import LarkError

from sglog import grammar
from sglog.events import KIND_CLASSES, guess, to_gb

MAX_PARSE_CHARS = 1 << 20  # longer records are not given to lark (unparsed, with a reason)


def _pairs(tree: Tree) -> list[tuple[str, str]]:
    out = []
    for sub in tree.iter_subtrees_topdown():
        if sub.data in ("colon_kv", "eq_kv"):
            key, value = sub.children[0], sub.children[-1]
            out.append((str(key), str(value)))
        elif sub.data == "time_elapsed":
            out.append(("elapsed", str(sub.children[0])))
    return out


def _tokens(tree: Tree, name: str) -> list[str]:
    return [str(t) for t in tree.scan_values(lambda v: isinstance(v, Token) and v.type == name)]


# -- python literal (server args) --------------------------------------------

_PY_CONST = {"True": True, "False": False, "None": None}


def pyvalue(node: Any) -> Any:
    """Turn a parsed Python literal into Python values (calls become dicts)."""
    if isinstance(node, Token):
        if node.type == "PY_STRING":
            import ast

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
        out = {}
        for arg in node.children:
            if isinstance(arg, Tree) and arg.data == "pyarg":
                out[str(arg.children[0])] = pyvalue(arg.children[1])
        return out
    if node.data == "pydict":
        return {_hashable(pyvalue(item.children[0])): pyvalue(item.children[1]) for item in node.children if isinstance(item, Tree)}
    if node.data in ("pylist", "pytuple"):
        return [pyvalue(c) for c in node.children if c is not None]
    raise ValueError(node.data)


def _hashable(v: Any) -> Any:
    return str(v) if isinstance(v, (dict, list)) else v


# -- per-rule interpretation ------------------------------------------------------

_CAPTURE_SUBJECT = re.compile(
    r"Capture (?:(?P<role>target|draft) (?P<stage>decode|verify|prefill|extend) |(?P<draft>draft) (?P<dext>extend )?|(?P<piece>piecewise) )?(?P<device>\w+) graph"
)
_PROGRESS = re.compile(r"^(?P<desc>.*?):? *(?P<pct>\d{1,3})%.*?(?P<n>\d+)/(?P<total>\d+)")
_STEP = re.compile(r"\(step (\d+)\)")


def interpret(kind: str, tree: Tree, message: str) -> dict[str, Any]:
    cls = KIND_CLASSES[kind]
    fields: dict[str, Any] = {}
    if kind == "server_args":
        value = tree.children[1]
        args = pyvalue(value)
        fields["args"] = args if isinstance(args, dict) else {"value": args}
        fields["style"] = "dict" if isinstance(value, Tree) and value.data == "pydict" else "dataclass"
        return fields
    if kind in ("cuda_graph_capture_begin", "cuda_graph_capture_end"):
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
    if kind == "cuda_graph_bs":
        values = pyvalue(tree.children[1])
        key = "num_tokens" if "num tokens" in message else "bs"
        fields[key] = values
        return fields
    if kind in ("weight_load_begin", "memory_pool_end"):
        fields["avail_mem"] = to_gb(_tokens(tree, "GB_VALUE")[0])
        return fields
    if kind == "weight_load_committed":
        nums = [float(x) for x in _tokens(tree, "NUMBER")]
        fields.update(elapsed=nums[0], overlap_window=nums[1], overlap_total=nums[2])
        return fields
    if kind == "memory_summary":
        first = _tokens(tree, "EQ_VALUE")[0]
        pairs = [("max_total_num_tokens", first)] + _pairs(tree)
        fields.update(cls.typed(pairs))
        return fields
    if kind in ("prefill_batch", "decode_batch"):
        head = _tokens(tree, "PREFILL_HEAD" if kind == "prefill_batch" else "DECODE_HEAD")[0]
        fields.update(head_fields(kind, head))
        fields.update(cls.typed(_pairs(tree)))
        fields.update(graph_backend_field(message))
        return fields
    if kind == "http_access":
        m = re.match(grammar.flat_rule_regex("http_access"), message)
        client = m.group("client_sep")[: -len(' - "')]
        fields.update(
            client=client,
            method=m.group("http_method"),
            path=m.group("http_path"),
            http_version=m.group("http_version"),
            status=int(m.group("http_status")),
            phrase=(m.group("http_phrase") or "").strip(),
        )
        return fields
    if kind == "progress":
        m = _PROGRESS.match(message.strip())
        if m:
            fields.update(desc=m.group("desc").strip(), percent=int(m.group("pct")), n=int(m.group("n")), total=int(m.group("total")))
        return fields
    if kind in ("nccl_log", "torch_log", "glog", "vllm_log", "uvicorn_log"):
        head = tree.children[0]
        text = str(tree.children[1]).strip() if len(tree.children) > 1 else ""
        fields["level"] = _level(kind, str(head))
        fields["message"] = text
        return fields
    if kind == "python_warning":
        head = str(tree.children[0])
        path, lineno, category = head.rsplit(":", 3)[0], head.rsplit(":", 3)[1], head.rsplit(":", 3)[2].strip()
        fields.update(path=path, lineno=int(lineno), category=category, message=message.split("\n", 1)[0][len(head):].strip())
        return fields
    if kind == "pip_package":
        name, version = message.split()[:2]
        fields.update(package=name, version=version)
        return fields
    if kind == "launch_command":
        fields["command"] = message[len("command="):] if message.startswith("command=") else message
        return fields
    if kind == "watchdog_timeout":
        m = re.search(r"watchdog_timeout=([\d.]+)(?:, self\.soft=(True|False))?", message)
        comp = message.split(" ", 1)[0] if not message.startswith("Watchdog") else "Scheduler"
        fields.update(component=comp, timeout=guess(m.group(1)), soft=m.group(2) == "True" if m.group(2) else False)
        return fields
    if kind == "scheduler_dead":
        m = re.search(r"(?:exit code:? |terminated with |Exit code: )(-?\d+)", message)
        r = re.search(r"Rank (\d+)", message)
        fields.update(exit_code=int(m.group(1)) if m else None, sched_rank=int(r.group(1)) if r else None)
        return fields
    if kind == "gloo":
        nums = [int(x) for x in re.findall(r"\d+", message)]
        fields.update(gloo_rank=nums[0], connected=nums[1], expected=nums[2])
        return fields
    if kind == "batch_oom":
        fields["phase"] = message.split(" ", 1)[0].lower()
        m = re.search(r"Try to allocate (\d+) tokens", message)
        if m:
            fields["tokens_requested"] = int(m.group(1))
        m = re.search(r"Ava(?:li|il)able tokens: (\d+)", message)
        if m:
            fields["tokens_available"] = int(m.group(1))
        return fields
    if kind == "retraction":
        fields["testing"] = message.startswith("Testing")
    fields.update(cls.typed(_pairs(tree)))
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


def _level(kind: str, head: str) -> str:
    head = head.strip()
    if kind == "uvicorn_log":
        return head.rstrip(": ").upper()
    if kind == "nccl_log":
        return head.split()[-1]
    if kind == "vllm_log":
        return head.split()[0]
    letter = head.split("]:")[-1].lstrip("[")[:1] if kind == "torch_log" else head[:1]
    return {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "FATAL"}.get(letter, letter)


def parse_message(message: str) -> tuple[str, dict[str, Any]] | None:
    """(kind, fields) of a message, or None if no rule matches."""
    if len(message) > MAX_PARSE_CHARS:
        return None
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
