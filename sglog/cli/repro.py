"""``sglog repro``: relaunch SGLang with the suggested fix and verify it.

Always shows the plan first (the original command rebuilt from the log, the
fixes as a diff, the final command).  Without ``--execute`` that is all (a dry
run, exit 0).  With it: start the server (sglog/repro/launch.py), follow its
startup live on stderr, optionally send it a smoke request or a short
benchmark, stop it, diagnose the new log and compare it with the original.
Exit 0 = fixed, 1 = not fixed, 2 = bad input, 70 = internal error.
"""

from __future__ import annotations

import os
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from sglog import jsonout
from sglog.cli import app
from sglog.cli._common import stderr_console, stdout_console
from sglog.cli.diagnose import FailOn

REPORT_DIR = Path("reports") / "repro"
CRASH_EXIT_GRACE = 5.0  # s to let a crashed server exit on its own before sglog stops it
HEALTH_CONFIRM = 5.0  # s of /health 200 without a ready line before ready is taken from /health


class ReproFormat(str, Enum):
    rich = "rich"
    json = "json"


class Bench(str, Enum):
    smoke = "smoke"
    serving = "serving"


@app.command(
    short_help="Relaunch SGLang with the suggested fix and verify it (dry run by default).",
    example="""
sglog repro server.log
sglog repro server.log --set mem_fraction_static=0.85
sglog repro server.log --execute --bench smoke
""",
)
def repro(
    log: Annotated[str, typer.Argument(metavar="LOG", help="The log of the run to reproduce.")],
    run: Annotated[int | None, typer.Option("--run", metavar="N", help="Run number in the log (default: the last run with a fix to try).")] = None,
    finding: Annotated[list[str] | None, typer.Option("--finding", metavar="RULE", help="Apply only this finding's fix (rule name or code; repeatable).")] = None,
    set_: Annotated[list[str] | None, typer.Option("--set", metavar="FLAG=VALUE", help="Set a flag: FLAG=VALUE (FLAG= removes it); applied after the fixes (repeatable).")] = None,
    execute: Annotated[bool, typer.Option("--execute", help="Launch it (default: only show the plan).")] = False,
    timeout: Annotated[float, typer.Option("--timeout", metavar="SECONDS", help="Seconds to wait for ready (and for --bench); at least 1.", show_default="1800")] = 1800.0,
    log_out: Annotated[Path | None, typer.Option("--log-out", metavar="FILE", help="The new log (default reports/repro/<name>-<n>.log).")] = None,
    bench: Annotated[
        Bench | None,
        typer.Option(
            "--bench",
            metavar="KIND",
            help="Once ready (smoke or serving): smoke = 3 short /generate requests; serving = a short sglang.bench_serving run (with the server's Python, or $SGLOG_BENCH_LAUNCHER).",
        ),
    ] = None,
    launcher: Annotated[str | None, typer.Option("--launcher", metavar="COMMAND", help='How to start SGLang, e.g. "python3 -m sglang.launch_server" (or env SGLOG_LAUNCHER).')] = None,
    fmt: Annotated[ReproFormat, typer.Option("--format", "-f", metavar="FORMAT", help="rich (terminal) or json.")] = ReproFormat.rich,
    stop_grace: Annotated[float, typer.Option("--stop-grace", metavar="SECONDS", help="Seconds to wait after SIGINT and after SIGTERM before the next signal.", show_default="10")] = 10.0,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="No progress display.")] = False,
    fail_on: Annotated[
        FailOn, typer.Option("--fail-on", metavar="SEVERITY", help="Exit 1 when the fix failed or a finding of the new run at or above this severity remains: error, warning or info.")
    ] = FailOn.error,
) -> None:
    """Relaunch SGLang with the suggested fix and verify it (a dry run unless --execute)."""
    import gc

    gc.enable()  # (the other commands run without the cyclic collector, see cli.run; this one may watch a server for hours)
    from sglog.repro.launch import check_seconds

    check_seconds("--timeout", timeout, 1)  # (finite: nan and inf never ended, #28)
    check_seconds("--stop-grace", stop_grace, 0)
    original, findings, plan = _make_plan(log, run, finding, set_, launcher)
    if not execute:
        _dry_run(plan, fmt)
    if fmt == ReproFormat.rich:
        _print_plan(plan)
    _check_bench_host(bench, plan.host)
    outcome = _execute(plan, log, log_out, timeout, bench, stop_grace, quiet, fmt)
    _verify(plan, original, findings, outcome, fmt, fail_on.value)


# ------------------------------------------------------------------ plan


def _make_plan(log: str, wanted: int | None, finding: list[str] | None, set_: list[str] | None, launcher: str | None):
    """The run to relaunch, its log's findings and the plan: (original, findings, plan)."""
    from sglog import relaunch as rplan

    sets = rplan.parse_sets(set_ or [])
    selected = [s for s in (finding or []) if s.strip()]
    runs = _launchable_runs(log)
    findings = _findings(runs, selected)
    original = _choose_run(runs, findings, wanted, selected)
    choice = rplan.choose_launcher(original.launch_command, launcher, os.environ.get("SGLOG_LAUNCHER"))
    plan = rplan.build_plan(original, findings, selected, sets, launcher=choice[0], log=log)
    if choice[1]:
        from dataclasses import replace

        plan = replace(plan, notes=tuple(choice[1]) + plan.notes)
    return original, findings, plan


def _launchable_runs(log: str):
    """The log's runs; an InputError when none has a server_args dump or a launch command."""
    from sglog.cli._common import tune_allocator
    from sglog.errors import InputError
    from sglog.runs.build import load_runs

    tune_allocator([log])
    runs = load_runs([log])
    if not runs or not any(r.args or r.launch_command for r in runs):
        raise InputError(f"{log}: no server_args dump or launch command; cannot rebuild the launch")
    return runs


def _findings(runs, selected: list[str]):
    """The runs' findings; none when this build has no rules engine (then --finding is a UsageError)."""
    from sglog.errors import UsageError

    findings = _diagnose(runs)
    if findings is None:
        if selected:
            raise UsageError("--finding needs sglog's diagnose rules, which are not available in this build")
        findings = []
    return findings


def _dry_run(plan, fmt) -> NoReturn:
    """Show the plan (rich, with a hint on stderr, or json) and exit 0."""
    if fmt == ReproFormat.json:
        _write_json(plan.to_dict() | {"dry_run": True})
    else:
        _print_plan(plan)
        stderr_console().print("dry run: add --execute to launch it", markup=False, highlight=False)
    raise SystemExit(0)


def _check_bench_host(bench, host: str) -> None:
    from sglog.errors import UsageError

    if bench is not None and host not in ("127.0.0.1", "localhost", "0.0.0.0", "::", "::1", ""):
        raise UsageError(f"--bench talks to 127.0.0.1 only; the relaunch listens on {host} (add --set host=127.0.0.1)")


# ------------------------------------------------------------------ stages


def _diagnose(runs):
    """Findings of the diagnose rules, or None when this build has no rules engine yet."""
    import importlib.util

    if importlib.util.find_spec("sglog.diagnose") is None:
        return None
    from sglog import diagnose

    fn = getattr(diagnose, "diagnose_runs", None)
    if fn is None:
        return None
    return list(fn(runs))


def _compare(a, b, fa, fb):
    import importlib.util

    if importlib.util.find_spec("sglog.compare.diff") is None:
        return None
    from sglog.compare import diff

    fn = getattr(diff, "compare", None)
    return fn(a, b, fa, fb) if fn is not None else None


def _choose_run(runs, findings, wanted: int | None, selected: list[str]):
    from sglog.errors import UsageError
    from sglog.relaunch import choose_findings

    usable = [r for r in runs if r.args or r.launch_command]
    if wanted is not None:
        hit = [r for r in runs if r.index == wanted]
        if not hit:
            raise UsageError(f"--run {wanted}: the log has runs 1-{len(runs)}")
        if not (hit[0].args or hit[0].launch_command):
            raise UsageError(f"--run {wanted}: no server_args dump or launch command in that run")
        return hit[0]
    with_fix = []
    for r in usable:
        try:
            chosen, _ = choose_findings(findings, r.index, selected)
        except UsageError:
            continue
        if chosen:
            with_fix.append(r)
    if with_fix:
        return with_fix[-1]
    if selected:
        choose_findings(findings, usable[-1].index, selected)  # raises the one-line error
    return usable[-1]


def _print_plan(plan) -> None:
    from rich.text import Text

    from sglog.relaunch import render_plan

    con = stdout_console()
    for line in render_plan(plan).splitlines():
        style = "bold" if line.endswith(":") and not line.startswith(" ") else ""
        con.print(Text(line, style=style), soft_wrap=True)


def _write_json(doc) -> None:
    sys.stdout.write(jsonout.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n")
    sys.stdout.flush()


class _Display:
    """Progress on stderr: a live table on a TTY, plain lines otherwise; nothing with -q."""

    def __init__(self, quiet: bool, title: str):
        self.quiet = quiet
        self.title = title
        self.live = None
        self.console = None
        if quiet:
            return
        self.console = stderr_console()
        if self.console.is_terminal and not os.environ.get("SGLOG_PLAIN_PROGRESS"):
            from rich.live import Live

            self.live = Live(console=self.console, refresh_per_second=4, transient=False)
            self.live.start()

    def emit(self, lines) -> None:
        if self.quiet:
            return
        from sglog.relaunch import _display

        for line in map(_display, lines):
            if self.live is not None:
                self.live.console.print(line, markup=False, highlight=False, soft_wrap=True)
            else:
                sys.stderr.write(line + "\n")
                sys.stderr.flush()

    def refresh(self, status, now: float) -> None:
        if self.live is not None:
            from sglog.repro.live import table

            self.live.update(table(status, now, self.title))

    def close(self) -> None:
        if self.live is not None:
            self.live.stop()
            self.live = None


def _execute(plan, log: str, log_out, timeout: float, bench, grace: float, quiet: bool, fmt):
    from sglog.errors import UsageError
    from sglog.repro import launch
    from sglog.repro.live import LiveStatus

    if launch.port_in_use(plan.port):
        raise UsageError(f"port {plan.port} is already in use on this machine; choose another with --set port=N")
    path = launch.claim_log(log_out) if log_out is not None else launch.create_log(REPORT_DIR, _stem(log))
    display = _Display(quiet, f"sglog repro: {path}")
    server = launch.Server(plan.argv, path, grace=grace)
    status = LiveStatus(str(path))
    t0 = time.monotonic()
    result, stop_line = _run_server(server, status, display, t0, plan, path, bench, timeout, grace)
    _explain_ending(result, status)
    return _outcome(result, server, path, t0, stop_line, timeout)


def _run_server(server, status, display, t0: float, plan, path: Path, bench, timeout: float, grace: float) -> tuple[dict, int | None]:
    """``_serve`` with sglog's SIGTERM/SIGHUP/SIGQUIT raising: a signal or Ctrl-C stops the server and
    exits 128 + N or 130; a launch that started nothing leaves no empty log."""
    from sglog.repro import launch

    try:
        with launch.signals_raise():
            try:
                with server:
                    return _serve(server, status, display, t0, plan, path, bench, timeout, grace)
            except launch.LaunchError:  # nothing started
                _remove_empty(path)
                raise
    except launch.Terminated as t:
        display.close()
        sys.stderr.write(f"sglog: error: terminated by signal {t.args[0]}; stopped the server (log: {path})\n")
        raise SystemExit(128 + int(t.args[0])) from None
    except KeyboardInterrupt:
        display.close()
        sys.stderr.write(f"sglog: interrupted; stopped the server (log: {path})\n")
        raise SystemExit(130) from None
    finally:
        display.close()


def _serve(server, status, display, t0: float, plan, path: Path, bench, timeout: float, grace: float) -> tuple[dict, int | None]:
    """Start the server, follow it until ready, crash, exit or timeout, bench it if asked and stop it:
    (the result so far, the log line where stopping began)."""
    from sglog.relaunch import quote

    display.emit([f"[{0.0:7.1f}s] launched pid {server.pgid}: {' '.join(quote(w) for w in plan.argv[:4])}{' ...' if len(plan.argv) > 4 else ''} (log: {path})"])
    result: dict = {"status": "interrupted", "phase": None, "cause": None, "ready_s": None, "bench": None}
    result.update(_watch(server, status, display, t0, timeout, plan.port))
    if result["status"] == "ready" and bench is not None:
        result["bench"] = _bench(server, status, display, t0, plan, path, bench, timeout, grace)
    return result, _stop(server, status, display, t0)


def _stop(server, status, display, t0: float) -> int | None:
    """Stop the server (SIGINT, SIGTERM, SIGKILL), following its last lines; the log line where stopping began."""
    now = time.monotonic() - t0
    for line in server.lines():
        display.emit(status.feed(line, now))
    stop_line = status.lines
    if server.alive():
        display.emit([f"[{now:7.1f}s] stopping the server (SIGINT, then SIGTERM, then SIGKILL to its process group)"])
    server.stop()
    now = time.monotonic() - t0
    for line in server.lines():
        display.emit(status.feed(line, now))
    display.emit(status.finish(now))
    if server.signals_sent and server.signals_sent[-1] == "SIGKILL":
        display.emit([f"[{now:7.1f}s] the server ignored SIGINT and SIGTERM; killed its process group"])
    return stop_line


def _explain_ending(result: dict, status) -> None:
    """A crash or exit with errors in the log but no cause takes the log's root cause; a crash with no phase, the current one."""
    from sglog.repro.live import describe

    if result["status"] in ("crashed", "exited") and result["cause"] is None and status.errors:
        result["cause"] = describe(status.root_cause)
    if result["status"] == "crashed" and result["phase"] is None:
        result["phase"] = status.current_phase


def _outcome(result: dict, server, path: Path, t0: float, stop_line: int | None, timeout: float):
    from sglog.repro.verify import Outcome

    return Outcome(
        status=result["status"],
        log=str(path),
        elapsed_s=time.monotonic() - t0,
        ready_s=result["ready_s"],
        phase=result["phase"],
        cause=result["cause"],
        returncode=server.proc.returncode if server.proc else None,
        signals=tuple(server.signals_sent),
        stop_line=stop_line,
        timeout_s=timeout,
        bench=result["bench"],
    )


def _watch(server, status, display, t0: float, timeout: float, port: int) -> dict:
    """Follow the log until ready, crash, exit or timeout."""
    from sglog.repro import launch
    from sglog.repro.live import describe

    crash_seen = None
    health_ok_at = None
    next_health = 3.0
    while True:
        lines = server.lines(wait=0.1)
        now = time.monotonic() - t0
        for line in lines:
            display.emit(status.feed(line, now))
        display.emit(status.idle(now))
        display.refresh(status, now)
        if status.ready_at is not None and status.crash_at is None:
            return {"status": "ready", "ready_s": status.ready_at}
        if status.crash_at is not None:
            crash_seen = crash_seen if crash_seen is not None else now
            if server.poll() is not None or now - crash_seen >= CRASH_EXIT_GRACE:
                _drain(server, status, display, t0)
                return {"status": "crashed", "phase": status.current_phase, "cause": describe(status.root_cause)}
            continue
        rc = server.poll()
        if rc is not None:
            _drain(server, status, display, t0)
            if status.ready_at is not None and status.crash_at is None:
                return {"status": "exited", "phase": "serving"}
            if status.crash_at is not None or rc != 0:
                return {"status": "crashed", "phase": status.current_phase, "cause": describe(status.root_cause) if status.errors else _exit_cause(rc, status.last_text)}
            return {"status": "exited", "phase": status.current_phase}
        if now >= next_health:
            next_health = now + 1.0
            if launch.health(port):
                health_ok_at = health_ok_at if health_ok_at is not None else now
                if now - health_ok_at >= HEALTH_CONFIRM:
                    display.emit([f"[{now:7.1f}s] ready (/health answers; no ready line in the log)"])
                    return {"status": "ready", "ready_s": health_ok_at}
        if now >= timeout:
            display.emit([f"[{now:7.1f}s] timeout: not ready after {timeout:g} s (in {status.current_phase})"])
            return {"status": "timeout", "phase": status.current_phase}


def _exit_cause(rc: int, last: str) -> str:
    from sglog.relaunch import _display

    return f"exit code {rc}" + (f"; last line: {_display(last)}" if last else "")


def _drain(server, status, display, t0: float, seconds: float = 2.0) -> None:
    """Read what the process still writes (its traceback) until EOF or ``seconds``."""
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        lines = server.lines(wait=0.05)
        now = time.monotonic() - t0
        for line in lines:
            display.emit(status.feed(line, now))
        if not lines and server.eof:
            break
    display.emit(status.finish(time.monotonic() - t0))


def _bench(server, status, display, t0: float, plan, path: Path, bench, timeout: float, grace: float) -> dict:
    from sglog.repro import launch

    now = time.monotonic() - t0
    if bench.value == "smoke":
        display.emit([f"[{now:7.1f}s] smoke: POST /generate x3 to 127.0.0.1:{plan.port}"])
        res = launch.smoke(plan.port, timeout=timeout)
    else:
        blog = path.with_name(path.stem + ".bench.log")
        argv = launch.bench_launcher(plan.launcher, os.environ.get("SGLOG_BENCH_LAUNCHER"))
        display.emit([f"[{now:7.1f}s] bench: {' '.join(argv)} (output: {blog})"])
        model = dict(plan.final).get("--model-path")
        res = launch.bench_serving(argv, plan.port, launch.claim_log(blog), model=model if isinstance(model, str) else None, timeout=timeout, grace=grace)
    time.sleep(0.2)  # let the server's last batch lines reach the pipe
    now = time.monotonic() - t0
    for line in server.lines():
        display.emit(status.feed(line, now))
    display.emit(status.idle(now, after=0.0))
    msg = "ok" if res.get("ok") else res.get("error")
    display.emit([f"[{now:7.1f}s] {bench.value}: {msg}" + (f" (decode {status.decode_tok_s:.1f} tok/s)" if status.decode_tok_s else "")])
    return {"kind": bench.value, **res}


def _runs_until(path: str, stop_line: int | None):
    """The runs of the new log as they were when sglog began stopping the server (the shutdown is sglog's doing)."""
    import polars as pl

    from sglog.read.parse import parse_file
    from sglog.runs.build import build_runs

    log = parse_file(path)
    if stop_line is not None and stop_line < log.lines:
        log.events = [e for e in log.events if e.line <= stop_line]
        log.batches = log.batches.filter(pl.col("line") <= stop_line) if log.batches.height else log.batches
        log.access = log.access.filter(pl.col("line") <= stop_line) if log.access.height else log.access
        log.lines = stop_line
    return build_runs([log])


def _verify(plan, original, findings, outcome, fmt, fail_on: str = "error") -> None:
    from sglog.repro.verify import verdict

    new_runs = _runs_until(outcome.log, outcome.stop_line)
    new_run = new_runs[-1] if new_runs else None
    new_findings = []
    got = None
    if new_run is not None:
        got = _diagnose(new_runs)
        new_findings = [f for f in (got or []) if f.run == new_run.index]
    have_rules = got is not None if new_run is not None else False
    diff = _compare(original, new_run, [f for f in findings if f.run == original.index] if have_rules else None, new_findings if have_rules else None) if new_run is not None else None
    diff_text = getattr(getattr(diff, "verdict", None), "text", None) if diff is not None else None
    v = verdict(plan, original, findings, new_run, new_findings, outcome, diff_text)
    if fmt == ReproFormat.json:
        doc = plan.to_dict() | {"dry_run": False, "result": outcome.to_dict(), "verdict": v.to_dict(), "new_findings": [f.to_dict() for f in new_findings]}
        doc["diff"] = diff.to_dict() if diff is not None and hasattr(diff, "to_dict") else None
        _write_json(doc)
    else:
        from rich.text import Text

        con = stdout_console()
        con.print(Text(v.text, style="bold red" if not v.fixed else "bold yellow" if v.remaining else "bold green"), soft_wrap=True)
        con.print(Text(f"new log: {outcome.log}"), soft_wrap=True)
        if outcome.signals:
            con.print(Text(f"stopped with {', '.join(outcome.signals)}"), soft_wrap=True)
        if diff_text:
            con.print(Text(f"diff: {diff_text}"), soft_wrap=True)
    raise SystemExit(1 if v.fails(fail_on) else 0)


def _stem(log: str) -> str:
    name = Path(log).name
    for ext in (".gz", ".zst", ".log", ".txt"):
        if name.endswith(ext):
            name = name[: -len(ext)]
    return name or "run"


def _remove_empty(path: Path) -> None:
    try:
        if path.stat().st_size == 0:
            path.unlink()
    except OSError:
        pass
