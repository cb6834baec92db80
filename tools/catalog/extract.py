"""Mine the messages a Python package can print, from its source, with `ast`.

Standard library only: the mining step may run under a newer Python than the repo's venv
(releases from 2025 on need 3.12+ syntax), where nothing else is installed.

A message is built as a list of *alternatives* (one per branch of a conditional expression),
each a tuple of parts: constant text (`str`) or a placeholder (`Hole`). `finalise` cuts an
alternative to its first printed line and renders it as a template (`{}` per placeholder,
literal braces doubled) with one identifier per placeholder.

A message that prints a call's value (`logger.info(args.describe())`, `f"... {mode_str()}"`)
has a placeholder that remembers its callee; the package's functions and methods of that name
(`Returns`, gathered from every module) may say what it prints, and `mine_location` adds their
returns as the message's alternatives once every module is walked (`resolve`).

>>> mine_source("import logging\\nlogger = logging.getLogger()\\nlogger.info(f'{n=} ok')", "m.py")
[('n={} ok', 'info', 'log', 'm.py', 3, ('n',))]
"""

from __future__ import annotations

import ast
import builtins
import itertools
import math
import re
import tarfile
import warnings
import zipfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

BOM = b"\xef\xbb\xbf"
MAX_ALTERNATIVES = 16  # a message with more branch combinations keeps the first 16

# Folders and files of a package that never print to a server's log.
SKIP_DIRS = frozenset({"test", "tests", "benchmark", "benchmarks", "example", "examples"})

LOGGER_METHODS = {
    "debug": "debug",
    "info": "info",
    "warning": "warning",
    "warn": "warning",
    "error": "error",
    "exception": "exception",
    "critical": "critical",
    "fatal": "critical",
}
LEVEL_NAMES = {**LOGGER_METHODS, "notset": "debug"}

# SGLang's (and vLLM's) own printing helpers, by name across releases; other helpers are found
# by the words in their names (`HELPER_WORDS`), minus functions that configure logging.
KNOWN_HELPERS = frozenset(
    {
        "warning_once",
        "print_warning_once",
        "log_info_on_rank0",
        "rank0_log",
        "print_info_once",
        "info_once",
        "debug_once",
        "error_once",
        "warn_once",
        "log_once",
        "print_once",
        "rank0_print",
    }
)
HELPER_WORDS = frozenset({"log", "logger", "warn", "warning", "print"})
NOT_HELPER_WORDS = frozenset(
    {
        "get", "set", "init", "setup", "config", "configure", "create", "add", "remove",
        "enable", "disable", "is", "has", "make", "filter", "format", "formatter", "parse",
        "dir", "path", "file", "level", "name", "handler", "handlers", "prob", "probs",
    }
)  # fmt: skip
TRANSPARENT_CALLS = frozenset({"str", "int", "float", "repr", "round", "abs", "bool", "list", "tuple"})
PREFIX_CALLS = frozenset({"len", "type"})
TQDM_CALLS = frozenset({"tqdm", "trange"})
TQDM_METHODS = frozenset({"set_description", "set_description_str"})

PERCENT_SPEC = re.compile(r"%(?:\((?P<key>[^)]*)\))?[-#0 +]*(?:\*|\d+)?(?:\.(?:\*|\d+))?[hlL]?(?P<type>[diouxXeEfFgGcrsa%])")
WHITESPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Hole:
    """A placeholder: the printed value of an expression; `name` is a hint, or None.

    `call` is the callee's name when the expression is a call `f(...)` or `x.f(...)` whose
    text is printed as is: the package's functions named `f` may say what it prints (see
    `Returns`). It takes no part in comparisons, so a message's alternatives are the same with
    or without it.
    """

    name: str | None
    call: str | None = field(default=None, compare=False)

    def __repr__(self) -> str:
        return f"Hole(name={self.name!r}" + (f", call={self.call!r})" if self.call else ")")


Parts = tuple["str | Hole", ...]
# One mined message: (template, level, kind, module path, line, placeholder names).
Record = tuple[str, str, str, str, int, tuple[str, ...]]
# A message that prints a call's value, kept to be resolved: (alternatives, level, kind, path, line).
Deferred = tuple[tuple[Parts, ...], str, str, str, int]


# ---------------------------------------------------------------- names


def snake(raw: str | None) -> str | None:
    """An identifier `[a-z_][a-z0-9_]*` from an expression's name, or None.

    >>> snake("maxTotalNumTokens"), snake("_x"), snake("2nd"), snake("a-b")
    ('max_total_num_tokens', 'x', None, 'a_b')
    """
    if not raw:
        return None
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", raw).lower()
    s = re.sub(r"[^a-z0-9_]+", "_", s)
    s = re.sub(r"_+", "_", s).strip("_")
    if not s or s[0].isdigit():
        return None
    return s


def expr_name(node: ast.AST | None) -> str | None:
    """The name a placeholder takes from the expression it prints.

    >>> [expr_name(ast.parse(s, mode="eval").body) for s in ["self.a.b", "x.y()", "len(reqs)", "d['k']", "t / 1e9"]]
    ['b', 'y', 'len_reqs', 'k', 't']
    """
    match node:
        case ast.Name(id=ident):
            return ident
        case ast.Attribute(attr=attr):
            return attr
        case ast.Call(func=ast.Name(id=fn), args=[first, *_]) if fn in PREFIX_CALLS:
            inner = expr_name(first)
            return f"{fn}_{inner}" if inner else fn
        case ast.Call(func=ast.Name(id=fn), args=[first, *_]) if fn in TRANSPARENT_CALLS:
            return expr_name(first)
        case ast.Call(func=func):
            return expr_name(func)
        case ast.Subscript(value=value, slice=ast.Constant(value=str(key))):
            return key
        case ast.Subscript(value=value):
            return expr_name(value)
        case ast.BinOp(left=left):
            return expr_name(left)
        case ast.UnaryOp(operand=operand) | ast.Starred(value=operand) | ast.Await(value=operand):
            return expr_name(operand)
        case ast.IfExp(body=body):
            return expr_name(body)
        case ast.FormattedValue(value=value):
            return expr_name(value)
    return None


def call_name(func: ast.AST) -> str | None:
    """`f` for `f(...)` and `a.b.f(...)`."""
    match func:
        case ast.Name(id=ident):
            return ident
        case ast.Attribute(attr=attr):
            return attr
    return None


def words(name: str) -> list[str]:
    """The words of a snake_case or camelCase name, lower case."""
    return [w for w in (snake(name) or "").split("_") if w]


# Callee names never looked up in the package's functions: Python's own (builtins, and the
# methods of str, bytes and the containers, which the package's objects rarely are) and the
# standard library's that return text of their own; dunders (`__str__` is mined as `str`).
FOREIGN_CALLS = frozenset(
    {n for t in (str, bytes, dict, list, set, tuple, int, float) for n in dir(t)}
    | set(dir(builtins))
    | {"hexdigest", "isoformat", "strftime", "basename", "dirname", "abspath", "realpath", "getcwd", "getenv", "read"}
    | {"readline", "name", "json", "text", "dumps", "pformat", "format_exc", "gethostname", "platform", "get_device_name"}
)


def resolvable(name: str | None) -> bool:
    """Whether a call to `name` may be resolved to the package's functions of that name.

    >>> resolvable("get_optional_modes_logging"), resolvable("join"), resolvable("__repr__")
    (True, False, False)
    """
    return name is not None and name != "" and name not in FOREIGN_CALLS and not (name.startswith("__") and name.endswith("__"))


def hole(node: ast.AST) -> Hole:
    """The placeholder for `node`, with its callee if it is a call (through `str(...)`).

    >>> hole(ast.parse("str(args.describe(1))", mode="eval").body)
    Hole(name='describe', call='describe')
    """
    target = node
    while isinstance(target, ast.Call) and isinstance(target.func, ast.Name) and target.func.id == "str" and len(target.args) == 1:
        target = target.args[0]
    callee = call_name(target.func) if isinstance(target, ast.Call) else None
    return Hole(expr_name(node), callee if resolvable(callee) else None)


def plain(part: str | Hole) -> str | Hole:
    """`part` without its callee: text that `%` or `.format` goes over is not resolved."""
    return Hole(part.name) if isinstance(part, Hole) and part.call else part


# ---------------------------------------------------------------- building messages


class Builder:
    """Evaluates message expressions to alternatives, given a function's local strings."""

    def __init__(self, scope: dict[str, list[Parts]]):
        self.scope = scope

    def stringy(self, node: ast.AST) -> bool:
        """True if `node` is a string the miner can read (constant, f-string, built from them)."""
        match node:
            case ast.Constant(value=str()) | ast.JoinedStr():
                return True
            case ast.BinOp(op=ast.Add(), left=left, right=right):
                return self.stringy(left) or self.stringy(right)
            case ast.BinOp(op=ast.Mod(), left=left):
                return self.stringy(left)
            case ast.Call(func=ast.Attribute(value=value, attr="format")):
                return self.stringy(value)
            case ast.IfExp(body=body, orelse=orelse):
                return self.stringy(body) or self.stringy(orelse)
            case ast.Name(id=ident):
                return ident in self.scope
        return False

    def build(self, node: ast.AST) -> list[Parts]:
        """The alternatives `node` prints; anything not constant becomes a placeholder."""
        if not self.stringy(node):
            return [(hole(node),)]
        match node:
            case ast.Constant(value=str(text)):
                return [(text,)]
            case ast.JoinedStr(values=values):
                return product([self.formatted(v) for v in values])
            case ast.BinOp(op=ast.Add(), left=left, right=right):
                return product([self.build(left), self.build(right)])
            case ast.BinOp(op=ast.Mod(), left=left, right=right):
                args = right.elts if isinstance(right, ast.Tuple) else [right]
                return [percent_format(alt, args) for alt in self.build(left)]
            case ast.Call(func=ast.Attribute(value=value), args=args, keywords=keywords):
                kwargs = {k.arg: k.value for k in keywords if k.arg}
                return [brace_format(alt, args, kwargs) for alt in self.build(value)]
            case ast.IfExp(body=body, orelse=orelse):
                return dedupe(self.build(body) + self.build(orelse))
            case ast.Name(id=ident):
                return self.scope[ident]
        raise AssertionError(ast.dump(node))  # pragma: no cover - stringy() covers build()

    def formatted(self, value: ast.AST) -> list[Parts]:
        """One piece of an f-string: constant text, a substituted local string, or a placeholder."""
        match value:
            case ast.Constant(value=str(text)):
                return [(text,)]
            case ast.FormattedValue(value=inner, conversion=conv, format_spec=None) if conv in (-1, 115):
                return self.build(inner)
        return [(Hole(expr_name(value)),)]


def product(pieces: list[list[Parts]]) -> list[Parts]:
    """Every concatenation of one alternative from each piece (at most MAX_ALTERNATIVES)."""
    combos = itertools.islice(itertools.product(*pieces), MAX_ALTERNATIVES)
    return dedupe([tuple(itertools.chain.from_iterable(c)) for c in combos])


def dedupe(alternatives: list[Parts]) -> list[Parts]:
    return list(dict.fromkeys(alternatives))[:MAX_ALTERNATIVES]


def arg_piece(arg: ast.AST | None, name: str | None, conv: str = "s") -> tuple[str | Hole, ...]:
    """What a formatting argument prints: its text if constant, else a named placeholder."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and conv in ("s", ""):
        return (arg.value,)
    callee = hole(arg).call if arg is not None and conv == "s" else None
    return (Hole(name if name is not None else expr_name(arg), callee),)


def percent_format(parts: Parts, args: list[ast.AST]) -> Parts:
    """Apply `%`-formatting: the n-th specifier prints the n-th argument.

    >>> percent_format(("a %s b %d%%", Hole("z")), ast.parse("(x.y, len(q))", mode="eval").body.elts)
    ('a ', Hole(name='y'), ' b ', Hole(name='len_q'), '%', Hole(name='z'))
    """
    mapping = args[0] if len(args) == 1 and isinstance(args[0], ast.Dict) else None
    keyed = {k.value: v for k, v in zip(mapping.keys, mapping.values) if isinstance(k, ast.Constant)} if mapping else {}
    out: list[str | Hole] = []
    n = 0
    for part in parts:
        if isinstance(part, Hole):
            out.append(plain(part))
            continue
        pos = 0
        for m in PERCENT_SPEC.finditer(part):
            out.append(part[pos : m.start()])
            pos = m.end()
            if m["type"] == "%":
                out.append("%")
            elif m["key"] is not None:
                out.extend(arg_piece(keyed.get(m["key"]), m["key"] if m["key"] not in keyed else None, m["type"]))
            else:
                out.extend(arg_piece(args[n] if n < len(args) else None, None, m["type"]))
                n += 1
        out.append(part[pos:])
    return tuple(p for p in out if p != "")


def brace_format(parts: Parts, args: list[ast.AST], kwargs: dict[str, ast.AST]) -> Parts:
    """Apply `str.format`: `{}`, `{0}`, `{name}`, `{name.attr:spec}`, `{{`, `}}`.

    >>> brace_format(("{} and {k.v:>3} {{x}}",), [ast.Name("a")], {"k": ast.Name("b")})
    (Hole(name='a'), ' and ', Hole(name='v'), ' {x}')
    """
    out: list[str | Hole] = []
    auto = 0
    for part in parts:
        if isinstance(part, Hole):
            out.append(plain(part))
            continue
        i, buf = 0, []
        while i < len(part):
            c = part[i]
            if c in "{}" and part[i : i + 2] in ("{{", "}}"):
                buf.append(c)
                i += 2
                continue
            if c != "{":
                buf.append(c)
                i += 1
                continue
            depth, j = 0, i
            while j < len(part):
                depth += {"{": 1, "}": -1}.get(part[j], 0)
                if depth == 0:
                    break
                j += 1
            field = re.split(r"[:!]", part[i + 1 : j], maxsplit=1)[0]
            conv = "s" if ":" not in part[i + 1 : j] and "!" not in part[i + 1 : j] else ""
            head, *attrs = re.split(r"[.\[]", field)
            out.append("".join(buf))
            buf = []
            if head == "" or head.isdigit():
                index = auto if head == "" else int(head)
                auto += head == ""
                arg = args[index] if index < len(args) else None
                out.extend(arg_piece(arg, None, conv) if not attrs else (Hole(attrs[-1].rstrip("]'\"")),))
            else:
                value = kwargs.get(head)
                name = attrs[-1].rstrip("]'\"") if attrs else head
                out.extend(arg_piece(value, name, conv) if value is not None and not attrs else (Hole(name),))
            i = j + 1
        out.append("".join(buf))
    return tuple(p for p in out if p != "")


def finalise(parts: Parts) -> tuple[str, tuple[str, ...]] | None:
    """The template of the first printed line, and its placeholder names; None if no text.

    >>> finalise(("\\n  Load   weight ", Hole("avail_mem"), " GB {x}\\nmore", Hole(None)))
    ('Load weight {} GB {{x}}', ('avail_mem',))
    """
    lines: list[list[str | Hole]] = [[]]
    for part in parts:
        if isinstance(part, Hole):
            lines[-1].append(part)
            continue
        first, *rest = part.split("\n")
        lines[-1].append(first)
        lines.extend([r] for r in rest)
    line = next((ln for ln in lines if any(isinstance(p, Hole) or p.strip() for p in ln)), None)
    if line is None:
        return None
    merged: list[str | Hole] = []
    for p in line:
        if isinstance(p, str) and merged and isinstance(merged[-1], str):
            merged[-1] += p
        else:
            merged.append(p)
    merged = [WHITESPACE.sub(" ", p) if isinstance(p, str) else p for p in merged]
    if isinstance(merged[0], str):
        merged[0] = merged[0].lstrip()
    if isinstance(merged[-1], str):
        merged[-1] = merged[-1].rstrip()
    merged = [p for p in merged if p != ""]
    if not any(isinstance(p, str) and p.strip() for p in merged):
        return None
    names: list[str] = []
    text = []
    for p in merged:
        if isinstance(p, str):
            text.append(p.replace("{", "{{").replace("}", "}}"))
            continue
        text.append("{}")
        base = snake(p.name) or f"arg{len(names)}"
        name, k = base, 2
        while name in names:
            name, k = f"{base}_{k}", k + 1
        names.append(name)
    return "".join(text), tuple(names)


# ---------------------------------------------------------------- walking a module


def is_logger(node: ast.AST) -> bool:
    """`logger`, `self.logger`, `_LOG`, `logging`, `logging.getLogger(...)`, `init_logger(...)`."""
    match node:
        case ast.Call(func=func):
            return "logger" in (call_name(func) or "").lower()
    name = (call_name(node) or "").lower()
    return name.endswith(("logger", "log")) or name == "logging"


def logger_level(node: ast.AST) -> str:
    """The level of `logger.log(LEVEL, ...)`: `logging.WARNING` -> warning; unknown -> info."""
    name = (call_name(node) or "").lower()
    return LEVEL_NAMES.get(name, "info")


def helper_level(name: str) -> tuple[str, str] | None:
    """(level, kind) of a helper called `name`, or None if it is not a printing helper.

    >>> helper_level("print_warning_once"), helper_level("rank0_print"), helper_level("get_logger")
    (('warning', 'log'), ('print', 'print'), None)
    """
    ws = words(name)
    if name not in KNOWN_HELPERS and (not HELPER_WORDS & set(ws) or NOT_HELPER_WORDS & set(ws)):
        return None
    for word, level in (
        ("exception", "exception"), ("error", "error"), ("critical", "critical"), ("fatal", "critical"),
        ("warn", "warning"), ("warning", "warning"), ("debug", "debug"), ("info", "info"), ("log", "info"),
    ):  # fmt: skip
        if word in ws:
            return level, "log"
    if "print" in ws:
        return "print", "print"
    return "info", "log"


class ModuleMiner:
    """Finds the messages of one module: walks statements in order, keeping local strings."""

    def __init__(self, path: str, prints: bool):
        self.path = path
        self.prints = prints  # whether bare print() calls count in this module
        self.records: list[Record] = []
        self.returns = Returns()  # what this module's functions return
        self.deferred: list[Deferred] = []  # messages printing a call's value, resolved later
        self.function: Function | None = None  # the innermost function being walked

    def emit(self, node: ast.stmt | ast.expr, alternatives: list[Parts], level: str, kind: str) -> None:
        for alt in alternatives:
            done = finalise(alt)
            if done:
                self.records.append((done[0], level, kind, self.path, node.lineno, done[1]))
        if any(isinstance(p, Hole) and p.call for alt in alternatives for p in alt):
            self.deferred.append((tuple(alternatives), level, kind, self.path, node.lineno))

    # statements -------------------------------------------------------------

    def body(self, stmts: list[ast.stmt], scope: dict[str, list[Parts]], in_str: bool = False) -> None:
        for stmt in stmts:
            self.stmt(stmt, scope, in_str)

    in_class = False  # inside a class body (its methods' `__str__`/`__repr__` returns count)
    in_function = False  # a nested function sees its enclosing function's local strings

    def stmt(self, stmt: ast.stmt, scope: dict[str, list[Parts]], in_str: bool) -> None:
        b = Builder(scope)
        match stmt:
            case ast.FunctionDef() | ast.AsyncFunctionDef():
                self.exprs([*stmt.decorator_list, stmt.args], scope)
                saved, outer = (self.in_class, self.in_function), self.function
                is_str = self.in_class and stmt.name in ("__str__", "__repr__")
                inner = dict(scope) if self.in_function else {}
                self.in_class, self.in_function = False, True
                self.function = (AsyncFunction if isinstance(stmt, ast.AsyncFunctionDef) else Function)(stmt.name)
                self.body(stmt.body, inner, in_str=is_str)
                self.returns.add(self.function)
                self.in_class, self.in_function = saved
                self.function = outer
                return
            case ast.ClassDef():
                self.exprs([*stmt.decorator_list, *stmt.bases], scope)
                saved = self.in_class, self.in_function
                self.in_class, self.in_function = True, False
                self.body(stmt.body, {})
                self.in_class, self.in_function = saved
                return
            case ast.If():
                self.exprs([stmt.test], scope)
                left, right = dict(scope), dict(scope)
                self.body(stmt.body, left, in_str)
                self.body(stmt.orelse, right, in_str)
                _merge(scope, left, right)
                return
            case ast.For() | ast.AsyncFor() | ast.While():
                self.exprs([getattr(stmt, "iter", None) or stmt.test], scope)
                inner = dict(scope)
                self.body(stmt.body, inner, in_str)
                self.body(stmt.orelse, inner, in_str)
                _merge(scope, inner, dict(scope))
                return
            case ast.With() | ast.AsyncWith():
                self.exprs([i.context_expr for i in stmt.items], scope)
                self.body(stmt.body, scope, in_str)
                return
            case ast.Try() | ast.TryStar():
                self.body(stmt.body, scope, in_str)
                for handler in stmt.handlers:
                    self.body(handler.body, scope, in_str)
                self.body(stmt.orelse, scope, in_str)
                self.body(stmt.finalbody, scope, in_str)
                return
            case ast.Match():
                self.exprs([stmt.subject], scope)
                for case in stmt.cases:
                    self.body(case.body, scope, in_str)
                return
        self.exprs([stmt], scope)
        if isinstance(stmt, ast.Return) and self.function is not None:
            self.function.returned(b, stmt.value)
        match stmt:
            case ast.Assign(targets=targets, value=value):
                for target in targets:
                    if isinstance(target, ast.Name):
                        _assign(scope, target.id, b.build(value) if b.stringy(value) else None)
            case ast.AnnAssign(target=ast.Name(id=ident), value=value) if value is not None:
                _assign(scope, ident, b.build(value) if b.stringy(value) else None)
            case ast.AugAssign(target=ast.Name(id=ident), op=ast.Add(), value=value) if ident in scope:
                scope[ident] = product([scope[ident], b.build(value)])
            case ast.AugAssign(target=ast.Name(id=ident)):
                scope.pop(ident, None)
            case ast.Return(value=value) if in_str and value is not None:
                self.emit(stmt, b.build(value), "str", "str")
            case ast.Raise(exc=ast.Call(args=[first, *_])) if b.stringy(first):
                self.emit(stmt, b.build(first), "raise", "raise")
            case ast.Raise(exc=ast.Call(args=[ast.Call() as first], keywords=[])):
                self.emit(stmt, [(hole(first),)], "raise", "raise")  # only if the call resolves

    # expressions ------------------------------------------------------------

    def exprs(self, nodes: list[ast.AST | None], scope: dict[str, list[Parts]]) -> None:
        b = Builder(scope)
        for top in nodes:
            if top is None:
                continue
            for node in ast.walk(top):
                if isinstance(node, ast.Call):
                    self.call(node, b)
                elif isinstance(node, (ast.Yield, ast.YieldFrom)) and self.function is not None:
                    self.function.other = True  # a generator: calling it prints no string

    def call(self, node: ast.Call, b: Builder) -> None:
        func, args = node.func, node.args
        name = call_name(func)
        kw = {k.arg: k.value for k in node.keywords if k.arg}
        if name is None:
            return
        receiver = func.value if isinstance(func, ast.Attribute) else None
        if receiver is not None and is_logger(receiver):
            method = name.removesuffix("_once")
            if method in LOGGER_METHODS:
                msg = args[0] if args else kw.get("msg")
                if msg is not None:
                    self.emit(node, self.lazy(b, msg, args[1:], always=True), LOGGER_METHODS[method], "log")
                return
            if name == "log" and len(args) >= 2:
                self.emit(node, self.lazy(b, args[1], args[2:], always=True), logger_level(args[0]), "log")
                return
        if name == "warn" and (receiver is None or call_name(receiver) == "warnings"):
            msg = args[0] if args else kw.get("message")
            if msg is not None:
                self.emit(node, b.build(msg), "warning", "warn")
            return
        if name == "print" and receiver is None:
            if self.prints and args:
                sep = kw.get("sep")
                sep_text = sep.value if isinstance(sep, ast.Constant) and isinstance(sep.value, str) else " "
                pieces = []
                for i, arg in enumerate(args):
                    if i:
                        pieces.append([(sep_text,)])
                    pieces.append(b.build(arg))
                self.emit(node, product(pieces), "print", "print")
            return
        if name in TQDM_CALLS:
            if "desc" in kw:
                self.emit(node, b.build(kw["desc"]), "progress", "progress")
            return
        if name in TQDM_METHODS and receiver is not None:
            desc = args[0] if args else kw.get("desc")
            if desc is not None:
                self.emit(node, b.build(desc), "progress", "progress")
            return
        found = helper_level(name)
        if found is None:
            return
        level, kind = found
        candidates = [(i, a) for i, a in enumerate(args[:2]) if b.stringy(a)]
        if candidates:
            i, msg = candidates[0]
            self.emit(node, self.lazy(b, msg, args[i + 1 :], always=False), level, kind)
        elif (msg := kw.get("msg", kw.get("message"))) is not None and b.stringy(msg):
            self.emit(node, b.build(msg), level, kind)
        else:  # a call's value as the message: the last argument (nothing to format after it)
            msg = kw.get("msg", kw.get("message", args[-1] if 0 < len(args) <= 2 else None))
            if isinstance(msg, ast.Call):
                self.emit(node, [(hole(msg),)], level, kind)  # only if the call resolves

    @staticmethod
    def lazy(b: Builder, msg: ast.AST, rest: list[ast.AST], always: bool) -> list[Parts]:
        """logging's lazy `%` arguments: applied when there are arguments after the message."""
        alternatives = b.build(msg)
        if not rest:
            return alternatives
        has_spec = any(isinstance(p, str) and PERCENT_SPEC.search(p) for alt in alternatives for p in alt)
        if not always and not has_spec:
            return alternatives
        return [percent_format(alt, rest) for alt in alternatives]


TAIL = Hole("tail")  # what a message variable grew by in a branch or a loop: an open tail


def _merge(scope: dict[str, list[Parts]], left: dict[str, list[Parts]], right: dict[str, list[Parts]]) -> None:
    """The local strings after two branches (or a loop body and its skipping), into `scope`.

    A message a branch extended with `+=` leaves an open tail: `before` and `before{tail}`
    (one placeholder however many pieces were added), so that conditional pieces neither
    multiply the alternatives nor go missing.
    """
    merged: dict[str, list[Parts]] = {}
    for name in sorted(left.keys() | right.keys()):
        before = scope.get(name) or []
        alternatives = []
        for alt in (left.get(name, scope.get(name)) or []) + (right.get(name, scope.get(name)) or []):
            base = next((b for b in before if len(alt) > len(b) and alt[: len(b)] == b), None)
            if base is not None:
                alt = base if base[-1:] == (TAIL,) else base + (TAIL,)
            alternatives.append(alt)
        merged[name] = dedupe(alternatives)
    scope.clear()
    scope.update(merged)


def _assign(scope: dict[str, list[Parts]], name: str, value: list[Parts] | None) -> None:
    if value is None:
        scope.pop(name, None)
    else:
        scope[name] = value


# ---------------------------------------------------------------- functions that build messages

MAX_DEPTH = 3  # calls resolved inside a resolved function's text, at most this deep


@dataclass
class Function:
    """One function being walked: the alternatives its `return`s build, and whether it returns
    anything else (a value the miner cannot read, a bare `return`, a `yield`, or a coroutine)."""

    name: str
    other: bool = False
    alternatives: list[Parts] = field(default_factory=list)

    def returned(self, b: Builder, value: ast.AST | None) -> None:
        if value is not None and b.stringy(value):
            self.alternatives.extend(b.build(value))
        elif value is not None and own_call(value) and (found := hole(value)).call:
            self.alternatives.append((found,))  # `return self.other(...)`: resolved in turn
        elif isinstance(value, ast.Call) and isinstance(value.func, ast.Name) and value.func.id in ("str", "repr"):
            self.alternatives.append((hole(value),))  # a string, of unknown text
        else:
            self.other = True


def own_call(node: ast.AST | None) -> bool:
    """`f(...)`, `self.f(...)` or `cls.f(...)`: a call to the package's own code, most likely
    (`json.loads(...)` or `obj.f(...)` may reach anything; `Name(...)` builds an object)."""
    match node:
        case ast.Call(func=ast.Name(id=ident)):
            return not ident[:1].isupper()
        case ast.Call(func=ast.Attribute(value=ast.Name(id="self" | "cls"))):
            return True
    return False


class AsyncFunction(Function):
    """An `async def`: calling it gives a coroutine, not the string it returns."""


class Returns:
    """The package's functions and methods by name: the alternatives their `return`s build.

    A name resolves only if every function or method of that name in the package returns
    strings the miner reads (one returning anything else, and a call could reach it; one that
    returns nothing, such as an abstract method or a Protocol's stub, is implemented elsewhere),
    all of them build the same alternatives (copies of one function; methods of several classes
    that say different things are a dispatch on the object, which the miner does not follow),
    and there are at most MAX_ALTERNATIVES of them.
    """

    def __init__(self) -> None:
        self.found: dict[str, list[tuple[Parts, ...]]] = {}  # name -> each definition's alternatives
        self.other: set[str] = set()

    def add(self, fn: Function) -> None:
        if not resolvable(fn.name):
            return
        if fn.other or not fn.alternatives or isinstance(fn, AsyncFunction):
            self.other.add(fn.name)
        else:
            self.found.setdefault(fn.name, []).append(tuple(dict.fromkeys(fn.alternatives)))

    def update(self, more: Returns) -> None:
        self.other |= more.other
        for name, definitions in more.found.items():
            self.found.setdefault(name, []).extend(definitions)

    def get(self, name: str) -> tuple[Parts, ...] | None:
        if name in self.other or name not in self.found:
            return None
        first, *rest = self.found[name]
        if any(d != first for d in rest) or len(first) > MAX_ALTERNATIVES:
            return None
        return first


def substitute(alternatives: list[Parts], table: Returns, outer: frozenset[str] = frozenset()) -> list[Parts]:
    """A message's alternatives with its calls replaced by what their functions return.

    Each callee the table resolves is substituted everywhere in the message or nowhere: in
    order of first appearance, while the message stays within MAX_ALTERNATIVES (a callee that
    would take it past stays a placeholder; nothing is cut arbitrarily). A function's own text
    is resolved the same way, at most MAX_DEPTH deep and not into a function being resolved.
    """
    options: dict[str, list[Parts]] = {}
    for alt in alternatives:
        for part in alt:
            callee = part.call if isinstance(part, Hole) else None
            if callee and callee not in options and callee not in outer and len(outer) < MAX_DEPTH:
                if (found := table.get(callee)) is not None:
                    options[callee] = substitute(list(found), table, outer | {callee})
    chosen: set[str] = set()
    for callee in options:
        trial = chosen | {callee}
        size = sum(math.prod(len(options[p.call]) for p in alt if isinstance(p, Hole) and p.call in trial) for alt in alternatives)
        if size <= MAX_ALTERNATIVES:
            chosen = trial
    out: list[Parts] = []
    for alt in alternatives:
        out.extend(product([options[p.call] if isinstance(p, Hole) and p.call in chosen else [(p,)] for p in alt]))
    return dedupe(out)


def resolve(deferred: list[Deferred], table: Returns) -> list[Record]:
    """The templates the deferred messages gain from the package's functions: at the message's
    level, kind and line, other than the templates the message has without them."""
    out: list[Record] = []
    for alternatives, level, kind, path, line in deferred:
        seen = {done[0] for alt in alternatives if (done := finalise(alt))}
        for new in substitute(list(alternatives), table):
            done = finalise(new)
            if done and done[0] not in seen:
                seen.add(done[0])
                out.append((done[0], level, kind, path, line, done[1]))
    return out


def mine_module(source: bytes | str, path: str, prints: bool = True) -> ModuleMiner:
    """Walk one module's source; raises SyntaxError if this Python cannot parse it."""
    if isinstance(source, bytes):
        source = source.removeprefix(BOM)
    else:
        source = source.removeprefix("\ufeff")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tree = ast.parse(source, filename=path)
    miner = ModuleMiner(path, prints)
    miner.body(tree.body, {})
    return miner


def mine_source(source: bytes | str, path: str, prints: bool = True) -> list[Record]:
    """The messages of one module's source (calls resolved to the module's own functions)."""
    miner = mine_module(source, path, prints)
    return miner.records + resolve(miner.deferred, miner.returns)


# ---------------------------------------------------------------- reading releases


def skipped(rel: str) -> bool:
    """Modules that never print to a server's log: tests, benchmarks, examples.

    >>> [skipped(p) for p in ["srt/a.py", "test/x.py", "srt/tests/y.py", "srt/test_z.py", "bench_serving.py"]]
    [False, True, True, True, False]
    """
    *dirs, name = rel.split("/")
    return bool(SKIP_DIRS & set(dirs)) or name.startswith("test_") or name.endswith("_test.py") or name == "conftest.py"


def sources(location: Path, package: str) -> Iterator[tuple[str, bytes]]:
    """(path relative to the package, bytes) of every module in a wheel, sdist or folder."""
    if location.is_dir():
        root = _package_root([p.relative_to(location).as_posix() for p in location.rglob("*.py")], package)
        for p in sorted(location.rglob("*.py")):
            rel = p.relative_to(location).as_posix()
            if root is not None and rel.startswith(root):
                yield rel[len(root) :], p.read_bytes()
        return
    if zipfile.is_zipfile(location):
        with zipfile.ZipFile(location) as zf:
            names = [n for n in zf.namelist() if n.endswith(".py")]
            root = _package_root(names, package)
            for n in sorted(names):
                if root is not None and n.startswith(root):
                    yield n[len(root) :], zf.read(n)
        return
    with tarfile.open(location) as tf:
        members = {m.name: m for m in tf.getmembers() if m.isfile() and m.name.endswith(".py")}
        root = _package_root(list(members), package)
        for n in sorted(members):
            if root is not None and n.startswith(root):
                f = tf.extractfile(members[n])
                if f is not None:
                    yield n[len(root) :], f.read()


def _package_root(names: list[str], package: str) -> str | None:
    """The shortest prefix `.../package/` that holds `__init__.py`."""
    roots = [n[: -len("__init__.py")] for n in names if n.endswith(f"{package}/__init__.py")]
    roots = [r for r in roots if r == f"{package}/" or r.endswith(f"/{package}/")]
    return min(roots, key=lambda r: (r.count("/"), r)) if roots else None


def sglang_prints(rel: str) -> bool:
    """SGLang's `print` calls count in `srt/` and in top-level modules."""
    return rel.startswith("srt/") or "/" not in rel


def mine_location(location: Path, package: str, prints: Callable[[str], bool] | None = None, skip: Callable[[str], object] | None = None) -> dict:
    """Mine one release: {"records": [...], "files": n, "failed": [module paths]}.  ``skip``: modules
    (paths relative to the package) left out besides tests, benchmarks and examples."""
    if prints is None:
        prints = sglang_prints if package == "sglang" else (lambda rel: True)
    records: list[Record] = []
    failed: list[str] = []
    files = 0
    table = Returns()  # the whole package's functions: a message may call one of another module
    deferred: list[Deferred] = []
    for rel, data in sources(location, package):
        if skipped(rel) or (skip is not None and skip(rel)):
            continue
        files += 1
        try:
            miner = mine_module(data, rel, prints(rel))
        except (SyntaxError, ValueError, UnicodeDecodeError, RecursionError):
            failed.append(rel)
            continue
        records.extend(miner.records)
        table.update(miner.returns)
        deferred.extend(miner.deferred)
    records.extend(resolve(deferred, table))
    return {"records": records, "files": files, "failed": failed}
