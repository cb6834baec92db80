"""Runs, ranks, startup phases, memory budget and timelines (sglog/runs/build.py, sglog/timeline.py)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from typer.testing import CliRunner

import sglog
from conftest import REAL, STORY
from sglog import timeline
from sglog.cli import app

ARGS = (
    "server_args=ServerArgs(model_path='meta-llama/Llama-3.1-8B-Instruct', tokenizer_path='meta-llama/Llama-3.1-8B-Instruct', "
    "tp_size={tp}, dp_size=1, nnodes={nn}, node_rank={nr}, mem_fraction_static=0.871, cuda_graph_max_bs=256, "
    "chunked_prefill_size=8192, max_running_requests=None, speculative_algorithm=None, host='127.0.0.1', port=30000)"
)


def startup(day: str, t0: int, ranks: range, tp: int = 2, nn: int = 1, nr: int = 0, load_s: dict[int, int] | None = None) -> list[str]:
    """A 0.5.9 startup sequence (constructed) beginning at second t0 of 10:00."""
    load_s = load_s or {}

    def ts(sec: int) -> str:
        return f"{day} 10:{sec // 60:02d}:{sec % 60:02d}"

    out = [f"[{ts(t0)}] " + ARGS.format(tp=tp, nn=nn, nr=nr)]
    for r in ranks:
        out.append(f"[{ts(t0 + 1)} TP{r}] Init torch distributed begin.")
    for r in ranks:
        out.append(f"[{ts(t0 + 2)} TP{r}] Init torch distributed ends. elapsed=1.10 s, mem usage=0.52 GB")
        out.append(f"[{ts(t0 + 2)} TP{r}] Load weight begin. avail mem=78.50 GB")
    for r in ranks:
        end = t0 + 2 + load_s.get(r, 10)
        out.append(f"[{ts(end)} TP{r}] Load weight end. elapsed={load_s.get(r, 10):.2f} s, type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=63.44 GB, mem usage=15.06 GB.")
        out.append(f"[{ts(end)} TP{r}] KV Cache is allocated. #tokens: 385953, K size: 23.56 GB, V size: 23.56 GB")
        out.append(f"[{ts(end)} TP{r}] Memory pool end. avail mem=14.92 GB")
        out.append(f"[{ts(end + 1)} TP{r}] Capture cuda graph begin. This can take up to several minutes. avail mem=14.55 GB")
        out.append(f"[{ts(end + 6)} TP{r}] Capture cuda graph end. Time elapsed: 5.02 s. mem usage=0.84 GB. avail mem=13.71 GB.")
    last = t0 + 2 + max([load_s.get(r, 10) for r in ranks]) + 7
    out.append(f"[{ts(last)} TP0] max_total_num_tokens=385953, chunked_prefill_size=8192, max_prefill_tokens=16384, max_running_requests=4097, context_len=131072, available_gpu_mem=13.71 GB")
    out.append(f"[{ts(last + 1)}] The server is fired up and ready to roll!")
    return out


def decode(day: str, t: int, tps: float, running: int = 4) -> str:
    return f"[{day} 10:{t // 60:02d}:{t % 60:02d} TP0] Decode batch, #running-req: {running}, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): {tps:.2f}, #queue-req: 0"


def write(tmp_path: Path, name: str, lines: list[str]) -> str:
    p = tmp_path / name
    p.write_text("\n".join(lines) + "\n")
    return str(p)


def test_two_launches_in_one_file_are_two_runs(tmp_path):
    crash = [
        "[2026-02-23 10:00:30 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/managers/scheduler.py", line 3120, in run_scheduler_process',
        "    scheduler = Scheduler(",
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
        "",
        "[2026-02-23 10:00:30] Received sigquit from a child process. It usually means the child failed.",
    ]
    lines = startup("2026-02-23", 0, range(2))[:8] + crash + startup("2026-02-23", 100, range(2)) + [decode("2026-02-23", 130 + i, 400 + i) for i in range(5)]
    runs = sglog.load(write(tmp_path, "two.log", lines))
    assert [r.index for r in runs] == [1, 2]
    first, second = runs
    assert first.ending.status == "crashed"
    assert first.ending.root_cause.get("exc_type") == "RuntimeError"
    assert first.ending.phase == "kv_pool"  # init_memory_pool raised on TP0 after its weights loaded
    assert second.ending.status == "serving"
    assert second.decode.height == 5 and first.decode.height == 0
    assert second.line_ranges[str(tmp_path / "two.log")][0] == 15


def test_two_node_files_merge_into_one_run(tmp_path):
    n0 = startup("2026-02-23", 0, range(0, 8), tp=16, nn=2, nr=0) + [decode("2026-02-23", 40 + i, 300) for i in range(3)]
    n1 = startup("2026-02-23", 1, range(8, 16), tp=16, nn=2, nr=1)
    runs = sglog.load([write(tmp_path, "node0.log", n0), write(tmp_path, "node1.log", n1)])
    assert len(runs) == 1
    run = runs[0]
    assert len(run.files) == 2
    assert run.parallelism["tp"] == 16 and run.parallelism["nnodes"] == 2
    assert len(run.ranks) == 16
    assert len(run.startup.phases["weight_load"].per_rank) == 16


def test_different_launches_in_two_files_stay_separate(tmp_path):
    a = startup("2026-02-23", 0, range(2))
    b = startup("2026-02-24", 0, range(2))  # a day later: not the same launch
    runs = sglog.load([write(tmp_path, "a.log", a), write(tmp_path, "b.log", b)])
    assert len(runs) == 2


def test_eight_rank_startup_skew(tmp_path):
    lines = startup("2026-02-23", 0, range(8), tp=8, load_s={5: 50})
    (run,) = sglog.load(write(tmp_path, "skew.log", lines))
    wl = run.startup.phases["weight_load"]
    assert wl.slowest_rank == "TP5"
    assert wl.duration == pytest.approx(50.0)
    assert wl.skew == pytest.approx(40.0)
    assert run.startup.total_s == pytest.approx(60.0)
    assert run.ending.status == "ready"


def test_crash_mid_startup_ends_in_the_right_phase(tmp_path):
    lines = startup("2026-02-23", 0, range(2))[:10] + [
        "[2026-02-23 10:00:13 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=14.55 GB",
        "[2026-02-23 10:00:14 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sglang/srt/model_executor/cuda_graph_runner.py", line 300, in capture',
        "Exception: Capture cuda graph failed: CUDA error: an illegal memory access was encountered",
        "",
        "[2026-02-23 10:00:15] Received sigquit from a child process. It usually means the child failed.",
    ]
    (run,) = sglog.load(write(tmp_path, "crash.log", lines))
    assert run.ending.status == "crashed"
    assert run.ending.phase == "cuda_graph_capture"
    assert "illegal memory access" in run.ending.root_cause.get("exc_message")


def test_log_ending_mid_startup_says_the_phase(tmp_path):
    lines = startup("2026-02-23", 0, range(2))[:6]
    (run,) = sglog.load(write(tmp_path, "partial.log", lines))
    assert run.ending.status == "incomplete"
    assert run.ending.phase == "weight_load"
    assert "weight loading" in run.ending.describe()  # (the phase in words; .phase keeps its name)


def test_dateless_timestamps_roll_over_midnight(tmp_path):
    lines = [
        "[23:59:50 TP0] Decode batch. #running-req: 8, #token: 1840, token usage: 0.01, gen throughput (token/s): 412.37, #queue-req: 0",
        "[23:59:58 TP0] Decode batch. #running-req: 8, #token: 1880, token usage: 0.01, gen throughput (token/s): 410.00, #queue-req: 0",
        "[00:00:06 TP0] Decode batch. #running-req: 8, #token: 1920, token usage: 0.01, gen throughput (token/s): 411.00, #queue-req: 0",
        "[00:00:14 TP0] Decode batch. #running-req: 8, #token: 1960, token usage: 0.01, gen throughput (token/s): 409.00, #queue-req: 0",
    ]
    (run,) = sglog.load(write(tmp_path, "old.log", lines))
    ts = run.decode.get_column("ts").to_list()
    assert ts == sorted(ts)
    assert (ts[2] - ts[1]).total_seconds() == 8
    assert ts[0].day != ts[3].day
    assert run.decode.get_column("ts_has_date").to_list() == [False] * 4


def test_eagle3_story_memory_budget_is_exact():
    (run,) = sglog.load(STORY / "eagle3-oom-auto.log")
    mem = run.memory
    assert mem.total_gb == pytest.approx(94.04, abs=0.005)
    assert mem.target_weights_gb == pytest.approx(72.33)
    assert mem.avail_after_weights_gb == pytest.approx(21.71)
    assert mem.mem_fraction_static == pytest.approx(0.76)
    assert mem.mem_fraction_static_origin == "auto"
    assert mem.static_pool_gb == pytest.approx(94.04 * 0.76, abs=0.02)
    assert mem.static_pool_gb < mem.target_weights_gb  # the weights alone exceed the static pool
    assert mem.weight_share == pytest.approx((94.04 - 21.71) / 94.04, abs=1e-3)
    assert mem.kv_gb is None and mem.draft_weights_gb is None  # never reached: not guessed
    assert run.spec["algorithm"] == "EAGLE3"
    assert run.origin("cuda_graph_max_bs") == "explicit"
    assert run.ending.status == "crashed"
    assert len(run.startup.phases["weight_load"].per_rank) == 8


def test_story_baseline_kv_and_graphs():
    (run,) = sglog.load(STORY / "baseline-cgbs512.log")
    mem = run.memory
    assert mem.kv_tokens and mem.kv_gb and mem.cuda_graph_gb
    assert mem.bytes_per_kv_token == pytest.approx(70272, rel=0.02)
    assert run.origin("cuda_graph_max_bs") == "auto"
    stats = timeline.decode_stats(run)
    assert stats["p50"] == pytest.approx(82.0, abs=0.6)
    assert stats["warmup_rows"] > 0


def test_timeline_windows_on_a_real_log():
    (run,) = sglog.load(REAL / "019-deepseek-r1-w4a8-ascend-npu-tp16-dp4-ep-eagle-benchmark.log")
    w = timeline.windows(run, "1m")
    assert w.height > 0
    assert list(w.columns) == list(sglog.schema.WINDOW_COLUMNS) if hasattr(sglog, "schema") else True
    assert w.get_column("n_decode").sum() == run.decode.height
    assert w.get_column("n_prefill").sum() == run.prefill.height
    dec = w.filter(pl.col("n_decode") > 0)
    assert (dec.get_column("decode_tps_p10") <= dec.get_column("decode_tps_p90")).all()
    assert dec.get_column("accept_len_mean").drop_nulls().len() > 0


def test_warmup_end_over_growing_prefixes_equals_the_whole_rolling_median():
    """steady_mask's warm-up end (first row whose next 10 rows' median reaches 90% of the
    reference) is searched over growing prefixes; it equals the one-pass answer."""
    import random

    rnd = random.Random(7)
    for _ in range(200):
        n = rnd.choice([20, 21, 4095, 4096, 4105, 40000])
        cut = rnd.randint(0, n)
        s = pl.Series([rnd.random() * 10 if i < cut else 100 + rnd.random() for i in range(n)])
        level = rnd.choice([90.0, 50.0, 5.0, 1000.0])
        hits = (s.rolling_median(window_size=10).shift(-9) >= level).arg_true()
        assert timeline._warmup_end(s, level) == (int(hits[0]) if hits.len() else 0), (n, cut, level)


def test_runs_and_timeline_commands(tmp_path):
    path = write(tmp_path, "x.log", startup("2026-02-23", 0, range(2)) + [decode("2026-02-23", 30 + i, 400 + i) for i in range(12)])
    r = CliRunner().invoke(app, ["runs", path, "--format", "json"])
    assert r.exit_code == 0, r.output
    doc = json.loads(r.output)
    assert doc["runs"][0]["ending"]["status"] == "serving"
    assert doc["runs"][0]["memory"]["kv_tokens"] == 385953
    out = tmp_path / "t.parquet"
    r = CliRunner().invoke(app, ["timeline", path, "--window", "10s", "--format", "parquet", "-o", str(out)])
    assert r.exit_code == 0, r.output
    assert pl.read_parquet(out).get_column("n_decode").sum() == 12
    r = CliRunner().invoke(app, ["timeline", path, "--window", "ten"])
    assert r.exit_code != 0


# ---------------------------------------------------------------- the per-kind index


def _reference_split_points(events) -> list[int]:
    """_split_points as a plain loop stepping through every event (the index only skips kinds
    that cannot move the splitter)."""
    from sglog.runs.build import _Splitter

    sp = _Splitter()
    for e in events:
        sp.step(e)
    return sorted(set(sp.starts))


def test_split_points_equal_a_loop_over_every_event():
    import random
    from types import SimpleNamespace

    from sglog.events import Rank
    from sglog.runs.build import _split_points

    rnd = random.Random(7)
    kinds = [
        "comment",
        "blank",
        "launch_command",
        "server_args",
        "init_dist_begin",
        "init_dist_end",
        "weight_load_begin",
        "weight_load_end",
        "server_ready",
        "sigquit",
        "scheduler_dead",
        "oom",
        "traceback",
        "retraction",
        "long_gc",
        "uvicorn_log",
        "memory_pool_end",
    ]
    ranks = [None, Rank.parse(" TP0"), Rank.parse(" TP1")]
    for _ in range(400):
        events = [SimpleNamespace(kind=rnd.choice(kinds), line=i + 1, rank=rnd.choice(ranks)) for i in range(rnd.randint(0, 40))]
        log = SimpleNamespace(events=events)
        assert _split_points(log) == _reference_split_points(events)


def test_run_kind_index_equals_plain_loops():
    import random
    from types import SimpleNamespace

    from sglog.runs.build import Run

    rnd = random.Random(11)
    kinds = ["a", "b", "c", "d"]
    words = ["PCIe", "pcie", "Fail", "İx", "ß", "\n", "needle", "NEEDLE", "x"]
    for _ in range(300):
        events = [SimpleNamespace(kind=rnd.choice(kinds), text=" ".join(rnd.choice(words) for _ in range(rnd.randint(0, 4))) or None) for _ in range(rnd.randint(0, 25))]
        run = Run(1, ["f.log"], {}, events, pl.DataFrame(), pl.DataFrame())
        for ks in (("a",), ("b", "d"), ("d", "a", "c"), ("z",)):
            assert run.events_of(*ks) == [e for e in events if e.kind in ks]
            assert run.has(*ks) == any(e.kind in ks for e in events)
        assert run.first("c") == next((e for e in events if e.kind == "c"), None)
        # the screens for rare words: each kind's texts, joined and lower-cased; `mentions` never
        # misses a text that holds the needle, and with an ASCII needle it is true exactly when a
        # text holds it in some case (a screen: rules then check the events themselves)
        assert run.lowered_texts() == {k: "\n".join(e.text for e in events if e.kind == k and e.text).lower() for k in {e.kind for e in events}}
        for needle in ("PCIe", "fail", "NEEDLE", "İx", "ß", "absent"):
            got = run.mentions(needle)
            texts = [e.text for e in events if e.text]
            assert got or not any(needle in t for t in texts)
            if needle.isascii():
                assert got == any(needle.lower() in t.lower() for t in texts)
            else:
                assert got == any(needle in t for t in texts)


def prefill(day: str, t: int, new: int) -> str:
    return f"[{day} 10:{t // 60:02d}:{t % 60:02d} TP0] Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: 0, token usage: 0.01, #running-req: 0, #queue-req: 0"


def test_batch_rows_kind_by_kind_and_per_run_slices(tmp_path):
    """The batch frame is kind by kind; a run's decode/prefill rows (slices of it) are exactly its
    rows of that kind in line order, and the rows before a line are found across kinds."""
    from sglog.rules import facts

    day = "2026-02-23"
    serve = lambda t0: [x for i in range(6) for x in (prefill(day, t0 + 2 * i, 100 + i), decode(day, t0 + 2 * i + 1, 300 + i))]  # noqa: E731
    lines = startup(day, 0, range(2)) + serve(30) + startup(day, 100, range(2)) + serve(150)
    path = write(tmp_path, "two.log", lines)
    runs = sglog.load(path)
    assert len(runs) == 2
    for run in runs:
        b = run.batches
        assert b.get_column("kind").to_list() == ["decode_batch"] * 6 + ["prefill_batch"] * 6
        for kind, frame in (("decode_batch", run.decode), ("prefill_batch", run.prefill)):
            want = b.filter(pl.col("kind") == kind).sort("line")
            assert frame.get_column("line").to_list() == want.get_column("line").to_list()
            assert frame.height == 6 and frame.get_column("kind").unique().to_list() == [kind]
        assert "new_token" not in run.decode.columns and "gen_throughput" not in run.prefill.columns
        assert run.decode.get_column("gen_throughput").to_list() == [300.0 + i for i in range(6)]
        # the last two batch rows before the run's last decode line: a decode and a prefill line
        last = run.decode.get_column("line")[-1]
        tail, counts = facts.batches_before(run, path, last, 2)
        assert [r["kind"] for r in tail] == ["decode_batch", "prefill_batch"]
        assert [r["line"] for r in tail] == [last - 2, last - 1]
        assert counts == {"decode_batch": 5, "prefill_batch": 6}
    # a run of two files is in time order: its rows of a kind are picked out (a copy)
    n0 = startup(day, 0, range(0, 8), tp=16, nn=2, nr=0) + serve(40)
    n1 = startup(day, 1, range(8, 16), tp=16, nn=2, nr=1) + [decode(day, 42, 999.0)]
    run = sglog.load([write(tmp_path, "node0.log", n0), write(tmp_path, "node1.log", n1)])[0]
    assert run.decode.height == 7 and run.prefill.height == 6
    assert run.decode.get_column("gen_throughput").to_list() == [300.0, 999.0, 301.0, 302.0, 303.0, 304.0, 305.0]


def test_several_files_rows_of_one_second_stay_in_line_order(tmp_path):
    """A run of two node files is in time order; within a second a file's rows keep their line
    order (its own frame is kind by kind), and the batch before an OOM is the decode line just
    before it, not a prefill line of the same second (review of the kind-by-kind frame)."""
    from sglog.diagnose import diagnose_runs
    from sglog.rules import facts

    day = "2026-02-23"
    n0 = startup(day, 0, range(0, 8), tp=16, nn=2, nr=0) + [
        prefill(day, 65, 16384),
        decode(day, 65, 412.0, running=96),
        f"[{day} 10:01:06 TP0] Scheduler hit an exception: Traceback (most recent call last):",
        '  File "/sgl-workspace/sglang/python/sglang/srt/managers/scheduler.py", line 1100, in event_loop_normal',
        "    result = self.run_batch(batch)",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB. GPU 0 has a total capacity of 79.14 GiB of which 1.10 GiB is free.",
        "",
        f"[{day} 10:01:06] Received sigquit from a child process. It usually means the child failed.",
    ]
    n1 = startup(day, 1, range(8, 16), tp=16, nn=2, nr=1)
    p0 = write(tmp_path, "node0.log", n0)
    run = sglog.load([p0, write(tmp_path, "node1.log", n1)])[0]
    rows = run.batches.select("kind", "line").rows()
    assert rows == sorted(rows, key=lambda r: r[1]) and [k for k, _l in rows] == ["prefill_batch", "decode_batch"]
    oom = n0.index(next(x for x in n0 if "Scheduler hit an exception" in x)) + 1
    tail, counts = facts.batches_before(run, p0, oom, 1)
    assert [r["kind"] for r in tail] == ["decode_batch"] and counts == {"prefill_batch": 1, "decode_batch": 1}
    f = next(x for x in diagnose_runs([run]) if x.name == "runtime-oom")
    assert [(e.line, e.note) for e in f.evidence if e.note and "last batch" in e.note] == [(oom - 1, "last batch before the OOM")]


def test_dateless_rows_of_several_files_roll_over_by_line(tmp_path):
    """Date-less times roll over midnight in line order within each file (a file's frame is kind
    by kind: going from its last decode row back to its first prefill row is no midnight)."""
    from sglog.rules import facts

    head = [x.replace("23:55", "09:55") for x in (REAL.parent / "constructed" / "midnight-0.3.log").read_text().splitlines()[:21]]  # (through the first model-info request)
    pre = "[{t} TP0] Prefill batch. #new-seq: 1, #new-token: 7, #cached-token: 0, cache hit rate: 0.00%, #running-req: 0, #queue-req: 0"
    dec = "[{t} TP0] Decode batch. #running-req: 4, #token: 4399, token usage: 0.01, gen throughput (token/s): 590.18, #queue-req: 0"
    body = [x.format(t=f"{10 + m // 60:02d}:{m % 60:02d}:00") for m in range(0, 130, 5) for x in (pre, dec)]
    c = write(tmp_path, "c.log", head + ["[10:00:00] The server is fired up and ready to roll!"] + body)
    d = write(tmp_path, "d.log", [x.replace("random_seed=", "random_seed=2") for x in head] + [dec.format(t="12:06:00")])
    runs = sglog.load([c, d])
    run = runs[0]
    assert len(run.files) == 2
    assert run.batches.get_column("ts").dt.day().unique().to_list() == [1]
    assert facts.serving_minutes(run) == 126.0
    assert str(run.ending.last_ts) == "1900-01-01 12:06:00"
    assert timeline.windows(run, "1h").height == 3


def test_the_current_phase_is_the_one_begun_last_in_time():
    """DFLASH loads its draft model and pool before the target's CUDA graphs: a log that ends in the
    target's capture ended there, not in the draft's (corpus 016: `Capture target prefill CUDA
    graph begin` is its last startup line)."""
    (run,) = sglog.load(next(REAL.glob("016-*.log")))
    assert run.ending.phase == "cuda_graph_capture" and run.ending.describe() == "log ends during CUDA-graph capture"


def test_weight_loads_without_rank_tags_are_one_load_per_model(tmp_path):
    """Lines without rank tags are every rank's: two ranks' begins are one load (not the target's
    and a draft's), from the first begin to the last end; a begin after every end is the next load."""
    log = tmp_path / "x.log"
    log.write_text(
        "[2026-02-23 10:00:00] Load weight begin. avail mem=60.00 GB\n"
        "[2026-02-23 10:00:01] Load weight begin. avail mem=60.00 GB\n"
        "[2026-02-23 10:05:00] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=40.00 GB, mem usage=20.00 GB.\n"
        "[2026-02-23 10:09:00] Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=40.00 GB, mem usage=20.00 GB.\n"
        "[2026-02-23 10:09:30] Load weight begin. avail mem=38.00 GB\n"
        "[2026-02-23 10:09:40] Load weight end. type=LlamaForCausalLMEagle3, dtype=torch.bfloat16, avail mem=37.00 GB, mem usage=1.00 GB.\n",
        encoding="utf-8",
    )
    (run,) = sglog.load(log)
    phases = run.startup.phases
    assert phases["weight_load"].duration == 540.0 and phases["draft_weight_load"].duration == 10.0
    assert run.memory.target_weights_gb == 20.0 and run.memory.draft_weights_gb == 1.0
