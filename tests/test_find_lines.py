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
