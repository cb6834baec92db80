"""A cache folder that only the user who runs sglog can write.

lark keeps its built parser in a pickle (``Lark(cache=path)``), and loading a
pickle runs whatever code it names: a cache file is as trusted as the program.
So no cache file lives in the shared temporary folder, where anyone can plant
one under a predictable name (#28).  The folder is ``$SGLOG_CACHE_DIR``, else
``$XDG_CACHE_HOME/sglog``, else ``~/.cache/sglog``; it is created with mode
0700 and used only while it is a directory owned by the effective user that
no one else can write (checked on the directory itself, after symlinks).
Otherwise there is no cache: sglog builds what it needs each time, slower but
the same.  The cached values sglog derives itself are JSON, never pickles.
"""

from __future__ import annotations

import functools
import json
import os
import stat
from collections.abc import Callable
from pathlib import Path
from typing import Any

ENV_DIR = "SGLOG_CACHE_DIR"


def _candidate() -> Path | None:
    explicit = os.environ.get(ENV_DIR)
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "sglog"
    try:
        home = Path.home()
    except (RuntimeError, KeyError):  # no home directory for this user
        return None
    return home / ".cache" / "sglog"


def is_private(path: Path) -> bool:
    """A directory (after symlinks) owned by the effective user, that group and others cannot write."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    if not stat.S_ISDIR(st.st_mode):
        return False
    if not hasattr(os, "geteuid"):  # pragma: no cover - not POSIX: no owners to check
        return True
    return st.st_uid == os.geteuid() and not st.st_mode & 0o022


@functools.cache
def private_dir() -> Path | None:
    """The user's private cache folder, created if missing; None when there is no safe one."""
    path = _candidate()
    if path is None:
        return None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.mkdir(mode=0o700, exist_ok=True)
    except OSError:
        return None
    return path if is_private(path) else None


def file_in_cache(name: str) -> Path | None:
    """A path for a cache file in the private folder (None: no private folder).  A file there that
    is not the user's own, or that others can write, is removed first: it is never read."""
    folder = private_dir()
    if folder is None:
        return None
    path = folder / name
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return path
    except OSError:
        return None
    mine = hasattr(os, "geteuid") and st.st_uid == os.geteuid()
    if stat.S_ISREG(st.st_mode) and mine and not st.st_mode & 0o022:
        return path
    try:
        os.unlink(path)
    except OSError:
        return None
    return path


def json_cached(name: str, compute: Callable[[], Any]) -> Any:
    """``compute()``, kept as JSON in the private folder under ``name`` (the caller puts a key of
    everything the value depends on in the name).  The value must survive a JSON round trip."""
    path = file_in_cache(name)
    if path is not None:
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            pass
    value = compute()
    if path is not None:
        _write_atomic(path, json.dumps(value, sort_keys=True))
    return value


def _write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
