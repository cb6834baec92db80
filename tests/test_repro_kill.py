"""repro leaves no process behind: every signal sglog can catch, SIGKILL (the watchdog), a server's
child that leaves its group and session (setsid: holding stdout, as a double-forked daemon, with its
output closed), and duration options that could never end (#28).

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

# a launcher that forks a child that calls os.setsid() (it leaves sglog's group and session)
# and then becomes the stand-in; the child, by ESCAPE_MODE:
#   stays: keeps the server's stdout open and sleeps;
#   daemon: forks and exits at once (a double fork: its child, holding stdout, has no parent of
#     sglog's any more, only the output pipe tells it);
#   quiet: forks, its child closes stdin, stdout and stderr (only the parent links recorded while
#     they lasted tell it), and exits a second later
# the last process writes its pid to $ESCAPED_PID
ESCAPING_WRAPPER = """
import os, sys, time
mode = os.environ["ESCAPE_MODE"]
if os.fork() == 0:
    os.setsid()
    if mode in ("daemon", "quiet") and os.fork():
        if mode == "quiet":
            time.sleep(1.0)
        os._exit(0)
    if mode == "quiet":
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
    with open(os.environ["ESCAPED_PID"] + ".part", "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.environ["ESCAPED_PID"] + ".part", os.environ["ESCAPED_PID"])
    time.sleep(120)
    os._exit(0)
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


@pytest.mark.slow
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGQUIT, signal.SIGHUP], ids=lambda s: s.name)
def test_every_catchable_signal_stops_the_server(tmp_path, sig):
    p = start(tmp_path)
    pids = wait_started(p, tmp_path)
    p.send_signal(sig)
    _, err = p.communicate(timeout=30)
    assert p.returncode == 128 + sig, err
    assert "Traceback" not in err and "stopped the server" in err.strip().splitlines()[-1]
    assert not wait_gone(pids, 5), "a child of the server survived"


@pytest.mark.slow
def test_sigkill_of_sglog_still_stops_the_server(tmp_path):
    """SIGKILL cannot be caught: the watchdog process (and PR_SET_PDEATHSIG for the leader) end the group."""
    p = start(tmp_path)
    pids = wait_started(p, tmp_path)
    p.kill()
    p.communicate(timeout=10)
    assert not wait_gone(pids, 10), "the server outlived a SIGKILL of sglog"


def start_escaping(tmp: Path, mode: str) -> tuple[subprocess.Popen, list[int], int]:
    """sglog running the stand-in behind ESCAPING_WRAPPER: (sglog, the stand-in's pids, the escaped pid)."""
    wrapper = tmp / "wrap.py"
    wrapper.write_text(ESCAPING_WRAPPER)
    escaped = tmp / "escaped.pid"
    launcher = f"{shlex.quote(sys.executable)} {shlex.quote(str(wrapper))} {shlex.quote(str(STANDIN / 'sglang_standin.py'))}"
    p = start(tmp, launcher, {"ESCAPED_PID": str(escaped), "ESCAPE_MODE": mode})
    pids = wait_started(p, tmp)
    end = time.monotonic() + 20
    while not escaped.exists() and time.monotonic() < end:
        time.sleep(0.05)
    other = int(escaped.read_text())
    assert alive(other)
    assert os.getsid(other) not in (os.getsid(p.pid), os.getsid(pids[0]))  # (it left sglog's session and the server's)
    if mode == "quiet":
        time.sleep(1.5)  # (its parent gone: only what sglog recorded while it lived tells it)
    return p, pids, other


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stays", "daemon", "quiet"])
@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM, signal.SIGQUIT], ids=lambda s: s.name)
def test_a_child_that_calls_setsid_is_stopped_too_and_nothing_hangs(tmp_path, sig, mode):
    """A server's child that calls setsid leaves the process group that sglog stops (and, holding
    stdout, it made Ctrl-C hang): it is a recorded descendant, or holds the output pipe."""
    p, pids, other = start_escaping(tmp_path, mode)
    try:
        t0 = time.monotonic()
        p.send_signal(sig)
        _, err = p.communicate(timeout=30)
        assert time.monotonic() - t0 < 20, "the stop waited for a process outside the group"
        assert p.returncode == 128 + sig, err
        assert "Traceback" not in err
        assert not wait_gone(pids + [other], 5), "a process that left the group survived"
    finally:
        if alive(other):  # (do not leave it behind when the test fails)
            os.kill(other, signal.SIGKILL)


@pytest.mark.slow
@pytest.mark.parametrize("mode", ["stays", "daemon", "quiet"])
def test_sigkill_of_sglog_stops_a_child_that_called_setsid(tmp_path, mode):
    """The watchdog knows the descendants sglog recorded, and finds the holders of the output pipe."""
    p, pids, other = start_escaping(tmp_path, mode)
    try:
        p.kill()
        p.communicate(timeout=10)
        assert not wait_gone(pids + [other], 15), "a process that left the group outlived a SIGKILL of sglog"
    finally:
        if alive(other):
            os.kill(other, signal.SIGKILL)


def test_descendants_are_known_by_pid_and_start_time(tmp_path):
    """A recorded pid that a new process took since is not signalled (its start time differs)."""
    from sglog.repro import launch

    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        d = launch.Descendants(os.getpid())
        d.scan()
        assert child.pid in d.known and child.pid in d.alive()
        d.known[child.pid] += 1  # (as if the pid now belonged to a later process)
        d.signal(signal.SIGKILL)
        assert child.poll() is None and d.alive() == [p for p in d.alive() if p != child.pid]
    finally:
        child.kill()
        child.wait()


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
