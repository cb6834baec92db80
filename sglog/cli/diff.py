"""``sglog diff RUN_A RUN_B``: what changed between two runs, and whether it helped."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated

import typer

from sglog import jsonout
from sglog.cli import app
from sglog.cli._common import ReportFormat, stdout_console, write_text


class DiffFailOn(str, Enum):
    regression = "regression"
    never = "never"


@app.command(
    short_help="What changed between two runs, and whether it helped.",
    example="""
sglog diff before.log after.log
sglog diff server.log#1 server.log#2
sglog diff -f markdown before.log after.log -o diff.md
""",
)
def diff(
    run_a: Annotated[str, typer.Argument(metavar="RUN_A", help="A log file, or FILE#N for its Nth run (as `sglog runs` numbers them).")],
    run_b: Annotated[str, typer.Argument(metavar="RUN_B", help="The run to compare with A: FILE or FILE#N (may be the same file).")],
    fmt: Annotated[ReportFormat, typer.Option("--format", "-f", metavar="FORMAT", help="rich (terminal), json (stable, schema_version 1) or markdown.")] = ReportFormat.rich,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="FILE", help="Write to this file instead of stdout.")] = None,
    fail_on: Annotated[
        DiffFailOn, typer.Option("--fail-on", metavar="WHEN", help="regression: exit 1 when B crashed and A did not, or B decodes significantly slower (for CI); never.")
    ] = DiffFailOn.never,
) -> None:
    """What changed between two runs (flags, startup, memory, serving, findings) and whether it helped.

    The verdict comes first; decode-throughput differences are tested on the
    steady-state samples (Mann-Whitney U and a seeded bootstrap interval of the
    median difference).
    """
    from sglog.cli._common import tune_allocator
    from sglog.compare.diff import diff_specs

    tune_allocator([s if Path(s).exists() else s.rsplit("#", 1)[0] for s in (run_a, run_b)])  # (FILE or FILE#N)
    result = diff_specs(run_a, run_b)
    _write(result, fmt, output)
    if fail_on == DiffFailOn.regression and result.regression:
        sys.stderr.write(f"sglog: regression: {result.regression}\n")
        raise SystemExit(1)


def _write(result, fmt: ReportFormat, output: Path | None) -> None:
    if fmt == ReportFormat.json:
        write_text(jsonout.dumps(result.to_dict(), indent=2, ensure_ascii=False) + "\n", output)
        return
    if fmt == ReportFormat.markdown:
        from sglog.render.diff import render_markdown

        write_text(render_markdown(result), output)
        return
    from sglog.render.diff import render_rich

    if output is None:
        stdout_console().print(render_rich(result))
        return
    import io

    from rich.console import Console

    console = Console(record=True, width=120, no_color=True, file=io.StringIO())
    console.print(render_rich(result))
    write_text(console.export_text(), output)
