"""``sglog report``: Markdown post-mortems, chart specs, the HTML page, and the example reports."""

from __future__ import annotations

import json
import shutil
import subprocess
from datetime import datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from syrupy.extensions.json import JSONSnapshotExtension
from syrupy.extensions.single_file import SingleFileSnapshotExtension, WriteMode
from typer.testing import CliRunner

from conftest import ROOT
from sglog.cli import app
from sglog.report import chart_specs, collect, pick_window, render_files, render_markdown, spec_json
from sglog.report.escape import code, code_block, inline, safe_name

STORY = "fixtures/logs/story"
REAL = "fixtures/logs/real"

CASES = {
    "eagle3_oom_auto": ([f"{STORY}/eagle3-oom-auto.log"], None),
    "baseline_512_vs_128": ([f"{STORY}/baseline-cgbs512.log"], f"{STORY}/baseline-cgbs128.log"),
    "eagle3_5step": ([f"{STORY}/eagle3-5step.log"], None),
    "real_009": ([f"{REAL}/009-deepseek-r1-tp16-2node-pd-decode-nccl-init-failure.log"], None),
    "real_015": ([f"{REAL}/015-laguna-dflash-spec-gb10-full-run-accept-len.log"], None),
    "real_019": ([f"{REAL}/019-deepseek-r1-w4a8-ascend-npu-tp16-dp4-ep-eagle-benchmark.log"], None),
    "real_021": ([f"{REAL}/021-gemma4-26b-awq-rocm-tp2-hsa-exception-sampler-crash.log"], None),
}


class MarkdownSnapshot(SingleFileSnapshotExtension):
    _write_mode = WriteMode.TEXT
    file_extension = "md"


@pytest.fixture(autouse=True)
def _at_root(monkeypatch):
    monkeypatch.chdir(ROOT)  # logs are named relative to the repository root, as the Makefile names them


@pytest.fixture
def md_snapshot(snapshot):
    return snapshot.use_extension(MarkdownSnapshot)


@pytest.fixture
def json_snapshot(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


_REPORTS: dict[str, object] = {}


def report_of(case: str):
    """Collected once per case (parsing is the slow part); reports are immutable."""
    if case not in _REPORTS:
        logs, other = CASES[case]
        _REPORTS[case] = collect(logs, compare=[other] if other else None)
    return _REPORTS[case]


# ------------------------------------------------------------------ Markdown and chart specs (snapshots)


@pytest.mark.parametrize("case", sorted(CASES))
def test_markdown(case, md_snapshot):
    rep = report_of(case)
    assert render_markdown(rep, chart_specs(rep)) == md_snapshot


@pytest.mark.parametrize("case", ["eagle3_oom_auto", "baseline_512_vs_128", "eagle3_5step", "real_019"])
def test_chart_specs(case, json_snapshot):
    specs = chart_specs(report_of(case))
    assert {name: json.loads(spec_json(s)) for name, s in specs.items()} == json_snapshot


def test_same_input_same_bytes():
    a = collect([f"{STORY}/eagle3-5step.log"])
    b = collect([f"{STORY}/eagle3-5step.log"])
    fa, fb = render_files(a, png=False, svg=False), render_files(b, png=False, svg=False)
    assert fa == fb
    assert set(fa) == {"index.md", "index.html", "startup.vl.json", "memory.vl.json", "serving.vl.json"}


def test_oom_story_picture():
    """The memory chart explains the story's OOM: 72.33 GB of weights against a 0.76 x 94.04 GB static pool."""
    rep = report_of("eagle3_oom_auto")
    md = render_markdown(rep, chart_specs(rep))
    assert "72.33 GB" in md and "0.76" in md and "94.04 GB" in md
    assert "exceed the static pool" in md
    spec = chart_specs(rep)["memory"]
    text = spec_json(spec)
    assert "static pool 0.76 × 94.04 = 71.47 GB" in text
    items = [r["item"] for layer in spec["layer"] if "data" in layer for r in layer["data"].get("values", []) if "item" in r]
    assert items[:2] == ["free at weight load (T)", "target weights"]


def test_compare_report_has_both_runs_and_the_diff():
    rep = report_of("baseline_512_vs_128")
    md = render_markdown(rep, chart_specs(rep))
    assert md.count("## Comparison") == 1 and "### sglog diff" in md
    assert "A: baseline-cgbs512.log |" in md and "B: baseline-cgbs128.log |" in md
    serving = chart_specs(rep)["serving"]
    assert {r["run"] for r in serving["data"]["values"]} == {"A", "B"}


@pytest.mark.parametrize("case", ["eagle3_5step", "baseline_512_vs_128", "eagle3_oom_auto"])
def test_relaunch_block_is_the_new_command_only(case):
    """The bash block pastes into a shell as the new command: each flag once, with its new value."""
    import re
    import shlex

    from sglog.relaunch import build_plan

    rep = report_of(case)
    md = render_markdown(rep, chart_specs(rep))
    blocks = re.findall(r"### Relaunch with the fixes applied.*?```bash\n(.*?)\n```", md, re.S)
    assert len(blocks) == len(rep.subjects)
    for block, s in zip(blocks, rep.subjects):
        words = shlex.split(block.replace("\\\n", " "))
        flags = [w for w in words if w.startswith("--")]
        assert len(flags) == len(set(flags)), block
        assert words == build_plan(s.run, list(s.findings)).argv
    if case == "eagle3_5step":
        assert "--speculative-num-steps 3 \\" in blocks[0] and "--speculative-num-steps 5" not in blocks[0]


@pytest.mark.parametrize("case", ["eagle3_5step", "real_015", "real_019", "baseline_512_vs_128"])
def test_memory_prose_says_the_tables_kv_and_the_chart_stacks_kv_in_the_pool(case):
    """The prose's KV cache is the table's (it said 7.48 GB beside a 10.43 GB table line); the KV
    bar follows the target weights, inside the static pool (the draft came first and crossed it)."""
    from sglog.report.charts import memory_rows

    rep = report_of(case)
    md = render_markdown(rep, chart_specs(rep))
    for s in rep.subjects:
        m = s.run.memory
        assert f"the KV cache {m.kv_gb:.2f} GB" in md and f"{m.kv_gb:.2f} GB" in next(line for line in md.splitlines() if line.startswith("| KV cache |"))
        rows = {r["item"]: r for r in memory_rows(s)}
        assert rows["KV cache"]["start"] == rows["target weights"]["end"]
        assert rows["KV cache"]["end"] <= m.static_pool_gb + 0.1, (rows["KV cache"], m.static_pool_gb)


def test_sections_in_order():
    rep = report_of("eagle3_5step")
    md = render_markdown(rep, chart_specs(rep))
    heads = [ln for ln in md.splitlines() if ln.startswith("## ")]
    assert heads == ["## Summary", "## The launch", "## Startup timeline", "## Memory budget", "## Serving", "## Findings", "## Appendix"]
    for name in ("startup", "memory", "serving"):
        assert "![" in md and f"]({name}.png)" in md and f"]({name}.svg)" in md


# ------------------------------------------------------------------ long runs stay small


def test_pick_window_keeps_charts_small():
    for span in (10, 600, 3600, 6 * 3600, 48 * 3600, 30 * 86400):
        w = pick_window(span)
        n = int(w[:-1]) * {"s": 1, "m": 60, "h": 3600, "d": 86400}[w[-1]]
        assert span / n < 500
    assert pick_window(120) == "1s"  # short runs keep full detail


def _long_log(path: Path, hours: float, every_s: float) -> int:
    t0 = datetime(2025, 3, 1, 8, 0, 0)
    lines = [
        f"[{t0:%Y-%m-%d %H:%M:%S}] server_args=ServerArgs(model_path='m/long', tp_size=1, mem_fraction_static=0.85, cuda_graph_max_bs=256)",
        f"[{t0:%Y-%m-%d %H:%M:%S} TP0] Load weight begin. avail mem=78.50 GB",
        f"[{t0:%Y-%m-%d %H:%M:%S} TP0] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.44 GB, mem usage=15.06 GB.",
        f"[{t0:%Y-%m-%d %H:%M:%S}] The server is fired up and ready to roll!",
    ]
    n = int(hours * 3600 / every_s)
    for i in range(n):
        t = t0 + timedelta(seconds=1 + i * every_s)
        lines.append(
            f"[{t:%Y-%m-%d %H:%M:%S} TP0] Decode batch. #running-req: {8 + i % 5}, #token: 9000, token usage: 0.{10 + i % 80:02d}, "
            f"cuda graph: True, gen throughput (token/s): {400 + (i * 7) % 90}.00, #queue-req: {i % 3}"
        )
    path.write_text("\n".join(lines) + "\n")
    return len(lines)


def test_long_run_charts_stay_small(tmp_path):
    log = tmp_path / "long.log"
    n = _long_log(log, hours=10, every_s=0.25)  # 144k decode lines over 10 hours
    assert n > 140_000
    rep = collect([str(log)])
    assert rep.window == "2m"
    spec = chart_specs(rep)["serving"]
    assert len(spec["data"]["values"]) <= 500
    assert len(spec_json(spec)) < 400_000
    assert "hours since the first batch line" in spec_json(spec)


# ------------------------------------------------------------------ nothing in a log can break or inject the report

EVIL = "**bold** _it_ `tick` ```fence``` <script>alert(1)</script> <img src=x onerror=alert(2)> [x](javascript:alert(3)) | pipe | $x$ &lt; \x1b[31mred\x1b[0m \u202etxt"
EVIL_LINES = [
    "# Heading from the log",
    "</script><script>alert(4)</script>",
    "<!-- comment --> <style>body{display:none}</style>",
    "| a | b |",
    "|---|---|",
    "```",
    "    indented code?",
    "- list item",
    "1. ordered",
    "> quote",
    "[ref]: https://example.com",
    "![img](https://example.com/x.png)",
]


def _evil_log(path: Path) -> None:
    t = "2025-01-01 10:00:0"
    model = "/m/<script>alert(1)</script>|*x*`y`"
    lines = [
        f"[{t}0] server_args=ServerArgs(model_path='{model}', tp_size=1, mem_fraction_static=0.8, served_model_name='{EVIL.replace(chr(39), '')}')",
        *EVIL_LINES,
        f"[{t}1 TP0] Load weight begin. avail mem=78.50 GB",
        f"[{t}2 TP0] Load weight end. type=Evil<b>Model</b>, dtype=torch.bfloat16, avail mem=63.44 GB, mem usage=15.06 GB.",
        f"[{t}3 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/x/```/scheduler.py", line 1, in <module>',
        f"RuntimeError: {EVIL}",
        "",
        f"[{t}4] Received sigquit from a child process. It usually means the child failed.",
    ]
    path.write_text("\n".join(lines) + "\n")


class _Tags(HTMLParser):
    def __init__(self):
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data):
        self.text.append(data)


def _rendered(md: str, allow_html: bool) -> _Tags:
    """Render Markdown as a permissive renderer would (raw HTML allowed) and list what came out."""
    from markdown_it import MarkdownIt

    html = MarkdownIt("commonmark", {"html": allow_html}).enable("table").enable("strikethrough").render(md)
    p = _Tags()
    p.feed(html)
    return p


def test_log_text_cannot_break_or_inject_markdown(tmp_path):
    log = tmp_path / "evil[x](javascript:alert(1))<b>`name`.log"
    _evil_log(log)
    rep = collect([str(log)])
    md = render_markdown(rep, chart_specs(rep))
    out = _rendered(md, allow_html=True)
    assert not {"script", "style", "iframe", "b"} & set(out.tags)
    # the only images and links are the report's charts
    assert {v for n, v in out.attrs if n in ("src", "href")} <= {f"{c}.{ext}" for c in ("startup", "memory", "serving") for ext in ("png", "svg")}
    assert all(not n.startswith("on") for n, _ in out.attrs)
    # the headings are the report's own
    assert out.tags.count("h1") == 1
    heads = [ln for ln in md.splitlines() if ln.startswith("#")]
    assert all(h.lstrip("#").startswith(" ") and "Heading from the log" not in h for h in heads)
    # and the text is shown as itself
    text = "".join(out.text)
    assert "<script>alert(1)</script>" in text
    assert "**bold**" in text and "| pipe |" in text
    assert "\x1b" not in md and "\u202e" not in md


def test_log_text_cannot_inject_html_page(tmp_path):
    log = tmp_path / "evil.log"
    _evil_log(log)
    rep = collect([str(log)])
    page = render_files(rep, png=False, svg=False)["index.html"].decode()
    charts = len(chart_specs(rep))
    # our scripts only: the Vega bundle, the chart specs (JSON, not executed) and the embed call
    assert page.count("<script") == (2 + charts if charts else 0)
    body = page.split("<main>", 1)[1].split("</main>", 1)[0]
    p = _Tags()
    p.feed(body)
    assert not {"script", "img", "style", "iframe", "b"} & set(p.tags)
    assert "<script src" not in page and "<link" not in page  # nothing loaded from anywhere
    assert "Content-Security-Policy" in page and "unsafe-inline" not in page.split("script-src", 1)[1].split(";", 1)[0]


def test_escape_helpers():
    assert inline("a|b") == "a\\|b"
    assert inline("1. x") == "1\\. x" and inline("0.5.9") == "0.5.9"
    assert inline("<x>&") == "&lt;x&gt;&amp;"
    assert code("a`b") == "`` a`b ``" and code("x|y", in_table=True) == "`x\\|y`"
    assert code_block(["```", "x"]).startswith("````text\n")
    assert safe_name("../../etc/passwd") == "etc-passwd" and safe_name("..") == "report" and safe_name("a b$(c)") == "a-b-c"


# ------------------------------------------------------------------ the command: files, paths, PNG/SVG/HTML


def test_cli_writes_report_files(tmp_path):
    """The one test that renders PNG and SVG (slow-ish)."""
    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["report", f"{STORY}/eagle3-oom-auto.log", "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == str(out / "index.md")
    names = sorted(p.name for p in out.iterdir())
    assert "index.md" in names and "index.html" in names
    for chart in ("startup", "memory"):
        assert (out / f"{chart}.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        assert (out / f"{chart}.svg").read_text().lstrip().startswith("<svg")
        assert json.loads((out / f"{chart}.vl.json").read_text())["$schema"].startswith("https://vega.github.io/schema/vega-lite/")
    assert not [p for p in tmp_path.rglob("*") if not p.is_relative_to(out) and p != out]


def test_output_stays_inside_the_directory(tmp_path, monkeypatch):
    log = tmp_path / "we ird$(x);name.log"
    log.write_text((ROOT / STORY / "eagle3-oom-auto.log").read_text())
    monkeypatch.chdir(tmp_path)
    outside = tmp_path / "outside.md"
    outside.write_text("keep")
    target = tmp_path / "reports" / "we-ird-x-name"
    target.mkdir(parents=True)
    (target / "index.md").symlink_to(outside)  # a planted link is replaced, never followed
    res = CliRunner().invoke(app, ["report", str(log), "--no-images", "--no-html"])
    assert res.exit_code == 0, res.output
    assert res.stdout.strip() == "reports/we-ird-x-name/index.md"
    assert outside.read_text() == "keep"
    assert not (target / "index.md").is_symlink()
    assert sorted(p.name for p in target.iterdir()) == sorted(["index.md", "startup.vl.json", "memory.vl.json"])


def test_bad_run_number_is_a_usage_error(tmp_path):
    from sglog.errors import UsageError

    out = tmp_path / "never"
    res = CliRunner().invoke(app, ["report", f"{STORY}/eagle3-oom-auto.log", "--run", "9", "-o", str(out)])
    assert isinstance(res.exception, UsageError) and "--run 9" in str(res.exception)
    assert not out.exists()  # nothing written before the input is known to be good


@pytest.mark.skipif(shutil.which("chromium") is None, reason="no chromium binary")
def test_html_opens_in_headless_chromium(tmp_path):
    rep = report_of("baseline_512_vs_128")
    page = tmp_path / "index.html"
    page.write_bytes(render_files(rep, png=False, svg=False)["index.html"])
    proc = subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--no-first-run",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--enable-logging=stderr",
            "--v=0",
            "--virtual-time-budget=10000",
            "--dump-dom",
            page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    console = [ln for ln in proc.stderr.splitlines() if "CONSOLE" in ln or "Refused to" in ln or "Uncaught" in ln]
    assert console == [], console
    dom = proc.stdout
    assert dom.count('class="marks"') == len(chart_specs(rep))  # every chart drew
    assert 'class="chart-error"' not in dom


# ------------------------------------------------------------------ the example reports are current


def examples() -> dict[str, list[str]]:
    text = (ROOT / "reports" / "Makefile.inc").read_text()
    block = text.split("REPORT_EXAMPLES :=", 1)[1].split("\n\n", 1)[0]
    out = {}
    for word in block.replace("\\", " ").split():
        name, logs = word.split("=", 1)
        out[name] = logs.split(",")
    return out


def test_example_list():
    ex = examples()
    assert {"eagle3-oom-auto", "baseline-cgbs512-vs-cgbs128", "eagle3-5step"} <= set(ex)
    assert sum(1 for logs in ex.values() if logs[0].startswith(REAL)) >= 4


@pytest.mark.parametrize("name", sorted(examples()))
def test_example_report_is_current(name, tmp_path):
    # (what `make reports` writes, without rendering PNG/SVG: index.md as it links them, and the specs)
    logs = examples()[name]
    rep = collect([logs[0]], compare=[logs[1]] if len(logs) > 1 else None)
    charts = chart_specs(rep)
    (tmp_path / "index.md").write_text(render_markdown(rep, charts), encoding="utf-8")
    for chart, spec in charts.items():
        (tmp_path / f"{chart}.vl.json").write_text(spec_json(spec), encoding="utf-8")
    committed = ROOT / "reports" / name
    fresh = sorted(p.name for p in tmp_path.iterdir())
    kept = sorted(p.name for p in committed.iterdir() if p.name == "index.md" or p.name.endswith(".vl.json"))
    hint = f"reports/{name} is stale: run `make reports`"
    assert fresh == kept, hint
    for f in fresh:
        assert (tmp_path / f).read_bytes() == (committed / f).read_bytes(), hint
    for chart in (f[: -len(".vl.json")] for f in fresh if f.endswith(".vl.json")):
        assert (committed / f"{chart}.png").exists() and (committed / f"{chart}.svg").exists(), hint
