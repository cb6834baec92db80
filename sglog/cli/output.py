"""The one writer of every ``-o``: a temporary file in the target folder, renamed over the target.

An interrupted export or a full disk leaves the earlier file whole (the rename happens only once
everything is written and flushed to disk); the target is never one of the command's inputs
(``events -o LOG LOG`` would have overwritten the log it reads); an OS error (a read-only or
missing folder, no space) is an ``OutputError``: one line and exit 2, not an internal error.
A symlink at the target is replaced, never followed.
"""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

from sglog.errors import OutputError
from sglog.textsafe import quote


def _reason(e: OSError) -> str:
    if e.errno == errno.ENOSPC:
        return "no space left on the device"
    if e.errno == errno.EROFS:
        return "read-only file system"
    return e.strerror or str(e)


def check_not_an_input(target: Path) -> None:
    """Refuse a target that is one of the inputs this process opened (the same file, by device
    and inode, whatever the name)."""
    from sglog.read import inputs

    src = inputs.input_at(target)  # (by the identity each input was opened with: none is opened again)
    if src is not None:
        raise OutputError(f"{quote(str(target))}: refusing to write over an input of this command ({quote(src.name)})")


def write_with(target: Path, write: Callable[[Path], None]) -> Path:
    """Call ``write(tmp)`` for a temporary path beside ``target``, then rename it to ``target``."""
    target = Path(target)
    check_not_an_input(target)
    folder = target.parent if str(target.parent) else Path(".")
    shown = quote(str(target))
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise OutputError(f"{shown}: cannot create its folder ({_reason(e)})") from None
    if target.is_dir():
        raise OutputError(f"{shown}: is a directory")
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{target.name[:60]}.", suffix=".sglog-tmp", dir=folder)
    except OSError as e:
        raise OutputError(f"{shown}: cannot write ({_reason(e)})") from None
    os.close(fd)
    try:
        write(Path(tmp))
        with open(tmp, "rb+") as f:
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)
        os.replace(tmp, target)
    except OSError as e:
        _remove(tmp)
        raise OutputError(f"{shown}: cannot write ({_reason(e)})") from None
    except BaseException:  # (Ctrl-C, a polars error...: the target is left as it was)
        _remove(tmp)
        raise
    return target


def write_bytes(target: Path, data: bytes) -> Path:
    def put(tmp: Path) -> None:
        with open(tmp, "wb") as f:
            f.write(data)

    return write_with(target, put)


def write_text(target: Path, text: str) -> Path:
    return write_bytes(target, text.encode("utf-8"))


def _remove(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass
