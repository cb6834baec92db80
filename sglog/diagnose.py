"""Runs -> findings: run every chosen rule on every run; decide whether the input is an SGLang log at all.

Pipeline API (used by ``sglog diagnose``, ``sglog diff``, ``sglog report``)::

    from sglog.diagnose import diagnose_runs, looks_like_sglang
    ok, coverage = looks_like_sglang(parsed_logs)     # or runs
    findings = diagnose_runs(runs, select=["SGL1"], ignore=["kv-headroom-wasted"])

Rules are pure; this module is where the evidence text of batch-frame rows
(which the fast path does not keep) is read back from the files.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from dataclasses import replace
from typing import Any

from sglog import schema
from sglog.findings import SEVERITY_RANK, Evidence, Finding
from sglog.fixes import decide, reconcile, why_holds

SCHEMA_VERSION = schema.SCHEMA_VERSION


class DiagnoseError(KeyError):
    """An unknown rule selector or option (a usage error)."""


# ------------------------------------------------------------------ rules over runs


def diagnose_runs(runs, select: Iterable[str] | None = None, ignore: Iterable[str] | None = None, options: dict[str, dict[str, Any]] | None = None) -> list[Finding]:
    """Findings of the chosen rules on every run, evidence text filled in, sorted by severity then run.

    ``options`` maps a rule's name or code to option overrides:
    ``{"cuda-graph-bs-oversized": {"ratio": 2.0}}``.
    """
    from sglog.rules import choose, get_rule

    try:
        rules = choose(select, ignore)
        per_rule: dict[str, dict[str, Any]] = {}
        for key, values in (options or {}).items():
            rule = get_rule(key)
            rule.resolve(values)  # unknown option names fail here
            per_rule.setdefault(rule.name, {}).update(values)
    except KeyError as e:
        raise DiagnoseError(e.args[0] if e.args else str(e)) from None
    findings: list[Finding] = []
    for run in runs:
        for rule in rules:
            if rule.triggered(run):  # nothing it reads is in the run: it finds nothing
                findings.extend(rule.check(run, per_rule.get(rule.name)))
    findings = fill_evidence_text(findings)
    order = {r.code: i for i, r in enumerate(rules)}
    findings.sort(key=lambda f: (-SEVERITY_RANK[f.severity], f.run, order.get(f.code, 999)))
    return reconcile(findings, runs)


def fill_evidence_text(findings: list[Finding]) -> list[Finding]:
    """Read the text of evidence lines the rules could not carry (batch-frame rows) from their files
    (``inputs.find_lines``: the file up to its last such line, counted in C)."""
    from sglog.errors import InputError
    from sglog.read.inputs import find_lines, open_source, opened

    wanted: dict[str, set[int]] = {}
    for f in findings:
        for e in f.evidence:
            if e.text is None and e.line is not None and e.file:
                wanted.setdefault(e.file, set()).add(e.line)
    texts: dict[tuple[str, int], str] = {}
    for file, lines in wanted.items():
        # (the Source the parse read: a pipe or stdin is not opened again, its reading kept a copy)
        src = opened(file)
        if src is None and file == "-":
            continue
        try:
            got = find_lines(src or open_source(file), lines)
        except (InputError, OSError):
            continue
        for n, t in got.items():
            texts[(file, n)] = t
    if not texts:
        return findings
    out = []
    for f in findings:
        if any(e.text is None and e.line is not None and (e.file, e.line) in texts for e in f.evidence):
            ev = tuple(replace(e, text=texts[(e.file, e.line)]) if e.text is None and e.line is not None and (e.file, e.line) in texts else e for e in f.evidence)
            f = replace(f, evidence=ev)
        out.append(f)
    return out


# ------------------------------------------------------------------ is this an SGLang log?


def _file_stats(path: str, lines: int, blank: int, unparsed: int, events, frame_evidence: int) -> dict[str, Any]:
    """One file's line accounting and the evidence that SGLang wrote it (sglog/read/evidence.py)."""
    from sglog.read.evidence import event_evidence, other_server

    nonblank = max(lines - blank, 0)
    coverage = schema.coverage(unparsed, nonblank)
    kinds: Counter = Counter()
    n = frame_evidence
    for e in events:
        ev = event_evidence(e)
        if ev is not None:
            kinds[ev] += 1
            n += e.end_line - e.line + 1
    if frame_evidence:
        kinds["event"] += frame_evidence
    other = None if n else other_server(e.text for e in events)
    recognised = nonblank - unparsed
    if n:
        verdict = "sglang"
    elif other:
        verdict = "other_server"
    elif nonblank and recognised <= 0:
        verdict = "unrecognised"
    elif nonblank:
        verdict = "no_sglang_specific_line"  # generic torch/NCCL/CUDA output: diagnosed, and said so
    else:
        verdict = "empty"
    return {
        "path": path,
        "lines": lines,
        "blank": blank,
        "unparsed": unparsed,
        "coverage": coverage,
        "sglang_lines": n,
        "sglang": verdict in ("sglang", "no_sglang_specific_line"),
        "verdict": verdict,
        "evidence": dict(sorted(kinds.items())),
        "other_server": other,
    }


def looks_like_sglang(parsed_logs_or_runs) -> tuple[bool, dict[str, Any]]:
    """(every input can be diagnosed as an SGLang log, coverage document).

    Accepts ``ParsedLog`` objects (``sglog.read.parse.parse_file``) or ``Run``
    objects.  Coverage is the share of non-blank lines sglog understood.
    Whether a file is SGLang's is decided from evidence, never from coverage
    (sglog/read/evidence.py): SGLang's envelope, a kind or catalogued message
    only SGLang writes, ``sglang/`` paths in a traceback, an SGLang module in a
    ``file.py:N`` prefix, a launch command.  A file is refused only when it
    shows another server's own words and nothing of SGLang's, or when nothing
    in it is recognised at all; a fragment of generic torch/NCCL/CUDA output
    is diagnosed, with ``verdict: no_sglang_specific_line``.
    """
    import polars as pl

    items = list(parsed_logs_or_runs)
    files: list[dict[str, Any]] = []
    for item in items:
        if hasattr(item, "source"):  # ParsedLog
            frame = item.batches.height
            if item.access.height and "ts" in item.access.columns:
                frame += item.access.get_column("ts").drop_nulls().len()
            files.append(_file_stats(item.path, item.lines, item.blank, item.unparsed, item.events, frame))
        else:  # Run
            for file in item.files:
                lo, hi = item.line_ranges.get(file, (1, 0))
                evs = [e for e in item.events if e.file == file]
                blank = sum(e.end_line - e.line + 1 for e in evs if e.kind == "blank")
                unparsed = sum(e.end_line - e.line + 1 for e in evs if e.kind == "unparsed")
                frame = 0
                b = item.batches
                if b.height and "file" in b.columns:
                    frame += b.filter(pl.col("file") == file).height
                a = item.access
                if a.height and "file" in a.columns and "ts" in a.columns:
                    frame += a.filter((pl.col("file") == file) & pl.col("ts").is_not_null()).height
                files.append(_file_stats(file, max(hi - lo + 1, 0), blank, unparsed, evs, frame))
    lines = sum(f["lines"] for f in files)
    nonblank = sum(f["lines"] - f["blank"] for f in files)
    unparsed = sum(f["unparsed"] for f in files)
    doc = {
        "lines": lines,
        "unparsed": unparsed,
        "coverage": schema.coverage(unparsed, nonblank),
        "sglang_lines": sum(f["sglang_lines"] for f in files),
        "sglang_specific": any(f["verdict"] == "sglang" for f in files),
        "files": files,
    }
    return bool(files) and all(f["sglang"] for f in files), doc


def not_sglang_message(stats: dict[str, Any]) -> str:
    """One line for a file that cannot be diagnosed as an SGLang log."""
    nonblank = stats["lines"] - stats["blank"]
    if nonblank <= 0:
        return f"{stats['path']}: empty log (no non-blank lines)"
    if stats.get("other_server"):
        return (
            f"{stats['path']} looks like {stats['other_server']}'s log, not SGLang's: it shows {stats['other_server']}'s "
            f"own lines and none of SGLang's (no SGLang prefix, message, module or launch command in {nonblank} non-blank lines)"
        )
    return f"{stats['path']} does not look like a log: none of its {nonblank} non-blank lines is recognised (SGLang's or a known program's)"


# ------------------------------------------------------------------ output document


def run_summary(run) -> dict[str, Any]:
    ending = run.ending
    return {
        "run": run.index,
        "name": run.name,
        "files": list(run.files),
        "model": run.model,
        "version": run.version,
        "parallelism": run.parallelism,
        "spec": run.spec,
        "ending": None if ending is None else {"status": ending.status, "phase": ending.phase, "description": ending.describe()},
    }


def evidence_dict(e: Evidence) -> dict[str, Any]:
    """``{"file", "line", "text"}``; a metric window (no line) carries its description as text."""
    return {"file": e.file, "line": e.line, "text": e.text if e.line is not None else (e.note or e.text)}


def finding_dict(f: Finding) -> dict[str, Any]:
    return {
        "code": f.code,
        "name": f.name,
        "severity": f.severity,
        "message": f.message,
        "run": f.run,
        "evidence": [evidence_dict(e) for e in f.evidence],
        "fix": f.fix.to_dict() if f.fix else None,
        "superseded": [x.to_dict() for x in f.superseded],
        "details": _plain(f.details),  # the numbers the rule computed (a window's start, end, before, after ...)
    }


def _plain(value: Any) -> Any:
    """A finding's details as JSON values: times as ISO text, tuples and sets as lists."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in (sorted(value, key=str) if isinstance(value, (set, frozenset)) else value)]
    if hasattr(value, "isoformat"):
        return value.isoformat()
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    return str(value)


def document(runs, findings: list[Finding], coverage: dict[str, Any]) -> dict[str, Any]:
    """The ``--format json`` document (schema_version 1); each run carries its merged flag change (:func:`suggested_change`)."""
    return {
        "schema_version": SCHEMA_VERSION,
        "runs": [run_summary(r) | suggested_change(r, findings) for r in runs],
        "findings": [finding_dict(f) for f in findings],
        "coverage": coverage,
    }


def counts(findings: list[Finding]) -> dict[str, int]:
    out = {"error": 0, "warning": 0, "info": 0}
    for f in findings:
        out[f.severity] += 1
    return out


def exit_code(findings: list[Finding], fail_on: str) -> int:
    from sglog.errors import ExitCode

    bar = SEVERITY_RANK[fail_on]
    return int(ExitCode.FINDINGS) if any(SEVERITY_RANK[f.severity] >= bar for f in findings) else int(ExitCode.OK)


def suggested_change(run, findings: list[Finding]) -> dict[str, Any]:
    """A run's merged flag change and its relaunch command, as ``--format json`` carries them::

        suggested_args          {flag: value}  (None: remove the flag)
        suggested_args_sources  {flag: {"won": rule, "value": value, "overridden": [{"rule", "value", "reason"}]}}
        suggested_command       argv list of the relaunch (None when no flag changes)
        suggested_command_base  "launch_line" | "server_args" | "assumed" (None when no flag changes)

    The command is ``sglog repro``'s and ``sglog report``'s (``sglog.relaunch.build_plan``):
    the log's launch command with the flags applied, else ``python -m sglang.launch_server``
    with the flags the server-args dump shows were set, else (``assumed``) with only the model
    path when the log names it.
    """
    mine = [f for f in findings if f.run == run.index]
    decisions = decide(mine)
    args = {flag: d.value for flag, d in decisions.items()}
    sources = {flag: {"won": d.won.name, "value": d.value, "overridden": [{"rule": f.name, "value": v, "reason": why_holds(d, f)} for f, v in d.overridden]} for flag, d in decisions.items()}
    plan = relaunch(run, mine) if args else None
    return {
        "suggested_args": args,
        "suggested_args_sources": sources,
        "suggested_command": plan.argv if plan is not None else None,
        "suggested_command_base": plan.base if plan is not None else None,
    }


def relaunch(run, findings: list[Finding]):
    """The relaunch of ``run`` with every fix of its findings (``sglog.relaunch.build_plan``, the
    one ``repro`` and ``report`` use), built on what the log shows (``assume``: even nothing); None
    when a fix's value cannot go on a command line."""
    from sglog.errors import UsageError
    from sglog.relaunch import build_plan

    try:
        return build_plan(run, [f for f in findings if f.run == run.index], assume=True)
    except UsageError:
        return None


__all__ = ["diagnose_runs", "looks_like_sglang", "document", "exit_code", "relaunch", "suggested_change", "not_sglang_message", "Evidence"]
