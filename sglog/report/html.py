"""The post-mortem as one self-contained HTML file with interactive charts.

The Markdown is rendered with markdown-it (raw HTML disabled: anything that
looks like a tag is shown as text), chart images are replaced by Vega-Embed
views, and the Vega, Vega-Lite and Vega-Embed libraries are inlined from
vl-convert's bundle: no CDN, no network.  A Content-Security-Policy allows
only the report's own two scripts (by hash), so even a tag that slipped
through could not run, and forbids every network request.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sglog import jsonout

if TYPE_CHECKING:
    from markdown_it.renderer import RendererHTML
    from markdown_it.token import Token
    from markdown_it.utils import EnvType, OptionsDict

CSS = """
body{font:15px/1.5 system-ui,-apple-system,"Segoe UI",Roboto,"DejaVu Sans",sans-serif;color:#1f2328;margin:0;background:#fff}
main{max-width:980px;margin:0 auto;padding:24px 28px 64px}
h1{font-size:1.7em;border-bottom:1px solid #d0d7de;padding-bottom:.3em}
h2{font-size:1.35em;border-bottom:1px solid #d0d7de;padding-bottom:.25em;margin-top:2em}
h3{font-size:1.12em;margin-top:1.5em}
table{border-collapse:collapse;margin:.6em 0;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:4px 10px;vertical-align:top}
th{background:#f6f8fa}
code{font:13px/1.45 ui-monospace,"DejaVu Sans Mono",monospace;background:#f6f8fa;padding:.1em .3em;border-radius:4px;overflow-wrap:anywhere}
pre{background:#f6f8fa;padding:10px 12px;overflow-x:auto;border-radius:6px}
pre code{padding:0;background:none;white-space:pre;overflow-wrap:normal}
blockquote{margin:0;padding:0 1em;color:#59636e;border-left:4px solid #d0d7de}
figure.chart{margin:1em 0}
figure.chart figcaption{color:#59636e;font-size:.9em}
.chart-error{color:#b42318;font-family:monospace}
""".strip()

INIT_JS = """
(function () {
  var specs = document.querySelectorAll('script[type="application/json"][data-chart]');
  specs.forEach(function (el) {
    var name = el.getAttribute('data-chart');
    var target = document.getElementById('chart-' + name);
    var spec = JSON.parse(el.textContent);
    var opts = {actions: false, renderer: 'svg', ast: true};
    if (window.vega && window.vega.expressionInterpreter) { opts.expr = window.vega.expressionInterpreter; }
    window.vegaEmbed(target, spec, opts).catch(function (err) {
      target.className = 'chart-error';
      target.textContent = 'chart ' + name + ' failed: ' + err;
      console.error(err);
    });
  });
})();
""".strip()


@lru_cache(maxsize=1)
def vega_bundle() -> str:
    """Vega + Vega-Lite + Vega-Embed as one script (from vl-convert; no network)."""
    import altair as alt
    import vl_convert as vlc

    vl = alt.SCHEMA_VERSION.lstrip("v").rsplit(".", 1)[0]
    # (the stub makes ``snippet`` required; it defaults to None: javascript_bundle.__text_signature__)
    js = vlc.javascript_bundle(vl_version=vl if vl in vlc.get_vegalite_versions() else None)  # type: ignore[call-arg]
    return _script_safe(js)


def _script_safe(js: str) -> str:
    # inside <script>, only '</script' and '<!--' can end or confuse the element
    return js.replace("</script", "<\\/script").replace("<!--", "<\\!--")


def _json_for_script(spec: dict[str, Any]) -> str:
    text = jsonout.dumps(spec, sort_keys=True, ensure_ascii=True, separators=(",", ":"))
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _csp_hash(js: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode() + "'"


def markdown_to_html(md: str, charts: dict[str, Any]) -> str:
    """Markdown -> HTML body; an image ``NAME.png`` of a known chart becomes its Vega-Embed slot."""
    from markdown_it import MarkdownIt

    mdi = MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table").enable("strikethrough")

    def image(self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: EnvType) -> str:
        tok = tokens[idx]
        src = str(tok.attrGet("src") or "")
        name = src[:-4] if src.endswith(".png") else None
        alt = html.escape(self.renderInline(tok.children or [], options, env) if tok.children else tok.content)
        if name in charts:
            return f'<figure class="chart"><div id="chart-{html.escape(name)}" role="img" aria-label="{alt}"></div><figcaption>{alt}</figcaption></figure>'
        return f"<span>[image: {alt}]</span>"  # the HTML file stands alone: no external images

    mdi.add_render_rule("image", image)
    body: str = mdi.render(md)  # (MarkdownIt.render is typed Any: a renderer may return anything)
    return body


def render_html(md: str, charts: dict[str, dict[str, Any]], title: str) -> str:
    """A self-contained HTML page: the Markdown rendered, charts interactive, no network."""
    body = markdown_to_html(md, charts)
    bundle = vega_bundle() if charts else ""
    scripts = [bundle, INIT_JS] if charts else []
    script_src = " ".join(_csp_hash(s) for s in scripts) or "'none'"
    csp = f"default-src 'none'; script-src {script_src}; style-src 'unsafe-inline'; img-src data: blob:; font-src data:; connect-src 'none'; base-uri 'none'; form-action 'none'"
    specs = "\n".join(f'<script type="application/json" data-chart="{html.escape(name)}">{_json_for_script(spec)}</script>' for name, spec in charts.items())
    head = (
        '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp)}">\n'
        '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
        f"<title>{html.escape(title)}</title>\n<style>\n{CSS}\n</style>\n"
    )
    if charts:
        head += f"<script>{bundle}</script>\n"
    page = head + "</head>\n<body>\n<main>\n" + body + "</main>\n" + specs + "\n"
    if charts:
        page += f"<script>{INIT_JS}</script>\n"
    return page + "</body>\n</html>\n"
