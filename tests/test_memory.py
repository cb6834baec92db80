"""Bounded memory (#28): the timeline's group-bys aggregate a block of groups at a time on
columns cut alike, and the evidence lines are found without splitting whole chunks; the
results are those of the one-shot forms.  Small sizes only: the 1 GB measurements are in
benchmarks/ (benchmarks/NOTES.md)."""

from __future__ import annotations

import gzip
import json
import os
import random
import subprocess
import sys
from datetime import datetime, timedelta
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from sglog import schema, timeline
from sglog.read.inputs import open_source, read_lines
from sglog.read.parse import parse_file
from sglog.runs.build import build_runs

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures" / "logs"
sys.path.insert(0, str(ROOT / "benchmarks"))
import generate  # noqa: E402

sys.path.pop(0)


def stacked(n: int, pieces: int, seed: int = 0) -> pl.DataFrame:
    """A frame as a parse stacks it: columns of many chunks, one column computed whole beside
    them (chunked apart), keys out of order, some null."""
    rng = random.Random(seed)
    t0 = datetime(2026, 2, 23, 10, 0, 0)
    rows = {
        "line": list(range(1, n + 1)),
        "ts": [None if rng.random() < 0.03 else t0 + timedelta(milliseconds=rng.randrange(600_000)) for _ in range(n)],
        "kind": [rng.choice(["decode_batch", "prefill_batch"]) for _ in range(n)],
        "v": [None if rng.random() < 0.1 else rng.random() * 100 for _ in range(n)],
        "k": [rng.randrange(50) for _ in range(n)],
    }
    whole = pl.DataFrame(rows, schema={"line": pl.Int64, "ts": pl.Datetime("ms"), "kind": pl.String, "v": pl.Float64, "k": pl.Int64})
    cuts = sorted(rng.sample(range(1, n), pieces - 1))
    parts = [whole.slice(a, b - a) for a, b in zip([0, *cuts], [*cuts, n])]
    frame = pl.concat(parts, rechunk=False)
    return frame.with_columns(pl.Series("flag", [rng.random() < 0.5 for _ in range(n)]))


AGGS = [
    pl.len().alias("n"),
    pl.col("v").median().alias("med"),
    pl.col("v").quantile(0.9, "linear").alias("p90"),
    pl.col("v").mean().alias("mean"),
    pl.col("v").filter(pl.col("kind") == "decode_batch").median().alias("dec_med"),
    pl.col("line").min().alias("first"),
    pl.col("flag").any().alias("any"),
]


@pytest.mark.parametrize("key", [pl.col("k").alias("g"), pl.col("ts").dt.truncate("7s").alias("g")])
@pytest.mark.parametrize("block", [1, 37, 1000, 10**9])
def test_grouped_in_blocks_is_one_group_by(monkeypatch, key, block):
    monkeypatch.setattr(timeline, "GROUP_ROWS", block)
    frame = stacked(3000, 40)
    assert len(set(map(tuple, (frame.get_column(c).chunk_lengths() for c in frame.columns)))) > 1  # (chunked apart)
    got = timeline.grouped(frame, key, AGGS)
    want = frame.lazy().group_by(key).agg(*AGGS).drop_nulls("g").sort("g").collect()
    assert got.height == want.height > 40
    assert_frame_equal(got, want, check_exact=True)


def test_aligned_cuts_every_column_alike_and_keeps_the_values():
    frame = stacked(2000, 25, seed=3)
    al = timeline.aligned(frame)
    lengths = {tuple(al.get_column(c).chunk_lengths()) for c in al.columns}
    assert len(lengths) == 1 and len(next(iter(lengths))) == 25
    assert_frame_equal(al, frame, check_exact=True)
    assert timeline.aligned(pl.DataFrame()).width == 0


def reference_windows(run, every: str) -> pl.DataFrame:
    """``timeline.windows`` as it was written before #28: the whole batch frame sorted, joined
    to the decode rows' steady flags and cut by group_by_dynamic."""
    b = run.batches
    d = timeline.decode_frame(run)
    steady = d.select("line", "file", "steady") if d.height and "file" in d.columns else None
    b = b.filter(pl.col("ts").is_not_null()).sort("ts", maintain_order=True)
    b = b.join(steady, on=["line", "file"], how="left") if steady is not None else b.with_columns(pl.lit(None, dtype=pl.Boolean).alias("steady"))
    if "token_usage" not in b.columns and "full_token_usage" in b.columns:
        b = b.with_columns(pl.col("full_token_usage").alias("token_usage"))
    elif "full_token_usage" in b.columns:
        b = b.with_columns(pl.coalesce("token_usage", "full_token_usage").alias("token_usage"))
    for col, dtype in (
        ("gen_throughput", pl.Float64),
        ("input_throughput", pl.Float64),
        ("running_req", pl.Int64),
        ("queue_req", pl.Int64),
        ("token_usage", pl.Float64),
        ("cuda_graph", pl.Boolean),
        ("accept_len", pl.Float64),
    ):
        if col not in b.columns:
            b = b.with_columns(pl.lit(None, dtype=dtype).alias(col))
    is_dec, is_pre = pl.col("kind") == "decode_batch", pl.col("kind") == "prefill_batch"
    agg = b.group_by_dynamic("ts", every=every, closed="left", label="left").agg(
        is_dec.sum().alias("n_decode"),
        is_pre.sum().alias("n_prefill"),
        pl.col("gen_throughput").filter(is_dec).quantile(0.10, "linear").alias("decode_tps_p10"),
        pl.col("gen_throughput").filter(is_dec).median().alias("decode_tps_p50"),
        pl.col("gen_throughput").filter(is_dec).quantile(0.90, "linear").alias("decode_tps_p90"),
        pl.col("input_throughput").filter(is_pre & (pl.col("input_throughput") > 0)).median().alias("prefill_tps_p50"),
        pl.col("running_req").max().alias("running_max"),
        pl.col("queue_req").max().alias("queue_max"),
        pl.col("token_usage").mean().alias("token_usage_mean"),
        pl.col("token_usage").max().alias("token_usage_max"),
        pl.col("cuda_graph").filter(is_dec).cast(pl.Float64).mean().alias("cuda_graph_share"),
        pl.col("accept_len").filter(is_dec).mean().alias("accept_len_mean"),
        pl.col("steady").filter(is_dec).any().alias("steady"),
    )
    return agg.rename({"ts": "window_start"})


def generated_run(tmp_path: Path, lines: int):
    log = generate.write_log(tmp_path / "g.log", lines, seed=5)
    return build_runs([parse_file(str(log), chunk_bytes=256 << 10)])[-1]  # (many chunks, as a big log has)


@pytest.mark.parametrize("every", ["10s", "7s", "1m", "90m", "2d"])
def test_windows_are_those_of_the_sorted_frame(tmp_path, monkeypatch, every):
    monkeypatch.setattr(timeline, "GROUP_ROWS", 5000)
    runs = [generated_run(tmp_path, 30_000), build_runs([parse_file(str(FIXTURES / "constructed" / f"node{i}.log")) for i in (0, 1)])[-1]]
    assert "file" in runs[1].batches.columns  # (a launch over two files: the steady flags are matched by file and line)
    for run in runs:
        got = timeline.windows(run, every)
        want = reference_windows(run, every)
        assert got.height == want.height > 0
        assert got.columns == list(schema.WINDOW_COLUMNS)
        # (a window's mean sums its rows in another order: equal to the last bits)
        assert_frame_equal(got.select(want.columns), want, check_exact=False, rel_tol=1e-12, abs_tol=1e-12)
    assert timeline.windows(runs[1], every).get_column("steady").any()


def test_timeline_of_a_log_whose_batch_lines_have_no_time():
    """Batch lines without a timestamp (corpus 007) gave no window but a polars error, exit 70."""
    log = FIXTURES / "real" / "007-fastrl-spec-decode-accept-len-cuda-graph-false.log"
    run = build_runs([parse_file(str(log))])[-1]
    assert run.batches.height and run.batches.get_column("ts").null_count() == run.batches.height
    assert timeline.windows(run, "10s").height == 0
    r = subprocess.run([sys.executable, "-m", "sglog", "timeline", "-f", "csv", str(log)], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "error" not in r.stderr, r.stderr


@pytest.mark.parametrize("seed", range(6))
def test_read_lines_gives_the_lines_asked_for(tmp_path, seed):
    rng = random.Random(seed)
    for trial in range(40):
        lines = ["".join(rng.choice("ab\r é\t") for _ in range(rng.randrange(40))) for _ in range(rng.randrange(80))]
        text = "\n".join(lines) + rng.choice(["", "\n"])
        path = tmp_path / f"{trial}.log{rng.choice(['', '.gz'])}"
        path.write_bytes(gzip.compress(text.encode()) if path.suffix == ".gz" else text.encode())
        physical = text.split("\n")[: len(text.split("\n")) - text.endswith("\n")] if text else []
        want = set(rng.sample(range(1, len(physical) + 3), min(len(physical) + 2, rng.randrange(12))))
        got = read_lines(open_source(str(path)), want, chunk_bytes=rng.choice([1, 5, 64, 1 << 20]))
        assert got == {k: physical[k - 1].rstrip("\r") for k in want if k <= len(physical)}, (text, want)


PROBE = """
import sys
def status(key):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key):
                return int(line.split()[1]) * 1024
def transient(fn):
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # (resets the peak)
    before = status("VmRSS")
    fn()
    return (status("VmHWM") - before) / size
from sglog.read.parse import parse_file
from sglog.runs.build import build_runs
from sglog import timeline
timeline.GROUP_ROWS = 10_000
run = build_runs([parse_file(sys.argv[1], chunk_bytes=1 << 20)])[-1]
size = run.batches.estimated_size()
print(transient(lambda: timeline.windows(run, "10s")), transient(lambda: timeline.decode_windows(run)), transient(lambda: timeline.batch_windows(run)))
"""


@pytest.mark.skipif(not os.access("/proc/self/clear_refs", os.W_OK), reason="needs Linux's /proc/self/clear_refs")
def test_the_windows_hold_a_fraction_of_the_batch_frame(tmp_path):
    """200k generated lines read in 1 MB chunks (a parse's many chunks, as a 1 GB log has):
    the timeline's windows held 3.6 times the batch frame more (sorted and joined copies), the
    series windows 0.7 times (one median over all rows); now 0.85 and 0.15."""
    log = generate.write_log(tmp_path / "g.log", 200_000, seed=3)
    env = dict(os.environ, _RJEM_MALLOC_CONF="dirty_decay_ms:0,muzzy_decay_ms:0")  # (polars' allocator gives freed pages back at once: live memory, not its cache)
    r = subprocess.run([sys.executable, "-c", PROBE, str(log)], capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, r.stderr
    windows, decode, batch = map(float, r.stdout.split())
    assert windows < 1.5, windows
    assert decode < 0.4 and batch < 0.4, (decode, batch)


# ------------------------------------------------------------------ the events exports


def export_inputs(tmp_path: Path) -> list[Path]:
    """Inputs whose lines the reader splits every way: CRLF ends, invalid UTF-8, a container
    runtime's prefix on some lines (an outer envelope), no newline at the end, gzip, zstd."""
    import zstandard

    story = (FIXTURES / "story" / "eagle3-oom-auto.log").read_bytes()
    lines = story.split(b"\n")
    mixed = [(b"2026-02-23T10:15:00.123456789Z stdout F " if i % 11 == 5 else b"") + line + (b"\xff\xfe bad" if i % 7 == 3 else b"") for i, line in enumerate(lines)]
    files = {
        "crlf.log": story.replace(b"\n", b"\r\n"),
        "mixed.log": b"\n".join(mixed),
        "docker.log": b"\n".join(b"2026-02-23T10:15:00.123456789Z stdout F " + line for line in lines),
        "no-newline.log": story.rstrip(b"\n"),
        "story.log.gz": gzip.compress(story),
        "story.log.zst": zstandard.ZstdCompressor().compress(story),
    }
    out = []
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
        out.append(tmp_path / name)
    out.append(generate.write_log(tmp_path / "g.log", 20_000, seed=2))
    return out


def test_an_exported_row_has_the_text_the_parse_would_have_kept(tmp_path):
    """A file is read for an export without its batch and access rows' text (it held 2 GB at
    1 GB); each row gets its lines of the file as it is written: the same text."""
    from sglog.cli.events import with_text

    for path in export_inputs(tmp_path):
        kept = list(parse_file(str(path), keep_text=True).iter_dicts())
        light = parse_file(str(path))
        assert not light.batches.height or "text" not in light.batches.columns
        got = list(with_text(light.iter_dicts(), light.source))
        assert len(got) == len(kept) > 100, path.name
        assert got == kept, path.name


def test_exports_of_nested_values_are_json_text_in_every_format(tmp_path, capsys, monkeypatch):
    """A line's outer envelopes (``wrappers``, a tuple) made a list column that CSV cannot hold:
    exit 70 on any log with a container prefix; corpus 224's ["gpu"] beside strings made the
    parquet export fail too."""
    from conftest import run_sglog

    docker = export_inputs(tmp_path)[2]
    for fmt in ("csv", "parquet"):
        code, _, err = run_sglog(capsys, monkeypatch, "events", "-f", fmt, "-o", str(tmp_path / f"d.{fmt}"), str(docker))
        assert code == 0, err
    csv = pl.read_csv(tmp_path / "d.csv", infer_schema_length=None)
    parquet = pl.read_parquet(tmp_path / "d.parquet")
    assert parquet.schema["wrappers"] == pl.String and csv.get_column("wrappers").drop_nulls().len() > 100
    assert [json.loads(v) for v in parquet.get_column("wrappers").drop_nulls()] == [json.loads(v) for v in csv.get_column("wrappers").drop_nulls()]
    assert all(isinstance(w, list) and w for w in map(json.loads, parquet.get_column("wrappers").drop_nulls()))
    log = FIXTURES / "real" / "224-v0213-mixtral-tp8-l4-gpu-prefix-startup-dies-after-warmup.log"
    code, _, err = run_sglog(capsys, monkeypatch, "events", "-f", "parquet", "-o", str(tmp_path / "224.parquet"), str(log))
    assert code == 0, err
    assert pl.read_parquet(tmp_path / "224.parquet").height == sum(1 for _ in parse_file(str(log)).iter_dicts())


@pytest.mark.skipif(not os.path.exists("/proc/self/status"), reason="needs Linux's /proc")
def test_an_export_holds_little_more_than_the_parse(tmp_path):
    """200k generated lines (37 MB): ``events -f parquet`` peaked 824 MB above ``events --stats``
    (the rows' text kept by the parse, a copy of the batch frame by kind, polars' frame of 100k
    row dicts); now ~150 MB (a 50k-row batch, built column by column)."""
    log = generate.write_log(tmp_path / "g.log", 200_000, seed=3)
    code = "import resource, sys\nfrom sglog.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    env = dict(os.environ, _RJEM_MALLOC_CONF="dirty_decay_ms:0,muzzy_decay_ms:0")  # (live memory, not polars' allocator's cache)

    def peak(*args: str) -> float:
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1]) / 1024

    base = peak("events", "--stats", str(log))
    for fmt in ("parquet", "csv", "jsonl"):
        more = peak("events", "-f", fmt, "-o", str(tmp_path / f"g.{fmt}"), str(log)) - base
        assert more < 350, (fmt, more)
