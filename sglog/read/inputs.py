"""Opening inputs: plain, .gz, .zst or stdin; refusing what is not a text log.

Every problem becomes an ``InputError`` with a one-line message.  Text is
decoded as UTF-8 with replacement characters (invalid bytes never stop a read)
and handed on in chunks that end on a line boundary, so memory stays flat in
the size of the input.
"""

from __future__ import annotations

import bisect
import enum
import functools
import gzip
import hashlib
import io
import os
import stat
import sys
import threading
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Protocol

from sglog.errors import InputError
from sglog.textsafe import quote

if TYPE_CHECKING:
    from _typeshed import WriteableBuffer

FIRST_CHUNK_BYTES = 1 << 20  # the small first chunk, read by the caller, which teaches the shape book (parse._read_ahead)
CHUNK_BYTES = 32 << 20  # per chunk in flight: polars' intermediates grow with it; fewer chunks, less fixed cost (benchmarks/NOTES.md)
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BINARY_SIGNATURES = (b"\x89PNG", b"%PDF", b"PK\x03\x04", b"\x7fELF", b"GIF8", b"\xff\xd8\xff")
Binary = io.RawIOBase | io.BufferedIOBase  # a reader of an input's bytes (raw or inflated)


class _Fd:
    """One open file descriptor, closed when the last Source that holds it goes."""

    __slots__ = ("fd", "__weakref__")

    def __init__(self, fd: int) -> None:
        self.fd = fd

    def __del__(self) -> None:
        try:
            os.close(self.fd)
        except (OSError, TypeError):
            pass


class _FileReader(io.RawIOBase):
    """A reader of a regular file's descriptor at an offset of its own (``os.pread``): the
    prefetch thread, the parse and the evidence lookup read one opened file, never the path again."""

    def __init__(self, fd: _Fd, base: int = 0) -> None:
        super().__init__()
        self._fd = fd  # (kept alive while a reader is open)
        self._base = base
        self._pos = base

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while block := os.pread(self._fd.fd, 1 << 20, self._pos):
                self._pos += len(block)
                parts.append(block)
            return b"".join(parts)
        block = os.pread(self._fd.fd, n, self._pos)
        self._pos += len(block)
        return block

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b).cast("B")
        block = self.read(len(view))
        view[: len(block)] = block
        return len(block)

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        if whence == os.SEEK_SET:
            self._pos = self._base + offset
        elif whence == os.SEEK_CUR:
            self._pos += offset
        else:
            self._pos = os.fstat(self._fd.fd).st_size + offset
        return self._pos - self._base

    def tell(self) -> int:
        return self._pos - self._base

    def close(self) -> None:  # (the descriptor belongs to the Source)
        super().close()


KEEP_BYTES = 256 << 20  # what a pipe's reading keeps for later stages (evidence text, a second read): its bytes compressed, so several times as much log


class _Stream:
    """A pipe, FIFO or terminal (stdin, ``<(cat log)``): opened once and read once, as it comes.

    Bytes the checks look at first (``peek``) are handed out again at the start of the reading.
    While it is read, a copy is kept for the stages after the parse (the text of evidence lines,
    a second read of the same name), compressed and bounded (``KEEP_BYTES``; a compressed input
    is kept as it came), and its SHA-256 is summed.  Never spooled to a file.
    """

    def __init__(self, fd: _Fd, name: str) -> None:
        self.fd: _Fd | None = fd
        self.name = name
        self.head = b""  # read by peek, not yet handed out
        self.read_bytes = 0
        self.hash = hashlib.sha256()
        self.kept: list[bytes] = []
        self.kept_bytes = 0
        self.whole = True  # the kept copy holds everything read so far
        self.started = False  # the one reading has begun
        self.done = False  # ... and reached the end
        self.plain = True  # set by open_source: a plain stream is kept compressed here
        self._pack: _Packer | None = None

    def _raw_read(self, n: int) -> bytes:
        """Up to ``n`` bytes, fewer only at the end (a pipe hands out 64 KiB at a time)."""
        fd = self.fd
        if fd is None:  # (read to its end and closed)
            return b""
        buf = bytearray(n)
        view = memoryview(buf)
        got = 0
        while got < n:
            try:
                k = os.readv(fd.fd, [view[got:]])
            except InterruptedError:
                continue
            if k == 0:
                break
            got += k
        view.release()
        del buf[got:]
        return bytes(buf)

    def peek(self, n: int) -> bytes:
        if self.started:
            raise RuntimeError("peek after the reading began")
        if len(self.head) < n:
            self.head += self._raw_read(n - len(self.head))
        return self.head[:n]

    def _keep(self, block: bytes) -> None:
        self.hash.update(block)
        self.read_bytes += len(block)
        if not self.whole:
            return
        if self.plain:
            if self._pack is None:
                isal = _isal()
                self._pack = (isal[1] if isal else zlib).compressobj(1)
            block = self._pack.compress(block)
        self.kept.append(block)
        self.kept_bytes += len(block)
        if self.kept_bytes > KEEP_BYTES:
            self.whole = False  # (what is kept still serves the earlier lines' evidence)

    def take(self, n: int) -> bytes:
        """The next ``n`` bytes of the one reading (teed into the kept copy)."""
        self.started = True
        if self.done:
            return b""
        if self.head:
            block, self.head = self.head[:n], self.head[n:]
            if len(block) < n:
                block += self._raw_read(n - len(block))
        else:
            block = self._raw_read(n)
        if block:
            self._keep(block)
        if len(block) < n:
            self.finish()
        return block

    def finish(self) -> None:
        if self.done:
            return
        self.done = True
        self.fd = None  # (read to its end: the kept copy serves the later stages; the descriptor closes)
        if self._pack is not None and self.whole:
            tail = self._pack.flush()
            self.kept.append(tail)
            self.kept_bytes += len(tail)
        self._pack = None

    def drain(self) -> None:
        """Read what is left (for the checksum of an input the reading stopped short of)."""
        while not self.done:
            self.take(1 << 20)

    def kept_reader(self) -> Binary:
        """The bytes read so far, from the kept copy (decompressed when kept so)."""
        if self.plain:
            return _Unpack(self.kept)
        return io.BytesIO(b"".join(self.kept))


class _Packer(Protocol):
    """zlib's (or ISA-L's) compressobj: what a stream's kept copy is compressed with."""

    def compress(self, data: bytes, /) -> bytes: ...
    def flush(self) -> bytes: ...


class _Unpacker(Protocol):
    """zlib's (or ISA-L's) decompressobj: what a kept copy is inflated with."""

    @property
    def unconsumed_tail(self) -> bytes: ...
    def decompress(self, data: bytes, max_length: int = ..., /) -> bytes: ...


class _StreamReader(io.RawIOBase):
    def __init__(self, stream: _Stream) -> None:
        super().__init__()
        self.stream = stream

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if n is None or n < 0:
            parts = []
            while block := self.stream.take(1 << 20):
                parts.append(block)
            return b"".join(parts)
        return self.stream.take(n) if n else b""

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b).cast("B")
        block = self.read(len(view))
        view[: len(block)] = block
        return len(block)


class _Inflating(io.RawIOBase):
    """A reader of decompressed bytes: ``_more(limit)`` gives the next piece (about ``limit``
    bytes at most, maybe fewer), None at the end; ``_out`` holds what a read did not take."""

    _out = b""

    def readable(self) -> bool:
        return True

    def _more(self, limit: int) -> bytes | None:  # pragma: no cover - each subclass has its own
        raise NotImplementedError

    def read(self, n: int = -1) -> bytes:
        n = (1 << 62) if n is None or n < 0 else n
        parts, got = [self._out], len(self._out)
        while got < n:
            out = self._more(n - got)
            if out is None:
                break
            parts.append(out)
            got += len(out)
        block = b"".join(parts)
        self._out = block[n:]
        return block[:n]

    def readinto(self, b: WriteableBuffer) -> int:
        view = memoryview(b).cast("B")
        block = self.read(len(view))
        view[: len(block)] = block
        return len(block)


class _Unpack(_Inflating):
    """A plain stream's kept copy, inflated as it is read."""

    def __init__(self, pieces: list[bytes]) -> None:
        super().__init__()
        isal = _isal()
        self._z: _Unpacker = (isal[1] if isal else zlib).decompressobj()
        self._pieces = list(pieces)

    def _more(self, limit: int) -> bytes | None:
        if not (self._pieces or self._z.unconsumed_tail):
            return None
        data = self._z.unconsumed_tail or self._pieces.pop(0)
        return self._z.decompress(data, min(limit, 64 << 20))


class Source:
    """One input, opened once (``open_source``): a regular file read at offsets of its own by
    every stage, or a stream (pipe, FIFO, stdin) read once as it comes (see ``_Stream``)."""

    __slots__ = ("name", "path", "compression", "_holder", "_base", "_size", "stream", "_stat", "marks")

    def __init__(self, name: str, path: Path, fd: _Fd, compression: str = "none", *, stream: bool = False, base: int = 0, size: int = 0) -> None:
        self.name = name  # as the user wrote it ('-' for stdin)
        self.path = path
        self.compression = compression  # none | gzip | zstd
        self._base = base
        self._size = size
        self.stream = _Stream(fd, name) if stream else None
        self._holder: _Fd | None = None if stream else fd  # (a stream's is its own: let go when its reading ends)
        self._stat: tuple[int, int, int, int] | None = None
        # (offset, newlines before it) every MARK_BYTES of a plain regular file, noted as a reading
        # from its start counts its blocks' newlines (``iter_raw_chunks``): ``find_lines`` starts
        # at the mark before a line instead of counting the file up to it
        self.marks: list[tuple[int, int]] = []

    def identity(self) -> tuple[int, int] | None:
        """(device, inode) of the file read (a regular file's as opened; a stream's while it is
        open), without opening it again."""
        if self.stream is None:
            return self._stat[:2] if self._stat is not None else None
        fd = self.stream.fd
        if fd is None:
            return None
        try:
            st = os.fstat(fd.fd)
        except OSError:
            return None
        return st.st_dev, st.st_ino

    @property
    def _fd(self) -> _Fd:
        """The open descriptor: a stream's while its one reading lasts; a regular file's, opened
        again (the same file, or an InputError) if it was closed as one of the least recently
        used (``MAX_OPEN_FILES``)."""
        if self.stream is not None:
            if self.stream.fd is None:
                raise OSError(f"{self.name}: read to its end and closed")
            return self.stream.fd
        holder = self._holder
        if holder is None:
            holder = self._holder = _reopen(self)
        _used(self)
        return holder

    @property
    def size(self) -> int:
        """Bytes on disk; for a stream, the bytes read so far."""
        return self.stream.read_bytes + len(self.stream.head) if self.stream else self._size

    @property
    def seekable(self) -> bool:
        return self.stream is None

    def __repr__(self) -> str:
        return f"Source(name={self.name!r}, compression={self.compression!r}, stream={self.stream is not None})"

    def __reduce__(self) -> tuple[Callable[[str], Source], tuple[str]]:  # (parse_files hands regular files to other processes, which open them anew)
        if self.stream is not None:
            raise TypeError(f"{self.name}: a pipe cannot be handed to another process")
        return (open_source, (self.name,))

    def peek(self, n: int) -> bytes:
        """The first ``n`` raw bytes, without using up a stream."""
        if self.stream is not None:
            return self.stream.peek(n)
        return os.pread(self._fd.fd, n, self._base)

    def raw(self, partial: bool = False) -> Binary:
        """A reader of the raw (maybe compressed) bytes from the start: a regular file's own
        offset; a stream's one reading, then its kept copy."""
        if self.stream is None:
            return _FileReader(self._fd, self._base)
        s = self.stream
        if not s.started:
            return _StreamReader(s)
        if s.done and s.whole or partial:
            return s.kept_reader()
        raise InputError(f"{quote(self.name)}: a pipe can be read only once, and this one was too long to keep a copy of (over {KEEP_BYTES >> 20} MiB compressed)")

    def sha256(self) -> str:
        if self.stream is not None:
            self.stream.drain()
            return self.stream.hash.hexdigest()
        h = hashlib.sha256()
        f = self.raw()
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
        return h.hexdigest()


_sources: dict[str, Source] = {}  # name -> the Source opened for it (one opening per input and process)


def remove_spooled() -> None:
    """Let go of the inputs this process opened (their descriptors close).  (Nothing is spooled:
    stdin is streamed.)"""
    _sources.clear()
    _prefetches.clear()
    _open_files.clear()


close_sources = remove_spooled


MAX_OPEN_FILES = 32  # regular files whose descriptors stay open at once: the least recently used one is closed (opened again if a later stage reads it): one descriptor per open input, none kept for inputs done with (300 inputs under a limit of 64 descriptors: exit 2, #28)
_open_files: dict[int, Source] = {}  # id -> a regular file's Source holding its descriptor, least recently used first


def _used(src: Source) -> None:
    """``src`` (holding its descriptor) is the most recently used; close the least recently used
    ones beyond MAX_OPEN_FILES (a descriptor a reader still reads closes when that reader ends)."""
    if src.name == "-":  # (stdin from a file cannot be opened again)
        return
    _open_files.pop(id(src), None)
    _open_files[id(src)] = src
    while len(_open_files) > MAX_OPEN_FILES:
        old = _open_files.pop(next(iter(_open_files)))
        old._holder = None


def _reopen(src: Source) -> _Fd:
    """A regular file's descriptor again, after it was closed; the file must be the one read."""
    shown = quote(src.name)
    try:
        fd = os.open(src.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    except OSError as e:
        raise InputError(f"{shown}: cannot read again ({e.strerror or e})") from None
    holder = _Fd(fd)
    st = os.fstat(fd)
    if src._stat is not None and (st.st_dev, st.st_ino) != src._stat[:2]:
        raise InputError(f"{shown}: replaced by another file since it was read")
    return holder


def input_at(path: str | Path) -> Source | None:
    """The input this process opened that is the file at ``path`` (by device and inode, whatever
    the name), if any."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return next((src for src in list(_sources.values()) if src.identity() == (st.st_dev, st.st_ino)), None)


def opened(name: str) -> Source | None:
    """The Source this process opened for ``name``, if any (a stream is never opened twice)."""
    return _sources.get(name)


def _identity(st: os.stat_result) -> tuple[int, int, int, int]:
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def open_source(name: str) -> Source:
    """Open a path (or '-') once and return its Source; raise InputError with one line.

    The same name again in this process gets the same Source (a stream cannot be opened twice;
    a regular file is opened anew only if it changed on disk)."""
    known = _sources.get(name)
    if known is not None:
        if known.stream is not None:
            return known
        try:
            if _identity(os.stat(name)) == known._stat:
                return known
        except OSError:
            pass
    src = _open(name)
    _sources[name] = src
    return src


def _open(name: str) -> Source:
    shown = quote(name)
    if name == "-":
        try:
            fd = os.dup(0)
        except OSError:
            raise InputError("stdin is closed") from None
        path = Path("/dev/stdin")
    else:
        path = Path(name)
        if not os.path.lexists(path):
            raise InputError(f"{shown}: no such file")
        if path.is_dir():
            raise InputError(f"{shown}: is a directory, not a log file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{shown}: permission denied")
        try:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            raise InputError(f"{shown}: no such file") from None
        except OSError as e:
            raise InputError(f"{shown}: cannot read ({e.strerror or e})") from None
    holder = _Fd(fd)
    try:
        st = os.fstat(fd)
        if stat.S_ISDIR(st.st_mode):
            raise InputError(f"{shown}: is a directory, not a log file")
        if stat.S_ISREG(st.st_mode):
            base = os.lseek(fd, 0, os.SEEK_CUR) if name == "-" else 0  # (stdin from a file: where it stands)
            src = Source(name, path, holder, base=base, size=max(st.st_size - base, 0))
            src._stat = _identity(st)
            _used(src)
        else:
            src = Source(name, path, holder, stream=True)
        magic = src.peek(4)
    except OSError as e:
        raise InputError(f"{shown}: cannot read ({e.strerror or e})") from None
    src.compression = "gzip" if magic[:2] == _GZIP_MAGIC else "zstd" if magic == _ZSTD_MAGIC else "none"
    if src.stream is not None:
        src.stream.plain = src.compression == "none"
    _check_text(src)
    return src


def _open_binary(src: Source, partial: bool = False, raws: list[Binary] | None = None) -> Binary:
    raw = src.raw(partial)
    if raws is not None:
        raws.append(raw)
    if src.compression == "gzip":
        return _gzip_open(raw)
    if src.compression == "zstd":
        return _ZstdReader(raw, src.name)
    return raw


class _ZstdReader(_Inflating):
    """zstd frames, one after another, inflated a little at a time (a small block of input can
    inflate to hundreds of MB); an input that ends inside a frame is an error (the zstandard
    module's stream reader reports such an input as complete)."""

    PIECE = 16 << 10

    def __init__(self, raw: Binary, name: str) -> None:
        import zstandard

        super().__init__()
        self._zstd = zstandard
        self._raw = raw
        self._name = name
        self._z = zstandard.ZstdDecompressor().decompressobj()
        self._fed = False  # input given to the current frame
        self._eof = False

    def _more(self, limit: int) -> bytes | None:
        if self._eof:
            return None
        if self._z.eof:
            rest = self._z.unused_data
            self._z = self._zstd.ZstdDecompressor().decompressobj()
            self._fed = False
            if rest:
                self._fed = True
                return self._z.decompress(rest)
        data = self._raw.read(self.PIECE)
        if not data:
            self._eof = True
            if self._fed and not self._z.eof:
                raise EOFError("the input ends inside a zstd frame")
            return b""
        self._fed = True
        return self._z.decompress(data)


def _isal() -> tuple[ModuleType, ModuleType] | None:
    """ISA-L's gzip reader and zlib module (``isal``: twice as fast as zlib, which is the fallback
    where no wheel of it installs; the 1M-line benchmark log, 184 MB: 0.15 against 0.31 s of CPU),
    or None."""
    try:
        from isal import igzip, isal_zlib
    except ImportError:
        return None
    return igzip, isal_zlib


def _gzip_open(raw: Binary) -> io.BufferedIOBase:
    isal = _isal()
    return isal[0].open(raw, "rb") if isal else gzip.GzipFile(fileobj=raw, mode="rb")


def _decompress_errors() -> tuple[type[BaseException], ...]:
    """What a corrupt or truncated .gz raises, with ISA-L's own error class when it inflates."""
    isal = _isal()
    return (OSError, EOFError, zlib.error) + ((isal[1].error,) if isal else ())


def _check_text(src: Source) -> None:
    """Refuse a binary file, from its first bytes (peeked: a stream is not used up)."""
    raw = src.peek(HEAD_BYTES)
    try:
        if src.compression == "gzip":
            head = zlib.decompressobj(31).decompress(raw, 8192)
        elif src.compression == "zstd":
            import zstandard

            head = zstandard.ZstdDecompressor().decompressobj().decompress(raw[: 16 << 10])[:8192]
        else:
            head = raw[:8192]
    except zlib.error as e:
        raise InputError(f"{quote(src.name)}: corrupt or truncated {src.compression} file ({_short(e)})") from None
    except Exception as e:  # zstandard.ZstdError and friends
        raise InputError(f"{quote(src.name)}: cannot decompress ({_short(e)})") from None
    if head.startswith(_BINARY_SIGNATURES) or b"\x00" in head[:4096]:
        raise InputError(f"{quote(src.name)}: looks like a binary file, not a text log")
    if head:
        controls = sum(1 for b in head if b < 9 or 13 < b < 27 or 27 < b < 32)
        if controls > len(head) * 0.1:
            raise InputError(f"{quote(src.name)}: looks like a binary file, not a text log")


HEAD_BYTES = 64 << 10


def _short(e: BaseException) -> str:
    return str(e).splitlines()[0][:120] if str(e) else type(e).__name__


def iter_text_chunks(src: Source, chunk_bytes: int = CHUNK_BYTES, partial: bool = False) -> Iterator[str]:
    """Decoded text in chunks that end with '\\n' (except possibly the last).  ``partial``: a
    stream's kept copy even when it could not keep all of it."""
    for head, block, end in iter_raw_chunks(src, chunk_bytes, partial=partial):
        block = head + block[:end] if head or end < len(block) else block
        yield block.decode("utf-8", errors="replace")


def iter_byte_chunks(src: Source, chunk_bytes: int = CHUNK_BYTES, first_bytes: int | None = None) -> Iterator[bytes]:
    """Raw (decompressed) bytes in chunks that end with b'\\n' (except possibly the last).

    A chunk never splits a line, so each can be read on its own; only one
    chunk (plus the carried partial line) is held at a time.  ``first_bytes``:
    a different size for the first read.
    """
    for head, block, end in iter_raw_chunks(src, chunk_bytes, first_bytes):
        yield head + block[:end] if head or end < len(block) else block


@functools.cache
def tune_malloc() -> None:
    """Blocks of tens of MB (the read blocks, Python's copies) are mapped and unmapped by glibc's
    malloc instead of kept in its heaps once freed: glibc's moving threshold keeps them after the
    first one is freed, in the heap of the thread that read them (the read-ahead thread's stays
    with the process), and they counted in peak memory (diagnose on 5M lines: ~1,450 -> ~1,400 MB,
    no time cost measured).  Called before the reading starts (from the thread that imports:
    ctypes is no import for a reading thread, see tests/test_startup.py).  glibc on Linux only;
    a user's own setting wins."""
    if sys.platform != "linux" or "MALLOC_MMAP_THRESHOLD_" in os.environ or "mmap_threshold" in os.environ.get("GLIBC_TUNABLES", ""):
        return
    try:
        import ctypes

        ctypes.CDLL(None).mallopt(-3, 8 << 20)  # M_MMAP_THRESHOLD
    except (OSError, AttributeError):
        pass


def iter_raw_chunks(src: Source, chunk_bytes: int = CHUNK_BYTES, first_bytes: int | None = None, ramp: bool = False, partial: bool = False, start: int = 0) -> Iterator[tuple[bytes, bytes, int]]:
    """``(head, block, end)``: the chunks of ``iter_byte_chunks`` as ``head + block[:end]``, without
    joining them (a copy of the whole chunk, tens of MB, each time).

    ``head`` is the end of a line the previous block began: usually empty, as
    a plain file is read again from after a block's last newline (a seek
    back); compressed input, which cannot seek, carries it.  The bytes after
    ``end`` are the start of the next chunk's first line.  ``ramp``: the
    blocks after the first grow from a quarter of ``chunk_bytes`` (the
    workers start sooner when a block takes long to decompress).  ``start``: a
    plain file's reading begins at this offset (the first block then begins
    inside a line).  A plain file's reading from its start notes its marks
    (``Source.marks``).  (Shrinking
    a plain file's last blocks, so that the workers finish together, cost
    more than it saved: each chunk has fixed costs.)
    """
    carry = b""
    sizes = [first_bytes or chunk_bytes] + ([max(1, chunk_bytes // 4), max(1, chunk_bytes // 2)] if ramp else [])
    raws: list[Binary] = []
    lines = inflated = 0
    try:
        with _open_binary(src, partial, raws) as f:
            seekable = src.compression == "none" and src.seekable
            marking = seekable and not start
            if start and seekable:
                f.seek(start)
            while True:
                at = f.tell() if marking else 0
                block = f.read(sizes.pop(0) if sizes else chunk_bytes)
                if not block:
                    break
                cut = block.rfind(b"\n")
                if cut < 0:
                    carry += block  # (a line longer than a block)
                    _refuse_bombs(src, 0, 0, lines, inflated + len(carry), raws[0])
                    if len(carry) > MAX_LINE_BYTES:
                        raise InputError(f"{quote(src.name)}: a line longer than {MAX_LINE_BYTES >> 20} MiB: not a log sglog reads")
                    continue
                n = _count_marking(src.marks, block, cut + 1, at, lines) if marking else block.count(b"\n", 0, cut + 1)
                lines += n
                inflated += len(carry) + cut + 1
                _refuse_bombs(src, n, len(carry) + cut + 1, lines, inflated, raws[0])
                head = carry
                if cut == len(block) - 1:
                    carry = b""
                elif seekable:
                    f.seek(cut + 1 - len(block), os.SEEK_CUR)
                    carry = b""
                else:
                    carry = block[cut + 1 :]
                item = [(head, block, cut + 1)]
                del block, head
                yield item.pop()  # (this frame keeps no reference to the block while suspended)
    except _decompress_errors() as e:
        raise InputError(f"{quote(src.name)}: corrupt or truncated {src.compression} file ({_short(e)})") from None
    except InputError:
        raise
    except Exception as e:
        if type(e).__module__.startswith("zstandard"):
            raise InputError(f"{quote(src.name)}: corrupt or truncated zstd file ({_short(e)})") from None
        raise
    if carry:
        yield b"", carry, len(carry)


MARK_BYTES = 1 << 20  # a plain file's marks (Source.marks) are this far apart


def _count_marking(marks: list[tuple[int, int]], block: bytes, end: int, at: int, lines: int) -> int:
    """The newlines of ``block[:end]``, read at offset ``at`` after ``lines`` newlines, counted
    MARK_BYTES at a time, each stride's start noted in ``marks`` (once: the marks a reading
    before this one noted are kept)."""
    n = 0
    last = marks[-1][0] if marks else -1
    for pos in range(0, end, MARK_BYTES):
        if at + pos > last:
            marks.append((at + pos, lines + n))
        n += block.count(b"\n", pos, min(pos + MARK_BYTES, end))
    return n


MAX_LINE_BYTES = 512 << 20  # one line longer than this is refused (it is held whole)
TINY_LINES = 1_000_000  # this many lines (in a block, or in all) averaging under TINY_LINE_BYTES are refused
TINY_LINE_BYTES = 4
BOMB_BYTES = 256 << 20  # compressed input inflating past this ...
BOMB_RATIO = 250  # ... at more than this ratio is refused (logs inflate 5-30x; a .gz of newlines 1,000x)


def _refuse_bombs(src: Source, n: int, size: int, lines: int, inflated: int, raw: Binary) -> None:
    """Refuse early what would be held whole (#28): millions of (nearly) empty lines -- each line
    becomes an event; 10M one-character lines took 4.5 GB -- and a decompression bomb (a 1 MB .gz
    of newlines grew past 6.8 GB).  Called per block, with the block's and the running totals."""
    if (n >= TINY_LINES and size < TINY_LINE_BYTES * n) or (lines >= 4 * TINY_LINES and inflated < TINY_LINE_BYTES * lines):
        raise InputError(f"{quote(src.name)}: {lines:,} lines averaging {inflated / max(lines, 1):.1f} bytes: not a log sglog reads (refused before holding them)")
    if src.compression != "none" and inflated > BOMB_BYTES:
        try:
            read = raw.tell() if not isinstance(raw, _StreamReader) else raw.stream.read_bytes
        except (OSError, ValueError, AttributeError):
            return
        if read and inflated > BOMB_RATIO * read:
            raise InputError(f"{quote(src.name)}: inflates {inflated // read:,} times ({read:,} bytes to {inflated:,} so far): a decompression bomb, not a log")


def even_blocks(rest: int, size: int, workers: int) -> int:
    """A block size near ``size`` that cuts ``rest`` bytes into a multiple of ``workers`` blocks of
    about the same size, so that the workers finish together (a short last block left one worker
    idle while the other read a full one: ~0.1 s of a 1M-line file's 2 s).  Blocks end at their last
    newline, so each is a little shorter than the size: a margin keeps those remainders in the last
    block instead of a tiny extra one (each chunk has ~35 ms of fixed costs).  A rest that two
    rounds of blocks up to half as large again would hold is read in two rounds rather than three
    (a 1M-line log of ~180 MB: 4 blocks of ~46 MB instead of 6 of ~31, -45 to -115 ms in paired
    runs; peak memory 535 -> 654 MiB, where a small file's frames leave room for it)."""
    if rest <= (4 << 20) or workers <= 1:
        return size  # (a small rest: one block, no second set of fixed costs)
    n = -(-rest // size)
    two_rounds = -(-rest // (2 * workers)) + (64 << 10)
    if n > 2 * workers and two_rounds <= size + size // 2:
        return two_rounds
    n = -(-n // workers) * workers
    return min(size, -(-rest // n) + (64 << 10))


def read_plan(src: Source, chunk_bytes: int, workers: int) -> tuple[int, int | None, bool]:
    """(block size, first block size, ramp) for ``iter_raw_chunks``, as the parse reads ``src``:
    a plain file in blocks of the same size (``even_blocks``), compressed input ramping up."""
    first = min(chunk_bytes, FIRST_CHUNK_BYTES)
    if src.compression != "none" or not src.seekable:
        return chunk_bytes, first, True
    return even_blocks(src.size - first, chunk_bytes, workers), first, False


def default_workers() -> int:
    return max(1, min(4, os.cpu_count() or 1))


class _Prefetch:
    """The first blocks of one input, read by a thread of their own (see ``prefetch``) and handed
    on as they come (an error, such as a truncated .gz, where it happened)."""

    def __init__(self, src: Source, plan: tuple[int, int | None, bool], count: int) -> None:
        import queue

        self.key = (str(src.path), src.size, plan)
        self.items: queue.Queue[tuple[bytes, bytes, int] | BaseException | _Mark] = queue.Queue()
        self.chunks = iter_raw_chunks(src, *plan)
        self.thread = threading.Thread(target=self._run, args=(count,), name="sglog-prefetch", daemon=True)
        self.thread.start()

    def _run(self, count: int) -> None:
        try:
            for _ in range(count):
                item = next(self.chunks, None)
                if item is None:
                    self.items.put(_Mark.END)
                    return
                self.items.put(item)
            self.items.put(_Mark.MORE)
        except BaseException as e:  # (raised where the parse reaches it)
            self.items.put(e)

    def __iter__(self) -> Iterator[tuple[bytes, bytes, int]]:
        while True:
            item = self.items.get()
            if item is _Mark.END:
                return
            if item is _Mark.MORE:
                yield from self.chunks
                return
            if isinstance(item, BaseException):
                raise item
            box = [item]
            del item
            yield box.pop()  # (as in iter_raw_chunks: no reference to the block while suspended)


class _Mark(enum.Enum):
    """What a prefetch thread puts after its blocks: the input ended, or the rest is to be read."""

    END = "end"
    MORE = "more"


_prefetches: dict[str, _Prefetch] = {}


def prefetch(name: str, chunk_bytes: int = CHUNK_BYTES, workers: int | None = None) -> None:
    """Start reading the first blocks of ``name`` (the small first chunk and one block per
    worker; one more for compressed input, whose inflation is the slow part) in a thread of its
    own, for a command that still has to import polars and the parser (~0.2 s on one core): the
    reads and the decompression release the GIL, so the other core does them meanwhile, and the
    parse (``prefetched``) starts with its first blocks in memory.
    Best effort: an input it cannot open is left to the parse, which reports it; stdin is not
    read ahead (it would be spooled twice)."""
    if name == "-" or name in _prefetches:
        return
    try:
        src = open_source(name)
    except Exception:
        return
    tune_malloc()
    w = workers if workers is not None else default_workers()
    _prefetches[name] = _Prefetch(src, read_plan(src, chunk_bytes, w), 1 + w + (src.compression != "none"))


def prefetched(src: Source, chunk_bytes: int, workers: int) -> Iterator[tuple[bytes, bytes, int]] | None:
    """``iter_raw_chunks(src, *read_plan(...))`` continuing a ``prefetch`` of the same input and
    plan (None if there is none)."""
    p = _prefetches.pop(src.name, None)
    if p is None:
        return None
    if src.stream is not None:  # (a stream has one reading: its chunks, whatever their sizes)
        return iter(p)
    if p.key != (str(src.path), src.size, read_plan(src, chunk_bytes, workers)):
        return None
    return iter(p)


def planned_chunks(src: Source, chunk_bytes: int, workers: int) -> Iterator[tuple[bytes, bytes, int]]:
    """The raw chunks of ``src`` as the parse reads them (``read_plan``): continuing a ``prefetch``
    of the same input and plan when there is one, else read afresh."""
    return prefetched(src, chunk_bytes, workers) or iter_raw_chunks(src, *read_plan(src, chunk_bytes, workers))


LINE_CHUNK_BYTES = 4 << 20  # ``iter_lines``' blocks: a block's lines are held as strings at once


def iter_lines(src: Source, chunk_bytes: int = LINE_CHUNK_BYTES) -> Iterator[str]:
    """The input's physical lines, in order, as the reader numbers them: split on ``\\n`` only,
    everything else kept (``\\r``), invalid UTF-8 as U+FFFD; a block of them at a time."""
    for head, block, end in iter_raw_chunks(src, chunk_bytes):
        text = (head + block[:end] if head or end < len(block) else block).decode("utf-8", errors="replace")
        del block, head
        if text.endswith("\n"):
            text = text[:-1]
        yield from text.split("\n")


def read_lines(src: Source, numbers: set[int], chunk_bytes: int = CHUNK_BYTES) -> dict[int, str]:
    """Fetch the raw text of some physical lines (1-based), e.g. for evidence: from the opened
    file, or from what a stream's reading kept (the lines it holds, when it could not keep all).
    Only the lines asked for are decoded: a chunk is counted, not split (a 32 MB chunk split into
    its lines held ~150 MB more, #28)."""
    want = sorted(set(numbers))
    out: dict[int, str] = {}
    if not want:
        return out
    n = 0  # lines before this chunk
    i = 0  # the next of ``want``
    try:
        for head, block, end in iter_raw_chunks(src, chunk_bytes, partial=True):
            lines = block.count(b"\n", 0, end)
            if block[end - 1 : end] != b"\n" and (end or head):
                lines += 1  # (the input's last line, without a newline)
            ks = []
            while i < len(want) and want[i] <= n + lines:
                ks.append(want[i] - n)
                i += 1
            for k, raw in _pieces(head, block, end, ks):
                out[n + k] = raw.decode("utf-8", errors="replace").rstrip("\r")
            n += lines
            if i == len(want):
                break
    except InputError:
        pass  # (a stream's kept copy cut short: the lines before the cut)
    return out


def _pieces(head: bytes, block: bytes, end: int, ks: list[int]) -> Iterator[tuple[int, bytes]]:
    """Lines ``ks`` (1-based, ascending) of ``head + block[:end]``, found by walking its newlines
    up to the last of them (nothing joined or split whole)."""
    piece, pos = 1, 0  # piece ``piece`` starts at ``pos`` in the block (the first after ``head``)
    for k in ks:
        while piece < k:
            pos = block.index(b"\n", pos, end) + 1
            piece += 1
        stop = block.find(b"\n", pos, end)
        raw = block[pos : end if stop < 0 else stop]
        yield k, (head + raw if piece == 1 and head else raw)


FIND_CHUNK_BYTES = 4 << 20  # find_lines reads this much at a time (it stops after the chunk of its last line)
FIND_STRIDE = 1 << 16  # ... and counts this many bytes' newlines at a time


def find_lines(src: Source, numbers: set[int], chunk_bytes: int = FIND_CHUNK_BYTES) -> dict[int, str]:
    """``read_lines``, reading the input only up to the chunk of its last wanted line, in chunks
    of ``FIND_CHUNK_BYTES``, and counting each chunk's newlines once, in C, ``FIND_STRIDE`` bytes
    at a time up to each wanted line (``read_lines`` reads 32 MB chunks, counts each whole and
    walks every line before a wanted one in Python).  A plain file its parse read from the start
    is read only from the mark before each line (``Source.marks``: a 1M-line log's evidence, three
    lines up to 40 MB in, ~90 -> ~9 ms)."""
    want = sorted(set(numbers))
    out: dict[int, str] = {}
    if not want:
        return out
    marks = src.marks if src.stream is None and src.compression == "none" else []
    if not marks:
        _find_from(src, want, 0, 0, chunk_bytes, out)
        return out
    starts = [n for _, n in marks]
    groups: dict[int, list[int]] = {}
    for k in want:  # (the last mark with fewer than k - 1 newlines before it: line k starts after it)
        groups.setdefault(bisect.bisect_left(starts, k - 1) - 1, []).append(k)
    for j, ks in groups.items():
        at, n = marks[j] if j >= 0 else (0, 0)
        _find_from(src, ks, at, n, min(chunk_bytes, MARK_BYTES + FIND_STRIDE), out)
    return out


def _find_from(src: Source, want: list[int], at: int, n: int, chunk_bytes: int, out: dict[int, str]) -> None:
    """``find_lines`` of the lines ``want`` (ascending), reading from offset ``at``, after ``n``
    newlines (the start of a line, or a mark before the first wanted line's start)."""
    i = 0  # the next of ``want``
    try:
        for head, block, end in iter_raw_chunks(src, chunk_bytes, partial=True, start=at):
            pos = seen = 0  # block[pos:] is after ``seen`` newlines (a line's start once one is found)
            while i < len(want):
                pos, seen = _after_newlines(block, end, pos, seen, want[i] - n - 1)
                if pos >= end:  # (not in this chunk)
                    break
                stop = block.find(b"\n", pos, end)
                raw = block[pos : end if stop < 0 else stop]
                out[want[i]] = (head + raw if pos == 0 and head else raw).decode("utf-8", errors="replace").rstrip("\r")
                i += 1
            if i == len(want):
                break
            n += seen + block.count(b"\n", pos, end)
    except InputError:
        pass  # (a stream's kept copy cut short: the lines before the cut)


def _after_newlines(block: bytes, end: int, pos: int, seen: int, m: int) -> tuple[int, int]:
    """(where the line after the ``m``-th newline of ``block[:end]`` starts, ``m``), from ``pos``,
    after the ``seen``-th; ``(end, newlines)`` when ``block[:end]`` has fewer."""
    while seen < m and pos < end:
        stop = min(pos + FIND_STRIDE, end)
        c = block.count(b"\n", pos, stop)
        if seen + c >= m:
            while seen < m:
                pos = block.index(b"\n", pos, stop) + 1
                seen += 1
            return pos, seen
        pos, seen = stop, seen + c
    return pos, seen
