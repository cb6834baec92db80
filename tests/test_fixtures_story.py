"""The constructed fixture logs (fixtures/make_story.py -> fixtures/logs/{story,constructed}/).

Checks that the generator reproduces the committed files byte for byte, that every fixture
parses completely, and that the story's key numbers are where the README says they are.
"""

from __future__ import annotations

import importlib.util
import statistics
import sys
from datetime import time
from pathlib import Path

import polars as pl
import pytest

from conftest import CONSTRUCTED, LOGS, ROOT, STORY
from sglog.read.parse import ParsedLog, parse_file

STORY_FILES = [
    "baseline-cgbs512",
    "baseline-cgbs128",
    "eagle3-oom-auto",
    "eagle3-5step",
    "eagle3-10step",
    "eagle3-fixed-v2",
    "eagle3-wiring-bug",
]
CONSTRUCTED_FILES = ["two-launches", "node0", "node1", "skew-8rank", "crash-mid-capture", "midnight-0.3", "ends-mid-startup"]
ALL = [STORY / f"{n}.log" for n in STORY_FILES] + [CONSTRUCTED / f"{n}.log" for n in CONSTRUCTED_FILES]

GIB = 1 << 30
MLA_BYTES_PER_TOKEN = 70272


def _generator():
    spec = importlib.util.spec_from_file_location("make_story", ROOT / "fixtures" / "make_story.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules["make_story"] = mod  # dataclasses look their module up while the class is created
    spec.loader.exec_module(mod)
    return mod


_CACHE: dict[str, ParsedLog] = {}


def parsed(path: Path) -> ParsedLog:
    key = str(path)
    if key not in _CACHE:
        _CACHE[key] = parse_file(key)
    return _CACHE[key]


def events(log: ParsedLog, kind: str) -> list:
    return [e for e in log.events if e.kind == kind]


def tp(e) -> int | None:
    return e.rank.tp if e.rank is not None else None


def decode(log: ParsedLog) -> pl.DataFrame:
    if "kind" not in log.batches.columns:
        return pl.DataFrame()
    return log.batches.filter(pl.col("kind") == "decode_batch")


def server_args(log: ParsedLog, i: int = 0) -> dict:
    return events(log, "server_args")[i].fields["args"]


# ---------------------------------------------------------------- generator


@pytest.mark.slow
def test_generator_is_idempotent(tmp_path):
    written = _generator().write_all(tmp_path)
    names = {p.relative_to(tmp_path).as_posix() for p in written}
    assert {f"story/{n}.log" for n in STORY_FILES} | {f"constructed/{n}.log" for n in CONSTRUCTED_FILES} | {"story/README.md"} == names
    for p in written:
        committed = LOGS / p.relative_to(tmp_path)
        assert committed.exists(), f"{committed} is missing: run python fixtures/make_story.py"
        assert committed.read_bytes() == p.read_bytes(), f"{committed} differs from the generator's output: run python fixtures/make_story.py"
    # nothing stale next to the generated files
    on_disk = {p.relative_to(LOGS).as_posix() for d in (STORY, CONSTRUCTED) for p in d.iterdir()}
    assert on_disk == names


# ---------------------------------------------------------------- conventions and coverage


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_header_and_command(path):
    lines = path.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith("# sglog fixture: constructed ")
    assert "not a real log" in lines[0] and "SGLang 0." in lines[0]
    assert lines[1].startswith("python3 -m sglang.launch_server --model-path ")
    if path.parent == CONSTRUCTED:
        assert len(lines) < 300


@pytest.mark.parametrize("path", ALL, ids=lambda p: p.name)
def test_fixture_parses_completely(path):
    log = parsed(path)
    bad = [f"{e.line}: {e.text[:160]}" for e in events(log, "unparsed")]
    assert log.unparsed == 0 and log.coverage == 1.0, "unparsed lines:\n" + "\n".join(bad)
    assert events(log, "comment") and events(log, "launch_command")


# ---------------------------------------------------------------- the story's numbers


def kv_tokens(avail: float, total: float, mfs: float) -> int:
    return int(round(avail - total * (1 - mfs), 6) * GIB) // MLA_BYTES_PER_TOKEN


@pytest.mark.parametrize("name", STORY_FILES)
def test_story_memory_numbers(name):
    log = parsed(STORY / f"{name}.log")
    args = server_args(log)
    assert args["model_path"] == "moonshotai/Kimi-K2.5" and args["tp_size"] == 8
    begins = [e for e in events(log, "weight_load_begin") if e.fields["avail_mem"] > 90]
    assert len(begins) == 8
    by_rank = {tp(e): e.fields["avail_mem"] for e in begins}
    assert by_rank[0] == pytest.approx(94.04) and min(by_rank.values()) == pytest.approx(94.04)
    assert max(by_rank.values()) <= 94.06 + 1e-9
    target_end = {tp(e): e for e in events(log, "weight_load_end") if e.fields["type"] == "KimiK25ForConditionalGeneration"}
    assert len(target_end) == 8
    tp0 = target_end[0].fields
    assert tp0["mem_usage"] == pytest.approx(72.33) and tp0["avail_mem"] == pytest.approx(21.71)
    assert 584 <= tp0["elapsed"] <= 900
    mfs = args["mem_fraction_static"]
    kv = [e for e in events(log, "kv_cache_allocated") if "kv_size" in e.fields]
    if name == "eagle3-oom-auto":
        assert not kv
        return
    tokens = kv_tokens(21.71, 94.04, mfs)
    assert {e.fields["tokens"] for e in kv} == {tokens}
    assert kv[0].fields["kv_size"] == pytest.approx(tokens * MLA_BYTES_PER_TOKEN / GIB, abs=0.006)
    (summary,) = events(log, "memory_summary")
    assert summary.fields["max_total_num_tokens"] == tokens
    assert summary.fields["context_len"] == 262144 and summary.fields["chunked_prefill_size"] == 8192
    assert events(log, "server_ready")


def test_oom_auto_story():
    log = parsed(STORY / "eagle3-oom-auto.log")
    args = server_args(log)
    assert args["mem_fraction_static"] == 0.76 and args["speculative_algorithm"] == "EAGLE3"
    assert args["cuda_graph_max_bs"] == 128 and args["max_running_requests"] == 48
    assert args["speculative_num_steps"] == 5 and args["speculative_num_draft_tokens"] == 6
    end = next(e for e in events(log, "weight_load_end") if tp(e) == 0)
    assert end.fields["elapsed"] == pytest.approx(584.31)
    # the weights alone exceed the static pool: rest = A_w - T * (1 - mfs) < 0
    assert 21.71 - 94.04 * (1 - 0.76) < 0
    crashes = events(log, "scheduler_exception")
    assert sorted(tp(e) for e in crashes) == list(range(8))
    for e in crashes:
        assert e.fields["exc_type"] == "RuntimeError"
        assert e.fields["exc_message"].startswith("Not enough memory. Please try to increase --mem-fraction-static.")
        assert "mem_fraction_static=0.76" in e.fields["exc_message"]
        assert "init_memory_pool" in e.text
    assert events(log, "sigquit") and events(log, "scheduler_dead")
    assert not events(log, "server_ready") and decode(log).height == 0


@pytest.mark.parametrize(
    ("name", "median", "accept_len", "accept_rate", "mfs", "cgbs"),
    [
        ("baseline-cgbs512", 82.0, None, None, 0.78, 512),
        ("baseline-cgbs128", 89.5, None, None, 0.788, 128),
        ("eagle3-5step", 71.3, 2.10, 0.35, 0.88, 512),
        ("eagle3-10step", 54.0, 2.30, 0.21, 0.88, 512),
        ("eagle3-fixed-v2", 72.5, 2.10, 0.35, 0.88, 128),
        ("eagle3-wiring-bug", 48.0, 1.14, 0.19, 0.88, 512),
    ],
)
def test_story_serving_numbers(name, median, accept_len, accept_rate, mfs, cgbs):
    log = parsed(STORY / f"{name}.log")
    args = server_args(log)
    assert args["mem_fraction_static"] == mfs and args["cuda_graph_max_bs"] == cgbs
    assert args["cuda_graph_bs"][-1] == cgbs
    (bs,) = events(log, "cuda_graph_bs")
    assert bs.fields["bs"] == args["cuda_graph_bs"]
    d = decode(log)
    assert d.height > 100
    assert set(d.get_column("tp").to_list()) == {0}
    assert d.get_column("cuda_graph").all()
    assert d.get_column("gen_throughput").median() == pytest.approx(median, abs=0.5)
    assert set(d.get_column("running_req").to_list()) <= {1, 2}
    if accept_len is None:
        assert "accept_len" not in d.columns or d.get_column("accept_len").null_count() == d.height
        assert args["speculative_algorithm"] is None
        return
    assert args["speculative_algorithm"] == "EAGLE3" and args["speculative_eagle_topk"] == 1
    assert d.get_column("accept_len").median() == pytest.approx(accept_len, abs=0.1)
    assert d.get_column("accept_rate").median() == pytest.approx(accept_rate, abs=0.02)
    draft = [e for e in events(log, "weight_load_end") if e.fields["type"] == "LlamaForCausalLMEagle3"]
    assert len(draft) == 8 and all(e.fields["mem_usage"] == pytest.approx(2.95) for e in draft)


def test_cuda_graph_max_bs_frees_kv_and_speeds_up_baseline():
    big, small = parsed(STORY / "baseline-cgbs512.log"), parsed(STORY / "baseline-cgbs128.log")

    def graph_mem(log):
        return next(e.fields["mem_usage"] for e in events(log, "cuda_graph_capture_end") if tp(e) == 0)

    assert graph_mem(big) == pytest.approx(3.10) and graph_mem(small) == pytest.approx(1.00)
    assert events(small, "memory_summary")[0].fields["max_total_num_tokens"] > events(big, "memory_summary")[0].fields["max_total_num_tokens"]
    assert statistics.median(decode(small).get_column("gen_throughput").to_list()) > statistics.median(decode(big).get_column("gen_throughput").to_list())
    p = decode(big).get_column("gen_throughput")
    assert p.quantile(0.9, "linear") == pytest.approx(84.0, abs=1.0)


def test_ten_step_run_ends_like_the_seed():
    text = (STORY / "eagle3-10step.log").read_text(encoding="utf-8")
    seed = [
        '[2026-02-26 15:06:09] INFO:     127.0.0.1:57114 - "GET /health HTTP/1.1" 200 OK',
        "[2026-02-26 15:06:19 TP0] Prefill batch, #new-seq: 1, #new-token: 1, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.09, cuda graph: False",
        '[2026-02-26 15:06:20] INFO:     127.0.0.1:55272 - "GET /health HTTP/1.1" 200 OK',
    ]
    lines = text.splitlines()
    i = lines.index(seed[0])
    assert lines[i + 1 : i + 3] == seed[1:]
    end = next(e for e in events(parsed(STORY / "eagle3-10step.log"), "weight_load_end") if tp(e) == 0)
    assert end.fields["elapsed"] > 840  # "Still loading... 900s"


# ---------------------------------------------------------------- constructed edge cases


def test_two_launches():
    log = parsed(CONSTRUCTED / "two-launches.log")
    assert len(events(log, "server_args")) == 2 and len(events(log, "launch_command")) == 2
    crashes = events(log, "scheduler_exception")
    assert crashes and all(e.fields["exc_type"] == "KeyError" for e in crashes)
    assert server_args(log, 0)["enable_torch_symm_mem"] is True and server_args(log, 1)["enable_torch_symm_mem"] is False
    assert events(log, "sigquit") and len(events(log, "server_ready")) == 1
    assert decode(log).height >= 3
    assert decode(log).get_column("line").min() > events(log, "server_ready")[0].line > crashes[-1].line


def test_two_nodes():
    logs = [parsed(CONSTRUCTED / f"node{i}.log") for i in (0, 1)]
    for i, log in enumerate(logs):
        args = server_args(log)
        assert args["nnodes"] == 2 and args["node_rank"] == i and args["tp_size"] == 16
        ranks = {tp(e) for e in log.events if e.rank is not None}
        assert ranks == set(range(8 * i, 8 * i + 8))
    a, b = (server_args(log) for log in logs)
    drop = {"node_rank", "random_seed"}
    assert {k: v for k, v in a.items() if k not in drop} == {k: v for k, v in b.items() if k not in drop}
    # same launch: the two files overlap in time
    spans = [(min(e.ts for e in log.events if e.ts), max(e.ts for e in log.events if e.ts)) for log in logs]
    assert spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    assert events(logs[0], "server_ready") and not events(logs[1], "server_ready")
    assert decode(logs[0]).height and decode(logs[1]).height == 0


def test_skew_8rank():
    log = parsed(CONSTRUCTED / "skew-8rank.log")
    ends = {tp(e): e for e in events(log, "weight_load_end")}
    assert len(ends) == 8
    slow = max(ends, key=lambda r: ends[r].fields["elapsed"])
    assert slow == 5
    others = [ends[r].fields["elapsed"] for r in ends if r != 5]
    assert 35 <= ends[5].fields["elapsed"] - statistics.median(others) <= 45
    cap = [e.ts for e in events(log, "cuda_graph_capture_end")]
    init = [e.ts for e in events(log, "init_dist_end")]
    assert (max(cap) - min(cap)).total_seconds() >= 1 and (max(init) - min(init)).total_seconds() >= 1
    assert events(log, "server_ready")


def test_crash_mid_capture():
    log = parsed(CONSTRUCTED / "crash-mid-capture.log")
    assert events(log, "cuda_graph_capture_begin") and not events(log, "cuda_graph_capture_end")
    (crash,) = [e for e in log.events if "Capture cuda graph failed: CUDA error: out of memory" in e.text and e.kind != "unparsed"]
    assert "Possible solutions:" in crash.text and "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)" in crash.text
    assert events(log, "sigquit") and not events(log, "server_ready")


def test_midnight_030():
    log = parsed(CONSTRUCTED / "midnight-0.3.log")
    d = decode(log)
    assert d.height and not any(d.get_column("ts_has_date").to_list())
    clock = [t.time() for t in d.get_column("ts").to_list()]
    assert clock[0] >= time(23, 58, 50) and clock[-1] == time(0, 1, 10)
    assert any(c < time(0, 2) for c in clock) and any(c > time(23, 0) for c in clock)
    assert "cache_hit_rate" in log.batches.columns
    assert events(log, "server_ready")


def test_ends_mid_startup():
    log = parsed(CONSTRUCTED / "ends-mid-startup.log")
    last = (CONSTRUCTED / "ends-mid-startup.log").read_text(encoding="utf-8").splitlines()[-1]
    assert last.startswith("Loading safetensors checkpoint shards:  40% Completed | ")
    assert len(events(log, "weight_load_begin")) == 8 and not events(log, "weight_load_end")
    for kind in ("scheduler_exception", "sigquit", "server_ready", "traceback"):
        assert not events(log, kind)
