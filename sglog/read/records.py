"""Physical lines -> records.

A record is what one logging call (or one interpreter print) wrote: usually one
physical line, sometimes a block that must be read as one (a traceback with
its chained exceptions, 3.11 caret lines and a multi-line exception message, a
component preface on its own line such as ``Exception in run_tp_server:``, a
``Fatal Python error`` thread dump, a C++ ``terminate called ...`` block, a
native crash report (UCX / glog / glibc backtraces), a ``--- Logging error ---``
block, an args dump wrapped by a terminal, a Python warning and its source
lines, a Playwright ``Call log:``, SGLang's multi-line OOM/hint messages, a
message that starts with a newline).

Pasted excerpts often start inside a block: C++ ``frame #N:`` lines alone or
from ``Exception raised from ...``, a thread dump's ``Thread 0x...`` section,
``File "..."`` frames (indented or not) and their source lines, a source line
and the exception line, an exception line alone, a warning's indented lines and
its ``warnings.warn(`` echo.  These fold into the block they are part of (read
as a ``fragment``).  One combined regex (``_FRAGMENT``) names the line a block
may start with; a line before an exception line (or before a warning's echo)
joins the block only when no grammar rule reads it.

A log pasted from a web page is wrapped at the page's width, mid-word: a line is joined with the
next line that starts no record when the two together are a message that a grammar rule (with
no free-text tail) or a catalogue template reads whole and neither piece alone is
(``rewrapped``); a known message cut in two, never a guess.

Lines are cleaned for parsing (CR/LF, ANSI colour codes, tqdm ``\\r`` updates,
a progress bar or a row of waiting dots glued to the front of a log line, an
envelope indented by a copy-paste) but the raw text is kept.  Every physical
line ends up in exactly one record.

The folder is a small state machine fed line by line (``Folder.feed``); a gap
in line numbers (a line taken by the vectorised fast path) closes any open
block, since fast-path lines are always whole records of their own.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sglog.read import grammar

ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[()][0-9A-Za-z]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[=>]")


@dataclass(slots=True)
class Record:
    line: int  # first physical line (1-based)
    end_line: int
    lines: list[str]  # cleaned text of each physical line
    raw: list[str]  # raw text of each physical line (no line terminator)
    mode: str = "line"  # line | traceback | fatal | cpp | native | wrapped | warning | indent | call_log | blank | sglang | newline
    # physical lines that go on the line before them (a page wrapped it): index -> the text between
    # them ('' or ' '); ``logical`` holds the lines as they were written
    glue: dict[int, str] | None = None

    @property
    def text(self) -> str:
        return "\n".join(self.logical)

    @property
    def logical(self) -> list[str]:
        """The cleaned lines as they were before a page wrapped them (``lines`` keeps one per physical line)."""
        if not self.glue:
            return self.lines
        out: list[str] = []
        for i, t in enumerate(self.lines):
            if i in self.glue and out:
                out[-1] += self.glue[i] + t
            else:
                out.append(t)
        return out

    def go_on(self, text: str, raw: str, lineno: int, joiner: str) -> None:
        """The next physical line continues this record's last line (with ``joiner`` between)."""
        if self.glue is None:
            self.glue = {}
        self.glue[len(self.lines)] = joiner
        self.lines.append(text)
        self.raw.append(raw)
        self.end_line = lineno


def clean(raw: str) -> str:
    """Text of a physical line as the parser sees it."""
    t = raw[:-1] if raw.endswith("\r") else raw
    if "\x1b" in t:
        t = ANSI.sub("", t)
    if "\r" in t:
        parts = [p for p in t.split("\r") if p.strip()]
        t = parts[-1] if parts else ""
    if "\x00" in t:
        t = t.replace("\x00", "")
    _init()
    if t[:1].isspace():
        # an envelope indented by a copy-paste: `  [2026-02-20 11:13:52 DP1 TP3 EP3] ...`
        s = t.lstrip()
        if _SGL_PREFIX.match(s):
            return s
    if GLUE_NEEDLES[0] in t or GLUE_NEEDLES[1] in t or t.startswith(".."):  # cheap test before the regex search
        m = _GLUED.search(t)
        if m and m.start("head") > 0 and _GLUE_PREFIX.match(t[: m.start()]):
            t = t[m.start("head") :]
    return t


# the patterns compiled from the grammar at first use, by _init() (None until then: see below)
_GLUED: re.Pattern[str]
_GLUE_PREFIX = re.compile(r"^(?:\.+|.*\d{1,3}%(?: Completed \||\|).*)$")
# literals every progress bar that _GLUE_PREFIX cuts from the front of a log line contains (but a row of dots)
GLUE_NEEDLES = ("%|", "% Completed |")
_START: re.Pattern[str]
_SGL_PREFIX: re.Pattern[str]
_CONT_SGLANG = re.compile(
    r"^(?:\s+\S|Try to allocate \d+|Ava(?:li|il)able (?:\w+ )?tokens:|[\w.]*\.(?:available|evictable)_size\(\)=|Possible (?:solutions|suggestions):|\d+\. |Open an issue|Fail when using backend)"
)
_TB_INNER = re.compile(r"^(?:\s|File \"|Traceback \(most recent call last\):|During handling of the above exception|The above exception was the direct cause)")
_FATAL_INNER = re.compile(r"^(?:\s|Thread 0x|Current thread 0x|Extension modules:|Stack \(most recent call first\):|<no Python frame>)")
_CPP_INNER = re.compile(r"^(?:\s|Exception raised from|frame #\d+:|what\(\):)")
_CPP_CONT = re.compile(r"^(?:Exception raised from|frame #\d+:)")  # c10::Error's location and frames inside an exception message
_ECHO = re.compile(r"^\s+warnings\.warn(?:_explicit)?\(")  # the source line `warnings` shows under a warning
_LOGERR_INNER = re.compile(r"^(?:\s|Traceback \(most recent call last\):|During handling of the above exception|The above exception was the direct cause|Call stack:|Message: |Arguments: )")
_CALL_LOG_INNER = re.compile(r"^\s+- ")
_NEWLINE_MAX = 20  # lines a message that starts with a newline may hold


_PYWARN: re.Pattern[str]
_PREFACE_LINE: re.Pattern[str]
_EXCEPTION: re.Pattern[str]
_FRAGMENT: re.Pattern[str]
_NATIVE_INNER: re.Pattern[str]
_TB_FRAME: re.Pattern[str]
_EXCEPTION_ANY: re.Pattern[str]
if not TYPE_CHECKING:
    # every use comes after an _init() (which tests _START): typed as compiled, so the per-line
    # code needs no None check
    _GLUED = _START = _SGL_PREFIX = _PYWARN = _PREFACE_LINE = _EXCEPTION = _FRAGMENT = _NATIVE_INNER = _TB_FRAME = _EXCEPTION_ANY = None


def _anon(pattern: str) -> str:
    """A terminal's pattern with its named groups made plain (to be joined with others)."""
    return re.sub(r"\(\?P<\w+>", "(?:", pattern)


def _init() -> None:
    global _GLUED, _START, _SGL_PREFIX, _PYWARN, _PREFACE_LINE, _EXCEPTION, _FRAGMENT, _NATIVE_INNER, _TB_FRAME, _EXCEPTION_ANY
    if _START is not None:
        return
    env = grammar.envelope_regex()
    _SGL_PREFIX = grammar.re_compile(env)
    _PYWARN = grammar.compiled("PYWARN_HEAD")
    _PREFACE_LINE = grammar.compiled("TB_PREFACE_LINE")
    _EXCEPTION = grammar.compiled("TB_EXCEPTION")
    _TB_FRAME = grammar.compiled("TB_FRAME")
    _EXCEPTION_ANY = grammar.compiled("TB_EXCEPTION_ANY")
    tp = grammar.terminal_pattern
    # the lines a block (or a pasted piece of one) starts with, one named group per block mode
    # (tried on a line that opens a record and has no SGLang envelope)
    cpp_heads = "|".join(_anon(tp(n)) for n in ("TB_CPP_TERMINATE", "TB_CPP_RAISED", "TB_CPP_FRAME", "TB_CPP_WHAT"))
    fatal_heads = "|".join(_anon(tp(n)) for n in ("TB_FATAL", "TB_THREAD", "TB_FAULT_FRAME"))
    _FRAGMENT = grammar.re_compile(
        f"^(?:(?P<cpp>{cpp_heads})|(?P<fatal>{fatal_heads})|(?P<native>{tp('NATIVE_HEAD')})"
        f"|(?P<echo>{_ECHO.pattern[1:]})|(?P<frame>{_anon(tp('TB_FRAME'))})|(?P<exception>{_anon(tp('TB_EXCEPTION'))}))"
    )
    _NATIVE_INNER = grammar.re_compile(f"^(?:{tp('NATIVE_HEAD')}|{tp('NB_INNER')})")
    # a tqdm bar (or a row of waiting dots) followed directly by a log line: keep the log line
    glued_heads = [
        env.lstrip("^"),
        grammar.terminal_pattern("TORCH_HEAD"),
        grammar.terminal_pattern("GLOG_HEAD"),
        grammar.terminal_pattern("NCCL_HEAD"),
        r"/\S+?\.pyx?:\d+: [A-Za-z]*Warning:",
    ]
    _GLUED = grammar.re_compile(r"(?<=[\]|%.]) ?(?P<head>" + "|".join(f"(?:{h})" for h in glued_heads) + ")")
    heads = [
        env.lstrip("^"),
        grammar.terminal_pattern("UVICORN_LEVEL"),
        grammar.terminal_pattern("NCCL_HEAD"),
        grammar.terminal_pattern("TORCH_HEAD"),
        grammar.terminal_pattern("GLOG_HEAD"),
        grammar.terminal_pattern("GLOO_TEXT"),
        grammar.terminal_pattern("VLLM_HEAD"),
        grammar.terminal_pattern("PYWARN_HEAD"),
        grammar.terminal_pattern("TB_FATAL"),
        grammar.terminal_pattern("TB_CPP_TERMINATE"),
        grammar.terminal_pattern("NVSHMEM_SOURCE"),
        grammar.terminal_pattern("LIB_TRANSFORMERS"),
        grammar.terminal_pattern("TB_PREFACE_LINE"),
        grammar.terminal_pattern("UCX_HEAD"),
        grammar.terminal_pattern("NATIVE_HEAD"),
        _anon(grammar.terminal_pattern("TB_CPP_RAISED")),
        grammar.terminal_pattern("TB_CPP_FRAME"),
        grammar.terminal_pattern("TB_THREAD"),
        r"Traceback \(most recent call last\):",
        r"--- Logging error ---",
        r"Call log:",
    ]
    _START = grammar.re_compile("^(?:" + "|".join(f"(?:{h})" for h in heads) + ")")


def is_start(text: str) -> bool:
    _init()
    return bool(_START.match(text))


def _unbalanced(text: str) -> int:
    """Open brackets left after ``text`` (ignoring quoted strings, roughly)."""
    depth = 0
    quote = ""
    esc = False
    for ch in text:
        if quote:
            if esc:
                esc = False
            elif ch == "\\":
                esc = True
            elif ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch in "([{":
            depth += 1
        elif ch in ")]}":
            depth -= 1
    return depth


@dataclass
class Folder:
    """Fold a stream of (line number, raw text) into records."""

    out: list[Record] = field(default_factory=list)
    _cur: Record | None = None
    _blanks: list[tuple[int, str]] = field(default_factory=list)  # blank lines waiting (inside a block?)
    _last: int = 0
    _seen_exception: bool = False
    _logging_error: bool = False
    _depth: int = 0
    # the width at which the page hard-wrapped the file's lines (sglog/read/envelope.py::hard_wrap_width),
    # 0 if it did not: a line of exactly this width goes on in the next line that starts no record
    wrap: int = 0

    def __post_init__(self) -> None:
        _init()

    # -- public
    def feed(self, lineno: int, raw: str, inner: str | None = None) -> None:
        """One physical line; ``inner``: its text without an outer envelope (sglog/read/envelope.py),
        which is what is read, while the record keeps ``raw`` whole."""
        if lineno != self._last + 1:
            self._close()
        self._last = lineno
        text = clean(raw if inner is None else inner)
        if not text or text.isspace():  # (blank: the test of `not text.strip()`, without a copy)
            cur = self._cur
            if cur is not None and (cur.mode in ("traceback", "fatal", "cpp", "wrapped", "warning") or (cur.mode == "newline" and len(cur.logical) == 1)):
                self._blanks.append((lineno, raw))
            else:
                self._close()
                self._blank(lineno, raw)
            return
        cur = self._cur
        if self.wrap and cur is not None and not self._blanks and len(cur.raw[-1]) == self.wrap and not text[:1].isspace() and not is_start(text):
            cur.go_on(text, raw, lineno, "")  # the rest of a line the page wrapped: one line again for the parser
            return
        if cur is not None and self._continues(cur, text):
            self._take_blanks(cur)
            cur.lines.append(text)
            cur.raw.append(raw)
            cur.end_line = lineno
            self._after_append(cur, text)
            return
        if cur is not None and not self._blanks and len(cur.lines) == 1 and cur.mode in ("line", "sglang") and not is_start(text):
            joiner = rewrapped(_message_of(cur.lines[0]), text)
            if joiner is not None:
                cur.go_on(text, raw, lineno, joiner)  # a line a web page wrapped: one line again for the parser
                return
        self._close()
        self._open(lineno, text, raw)

    def flush(self) -> list[Record]:
        self._close()
        out, self.out = self.out, []
        return out

    def take(self) -> list[Record]:
        """Records completed so far.  An open block stays open, and so does a last run of blank
        lines: the next line fed may be blank too and belong to it."""
        if self._cur is None and self.out and self.out[-1].mode == "blank" and self.out[-1].end_line == self._last:
            out, self.out = self.out[:-1], self.out[-1:]
        else:
            out, self.out = self.out, []
        return out

    # -- internals
    def _blank(self, lineno: int, raw: str) -> None:
        if self.out and self.out[-1].mode == "blank" and self.out[-1].end_line == lineno - 1:
            r = self.out[-1]
            r.lines.append("")
            r.raw.append(raw)
            r.end_line = lineno
        else:
            self.out.append(Record(lineno, lineno, [""], [raw], "blank"))

    def _take_blanks(self, cur: Record) -> None:
        for ln, raw in self._blanks:
            cur.lines.append("")
            cur.raw.append(raw)
            cur.end_line = ln
        self._blanks.clear()

    def _close(self) -> None:
        if self._cur is not None:
            self.out.append(self._cur)
            self._cur = None
        for ln, raw in self._blanks:
            self._blank(ln, raw)
        self._blanks.clear()

    def _open(self, lineno: int, text: str, raw: str) -> None:
        mode = "line"
        self._seen_exception = False
        self._logging_error = False
        if "Traceback (most recent call last):" in text:
            mode = "traceback"
        elif text.startswith("--- Logging error ---"):
            mode = "traceback"  # read by blocks.read_traceback as a logging_error block
            self._logging_error = True
        elif (fm := _FRAGMENT.match(text)) is not None and (fm.lastgroup != "exception" or not _standalone(text)):
            # a block, or a piece of one (an excerpt that starts inside it)
            mode = _FRAGMENT_MODES[fm.lastgroup]
            self._seen_exception = fm.lastgroup == "exception"
        elif text.startswith("    ") and not _standalone(text):
            mode = "traceback"  # source lines of a traceback whose head was cut off
        elif _PYWARN.match(text):
            mode = "warning"
        elif text.startswith("Call log:"):
            mode = "call_log"
        else:
            m = _SGL_PREFIX.match(text)
            msg = text[m.end() :] if m else text
            if msg.startswith("server_args=") and _unbalanced(msg) > 0:
                mode = "wrapped"
                self._depth = _unbalanced(msg)
            elif _PREFACE_LINE.match(msg):
                mode = "traceback"  # `Exception in run_tp_server:` then the traceback (<=0.3.0)
            elif m and not msg.strip():
                # the envelope alone: the message starts with a newline (0.4.5.post3's "\n\nCUDA
                # Graph is DISABLED.\n..." banner); it holds the blank lines after the envelope and
                # the text lines after them, up to a blank line, the next record's start or a line
                # that is a record of its own (``Killed``, a progress bar ...), at most _NEWLINE_MAX
                mode = "newline"
            elif m:
                mode = "sglang"
        self._cur = Record(lineno, lineno, [text], [raw], mode)

    def _after_append(self, cur: Record, text: str) -> None:
        if cur.mode == "wrapped":
            self._depth += _unbalanced(text)
        elif cur.mode == "traceback" and not text[:1].isspace():
            if text.startswith("Traceback (most recent call last):"):
                self._seen_exception = False
            elif not self._seen_exception:
                # the exception line; one whose type TB_EXCEPTION's suffixes miss counts where frames end
                self._seen_exception = _EXCEPTION.match(text) is not None or (_EXCEPTION_ANY.match(text) is not None and not _TB_FRAME.match(text) and any(_TB_FRAME.match(t) for t in cur.logical))

    def _continues(self, cur: Record, text: str) -> bool:
        """Whether ``text`` goes on ``cur`` (the open record)."""
        mode = cur.mode
        if mode in ("line", "indent") and self._joins_fragment(cur, text):
            return True
        if mode == "wrapped":
            return self._depth > 0 and not is_start(text)
        if mode == "traceback" and self._logging_error:
            if _LOGERR_INNER.match(text):
                return True
            if is_start(text):
                return False
            return _EXCEPTION.match(text) is not None
        if mode == "traceback":
            if text[:1].isspace() and _ECHO.match(text) and self._headless_source(cur):
                cur.mode = "warning"  # the indented lines were a warning's message: its echo follows
                return True
            if _TB_INNER.match(text):
                return True
            if self._seen_exception and _CPP_CONT.match(text):
                return True  # c10::Error's `Exception raised from ...` and frames in the message
            if is_start(text):
                return False
            if self._seen_exception:
                # after the exception line: its message goes on (hint blocks, a compiler's
                # source excerpt, ...) until a line that is a record of its own
                return bool(_CONT_SGLANG.match(text)) or not _standalone(text)
            # the exception line itself (`RuntimeError: ...`) or its message's first line
            return True
        if mode == "call_log":
            return bool(_CALL_LOG_INNER.match(text))
        if mode == "newline":
            return len(cur.logical) <= _NEWLINE_MAX and not is_start(text) and not _standalone(text)
        if mode == "fatal":
            return bool(_FATAL_INNER.match(text))
        if mode == "cpp":
            return bool(_CPP_INNER.match(text))
        if mode == "native":
            return bool(_NATIVE_INNER.match(text))
        if mode == "warning":
            return text[:1].isspace()
        if mode == "sglang":
            return bool(_CONT_SGLANG.match(text)) and not is_start(text) and not text.lstrip().startswith('File "')
        if mode == "line":
            return bool(_CONT_SGLANG.match(text)) and not text[:1].isspace() and not is_start(text)
        return False

    def _joins_fragment(self, cur: Record, text: str) -> bool:
        """A record of unrecognised line(s) without an envelope, and a line that makes it part of
        a block: an exception line after a source line (a traceback's last lines), an indented
        line after indented lines, or a warning's `warnings.warn(` echo after its indented message
        lines.  The record's lines join only if no grammar rule reads them."""
        first = cur.logical[0]  # (a "line" record has no envelope: see _open)
        if not text[:1].isspace():
            if (cur.mode == "line" and len(cur.logical) > 1) or not _EXCEPTION.match(text) or is_start(text) or _standalone(text):
                return False
            if cur.mode == "line" and (_standalone(first) or _FRAGMENT.match(first)):
                return False
            cur.mode = "traceback"
            return True
        if not first[:1].isspace():
            return False
        if _ECHO.match(text):
            if cur.mode == "line" and _standalone(first):
                return False
            cur.mode = "warning"
            return True
        if _standalone(text) or (cur.mode == "line" and _standalone(first)):
            return False
        cur.mode = "indent"  # indented lines no rule reads: a warning's message, if its echo follows
        return True

    def _headless_source(self, cur: Record) -> bool:
        """A traceback record that is only indented lines (no head, frame or exception yet)."""
        return not self._seen_exception and not any(_TB_FRAME.match(t) or "Traceback (most recent" in t for t in cur.logical)


# (keyed by _FRAGMENT's Match.lastgroup, which is never None where it is looked up: one group matched)
_FRAGMENT_MODES: dict[str | None, str] = {"cpp": "cpp", "fatal": "fatal", "native": "native", "echo": "warning", "frame": "traceback", "exception": "traceback"}


# ---------------------------------------------------------------- lines a web page wrapped
#
# A log pasted from a web page comes wrapped at the page's width, wherever that fell: mid-word,
# mid-number.  Such a line is joined with the next one (a line that starts no record) when, and
# only when, the two together are a message that a grammar rule or a catalogue template reads
# whole, and neither piece alone is: a known message cut in two, never a guess.


def _message_of(text: str) -> str:
    """A record's first line without SGLang's envelope."""
    m = _SGL_PREFIX.match(text)
    return text[m.end() :] if m else text


def rewrapped(first: str, text: str) -> str | None:
    """The joiner ('' or ' ') that makes ``first + joiner + text`` one recognised message when it
    is a message cut in two (neither piece is recognised alone), else None."""
    if _reading(text) or _reading(first) == WHOLE:
        return None
    for joiner in ("", " "):
        if _reading(first + joiner + text) == WHOLE:
            return joiner
    if _catalogued(first) or _catalogued(text):
        return None
    for joiner in ("", " "):
        if _catalogued(first + joiner + text):
            return joiner
    return None


WHOLE = 2  # a rule reads it all (no free-text tail)
HEAD = 1  # a rule reads its head, the rest is free text (`TORCH_HEAD TEXT`: a foreign logger's line)


@functools.lru_cache(maxsize=4096)
def _reading(text: str) -> int:
    """How the grammar reads a message: ``WHOLE``, ``HEAD`` (its tree holds the catch-all
    ``TEXT`` terminal) or 0 (no rule reads it; a foreign logger's prefix is tried off too)."""
    from lark import Tree
    from lark.exceptions import LarkError

    from sglog.read import messages

    if not text.strip():
        return 0
    tree = None
    for candidate in (text, messages.strip_prefix(text)[0]):
        try:
            tree = grammar.parser().parse(candidate)
            break
        except (LarkError, RecursionError):
            continue
    if not isinstance(tree, Tree):
        return 0
    generic = any(True for _ in tree.scan_values(lambda v: getattr(v, "type", None) == "TEXT"))
    return HEAD if generic else WHOLE


@functools.lru_cache(maxsize=4096)
def _catalogued(text: str) -> bool:
    from sglog.read import catalog, messages

    return catalog.load().match(messages.strip_prefix(text)[0]) is not None


def _standalone(text: str) -> bool:
    """Is this line a record of its own (a message some grammar rule recognises)?"""
    from sglog.read import messages

    return messages.parse_message(text) is not None


def fold(lines: list[tuple[int, str]]) -> list[Record]:
    """Fold (line number, raw text) pairs into records (convenience for tests)."""
    f = Folder()
    for n, raw in lines:
        f.feed(n, raw)
    return f.flush()
