"""What a rule is: permanent code, kebab-case name, severity, declared options, documentation, pure check.

A rule reads one :class:`~sglog.runs.build.Run` and returns findings.  It never
prints, reads files, looks at the clock or starts processes.  Its thresholds
are declared :class:`Option` values (overridable per call), and its docstring
holds the documentation sections `sglog explain` prints::

    One-line summary.

    ## What it finds
    ## Why it matters
    ## Evidence
    ## Suggested fix
    ## Fix safety
    ## Example

The `Example` section starts with ``Case: <title>``, a case of the rule's
``tests/rules/<rule-name>.cases``: tests/test_rule_examples.py runs that case
and checks the section's backticked quotes against the case's lines and the
finding (see :func:`example_case`).

Args patches map SGLang flags to values: `"0.88"`; `None` removes the
flag; `"true"` turns on a switch that takes no value (`--disable-custom-all-reduce`).

Every rule declares its :attr:`Rule.triggers`: what of the run it reads, as event kinds (the
kinds of :data:`sglog.events.KIND_CLASSES`: `server_args`, `decode_batch`, `nan_logits`...) and
run facts (:data:`FACTS`: `args`, `memory`, `crash`...), including what the helpers it calls
read.  `sglog rules` and `sglog explain` show them; diagnose runs a rule on a run only when one
of its triggers is present in it (:meth:`Rule.triggered`).
"""

from __future__ import annotations

import inspect
import math
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from sglog import schema
from sglog.findings import SEVERITIES, SEVERITY_RANK, Evidence, Finding, Fix

DOC_SECTIONS = ("What it finds", "Why it matters", "Evidence", "Suggested fix", "Fix safety", "Example")

# the run facts a rule may declare as a trigger (next to event kinds): what each stands for, and
# when a run has it (facts a run always has, or whose absence a rule may act on, are always present)
FACTS: dict[str, str] = {
    "args": "the server args (`run.args`: the server_args line, the launch command)",
    "version": "the SGLang version (`run.version`)",
    "memory": "the memory budget (`run.memory`: from the startup memory lines)",
    "startup": "the startup phases and their times (`run.startup`)",
    "batches": "the batch lines as frames (`run.batches`, `run.decode`, `run.prefill`; the timeline's windows)",
    "access": "the HTTP access lines as a frame (`run.access`)",
    "ending": "how the log ends (`run.ending`: ready, serving, crashed, cut off)",
    "crash": "the run's crash (`facts.crash`: root-cause error, phase, fan-out, signatures), which crash rules claim",
    "text": "words in lines of any kind (`run.mentions`, `run.lowered_texts`, lines near an error)",
}


def has_fact(run, fact: str) -> bool:
    """Does the run have this fact (FACTS)?  True for those a run always has ('memory', 'text')."""
    if fact == "args":
        return bool(run.args)
    if fact == "version":
        return run.version is not None
    if fact == "startup":
        return run.startup is not None
    if fact == "batches":
        return run.batches.height > 0
    if fact == "access":
        return run.access.height > 0
    if fact == "ending":
        return run.ending is not None
    if fact == "crash":
        from sglog.rules import facts

        return facts.crash(run) is not None
    return True


_HEADING = re.compile(r"^## (.+?)\s*$", re.M)


@dataclass(frozen=True)
class Option:
    """A threshold of a rule: its default and what it means."""

    default: Any
    help: str


def parse_doc(docstring: str | None) -> tuple[str, dict[str, str]]:
    """(summary, {section: text}) of a rule docstring."""
    text = inspect.cleandoc(docstring or "")
    parts = _HEADING.split(text)
    summary = parts[0].strip().split("\n\n")[0].replace("\n", " ").strip()
    sections: dict[str, str] = {}
    for i in range(1, len(parts) - 1, 2):
        sections[parts[i].strip()] = parts[i + 1].strip()
    return summary, sections


_CASE = re.compile(r"Case:\s*(.+?)\s*(?:\n\s*\n|\Z)", re.S)


def example_case(example: str) -> tuple[str | None, str]:
    """(title, text) of an `Example` section: the title of the case it describes (its first
    paragraph, ``Case: <title of a case in tests/rules/<rule-name>.cases>``, which
    tests/test_rule_examples.py runs) and the text after it; (None, the section) without one."""
    m = _CASE.match(example.strip())
    if m is None:
        return None, example.strip()
    return " ".join(m.group(1).split()), example.strip()[m.end() :].strip()


class Rule:
    """Base class; subclasses set the class attributes and implement `_check`."""

    code: ClassVar[str] = ""
    name: ClassVar[str] = ""
    severity: ClassVar[str] = "warning"
    options: ClassVar[dict[str, Option]] = {}
    # what the rule reads: event kinds and FACTS (see the module docs); every rule declares it
    triggers: ClassVar[tuple[str, ...]] = ()

    def __init_subclass__(cls, **kw: Any) -> None:
        super().__init_subclass__(**kw)
        if cls.code:
            assert cls.severity in SEVERITIES, (cls.code, cls.severity)
            cls.summary, cls.doc = parse_doc(cls.__doc__)

    summary: ClassVar[str] = ""
    doc: ClassVar[dict[str, str]] = {}
    # each rule class's own, set by symbols() on first use (declared only: no value here, so a subclass's __dict__ tells)
    _symbols: ClassVar[frozenset[str]]

    # -- options
    def resolve(self, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
        """Declared defaults, updated with `overrides` (unknown keys are an error)."""
        values = {k: o.default for k, o in self.options.items()}
        for k, v in (overrides or {}).items():
            key = k.replace("-", "_")
            if key not in values:
                raise KeyError(f"{self.name}: no option {k!r} (options: {', '.join(values) or 'none'})")
            values[key] = v
        return values

    # -- checking
    def triggered(self, run) -> bool:
        """Is any of the rule's triggers in the run (an event of a declared kind, a declared fact)?
        Without one the rule finds nothing (tests/test_triggers.py checks it over the corpus)."""
        return any(has_fact(run, t) if t in FACTS else run.has(t) for t in self.triggers)

    def check(self, run, options: dict[str, Any] | None = None) -> list[Finding]:
        """Findings of this rule for one run (pure)."""
        return list(self._check(run, self.resolve(options)))

    def _check(self, run, o: dict[str, Any]) -> Iterator[Finding]:  # pragma: no cover - abstract
        raise NotImplementedError

    def finding(self, run, message: str, evidence: Iterable[Evidence] = (), fix: Fix | None = None, severity: str | None = None, **details: Any) -> Finding:
        """A finding of this rule; `severity` may lower (never raise) the rule's for a weaker signature."""
        if severity is not None and SEVERITY_RANK[severity] > SEVERITY_RANK[self.severity]:
            raise ValueError(f"{self.name}: a finding cannot be more severe than its rule")
        return Finding(
            code=self.code,
            name=self.name,
            severity=severity or self.severity,
            message=message,
            run=run.index,
            evidence=tuple(dedupe(evidence)),
            fix=fix,
            details=details,
        )

    @property
    def fix_safety(self) -> str:
        """The docs' `Fix safety` section on one line, as a fix carries it (for a section without symbols)."""
        return self.safety()

    def safety(self, values: dict[str, Any] | None = None) -> str:
        """The docs' `Fix safety` section on one line with the run's numbers in place of its symbols.

        ``values`` maps a symbol of the docs (``N``, ``H``, ``s*``...) to its value in this run:
        a backticked span of the section that the values turn into numbers shows the number
        (`` `steps - s*` `` with steps 5 and s* 3 reads ``2``); a span that still holds words
        (a flag: `` `--max-running-requests N` ``) keeps its backticks.
        """
        return fill(self.doc["Fix safety"].replace("\n", " "), values or {})

    @classmethod
    def symbols(cls) -> frozenset[str]:
        """The symbols the docs compute with (``T``, ``A_w``, ``s*``, option names...): see :func:`doc_symbols`."""
        got = cls.__dict__.get("_symbols")
        if got is None:
            import sys

            # the rule's docs, its module's and its area's (the area package states the notation its rules share)
            names = (cls.__module__, cls.__module__.rpartition(".")[0])
            docs = [getattr(sys.modules.get(n), "__doc__", None) or "" for n in names]
            text = "\n".join(v for k, v in cls.doc.items() if k != "Example") + "\n" + "\n".join(docs)
            got = doc_symbols(text, cls.options)
            cls._symbols = got
        return got

    def __repr__(self) -> str:
        return f"<{self.code} {self.name}>"


# ------------------------------------------------------------------ the docs' symbols

_SPAN = re.compile(r"`([^`]+)`")
_IDENT = re.compile(r"(?<![\w#*.-])([A-Za-z][A-Za-z0-9_]*\*?)(?![\w(])")
_FORMULA = re.compile(r" (?:[-+/=<>x]|<=|>=) |\^")  # an operator between spaces, or a power
_SYMBOL_SHAPE = re.compile(r"[A-Za-z]{1,3}(?:_[A-Za-z0-9]+)?\*?")  # T, A_w, s*, mfs_min, bs_reached
_NOT_SYMBOL = re.compile(r"--[\w-]+|\b\w+/s\b")  # flags; per-second units (tok/s)
_PROSE = re.compile(r"(?<![\w*])[a-z]+(?: [a-z]+){2,}(?![\w*])")  # words inside a formula: "at the crash"
_LOG_KEY = re.compile(r"([A-Za-z_]\w*)=")


def _log_words() -> frozenset[str]:
    """Names the log itself prints (server args, event fields): vocabulary, not symbols."""
    from sglog.events import KIND_CLASSES
    from sglog.read import args as sargs

    return frozenset(sargs.DEFAULTS) | sargs.AUTO_FIELDS | frozenset(k for cls in KIND_CLASSES.values() for k in cls.FIELDS)


def doc_symbols(text: str, options: Iterable[str] = ()) -> frozenset[str]:
    """The symbols a rule's documentation computes with.

    A symbol is a name in a backticked formula (a span with an operator between spaces or a
    power: `` `mfs_max = 1 - (H + G) / T` ``), a backticked name of a symbol's shape (`` `T` ``,
    `` `A_w` ``, `` `s*` ``) or one of the rule's options, less the words the log prints itself
    (server arguments, event fields, ``key=`` names in quoted log lines), units after numbers
    and function names.

    >>> sorted(doc_symbols("`mfs_new = mfs + (F - target_gb) / T`, `F` = available_gpu_mem"))
    ['F', 'T', 'mfs', 'mfs_new', 'target_gb']
    >>> sorted(doc_symbols("`s* = floor(log(min_marginal) / log(a))` with `--speculative-num-steps s*`"))
    ['a', 'min_marginal', 's*']
    """
    spans = [_NOT_SYMBOL.sub(" ", s.replace("\n", " ")).strip() for s in _SPAN.findall(text)]
    keys = {k for s in spans for k in _LOG_KEY.findall(s)}
    out = set(options)
    for s in spans:
        if _FORMULA.search(s):
            s = _PROSE.sub(" ", s)
            for m in _IDENT.finditer(s):
                if m.group(1) != "x" and not re.search(r"\d\s*$", s[: m.start()]):  # (x: times; 2 GB: a unit)
                    out.add(m.group(1))
        elif _SYMBOL_SHAPE.fullmatch(s):
            out.add(s)
    return frozenset(out - keys - _log_words())


def bare_symbols(text: str, symbols: Iterable[str]) -> list[str]:
    """The symbols `text` names without their value: ``T`` in ``(6 - 2.1) GB / T`` but not in
    ``T 78.5 GB`` or ``T = 78.5``; a symbol that is also a word (``a``, ``steps``) only
    counts inside a formula (next to an operator).

    >>> bare_symbols("0.90 - (6.0 - 2.10) GB / T 78.5 GB; batches above `N` run without graphs", ["T", "N"])
    ['N']
    >>> bare_symbols("a batch of 3 steps; rate = L / (d + 1)", ["a", "L", "steps"])
    ['L']
    """
    hits = []
    text = _NOT_SYMBOL.sub(lambda m: m.group(0) if m.group(0).startswith("--") else " ", text)
    for sym in symbols:
        word = sym.isalpha() and sym.islower()
        for m in re.finditer(r"(?<![\w#*.-])" + re.escape(sym) + (r"(?!\w)" if sym.endswith("*") else r"(?![\w*])"), text):
            before, after = text[: m.start()], text[m.end() :]
            if re.match(r"`?\s*[=~]?\s*[-~]?\d", after) or after.startswith("(") or re.search(r"\d[\d,.]*\s*(?:[KMG]B\s*)?$", before):
                continue  # its value is next to it (or it is a function)
            if word and not (re.search(r"(?:[+/^=<>*]| - | x )\s*$", before) or re.match(r"\s*(?:[+/^=<>]| - | x )|\^", after)):
                continue  # an ordinary word
            hits.append(sym)
    return sorted(set(hits))


def fill(text: str, values: dict[str, Any]) -> str:
    """`text` with each backticked span's symbols replaced by their values; a span that becomes
    arithmetic shows its result, one that becomes a number loses its backticks.

    >>> fill("batches above `N` run without graphs; cap them with `--max-running-requests N`", {"N": 128})
    'batches above 128 run without graphs; cap them with `--max-running-requests 128`'
    >>> fill("the cycle gets `steps - s*` draft steps shorter", {"steps": 5, "s*": 3})
    'the cycle gets 2 draft steps shorter'
    """
    if not values:
        return text

    def word(v: Any) -> str:
        return f"{v:g}" if isinstance(v, float) else str(v)

    def one(m: re.Match) -> str:
        span = m.group(1)
        new = re.sub(r"(?<![\w*-])([A-Za-z][A-Za-z0-9_]*\*?)(?![\w*])", lambda t: word(values[t.group(1)]) if t.group(1) in values else t.group(1), span)
        if new == span:
            return m.group(0)
        if re.fullmatch(r"[\d.\s()+\-*/]+", new):
            value = _arithmetic(new)
            return word(value) if value is not None else new
        return f"`{new}`"

    return _SPAN.sub(one, text)


def _arithmetic(expr: str) -> float | int | None:
    """The value of `expr` made of numbers, + - * / and parentheses; None for anything else."""
    import ast
    import operator as op

    ops = {ast.Add: op.add, ast.Sub: op.sub, ast.Mult: op.mul, ast.Div: op.truediv}

    def ev(n):
        if isinstance(n, ast.Constant) and isinstance(n.value, (int, float)):
            return n.value
        if isinstance(n, ast.BinOp) and type(n.op) in ops:
            return ops[type(n.op)](ev(n.left), ev(n.right))
        if isinstance(n, ast.UnaryOp) and isinstance(n.op, ast.USub):
            return -ev(n.operand)
        raise ValueError(n)

    try:
        value = ev(ast.parse(expr.strip(), mode="eval").body)
    except (SyntaxError, ValueError, ZeroDivisionError):
        return None
    return int(value) if isinstance(value, float) and value.is_integer() else round(value, 4) if isinstance(value, float) else value


# ------------------------------------------------------------------ evidence helpers


def dedupe(evidence: Iterable[Evidence]) -> list[Evidence]:
    seen = set()
    out = []
    for e in evidence:
        key = (e.file, e.line, e.note if e.line is None else None)
        if key in seen:
            continue
        seen.add(key)
        out.append(e)
    return out


def first_line(text: str | None) -> str:
    return (text or "").split("\n", 1)[0].rstrip("\r")


def event_evidence(e, note: str | None = None) -> Evidence:
    """The first physical line of an event."""
    return Evidence(file=e.file, line=e.line, text=first_line(e.text), note=note)


def exception_evidence(e) -> list[Evidence]:
    """A traceback block: its first line and the line naming the exception (when present)."""
    out = [event_evidence(e)]
    lines = (e.text or "").split("\n")
    exc_type = e.get("exc_type")
    if exc_type and len(lines) > 1:
        for i in range(len(lines) - 1, 0, -1):
            s = lines[i]
            if s.startswith(exc_type) or (":" in s and s.split(":", 1)[0].endswith(exc_type.rsplit(".", 1)[-1]) and not s[:1].isspace()):
                out.append(Evidence(file=e.file, line=e.line + i, text=s.rstrip("\r")))
                break
    return out


def exception_line(e) -> str:
    """`Type: first line of the message` of an error event."""
    return f"{e.get('exc_type')}: {(e.get('exc_message') or '').splitlines()[0] if e.get('exc_message') else ''}"


def text_line_evidence(e, needle: str) -> Evidence | None:
    """The physical line of a block that contains `needle` (case-insensitive)."""
    low = needle.lower()
    for i, s in enumerate((e.text or "").split("\n")):
        if low in s.lower():
            return Evidence(file=e.file, line=e.line + i, text=s.rstrip("\r"))
    return None


def nearby_line_evidence(run, e, patterns: Iterable[str], before: int = 5) -> Evidence | None:
    """The first line naming one of `patterns` (tried in order) in block `e` or the events up to `before` lines above it."""
    near = [e] + run.events_between(e.file, e.line - before, e.line)
    for pat in patterns:
        for x in near:
            hit = text_line_evidence(x, pat)
            if hit is not None:
                return hit
    return None


def pick_remedy(found: Iterable[str], remedies: Iterable[tuple[Any, Mapping[str, str | None], str]], default: tuple[dict[str, str | None], str]) -> tuple[dict[str, str | None], str]:
    """(args, advice) of the first remedy one of whose names (a string or a tuple of them) is in
    ``found`` -- the causes the reader named (``Crash.causes``), or typed values such as a missing
    module's name; ``default`` if none is."""
    have = set(found)
    for names, args, advice in remedies:
        if any(n in have for n in ((names,) if isinstance(names, str) else names)):
            return dict(args), advice
    return default


def row_evidence(row: dict[str, Any], note: str | None = None) -> Evidence:
    """A batch-frame row; its text is filled in by the pipeline (sglog.diagnose)."""
    return Evidence(file=row.get("file") or "", line=row.get("line"), text=None, note=note)


def window_evidence(run, note: str) -> Evidence:
    """A metric over a window of the run (no single line proves it)."""
    return Evidence(file=run.files[0] if run.files else "", line=None, text=None, note=note)


# ------------------------------------------------------------------ number helpers


def floor_to(x: float, step: float = 0.01) -> float:
    return math.floor(x / step + 1e-9) * step


def ceil_to(x: float, step: float = 0.01) -> float:
    return math.ceil(x / step - 1e-9) * step


def fmt_frac(x: float) -> str:
    return f"{x:.2f}"


gb = schema.gb  # (the one way memory is written: sglog/schema.py)
