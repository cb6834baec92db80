"""Hostile and broken input: one-line errors, exit codes, never a traceback, never a lost line."""

from __future__ import annotations

import gzip
import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
SGLOG = [sys.executable, "-m", "sglog"]

DECODE = "[2026-02-23 10:16:52 TP0] Decode batch, #running-req: 8, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0"
READY = "[2026-02-23 10:15:29] The server is fired up and ready to roll!"
TB = [
    "[2026-02-23 10:15:13 TP0] Scheduler hit an exception: Traceback (most recent call last):",
    '  File "/sglang/srt/managers/scheduler.py", line 3120, in run_scheduler_process',
    "    scheduler = Scheduler(",
    "                ^^^^^^^^^^",
    "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.",
]
PNG = b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 8


def run(*args: str, stdin: bytes | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    e = dict(os.environ, NO_COLOR="1", COLUMNS="200")
    e.update(env or {})
    return subprocess.run(SGLOG + list(args), input=stdin, capture_output=True, env=e, timeout=120)


def assert_clean_error(p: subprocess.CompletedProcess, code: int, needle: str) -> None:
    err = p.stderr.decode()
    assert p.returncode == code, (p.returncode, err)
    assert "Traceback" not in err and "Traceback" not in p.stdout.decode()
    lines = [x for x in err.splitlines() if x.startswith("sglog: error:")]
    assert len(lines) == 1, err
    assert needle in lines[0], lines[0]


def stats(path: str | Path) -> dict:
    p = run("events", "--stats", "--format", "json", str(path))
    assert p.returncode == 0, p.stderr.decode()
    return json.loads(p.stdout)["files"][0]


# ------------------------------------------------------------ the bad-input matrix


def test_missing_path():
    assert_clean_error(run("events", "--stats", "/nonexistent/x.log"), 2, "no such file")
    assert_clean_error(run("diagnose", "/nonexistent/x.log"), 2, "no such file")


def test_directory(tmp_path):
    assert_clean_error(run("diagnose", str(tmp_path)), 2, "directory")


def test_binary_file(tmp_path):
    p = tmp_path / "chart.png"
    p.write_bytes(PNG)
    assert_clean_error(run("diagnose", str(p)), 2, "binary")
    assert_clean_error(run("events", str(p)), 2, "binary")


def test_unreadable_file(tmp_path, monkeypatch):
    from sglog.errors import InputError
    from sglog.read import inputs

    p = tmp_path / "secret.log"
    p.write_text(READY + "\n")
    monkeypatch.setattr(inputs.os, "access", lambda *a, **k: False)
    with pytest.raises(InputError, match="permission denied"):
        inputs.open_source(str(p))


def test_empty_and_blank_only(tmp_path):
    empty = tmp_path / "empty.log"
    empty.write_text("")
    blank = tmp_path / "blank.log"
    blank.write_text("\n\n   \n\t\n")
    assert stats(empty)["lines"] == 0
    s = stats(blank)
    assert s["lines"] == 4 and s["blank"] == 4 and s["unparsed"] == 0
    assert_clean_error(run("diagnose", str(empty)), 2, "empty")
    assert_clean_error(run("diagnose", str(blank)), 2, "empty")


def test_invalid_utf8_in_the_middle_of_a_line(tmp_path):
    p = tmp_path / "bad.log"
    p.write_bytes(READY.encode() + b"\n" + DECODE.encode()[:40] + b"\xff\xfe\xc3" + DECODE.encode()[40:] + b"\n")
    s = stats(p)
    assert s["lines"] == 2
    out = run("events", "--format", "jsonl", str(p))
    assert out.returncode == 0
    texts = [json.loads(x)["text"] for x in out.stdout.decode().splitlines()]
    assert "\ufffd" in texts[1]


@pytest.mark.slow
def test_fifty_megabyte_single_line(tmp_path):
    p = tmp_path / "huge.log"
    p.write_bytes(b"[2026-02-23 10:15:00] " + b"x" * (50 << 20) + b"\n" + READY.encode() + b"\n")
    s = stats(p)
    assert s["lines"] == 2 and s["unparsed"] == 1
    assert s["kinds"].get("server_ready") == 1


def test_crlf_line_ends(tmp_path):
    lf = tmp_path / "lf.log"
    crlf = tmp_path / "crlf.log"
    body = [READY, DECODE, *TB, ""]
    lf.write_text("\n".join(body) + "\n")
    crlf.write_bytes(("\r\n".join(body) + "\r\n").encode())
    a, b = stats(lf), stats(crlf)
    assert a["kinds"] == b["kinds"] and a["unparsed"] == b["unparsed"] == 0


def test_ansi_coloured_output(tmp_path):
    p = tmp_path / "tty.log"
    p.write_text('[2026-02-23 10:16:40] \x1b[32mINFO\x1b[0m:     127.0.0.1:57114 - "\x1b[1mGET /health HTTP/1.1\x1b[0m" \x1b[32m200 OK\x1b[0m\n' + "\x1b[33m" + DECODE + "\x1b[0m\n")
    s = stats(p)
    assert s["unparsed"] == 0
    assert s["kinds"] == {"decode_batch": 1, "http_access": 1}


def test_cut_mid_line_and_mid_traceback(tmp_path):
    p = tmp_path / "cut.log"
    p.write_text(READY + "\n" + "\n".join(TB[:3]) + "\n" + DECODE[:50])  # no final newline, cut mid-line
    s = stats(p)
    assert s["lines"] == 5
    d = run("diagnose", "--format", "json", str(p))
    assert d.returncode in (0, 1, 2), d.stderr.decode()
    assert "Traceback" not in d.stderr.decode()


@pytest.mark.slow
def test_truncated_and_corrupt_gzip(tmp_path):
    good = gzip.compress(("\n".join([READY, DECODE]) + "\n").encode() * 2000)
    trunc = tmp_path / "t.log.gz"
    trunc.write_bytes(good[: len(good) // 2])
    corrupt = tmp_path / "c.log.gz"
    corrupt.write_bytes(good[:10] + b"\x00garbage" * 50)
    assert_clean_error(run("events", "--stats", str(trunc)), 2, "gzip")
    assert_clean_error(run("diagnose", str(corrupt)), 2, "gzip")
    whole = tmp_path / "w.log.gz"
    whole.write_bytes(good)
    assert stats(whole)["lines"] == 4000
    # bad deflate data past the first block read (ISA-L has an error class of its own) and a bad CRC
    big = gzip.compress("".join(f"{READY}\n{DECODE.replace('#queue-req: 0', f'#queue-req: {i}')}\n" for i in range(200_000)).encode())
    for name, at in (("mid", len(big) // 2), ("crc", len(big) - 12)):
        bad = bytearray(big)
        for k in range(8):
            bad[at + k] ^= 0x5A
        p = tmp_path / f"{name}.log.gz"
        p.write_bytes(bytes(bad))
        assert_clean_error(run("diagnose", str(p)), 2, "gzip")


def test_gzip_without_isal_reads_the_same(tmp_path, monkeypatch):
    """.gz is inflated by ISA-L when it is installed, else by zlib: the same lines either way."""
    import builtins

    from sglog.read import inputs

    text = "".join(f"{READY}\n{DECODE}\n" for _ in range(3000))
    p = tmp_path / "x.log.gz"
    p.write_bytes(gzip.compress(text.encode()))
    src = inputs.open_source(str(p))
    with inputs._open_binary(src) as f:
        assert type(f).__module__.startswith("isal")  # (a dependency: pyproject.toml)
        fast = f.read()
    real_import = builtins.__import__

    def no_isal(name, *a, **kw):
        if name.startswith("isal"):
            raise ImportError(name)
        return real_import(name, *a, **kw)

    monkeypatch.setattr(builtins, "__import__", no_isal)
    with inputs._open_binary(src) as f:
        assert type(f).__module__ == "gzip"
        assert f.read() == fast == text.encode()
    assert inputs._decompress_errors() == (OSError, EOFError, __import__("zlib").error)


def test_zstd_input(tmp_path):
    import zstandard

    p = tmp_path / "x.log.zst"
    p.write_bytes(zstandard.ZstdCompressor().compress(("\n".join([READY, DECODE]) + "\n").encode()))
    assert stats(p)["kinds"] == {"decode_batch": 1, "server_ready": 1}


def test_stdin():
    p = run("events", "--stats", "--format", "json", "-", stdin=("\n".join([READY, DECODE]) + "\n").encode())
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["files"][0]["path"] == "-"


def test_not_an_sglang_log(tmp_path):
    vllm = tmp_path / "vllm.log"
    vllm.write_text(
        "\n".join(
            [
                "INFO 02-23 10:15:00 [api_server.py:1351] vLLM API server version 0.11.0",
                "INFO 02-23 10:15:01 [model_runner.py:1100] Loading model weights took 14.9595 GB",
                "INFO 02-23 10:15:09 [gpu_executor.py:122] # GPU blocks: 27896, # CPU blocks: 2048",
                "INFO 02-23 10:15:20 [metrics.py:345] Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 45.1 tokens/s",
            ]
            * 5
        )
        + "\n"
    )
    app = tmp_path / "app.log"
    app.write_text('2026-02-23T10:00:00Z level=info msg="listening" addr=:8080\n' * 30)
    for p, needle in ((vllm, "looks like vLLM's log, not SGLang's"), (app, "none of its 30 non-blank lines is recognised")):
        r = run("diagnose", str(p))
        assert_clean_error(r, 2, needle)


def test_interleaved_64_ranks(tmp_path):
    lines = []
    for step in range(3):
        for r in range(64):
            lines.append(f"[2026-02-23 10:15:{10 + step:02d} DP{r // 8} TP{r} EP{r}] Load weight begin. avail mem=78.50 GB")
    p = tmp_path / "64.log"
    p.write_text("\n".join(lines) + "\n")
    s = stats(p)
    assert s["unparsed"] == 0 and s["kinds"]["weight_load_begin"] == 192


def test_two_versions_in_one_file(tmp_path):
    p = tmp_path / "mixed.log"
    p.write_text("[10:16:52 TP0] Decode batch. #running-req: 8, #token: 1840, token usage: 0.01, gen throughput (token/s): 412.37, #queue-req: 0\n" + DECODE + "\n")
    s = stats(p)
    assert s["unparsed"] == 0 and s["kinds"]["decode_batch"] == 2
    assert run("diagnose", str(p)).returncode in (0, 1)


def test_timestamps_going_backwards(tmp_path):
    p = tmp_path / "back.log"
    p.write_text(DECODE + "\n" + DECODE.replace("10:16:52", "09:00:00") + "\n" + DECODE.replace("10:16:52", "10:17:00") + "\n")
    assert stats(p)["unparsed"] == 0
    r = run("diagnose", "--format", "json", str(p))
    assert r.returncode in (0, 1), r.stderr.decode()
    json.loads(r.stdout)


def test_internal_errors_have_their_own_code_and_no_traceback(tmp_path):
    p = tmp_path / "x.log"
    p.write_text(READY + "\n")
    code = (
        "import sys, sglog.read.parse as P\n"
        "def boom(*a, **k):\n"
        "    secret = 'sk-live-123'\n"
        "    raise ValueError('kaboom')\n"
        "P.parse_file = boom\n"
        "P.parse_source = boom\n"
        "import sglog.runs.build; sglog.runs.build.parse_file = boom\n"
        "import sglog.cli.events\n"
        "from sglog.cli import main\n"
        f"sys.argv = ['sglog', 'events', {str(p)!r}]\n"
        "main()\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=60)
    err = r.stderr.decode()
    assert r.returncode == 70, err
    assert "Traceback" not in err and "sk-live-123" not in err
    assert err.startswith("sglog: error: internal error")


def test_usage_errors_are_one_line():
    for args in (["events", "--format", "nope", str(STORY)], ["events", "--kind", "no_such_kind", str(STORY)], ["no-such-command"]):
        r = run(*args)
        assert r.returncode == 2, (args, r.stderr.decode())
        assert "Traceback" not in r.stderr.decode() and r.stderr.decode().count("sglog: error:") == 1


# ------------------------------------------------------------ every fixture: never the internal-error code


def _all_fixture_logs() -> list[Path]:
    return sorted(p for p in (FIXTURES / "logs").rglob("*") if p.is_file() and p.suffix in (".log", ".gz", ".zst"))


@pytest.mark.slow
@pytest.mark.parametrize("path", _all_fixture_logs(), ids=lambda p: str(p.relative_to(FIXTURES)))
def test_diagnose_every_fixture_never_internal_error(path):
    r = run("diagnose", "--format", "json", str(path))
    assert r.returncode in (0, 1, 2), r.stderr.decode()[-2000:]
    assert "Traceback" not in r.stderr.decode()


@pytest.mark.slow
def test_stdin_copy_is_removed_and_output_complete(tmp_path):
    """The console script exits without interpreter teardown (sglog.cli.run): its output is still
    complete, its exit code right, and the temporary copy of stdin gone."""
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    log = "\n".join([DECODE] * 50 + [READY]) + "\n"
    p = run("events", "--stats", "--format", "json", "-", stdin=log.encode(), env={"TMPDIR": str(tmp)})
    assert p.returncode == 0, p.stderr.decode()
    stats = json.loads(p.stdout)
    files = stats if isinstance(stats, list) else stats.get("files", [stats])
    assert sum(f["lines"] for f in files) == 51
    assert not [f for f in tmp.iterdir() if f.name.startswith("sglog-stdin-")]  # (grammar caches may be written there)
    p = run("diagnose", "-q", str(FIXTURES / "logs" / "story" / "eagle3-oom-auto.log"))
    assert p.returncode == 1 and "draft-model-exceeds-static-pool" in p.stdout.decode()


# ------------------------------------------------------------ the input layer: opened once, streamed, never silent

STORY = FIXTURES / "logs" / "story" / "eagle3-oom-auto.log"


def _line_count(path: Path) -> int:
    data = path.read_bytes()
    return data.count(b"\n") + (not data.endswith(b"\n") and bool(data))


def test_a_pipe_loses_no_line():
    """``<(cat log)`` is a pipe named /dev/fd/N: read once, every line counted, the same findings."""
    want = _line_count(STORY)
    p = subprocess.run(["bash", "-c", f"{' '.join(SGLOG)} events --stats --format json <(cat {STORY})"], capture_output=True, timeout=120, env=dict(os.environ, NO_COLOR="1"))
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["files"][0]["lines"] == want
    a = subprocess.run(["bash", "-c", f"{' '.join(SGLOG)} diagnose --format json <(cat {STORY})"], capture_output=True, timeout=120)
    b = run("diagnose", "--format", "json", str(STORY))
    fa, fb = json.loads(a.stdout)["findings"], json.loads(b.stdout)["findings"]
    assert [(f["code"], [(e["line"], e["text"]) for e in f["evidence"]]) for f in fa] == [(f["code"], [(e["line"], e["text"]) for e in f["evidence"]]) for f in fb]


def test_a_fifo_written_at_once_is_read_whole(tmp_path):
    fifo = tmp_path / "log.fifo"
    os.mkfifo(fifo)
    writer = subprocess.Popen(["bash", "-c", f"cat {STORY} > {fifo}"])
    try:
        p = run("events", "--stats", "--format", "json", str(fifo))
    finally:
        writer.wait(timeout=30)
    assert p.returncode == 0, p.stderr.decode()
    assert json.loads(p.stdout)["files"][0]["lines"] == _line_count(STORY)


def test_each_input_is_opened_once(tmp_path):
    """diagnose opens its log once: the read-ahead, the parse and the evidence text share the descriptor."""
    code = (
        "import os, sys\n"
        "opens = []\n"
        "real = os.open\n"
        "def counting(path, *a, **k):\n"
        "    if str(path).endswith('eagle3-oom-auto.log'): opens.append(path)\n"
        "    return real(path, *a, **k)\n"
        "os.open = counting\n"
        "from sglog.cli import main\n"
        f"sys.argv = ['sglog', 'diagnose', '--format', 'json', {str(STORY)!r}]\n"
        "try:\n    main()\n"
        "finally:\n    sys.stderr.write(f'OPENS={len(opens)}\\n')\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert r.returncode == 1, r.stderr.decode()
    assert "OPENS=1" in r.stderr.decode()
    assert all(e["text"] for f in json.loads(r.stdout)["findings"] for e in f["evidence"] if e["line"])


@pytest.mark.slow
def test_truncated_zstd_is_an_error(tmp_path):
    import zstandard

    data = STORY.read_bytes() * 20
    whole = zstandard.ZstdCompressor().compress(data)
    for cut in (len(whole) // 2, len(whole) - 3):
        p = tmp_path / f"cut{cut}.log.zst"
        p.write_bytes(whole[:cut])
        assert_clean_error(run("events", "--stats", str(p)), 2, "truncated zstd")
        assert_clean_error(run("diagnose", str(p)), 2, "truncated zstd")
    two = tmp_path / "two-frames.log.zst"  # (concatenated frames, as pzstd writes them, are one log)
    two.write_bytes(whole + zstandard.ZstdCompressor().compress(data))
    assert stats(two)["lines"] == 2 * data.count(b"\n")


def test_truncated_gzip_through_a_pipe_is_an_error():
    good = gzip.compress(STORY.read_bytes() * 20)
    p = run("events", "--stats", "-", stdin=good[: len(good) // 2])
    assert_clean_error(p, 2, "truncated gzip")


def test_stdin_is_streamed_not_spooled(tmp_path):
    """stdin is read as it comes: no copy in the temporary folder (an unwritable one does not matter)."""
    tmp = tmp_path / "ro"
    tmp.mkdir()
    tmp.chmod(0o500)
    try:
        p = run("diagnose", "--format", "json", "-", stdin=STORY.read_bytes(), env={"TMPDIR": str(tmp)})
        assert p.returncode == 1, p.stderr.decode()
        doc = json.loads(p.stdout)
        assert doc["coverage"]["lines"] == _line_count(STORY)
        assert all(e["text"] for f in doc["findings"] for e in f["evidence"] if e["line"])  # (from the kept copy)
        assert not any(tmp.iterdir())
    finally:
        tmp.chmod(0o700)


def test_a_stream_keeps_a_bounded_copy(monkeypatch):
    """What a stream's reading keeps for later stages is bounded; past the bound the earlier lines
    are still served and a second reading is refused in one line."""
    from sglog.errors import InputError
    from sglog.read import inputs

    r, w = os.pipe()
    data = b"".join(f"line {i} {os.urandom(8).hex()}\n".encode() for i in range(20000))
    pid = os.fork()
    if pid == 0:  # (the writer)
        os.close(r)
        os.write(w, data) if len(data) < 65536 else [os.write(w, data[i : i + 4096]) for i in range(0, len(data), 4096)]
        os._exit(0)
    os.close(w)
    monkeypatch.setattr(inputs, "KEEP_BYTES", 64 << 10)
    name = f"/dev/fd/{r}"
    try:
        src = inputs.open_source(name)
        assert src.stream is not None
        got = b"".join(inputs.iter_byte_chunks(src, 16 << 10))
        assert got == data
        assert inputs.read_lines(src, {1, 2}) == {1: data.split(b"\n")[0].decode(), 2: data.split(b"\n")[1].decode()}
        with pytest.raises(InputError, match="read only once"):
            list(inputs.iter_byte_chunks(src))
        import hashlib

        assert src.sha256() == hashlib.sha256(data).hexdigest()
    finally:
        os.waitpid(pid, 0)
        inputs._sources.pop(name, None)
        os.close(r)


# ------------------------------------------------------------ overflow and odd numbers


def _strict_json(text: str):
    def refuse(name):
        raise AssertionError(f"not JSON: {name}")

    return json.loads(text, parse_constant=refuse)


def _odd_number_logs(tmp_path: Path) -> dict[str, Path]:
    base = STORY.read_text()
    batch = "[2026-02-23 10:16:5{i} TP0] Decode batch, #running-req: {run}, #token: {tok}, token usage: 0.01, cuda graph: True, gen throughput (token/s): {tps}, #queue-req: 0"
    cases = {
        "e308": [batch.format(i=1, run="1e308", tok="99999999999999999999", tps="1e308"), batch.format(i=2, run="8", tok="9" * 5000, tps="1e400")],
        "rank20": ["[2026-02-23 10:16:53 TP99999999999999999999] Decode batch, #running-req: 1, #token: 9, token usage: 0.01, cuda graph: True, gen throughput (token/s): 1.0, #queue-req: 0"],
    }
    out = {}
    for name, extra in cases.items():
        p = tmp_path / f"{name}.log"
        p.write_text(base + "\n".join(extra) + "\n")
        out[name] = p
    nested = tmp_path / "nested.log"
    nested.write_text(base.replace("server_args=ServerArgs(", "server_args=ServerArgs(weird=" + "[" * 500 + "]" * 500 + ", ", 1))
    assert "[" * 500 in nested.read_text()
    out["nested"] = nested
    return out


@pytest.mark.slow
@pytest.mark.parametrize("command", ["diagnose", "events", "runs", "timeline", "report"])
def test_odd_numbers_never_crash(tmp_path, command):
    for name, path in _odd_number_logs(tmp_path).items():
        args = [command, str(path)] + (["-o", str(tmp_path / f"report-{name}")] if command == "report" else [])
        r = run(*args)
        err = r.stderr.decode()
        assert r.returncode in (0, 1), (name, r.returncode, err[-600:])
        assert "Traceback" not in err and "internal error" not in err, (name, err[-600:])


@pytest.mark.slow
def test_out_of_range_values_are_null_and_the_line_is_kept(tmp_path):
    logs = _odd_number_logs(tmp_path)
    want = _line_count(logs["e308"])
    assert stats(logs["e308"])["lines"] == want
    rows = [json.loads(x) for x in run("events", "--format", "jsonl", str(logs["e308"])).stdout.decode().splitlines()]
    last = [r for r in rows if r.get("kind") == "decode_batch"][-2:]
    assert last[0].get("running_req") is None and last[0]["gen_throughput"] == 1e308  # (1e308 in an integer field; a float may be that large)
    assert last[1].get("gen_throughput") is None and all(r.get("token") is None for r in last) and last[1]["running_req"] == 8
    assert stats(logs["nested"])["lines"] == _line_count(logs["nested"])


def test_numeric_converters_never_overflow():
    from sglog.events import guess, to_float, to_int

    assert to_int("1e308") is None and to_int("99999999999999999999") is None and to_int("9" * 5000) is None
    assert to_int("9223372036854775807") == 2**63 - 1 and to_int("12") == 12
    assert to_float("1e400") is None and to_float("1e308") == 1e308 and to_float("nan") is None
    assert guess("-9" * 3000) == "-9" * 3000 or guess("-9" * 3000) is None  # (not a number: kept as text)
    assert guess("9" * 5000) is None and guess("2.5") == 2.5


@pytest.mark.parametrize("width", ["0s", "-5s", "0m", "99999999999999999999s", "1.5s", "400d", "10", "s", "10 s"])
def test_timeline_window_must_be_sane(width):
    assert_clean_error(run("timeline", "-w", width, str(FIXTURES / "logs" / "story" / "baseline-cgbs128.log")), 2, "--window")


def test_diff_json_is_strict_json(tmp_path):
    """A throughput of 1.7e308 makes a mean overflow to inf: JSON null, never ``Infinity``."""
    base = (FIXTURES / "logs" / "story" / "baseline-cgbs128.log").read_text()
    import re

    a, b = tmp_path / "tiny.log", tmp_path / "huge.log"
    a.write_text(re.sub(r"gen throughput \(token/s\): [0-9.]+", "gen throughput (token/s): 0.000001", base))
    b.write_text(re.sub(r"gen throughput \(token/s\): [0-9.]+", "gen throughput (token/s): 1.7e308", base))
    r = run("diff", "--format", "json", str(a), str(b))
    assert r.returncode in (0, 1), r.stderr.decode()
    _strict_json(r.stdout.decode())
    assert "1.7e+308" in r.stdout.decode()  # (the input did reach the document)
    for fmt in ("json",):
        for cmd in (["diagnose"], ["runs"], ["events", "--stats"]):
            out = run(*cmd, "--format", fmt, str(b))
            _strict_json(out.stdout.decode())


def test_the_json_writer_writes_null_for_non_finite():
    from sglog import jsonout

    assert jsonout.dumps({"a": float("inf"), "b": [float("-inf"), float("nan"), 1.0], "c": (2.0,)}) == '{"a": null, "b": [null, null, 1.0], "c": [2.0]}'
    assert jsonout.dumps({"x": 1}, indent=2) == '{\n  "x": 1\n}'


# ------------------------------------------------------------ terminal injection

INJECT = "\x1b]0;pwned\x07\x1b[2J\x1bc\x9b31m\x1b[?1049h\x07\x08"


def _on_a_terminal(*args: str) -> tuple[int, bytes, bytes]:
    """Run sglog with stdout on a pseudo-terminal: (exit code, what the terminal got, stderr)."""
    import pty

    master, slave = pty.openpty()
    p = subprocess.Popen(SGLOG + list(args), stdout=slave, stderr=subprocess.PIPE, env=dict(os.environ, COLUMNS="200", NO_COLOR="1"))
    os.close(slave)
    out = b""
    while True:
        try:
            data = os.read(master, 1 << 16)
        except OSError:
            break
        if not data:
            break
        out += data
    err = p.stderr.read()
    p.wait(timeout=120)
    os.close(master)
    return p.returncode, out, err


def _hostile_bytes(blob: bytes) -> list[bytes]:
    return [x for x in (b"pwned", b"\x1b[2J", b"\x1bc", b"\xc2\x9b", b"\x1b[?1049h", b"\x07", b"\x08") if x in blob]


def test_escape_sequences_in_log_text_never_reach_the_terminal(tmp_path):
    p = tmp_path / "inject.log"
    text = STORY.read_text()
    p.write_text(f"[2026-02-23 10:15:29] The server is fired up and ready to roll! {INJECT}\n" + text.replace("Not enough memory", f"Not enough{INJECT} memory"))
    for args in (["diagnose"], ["events"], ["events", "--stats"], ["runs"], ["diagnose", "--format", "github"]):
        code, out, err = _on_a_terminal(*args, str(p))
        assert code in (0, 1), (args, err)
        assert out and not _hostile_bytes(out), (args, _hostile_bytes(out))
        assert not _hostile_bytes(err), (args, err)


def test_a_newline_in_a_file_name_cannot_forge_an_error_line(tmp_path):
    name = str(tmp_path / "x\nsglog: error: forged\x1b[2J.log")
    r = run("diagnose", name)
    lines = r.stderr.decode().splitlines()
    assert r.returncode == 2 and len(lines) == 1, lines
    assert lines[0].startswith("sglog: error: '") and "\\n" in lines[0] and "\x1b" not in lines[0]


def test_the_sanitiser():
    from sglog.textsafe import clean, one_line, quote

    assert clean("a\x1b]2;t\x1b\\b\x1bPq#0\x1b\\c\x9d0;t\x9cd\x1b7e\x7f\x00f\tg\n") == "abcde" + "f\tg\n"
    assert clean("unterminated \x1b]0;title") == "unterminated "
    assert clean("\x1b[38;5;196mx\x1b[0m\x1b[5A", keep_sgr=True) == "\x1b[38;5;196mx\x1b[0m"
    assert clean("plain text ünïcödé") == "plain text ünïcödé"
    assert one_line("a\r\nb\x1b[2J") == "a\\nb"
    assert quote("/var/log/x.log") == "/var/log/x.log" and quote("x\n.log") == "'x\\n.log'"


# ------------------------------------------------------------ outputs: one writer for every -o


def test_an_interrupted_or_failed_write_leaves_the_old_file(tmp_path):
    import errno

    from sglog.cli import output

    target = tmp_path / "out.parquet"
    target.write_bytes(b"the good file")

    def interrupted(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise KeyboardInterrupt

    def disk_full(tmp: Path) -> None:
        tmp.write_bytes(b"half")
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(KeyboardInterrupt):
        output.write_with(target, interrupted)
    with pytest.raises(output.OutputError, match="no space left"):
        output.write_with(target, disk_full)
    assert target.read_bytes() == b"the good file"
    assert [p.name for p in tmp_path.iterdir()] == ["out.parquet"]  # (no temporary file left)
    output.write_text(target, "new")
    assert target.read_text() == "new" and oct(target.stat().st_mode & 0o777) == oct(0o666 & ~_umask())


def _umask() -> int:
    m = os.umask(0)
    os.umask(m)
    return m


def test_events_never_writes_onto_its_input(tmp_path):
    log = tmp_path / "server.log"
    log.write_bytes(STORY.read_bytes())
    for fmt in ("jsonl", "csv", "parquet"):
        assert_clean_error(run("events", "-f", fmt, "-o", str(log), str(log)), 2, "refusing to write over an input")
    link = tmp_path / "link.log"
    link.symlink_to(log)
    assert_clean_error(run("events", "-f", "jsonl", "-o", str(log), str(link)), 2, "refusing to write over an input")
    assert log.read_bytes() == STORY.read_bytes()


@pytest.mark.slow
def test_unwritable_outputs_are_usage_errors(tmp_path):
    assert_clean_error(run("events", "-f", "jsonl", "-o", "/proc/no/such/x.jsonl", str(STORY)), 2, "cannot")
    assert_clean_error(run("events", "-f", "parquet", "-o", "/sys/x.parquet", str(STORY)), 2, "cannot write")
    assert_clean_error(run("runs", "-f", "csv", "-o", "/sys/x.csv", str(STORY)), 2, "cannot write")
    assert_clean_error(run("events", "-f", "jsonl", "-o", str(tmp_path), str(STORY)), 2, "directory")
    good = tmp_path / "x.parquet"
    assert run("events", "-f", "parquet", "-o", str(good), str(STORY)).returncode == 0
    import polars as pl

    assert pl.read_parquet(good).height > 0 and not [p for p in tmp_path.iterdir() if "sglog-tmp" in p.name]


def test_report_removes_the_stale_files_of_an_earlier_report(tmp_path):
    out = tmp_path / "rep"
    out.mkdir()
    for name in ("serving.png", "serving.svg", "serving.vl.json", "startup.png", "notes.txt", "index.html"):
        (out / name).write_text("old")
    r = run("report", "--no-images", "--no-html", "-o", str(out), str(STORY))
    assert r.returncode == 0, r.stderr.decode()
    names = {p.name for p in out.iterdir()}
    assert "notes.txt" in names and "index.md" in names
    assert not names & {"serving.png", "serving.svg", "startup.png", "index.html"}
    assert (out / "serving.vl.json").read_text() != "old" if "serving.vl.json" in names else True


# ------------------------------------------------------------ small things


def _closed_stdout(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-c", " ".join(shlex.quote(a) for a in SGLOG + list(args)) + " >&-"], capture_output=True, timeout=120)


def test_closed_stdout_is_one_line_not_a_traceback(tmp_path):
    for args in (["events", str(STORY)], ["diagnose", str(STORY)], ["events", "--stats", "--format", "json", str(STORY)]):
        assert_clean_error(_closed_stdout(*args), 2, "stdout is closed")
    out = tmp_path / "e.jsonl"
    r = _closed_stdout("events", "-f", "jsonl", "-o", str(out), str(STORY))
    assert r.returncode == 0 and out.stat().st_size > 0, r.stderr.decode()


def test_backwards_timestamps_never_give_a_negative_startup_time(tmp_path):
    lines = STORY.read_text().splitlines()
    ready = "[2026-01-01 00:00:01] The server is fired up and ready to roll!"
    p = tmp_path / "back.log"
    p.write_text("\n".join(lines) + "\n" + ready + "\n")  # (ready years before the launch)
    r = run("runs", "--format", "json", str(p))
    assert r.returncode == 0, r.stderr.decode()
    for run_doc in json.loads(r.stdout)["runs"]:
        st = run_doc.get("startup") or {}
        assert st.get("total_s") is None or st["total_s"] >= 0
        for ph in st.get("phases", []):
            assert ph.get("duration_s") is None or ph["duration_s"] >= 0
            for rk in (ph.get("ranks") or {}).values():
                assert rk.get("duration_s") is None or rk["duration_s"] >= 0


def test_a_future_version_is_read_and_the_summary_says_so(tmp_path):
    import re

    from sglog.runs.formats import newest_release

    src = FIXTURES / "logs" / "real" / "019-deepseek-r1-w4a8-ascend-npu-tp16-dp4-ep-eagle-benchmark.log"
    p = tmp_path / "future.log"
    p.write_text(re.sub(r"(?m)^sglang( +)0\.5\.6\.post2", r"sglang\g<1>9.1.0", src.read_text()))
    r = run("diagnose", str(p))
    assert r.returncode in (0, 1), r.stderr.decode()
    assert f"SGLang 9.1.0 is newer than sglog knows: read with the formats of {newest_release()}" in r.stderr.decode().splitlines()[-1]
    assert "newer than sglog knows" not in run("diagnose", str(src)).stderr.decode()


# ------------------------------------------------------------ memory: refused early or streamed


@pytest.mark.slow
def test_a_gzip_of_newlines_is_refused_early(tmp_path):
    bomb = tmp_path / "bomb.log.gz"
    bomb.write_bytes(gzip.compress(b"\n" * (256 << 20), 9))  # (256 MiB of newlines in ~250 KB)
    r = run("diagnose", str(bomb))
    assert_clean_error(r, 2, "not a log sglog reads")


@pytest.mark.slow
def test_millions_of_one_character_lines_are_refused_early(tmp_path):
    p = tmp_path / "tiny.log"
    p.write_bytes(b"x\n" * 3_000_000)
    assert_clean_error(run("events", "--stats", str(p)), 2, "not a log sglog reads")


@pytest.mark.slow
def test_a_decompression_bomb_without_newlines_is_refused(tmp_path):
    p = tmp_path / "a.log.gz"
    p.write_bytes(gzip.compress(b"[2026-01-01 00:00:00] " + b"a" * (400 << 20), 9))
    assert_clean_error(run("events", "--stats", str(p)), 2, "decompression bomb")


def test_events_export_is_batched_and_the_same(tmp_path, monkeypatch):
    """The export writes a batch of rows at a time (EXPORT_BATCH); the file is the same as one frame's."""
    import polars as pl

    from sglog.cli import events as events_cmd
    from sglog.cli import main

    log = FIXTURES / "logs" / "story" / "baseline-cgbs128.log"
    outs = {}
    for batch in (7, 10**9):
        monkeypatch.setattr(events_cmd, "EXPORT_BATCH", batch)
        for fmt in ("parquet", "csv"):
            out = tmp_path / f"{batch}.{fmt}"
            try:
                main(["events", "-f", fmt, "-o", str(out), str(log)])
            except SystemExit as e:
                assert e.code in (0, None)
            outs[batch, fmt] = out
    a, b = pl.read_parquet(outs[7, "parquet"]), pl.read_parquet(outs[10**9, "parquet"])
    assert a.height == b.height > 1000 and a.equals(b.select(a.columns))
    assert outs[7, "csv"].read_text().splitlines()[1:] == outs[10**9, "csv"].read_text().splitlines()[1:]
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".sglog-")]


@pytest.mark.slow
def test_events_parquet_export_memory_is_bounded(tmp_path):
    """200k generated lines (~37 MB): the export held every row as a dict at once (8.5 GB for 1M
    lines); batched, these 200k peaked at ~1.1 GB, and ~400-500 MB once the rows' text is read
    from the file as they are written (1 GB: 1,185 MiB, benchmarks/NOTES.md).  Measured against
    ``events --stats`` on the same file in the same environment: the absolute peak of one run
    varied from 440 to 1,250 MB between a run alone and one in the whole suite."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import generate
    finally:
        sys.path.pop(0)
    log = generate.write_log(tmp_path / "g.log", 200_000)
    code = "import resource, sys\nfrom sglog.cli import main\ntry:\n    main(sys.argv[1:])\nexcept SystemExit as e:\n    assert not e.code, e.code\nprint(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)\n"
    env = dict(os.environ, _RJEM_MALLOC_CONF="dirty_decay_ms:0,muzzy_decay_ms:0")  # (live memory, not polars' allocator's cache)

    def peak(*args: str) -> float:
        r = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300, env=env)
        assert r.returncode == 0, r.stderr
        return int(r.stdout.split()[-1]) / 1024

    stats = peak("events", "--stats", str(log))
    export = peak("events", "-f", "parquet", "-o", str(tmp_path / "g.parquet"), str(log))
    # (the unbatched export added ~700 MB to the parse's own here, and 7 GB at 1M lines)
    assert export - stats < 600, (export, stats, sorted(k for k in os.environ if k.startswith(("SGLOG", "POLARS", "MALLOC", "_RJEM", "OMP", "RAYON"))))
