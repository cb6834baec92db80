"""A built wheel (non-editable install) carries the grammar and reads logs with it."""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

pytestmark = pytest.mark.slow  # the tests build a wheel with pip


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    r = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if r.returncode != 0:
        pytest.skip(f"cannot build a wheel here (no build backend reachable?): {r.stderr.strip()[-300:]}")
    (whl,) = out.glob("sglog-*.whl")
    return whl


def test_wheel_contains_the_grammar(wheel):
    names = zipfile.ZipFile(wheel).namelist()
    assert "sglog/grammars/sglang.lark" in names
    assert "sglog/cli/__init__.py" in names


def test_installed_wheel_parses_with_its_own_grammar(wheel, tmp_path):
    target = tmp_path / "site"
    with zipfile.ZipFile(wheel) as z:
        z.extractall(target)
    log = tmp_path / "x.log"
    log.write_text("[2026-02-23 10:15:02 TP0] Load weight begin. avail mem=78.50 GB\n")
    code = (
        "import sglog, sglog.read.grammar as g\n"
        f"assert sglog.__file__.startswith({str(target)!r}), sglog.__file__\n"
        "from sglog.read.parse import parse_file\n"
        f"log = parse_file({str(log)!r})\n"
        "print(log.events[0].kind, log.events[0].get('avail_mem'))\n"
    )
    env = dict(os.environ, PYTHONPATH=str(target))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "weight_load_begin 78.5"
