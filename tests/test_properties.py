"""Property-based tests: arbitrary text never breaks the reader, and no line is ever lost."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from sglog.read.parse import parse_file

PIECES = [
    "[2026-02-23 10:16:52 TP0] ",
    "[10:16:52 TP1] ",
    "[2026-02-23 10:16:52.123 DP1 PP0 TP5 EP5] ",
    "(SchedulerActor pid=12, ip=10.0.0.5) ",
    "Decode batch, #running-req: 8, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0",
    "Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ",
    'INFO:     127.0.0.1:57114 - "GET /health HTTP/1.1" 200 OK',
    "Traceback (most recent call last):",
    '  File "/x.py", line 1, in f',
    "    ^^^^",
    "RuntimeError: Not enough memory.",
    "During handling of the above exception, another exception occurred:",
    "Fatal Python error: Aborted",
    "terminate called after throwing an instance of 'c10::Error'",
    "server_args=ServerArgs(model_path='x', tp_size=2, ",
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.02s/it]",
    "\r",
    "\x1b[32m",
    "\x1b[0m",
    " ",
    "\t",
    "é",
    "\ufffd",
    "Load weight end. elapsed=5.31 s, type=X, avail mem=63.44 GB, mem usage=15.06 GB.",
    "KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_token_ratio: 0.4200 -> 0.5567",
]

line = st.lists(st.one_of(st.sampled_from(PIECES), st.text(st.characters(blacklist_categories=("Cc", "Cs")), max_size=30)), max_size=6).map("".join).map(lambda s: s.replace("\n", " "))
document = st.lists(line, max_size=40)
raw_bytes = st.binary(max_size=600)

SETTINGS = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])


def _spans_cover(log, n_lines: int) -> None:
    spans = [(d["line"], d["end_line"]) for d in log.iter_dicts()]
    covered = []
    for a, b in spans:
        assert a <= b
        covered.extend(range(a, b + 1))
    assert sorted(covered) == list(range(1, n_lines + 1)), (spans, n_lines)


@SETTINGS
@given(document)
def test_every_physical_line_in_exactly_one_event(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("p") / "x.log"
    text = "\n".join(lines) + ("\n" if lines else "")
    p.write_text(text, encoding="utf-8")
    for fast in (True, False):
        log = parse_file(str(p), fast=fast, keep_text=True)
        assert log.lines == len(lines)
        _spans_cover(log, len(lines))
        assert 0.0 <= log.coverage <= 1.0


@SETTINGS
@given(document)
def test_jsonl_export_reproduces_every_line(tmp_path_factory, lines):
    p = tmp_path_factory.mktemp("p") / "x.log"
    p.write_text("\n".join(lines) + ("\n" if lines else ""), encoding="utf-8")
    log = parse_file(str(p), keep_text=True)
    exported = [json.loads(json.dumps(d, default=str, ensure_ascii=False)) for d in log.iter_dicts()]
    rebuilt: list[str] = []
    for d in exported:
        rebuilt.extend(d["text"].split("\n"))
    assert rebuilt == lines


@SETTINGS
@given(raw_bytes)
def test_arbitrary_bytes_never_raise(tmp_path_factory, data):
    from sglog.errors import InputError

    if data.startswith((b"\x1f\x8b", b"\x28\xb5\x2f\xfd")):
        data = b"#" + data  # compressed inputs have their own tests; here every byte is text
    p = tmp_path_factory.mktemp("p") / "x.log"
    p.write_bytes(data)
    try:
        log = parse_file(str(p))
    except InputError:
        return  # refused as binary: a clean, one-line error
    expected = data.count(b"\n") + (0 if data.endswith(b"\n") or not data else 1)
    assert log.lines == expected
    _spans_cover(log, expected)


PLAIN = [
    "[2026-02-23 10:16:52 TP0] Decode batch, #running-req: 8, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0",
    "[2026-02-23 10:16:52 TP1] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False",
    "[2025-08-27 10:16:52] Decode batch. #running-req: 8, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0, ",
    '[2026-02-23 10:16:53] INFO:     127.0.0.1:57114 - "GET /health HTTP/1.1" 200 OK',
    "[2026-02-23 10:16:53 TP4] LONG GARBAGE COLLECTION DETECTED | Generation 2 | Duration: 0.1234s | # Objects: gen0=5, gen1=0, gen2=123456 | This may cause latency jitter.",
]


@pytest.mark.slow
@SETTINGS
@given(st.lists(st.one_of(st.sampled_from(PLAIN), line), max_size=60))
def test_vectorised_path_reads_like_lark_with_tiny_chunks(tmp_path_factory, lines):
    """The whole-line shapes, claims and term shapes (learned from plain lines in the first chunks)
    give the events of the lark-only path, whatever lines come after."""
    from sglog.read.parse import comparable

    lines = PLAIN * 6 + lines
    p = tmp_path_factory.mktemp("prop") / "x.log"
    p.write_bytes(("\n".join(lines) + "\n").encode("utf-8", errors="surrogatepass"))
    fast = [comparable(d) for d in parse_file(str(p), keep_text=True, chunk_bytes=1024, threads=2).iter_dicts()]
    slow = [comparable(d) for d in parse_file(str(p), keep_text=True, fast=False).iter_dicts()]
    assert fast == slow
