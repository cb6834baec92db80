"""Start SGLang (or a benchmark), stream its output to a log file, and always stop what was started.

The only code in sglog that starts processes.  Every process is started from
an argv list (never a shell) in a new session, so it leads its own process
group; stopping sends SIGINT, then SIGTERM, then SIGKILL to the whole group,
and to every process below it that left the group (``Descendants``: a daemon
that called setsid, recorded while it was alive, or holding the server's
output), and waits until none of them is left.  ``Server`` is a context
manager: leaving the block stops them, whether the block ended normally, by an
exception (sglog's own errors), by Ctrl-C, or by SIGTERM to sglog
(``signals_raise``); a watchdog process stops them when sglog is killed.

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
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType
from typing import IO, Any

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


def _pdeathsig() -> Callable[[], None] | None:
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
# with sglog) that holds the read end of a pipe only sglog writes to, and on which sglog writes
# each descendant it records ("pid start-time" lines, see Descendants); when sglog ends, even by
# SIGKILL, the pipe closes, and what is still alive of the group, of those descendants and of the
# holders of the server's output pipe then gets SIGTERM, then SIGKILL
_WATCHDOG = """
import os, signal, sys, time
pgid, grace, pipe = int(sys.argv[1]), float(sys.argv[2]), sys.argv[3]
known, rest = {}, b""
try:
    while True:
        data = sys.stdin.buffer.read1(4096)
        if not data:
            break
        *lines, rest = (rest + data).split(b"\\n")
        for line in lines:
            pid, start = line.split()
            known[int(pid)] = int(start)
except BaseException:
    pass
def stat(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return rest[0], int(rest[19])
    except (OSError, IndexError, ValueError):
        return None
def holders():
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit() or int(name) == os.getpid():
            continue
        try:
            fds = os.listdir("/proc/%s/fd" % name)
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink("/proc/%s/fd/%s" % (name, fd)) == pipe:
                    s = stat(int(name))
                    if s:
                        out[int(name)] = s[1]
                    break
            except OSError:
                pass
    return out
def alive():
    found = False
    try:
        os.killpg(pgid, 0)
        found = True
    except OSError:
        pass
    for pid, start in list(known.items()):
        s = stat(pid)
        if s is None or s[1] != start or s[0] == b"Z":
            del known[pid]
        else:
            found = True
    return found
known.update(holders())
for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
    if not alive():
        break
    for kill, target in [(os.killpg, pgid)] + [(os.kill, pid) for pid in known]:
        try:
            kill(target, sig)
        except OSError:
            pass
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


def _stat(pid: int) -> tuple[int, str, int] | None:
    """(parent pid, state, start time in clock ticks) of a process, from /proc; None when gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            rest = f.read().rsplit(b")", 1)[1].split()
        return int(rest[1]), rest[0].decode("ascii", "replace"), int(rest[19])
    except (OSError, IndexError, ValueError):
        return None


def _processes() -> dict[int, tuple[int, str, int]]:
    """Every process this user can see: pid -> ``_stat``."""
    try:
        names = os.listdir("/proc")
    except OSError:  # pragma: no cover - non-Linux
        return {}
    out = {}
    for name in names:
        if name.isdigit() and (st := _stat(int(name))) is not None:
            out[int(name)] = st
    return out


def pipe_holders(inode: int) -> set[int]:
    """The processes (other than sglog) with a descriptor on the pipe ``inode``: whoever still
    writes to the server's output, wherever it went."""
    target = f"pipe:[{inode}]"
    out: set[int] = set()
    try:
        names = os.listdir("/proc")
    except OSError:  # pragma: no cover - non-Linux
        return out
    me = os.getpid()
    for name in names:
        if not name.isdigit() or int(name) == me:
            continue
        try:
            fds = os.listdir(f"/proc/{name}/fd")
        except OSError:
            continue
        for fd in fds:
            try:
                if os.readlink(f"/proc/{name}/fd/{fd}") == target:
                    out.add(int(name))
                    break
            except OSError:
                continue
    return out


class Descendants:
    """The processes below a server's leader, recorded while they are alive (each by pid and
    start time, so that a pid used again is never signalled): followed by parent links in /proc,
    from the leader and from each one recorded, so a process that left the group or the session
    (setsid) stays known, and so do its children once its parent has died.  ``watch`` scans in a
    thread, often at first (daemons are started early), then every ``SLOWEST`` s; ``stop`` scans
    again and adds the holders of the server's output pipe (a daemon that forked and left between
    two scans).  ``on_new(pid, start)`` is told of each one recorded (the watchdog)."""

    SLOWEST = 1.0

    def __init__(self, leader: int, on_new: Callable[[int, int], None] | None = None) -> None:
        self.leader = leader
        self.on_new = on_new
        st = _stat(leader)
        self._leader_start = st[2] if st else None
        self.known: dict[int, int] = {}  # pid -> start time (the leader not included)
        self._lock = threading.Lock()
        self._done = threading.Event()
        self._thread: threading.Thread | None = None

    def scan(self, extra: set[int] | frozenset[int] = frozenset()) -> None:
        """Record the processes below the leader and below the ones recorded (and ``extra``)."""
        procs = _processes()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _state, _start) in procs.items():
            children.setdefault(ppid, []).append(pid)
        with self._lock:
            roots = [p for p, t in self.known.items() if p in procs and procs[p][2] == t]
            lead = procs.get(self.leader)
            if lead is not None and lead[2] == self._leader_start:
                roots.append(self.leader)
            new = []
            for pid in extra:
                if pid in procs and pid != self.leader and self.known.get(pid) != procs[pid][2]:
                    self.known[pid] = procs[pid][2]
                    new.append(pid)
                    roots.append(pid)
            seen = set(roots)
            while roots:
                for c in children.get(roots.pop(), ()):
                    if c in seen:
                        continue
                    seen.add(c)
                    roots.append(c)
                    if self.known.get(c) != procs[c][2]:
                        self.known[c] = procs[c][2]
                        new.append(c)
        if self.on_new is not None:
            for pid in new:
                self.on_new(pid, procs[pid][2])

    def alive(self) -> list[int]:
        """The recorded processes still running (not zombies)."""
        with self._lock:
            items = list(self.known.items())
        out = []
        for pid, start in items:
            st = _stat(pid)
            if st is not None and st[2] == start and st[1] != "Z":
                out.append(pid)
        return out

    def signal(self, sig: signal.Signals) -> None:
        for pid in self.alive():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, sig)

    def watch(self) -> None:
        def loop() -> None:
            wait = 0.05
            while not self._done.wait(wait):
                with contextlib.suppress(Exception):
                    self.scan()
                wait = min(self.SLOWEST, wait * 1.5)

        self._thread = threading.Thread(target=loop, name="sglog-repro-descendants", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._done.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


class Server:
    """One process group started from ``argv``, its output streamed into ``log_path``.

    ``lines()`` returns the text lines read since the last call (the file gets
    the exact bytes).  ``stop()`` ends the whole group; it is also called on
    leaving the ``with`` block.
    """

    def __init__(self, argv: list[str], log_path: Path | str, env: dict[str, str] | None = None, grace: float = 10.0) -> None:
        if not argv or not all(isinstance(w, str) for w in argv):
            raise UsageError("empty launcher command")
        self.argv = list(argv)
        self.log_path = Path(log_path)
        self.env = env
        self.grace = check_seconds("--stop-grace", grace)
        self.watchdog: subprocess.Popen[bytes] | None = None
        self._watchdog_lock = threading.Lock()
        self.descendants: Descendants | None = None
        self._pipe = ""  # the server's output pipe, as /proc shows a descriptor on it
        self.proc: subprocess.Popen[bytes] | None = None
        self.pgid: int | None = None
        self.signals_sent: list[str] = []
        self.lines_read = 0
        self.started_at: float | None = None
        self._q: queue.Queue[str] = queue.Queue()
        self._reader: threading.Thread | None = None
        self._eof = threading.Event()
        self._stopped = False

    # -- lifecycle
    def start(self) -> Server:
        log = open(self.log_path, "ab", buffering=0)
        try:
            proc = subprocess.Popen(
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
        self.proc = proc
        self.pgid = proc.pid  # start_new_session: the child leads its own group
        self.started_at = time.monotonic()
        out = proc.stdout
        assert out is not None  # (stdout=PIPE)
        try:
            with contextlib.suppress(OSError, ValueError):
                self._pipe = f"pipe:[{os.fstat(out.fileno()).st_ino}]"
            self._start_watchdog()
            self.descendants = Descendants(self.pgid, on_new=self._tell_watchdog)
            self.descendants.watch()
            self._reader = threading.Thread(target=self._pump, args=(out, log), name="sglog-repro-reader", daemon=True)
            self._reader.start()
        except BaseException:  # Ctrl-C right after the start: do not leave it running
            self.stop()
            raise
        return self

    def _start_watchdog(self) -> None:
        import sys

        try:
            self.watchdog = subprocess.Popen(
                [sys.executable, "-I", "-S", "-c", _WATCHDOG, str(self.pgid), repr(self.grace), self._pipe],
                stdin=subprocess.PIPE,
                bufsize=0,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
                close_fds=True,
            )
        except OSError:  # (no watchdog: PR_SET_PDEATHSIG still ends the leader)
            self.watchdog = None

    def _tell_watchdog(self, pid: int, start: int) -> None:
        with self._watchdog_lock:
            if self.watchdog is not None and self.watchdog.stdin is not None:
                with contextlib.suppress(OSError, ValueError):
                    self.watchdog.stdin.write(f"{pid} {start}\n".encode())

    def _stop_watchdog(self) -> None:
        with self._watchdog_lock:
            w, self.watchdog = self.watchdog, None
        if w is None:
            return
        with contextlib.suppress(OSError):
            if w.stdin is not None:
                w.stdin.close()  # (the group is gone: it finds nothing to stop and exits)
        with contextlib.suppress(Exception):
            w.wait(timeout=2)

    def __enter__(self) -> Server:
        return self.start() if self.proc is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _pump(self, stream: IO[bytes], log: IO[bytes]) -> None:
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
        """SIGINT, SIGTERM, SIGKILL to the whole group and to the descendants that left it,
        waiting ``grace`` s after each; idempotent."""
        proc = self.proc
        if proc is None or self._stopped:
            return self.signals_sent
        grace = self.grace if grace is None else grace
        try:
            if self.descendants is not None:  # (the last ones: also whoever holds the output pipe)
                with contextlib.suppress(Exception):
                    self.descendants.scan(pipe_holders(int(self._pipe[6:-1])) if self._pipe else set())
            for sig in STOP_SIGNALS:
                if not self._anything_alive():
                    break
                self._signal(sig)
                self._wait_gone(grace if sig != signal.SIGKILL else max(grace, 5.0))
        except BaseException:
            # interrupted while waiting (a second Ctrl-C, SIGTERM): no more patience
            if self._anything_alive():
                self._signal(signal.SIGKILL)
                self._wait_gone(5.0)
            raise
        finally:
            if self.descendants is not None:
                self.descendants.stop()
            with contextlib.suppress(Exception):
                proc.wait(timeout=1)
            if self._reader is not None:
                self._reader.join(timeout=2)
            # (a process that could not be stopped -- another user's -- may still hold the pipe
            # open: the reader then stays blocked in its read, and closing the stream would wait
            # for it forever (Ctrl-C hung); the reader is a daemon thread and ends with sglog)
            if (self._reader is None or not self._reader.is_alive()) and proc.stdout is not None:
                with contextlib.suppress(OSError):
                    proc.stdout.close()
            self._stop_watchdog()
            self._stopped = True
        return self.signals_sent

    def _anything_alive(self) -> bool:
        return self.alive() or bool(self.descendants is not None and self.descendants.alive())

    def _signal(self, sig: signal.Signals) -> None:
        if self.pgid is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, sig)
        if self.descendants is not None:
            self.descendants.signal(sig)
        self.signals_sent.append(sig.name)

    def _wait_gone(self, seconds: float) -> None:
        proc, pgid = self.proc, self.pgid
        if proc is None or pgid is None:  # (never started)
            return
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with contextlib.suppress(subprocess.TimeoutExpired):
                proc.wait(timeout=0.05)
            if proc.poll() is not None and not group_alive(pgid) and not (self.descendants is not None and self.descendants.alive()):
                return
            time.sleep(0.02)

    def wait_exit(self, seconds: float) -> int | None:
        """Wait up to ``seconds`` for the leader to exit; its return code or None (also when never started)."""
        if self.proc is None:
            return None
        try:
            return self.proc.wait(timeout=max(seconds, 0))
        except subprocess.TimeoutExpired:
            return None


@contextlib.contextmanager
def signals_raise() -> Iterator[None]:
    """While inside: SIGTERM/SIGHUP/SIGQUIT to sglog raise ``Terminated`` (so ``with Server`` blocks clean up)."""
    if threading.current_thread() is not threading.main_thread():  # pragma: no cover
        yield
        return

    def handler(signum: int, frame: FrameType | None) -> None:
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
            status: int = r.status  # (urlopen's result is untyped)
            return status == 200
    except (urllib.error.URLError, OSError, ValueError):
        return False


SMOKE_PROMPTS = (
    "The capital of France is",
    "Write a haiku about GPUs.",
    "List three prime numbers:",
)


def smoke(port: int, requests: int = 3, max_new_tokens: int = 128, timeout: float = 300.0) -> dict[str, Any]:
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


def bench_serving(launcher: list[str], port: int, log_path: Path, model: str | None = None, timeout: float = 1800.0, grace: float = 10.0, num_prompts: int = 32) -> dict[str, Any]:
    """A short ``bench_serving`` run against the loopback port; its output goes to ``log_path``."""
    argv = [
        *launcher,
        "--backend",
        "sglang",
        "--host",
        LOOPBACK,
        "--port",
        str(int(port)),
        "--dataset-name",
        "random",
        "--num-prompts",
        str(num_prompts),
        "--random-input-len",
        "512",
        "--random-output-len",
        "256",
    ]
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
