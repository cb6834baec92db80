"""polars' allocator setting follows the inputs' length (cli._common.tune_allocator): long logs
hand freed pages back at once (peak memory: a 1 GB log's report stays under 1.5 GB), shorter
ones keep jemalloc's defaults (a 1M-line diagnose is ~20% faster): benchmarks/NOTES.md."""

from __future__ import annotations

import os
import subprocess
import sys

from conftest import ROOT, STORY
from sglog.cli._common import BIG_INPUT_BYTES, COMPRESSED_RATIO, long_inputs


def _sparse(path, size: int):
    with open(path, "wb") as f:
        f.truncate(size)  # (a sparse file: its length without the disk)
    return str(path)


def test_long_inputs_by_their_length_in_all(tmp_path):
    small = _sparse(tmp_path / "a.log", 1 << 20)
    assert not long_inputs([small])
    assert long_inputs([_sparse(tmp_path / "big.log", BIG_INPUT_BYTES)])
    halves = [_sparse(tmp_path / f"h{i}.log", BIG_INPUT_BYTES // 2) for i in range(2)]
    assert not long_inputs(halves[:1]) and long_inputs(halves)  # (the files of one command together)
    gz = _sparse(tmp_path / "x.log.gz", BIG_INPUT_BYTES // COMPRESSED_RATIO)
    assert long_inputs([gz]) and not long_inputs([_sparse(tmp_path / "x.log", BIG_INPUT_BYTES // COMPRESSED_RATIO)])
    assert long_inputs(["-"])  # (stdin: its length is unknown)
    assert not long_inputs([str(tmp_path / "missing.log")])


def _conf_seen(args: list[str], env_extra: dict[str, str] | None = None) -> str:
    """The _RJEM_MALLOC_CONF a command leaves set once it has read its log paths."""
    code = "import os, sys\nfrom sglog.cli._common import log_paths\nlog_paths(sys.argv[1:])\nprint(os.environ.get('_RJEM_MALLOC_CONF', '<unset>'))\n"
    env = {k: v for k, v in os.environ.items() if k != "_RJEM_MALLOC_CONF"} | (env_extra or {})
    out = subprocess.run([sys.executable, "-c", code, *args], input="", capture_output=True, text=True, env=env, cwd=ROOT, check=True)
    return out.stdout.strip()


def test_a_command_sets_it_before_polars_loads_and_a_users_setting_wins(tmp_path):
    big = _sparse(tmp_path / "big.log", BIG_INPUT_BYTES)
    assert _conf_seen([str(STORY / "eagle3-oom-auto.log")]) == "<unset>"
    assert "dirty_decay_ms:0" in _conf_seen([big])
    assert "dirty_decay_ms:0" in _conf_seen([])  # (no log named, stdin piped: its length is unknown)
    assert _conf_seen([big], {"_RJEM_MALLOC_CONF": "narenas:2"}) == "narenas:2"
