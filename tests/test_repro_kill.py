"""repro leaves no process behind: every signal sglog can catch, SIGKILL (the watchdog), a server
that leaves its group (setsid) holding stdout, and duration options that could never end (#28).

Uses the stand-in server of tests/standin/ (``SGLOG_STANDIN_MODE=hang``: it never becomes ready)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from test_repro import alive, free_port  # (one definition: a zombie not yet reaped counts as gone)

ROOT = Path(__file__).resolve().parent.parent
STANDIN = ROOT / "tests" / "standin"
OOM = STANDIN / "logs" / "eagle3-oom.log"
LAUNCHER = f"{shlex.quote(sys.executable)} {shlex.quote(str(STANDIN / 'sglang_standin.py'))}"

# a launcher that first starts a process of its own session (setsid) holding the server's stdout
# open, writes its pid, then becomes the stand-in
SETSID_WRAPPER = """
import os, subprocess, sys
p = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
open(os.environ["ESCAPED_PID"], "w").write(str(p.pid))
os.execv(sys.executable, [sys.executable] + sys.argv[1:])
"""


def wait_gone(pids: list[int], seconds: float) -> list[int]:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        left = [p for p in pids if alive(p)]
        if not left:
            return []
        time.sleep(0.1)
    return [p for p in pids if alive(p)]


def start(tmp: Path, launcher: str = LAUNCHER, extra_env: dict | None = None) -> subprocess.Popen:
    env = dict(os.environ, SGLOG_STANDIN_MODE="hang", SGLOG_STANDIN_PIDS=str(tmp / "pids.json"), SGLOG_STANDIN_SECONDS="0.3", NO_COLOR="1")
    env["SGLOG_STANDIN_MAP"] = json.dumps([{"log": str(OOM), "exit": 1}])
    env.update(extra_env or {})
    argv = [sys.executable, "-m", "sglog", "repro", str(OOM), "--execute", "--launcher", launcher, "--set", f"port={free_port()}", "--stop-grace", "1"]
    return subprocess.Popen(argv, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env, text=True)


def wait_started(p: subprocess.Popen, tmp: Path) -> list[int]:
    end = time.monotonic() + 60
    while time.monotonic() < end:
        if (tmp / "pids.json").exists():
            try:
                pids = json.loads((tmp / "pids.json").read_text())
                if len(pids) == 2:
                    time.sleep(0.5)  # (the stand-in's replay under way; sglog watching)
                    return pids
            except ValueError:
                pass
        assert p.poll() is None, p.communicate()
        time.sleep(0.05)
    raise AssertionError("the stand-in did not start")


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP], ids=lambda s: s.name)
def test_every_catchable_signal_stops_the_server(tmp_path, sig):
    p = start(tmp_path)
    pids = wait_started(p, tmp_path)
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + sig, err
    assert "Traceback" not in err and "stopped the server" in err.strip().splitlines()[-1]
    assert not wait_gone(pids, 5), "a child of the server survived"


def test_sigkill_of_sglog_still_stops_the_server(tmp_path):
    """SIGKILL cannot be caught: the watchdog process (and PR_SET_PDEATHSIG for the leader) end the group."""
    p = start(tmp_path)
    pids = wait_started(p, tmp_path)
    p.kill()
    p.communicate(timeout=10)
    assert not wait_gone(pids, 10), "the server outlived a SIGKILL of sglog"


def test_a_server_that_leaves_its_group_does_not_hang_ctrl_c(tmp_path):
    wrapper = tmp_path / "wrap.py"
    wrapper.write_text(SETSID_WRAPPER)
    escaped = tmp_path / "escaped.pid"
    launcher = f"{shlex.quote(sys.executable)} {shlex.quote(str(wrapper))} {shlex.quote(str(STANDIN / 'sglang_standin.py'))}"
    p = start(tmp_path, launcher, {"ESCAPED_PID": str(escaped)})
    pids = wait_started(p, tmp_path)
    other = int(escaped.read_text())
    try:
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=30)
        assert time.monotonic() - t0 < 20, "Ctrl-C waited for a process outside the group"
        assert p.returncode == 130, err
        assert not wait_gone(pids, 5)
    finally:
        if alive(other):  # (it left the group on purpose: this test stops it)
            os.kill(other, signal.SIGKILL)


@pytest.mark.parametrize("option", [("--timeout", "nan"), ("--timeout", "inf"), ("--timeout", "-5"), ("--timeout", "0.5"), ("--stop-grace", "inf"), ("--stop-grace", "nan"), ("--stop-grace", "-1")])
def test_durations_that_never_end_are_usage_errors(tmp_path, option):
    r = subprocess.run([sys.executable, "-m", "sglog", "repro", str(OOM), "--execute", "--launcher", LAUNCHER, *option], cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert r.returncode == 2, r.stderr
    assert r.stderr.startswith("sglog: error: " + option[0]) and "Traceback" not in r.stderr
    assert not (tmp_path / "pids.json").exists()


def test_server_rejects_an_endless_grace():
    from sglog.errors import UsageError
    from sglog.repro import launch

    for bad in (float("inf"), float("nan"), -1.0):
        with pytest.raises(UsageError):
            launch.Server(["true"], "/dev/null", grace=bad)
