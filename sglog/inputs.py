"""Opening inputs: plain, .gz, .zst or stdin; refusing what is not a text log.

Every problem becomes an ``InputError`` with a one-line message.  Text is
decoded as UTF-8 with replacement characters (invalid bytes never stop a read)
and handed on in chunks that end on a line boundary, so memory stays flat in
the size of the input.
"""

from __future__ import annotations

import functools
import gzip
import hashlib
import io
import os
import shutil
import sys
import tempfile
import threading
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from sglog.errors import InputError

FIRST_CHUNK_BYTES = 1 << 20  # the small first chunk, read by the caller, which teaches the shape book (parse._read_ahead)
CHUNK_BYTES = 32 << 20  # per chunk in flight: ~200 MB of polars intermediates; fewer chunks, less fixed cost (1M lines: -10%, 5M peak RSS 1.42 -> 1.35 GB)
_GZIP_MAGIC = b"\x1f\x8b"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_BINARY_SIGNATURES = (b"\x89PNG", b"%PDF", b"PK\x03\x04", b"\x7fELF", b"GIF8", b"\xff\xd8\xff")


@dataclass(slots=True)
class Source:
    name: str  # as the user wrote it ('-' for stdin)
    path: Path  # a real file (stdin is spooled to a temporary file)
    size: int
    compression: str  # none | gzip | zstd

    def sha256(self) -> str:
        h = hashlib.sha256()
        with open(self.path, "rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        return h.hexdigest()


_spooled: list[Path] = []


def remove_spooled() -> None:
    """Delete the temporary copies of stdin made by this process."""
    while _spooled:
        try:
            _spooled.pop().unlink()
        except OSError:
            pass


def _spool_stdin() -> Path:
    fd, name = tempfile.mkstemp(prefix="sglog-stdin-", suffix=".log")
    with os.fdopen(fd, "wb") as out:
        shutil.copyfileobj(sys.stdin.buffer, out, 1 << 20)
    _spooled.append(Path(name))
    return Path(name)


def open_source(name: str) -> Source:
    """Check a path (or '-') and return a Source; raise InputError with one line."""
    if name == "-":
        path = _spool_stdin()
    else:
        path = Path(name)
        if not path.exists():
            raise InputError(f"{name}: no such file")
        if path.is_dir():
            raise InputError(f"{name}: is a directory, not a log file")
        if not os.access(path, os.R_OK):
            raise InputError(f"{name}: permission denied")
    try:
        with open(path, "rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise InputError(f"{name}: cannot read ({e.strerror or e})") from None
    compression = "gzip" if magic[:2] == _GZIP_MAGIC else "zstd" if magic == _ZSTD_MAGIC else "none"
    src = Source(name=name, path=path, size=path.stat().st_size, compression=compression)
    _check_text(src)
    return src


def _open_binary(src: Source) -> io.BufferedIOBase:
    if src.compression == "gzip":
        return _gzip_open(src.path)
    if src.compression == "zstd":
        import zstandard

        return zstandard.ZstdDecompressor().stream_reader(open(src.path, "rb"), closefd=True)
    return open(src.path, "rb")


def _isal():
    """ISA-L's gzip reader and zlib module (``isal``: twice as fast as zlib, which is the fallback
    where no wheel of it installs; the 1M-line benchmark log, 184 MB: 0.15 against 0.31 s of CPU),
    or None."""
    try:
        from isal import igzip, isal_zlib
    except ImportError:
        return None
    return igzip, isal_zlib


def _gzip_open(path: Path) -> io.BufferedIOBase:
    isal = _isal()
    return isal[0].open(path, "rb") if isal else gzip.open(path, "rb")


def _decompress_errors() -> tuple[type[BaseException], ...]:
    """What a corrupt or truncated .gz raises, with ISA-L's own error class when it inflates."""
    isal = _isal()
    return (OSError, EOFError, zlib.error) + ((isal[1].error,) if isal else ())


def _check_text(src: Source) -> None:
    try:
        with _open_binary(src) as f:
            head = f.read(8192)
    except _decompress_errors() as e:
        raise InputError(f"{src.name}: corrupt or truncated {src.compression} file ({_short(e)})") from None
    except Exception as e:  # zstandard.ZstdError and friends
        raise InputError(f"{src.name}: cannot decompress ({_short(e)})") from None
    if head.startswith(_BINARY_SIGNATURES) or b"\x00" in head[:4096]:
        raise InputError(f"{src.name}: looks like a binary file, not a text log")
    if head:
        controls = sum(1 for b in head if b < 9 or 13 < b < 27 or 27 < b < 32)
        if controls > len(head) * 0.1:
            raise InputError(f"{src.name}: looks like a binary file, not a text log")


def _short(e: BaseException) -> str:
    return str(e).splitlines()[0][:120] if str(e) else type(e).__name__


def iter_text_chunks(src: Source, chunk_bytes: int = CHUNK_BYTES) -> Iterator[str]:
    """Decoded text in chunks that end with '\\n' (except possibly the last)."""
    for block in iter_byte_chunks(src, chunk_bytes):
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


def iter_raw_chunks(src: Source, chunk_bytes: int = CHUNK_BYTES, first_bytes: int | None = None, ramp: bool = False) -> Iterator[tuple[bytes, bytes, int]]:
    """``(head, block, end)``: the chunks of ``iter_byte_chunks`` as ``head + block[:end]``, without
    joining them (a copy of the whole chunk, tens of MB, each time).

    ``head`` is the end of a line the previous block began: usually empty, as
    a plain file is read again from after a block's last newline (a seek
    back); compressed input, which cannot seek, carries it.  The bytes after
    ``end`` are the start of the next chunk's first line.  ``ramp``: the
    blocks after the first grow from a quarter of ``chunk_bytes`` (the
    workers start sooner when a block takes long to decompress).  (Shrinking
    a plain file's last blocks, so that the workers finish together, cost
    more than it saved: each chunk has fixed costs.)
    """
    carry = b""
    sizes = [first_bytes or chunk_bytes] + ([max(1, chunk_bytes // 4), max(1, chunk_bytes // 2)] if ramp else [])
    try:
        with _open_binary(src) as f:
            seekable = src.compression == "none" and f.seekable()
            while True:
                block = f.read(sizes.pop(0) if sizes else chunk_bytes)
                if not block:
                    break
                cut = block.rfind(b"\n")
                if cut < 0:
                    carry += block  # (a line longer than a block)
                    continue
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
        raise InputError(f"{src.name}: corrupt or truncated {src.compression} file ({_short(e)})") from None
    except InputError:
        raise
    except Exception as e:
        if type(e).__module__.startswith("zstandard"):
            raise InputError(f"{src.name}: corrupt or truncated zstd file ({_short(e)})") from None
        raise
    if carry:
        yield b"", carry, len(carry)


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
    if src.compression != "none":
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
        self.items: queue.Queue = queue.Queue()
        self.chunks = iter_raw_chunks(src, *plan)
        self.thread = threading.Thread(target=self._run, args=(count,), name="sglog-prefetch", daemon=True)
        self.thread.start()

    def _run(self, count: int) -> None:
        try:
            for _ in range(count):
                item = next(self.chunks, None)
                if item is None:
                    self.items.put(_END)
                    return
                self.items.put(item)
            self.items.put(_MORE)
        except BaseException as e:  # (raised where the parse reaches it)
            self.items.put(e)

    def __iter__(self) -> Iterator[tuple[bytes, bytes, int]]:
        while True:
            item = self.items.get()
            if item is _END:
                return
            if item is _MORE:
                yield from self.chunks
                return
            if isinstance(item, BaseException):
                raise item
            box = [item]
            del item
            yield box.pop()  # (as in iter_raw_chunks: no reference to the block while suspended)


_END, _MORE = object(), object()


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
    if p is None or p.key != (str(src.path), src.size, read_plan(src, chunk_bytes, workers)):
        return None
    return iter(p)


def planned_chunks(src: Source, chunk_bytes: int, workers: int) -> Iterator[tuple[bytes, bytes, int]]:
    """The raw chunks of ``src`` as the parse reads them (``read_plan``): continuing a ``prefetch``
    of the same input and plan when there is one, else read afresh."""
    return prefetched(src, chunk_bytes, workers) or iter_raw_chunks(src, *read_plan(src, chunk_bytes, workers))


def read_lines(src: Source, numbers: set[int]) -> dict[int, str]:
    """Fetch the raw text of some physical lines (1-based), e.g. for evidence."""
    want = set(numbers)
    out: dict[int, str] = {}
    if not want:
        return out
    last = max(want)
    n = 0
    for chunk in iter_text_chunks(src):
        for line in chunk.split("\n"):
            n += 1
            if n in want:
                out[n] = line.rstrip("\r")
            if n >= last:
                return out
        n -= 1  # the chunk ended with '\n': the empty tail is not a line
    return out
