"""``sglog diagnose``: findings with evidence and a computed fix, per run."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from sglog import jsonout
from sglog.cli import app
from sglog.cli.window import RANK_HELP, SINCE_HELP, UNTIL_HELP, Window


class DiagnoseFormat(str, Enum):
    rich = "rich"
    json = "json"
    sarif = "sarif"  # SARIF 2.1.0, for code-scanning uploads
    github = "github"  # GitHub Actions annotations (::error file=...,line=...::...)


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"


def use_color(stream) -> bool:
    """``_common.use_color``: ``--color``, FORCE_COLOR, NO_COLOR, a terminal."""
    from sglog.cli._common import use_color as rule

    return rule(stream)


def term_width(default: int = 120) -> int:
    """The output width (``_common.output_width``: one rule for every command)."""
    from sglog.cli._common import output_width

    return output_width()


@app.command(
    short_help="Findings with evidence lines and a computed launch-command fix.",
    example="""
sglog diagnose server.log
sglog diagnose node0.log node1.log --fail-on warning
sglog diagnose -f json server.log.gz | jq '.findings[].code'
sglog diagnose server.log --since '2026-02-27 10:05' --rank TP3
""",
)
def diagnose(
    logs: Annotated[
        list[str] | None,
        typer.Argument(metavar="LOG...", help="Log files (.log, .gz, .zst), directories of them, or - for stdin (the default when piped); files of one launch merge into one run.", show_default=False),
    ] = None,
    fmt: Annotated[
        DiagnoseFormat | None,
        typer.Option("--format", "-f", metavar="FORMAT", help="rich (terminal), json, sarif (SARIF 2.1.0) or github (Actions annotations); default: the config file's, else rich.", show_default=False),
    ] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
    fail_on: Annotated[
        FailOn | None,
        typer.Option("--fail-on", metavar="SEVERITY", help="Exit 1 when a finding is at or above this severity: error, warning or info; default: the config file's, else error.", show_default=False),
    ] = None,
    select: Annotated[list[str] | None, typer.Option("--select", metavar="RULE", help="Only these rules: code, name or prefix (repeatable, comma-separated).")] = None,
    ignore: Annotated[list[str] | None, typer.Option("--ignore", metavar="RULE", help="Skip these rules: code, name or prefix (repeatable, comma-separated).")] = None,
    since: Annotated[str | None, typer.Option("--since", metavar="TIME", help=SINCE_HELP + " Keeps the findings with an evidence line in the window (the rules read the whole run).")] = None,
    until: Annotated[str | None, typer.Option("--until", metavar="TIME", help=UNTIL_HELP)] = None,
    rank: Annotated[list[str] | None, typer.Option("--rank", metavar="RANK", help=RANK_HELP)] = None,
    quiet: Annotated[bool, typer.Option("-q", "--quiet", help="No summary line on stderr.")] = False,
) -> None:
    """Diagnose SGLang server logs: findings with evidence lines and a computed launch-command fix."""

    from sglog import config as cfg
    from sglog.cli._common import log_paths, read_ahead

    conf = cfg.load()  # (sglog.toml or [tool.sglog]; the command line wins)
    fmt = fmt or DiagnoseFormat(conf.format or "rich")
    fail_on = fail_on or FailOn(conf.fail_on or "error")
    select = select or list(conf.select) or None
    ignore = ignore or list(conf.ignore) or None
    window = Window.from_options(since, until, rank)  # (a bad value stops before reading)
    logs = log_paths(logs)
    read_ahead(logs)
    runs, findings, coverage = _diagnose(logs, select, ignore, conf.options or None)
    if window is not None:  # (the runs with a line in the window, the findings with evidence in it)
        runs, findings = window.findings(runs, findings)
    text = _render(fmt, runs, findings, coverage, window, to_file=output is not None)
    from sglog.cli._common import write_text

    if output is None:
        sys.stdout.write(text)
        sys.stdout.flush()
    else:
        write_text(text, output)
    if not quiet:
        from sglog.render.diagnose import summary_line

        sys.stderr.write(summary_line(runs, findings, coverage) + (f" (in the window: {window.text()})" if window is not None else "") + "\n")
    from sglog.diagnose import exit_code

    raise SystemExit(exit_code(findings, fail_on.value))


def _diagnose(logs: list[str], select: list[str] | None, ignore: list[str] | None, options) -> tuple[list, list, dict]:
    """The logs' runs, their findings and the coverage document; NotSGLangLog when a file is
    not SGLang's, UsageError for a bad rule selector (checked before anything is parsed)."""
    from sglog.errors import NotSGLangLog, UsageError
    from sglog.read.parse import parse_file

    if select or ignore:  # check selectors before parsing anything (the read-ahead is best effort)
        from sglog.rules import choose

        try:
            choose(select, ignore)
        except KeyError as e:
            raise UsageError(e.args[0]) from None
    parsed = [parse_file(p) for p in logs]
    from sglog.diagnose import DiagnoseError, diagnose_runs, looks_like_sglang, not_sglang_message
    from sglog.runs.build import build_runs

    ok, coverage = looks_like_sglang(parsed)
    if not ok:
        bad = [f for f in coverage["files"] if not f["sglang"]]
        raise NotSGLangLog("; ".join(not_sglang_message(f) for f in bad))
    runs = build_runs(parsed)
    try:
        findings = diagnose_runs(runs, select=select, ignore=ignore, options=options)
    except DiagnoseError as e:
        raise UsageError(str(e.args[0])) from None
    return runs, findings, coverage


def _render(fmt: DiagnoseFormat, runs: list, findings: list, coverage: dict, window: Window | None, to_file: bool) -> str:
    """The diagnosis as text in ``fmt`` (rich: coloured on a terminal, at the piped width in a file)."""
    if fmt == DiagnoseFormat.json:
        from sglog.diagnose import document

        doc = document(runs, findings, coverage) | ({"window": window.describe()} if window is not None else {})
        return jsonout.dumps(doc, indent=2, ensure_ascii=False, default=str) + "\n"
    if fmt == DiagnoseFormat.sarif:
        from sglog.render.ci import sarif
        from sglog.rules import RULES

        return sarif(findings, RULES)
    if fmt == DiagnoseFormat.github:
        from sglog.render.ci import github

        return github(findings)
    from sglog.cli._common import PIPED_WIDTH
    from sglog.render.diagnose import render_rich

    if window is not None and not runs:
        return f"No line of the logs is in the window ({window.text()}).\n"
    return render_rich(runs, findings, coverage, color=not to_file and use_color(sys.stdout), width=PIPED_WIDTH if to_file else term_width())


@app.command(
    short_help="A rule's documentation: what it finds, why, evidence, fix.",
    example="""
sglog explain SGL101
sglog explain draft-model-exceeds-static-pool
""",
)
def explain(
    rule: Annotated[str, typer.Argument(metavar="RULE", help="A rule's name (draft-model-exceeds-static-pool) or code (SGL101).")],
) -> None:
    """Print a rule's documentation: what it finds, why it matters, evidence, fix, fix safety, example."""
    from sglog.errors import UsageError
    from sglog.render.diagnose import explain as render
    from sglog.rules import get_rule

    try:
        r = get_rule(rule)
    except KeyError as e:
        raise UsageError(e.args[0]) from None
    from sglog import config as cfg

    conf = cfg.load()
    text = render(r, color=use_color(sys.stdout), width=min(term_width(), 100), overrides=cfg.rule_options(conf, r), source=conf.source)
    sys.stdout.write(text if text.endswith("\n") else text + "\n")
