"""Outer envelopes: what a container runtime, a log shipper or a job runner wrote before a line.

Real SGLang logs reach users wrapped: ``svc-1  | `` (docker compose), an RFC 3339 time (docker
``--timestamps``), ``<time> stdout F `` (Kubernetes CRI), ``Mar 07 10:11:12 host python[1234]: ``
(journald / syslog), a wrapper's own logger time, ``(SGLangEngine pid=952, ip=10.0.0.1) `` (Ray)
and combinations of these; pasted logs also carry page damage (terminal padding, file names
turned into Markdown links).  This module removes those layers and keeps their parts as fields.
It never touches SGLang's own ``[time RANKS] `` prefix (that is the grammar's ``ENV_*``).

One mechanism: :data:`SHAPES` is an ordered table of wrapper shapes, each a name and one
anchored regex whose named groups become fields.  :func:`strip_outer` applies the table
repeatedly (each shape at most once per line, the first in table order that matches wins) until
none matches, so nesting (compose + Ray, CRI + a wrapper timestamp, ...) needs no special case.
:data:`REPAIRS` undoes page damage around it.

How the reader uses it::

    unwrap = Unwrapper.for_lines(first_lines)   # look at the first few hundred lines once
    if unwrap.active:                           # most logs: False, and the reader skips it all
        text, fields = unwrap.feed(line)        # per line, only the shapes this file has
    # or, for one line without a file around it:
    text, fields = strip_outer(line)

``fields`` is ``{}`` when nothing was stripped; otherwise it holds the wrapper's parts
(``container``, ``outer_ts``, ``stream``, ``cri_partial``, ``host``, ``process``, ``pid``,
``ray_actor``, ``ray_pid``, ``ray_ip``, ``ray_job``, ``gpu``, ``syslog_priority`` ...) and
``wrappers``: the names of the shapes and repairs applied, outermost first.  When two layers
carry the same part (two timestamps), the outermost keeps the plain key and the next one gets
``key_2``: no part is dropped.

>>> strip_outer("sglang-1  | [2025-06-26 07:25:31 DP4 TP4] Decode batch, #running-req: 5")
('[2025-06-26 07:25:31 DP4 TP4] Decode batch, #running-req: 5', {'container': 'sglang-1', 'wrappers': ('compose',)})
>>> strip_outer("[2025-06-26 07:25:31 TP0] Load weight begin. avail mem=78.50 GB")
('[2025-06-26 07:25:31 TP0] Load weight begin. avail mem=78.50 GB', {})
>>> strip_outer("(SGLangEngine pid=952, ip=10.0.0.1) [2025-11-06 01:16:21 TP0] Scheduler hit an exception")[1]
{'ray_actor': 'SGLangEngine', 'ray_pid': 952, 'ray_ip': '10.0.0.1', 'wrappers': ('ray_actor',)}
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import cast

__all__ = ["REPAIRS", "SHAPES", "Repair", "Shape", "Unwrapper", "strip_outer"]

Fields = dict[str, object]

# ---------------------------------------------------------------- pieces of the shapes
_LEVELS = r"(?:TRACE|DEBUG|INFO|NOTICE|SUCCESS|WARNING|WARN|ERROR|CRITICAL|FATAL)"
_SGR = r"(?:\x1b?\[[0-9;]*m)*"  # ANSI colour codes, or their remains when the page ate the ESC
_RFC3339 = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?(?:Z|[+-]\d\d:?\d\d)"
# a wrapper logger's time: ISO-ish date and time, any fraction, an optional zone
_ANY_TS = r"\d{4}[-/]\d\d[-/]\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d{1,9})?(?:Z|[+-]\d\d:?\d\d| ?UTC)?"
_MONTH = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)"
_IP = r"[0-9A-Fa-f.:]+"
# What may follow a wrapper whose shape alone is too loose to trust (a time, a label):
# SGLang's own prefix (any release: ``[HH:MM:SS``, ``[YYYY-MM-DD HH:MM:SS``), 0.2.x's
# ``[gpu=N]`` or a Ray prefix.  Those wrappers are *guarded* by this look-ahead.
_SGLANG_NEXT = (
    r"(?=\[(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d[.,\] ]"
    r"|\[gpu=\d+\]"
    r"|" + _SGR + r"\((?:[^()\n]*? )?pid=\d+[,)])"
)
_META = r"(?:[^\[\n]|\[(?!\d{4}-|\d\d:|gpu=)[^\]\n]*\]){0,160}?"  # level, logger, pid, [file.py:N]


@dataclass(frozen=True)
class Shape:
    """One outer wrapper: a name, an anchored regex with named groups, how groups become fields.

    ``side``: ``head`` shapes match at the start of the text, ``tail`` shapes (regex ending in
    ``$``) at its end.  ``guarded``: the regex ends in a look-ahead for SGLang's prefix (the
    shape alone could be a message's own text); ``loose`` is the same shape without it, which
    :class:`Unwrapper` uses once a file has shown the guarded shape (then the wrapper's other
    lines, e.g. a traceback it relayed, are unwrapped too).  ``needs``: a tail shape is tried
    only after a head shape set one of these fields.  ``min_hits``: how many lines of a file's
    sample must show the shape before :class:`Unwrapper` trusts it.
    """

    name: str
    regex: re.Pattern[str]
    convert: Callable[[dict[str, str]], Fields] | None = None
    side: str = "head"
    loose: re.Pattern[str] | None = None
    needs: tuple[str, ...] = ()
    min_hits: int = 1

    @property
    def guarded(self) -> bool:
        return self.loose is not None

    def fields(self, m: re.Match[str]) -> Fields:
        groups = {k: v for k, v in m.groupdict().items() if v is not None}
        return self.convert(groups) if self.convert else _typed(groups)


_INT_FIELDS = frozenset({"pid", "ray_pid", "gpu", "syslog_priority", "task", "mpi_job", "mpi_rank", "ray_repeated"})


def _typed(groups: dict[str, str]) -> Fields:
    out: Fields = {}
    for k, v in groups.items():
        out[k] = int(v) if k in _INT_FIELDS and v.isdigit() else v
    return out


def _cri(g: dict[str, str]) -> Fields:
    tag = g.pop("cri_tag")
    out = _typed(g)
    out["cri_partial"] = tag.startswith("P")
    if len(tag) > 1:  # the CRI format allows more tags after ':'; keep them
        out["cri_tag"] = tag
    return out


def _syslog(g: dict[str, str]) -> Fields:
    out = _typed({k: v for k, v in g.items() if v != "-"})  # RFC 5424's nil value
    pri = out.get("syslog_priority")
    if isinstance(pri, int):
        out["syslog_facility"], out["syslog_severity"] = divmod(pri, 8)
    return out


def _wrapper_log(g: dict[str, str]) -> Fields:
    meta = g.pop("outer_meta", "").strip(" -|:")
    out = _typed(g)
    if meta:
        out["outer_meta"] = meta
        level = re.search(r"\b" + _LEVELS + r"\b", meta)
        if level and "outer_level" not in out:
            out["outer_level"] = level.group(0)
    return out


def _c(pattern: str) -> re.Pattern[str]:
    return re.compile(pattern)


#: The wrapper shapes, in the order they are tried (more specific before more general).
SHAPES: tuple[Shape, ...] = (
    # Kubernetes CRI (containerd / CRI-O files, kubelet): `<RFC3339Nano> <stream> <P|F>[:tags] <msg>`
    Shape("cri", _c(rf"^(?P<outer_ts>{_RFC3339}) (?P<stream>stdout|stderr) (?P<cri_tag>[PF](?::\S+)?)(?: |$)"), _cri),
    # RFC 5424 syslog: `<PRI>1 TIMESTAMP HOST APP PROCID MSGID SD [MSG]`
    Shape(
        "rfc5424",
        _c(
            r"^<(?P<syslog_priority>\d{1,3})>1 (?P<outer_ts>\S+) (?P<host>\S+) (?P<process>\S+) (?P<pid>\S+)"
            r' (?P<msgid>\S+) (?P<structured_data>-|(?:\[(?:[^\]"\\]|\\.|"(?:[^"\\]|\\.)*")*\])+)(?: \ufeff?|$)'
        ),
        _syslog,
    ),
    # RFC 3164 syslog and journalctl's short / short-precise / short-iso / short-unix:
    # `[<PRI>]Mar  7 10:11:12 host ident[pid]: msg` (an ISO time needs a numeric zone, as journald
    # prints it: docker's `...Z` times are the next shape)
    Shape(
        "syslog",
        _c(
            rf"^(?:<(?P<syslog_priority>\d{{1,3}})>)?(?P<outer_ts>{_MONTH} [ \d]\d \d\d:\d\d:\d\d(?:\.\d{{1,9}})?"
            r"|\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?[+-]\d\d:?\d\d|\d{9,10}\.\d{1,9})"
            r" (?P<host>[\w.\-:]+) (?P<process>[^\s\[\]:]+)(?:\[(?P<pid>\d+)\])?:(?: |$)"
        ),
        _syslog,
    ),
    # docker / kubectl `--timestamps`, GitHub Actions: an RFC 3339 time (UTC, up to 9 digits)
    Shape("docker_ts", _c(rf"^(?P<outer_ts>{_RFC3339})(?: |$)")),
    # kubectl logs --prefix: `[pod/<pod>/<container>] `
    Shape("kubectl_prefix", _c(r"^\[pod/(?P<pod>[^/\]\s]+)/(?P<container>[^\]\s]+)\](?: |$)")),
    # Open MPI --tag-output: `[job,rank]<stdout>:`
    Shape("mpi_tag", _c(r"^\[(?P<mpi_job>\d+),(?P<mpi_rank>\d+)\]<(?P<stream>stdout|stderr|stddiag)>: ?")),
    # docker compose (v1 `name_1`, v2 `name-1`, swarm `svc.1.id@node`): the name padded to the
    # longest one, ` | `, the line (colour codes around the name on a TTY); a blank line ends at `|`
    # Alone, `name | ` (one space: the longest name of the project) could be a message's own
    # text (`ls | wc`): it needs SGLang's prefix after it until the file has shown compose.
    Shape(
        "compose",
        _c(
            rf"^{_SGR}(?!{_LEVELS}\s)(?P<container>[A-Za-z0-9][\w.@\-]*)"
            rf"(?: {{2,}}\|{_SGR}(?: |$)| \|{_SGR} {_SGLANG_NEXT})"
        ),
        loose=_c(rf"^{_SGR}(?!{_LEVELS}\s)(?P<container>[A-Za-z0-9][\w.@\-]*) +\|{_SGR}(?: |$)"),
        min_hits=2,
    ),
    # a job runner relaying a pod's or job's output: `[<time> ]<name> >> ` (e.g. before Ray's prefix)
    Shape(
        "ray_job",
        _c(rf"^(?:(?P<outer_ts>{_ANY_TS}) +)?(?P<ray_job>[\w.\-:/@]+) +>> {_SGLANG_NEXT}"),
        loose=_c(rf"^(?:(?P<outer_ts>{_ANY_TS}) +)?(?P<ray_job>[\w.\-:/@]+) +>> "),
        min_hits=2,
    ),
    # a wrapper's own Python logger before SGLang's prefix: `2025-03-07 10:11:12,345 INFO `,
    # `2025-03-07 10:11:12,345 - name - INFO - `, loguru's `... | INFO     | mod:fn:1 - `
    Shape(
        "wrapper_log",
        _c(rf"^(?P<outer_ts>{_ANY_TS})(?P<outer_meta> {_META})?(?: - | \| |: | ){_SGLANG_NEXT}"),
        _wrapper_log,
        loose=_c(rf"^(?P<outer_ts>{_ANY_TS})(?:(?: - | \| | )(?P<outer_level>{_LEVELS}))?(?: - | \| |: | |$)"),
    ),
    # a wrapper's bracketed time before SGLang's own `[time ...] `; always guarded: alone, `[time] `
    # *is* SGLang's main-process prefix
    Shape(
        "wrapper_bracket_ts",
        _c(rf"^\[(?P<outer_ts>{_ANY_TS})\](?P<outer_meta>(?: \[(?!\d{{4}}-|\d\d:|gpu=)[^\]\n]*\])*) {_SGLANG_NEXT}"),
        _wrapper_log,
    ),
    # Python logging's default `LEVEL:logger:` before SGLang's prefix
    Shape(
        "pylog_basic",
        _c(rf"^(?P<outer_level>{_LEVELS}):(?P<outer_logger>[\w.\-]*):{_SGLANG_NEXT}"),
        loose=_c(rf"^(?P<outer_level>{_LEVELS}):(?P<outer_logger>[\w.\-]*):"),
    ),
    # srun --label: `N: ` (the task number, padded) before SGLang's prefix
    Shape("srun_label", _c(rf"^ *(?P<task>\d+): {_SGLANG_NEXT}"), loose=_c(r"^ *(?P<task>\d+): ")),
    # Ray worker output: `(Actor pid=N[, ip=IP]) `, `(pid=N) `; the actor name is a class name or
    # an actor's __repr__ (any text, one level of parentheses); cyan colour codes around it
    Shape(
        "ray_actor",
        _c(
            rf"^{_SGR}\((?:(?P<ray_actor>[^()\n]*?(?:\([^()\n]*\)[^()\n]*?)?) )?pid=(?P<ray_pid>\d+)"
            rf"(?:, ip=(?P<ray_ip>{_IP}))?\){_SGR}(?: |$)"
        ),
    ),
    # Ray's own processes: `(raylet) `, `(raylet, ip=IP) `, `(autoscaler +1m2s) `, ...
    Shape(
        "ray_system",
        _c(
            rf"^{_SGR}\((?P<ray_actor>raylet|gcs_server|autoscaler|monitor|log_monitor|dashboard|dashboard_agent"
            rf"|runtime_env_agent)(?: \+(?P<ray_uptime>[\dhms.]+))?(?:, ip=(?P<ray_ip>{_IP}))?\){_SGR}(?: |$)"
        ),
    ),
    # SGLang 0.2.x's rank prefix `[gpu=N] `
    Shape("gpu", _c(r"^\[gpu=(?P<gpu>\d+)\](?: |$)")),
    # Ray's log de-duplication: ` [repeated 3x across cluster]` at the end of a Ray-prefixed line
    Shape(
        "ray_repeated",
        _c(r" ?\[repeated (?P<ray_repeated>\d+)x across cluster\]$"),
        side="tail",
        needs=("ray_actor", "ray_pid"),
    ),
)


# ---------------------------------------------------------------- page damage
@dataclass(frozen=True)
class Repair:
    """Damage done by the page a log was pasted into, undone around the wrapper shapes.

    ``quick`` is a plain test that must hold for the repair to apply (cheap, per line);
    ``apply`` returns the repaired text and the fields to record (or None: nothing to do).
    """

    name: str
    quick: Callable[[str], bool]
    apply: Callable[[str], tuple[str, Fields] | None]


_PADDING = re.compile(r"[ \t]{2,}$")


def _unpad(text: str) -> tuple[str, Fields] | None:
    """Terminal padding: a run of 2+ trailing spaces (to the window's width) goes.  SGLang's
    ``, ``-joined lines may end in one space of their own (``... #queue-req: 0, ``): a text
    left ending in ``,`` keeps that one space."""
    m = _PADDING.search(text)
    if m is None:
        return None
    end = m.start()
    if text[end - 1 : end] == ",":
        end += 1
    return text[:end], {"padding": len(text) - end}


# GitHub (and other Markdown renderers) autolink a bare `name.py`: `[name.py](http://name.py)`
_MD_LINK = re.compile(r"\[([^\[\]()\s]+)\]\(https?://\1/?\)")


def _unlink(text: str) -> tuple[str, Fields] | None:
    new, n = _MD_LINK.subn(r"\1", text)
    return (new, {"md_links": n}) if n else None


#: Page repairs: ``padding`` before the shapes (a padded `svc  |` line), ``md_links`` after.
REPAIRS: tuple[Repair, ...] = (
    Repair("padding", lambda t: t.endswith(("  ", "\t")), _unpad),
    Repair("md_links", lambda t: "](http" in t, _unlink),
)
_PAD, _MD = REPAIRS


# ---------------------------------------------------------------- the function
def _merge(out: Fields, new: Fields) -> None:
    for k, v in new.items():
        key, n = k, 1
        while key in out:
            n += 1
            key = f"{k}_{n}"
        out[key] = v


def _strip(line: str, heads: tuple[tuple[str, re.Pattern[str], Shape], ...], tails: tuple[Shape, ...], repairs: tuple[Repair, ...]) -> tuple[str, Fields]:
    text = line
    out: Fields = {}
    names: list[str] = []
    pad = _PAD in repairs
    if pad and _PAD.quick(text):
        r = _PAD.apply(text)
        if r is not None:
            text = r[0]
            _merge(out, r[1])
            names.append("padding")
    todo = list(heads)
    progress = True
    while progress and todo:
        progress = False
        for i, (name, rx, shape) in enumerate(todo):
            m = rx.match(text)
            if m is not None:
                _merge(out, shape.fields(m))
                names.append(name)
                text = text[m.end() :]
                del todo[i]
                progress = True
                break
    for shape in tails:
        if shape.needs and not any(k in out for k in shape.needs):
            continue
        m = shape.regex.search(text)
        if m is not None:
            _merge(out, shape.fields(m))
            names.append(shape.name)
            text = text[: m.start()]
    if _MD in repairs and _MD.quick(text):
        r = _MD.apply(text)
        if r is not None:
            text = r[0]
            _merge(out, r[1])
            names.append("md_links")
    if names:
        out["wrappers"] = tuple(names)
    return text, out


_HEADS = tuple((s.name, s.regex, s) for s in SHAPES if s.side == "head")
_TAILS = tuple(s for s in SHAPES if s.side == "tail")
# The hot path: a line of SGLang's own, unwrapped, starts `[YYYY-` or `[HH:` and has no `[`/`(`
# right after its first `] ` (only `wrapper_bracket_ts` starts like that, and it needs one).
# Plain string tests: a regex call costs more than all of them together.
_NOT_AFTER_OWN = ("[", "(", "\x1b")
_PADDED = ("  ", "\t")


def strip_outer(line: str) -> tuple[str, Fields]:
    """The text the program inside the wrappers wrote, and the wrappers' parts as fields.

    ``line`` is one physical line without its line ending.  Nothing stripped: the same string and
    ``{}``.  The text is always a slice of ``line``, except where a Markdown link is undone.

    >>> strip_outer("2025-03-07T10:11:12.123456789Z stderr P [2025-03-07 10:11:12 TP1] Init")
    ('[2025-03-07 10:11:12 TP1] Init', {'outer_ts': '2025-03-07T10:11:12.123456789Z', 'stream': 'stderr', 'cri_partial': True, 'wrappers': ('cri',)})
    >>> strip_outer("svc  | ")
    ('', {'container': 'svc', 'wrappers': ('compose',)})
    """
    if line[:1] == "[" and (line[5:6] == "-" or line[3:4] == ":"):
        i = line.find("] ", 6)
        if i > 0 and line[i + 2 : i + 3] not in _NOT_AFTER_OWN and not line.endswith(_PADDED) and "](http" not in line:
            return line, {}  # SGLang's own prefix, nothing around it
    return _strip(line, _HEADS, _TAILS, REPAIRS)


# ---------------------------------------------------------------- per file
class Unwrapper:
    """Decides once per file which wrappers it has, then strips only those.

    ``detect(lines)`` looks at a sample (the first few hundred lines are plenty: a wrapper wraps
    every line it relays) and keeps the shapes seen on at least ``min_hits`` lines (or on every
    non-blank sampled line, for short pastes), and the repairs seen at all.  A guarded shape seen
    there is then applied *loose* (without its look-ahead for SGLang's prefix), so the wrapper's
    other lines (a traceback it relayed) come out too.  ``active`` is False when nothing was
    found: the caller then skips ``feed`` altogether.  Before ``detect``, ``feed`` is
    :func:`strip_outer`.

    >>> u = Unwrapper.for_lines(["app  | [2025-01-01 00:00:00] ready", "app  |   File \\"x.py\\", line 1"])
    >>> u.present, u.feed("app  | Traceback (most recent call last):")[0]
    (('compose',), 'Traceback (most recent call last):')
    >>> Unwrapper.for_lines(["[2025-01-01 00:00:00 TP0] ready"]).active
    False
    """

    SAMPLE = 500

    def __init__(self) -> None:
        self._detected = False
        self._heads = _HEADS
        self._tails = _TAILS
        self._repairs = REPAIRS
        self.present: tuple[str, ...] = ()
        self.counts: Counter[str] = Counter()

    @classmethod
    def for_lines(cls, lines: Iterable[str], limit: int | None = None) -> Unwrapper:
        u = cls()
        u.detect(lines, limit)
        return u

    @property
    def active(self) -> bool:
        return not self._detected or bool(self.present)

    def detect(self, lines: Iterable[str], limit: int | None = None) -> tuple[str, ...]:
        """Look at up to ``limit`` (default :attr:`SAMPLE`) lines; returns the names found."""
        limit = self.SAMPLE if limit is None else limit
        counts: Counter[str] = Counter()
        nonblank = 0
        for i, line in enumerate(lines):
            if i >= limit:
                break
            line = line.rstrip("\r\n")
            if line.strip():
                nonblank += 1
            _, fields = strip_outer(line)
            # _strip sets "wrappers" to the tuple of the names it applied (Fields is a plain dict)
            for name in cast("tuple[str, ...]", fields.get("wrappers", ())):
                counts[name] += 1
        by_name = {s.name: s for s in SHAPES}
        found = []
        for name, n in counts.items():
            shape = by_name.get(name)
            need = shape.min_hits if shape else 1
            if n >= min(need, max(nonblank, 1)):
                found.append(name)
        order = [s.name for s in SHAPES] + [r.name for r in REPAIRS]
        self.present = tuple(sorted(found, key=order.index))
        self.counts = counts
        self._heads = tuple((s.name, s.loose or s.regex, s) for s in SHAPES if s.side == "head" and s.name in self.present)
        self._tails = tuple(s for s in SHAPES if s.side == "tail" and s.name in self.present)
        self._repairs = tuple(r for r in REPAIRS if r.name in self.present)
        self._detected = True
        return self.present

    def vector_pattern(self) -> str | None:
        """One anchored regex, in the syntax polars (Rust) reads, for this file's head wrappers whose
        shape needs no look-around: what a vectorised reader strips from each line (up to
        ``VECTOR_DEPTH`` times, for nesting) before it looks for SGLang's own lines.  None when no
        wrapper of the file can be stripped that way (its lines are then read one by one)."""
        if not self._detected or not self.present:
            return None
        parts = []
        for _name, rx, _shape in self._heads:
            src = _drop_negative_lookaheads(rx.pattern)
            if src is None or "(?=" in src or "(?<" in src.replace("(?P<", "") or "(?P=" in src:
                continue  # a look-ahead that must match, a look-behind, a back-reference: not in Rust's syntax
            parts.append(_NAMED.sub("(?:", src.removeprefix("^")))
        return "^(?:" + "|".join(f"(?:{p})" for p in parts) + ")" if parts else None

    def feed(self, line: str) -> tuple[str, Fields]:
        """:func:`strip_outer` restricted to this file's wrappers (identity when none)."""
        if not self._detected:
            return strip_outer(line)
        if not self.present:
            return line, {}
        return _strip(line, self._heads, self._tails, self._repairs)


_NAMED = re.compile(r"\(\?P<\w+>")


def _drop_negative_lookaheads(src: str) -> str | None:
    """``src`` without its ``(?!...)`` groups (a vectorised strip is only a pre-pass: a line it
    strips counts only if SGLang's own line follows; any other line is read whole, one by one);
    None if the brackets do not balance."""
    out, i = [], 0
    while True:
        j = src.find("(?!", i)
        if j < 0:
            out.append(src[i:])
            return "".join(out)
        out.append(src[i:j])
        depth, k = 0, j
        while k < len(src):
            c = src[k]
            if c == "\\":
                k += 2
                continue
            if c == "[":  # a class: brackets in it do not count
                k = src.find("]", k + 2) + 1 if src.find("]", k + 2) >= 0 else len(src)
                continue
            depth += c == "("
            depth -= c == ")"
            k += 1
            if depth == 0:
                break
        if depth:
            return None
        i = k


VECTOR_DEPTH = 3  # nested wrappers a vectorised reader strips


WRAP_MIN = 60  # narrower "widths" are ordinary short lines


def hard_wrap_width(lines: Iterable[str], is_start: Callable[[str], bool]) -> int:
    """The width at which a page or terminal hard-wrapped these lines (a file's first lines), or 0.

    A hard-wrapped paste has no line longer than its width, and lines of exactly that width whose
    next line goes on mid-text: it starts no record (``is_start``: a log line's head) and with no
    indent.  Two such lines are needed; then each line of that width is joined with the next.
    """
    seq = [t.rstrip("\r") for t in lines]
    if not seq:
        return 0
    width = max(map(len, seq))
    if width < WRAP_MIN:
        return 0
    cut = 0
    for a, b in zip(seq, seq[1:]):
        if len(a) == width and b and not b[:1].isspace() and not is_start(b):
            cut += 1
    return width if cut >= 2 else 0
