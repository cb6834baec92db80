"""``sglog report``: a Markdown post-mortem with charts (PNG, SVG) and a self-contained HTML page."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Annotated

import typer

from sglog.cli import app


@app.command(
    short_help="A Markdown post-mortem with charts and an HTML page.",
    example="""
sglog report server.log
sglog report after.log --compare before.log -o reports/after
sglog report server.log --no-images
""",
)
def report(
    logs: Annotated[list[str], typer.Argument(metavar="LOG...", help="Log file(s) of one launch (one per node); .log, .gz, .zst.")],
    compare: Annotated[str | None, typer.Option("--compare", metavar="LOG", help="A second log to compare with (B).")] = None,
    output: Annotated[Path | None, typer.Option("-o", "--output", metavar="DIR", help="Directory to write the report into (default: reports/<log name>/).")] = None,
    run: Annotated[int | None, typer.Option("--run", metavar="N", help="Report launch N of the log (default: the last one).")] = None,
    compare_run: Annotated[int | None, typer.Option("--compare-run", metavar="N", help="Launch N of the --compare log (default: the last one).")] = None,
    no_images: Annotated[bool, typer.Option("--no-images", help="Skip PNG/SVG rendering (Markdown, chart specs and HTML only).")] = False,
    no_html: Annotated[bool, typer.Option("--no-html", help="Skip the HTML page.")] = False,
) -> None:
    """Write a post-mortem: index.md with charts as PNG and SVG, and index.html; print the path of index.md."""
    from sglog.cli._common import log_paths
    from sglog.report import collect, render_files
    from sglog.report.escape import safe_name

    logs = log_paths(logs)
    rep = collect(logs, run=run, compare=[compare] if compare else None, compare_run=compare_run)
    if output is None:
        name = safe_name(Path(logs[0]).name.split(".")[0] if logs[0] != "-" else "stdin")
        if compare:
            name = safe_name(f"{name}-vs-{Path(compare).name.split('.')[0]}")
        output = Path("reports") / name
    files = render_files(rep, png=not no_images, svg=not no_images, html=not no_html)
    for name, data in files.items():
        write_inside(output, name, data)
    remove_stale(output, set(files))
    sys.stderr.write(f"sglog: wrote {len(files)} files for {len(rep.subjects)} run(s) into {output}\n")
    sys.stdout.write(f"{output / 'index.md'}\n")


def write_inside(directory: Path, name: str, data: bytes) -> Path:
    """Write ``directory/name`` atomically; ``name`` must be a plain file name and the result stay inside.

    The file is written next to its target and renamed over it, so a symlink
    planted at the target is replaced, never followed.
    """
    from sglog.errors import UsageError
    from sglog.report.escape import safe_name

    if name != safe_name(name) or name in (".", ".."):
        raise UsageError(f"refusing to write a report file named {name!r}")
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UsageError(f"{directory}: cannot create the output directory ({e.strerror or e})") from None
    if not directory.is_dir():
        raise UsageError(f"{directory}: not a directory")
    root = directory.resolve()
    target = root / name
    if target.parent != root:
        raise UsageError(f"refusing to write outside {directory}")
    from sglog.cli import output

    return output.write_bytes(target, data)  # (the one -o writer: temporary file, rename, OS errors exit 2)


# the names of the files a report writes (render_files): what an earlier report may have left
_REPORT_FILE = re.compile(r"(index\.(md|html)|[a-z][a-z0-9_-]*\.(vl\.json|png|svg))")


def remove_stale(directory: Path, written: set[str]) -> list[str]:
    """Remove the report files of an earlier report in ``directory`` that this one did not write
    (a serving chart of a run that now has none, PNGs after --no-images); other files stay."""
    from sglog.report.charts import CHARTS

    charts = tuple(name for name, _ in CHARTS)
    gone = []
    for p in directory.iterdir() if directory.is_dir() else ():
        n = p.name
        if n in written or not _REPORT_FILE.fullmatch(n) or not (n.startswith("index.") or n.split(".")[0].startswith(charts)):
            continue
        if p.is_file() or p.is_symlink():
            try:
                p.unlink()
                gone.append(n)
            except OSError:
                pass
    return gone
