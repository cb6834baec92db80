"""`events --stats`: every line counted once under what named it; unparsed lines grouped by shape."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from conftest import ROOT
from sglog.read.parse import SOURCES, parse_file, source_of, unparsed_templates

STORY = ROOT / "fixtures" / "logs" / "story" / "eagle3-oom-auto.log"

MIXED = """[2025-06-26 07:25:31 TP0] Load weight begin. avail mem=78.50 GB
[2025-06-26 07:25:32 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0
INFO:     127.0.0.1:5000 - "GET /health HTTP/1.1" 200 OK

Traceback (most recent call last):
  File "/x/sglang/srt/managers/scheduler.py", line 10, in run
    run()
RuntimeError: boom
[2025-06-26 07:25:33 TP0] zork 12 happened at 0x7f00aa
[2025-06-26 07:25:34 TP1] zork 345 happened at 0x7f00bb
[2025-06-26 07:25:35 TP0] blorp '/tmp/a/b' failed
"""


def test_sources_add_up_to_the_lines(tmp_path):
    log = tmp_path / "m.log"
    log.write_text(MIXED)
    st = parse_file(str(log)).stats()
    assert list(st["sources"]) == list(SOURCES)
    assert sum(st["sources"].values()) == st["lines"] == 11
    assert st["sources"]["blank"] == st["blank"] == 1 and st["sources"]["unparsed"] == st["unparsed"] == 3
    assert st["sources"]["blocks"] == 4 and st["sources"]["third_party"] == 1 and st["sources"]["grammar"] == 2


def test_unparsed_lines_are_grouped_by_shape(tmp_path):
    log = tmp_path / "m.log"
    log.write_text(MIXED)
    groups = parse_file(str(log)).stats()["unparsed_templates"]
    assert groups[0] == {"template": "zork <n> happened at <hex>", "count": 2, "lines": 2, "first_line": 9, "example": "zork 12 happened at 0x7f00aa"}
    assert groups[1]["template"] == "blorp <str> failed" and groups[1]["count"] == 1
    assert unparsed_templates([]) == []


def test_source_of_each_kind_comes_from_its_class():
    assert source_of("decode_batch") == "grammar" and source_of("nccl_log") == "third_party"
    assert source_of("traceback") == "blocks" and source_of("sglang_message") == "catalogue"
    assert source_of("unparsed") == "unparsed" and source_of("blank") == "blank"


@pytest.mark.slow
def test_stats_json_and_table(tmp_path):
    log = tmp_path / "m.log"
    log.write_text(MIXED)
    out = subprocess.run([sys.executable, "-m", "sglog", "events", "--stats", "--format", "json", str(log), str(STORY)], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    files = json.loads(out.stdout)["files"]
    assert [sum(f["sources"].values()) for f in files] == [f["lines"] for f in files]
    table = subprocess.run([sys.executable, "-m", "sglog", "events", "--stats", str(log)], capture_output=True, text=True, timeout=120, env={"COLUMNS": "120", "PATH": "/usr/bin:/bin"})
    assert table.returncode == 0, table.stderr
    assert "catalog" in table.stdout and "zork <n> happened at <hex>" in table.stdout
