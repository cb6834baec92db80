"""Start SGLang (or a benchmark), stream its output to a log file, and always stop what was started.

The only code in sglog that starts processes.  Every process is started from
an argv list (never a shell) in a new session, so it leads its own process
group; stopping sends SIGINT, then SIGTERM, then SIGKILL to the whole group
and waits until no process of the group is left.  ``Server`` is a context
manager: leaving the block stops the group, whether the block ended normally,
by an exception (sglog's own errors), by Ctrl-C, or by SIGTERM to sglog
(``signals_raise``).

HTTP requests go to the loopback interface only.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import re
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from sglog.errors import SglogError, UsageError

LOOPBACK = "127.0.0.1"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGKILL)


class LaunchError(SglogError):
    """The launcher could not be started (not found, not executable...)."""


class Terminated(BaseException):
    """sglog itself got SIGTERM/SIGHUP/SIGQUIT while something it started was running."""


# the signals sglog can catch and turns into Terminated while a server runs (SIGINT is Ctrl-C:
# KeyboardInterrupt); SIGKILL cannot be caught: the watchdog (below) and PR_SET_PDEATHSIG do it
CAUGHT_SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)


def check_seconds(option: str, value: float, minimum: float = 0.0) -> float:
    """A duration option: a finite number of seconds at least ``minimum``, else a UsageError
    (``--timeout nan`` and ``--stop-grace inf`` were accepted and never ended)."""
    import math

    if not isinstance(value, (int, float)) or not math.isfinite(value) or value < minimum:
        raise UsageError(f"{option} {value!r}: give a finite number of seconds, at least {minimum:g}")
    return float(value)


def _pdeathsig():
    """A function for the child between fork and exec: the kernel sends it SIGKILL when sglog's
    process ends, however it ends (Linux ``prctl(PR_SET_PDEATHSIG)``); None elsewhere.  (libc is
    loaded here, in the parent: the child only makes the call.)"""
    import sys

    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    PR_SET_PDEATHSIG = 1

    def set_it() -> None:
        prctl(PR_SET_PDEATHSIG, int(signal.SIGKILL), 0, 0, 0)

    return set_it


# the watchdog: a small process of its own (its own session: not stopped with the group, not
# with sglog) that holds the read end of a pipe only sglog writes to; when sglog ends, even by
# SIGKILL, the pipe closes, and a group still alive then gets SIGTERM, then SIGKILL
_WATCHDOG = """
import os, signal, sys, time
pgid, grace = int(sys.argv[1]), float(sys.argv[2])
try:
    while sys.stdin.buffer.read(4096):
        pass
except BaseException:
    pass
def alive():
    try:
        os.killpg(pgid, 0)
        return True
    except OSError:
        return False
for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
    if not alive():
        break
    try:
        os.killpg(pgid, sig)
    except OSError:
        break
    end = time.monotonic() + wait
    while alive() and time.monotonic() < end:
        time.sleep(0.05)
"""


# ------------------------------------------------------------------ log files


def sanitize(name: str, limit: int = 80) -> str:
    """A file-name-safe version of ``name`` (letters, digits, ``._-``; no leading dot).

    >>> sanitize("../../etc/passwd; rm -rf $(x).log")
    'etc_passwd_rm_-rf_x_.log'
    """
    s = re.sub(r"[^A-Za-z0-9._-]+", "_", name)
    s = re.sub(r"\.{2,}", ".", s).strip("._-")
    return s[:limit] or "run"


def create_log(directory: Path | str, name: str) -> Path:
    """Create ``<directory>/<name>-<n>.log`` (first free n), exclusively, never outside ``directory``."""
    base = Path(directory)
    base.mkdir(parents=True, exist_ok=True)
    root = base.resolve()
    stem = sanitize(name)
    for n in range(1, 10000):
        path = base / f"{stem}-{n}.log"
        if path.resolve().parent != root:  # pragma: no cover - sanitize() keeps names flat
            raise UsageError(f"refusing to write outside {base}")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            continue
        os.close(fd)
        return path
    raise UsageError(f"{base}: no free log name for {stem}")


def claim_log(path: Path | str) -> Path:
    """Create the file the user named with --log-out; an existing file is not overwritten."""
    p = Path(path)
    if p.exists() and (not p.is_file() or p.stat().st_size > 0):
        raise UsageError(f"--log-out {p}: exists; choose a new file")
    p.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd = os.open(p, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o644)
    except OSError as e:
        raise UsageError(f"--log-out {p}: {e.strerror or e}") from None
    os.close(fd)
    return p


# ------------------------------------------------------------------ process groups


def group_alive(pgid: int) -> bool:
    """True while a (non-zombie) process of the group exists."""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    proc = Path("/proc")
    if not proc.is_dir():  # pragma: no cover - non-Linux
        return True
    for d in proc.iterdir():
        if not d.name.isdigit():
            continue
        try:
            stat = (d / "stat").read_text()
        except OSError:
            continue
        rest = stat.rsplit(")", 1)[-1].split()
        if len(rest) > 2 and rest[2] == str(pgid) and rest[0] != "Z":
            return True
    return False


class Server:
    """One process group started from ``argv``, its output streamed into ``log_path``.

    ``lines()`` returns the text lines read since the last call (the file gets
    the exact bytes).  ``stop()`` ends the whole group; it is also called on
    leaving the ``with`` block.
    """

    def __init__(self, argv: list[str], log_path: Path | str, env: dict[str, str] | None = None, grace: float = 10.0):
        if not argv or not all(isinstance(w, str) for w in argv):
            raise UsageError("empty launcher command")
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = env
        self.grace = check_seconds("--stop-grace", grace)
        self.watchdog: subprocess.Popen | None = None
        self.proc: subprocess.Popen | None = None
        self.pgid: int | None = None
        self.signals_sent: list[str] = []
        self.lines_read = 0
        self.started_at: float | None = None
        self._q: queue.Queue = queue.Queue()
        self._reader: threading.Thread | None = None
        self._eof = threading.Event()
        self._stopped = False

    # -- lifecycle
    def start(self) -> "Server":
        log = open(self.log_path, "ab", buffering=0)
        try:
            self.proc = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=self.env,
                start_new_session=True,
                close_fds=True,
                preexec_fn=_pdeathsig(),
            )
        except FileNotFoundError:
            log.close()
            raise LaunchError(f"launcher not found: {self.argv[0]} (set --launcher or SGLOG_LAUNCHER)") from None
        except PermissionError:
            log.close()
            raise LaunchError(f"launcher not executable: {self.argv[0]}") from None
        except OSError as e:
            log.close()
            raise LaunchError(f"cannot start {self.argv[0]}: {e.strerror or e}") from None
        self.pgid = self.proc.pid  # start_new_session: the child leads its own group
        self.started_at = time.monotonic()
        try:
            self._start_watchdog()
            self._reader = threading.Thread(target=self._pump, args=(self.proc.stdout, log), name="sglog-repro-reader", daemon=True)
            self._reader.start()
        except BaseException:  # Ctrl-C right after the start: do not leave it running
            self.stop()
            raise
        return self

    def _start_watchdog(self) -> None:
        import sys

        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(self.pgid), repr(self.grace)],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:  # (no watchdog: PR_SET_PDEATHSIG still ends the leader)
            self.watchdog = None

    def _stop_watchdog(self) -> None:
        w, self.watchdog = self.watchdog, None
        if w is None:
            return
        with contextlib.suppress(OSError):
            w.stdin.close()  # (the group is gone: it finds nothing to stop and exits)
        with contextlib.suppress(Exception):
            w.wait(timeout=2)

    def __enter__(self) -> "Server":
        return self.start() if self.proc is None else self

    def __exit__(self, *exc) -> None:
        self.stop()

    def _pump(self, stream, log) -> None:
        try:
            for raw in iter(stream.readline, b""):
                log.write(raw)
                self._q.put(raw.decode("utf-8", errors="replace").rstrip("\r\n"))
        except (OSError, ValueError):  # pragma: no cover - pipe closed under us
            pass
        finally:
            with contextlib.suppress(OSError):
                log.close()
            self._eof.set()

    # -- reading
    def lines(self, wait: float = 0.0) -> list[str]:
        """Lines read since the last call; waits up to ``wait`` s for the first one."""
        out: list[str] = []
        try:
            out.append(self._q.get(timeout=wait) if wait > 0 else self._q.get_nowait())
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._q.get_nowait())
            except queue.Empty:
                break
        self.lines_read += len(out)
        return out

    def poll(self) -> int | None:
        return self.proc.poll() if self.proc else None

    @property
    def eof(self) -> bool:
        return self._eof.is_set()

    def alive(self) -> bool:
        if self.proc is None:
            return False
        return self.proc.poll() is None or (self.pgid is not None and group_alive(self.pgid))

    # -- stopping
    def stop(self, grace: float | None = None) -> list[str]:
        """SIGINT, SIGTERM, SIGKILL to the whole group, waiting ``grace`` s after each; idempotent."""
        if self.proc is None or self._stopped:
            return self.signals_sent
        grace = self.grace if grace is None else grace
        try:
            for sig in STOP_SIGNALS:
                if not self.alive():
                    break
                self._signal(sig)
                self._wait_gone(grace if sig != signal.SIGKILL else max(grace, 5.0))
        except BaseException:
            # interrupted while waiting (a second Ctrl-C, SIGTERM): no more patience
            if self.alive():
                self._signal(signal.SIGKILL)
                self._wait_gone(5.0)
            raise
        finally:
            with contextlib.suppress(Exception):
                self.proc.wait(timeout=1)
            if self._reader is not None:
                self._reader.join(timeout=2)
            # (a process that left the group, setsid, may hold the pipe open: the reader then
            # stays blocked in its read, and closing the stream would wait for it forever --
            # Ctrl-C hung; the reader is a daemon thread and ends with sglog)
            if self._reader is None or not self._reader.is_alive():
                with contextlib.suppress(OSError):
                    self.proc.stdout.close()
            self._stop_watchdog()
            self._stopped = True
        return self.signals_sent

    def _signal(self, sig: signal.Signals) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.pgid, sig)
        self.signals_sent.append(sig.name)

    def _wait_gone(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self.proc.wait(timeout=0.05)
            if self.proc.poll() is not None and not group_alive(self.pgid):
                return
            time.sleep(0.02)

    def wait_exit(self, seconds: float) -> int | None:
        """Wait up to ``seconds`` for the leader to exit; its return code or None."""
        try:
            return self.proc.wait(timeout=max(seconds, 0))
        except subprocess.TimeoutExpired:
            return None


@contextlib.contextmanager
def signals_raise():
    """While inside: SIGTERM/SIGHUP/SIGQUIT to sglog raise ``Terminated`` (so ``with Server`` blocks clean up)."""
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        yield
        return

    def handler(signum, frame):
        raise Terminated(signum)

    old = {s: signal.signal(s, handler) for s in CAUGHT_SIGNALS}
    try:
        yield
    finally:
        for s, h in old.items():
            signal.signal(s, h)


# ------------------------------------------------------------------ HTTP (loopback only)


def port_in_use(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(0.3)
        return s.connect_ex((LOOPBACK, port)) == 0


def health(port: int, timeout: float = 0.5) -> bool:
    try:
        with urllib.request.urlopen(f"http://{LOOPBACK}:{int(port)}/health", timeout=timeout) as r:
            return r.status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


SMOKE_PROMPTS = (
    "The capital of France is",
    "Write a haiku about GPUs.",
    "List three prime numbers:",
)


def smoke(port: int, requests: int = 3, max_new_tokens: int = 128, timeout: float = 300.0) -> dict:
    """A few short /generate requests; {"ok", "requests", "tokens", "seconds", "error"}."""
    done, tokens = 0, 0
    t0 = time.monotonic()
    for i in range(requests):
        body = json.dumps({"text": SMOKE_PROMPTS[i % len(SMOKE_PROMPTS)], "sampling_params": {"max_new_tokens": max_new_tokens, "temperature": 0}}).encode()
        req = urllib.request.Request(f"http://{LOOPBACK}:{int(port)}/generate", data=body, headers={"Content-Type": "application/json"}, method="POST")
        try:
            with urllib.request.urlopen(req, timeout=timeout) as r:
                doc = json.loads(r.read() or b"{}")
        except urllib.error.HTTPError as e:
            return {"ok": False, "requests": done, "tokens": tokens, "seconds": round(time.monotonic() - t0, 2), "error": f"HTTP {e.code} from /generate"}
        except (urllib.error.URLError, OSError, ValueError) as e:
            reason = getattr(e, "reason", None) or e
            return {"ok": False, "requests": done, "tokens": tokens, "seconds": round(time.monotonic() - t0, 2), "error": f"/generate failed: {reason}"}
        done += 1
        meta = doc.get("meta_info") if isinstance(doc, dict) else None
        if isinstance(meta, dict) and isinstance(meta.get("completion_tokens"), int):
            tokens += meta["completion_tokens"]
    return {"ok": True, "requests": done, "tokens": tokens, "seconds": round(time.monotonic() - t0, 2), "error": None}


def bench_launcher(server_launcher: tuple[str, ...], env_value: str | None = None) -> list[str]:
    """How to start ``sglang.bench_serving``: $SGLOG_BENCH_LAUNCHER, else the server's interpreter."""
    import shlex

    if env_value and env_value.strip():
        return shlex.split(env_value)
    if len(server_launcher) >= 3 and server_launcher[1:3] == ("-m", "sglang.launch_server"):
        return [server_launcher[0], "-m", "sglang.bench_serving"]
    return ["python", "-m", "sglang.bench_serving"]


def bench_serving(launcher: list[str], port: int, log_path: Path, model: str | None = None, timeout: float = 1800.0, grace: float = 10.0, num_prompts: int = 32) -> dict:
    """A short ``bench_serving`` run against the loopback port; its output goes to ``log_path``."""
    argv = [*launcher, "--backend", "sglang", "--host", LOOPBACK, "--port", str(int(port)), "--dataset-name", "random", "--num-prompts", str(num_prompts), "--random-input-len", "512", "--random-output-len", "256"]
    if model:
        argv += ["--model", model]
    t0 = time.monotonic()
    with Server(argv, log_path, grace=grace) as bench:
        rc = bench.wait_exit(timeout)
        timed_out = rc is None
    rc = bench.proc.returncode if bench.proc else None
    ok = not timed_out and rc == 0
    err = None if ok else (f"bench_serving did not finish within {timeout:.0f} s" if timed_out else f"bench_serving exited with {rc}")
    return {"ok": ok, "argv": argv, "returncode": rc, "seconds": round(time.monotonic() - t0, 2), "log": str(log_path), "error": err}
