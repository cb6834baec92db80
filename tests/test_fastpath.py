"""The vectorised path reads exactly what the lark-only path reads.

Logs are built here (benchmarks/generate.py at 2,000 lines, plus odd lines that
must fall back to lark); every comparison is on ``ParsedLog.iter_dicts()``
with None-valued fields dropped and numbers compared as floats (a frame
column may widen an int).  No timing assertions.
"""

from __future__ import annotations

import gzip
import importlib.util
import io
import os
import sys
from pathlib import Path

import polars as pl
import pytest

from conftest import ROOT
from sglog.read import fastpath, grammar
from sglog.read.parse import RecordParser, comparable, parse_file
from sglog.read.records import Record


def _generator():
    spec = importlib.util.spec_from_file_location("sglog_bench_generate", ROOT / "benchmarks" / "generate.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


GEN = _generator()

# lines the vectorised path must hand to lark (or read exactly like it)
ODD = [
    "[2026-02-23 10:15:02.347 TP0] Decode batch, #running-req: 5, #token: 900, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[10:15:02 TP0] Decode batch. #running-req: 8, #token: 1840, token usage: 0.01, gen throughput (token/s): 412.37, #queue-req: 0",
    "[2026-02-23 10:15:02 DP1 TP3 EP3] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0, ",
    "[2026-02-23 10:15:02 TP0] Decode batch [1234], #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Prefill batch(mixed #running-req: 3). #new-seq: 1, #new-token: 512, #cached-token: 0, cache hit rate: 12.50%, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5., #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req:  5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 123456789012345678901, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: \uff15, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: Maybe, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, npu graph: True, gen throughput (token/s): 12.50, #queue-req: 0, fwd occupancy: 87.20%",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "    an indented line right after a batch line",
    '\x1b[32mINFO\x1b[0m:     127.0.0.1:57114 - "GET /health HTTP/1.1" 200 OK',
    "Capturing batches (bs=1 avail_mem=13.82 GB): 100%|##| 2/2 [00:01<00:00]\r[2026-02-23 10:15:03 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "(SchedulerActor pid=123, ip=10.0.0.5) [2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "Loading: 100%|####| 2/2 [00:01<00:00][2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    'INFO:     127.0.0.1:57114 - "GET /health HTTP/1.1" 200 OK',
    '[2026-02-23 10:15:02] INFO:     10.0.0.7:40312 - "POST /v1/chat/completions HTTP/1.1" 200 ',
    '[2026-02-23 10:15:02.120] INFO:     10.0.0.7:40312 - "POST /generate?x=1 HTTP/1.1" 400 Bad Request',
    '[2026-02-23 10:15:02 TP1] INFO:     10.0.0.7:40312 - "GET /metrics HTTP/1.1" 200 OK',
    '[2026-02-23 10:15:02] INFO:     10.0.0.7:40312 - "GET /a"b HTTP/1.1" 200 OK',
    '[2026-02-23 10:15:02] INFO:\t10.0.0.7:40312 - "GET /health HTTP/1.1" 200 OK',
    '[2026-02-23 10:15:02] INFO:     10.0.0.7:40312 - "GET /health HTTP/1.1" 404 Not "Found"',
    '[2026-02-23 10:15:02] INFO:     - "GET /health HTTP/1.1" 200 OK',
    '[2026-02-23 10:15:02] INFO:     10.0.0.7:40312 - "GET /health HTTP/1.1" 2000 OK',
    '[2026-02-23 10:15:02] WARNING:  10.0.0.7:40312 - "GET /h\u00e9alth HTTP/2" 503',
    "[2026-02-23 23:59:60 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-30 10:00:00 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP2] Decode out of memory happened. #retracted_reqs: 3, #new_token_ratio: 0.4200 -> 0.5567",
    "[2026-02-23 10:15:02 TP2] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: 0.4200 -> 0.5567",
    "[2026-02-23 10:15:02 TP2] KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 12, #new_token_ratio: 0.42 -> 0.5567",
    "[2026-02-23 10:15:02 TP4] LONG GARBAGE COLLECTION DETECTED | Generation 2 | Duration: 0.1234s | # Objects: gen0=5, gen1=0, gen2=123456 | This may cause latency jitter.",
    "[2026-02-23 10:15:02 TP4] LONG GARBAGE COLLECTION DETECTED | Generation 2 | Duration: 0.1.2s | # Objects: gen0=5, gen1=0, gen2=123456 | x",
    # the generator's own decode/prefill shapes (the whole-line path, sglog/read/fastpath.py LitPlan) with a twist
    "[2026-02-23 10:15:02 DP1 TP3 EP3] Decode batch, #running-req: 5, #token: 6178, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP\uff13] Decode batch, #running-req: 5, #token: 6178, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP3] Decode batch, #running-req: 5, #token: 1234567890123456789, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP3] Decode batch, #running-req: 5, #token: 9223372036854775808, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP3] Decode batch, #running-req: -5, #token: 123456789012345678, token usage: 1, accept len: 3, accept rate: 0.68, cuda graph: False, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP3] Decode batch, #running-req: 5, #token: 6178, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0,",
    "[2026-02-23 10:15:02 TP3] Decode batch. #running-req: 5, #token: 6178, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP3]  Decode batch, #running-req: 5, #token: 6178, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02 TP3] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False, extra: 1",
    "[2026-13-23 10:15:02 TP3] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False",
    "[2026-02-23 10:15:02 TP3] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False Traceback (most recent call last):",
    # lines after a batch line: some continue its record (records._CONT_SGLANG), some end it
    "Try to allocate 2.00 GiB",
    "Possible solutions:",
    "1. lower --mem-fraction-static",
    "\tTab-indented text",
    "\x1cfile separator, then text",
    "\u3000ideographic space, then text",
    "plain text that is no record of its own",
    "..... [2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 6178, token usage: 0.01, accept len: 3.03, accept rate: 0.68, cuda graph: True, gen throughput (token/s): 616.50, #queue-req: 0",
    "[2026-02-23 10:15:02] Exception in run_tp_server:",
    "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0 Traceback (most recent call last):",
    "",
    "   ",
]


def odd_log(n: int = 2000, seed: int = 11) -> list[str]:
    """A generated log with the odd lines spliced in at several places (also right after batch lines)."""
    lines = list(GEN.generate_lines(n, seed))
    step = max(1, (len(lines) - 200) // len(ODD))
    for k, odd in enumerate(ODD):
        lines.insert(150 + k * step, odd)
    return lines


def write(tmp_path: Path, lines: list[str], name: str = "x.log", newline: str = "\n") -> Path:
    p = tmp_path / name
    p.write_bytes((newline.join(lines) + newline).encode("utf-8", errors="surrogatepass"))
    return p


norm = comparable  # the shared definition of "the same event"


def dicts(path: Path, **kw) -> list[dict]:
    return [norm(d) for d in parse_file(str(path), keep_text=True, **kw).iter_dicts()]


def assert_same(got: list[dict], want: list[dict]) -> None:
    assert len(got) == len(want)
    for a, b in zip(got, want):
        assert a == b, f"line {b.get('line')}: {sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))}"


@pytest.fixture(scope="module")
def odd_path(tmp_path_factory) -> Path:
    return write(tmp_path_factory.mktemp("fast"), odd_log())


@pytest.fixture(scope="module")
def reference(odd_path: Path) -> list[dict]:
    return dicts(odd_path, fast=False)


def test_fast_equals_lark_only(odd_path, reference):
    assert_same(dicts(odd_path), reference)


@pytest.mark.slow
@pytest.mark.parametrize("chunk_bytes", [1 << 10, 7 << 10, 64 << 10])
@pytest.mark.parametrize("threads", [1, 2])
def test_chunk_boundaries_change_nothing(odd_path, reference, chunk_bytes, threads):
    assert_same(dicts(odd_path, chunk_bytes=chunk_bytes, threads=threads), reference)


@pytest.mark.parametrize("compress", [None, "gzip"])
def test_raw_chunks_are_the_file_cut_at_newlines(tmp_path, compress):
    """``iter_raw_chunks`` hands out ``head + block[:end]`` chunks that end at a newline and add up
    to the file (lines longer than a block, CRLF, no final newline, multi-byte characters cut by a
    block's end) without joining head and block; a plain file's blocks come out whole (the bytes
    after ``end`` are read again, a seek back), compressed ones carry the cut line as the next head.
    ``split_lines`` reads each chunk as Python's split would."""
    from sglog.read.inputs import iter_byte_chunks, iter_raw_chunks, open_source

    lines = [b"x" * (i * 37 % 300) + "\u00e9".encode() * (i % 3) for i in range(400)] + [b"a\r", b"", b"y" * 5000, b"\xc3\xa9 caf\xc3\xa9"]
    data = b"\n".join(lines) + b"\nno final newline"
    path = tmp_path / ("x.log.gz" if compress else "x.log")
    path.write_bytes(gzip.compress(data) if compress else data)
    src = open_source(str(path))
    for size in (64, 1000, 4096, 1 << 20):
        for ramp in (False, True):
            chunks = list(iter_raw_chunks(src, size, first_bytes=100, ramp=ramp))
            assert b"".join(h + b[:e] for h, b, e in chunks) == data
            assert all((h + b[:e]).endswith(b"\n") for h, b, e in chunks[:-1])
            if size < len(data):
                if compress:
                    assert any(h for h, _b, _e in chunks[:-1])  # heads carried, not joined
                else:
                    assert any(e < len(b) for _h, b, e in chunks)  # the seek-back path ran
            first = 1
            for h, b, e in chunks:
                want = (h + b[:e]).decode("utf-8", errors="replace")
                want = (want[:-1] if want.endswith("\n") else want).split("\n")
                n = fastpath.line_count(b, e)
                df = fastpath.split_lines(b, first, e, h)
                assert df.get_column("raw").to_list() == want
                assert df.get_column("line").to_list() == list(range(first, first + len(want)))
                # the readers' way: no count first (the partial line after end is read and dropped)
                assert fastpath.read_lines(b, e, h).to_list() == want
                first += n
        assert b"".join(iter_byte_chunks(src, size)) == data


def test_repeated_constant_messages_are_read_like_lark(tmp_path):
    """A message repeated word for word with no digit (a uvicorn warning when something probes the
    port, an init line per rank) is read on the vectorised path as one literal shape; near misses
    (another case, a trailing space, a digit) are left to lark or other shapes.  The events equal lark's."""
    lines = list(GEN.generate_lines(1500, 3))
    extra = [
        "[2026-02-23 10:15:02] WARNING:  Invalid HTTP request received.",
        "[2026-02-23 10:15:02] WARNING:  Invalid HTTP request received. ",
        "[2026-02-23 10:15:02] WARNING:  invalid HTTP request received.",
        "[2026-02-23 10:15:02 TP3] Init torch distributed begin.",
        "[2026-02-23 10:15:02] INFO:     Waiting for application startup.",
        "[2026-02-23 10:15:02] WARNING:  Invalid HTTP request received 2.",
    ]
    for k in range(600):
        lines.insert(100 + 2 * k, extra[k % len(extra)])
    base = parse_file(str(write(tmp_path, list(GEN.generate_lines(1500, 3)), "base.log")), chunk_bytes=16 << 10, threads=2)
    p = write(tmp_path, lines)
    fast = parse_file(str(p), chunk_bytes=16 << 10, threads=2)
    assert fast.kinds["uvicorn_log"] >= 400 and fast.kinds["init_dist_begin"] >= 100
    assert fast.lines_fast - base.lines_fast >= 300  # (the three exact texts, 100 lines each, at least)
    assert_same(dicts(p, chunk_bytes=16 << 10, threads=2), dicts(p, fast=False))
    shape = fastpath.derive_term_shape("WARNING:  Invalid HTTP request received.")
    assert shape is not None and shape.literal == "WARNING:  Invalid HTTP request received."
    assert shape.const == {"level": "WARNING", "message": "Invalid HTTP request received."}
    assert fastpath.derive_term_shape("WARNING:  Invalid HTTP request received 2.") is None or fastpath.derive_term_shape("WARNING:  Invalid HTTP request received 2.").literal is None


@pytest.mark.slow
def test_a_message_that_starts_with_a_newline_is_read_like_lark(tmp_path):
    """The envelope alone on its line (0.4.5.post3's CUDA-graph banner, records.py "newline"
    mode) takes the lines after it: the vectorised path leaves such lines to the record layer."""
    banner = [
        "[2025-04-20 10:00:01 TP0] ",
        "",
        "CUDA Graph is DISABLED.",
        "This will cause significant performance degradation.",
        "CUDA Graph should almost never be disabled in most usage scenarios.",
        "If you encounter OOM issues, please try setting --mem-fraction-static to a lower value (such as 0.8 or 0.7) instead of disabling CUDA Graph.",
        "",
    ]
    lines = list(GEN.generate_lines(3000, 5))
    for at in (2600, 1700, 900, 200):  # (after batch lines; the last one without its trailing blank line)
        lines[at:at] = banner if at != 200 else banner[:-1]
    lines[1200:1200] = ["[2025-04-20 10:00:01 TP0] "]  # an envelope alone, then the generator's next line
    path = write(tmp_path, lines)
    want = dicts(path, fast=False)
    banners = [d for d in want if d["kind"] == "feature_disabled" and d.get("feature") == "cuda_graph"]
    assert len(banners) == 4 and all(d["end_line"] - d["line"] == 5 for d in banners)
    assert_same(dicts(path), want)
    assert_same(dicts(path, chunk_bytes=8192), want)


def test_every_line_in_exactly_one_event(odd_path):
    log = parse_file(str(odd_path))
    seen = []
    for d in log.iter_dicts():
        seen.extend(range(d["line"], d["end_line"] + 1))
    assert sorted(seen) == list(range(1, log.lines + 1))
    assert len(seen) == len(set(seen))
    lines = odd_path.read_bytes().count(b"\n")
    assert log.lines == lines


@pytest.mark.slow
def test_the_vectorised_path_takes_the_bulk(tmp_path):
    """Most lines of a typical log are read by polars (a fast path that quietly sends everything
    to lark would still be correct): batch and access rows, retraction and GC events."""
    p = write(tmp_path, list(GEN.generate_lines(3000, 5)))
    for threads in (1, 2):
        log = parse_file(str(p), chunk_bytes=32 << 10, threads=threads)
        assert log.lines_fast >= 0.85 * log.lines
        assert parse_file(str(p), fast=False).lines_fast == 0


@pytest.mark.slow
def test_gzip_and_crlf_and_no_final_newline(tmp_path, reference, odd_path):
    lines = odd_log()
    gz = tmp_path / "x.log.gz"
    gz.write_bytes(gzip.compress(odd_path.read_bytes()))
    assert_same(dicts(gz, chunk_bytes=16 << 10), reference)
    crlf = write(tmp_path, lines, "crlf.log", newline="\r\n")
    assert_same(dicts(crlf), dicts(crlf, fast=False))
    bare = tmp_path / "bare.log"
    bare.write_bytes(odd_path.read_bytes().rstrip(b"\n"))
    assert_same(dicts(bare, chunk_bytes=4 << 10), dicts(bare, fast=False))


@pytest.mark.parametrize(
    "chunk",
    [
        b"a\nb\n",
        b"a\r\nb\r\n",
        b"x\ra\rb\nc",
        b"\n\n\n",
        b"\n",
        b"a\n\n  \nb",
        b"\xef\xbb\xbfbom\nline\n",
        b"bad \xff\xfe utf8\nok\n",
        b"nul \x00 here\nok\n",
        b"sep \x1f here\nok\n",
        b"ends with cr\r",
        b"a\rb\r\nc\n",
        b"\r\r\n",
        b"cr \r then lf later\n\r",
        "unicode \u00e9\u4e2d\n".encode(),
    ],
)
def test_split_lines_is_a_split_on_lf(chunk):
    df = fastpath.split_lines(chunk, 7)
    text = chunk.decode("utf-8", errors="replace")
    want = (text[:-1] if text.endswith("\n") else text).split("\n")
    assert df.get_column("raw").to_list() == want
    assert df.get_column("line").to_list() == list(range(7, 7 + len(want)))
    # with a partial line after the chunk's end (a block cut there, maybe inside a character)
    for tail in (b"partial", b"caf\xc3", b"\xe4\xb8", b"x\r", b"\x1f"):
        if chunk.endswith(b"\n"):
            assert fastpath.read_lines(chunk + tail, len(chunk)).to_list() == want


def test_digit_shapes_parse_like_lark(odd_path):
    """The record parser's digit-shape memo gives the same events as parsing every message."""
    raw = odd_path.read_text(encoding="utf-8").split("\n")[:-1]
    raw += [r.replace("1", "7").replace("0", "3") for r in raw[::3]]
    with_shapes = RecordParser("x", shapes=True)
    plain = RecordParser("x")
    for i, line in enumerate(raw, 1):
        rec = Record(i, i, [line], [line], "sglang")
        assert with_shapes(rec).to_dict() == plain(rec).to_dict(), line
    assert grammar.digit_literals() is None or isinstance(grammar.digit_literals(), tuple)


def test_frames_are_kind_by_kind_in_line_order(odd_path):
    """Batch rows kind by kind (decode, then prefill), each kind's in line order, whatever the
    chunks; the lark-only parse has the same order."""
    for fast in (True, False):
        log = parse_file(str(odd_path), chunk_bytes=8 << 10, threads=2, fast=fast)
        kinds = log.batches.get_column("kind")
        assert kinds.is_sorted() and kinds.n_unique() == 2
        blocks = fastpath.kind_blocks(log.batches)
        assert blocks is not None and sum(b.height for b in blocks.values()) == log.batches.height
        for kind, block in blocks.items():
            assert block.get_column("line").is_sorted()
            assert block.get_column("line").to_list() == log.batches.filter(pl.col("kind") == kind).get_column("line").sort().to_list()
        assert log.access.get_column("line").is_sorted()
        assert [e.line for e in log.events] == sorted(e.line for e in log.events)


def test_kind_major_stacks_kinds_and_sorts_each():
    dec = pl.DataFrame({"line": [5, 9], "kind": ["decode_batch"] * 2, "gen_throughput": [1.0, 2.0]})
    mixed = pl.DataFrame({"line": [7, 1, 3], "kind": ["decode_batch", "prefill_batch", "decode_batch"], "new_token": [None, 10, None]})
    out = fastpath.kind_major([dec, pl.DataFrame(), mixed])
    assert out.get_column("kind").to_list() == ["decode_batch"] * 4 + ["prefill_batch"]
    assert out.get_column("line").to_list() == [3, 5, 7, 9, 1]
    blocks = fastpath.kind_blocks(out)
    assert {k: b.get_column("line").to_list() for k, b in blocks.items()} == {"decode_batch": [3, 5, 7, 9], "prefill_batch": [1]}
    # a frame in plain line order (or any other) is not kind by kind
    assert fastpath.kind_blocks(out.sort("line")) is None
    assert fastpath.kind_blocks(pl.DataFrame({"line": [2, 1], "kind": ["decode_batch"] * 2})) is None


def test_concat_frames_keeps_all_rows_and_widens():
    a = pl.DataFrame({"line": [1, 2], "x": [1, 2], "n": pl.Series([None, None], dtype=pl.Int64)})
    b = pl.DataFrame({"line": [3], "x": [0.5], "y": ["s"]})
    out = fastpath.concat_frames([a, pl.DataFrame(), b])
    assert out.get_column("line").to_list() == [1, 2, 3]
    assert out.schema["x"] == pl.Float64
    assert out.get_column("y").to_list() == [None, None, "s"]
    assert out.get_column("n").to_list() == [None, None, None]


def test_naive_peer_counts_lines(tmp_path):
    spec = importlib.util.spec_from_file_location("sglog_bench_naive", ROOT / "benchmarks" / "naive_peer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    p = write(tmp_path, list(GEN.generate_lines(500, 2)))
    n, records = mod.read(str(p))
    assert n == 500 == len(records)
    assert sum(r["kind"] == "decode_batch" for r in records) > 200


@pytest.mark.parametrize("compress,by_field", [(False, False), (True, False), (False, True), (True, True)])
def test_polars_peer_reads_every_line_and_the_fields_of_its_kinds(tmp_path, compress, by_field):
    """The Polars regex pipeline the benchmark times sglog against does the work it stands for:
    every line, its kind, every field of the batch, access and retraction lines."""
    spec = importlib.util.spec_from_file_location("sglog_bench_polars_peer", ROOT / "benchmarks" / "polars_peer.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    lines = list(GEN.generate_lines(3000, 4))
    p = write(tmp_path, lines)
    if compress:
        gz = tmp_path / "gen.log.gz"
        gz.write_bytes(gzip.compress(p.read_bytes()))
        p = gz
    out = mod.read(str(p), by_field)
    assert out["lines"] == 3000 == sum(out["kinds"].values())
    assert out["kinds"]["decode_batch"] == sum("] Decode batch, " in line for line in lines) > 1000
    assert out["kinds"]["http_access"] == sum('HTTP/1.1" ' in line for line in lines) > 100
    for kind, (_start, _rx, fields) in mod.KINDS.items():
        got = out["values"][kind]
        assert got["rows"] == out["kinds"].get(kind, 0) > 0, kind
        assert all(got[f] == got["rows"] for f in fields), (kind, got)  # (every field of every row extracted)
        assert got["first_ts"] <= got["last_ts"] and got["first_ts"].startswith("2026-"), got  # (the timestamps parsed)


def _bench_run(monkeypatch):
    """benchmarks/run.py as a module of its own for one test (it imports generate.py beside it)."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    spec = importlib.util.spec_from_file_location("sglog_bench_run", ROOT / "benchmarks" / "run.py")
    mod = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, "sglog_bench_run", mod)
    spec.loader.exec_module(mod)
    return mod


def test_benchmark_runs_every_tool_in_rounds(tmp_path, monkeypatch):
    """benchmarks/run.py times each (file, tool) once per round, so the runs of the things it
    compares (a .gz file and its plain copy) spread over the same stretch of time."""
    mod = _bench_run(monkeypatch)
    calls = []

    def fake_run(argv, **kw):
        calls.append(argv)
        return {"wall_s": 1.0 + len(calls) / 100, "rss_mb": 10.0, "user_s": 0.5, "sys_s": 0.1, "code": 0, "ok": True, "stderr": ""}

    monkeypatch.setattr(mod, "run_once", fake_run)
    monkeypatch.setattr(mod, "file_tools", lambda path, diag: [(f"t{i}", f"{path.name}:t{i}", {}, "") for i in range(2)])
    a, b = tmp_path / "a.log", tmp_path / "a.log.gz"
    a.write_text("x\n")
    b.write_bytes(b"")
    read = []
    real_warm = mod.warm
    monkeypatch.setattr(mod, "warm", lambda path: (read.append((len(calls), path.name)), real_warm(path)))
    out = mod.bench_files([a, b], 3, True)
    assert calls == ["a.log:t0", "a.log:t1", "a.log.gz:t0", "a.log.gz:t1"] * 3
    # each file is read (untimed) just before each timed run of it: every run finds it in the page cache
    assert read == [(i, calls[i].split(":")[0]) for i in range(len(calls))]
    assert [m["tool"] for m in out[a]] == ["t0", "t1"] and len(out[b]) == 2
    assert [r["wall_s"] for r in out[b][1]["runs"]] == [1.04, 1.08, 1.12]
    assert out[b][1]["median_s"] == 1.08


def test_generator_is_deterministic():
    a = list(GEN.generate_lines(1500, 9))
    assert a == list(GEN.generate_lines(1500, 9))
    assert len(a) == 1500
    assert a != list(GEN.generate_lines(1500, 10))
    io.StringIO("\n".join(a))  # plain text


def test_a_shape_that_reads_wrong_is_retired(odd_path, reference, monkeypatch):
    """If the vectorised reading of a shape ever differs from lark (a grammar or typing change
    the shape machinery does not know about), the per-chunk check retires it: lark reads those lines."""
    real, real_lit = fastpath._apply_shapes, fastpath._lit_frame

    def wrong(todo, shapes, keep_text):
        out, left, samples = real(todo, shapes, keep_text)
        if out is not None and "running_req" in out.columns:
            out = out.with_columns(pl.col("running_req") + 1)
        return out, left, samples

    def wrong_lit(rows, shape, keep_text):  # (the whole-line reading of the same shapes)
        out, ok = real_lit(rows, shape, keep_text)
        if "running_req" in out.columns:
            out = out.with_columns(pl.col("running_req") + 1)
        return out, ok

    monkeypatch.setattr(fastpath, "_apply_shapes", wrong)
    monkeypatch.setattr(fastpath, "_lit_frame", wrong_lit)
    log = parse_file(str(odd_path), keep_text=True, chunk_bytes=64 << 10)
    assert_same([norm(d) for d in log.iter_dicts()], reference)
    assert log.lines_fast < 0.5 * log.lines


@pytest.mark.slow
def test_parse_files_in_processes(tmp_path, odd_path, reference):
    from sglog.read.parse import parse_files

    other = write(tmp_path, list(GEN.generate_lines(300, 4)), "other.log")
    logs = parse_files([str(odd_path), str(other)], jobs=2, keep_text=True)
    assert_same([norm(d) for d in logs[0].iter_dicts()], reference)
    assert logs[1].lines == 300


def test_a_truncated_gzip_is_one_input_error(tmp_path, odd_path):
    from sglog.errors import InputError

    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(gzip.compress(odd_path.read_bytes())[:-200])
    for threads in (1, 2):
        with pytest.raises(InputError, match="corrupt or truncated"):
            parse_file(str(gz), chunk_bytes=8 << 10, threads=threads)


def test_whole_line_shapes_take_the_plain_batch_lines_and_read_them_like_capture_groups(odd_path, monkeypatch):
    """After one chunk has taught the book its shapes, the whole-line path (no capture groups) takes
    the plain decode/prefill lines; its frame equals the capture-group reading of the same chunk."""
    df = fastpath.split_lines(odd_path.read_bytes(), 1)
    book = fastpath.ShapeBook()
    fastpath.read_chunk(df, book, False)  # learn the shapes
    plans = [sh for k in fastpath.BATCH_KINDS for sh in book.shapes[k] if sh.lit is not None]
    assert {sh.kind for sh in plans} == {"decode_batch", "prefill_batch"}
    frames, access, rest, samples = fastpath.read_lit(df, book, False)
    taken = sum(f.height for f in frames)
    taken_access = sum(f.height for f in access)
    assert taken > 1000 and taken_access > 100 and len(samples) == len(frames) + len(access)
    assert rest.height == df.height - taken - taken_access
    # odd lines of the same shapes stay for the capture-group reading or lark
    lines = set(pl.concat([f.select("line") for f in frames]).get_column("line").to_list())
    raw = dict(zip(df.get_column("line").to_list(), df.get_column("raw").to_list()))
    # (2**63 - 1 < 9223372036854775808: too long for Int64; 1234567890123456789 fits and is taken)
    must_not = [o for o in ODD if "accept len: 3.03" in o and any(m in o for m in ("TP\uff13]", "9223372036854775808,", "#queue-req: 0,", "]  Decode"))]
    must_not += [o for o in ODD if "Prefill batch" in o and "Traceback" in o]
    assert len(must_not) == 5
    assert not {n for n in lines if raw[n] in must_not}
    assert any(raw[n] == ODD[ODD.index(must_not[0]) - 1] for n in lines)  # DP1 TP3 EP3 is plain
    assert any("#token: 1234567890123456789," in raw[n] for n in lines)
    with_lit = fastpath.read_chunk(df, book, False)
    for sh in plans:
        sh.lit = None
    monkeypatch.setattr(fastpath, "_access_lit_regex", lambda: None)
    without = fastpath.read_chunk(df, book, False)
    for a, b in ((with_lit.batches, without.batches), (with_lit.access, without.access)):
        assert sorted(a.columns) == sorted(b.columns)  # (frames stack diagonally: order may differ)
        assert a.select(sorted(a.columns)).equals(b.select(sorted(a.columns)))


def test_claims_end_a_line_at_plain_text_but_not_at_a_continuation():
    """A batch line is claimed when the next line starts a record or is plain text the record layer
    cannot fold into it; not when the next line may continue it."""
    batch = "[2026-02-23 10:15:02 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0"
    ends = ["plain text that is no record of its own", "/x/protocol.py:412: UserWarning: 'max_tokens' is deprecated", "", "   ", batch]
    maybe_continues = ["    indented", "\tTab", "Try to allocate 5", "Possible solutions:", "2. lower it", "\x1cFS text", "\u00a0nbsp text", "..glued? [x]"]
    for nxt in ends + maybe_continues:
        df = fastpath.split_lines(batch + "\n" + nxt + "\n" + batch + "\n", 1)
        claimed = fastpath.claims(df).to_list()[0]
        assert claimed == (nxt in ends), repr(nxt)
    # a line that may open a traceback needs a start after it
    df = fastpath.split_lines("[2026-02-23 10:15:02] Exception in run_tp_server:\nplain text\n", 1)
    assert fastpath.claims(df).to_list()[0] is False


def test_whole_line_shapes_take_the_trailing_comma_of_0_4_9_to_0_5_8():
    """0.4.9-0.5.8 end batch lines with ', ': the whole-line path takes them too, reading the same values."""
    old = "[2025-08-27 10:16:52] Decode batch. #running-req: {r}, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0, "
    text = "\n".join(old.format(r=r) for r in range(1, 201)) + "\n"
    df = fastpath.split_lines(text, 1)
    book = fastpath.ShapeBook()
    learned = fastpath.read_chunk(df, book, False).batches
    frames, _access, rest, _ = fastpath.read_lit(df, book, False)
    assert sum(f.height for f in frames) == 199 and rest.height == 1  # (the last line of a chunk is never claimed)
    got = frames[0]
    assert got.get_column("running_req").to_list() == list(range(1, 200))
    assert got.select(learned.columns).equals(learned.head(199))


def test_insert_rows_equals_a_sort_of_both():
    """Hot rows the record layer read join their chunk's frame as slices around them; the result
    is the frame a concatenation and a sort by line gives (columns of either side, in line order)."""
    import random

    from sglog.read.parse import _insert_rows

    rnd = random.Random(3)
    for _ in range(50):
        lines = sorted(rnd.sample(range(1, 5000), rnd.randint(1, 300)))
        k = rnd.randint(1, min(70, len(lines)))
        picked = set(rnd.sample(lines, k))
        base = [n for n in lines if n not in picked]
        frame = pl.DataFrame({"line": base, "kind": ["decode_batch"] * len(base), "token": [n * 2 for n in base]}, schema={"line": pl.Int64, "kind": pl.String, "token": pl.Int64})
        extra = pl.DataFrame({"line": sorted(picked, reverse=True), "kind": ["prefill_batch"] * k, "new_seq": [1.5] * k, "end_line": [n + 1 for n in sorted(picked, reverse=True)]})
        got = _insert_rows(frame, extra)
        want = fastpath.concat_frames([frame, extra]).sort("line")
        assert got.get_column("line").to_list() == sorted(lines)
        assert got.select(sorted(want.columns)).equals(want.select(sorted(want.columns)))


def test_frame_kinds_counts_each_kind_also_unexpected_ones():
    from sglog.read.parse import frame_kinds

    frame = pl.DataFrame({"line": [1, 2, 3, 4], "kind": ["decode_batch", "prefill_batch", "decode_batch", "decode_batch"]})
    assert frame_kinds(frame, fastpath.BATCH_KINDS) == {"decode_batch": 3, "prefill_batch": 1}
    odd = pl.DataFrame({"line": [1, 2], "kind": ["decode_batch", "something_else"]})
    assert frame_kinds(odd, fastpath.BATCH_KINDS) == {"decode_batch": 1, "something_else": 1}
    assert frame_kinds(pl.DataFrame(), fastpath.BATCH_KINDS) == {}


def test_many_lark_read_batch_rows_join_their_chunks(odd_path, reference, monkeypatch):
    """Batch/access lines the record layer read join the whole frame when they are few, each its
    chunk's frame when they are many: both give the lark-only reading."""
    from sglog.read import parse

    hot_before = sum(1 for d in reference if d["kind"] in fastpath.HOT_KINDS)
    assert hot_before
    for limit in (0, 1, 10_000):
        monkeypatch.setattr(parse, "_INSERT_MAX", limit)
        assert_same(dicts(odd_path, chunk_bytes=16 << 10), reference)


@pytest.mark.parametrize("rest", [0, 1 << 20, 4 << 20, 5 << 20, 31 << 20, 64 << 20, 130 << 20, 183 << 20, 192 << 20, 193 << 20, 919 << 20])
@pytest.mark.parametrize("workers", [1, 2, 4])
def test_even_blocks_give_each_worker_as_many_blocks_of_one_size(rest, workers):
    from sglog.read.inputs import even_blocks

    size = 32 << 20
    block = even_blocks(rest, size, workers)
    assert 0 < block <= size + size // 2
    if block > size:  # (two rounds of blocks half as large again rather than three or more)
        assert workers > 1 and -(-rest // block) == 2 * workers and rest > 2 * workers * size
    if workers == 1 or rest <= (4 << 20):
        assert block == size  # (a small rest stays one block: each chunk has fixed costs)
        return
    n = -(-rest // block)  # blocks the rest makes (each a little shorter: cut at its last newline)
    assert n % workers == 0
    assert rest - (n - 1) * block > 0.75 * block  # the last block is about a full one, not a runt


def test_teach_derives_the_batch_shapes_before_any_chunk_is_read(odd_path):
    """The first chunk's batch lines teach the book its whole-line shapes (a few lark parses): the
    workers' chunks then take the plain batch lines whole-line, without reading the first chunk."""
    df = fastpath.split_lines(odd_path.read_bytes(), 1)
    book = fastpath.ShapeBook()
    fastpath.teach(df, book)
    for kind in ("decode_batch", "prefill_batch"):
        assert any(sh.lit is not None for sh in book.shapes[kind]), kind
    frames, _access, left, _samples = fastpath.read_lit(df, book, False)
    plain = sum(f.height for f in frames)
    assert plain > 0.5 * df.get_column("raw").str.contains(r"\] (?:Decode|Prefill) batch").sum()
    assert left.height + plain + sum(a.height for a in _access) == df.height


@pytest.mark.parametrize("compress", [False, True])
def test_a_prefetched_input_is_read_in_the_same_chunks(tmp_path, odd_path, compress):
    """inputs.prefetch reads the first blocks while a command imports the rest; the parse then gets
    exactly the chunks it would have read itself -- or none, when the plan differs."""
    from sglog.read import inputs

    path = tmp_path / ("p.log.gz" if compress else "p.log")
    path.write_bytes(gzip.compress(odd_path.read_bytes()) if compress else odd_path.read_bytes())
    src = inputs.open_source(str(path))
    want = list(inputs.iter_raw_chunks(src, *inputs.read_plan(src, 16 << 10, 2)))
    assert len(want) > 3
    inputs.prefetch(str(path), 16 << 10, 2)
    got = inputs.prefetched(src, 16 << 10, 2)
    assert got is not None and list(got) == want
    assert inputs.prefetched(src, 16 << 10, 2) is None  # (taken once)
    inputs.prefetch(str(path), 16 << 10, 2)
    assert inputs.prefetched(src, 8 << 10, 2) is None  # another plan: read afresh
    inputs.prefetch(str(tmp_path / "missing.log"))  # left to the parse, which reports it
    inputs.prefetch("-")  # stdin is never read ahead
    assert "-" not in inputs._prefetches and str(tmp_path / "missing.log") not in inputs._prefetches


def test_a_parse_after_a_prefetch_reads_the_same(odd_path, reference):
    from sglog.read import inputs

    inputs.prefetch(str(odd_path), 64 << 10, 2)
    assert_same(dicts(odd_path, chunk_bytes=64 << 10, threads=2), reference)
    assert str(odd_path) not in inputs._prefetches


@pytest.mark.slow
@pytest.mark.parametrize("keep", [3000, -200])
def test_a_truncated_gzip_read_ahead_is_one_input_error(tmp_path, odd_path, keep):
    """The read-ahead hands the error on where it happened (in its blocks or after them)."""
    from sglog.errors import InputError
    from sglog.read import inputs

    gz = tmp_path / "cut.log.gz"
    gz.write_bytes(gzip.compress(odd_path.read_bytes() * 8)[:keep])
    inputs.prefetch(str(gz), 8 << 10, 2)
    with pytest.raises(InputError, match="corrupt or truncated"):
        parse_file(str(gz), chunk_bytes=8 << 10, threads=2)


def test_benchmark_times_lnav_when_installed(tmp_path, monkeypatch):
    """lnav, a peer the speed issue names, is timed beside sglog when it is installed: headless,
    as it reads any log and with the benchmark's format of SGLang's batch lines, each with a HOME
    of its own (no user formats; its state stays out of the user's home), and `diagnose` is
    compared with both (the first is the target)."""
    import json
    import subprocess

    mod = _bench_run(monkeypatch)
    log = tmp_path / "a.log"
    log.write_text("x\n")
    monkeypatch.setattr(mod.shutil, "which", lambda name: None)
    assert not any(t[0].startswith("lnav") for t in mod.file_tools(log, True))  # not installed: not timed
    started = []
    monkeypatch.setattr(mod.shutil, "which", lambda name: "/usr/bin/lnav" if name == "lnav" else None)
    monkeypatch.setattr(mod.subprocess, "run", lambda argv, **kw: started.append((argv, kw["env"]["HOME"])) or subprocess.CompletedProcess(argv, 0))
    tools = mod.file_tools(log, True)
    (plain, argv, kw, _n), (fmt, fargv, fkw, _m) = tools[-2:]
    assert plain.startswith("lnav (") and argv == ["/usr/bin/lnav", "-n", "-c", mod.LNAV_QUERY, str(log)]
    assert fmt.startswith("lnav + SGLang format") and fargv == ["/usr/bin/lnav", "-n", "-c", mod.LNAV_FORMAT_QUERY, str(log)]
    home, fhome = kw["env"]["HOME"], fkw["env"]["HOME"]
    for h, env in ((home, kw["env"]), (fhome, fkw["env"])):
        assert Path(h).is_dir() and h != os.environ.get("HOME") and env["XDG_CONFIG_HOME"].startswith(h)
    assert home != fhome and not (Path(home) / ".lnav").exists()
    installed = Path(fhome) / ".lnav" / "formats" / "installed" / "sglang.json"
    assert json.loads(installed.read_text()) == json.loads(mod.LNAV_FORMAT.read_text())
    assert started == [(["/usr/bin/lnav", "-n", "-c", mod.LNAV_QUERY, os.devnull], h) for h in (home, fhome)]  # first starts, untimed
    mod.file_tools(log, True)
    assert len(started) == 2  # one HOME per form for the whole benchmark
    # the format's own samples are lines of the generated logs (its regexes must match them)
    fmt_doc = json.loads(mod.LNAV_FORMAT.read_text())["sglang_log"]
    import re as _re

    for sample in fmt_doc["sample"]:
        assert any(_re.match(p["pattern"].replace("(?<", "(?P<"), sample["line"]) for p in fmt_doc["regex"].values())
    lines = list(GEN.generate_lines(3000, 5))
    for head, name in (("Decode batch", "decode"), ("Prefill batch", "prefill")):
        pat = _re.compile(fmt_doc["regex"][name]["pattern"].replace("(?<", "(?P<"))
        mine = [ln for ln in lines if f"] {head}, " in ln]
        assert mine and all(pat.match(ln) for ln in mine), name
    # the environment reaches the command
    ok = mod.run_once(["sh", "-c", 'test "$SGLOG_BENCH_PROBE" = yes'], env={"SGLOG_BENCH_PROBE": "yes"})
    assert ok["ok"] and not mod.run_once(["sh", "-c", 'test "$SGLOG_BENCH_PROBE" = yes'])["ok"]
    # diagnose against lnav, like the other peers: the plain one is the target, the other reported
    row = lambda tool, s: {"file": "sglang-1m.log", "tool": tool, "median_s": s, "lines_per_s": 1e6 / s}  # noqa: E731
    doc = {"results": [row("sglog diagnose", 2.0), row(plain, 2.5), row(fmt, 1.0)], "startup": []}
    t = mod.check_targets(doc)
    assert t["diagnose_1m_vs_lnav"]["ok"] and t["diagnose_1m_vs_lnav"]["value"].startswith("1.25x") and not t["diagnose_1m_vs_lnav"].get("info")
    assert t["diagnose_1m_vs_lnav_sglang_format"]["value"].startswith("0.50x") and t["diagnose_1m_vs_lnav_sglang_format"]["info"]
    doc["results"][1]["median_s"] = 1.5
    assert not mod.check_targets(doc)["diagnose_1m_vs_lnav"]["ok"]


@pytest.mark.parametrize("wrap", ["sglang-1  | ", "2025-03-07T10:11:12.123456789Z stdout F ", "svc-1  | 2025-03-07T10:11:12Z "])
def test_a_wrapped_log_reads_as_the_unwrapped_one(tmp_path, wrap):
    """Outer envelopes are stripped in polars for the fast path (parse._VectorUnwrap): the same
    kinds, batch rows and accounting as the bare log, and the same as the lark-only reading;
    every event keeps its physical text."""
    lines = list(GEN.generate_lines(3000, 5))
    bare = write(tmp_path, lines, "bare.log")
    wrapped = write(tmp_path, [wrap + x for x in lines], "wrapped.log")
    b, w, ref = parse_file(str(bare)), parse_file(str(wrapped), keep_text=True), parse_file(str(wrapped), fast=False)
    assert w.lines_fast > 0.5 * w.lines  # the hot lines took the vectorised path
    assert sorted(w.kinds.items()) == sorted(b.kinds.items()) == sorted(ref.kinds.items())
    assert w.unparsed == b.unparsed == ref.unparsed
    cols = ["line", "kind", "running_req", "token_usage", "gen_throughput"]
    assert w.batches.select(cols).equals(b.batches.select(cols))
    physical: dict[int, str] = {}
    for d in w.iter_dicts():
        for k, t in enumerate(d["text"].split("\n")):
            physical[d["line"] + k] = t
    assert [physical.get(n + 1) for n, x in enumerate(lines) if x.strip()] == [wrap + x for x in lines if x.strip()]
