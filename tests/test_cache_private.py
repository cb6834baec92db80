"""Cache files are code (lark's is a pickle): only the user's private folder holds them (#28)."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT
from sglog.read import cache

LOG = ROOT / "fixtures" / "logs" / "story" / "eagle3-oom-auto.log"


class _Payload:
    """Unpickling this creates the file ``path``: proof that a planted pickle ran."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in ("SGLOG_CACHE_DIR", "XDG_CACHE_HOME")}
    env.update(TMPDIR=str(tmp_path / "shared"), HOME=str(tmp_path / "home"), **extra)
    (tmp_path / "shared").mkdir(exist_ok=True)
    return env


def _diagnose(env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "sglog", "diagnose", "-q", str(LOG)], env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.slow
def test_nothing_loadable_is_written_to_the_shared_temp_folder(tmp_path):
    env = _env(tmp_path)
    first, second = _diagnose(env), _diagnose(env)
    assert first.returncode in (0, 1) and second.returncode == first.returncode, first.stderr
    assert first.stdout == second.stdout  # the cached run reads the same
    assert sorted(p.name for p in (tmp_path / "shared").iterdir()) == []
    folder = tmp_path / "home" / ".cache" / "sglog"
    assert folder.is_dir() and (folder.stat().st_mode & 0o777) == 0o700
    names = sorted(p.name for p in folder.iterdir())
    assert any(n.startswith("lark-") for n in names) and any(n.endswith(".json") for n in names)


def _plant(folder: Path, marker: Path) -> Path:
    from sglog.read import grammar

    folder.mkdir(parents=True, exist_ok=True)
    planted = folder / grammar.parser_cache_name()
    planted.write_bytes(pickle.dumps(_Payload(str(marker))))
    return planted


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners and modes")
def test_a_pickle_planted_in_a_folder_others_can_write_is_never_loaded(tmp_path):
    shared = tmp_path / "open"
    marker = tmp_path / "ran"
    _plant(shared, marker)
    shared.chmod(0o777)
    res = _diagnose(_env(tmp_path, SGLOG_CACHE_DIR=str(shared)))
    assert res.returncode in (0, 1), res.stderr
    assert not marker.exists()


@pytest.mark.skipif(not hasattr(os, "geteuid"), reason="POSIX owners and modes")
def test_a_cache_file_others_can_write_is_removed_unread(tmp_path):
    folder = tmp_path / "private"
    folder.mkdir(mode=0o700)
    marker = tmp_path / "ran"
    planted = _plant(folder, marker)
    planted.chmod(0o666)
    res = _diagnose(_env(tmp_path, SGLOG_CACHE_DIR=str(folder)))
    assert res.returncode in (0, 1), res.stderr
    assert not marker.exists()
    assert planted.exists() and not planted.stat().st_mode & 0o022  # lark wrote its own in its place


def test_private_dir_checks(tmp_path, monkeypatch):
    folder = tmp_path / "c"
    folder.mkdir(mode=0o755)
    assert cache.is_private(folder)
    folder.chmod(0o777)
    assert not cache.is_private(folder)
    link = tmp_path / "link"
    link.symlink_to(folder)
    assert not cache.is_private(link)  # a link is judged by the directory it names
    assert not cache.is_private(tmp_path / "missing")
    monkeypatch.setenv("SGLOG_CACHE_DIR", str(folder))
    cache.private_dir.cache_clear()
    try:
        assert cache.private_dir() is None and cache.file_in_cache("x") is None
        assert cache.json_cached("x.json", lambda: {"a": [1]}) == {"a": [1]}  # computed, not kept
    finally:
        cache.private_dir.cache_clear()


def test_json_cache_round_trip(tmp_path, monkeypatch):
    monkeypatch.setenv("SGLOG_CACHE_DIR", str(tmp_path / "c"))
    cache.private_dir.cache_clear()
    try:
        calls = []
        compute = lambda: calls.append(1) or {"terms": {"A": "a+"}, "n": None}  # noqa: E731
        assert cache.json_cached("t.json", compute) == cache.json_cached("t.json", compute)
        assert calls == [1]
        (tmp_path / "c" / "t.json").write_text("{not json")
        assert cache.json_cached("t.json", compute) == {"terms": {"A": "a+"}, "n": None}
    finally:
        cache.private_dir.cache_clear()
