"""A hypothesis fuzz of mutated real and constructed fixture logs (#28): whatever the bytes, sglog
exits 0, 1 or 2, never prints a traceback, writes strict JSON with --format json, and accounts
for every line of the file (``events --stats``: the lines it counts are the file's lines)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import ROOT

LOGS = sorted(p for p in (ROOT / "fixtures" / "logs").rglob("*.log") if p.stat().st_size < 64 << 10)
SGLOG = [sys.executable, "-m", "sglog"]

# what a hostile log may hold: escape sequences, C1 controls, invalid UTF-8, numbers out of every
# range, deep brackets, a NUL-free binary run, CR and lone line ends
NASTY = [
    b"\x1b]0;pwned\x07",
    b"\x1b[2J",
    b"\x1bc",
    b"\xc2\x9b31m",
    b"\x9b",
    b"\xff\xfe\xc3",
    b"\r",
    b"\r\n",
    b"\n\n\n",
    b"1e308",
    b"-1e400",
    b"nan",
    b"inf",
    b"99999999999999999999",
    b"9" * 400,
    b"[" * 300,
    b"]" * 300,
    b"{" * 50,
    b"TP99999999999999999999",
    b"[2026-13-45 25:61:61 TP0] ",
    b"[1970-01-01 00:00:00] ",
    b"Traceback (most recent call last):\n",
    b"Decode batch, #running-req: -1, #token: 1e308, token usage: nan, gen throughput (token/s): inf, #queue-req: 0",
    b"server_args=ServerArgs(model_path='x', tp_size=99999999999999999999, mem_fraction_static=1e308)",
    b"sglang                    99.0.0",
    b"\t",
    b"\xe2\x80\xae",
    b"\x00",
]


@st.composite
def mutated(draw) -> bytes:
    data = bytearray(draw(st.sampled_from(LOGS)).read_bytes())
    for _ in range(draw(st.integers(1, 6))):
        op = draw(st.sampled_from(["insert", "cut", "delete", "duplicate", "flip"]))
        at = draw(st.integers(0, len(data)))
        if op == "insert":
            data[at:at] = draw(st.sampled_from(NASTY))
        elif op == "cut":
            del data[at:]
        elif op == "delete":
            del data[at : at + draw(st.integers(1, 400))]
        elif op == "duplicate":
            data[at:at] = data[max(0, at - 300) : at]
        elif data:
            i = min(at, len(data) - 1)
            data[i] ^= draw(st.integers(1, 255))
    return bytes(data)


def file_lines(data: bytes) -> int:
    return data.count(b"\n") + (bool(data) and not data.endswith(b"\n"))


def sglog(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(SGLOG + list(args), capture_output=True, timeout=120, env=dict(os.environ, NO_COLOR="1", COLUMNS="120"))


def strict_json(text: bytes):
    def refuse(name):
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def check(p: subprocess.CompletedProcess) -> str:
    err = p.stderr.decode("utf-8", "replace")
    assert p.returncode in (0, 1, 2), (p.returncode, err[-1500:])
    assert "Traceback" not in err, err[-1500:]
    return err


@pytest.mark.slow
@settings(max_examples=12, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(data=mutated())
def test_mutated_fixture_logs(tmp_path_factory, data):
    path = tmp_path_factory.mktemp("fuzz") / "mutated.log"
    path.write_bytes(data)
    s = sglog("events", "--stats", "--format", "json", str(path))
    err = check(s)
    if s.returncode == 0:
        doc = strict_json(s.stdout)
        assert sum(f["lines"] for f in doc["files"]) == file_lines(data), err
    else:  # (refused: one line, an input error)
        assert s.returncode == 2 and err.count("sglog: error:") == 1, err
    d = sglog("diagnose", "--format", "json", str(path))
    check(d)
    if d.returncode in (0, 1):
        doc = strict_json(d.stdout)
        assert doc["coverage"]["lines"] == file_lines(data)
    r = sglog("runs", "--format", "json", str(path))
    check(r)
    if r.returncode == 0:
        strict_json(r.stdout)
