"""Run + fixes -> the argv that relaunches SGLang with the fix (pure: no clock, files or processes).

The diagnose stage's last step: ``diagnose`` shows the command (``suggested_command``), ``report``
prints it, and ``repro`` (``sglog.repro.launch``) is the one that runs it.

Which flags go on the rebuilt command line (``pinned``):

- the flags the operator set: the ones on the log's launch command when the
  log has it, otherwise the values that differ from SGLang's known defaults
  (``sglog.read.args.origins``); the model path always;
- values auto-chosen at startup (``AUTO_FIELDS``) are *not* pinned, so the
  relaunch lets SGLang choose them again, unless a fix changes them.

Values come from the ``server_args`` dump (what was in effect, paths already
expanded).  The value typed on the launch command wins where the dump cannot
be fed back (nested values) or where SGLang rewrites what was typed (for
instance ``--speculative-algorithm NEXTN`` runs as ``EAGLE``), and a flag
that is only on the command keeps its typed value.

Flags are spelled as SGLang spells them (``sglog.read.args.flag_of``: ``--tp 8``,
``--mem-fraction-static 0.88``), booleans as bare flags, lists as repeated
values.  Every value stays one argv word: nothing here is ever given to a
shell; ``quote`` only makes the command readable and copy-pasteable.

>>> flag_words("--cuda-graph-bs", [1, 2, 4])
['--cuda-graph-bs', '1', '2', '4']
>>> flag_words("--trust-remote-code", True)
['--trust-remote-code']
>>> flag_words("--chat-template", "--weird")
['--chat-template=--weird']
>>> quote("a b;$(rm -rf ~)")
"'a b;$(rm -rf ~)'"
>>> quote("two\\nlines")
"$'two\\\\nlines'"
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from sglog.errors import UsageError
from sglog.fixes import decide
from sglog.read import args as sargs
from sglog.runs.build import jsonable

DEFAULT_LAUNCHER = ("python", "-m", "sglang.launch_server")
SERVE_LAUNCHER = ("sglang", "serve")
DEFAULT_PORT = 30000
DEFAULT_HOST = "127.0.0.1"

# fields whose typed value SGLang rewrites at startup; the typed value is what to pass again
TYPED_WINS = frozenset({"speculative_algorithm"})

_NUMBER = re.compile(r"^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$")
_TRUE = {"true", "1", "yes", "on", ""}
_FALSE = {"false", "0", "no", "off"}


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class Change:
    """One flag the relaunch changes, and why."""

    flag: str
    field: str
    before: Any  # the value in effect in the original run (None: unset)
    before_origin: str | None  # explicit | auto | default | None (not in the dump)
    after: Any  # new value as it goes on the command line; None = flag removed
    reason: str  # the fix's summary, or "--set"
    source: str  # the finding's "CODE name", or "--set"
    applied: bool = True  # False: a later source (--set, an earlier finding) decided this flag
    kind: str = "set"  # set | remove | pin (same value as in effect, now explicit) | same (already so: no-op)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "kind": self.kind,
            "from": jsonable(self.before),
            "from_origin": self.before_origin,
            "to": jsonable(self.after),
            "reason": self.reason,
            "source": self.source,
            "applied": self.applied,
        }


@dataclass(frozen=True)
class Plan:
    """The relaunch: launcher + flags, the flags of the original run, and the changes between them."""

    log: str
    run: int
    run_name: str
    ending: str | None
    launcher: tuple[str, ...]
    original: tuple[tuple[str, Any], ...]  # (flag, value) pinned from the log, in order
    final: tuple[tuple[str, Any], ...]
    changes: tuple[Change, ...] = ()
    findings: tuple[str, ...] = ()  # "CODE name" of the findings whose fixes were applied
    notes: tuple[str, ...] = ()
    nnodes: int = 1  # nodes of the launch (--nnodes); this plan's command is node ``node_rank``'s
    node_rank: int = 0
    base: str = "launch_line"  # what the command is built on: launch_line | server_args | assumed (neither: the fixes' flags only)

    @property
    def args(self) -> list[str]:
        return _words(self.final)

    @property
    def argv(self) -> list[str]:
        return [*self.launcher, *self.args]

    def node_argv(self, rank: int) -> list[str]:
        """The command of node ``rank`` of a multi-node launch: this one with its --node-rank."""
        if rank == self.node_rank:
            return self.argv
        pairs = [(f, rank if f == "--node-rank" else v) for f, v in self.final]
        if "--node-rank" not in dict(self.final):
            pairs.append(("--node-rank", rank))
        return [*self.launcher, *_words(pairs)]

    @property
    def node_argvs(self) -> list[list[str]]:
        """Every node's command, by node rank (one for a single-node launch)."""
        return [self.node_argv(r) for r in range(max(self.nnodes, 1))]

    @property
    def original_argv(self) -> list[str]:
        return [*self.launcher, *_words(self.original)]

    @property
    def port(self) -> int:
        return _flag_int(dict(self.final).get("--port"), DEFAULT_PORT)

    @property
    def host(self) -> str:
        v = dict(self.final).get("--host")
        return str(v) if isinstance(v, str) and v else DEFAULT_HOST

    @property
    def applied(self) -> list[Change]:
        return [c for c in self.changes if c.applied]

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": 1,
            "log": self.log,
            "run": self.run,
            "run_name": self.run_name,
            "ending": self.ending,
            "launcher": list(self.launcher),
            "argv": self.argv,
            "original_argv": self.original_argv,
            "changes": [c.to_dict() for c in self.changes],
            "findings": list(self.findings),
            "port": self.port,
            "notes": list(self.notes),
            "nnodes": self.nnodes,
            "node_rank": self.node_rank,
            "node_argvs": self.node_argvs,
            "base": self.base,
        }


# ------------------------------------------------------------------ words


def quote(word: str) -> str:
    """A word as a POSIX shell would read it back (display only; argv never goes through a shell)."""
    if all(c.isprintable() for c in word):
        return shlex.quote(word)
    out = []
    for c in word:
        if c == "\\":
            out.append("\\\\")
        elif c == "'":
            out.append("\\'")
        elif c == "\n":
            out.append("\\n")
        elif c == "\t":
            out.append("\\t")
        elif c == "\r":
            out.append("\\r")
        elif not c.isprintable():
            out.append(f"\\x{ord(c):02x}" if ord(c) < 256 else f"\\u{ord(c):04x}" if ord(c) < 0x10000 else f"\\U{ord(c):08x}")
        else:
            out.append(c)
    return "$'" + "".join(out) + "'"


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (dict, list, tuple)):
        return json.dumps(v)
    return str(v)


def flag_words(flag: str, value: Any) -> list[str]:
    """The argv words of one flag: bare for True, repeated values for lists, nothing for None/False."""
    if value is None or value is False:
        return []
    if value is True:
        return [flag]
    if isinstance(value, (list, tuple)):
        return [flag, *(_scalar(v) for v in value)] if value else []
    s = _scalar(value)
    if s.startswith("-") and not _NUMBER.match(s):
        return [f"{flag}={s}"]  # would read as a flag otherwise
    return [flag, s]


def _words(pairs: Iterable[tuple[str, Any]]) -> list[str]:
    out: list[str] = []
    for flag, value in pairs:
        out.extend(flag_words(flag, value))
    return out


# ------------------------------------------------------------------ launcher


def choose_launcher(command: str | None, override: str | None = None, env: str | None = None) -> tuple[tuple[str, ...], list[str]]:
    """The launcher words: --launcher, else $SGLOG_LAUNCHER, else the log's form, else the default."""
    notes: list[str] = []
    for given, where in ((override, "--launcher"), (env, "SGLOG_LAUNCHER")):
        if given is not None and given.strip():
            try:
                words = tuple(shlex.split(given))
            except ValueError as e:
                raise UsageError(f"{where}: cannot split {given!r}: {e}") from None
            return words, notes
    if command:
        try:
            logged = shlex.split(command)
        except ValueError:
            logged = command.split()
        for i, w in enumerate(logged):
            if os.path.basename(w) == "sglang" and i + 1 < len(logged) and logged[i + 1] == "serve":
                return SERVE_LAUNCHER, notes
            if re.fullmatch(r"python[\d.]*", os.path.basename(w)) and logged[i + 1 : i + 3] == ["-m", "sglang.launch_server"]:
                py = os.path.basename(w)
                if py != w:
                    notes.append(f"the log ran {w}; the relaunch uses {py} from PATH (set --launcher to choose the interpreter)")
                return (py, "-m", "sglang.launch_server"), notes
    return DEFAULT_LAUNCHER, notes


# ------------------------------------------------------------------ pinned flags


def _renderable(v: Any) -> bool:
    if isinstance(v, dict):
        return False
    if isinstance(v, (list, tuple)):
        return all(isinstance(x, (str, int, float)) and not isinstance(x, bool) for x in v)
    if isinstance(v, str) and re.match(r"^[A-Z]\w*\(", v):
        return False  # an object repr, not something argparse took
    return True


def _same(dump: Any, typed: Any) -> bool:
    if typed is True:
        return dump is True
    if isinstance(typed, list) or isinstance(dump, (list, tuple)):
        if not isinstance(dump, (list, tuple)):
            return False
        want = typed if isinstance(typed, list) else [typed]
        return len(dump) == len(want) and all(_same(d, t) for d, t in zip(dump, want))
    if isinstance(dump, (int, float)) and not isinstance(dump, bool):
        try:
            return float(typed) == float(dump)
        except (TypeError, ValueError):
            return False
    return _scalar(dump) == typed


def pinned(run) -> tuple[list[tuple[str, Any]], list[str]]:
    """(flag, value) pairs the operator set, in command (or dump) order, and notes about them."""
    notes: list[str] = []
    dump: dict[str, Any] = dict(run.args or {})
    typed = sargs.parse_command(run.launch_command) if run.launch_command else None
    out: list[tuple[str, Any]] = []
    seen: set[str] = set()

    def add(field: str, value: Any) -> None:
        if field in seen:
            return
        seen.add(field)
        out.append((sargs.flag_of(field), value))

    if typed is not None:
        if "model_path" not in typed and dump.get("model_path"):
            add("model_path", dump["model_path"])
        for field, raw in typed.items():
            if not re.fullmatch(r"[a-z][a-z0-9_]*", field):
                notes.append(f"ignored an unreadable flag on the launch command: {_display(field)}")
                continue
            if field not in dump:
                add(field, raw)
                continue
            value = dump[field]
            if field in TYPED_WINS or not _renderable(value) or (raw is not True and value is None):
                if not _same(value, raw):
                    notes.append(f"{sargs.flag_of(field)}: typed {_show(raw)}, in effect {_show(value)}; the relaunch passes the typed value")
                add(field, raw)
                continue
            if not _same(value, raw):
                notes.append(f"{sargs.flag_of(field)}: typed {_show(raw)}, in effect {_show(value)}; the relaunch passes the value in effect")
            if raw is True and value is not True:
                add(field, True)
            else:
                add(field, value)
        return out, notes

    if not dump:
        return out, notes
    notes.append("the log has no launch command: flags set by the operator are guessed from SGLang's known defaults")
    origins = run.arg_origins or sargs.origins(dump, None)
    if dump.get("model_path"):
        add("model_path", dump["model_path"])
    for field, value in dump.items():
        if origins.get(field) != "explicit" or field in sargs.NOT_FLAGS or value is None or value is False:
            continue
        if not _renderable(value):
            notes.append(f"{sargs.flag_of(field)}: value {_show(value)} cannot be passed back; left out")
            continue
        add(field, value)
    return out, notes


def _show(v: Any) -> str:
    if v is True:
        return "(set)"
    if isinstance(v, (list, tuple)):
        return " ".join(_scalar(x) for x in v)
    return _scalar(v) if v is not None else "(unset)"


# ------------------------------------------------------------------ patches


def normalize_flag(name: str) -> tuple[str, str]:
    """Any spelling (``--tp``, ``tp_size``, ``mem-fraction-static``) -> (SGLang flag, field)."""
    n = name.strip()
    if not n or not re.fullmatch(r"-{0,2}[A-Za-z][\w\-]*", n):
        raise UsageError(f"not a flag name: {name!r}")
    f = sargs.field_of(n if n.startswith("--") else "--" + n.lstrip("-").replace("_", "-"))
    return sargs.flag_of(f), f


def parse_sets(items: Iterable[str]) -> list[tuple[str, str | None]]:
    """``--set FLAG=VALUE`` items -> (flag, value); ``FLAG=`` removes the flag (SGLang's default again).

    >>> parse_sets(["mem-fraction-static=0.88", "--tp=4", "cuda_graph_max_bs="])
    [('--mem-fraction-static', '0.88'), ('--tp', '4'), ('--cuda-graph-max-bs', None)]
    """
    out: list[tuple[str, str | None]] = []
    for item in items:
        if "=" not in item:
            raise UsageError(f"--set {item!r}: expected FLAG=VALUE (FLAG= to remove the flag)")
        name, value = item.split("=", 1)
        flag, _ = normalize_flag(name)
        out.append((flag, value if value != "" else None))
    return out


def choose_findings(findings, run_index: int, select: Iterable[str] = ()) -> tuple[list, list[str]]:
    """Findings of the run whose fixes apply: all with an args patch, or those named by code or name."""
    mine = [f for f in findings if f.run == run_index]
    with_fix = [f for f in mine if f.fix is not None and f.fix.args]
    wanted = [s.strip() for s in select if s.strip()]
    notes = [f"{f.code} {f.name}: {f.fix.summary} (no flag to change)" for f in mine if f.fix is not None and not f.fix.args]
    if not wanted:
        return with_fix, notes
    chosen = []
    for w in wanted:
        hit = [f for f in mine if f.code.lower() == w.lower() or f.name == w]
        if not hit:
            have = ", ".join(dict.fromkeys(f"{f.code} {f.name}" for f in with_fix)) or "none"
            raise UsageError(f"--finding {w}: not reported for run {run_index} (findings with a fix: {have})")
        for f in hit:
            if f.fix is None or not f.fix.args:
                raise UsageError(f"--finding {w}: {f.code} {f.name} has no flag change to try")
            if f not in chosen:
                chosen.append(f)
    return chosen, notes


def _bool_field(field: str, dump: dict[str, Any], flags: dict[str, Any]) -> bool:
    return isinstance(dump.get(field), bool) or isinstance(sargs.DEFAULTS.get(field), bool) or flags.get(sargs.flag_of(field)) is True


def _coerce(value: Any, is_bool: bool, flag: str) -> Any:
    """A patch value as it goes on the command line (bool flags: True or None)."""
    if value is None:
        return None
    if is_bool:
        s = str(value).strip().lower() if not isinstance(value, bool) else ("true" if value else "false")
        if s in _TRUE:
            return True
        if s in _FALSE:
            return None
        raise UsageError(f"{flag} is an on/off flag; got {value!r} (use true or false)")
    if isinstance(value, (list, tuple)):
        return [str(v) for v in value]
    return value if isinstance(value, str) else _scalar(value)


def build_plan(
    run, findings=(), select: Iterable[str] = (), sets: Iterable[tuple[str, str | None]] = (), launcher: tuple[str, ...] | None = None, log: str | None = None, assume: bool = False
) -> Plan:
    """The relaunch of ``run`` with the fixes of the chosen findings, then ``--set`` on top.

    Which fix holds a flag two fixes set is the pipeline's decision (``sglog.fixes.decide``).
    A run with neither a launch command nor a server-args dump has no launch to rebuild: a
    UsageError, or with ``assume`` the default launcher with only the fixes' flags
    (``base`` ``"assumed"``).
    """
    base, kind, notes = _base(run, assume)
    if launcher is None:
        launcher, lnotes = choose_launcher(run.launch_command)
        notes = lnotes + notes
    chosen, fnotes = choose_findings(findings, run.index, select)
    notes = notes + fnotes
    flags = _Flags(run, base)
    _apply_fixes(flags, chosen)
    for flag, value in sets:
        flags.apply(flag, value, "--set", "--set", strong=True)
    if not chosen and not list(sets):
        notes.append("no fix to apply: the relaunch repeats the original command")
    nnodes, node_rank, nnotes = _nodes(flags.final)
    return Plan(
        log=log or (run.files[0] if run.files else ""),
        run=run.index,
        run_name=run.name,
        ending=run.ending.describe() if run.ending else None,
        launcher=tuple(launcher),
        original=tuple(base),
        final=flags.pairs(),
        changes=tuple(flags.changes),
        findings=tuple(f"{f.code} {f.name}" for f in chosen),
        notes=tuple(notes + nnotes),
        nnodes=nnodes,
        node_rank=node_rank,
        base=kind,
    )


def _base(run, assume: bool) -> tuple[list[tuple[str, Any]], str, list[str]]:
    """The flags the relaunch is built on (``pinned``), what they come from (``Plan.base``), and notes."""
    base, notes = pinned(run)
    kind = "launch_line" if run.launch_command else "server_args"
    if not base:
        if not assume:
            raise UsageError(f"run {run.index} ({run.name}) has neither a server_args dump nor a launch command; cannot rebuild its launch")
        kind = "assumed"
        notes.append("the log shows neither the launch command nor the server arguments: the command holds only the suggested flags; add the model path and the original flags")
    return base, kind, notes


def _apply_fixes(flags: _Flags, chosen) -> None:
    """Each fix's flags, in the findings' order; the one ``decide()`` picked holds, the others are listed as not applied."""
    decisions = decide(chosen)
    for f in chosen:
        for flag, value in f.fix.args.items():
            d = decisions.get(sargs.flag_of(sargs.field_of(flag)))
            flags.apply(flag, value, f.fix.summary, f"{f.code} {f.name}", strong=False, holds=d is None or d.won is f)


def _nodes(final: dict[str, Any]) -> tuple[int, int, list[str]]:
    """(nodes, node rank, notes) of the relaunch, as its own flags say (SGLang's defaults: one node, rank 0)."""
    nnodes, node_rank = _flag_int(final.get("--nnodes"), 1), _flag_int(final.get("--node-rank"), 0)
    if nnodes <= 1:
        return 1, 0, []
    node_rank = node_rank if 0 <= node_rank < nnodes else 0
    return (
        nnodes,
        node_rank,
        [f"a {nnodes}-node launch: this is the command of node rank {node_rank}; each other node runs it with its own --node-rank (listed below), and --execute starts this node only"],
    )


class _Flags:
    """The relaunch's flags while the fixes and ``--set`` are applied, and the changes made so far."""

    def __init__(self, run, base: list[tuple[str, Any]]) -> None:
        self.dump: dict[str, Any] = dict(run.args or {})
        self.origins: dict[str, str] = run.arg_origins or {}
        self.base = dict(base)
        self.final: dict[str, Any] = dict(base)
        self.order = [f for f, _ in base]
        self.changes: list[Change] = []
        self.decided: dict[str, int] = {}  # flag -> index in changes of the change that holds

    def pairs(self) -> tuple[tuple[str, Any], ...]:
        """The final (flag, value) pairs: the original's order, then new flags as they were added."""
        return tuple((f, self.final[f]) for f in self.order if f in self.final)

    def apply(self, flag_name: str, value: Any, reason: str, source: str, strong: bool, holds: bool = True) -> None:
        """One flag of a fix (``strong``: of ``--set``, which overrides the fixes); ``holds``: no other fix decides it."""
        ch = self._change(flag_name, value, reason, source, strong)
        if not holds:  # another finding's fix decides this flag
            self.changes.append(_replace(ch, applied=False))
            return
        if ch.flag in self.decided:
            if not strong:  # an earlier finding already decided this flag
                self.changes.append(_replace(ch, applied=False))
                return
            self.changes[self.decided[ch.flag]] = _replace(self.changes[self.decided[ch.flag]], applied=False)
        self.decided[ch.flag] = len(self.changes)
        self.changes.append(ch)
        self._set(ch.flag, ch.after)

    def _change(self, flag_name: str, value: Any, reason: str, source: str, strong: bool) -> Change:
        flag, field = normalize_flag(flag_name)
        dump = self.dump
        # (a fix's "true" is a switch without a value (sglog.rules.base), unless the dump shows the field takes one)
        switch = not strong and value == "true" and (field not in dump or isinstance(dump[field], bool))
        after = _coerce(value, switch or _bool_field(field, dump, self.final), flag)
        before = dump.get(field) if field in dump else self.base.get(flag)
        origin = self.origins.get(field) if field in dump else ("explicit" if flag in self.base else None)
        return Change(flag, field, before, origin, after, reason, source, kind=self._kind(flag, field, after))

    def _kind(self, flag: str, field: str, after: Any) -> str:
        """``Change.kind`` of setting ``flag`` to ``after`` (None: removing it) on the flags so far."""
        if after is None:
            return "remove" if flag in self.final else "same"
        if flag in self.final and flag_words(flag, self.final[flag]) == flag_words(flag, after):
            return "same"
        if flag not in self.final and field in self.dump and _same(self.dump[field], after):
            return "pin"
        return "set"

    def _set(self, flag: str, after: Any) -> None:
        if after is None:
            self.final.pop(flag, None)
            return
        if flag not in self.order:
            self.order.append(flag)
        self.final[flag] = after


def _flag_int(value: Any, default: int) -> int:
    try:
        return int(str(value)) if value is not None and value is not True else default
    except ValueError:
        return default


def _replace(ch: Change, **kw) -> Change:
    from dataclasses import replace

    return replace(ch, **kw)


# ------------------------------------------------------------------ text


def command_lines(plan: Plan) -> list[tuple[str, str]]:
    """The final command as (marker, text) lines, one flag per line; marker ``+``/``-``/`` `` against the original."""
    orig = dict(plan.original)
    fin = dict(plan.final)
    lines: list[tuple[str, str]] = [(" ", " ".join(quote(w) for w in plan.launcher))]
    ordered = list(dict.fromkeys([f for f, _ in plan.original] + [f for f, _ in plan.final]))
    for f in ordered:
        o = flag_words(f, orig[f]) if f in orig else []
        n = flag_words(f, fin[f]) if f in fin else []
        if o == n:
            if n:
                lines.append((" ", "  " + " ".join(quote(w) for w in n)))
            continue
        if o:
            lines.append(("-", "  " + " ".join(quote(w) for w in o)))
        if n:
            lines.append(("+", "  " + " ".join(quote(w) for w in n)))
    return lines


def final_lines(plan: Plan) -> list[str]:
    """The new command only, one flag per line and no markers: what a user pastes into a shell.

    (``command_lines`` also has the original's changed flags, as ``-`` lines; a command built
    from every line would repeat each changed flag with its old and new value.)
    """
    return [text for mark, text in command_lines(plan) if mark != "-"]


def command_text(plan: Plan) -> str:
    """The new command as one pasteable shell text, a flag per line joined by `` \\``."""
    return " \\\n".join(final_lines(plan))


def render_plan(plan: Plan) -> str:
    """The plan as text: what ran, what changes and why, the new command (pasteable)."""
    out = [f"run {plan.run} of {_display(plan.log)} ({_display(plan.run_name)}): {_display(plan.ending or 'no ending known')}"]
    shown = [c for c in plan.applied if c.kind != "same"]
    if shown:
        out.append("changes:")
        by_source: dict[str, list[Change]] = {}
        for c in shown:
            by_source.setdefault(c.source, []).append(c)
        for source, cs in by_source.items():
            reason = cs[0].reason
            out.append(f"  {_display(source)}" + (f": {_display(reason)}" if reason and reason != source else ""))
            for c in cs:
                before = _show(c.before) + (f" ({c.before_origin})" if c.before_origin and c.before_origin != "explicit" else "")
                after = "(removed)" if c.after is None else _show(c.after) + (" (pinned: same value, now explicit)" if c.kind == "pin" else "")
                out.append(f"    {c.flag}: {_display(before)} -> {_display(after)}")
    same = [c for c in plan.applied if c.kind == "same"]
    if same:
        out.append("already as suggested: " + ", ".join(f"{c.flag} {_display(_show(c.after)) if c.after is not None else '(unset)'}" for c in same))
    skipped = [c for c in plan.changes if not c.applied]
    if skipped:
        out.append("not applied (another fix or --set decides the flag):")
        for c in skipped:
            out.append(f"    {c.flag} {_display(_show(c.after)) if c.after is not None else '(removed)'}  [{_display(c.source)}]")
    for n in plan.notes:
        out.append(f"note: {_display(n)}")
    out.append("command:")
    out.append(command_text(plan))
    if plan.nnodes > 1:
        out.append("the other nodes (the same command, each with its own --node-rank):")
        for r in range(plan.nnodes):
            if r != plan.node_rank:
                out.append(f"  node rank {r}: " + " ".join(quote(w) for w in plan.node_argv(r)))
    return "\n".join(out)


def _display(s: str) -> str:
    """One display line: control characters (newlines...) shown escaped."""
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in str(s))
