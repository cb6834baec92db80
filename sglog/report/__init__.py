"""Post-mortems: one run (or two, compared) as Markdown with charts, and as one HTML page.

    report = collect(["server.log"])            # the only step that reads files
    charts = chart_specs(report)                 # name -> Vega-Lite spec (pure)
    md = render_markdown(report, charts, images=png or svg)         # str (pure, byte-stable)
    files = render_files(report)                 # file name -> bytes; the CLI writes them

The file names ``render_files`` returns are fixed (``index.md``,
``index.html``, ``<chart>.png|svg|vl.json``), never derived from the log.
"""

from __future__ import annotations

from typing import Any

from sglog import jsonout
from sglog.report.charts import chart_specs, to_png, to_svg
from sglog.report.collect import collect, pick_window
from sglog.report.markdown import render_markdown, title
from sglog.report.model import Report

__all__ = ["Report", "chart_specs", "collect", "pick_window", "render_files", "render_markdown", "spec_json"]


def spec_json(spec: dict[str, Any]) -> str:
    """A chart spec as stable JSON (sorted keys): what the snapshots and the example reports keep."""
    return jsonout.dumps(spec, indent=1, sort_keys=True, ensure_ascii=False) + "\n"


def render_files(report: Report, *, png: bool = True, svg: bool = True, html: bool = True) -> dict[str, bytes]:
    """Every file of the report, by name."""
    from sglog.report.escape import clean
    from sglog.report.html import render_html

    charts = chart_specs(report)
    md = render_markdown(report, charts, images=png or svg)
    out: dict[str, bytes] = {"index.md": md.encode("utf-8")}
    for name, spec in charts.items():
        out[f"{name}.vl.json"] = spec_json(spec).encode("utf-8")
        if png:
            out[f"{name}.png"] = to_png(spec)
        if svg:
            out[f"{name}.svg"] = to_svg(spec).encode("utf-8")
    if html:
        html_md = render_markdown(report, charts, html=True)
        plain_title = clean(title(report, plain=True))
        out["index.html"] = render_html(html_md, charts, plain_title).encode("utf-8")
    return out
