"""inputs.find_lines: the evidence lines diagnose reads back (sglog/diagnose.py fill_evidence_text)
are those read_lines gives, found by counting newlines in C instead of walking each line."""

from __future__ import annotations

import gzip
import random

import pytest

from sglog.read import inputs


def _log(tmp_path, lines: list[str], name: str = "x.log", end: str = "\n"):
    p = tmp_path / name
    data = ("\n".join(lines) + end).encode()
    p.write_bytes(gzip.compress(data) if name.endswith(".gz") else data)
    return inputs.open_source(str(p))


@pytest.mark.parametrize("name", ["x.log", "x.log.gz"])
@pytest.mark.parametrize("end", ["\n", ""])
@pytest.mark.parametrize("chunk", [64, 1000, inputs.CHUNK_BYTES])
def test_the_lines_read_lines_gives(tmp_path, name, end, chunk, monkeypatch):
    monkeypatch.setattr(inputs, "FIND_STRIDE", 37)  # (strides that end mid-line, many per chunk)
    rng = random.Random(7)
    lines = ["".join(rng.choice("ab\r é") for _ in range(rng.randrange(0, 90))) for _ in range(600)]
    src = _log(tmp_path, lines, name, end)
    for numbers in [{1}, {600}, {601, 700}, set(range(1, 601, 7)), {2, 3, 4, 300, 599, 600}, set(rng.sample(range(1, 650), 80)), set()]:
        got = inputs.find_lines(src, numbers, chunk)
        assert got == inputs.read_lines(src, numbers), numbers
        assert got == {k: lines[k - 1].rstrip("\r") for k in numbers if k <= 600}


def _marked(tmp_path, monkeypatch, lines: list[str], end: str = "\n", spacing: int = 50):
    """A plain file read once from its start (as the parse reads it), with a mark every ``spacing`` bytes."""
    monkeypatch.setattr(inputs, "MARK_BYTES", spacing)
    src = _log(tmp_path, lines, end=end)
    for _ in inputs.iter_raw_chunks(src, 1000):
        pass
    return src


def test_a_reading_from_the_start_notes_marks_that_count_the_newlines_before_them(tmp_path, monkeypatch):
    lines = [f"line {i} " + "x" * (i % 23) for i in range(400)]
    src = _marked(tmp_path, monkeypatch, lines)
    data = src.path.read_bytes()
    assert src.marks[0] == (0, 0)
    assert all(data[:at].count(b"\n") == n for at, n in src.marks)
    assert all(b - a <= 50 for (a, _), (b, _) in zip(src.marks, src.marks[1:]))
    assert src.marks[-1][0] > len(data) - 50
    before = list(src.marks)
    for _ in inputs.iter_raw_chunks(src, 333):  # (a second reading, in other blocks: the marks stay as they were)
        pass
    assert src.marks == before
    for _ in inputs.iter_raw_chunks(src, 1000, start=200):  # (a reading from inside the file notes none)
        pass
    assert src.marks == before


@pytest.mark.parametrize("end", ["\n", ""])
def test_lines_found_from_the_marks_are_those_read_lines_gives(tmp_path, monkeypatch, end):
    rng = random.Random(11)
    # (lines shorter and longer than the marks' spacing and than a chunk; CRs; multi-byte characters)
    lines = ["".join(rng.choice("ab\r é") for _ in range(rng.choice([0, 3, 40, 120, 2500]))) for _ in range(500)]
    src = _marked(tmp_path, monkeypatch, lines, end)
    assert len(src.marks) > 100
    for numbers in [{1}, {2}, {500}, {501, 900}, set(range(1, 501, 3)), set(rng.sample(range(1, 520), 60)), set()]:
        got = inputs.find_lines(src, numbers, 700)
        assert got == {k: lines[k - 1].rstrip("\r") for k in numbers if k <= 500}, numbers


def test_a_line_found_from_its_mark_reads_only_near_it(tmp_path, monkeypatch):
    lines = [f"{i:06d} " + "y" * 90 for i in range(20000)]  # ~2 MB
    src = _marked(tmp_path, monkeypatch, lines, spacing=4096)
    read: list[int] = []
    real = inputs._FileReader.read

    def counted(self, n=-1):
        block = real(self, n)
        read.append(len(block))
        return block

    monkeypatch.setattr(inputs._FileReader, "read", counted)
    assert inputs.find_lines(src, {19990, 20000}) == {19990: lines[19989], 20000: lines[19999]}
    assert sum(read) <= 3 * 4096


def test_compressed_and_piped_inputs_have_no_marks(tmp_path, monkeypatch):
    monkeypatch.setattr(inputs, "MARK_BYTES", 50)
    src = _log(tmp_path, [f"line {i}" for i in range(300)], "x.log.gz")
    for _ in inputs.iter_raw_chunks(src, 1000):
        pass
    assert src.marks == []
    assert inputs.find_lines(src, {7, 300}) == {7: "line 6", 300: "line 299"}


def test_the_parse_leaves_the_marks_of_the_file_it_read(tmp_path):
    from sglog.read.parse import parse_file

    p = tmp_path / "server.log"
    p.write_text("".join(f"[2025-01-01 00:00:{i % 60:02d}] Decode batch, #running-req: {i}, #token: 100, token usage: 0.01, gen throughput (token/s): 5.0, #queue-req: 0\n" for i in range(30000)))
    log = parse_file(str(p))
    src = inputs.opened(str(p))
    assert src is not None and src.marks and src.marks[0] == (0, 0)
    data = p.read_bytes()
    assert all(data[:at].count(b"\n") == n for at, n in src.marks)
    assert log.lines == 30000
