"""Compiled regexes for lark's lexer (and sglog's own grammar-derived patterns), kept across runs.

lark's contextual lexer builds, on first use of each parser state, a scanner:
one Python regex alternating that state's terminals (up to ~90 of them).
Python compiles a regex in Python code (``re._parser`` and ``re._compiler``):
the scanners a typical log needs cost 40-90 ms at every start, on the path
of the first chunk and of a small log's whole run (#7).

This module is the ``re`` module lark's lexers use (``install``): it keeps
what the compiler produces for a pattern (the SRE code: a list of ints, and
the group tables), builds the pattern from it with ``_sre.compile`` (what
``re.compile`` itself ends with), and saves new entries next to lark's own
cache.  The file is keyed by the Python version, the SRE format and the
grammar, and anything unexpected (another Python, a missing internal, an
invalid entry) falls back to ``re.compile``: the patterns are the same
either way, only their cost differs.  ``grammar.re_compile`` keeps, in a file
of its own, the patterns sglog builds from the grammar (terminals, record
heads, line shapes: another 20-50 ms).
"""

from __future__ import annotations

import hashlib
import os
import pickle
import re
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

try:  # CPython internals; without them every pattern is compiled by re.compile
    import _sre
    from re import _compiler, _parser
except ImportError:  # pragma: no cover
    _sre = _compiler = _parser = None  # type: ignore[assignment]


MAX_ENTRIES = 3000


class CachedRe:
    """The part of the ``re`` module lark's lexers use: ``compile``, ``match`` and ``error``
    (also behind ``grammar.re_compile``, for the patterns sglog builds itself)."""

    error = re.error

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self.codes: dict[tuple[str, int], tuple] = _load(path)
        self.new = 0
        self.patterns: dict[tuple[Any, int], re.Pattern] = {}
        self._lock = threading.Lock()

    def compile(self, pattern: Any, flags: int = 0) -> re.Pattern:
        key = (pattern, int(flags))
        pat = self.patterns.get(key)
        if pat is None:
            pat = self._build(pattern, int(flags))
            self.patterns[key] = pat
        return pat

    def match(self, pattern: Any, string: Any, flags: int = 0):
        return self.compile(pattern, flags).match(string)

    def _build(self, pattern: Any, flags: int) -> re.Pattern:
        if _sre is None or not isinstance(pattern, str):
            return re.compile(pattern, flags)
        spec = self.codes.get((pattern, flags))
        if spec is not None:
            try:
                return _sre.compile(pattern, *spec)
            except Exception:  # not this interpreter's code after all
                pass
        try:
            spec = _spec(pattern, flags)
            pat = _sre.compile(pattern, *spec)
        except re.error:
            raise
        except Exception:
            return re.compile(pattern, flags)
        with self._lock:
            self.codes[(pattern, flags)] = spec
            self.new += 1
        return pat

    def save(self) -> None:
        """Write the file when this run compiled patterns it did not have (atomically: readers see
        the old file or the whole new one)."""
        if not self.new or self.path is None:
            return
        with self._lock:
            data, self.new = dict(self.codes), 0
            if len(data) > MAX_ENTRIES:  # (line shapes vary with the logs read: keep this run's only)
                data = {k: v for k, v in data.items() if k in self.patterns}
        try:
            write_private(self.path, pickle.dumps(data, protocol=pickle.HIGHEST_PROTOCOL))
        except Exception:
            pass


def _spec(pattern: str, flags: int) -> tuple:
    """What ``re._compiler.compile`` passes to ``_sre.compile`` after the pattern (plain ints:
    the compiler's opcodes are an int subclass pickle cannot rebuild)."""
    p = _parser.parse(pattern, flags)
    code = [int(c) for c in _compiler._code(p, flags)]
    groupindex = dict(p.state.groupdict)
    indexgroup = [None] * p.state.groups
    for name, i in groupindex.items():
        indexgroup[i] = name
    return (int(flags | p.state.flags), code, p.state.groups - 1, groupindex, tuple(indexgroup))


def _load(path: Path | None) -> dict:
    data = read_private(path, {}) if path is not None else {}
    return data if isinstance(data, dict) else {}


def read_private(path: Path, default: Any = None) -> Any:
    """What a cache file ``write_private`` wrote holds; ``default`` when it is missing, unreadable,
    or not ours alone (see ``owned``)."""
    try:
        with open(path, "rb") as f:
            if not owned(f.fileno()):
                return default
            return pickle.load(f)
    except Exception:
        return default


def write_private(path: Path, data: bytes) -> None:
    """Write a cache file readable and writable by us alone, atomically (readers see the old file
    or the whole new one)."""
    tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)


def owned(fd: int) -> bool:
    """Is this open file ours and writable by us alone?  (The caches live in the shared temporary
    directory: a pickle someone else put there must not be loaded.)"""
    if not hasattr(os, "getuid"):
        return True
    st = os.fstat(fd)
    return st.st_uid == os.getuid() and not st.st_mode & 0o022


def cache_path(grammar: str) -> Path | None:
    if _sre is None:
        return None
    key = hashlib.sha256(f"sre {sys.version} {getattr(_sre, 'MAGIC', '')} {getattr(_sre, 'CODESIZE', '')}\n{grammar}".encode()).hexdigest()[:24]
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f".sglog_sre_{uid}_{key}.pickle"


def install(parser, grammar: str) -> CachedRe | None:
    """Make ``parser``'s lexers (a lark LALR parser with a contextual lexer) compile through a
    ``CachedRe``; None (nothing changed) when the parser is not laid out as expected."""
    lexer = getattr(getattr(parser, "parser", None), "lexer", None)
    lexers = getattr(lexer, "lexers", None)
    if not isinstance(lexers, dict):
        return None
    cached = CachedRe(cache_path(grammar))
    for lx in [*lexers.values(), getattr(lexer, "root_lexer", None)]:
        if lx is not None and hasattr(lx, "re"):
            lx.re = cached
    conf = getattr(parser, "lexer_conf", None)
    if conf is not None and hasattr(conf, "re_module"):
        conf.re_module = cached
    return cached
