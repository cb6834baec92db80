"""What a command line loads (honest laziness, no patches: #30), and what the reading loads meanwhile (#7)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import ROOT

LOG = ROOT / "fixtures" / "logs" / "story" / "eagle3-oom-auto.log"


def _probe(probe: str, *args: str) -> str:
    """The output of ``probe`` run by a fresh interpreter (its own imports and memory)."""
    return subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True, cwd=ROOT).stdout


def _loaded(what: str, probe: str, log: Path = LOG) -> set[str]:
    return set(json.loads(_probe(probe, what, str(log))))


# the modules the command loads after it starts reading ahead (commands/_common.read_ahead), and
# those the read-ahead thread loads meanwhile (a zstd input: the decompressor is imported there)
_PREFETCH_PROBE = """
import json, sys
import sglog.cli
import sglog.cli.diagnose
from sglog.read import inputs
before = set(sys.modules)
if sys.argv[1] == "prefetch":
    for _ in inputs.planned_chunks(inputs.open_source(sys.argv[2]), 1 << 16, 2):
        pass
else:
    from sglog.diagnose import diagnose_runs, looks_like_sglang
    from sglog.read.parse import parse_file
    from sglog.runs.build import build_runs
    from sglog.rules import choose
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def test_the_read_ahead_shares_no_import_with_the_command(tmp_path):
    import zstandard

    zst = tmp_path / "log.zst"
    zst.write_bytes(zstandard.ZstdCompressor().compress(LOG.read_bytes()))

    ahead, command = _loaded("prefetch", _PREFETCH_PROBE, zst), _loaded("command", _PREFETCH_PROBE, zst)
    assert "polars" in command
    assert not ahead & command, sorted(ahead & command)


_MALLOC_PROBE = """
import sys
from sglog.read import inputs
if sys.argv[1] == "tuned":
    inputs.tune_malloc()
def rss():
    return int(open("/proc/self/statm").read().split()[1]) * 4096
base = rss()
for _ in range(3):  # (glibc's moving threshold keeps a freed block in its heap from the second on)
    b = b"x" * (24 << 20)
    del b
print(rss() - base)
"""


def test_freed_read_blocks_leave_the_process_once_malloc_is_tuned():
    import platform

    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        return
    kept = {what: int(_probe(_MALLOC_PROBE, what)) for what in ("tuned", "default")}
    assert kept["tuned"] < (8 << 20) <= kept["default"], kept


# what a command line loads: honest laziness (heavy modules are imported inside the functions
# that need them), no stand-ins in sys.modules and no patched dependency
_LOADS_PROBE = """
import contextlib, io, json, sys
from sglog import cli
sys.argv = ["sglog", *sys.argv[1:]]
out, code = io.StringIO(), 0
with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
    try:
        cli.main()
    except SystemExit as e:
        code = e.code
heavy = ("polars", "lark", "altair", "rich", "markdown_it", "vl_convert", "sglog.read.parse", "sglog.runs.build", "sglog.rules", "sglog.report")
print(json.dumps({"code": code, "heavy": sorted(m for m in sys.modules if m.split(".")[0] in heavy or m in heavy),
                  "metadata": type(sys.modules.get("importlib.metadata")).__name__}))
"""


def test_help_loads_no_heavy_module():
    for args in (["--help"], [], ["diagnose", "--help"], ["repro", "-h"], ["--version"], ["report", "--help"]):
        out = json.loads(_probe(_LOADS_PROBE, *args))
        assert out["code"] == 0, args
        assert out["heavy"] == [], (args, out["heavy"])


def test_a_command_loads_its_own_stage_only():
    out = json.loads(_probe(_LOADS_PROBE, "rules", "-f", "json"))
    assert out["code"] == 0 and "sglog.rules" in out["heavy"]
    assert not [m for m in out["heavy"] if m.startswith(("lark", "altair", "sglog.read.parse", "sglog.report"))], out["heavy"]  # (the rules import polars)
    out = json.loads(_probe(_LOADS_PROBE, "diagnose", "-q", "-f", "json", str(LOG)))
    assert out["code"] == 1 and "polars" in out["heavy"] and "lark" in out["heavy"]
    assert not [m for m in out["heavy"] if m.startswith(("altair", "sglog.report", "rich"))], out["heavy"]
    assert out["metadata"] in ("module", "NoneType")  # (the real importlib.metadata, or not loaded: no stand-in)


def test_the_cli_patches_nothing():
    """No stand-in module, no patched dependency, no hard exit in the command line's code (#30)."""
    import re

    mine = sorted((ROOT / "sglog" / "cli").glob("*.py"))
    for path in mine:
        text = path.read_text()
        assert not re.search(r"sys\.modules\[|sys\.modules\.(update|pop|setdefault)|os\._exit|__name__ ==? ?[\"']NoArgs", text), path
        assert not re.search(r"type\(e\)\.__name__ (==|in|!=)", text), path  # (errors are caught by class, not by name)
