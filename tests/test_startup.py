"""What the diagnose command loads while it reads the logs (#7: start-up and the end of a run)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LOG = ROOT / "fixtures" / "logs" / "story" / "eagle3-oom-auto.log"

# the modules the command has loaded when it starts reading (commands/diagnose.py), then either
# the reading, the preload of the later stages (runs, rules, findings) or that of render_rich's
# imports
_PROBE = """
import importlib, json, sys
import sglog.cli
import sglog.commands.diagnose as cmd
from sglog.parse import parse_file
before = set(sys.modules)
if sys.argv[1] == "read":
    parse_file(sys.argv[2])
else:
    for name in (cmd.RENDER_IMPORTS if sys.argv[1] == "render" else cmd.STAGE_IMPORTS):
        importlib.import_module(name)
print(json.dumps(sorted(set(sys.modules) - before)))
"""


def _probe(probe: str, *args: str) -> str:
    """The output of ``probe`` run by a fresh interpreter (its own imports and memory)."""
    return subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, check=True, cwd=ROOT).stdout


def _loaded(what: str, probe: str = _PROBE, log: Path = LOG) -> set[str]:
    return set(json.loads(_probe(probe, what, str(log))))


def test_preloaded_modules_share_no_import_with_the_reading():
    # the preload thread imports while the main thread reads: a module both threads import could
    # make one wait on the other's module lock (or, in a cycle, fail as a deadlock)
    read, render, stages = _loaded("read"), _loaded("render"), _loaded("stages")
    assert "rich.console" in render
    assert {"sglog.rules", "sglog.runs", "sglog.diagnose"} <= stages
    assert not read & render, sorted(read & render)
    assert not read & stages, sorted(read & stages)


def test_the_reading_starts_before_the_later_stages_are_imported():
    # diagnose without --select/--ignore: runs, rules and findings are imported while the logs
    # are read (commands/diagnose.STAGE_IMPORTS), not on one core before
    probe = """
import json, sys
import sglog.parse
seen = {}
real = sglog.parse.parse_file
def parse_file(*a, **k):
    seen.setdefault("loaded", sorted(m for m in sys.modules if m in ("sglog.runs", "sglog.rules", "sglog.diagnose")))
    return real(*a, **k)
sglog.parse.parse_file = parse_file
from sglog.cli import app
try:
    app([*sys.argv[1:]], standalone_mode=False)
except SystemExit:
    pass
print(json.dumps(seen["loaded"]))
"""
    out = _probe(probe, "diagnose", "-f", "json", str(LOG))
    assert json.loads(out.strip().splitlines()[-1]) == []


# the modules the command loads after it starts reading ahead (commands/_common.read_ahead), and
# those the read-ahead thread loads meanwhile (a zstd input: the decompressor is imported there)
_PREFETCH_PROBE = """
import json, sys
import sglog.cli
import sglog.commands.diagnose
from sglog import inputs
before = set(sys.modules)
if sys.argv[1] == "prefetch":
    for _ in inputs.planned_chunks(inputs.open_source(sys.argv[2]), 1 << 16, 2):
        pass
else:
    from sglog.diagnose import diagnose_runs, looks_like_sglang
    from sglog.parse import parse_file
    from sglog.runs import build_runs
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
from sglog import inputs
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


def test_the_preload_waits_for_the_reading_to_be_under_way(tmp_path, monkeypatch):
    # (the start of the reading is Python on one core: imports then would slow it)
    import threading
    import time

    from sglog import parse
    from sglog.commands._common import preload

    (tmp_path / "sglog_preload_probe.py").write_text("X = 1\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    started = threading.Event()
    preload("sglog_preload_probe", after=started)
    time.sleep(0.2)
    assert "sglog_preload_probe" not in sys.modules
    started.set()
    for _ in range(200):
        if "sglog_preload_probe" in sys.modules:
            break
        time.sleep(0.01)
    assert "sglog_preload_probe" in sys.modules
    del sys.modules["sglog_preload_probe"]
    # a parse sets the event it waits for in the command, once its workers run or at its end
    parse.under_way.clear()
    parse.parse_file(str(LOG))
    assert parse.under_way.is_set()


# `sglog ... --help` with typer's help formatter loaded without rich.markdown and rich.traceback
# (cli._light_help_formatter), or, with both already imported, as typer loads it
_HELP_PROBE = """
import json, os, sys
os.environ["COLUMNS"] = "100"
if sys.argv[1] == "plain":
    import rich.markdown, rich.traceback
import contextlib, io
from sglog import cli
out = io.StringIO()
sys.argv = ["sglog", *sys.argv[2:]]
code = 0
with contextlib.redirect_stdout(out):
    try:
        cli.main()
    except SystemExit as e:
        code = e.code
loaded = sorted(m for m in ("rich.markdown", "rich.traceback", "markdown_it") if m in sys.modules)
import rich.markdown, typer.rich_utils
real = rich.markdown.Markdown("*x*")  # the real module, once imported after the stand-ins
stand_in = typer.rich_utils.Markdown("*x*")  # the formatter's stand-in builds the real thing
print(json.dumps({"out": out.getvalue(), "code": code, "loaded": loaded, "real": type(real).__module__,
                  "stand_in": [type(stand_in).__module__, type(stand_in) is type(real)], "elements": hasattr(rich.markdown, "Heading")}))
"""


def test_help_screens_are_typers_own_without_markdown_and_traceback_imports():
    for args in (["--help"], ["-h"], [], ["diagnose", "--help"], ["repro", "-h"], ["rules", "--help"]):
        light = json.loads(_probe(_HELP_PROBE, "light", *args))
        plain = json.loads(_probe(_HELP_PROBE, "plain", *args))
        assert light["out"] == plain["out"] and "Usage" in light["out"], args
        assert light["code"] == plain["code"] == 0, args
        assert light["loaded"] == [], args  # (the stand-ins are gone and nothing imported the real modules)
        assert plain["loaded"] == ["markdown_it", "rich.markdown", "rich.traceback"]
        assert light["real"] == "rich.markdown" and light["elements"]
        assert light["stand_in"] == ["rich.markdown", True]


# a command line that names a command builds that command only (cli._only_the_command)
_ONE_COMMAND_PROBE = """
import contextlib, io, json, os, sys
os.environ["COLUMNS"] = "100"
import typer.main
from sglog import cli
built = []
real = typer.main.get_command_from_info
def counting(*args, **kw):
    info = kw.get("command_info") or args[0]
    built.append(info.callback.__name__)
    return real(*args, **kw)
typer.main.get_command_from_info = counting
def run(how, args):
    out, code = io.StringIO(), 0
    sys.argv = ["sglog", *args]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            cli.main() if how == "main" else cli.app(args, standalone_mode=False)
        except SystemExit as e:
            code = e.code
        except Exception as e:  # (the app called directly raises its usage errors)
            code = type(e).__name__
    return out.getvalue(), code
res = {}
for args in json.loads(sys.argv[1]):
    built.clear()
    via_main = run("main", args)
    n = list(built)
    built.clear()
    res[" ".join(args)] = {"main": via_main, "built": n, "app": run("app", args), "all": len(built), "left": len(cli.app.registered_commands)}
print(json.dumps(res))
"""


def test_a_command_line_builds_only_the_command_it_names():
    cases = [["diagnose", "--help"], ["repro", "-h"], ["explain", "--help"], ["rules"], ["timeline", "--help"], ["--help"], ["diagnos", "x"]]
    res = json.loads(_probe(_ONE_COMMAND_PROBE, json.dumps(cases)))
    every = res["--help"]["all"]
    assert every >= 9
    for args, r in res.items():
        named = args.split()[0] if not args.startswith("-") else None
        if named in ("diagnose", "repro", "explain", "rules", "timeline"):
            assert r["built"] == [named], args
            assert r["main"] == r["app"], args  # the same screen as typer's with every command
            assert named == "rules" or f"Usage: sglog {named}" in r["main"][0], args
        else:  # (the root's help lists every command; a misspelt one is told the close names)
            assert len(r["built"]) == every, args
        assert r["left"] == every, args  # the app has all its commands again
    assert "Did you mean 'diagnose'" in res["diagnos x"]["main"][0]
    assert "code    name" in res["rules"]["main"][0] and res["rules"]["main"] == res["rules"]["app"]


_METADATA_PROBE = """
import json, sys
import sglog.cli
import importlib
out = {"stand_in": type(sys.modules["importlib.metadata"]).__name__}
from sglog.commands.diagnose import diagnose  # (the command module)
from sglog.parse import parse_file
parse_file(sys.argv[1])  # polars and the reading: importlib.metadata is imported, not loaded
out["after_reading"] = type(sys.modules["importlib.metadata"]).__name__
out["email"] = "email.message" in sys.modules
import importlib.metadata  # (an import statement alone does not load it either)
out["after_import"] = type(sys.modules["importlib.metadata"]).__name__
from polars.io.iceberg._plugin import _package
import polars
out["polars_use"] = _package("polars") == "polars==" + polars.__version__  # polars' own use of it
out["real"] = sys.modules["importlib.metadata"] is importlib.metadata and type(importlib.metadata).__name__ == "module"
from importlib.metadata import PackageNotFoundError, version
import importlib.metadata._meta  # (a submodule: the real package's __path__)
out["version"] = version("lark")
out["missing"] = PackageNotFoundError.__name__
print(json.dumps(out))
"""


def test_importlib_metadata_loads_only_when_used():
    """The CLI puts a stand-in in place of importlib.metadata, which polars imports at its top for
    a function sglog never calls (20-35 ms of each start, #7); the first use loads the real one."""
    import lark

    out = json.loads(_probe(_METADATA_PROBE, str(LOG)))
    assert out == {
        "stand_in": "_LazyMetadata",
        "after_reading": "_LazyMetadata",
        "email": False,
        "after_import": "_LazyMetadata",
        "polars_use": True,
        "real": True,
        "version": lark.__version__,
        "missing": "PackageNotFoundError",
    }
