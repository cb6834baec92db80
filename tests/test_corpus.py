"""The real corpus: every log is read (coverage >= 0.99), and its line accounting is a snapshot.

``sglog events --stats --format json <file>`` is run through the CLI for each
file of ``fixtures/logs/real`` (paths relative to the repository, so snapshots
hold no absolute path).  The snapshot pins the number of lines, blanks,
unparsed lines and events of each kind: a grammar change that moves a line from
one kind to another shows up in review.
"""

from __future__ import annotations

import functools
import json
import os
from pathlib import Path

import pytest
from typer.testing import CliRunner

ROOT = Path(__file__).resolve().parent.parent
REAL = ROOT / "fixtures" / "logs" / "real"
FILES = sorted(p.name for p in REAL.glob("*.log"))
MIN_COVERAGE = 0.99


@functools.cache
def stats(name: str) -> dict:
    from sglog.cli import app

    rel = (REAL / name).relative_to(ROOT).as_posix()
    cwd = os.getcwd()
    os.chdir(ROOT)
    try:
        result = CliRunner().invoke(app, ["events", "--stats", "--format", "json", rel])
    finally:
        os.chdir(cwd)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    [entry] = doc["files"]
    assert entry["path"] == rel
    return entry


def test_corpus_is_complete() -> None:
    assert len(FILES) == 34
    sources = (REAL / "SOURCES.md").read_text(encoding="utf-8")
    for name in FILES:
        assert f"`{name}`" in sources, f"{name} has no source in SOURCES.md"


@pytest.mark.parametrize("name", FILES)
def test_coverage(name: str) -> None:
    entry = stats(name)
    assert entry["coverage"] >= MIN_COVERAGE, f"{name}: {entry['unparsed']} unparsed lines"
    nonblank = entry["lines"] - entry["blank"]
    assert entry["unparsed"] <= (1 - MIN_COVERAGE) * nonblank


@pytest.mark.parametrize("name", FILES)
def test_stats_snapshot(name: str, snapshot) -> None:
    assert stats(name) == snapshot
