"""Outer envelopes (sglog/read/envelope.py): one case per wrapper shape and combination.

Every wrapped line is built from the wrapper's documented format (docker compose's padded
``name | ``, docker/kubectl ``--timestamps`` RFC 3339Nano, the CRI log format
``<time> <stream> <P|F> <msg>``, RFC 3164 / journalctl short formats, RFC 5424, Ray's worker
prefix ``(name pid=N[, ip=IP])``), around SGLang lines written from SGLang's format strings.
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sglog.read.envelope import SHAPES, Unwrapper, strip_outer

OWN = "[2025-06-26 07:25:31 DP4 TP4] Decode batch, #running-req: 5, #token: 20800, token usage: 0.29, #queue-req: 0"
MAIN = "[2025-06-26 07:25:31] The server is fired up and ready to roll!"
TS_CRI = "2025-03-07T10:11:12.123456789Z"

# (title, wrapped line, expected text, expected fields without "wrappers", expected wrappers)
POSITIVE = [
    ("compose v2", "sglang-1  | " + OWN, OWN, {"container": "sglang-1"}, ("compose",)),
    ("compose v1", "sglang_server_1  | " + OWN, OWN, {"container": "sglang_server_1"}, ("compose",)),
    ("compose longest name", "router | " + MAIN, MAIN, {"container": "router"}, ("compose",)),
    ("compose blank line", "sglang-1  | ", "", {"container": "sglang-1"}, ("compose",)),
    ("compose blank, space eaten", "sglang-1  |", "", {"container": "sglang-1"}, ("compose",)),
    ("compose coloured", "\x1b[36msglang-1  |\x1b[0m " + OWN, OWN, {"container": "sglang-1"}, ("compose",)),
    ("compose traceback line", 'svc  |   File "/x/scheduler.py", line 3, in f', '  File "/x/scheduler.py", line 3, in f', {"container": "svc"}, ("compose",)),
    ("docker --timestamps", TS_CRI + " " + OWN, OWN, {"outer_ts": TS_CRI}, ("docker_ts",)),
    ("docker ts, trailing zeros trimmed", "2025-03-07T10:11:12.1Z " + MAIN, MAIN, {"outer_ts": "2025-03-07T10:11:12.1Z"}, ("docker_ts",)),
    ("docker ts, whole second", "2025-03-07T10:11:12Z " + MAIN, MAIN, {"outer_ts": "2025-03-07T10:11:12Z"}, ("docker_ts",)),
    ("docker ts, blank line", TS_CRI, "", {"outer_ts": TS_CRI}, ("docker_ts",)),
    ("CRI full line", TS_CRI + " stdout F " + OWN, OWN, {"outer_ts": TS_CRI, "stream": "stdout", "cri_partial": False}, ("cri",)),
    ("CRI partial line", "2025-03-07T10:11:12.123456789+00:00 stderr P " + OWN, OWN, {"outer_ts": "2025-03-07T10:11:12.123456789+00:00", "stream": "stderr", "cri_partial": True}, ("cri",)),
    ("CRI empty line", TS_CRI + " stdout F ", "", {"outer_ts": TS_CRI, "stream": "stdout", "cri_partial": False}, ("cri",)),
    ("journald short", "Mar 07 10:11:12 gpu-node-3 python[1234]: " + OWN, OWN, {"outer_ts": "Mar 07 10:11:12", "host": "gpu-node-3", "process": "python", "pid": 1234}, ("syslog",)),
    ("syslog RFC 3164 padded day", "Mar  7 10:11:12 host sglang.sh[77]: " + MAIN, MAIN, {"outer_ts": "Mar  7 10:11:12", "host": "host", "process": "sglang.sh", "pid": 77}, ("syslog",)),
    (
        "syslog with priority, no pid",
        "<14>Mar  7 10:11:12 host sglang: " + MAIN,
        MAIN,
        {"syslog_priority": 14, "syslog_facility": 1, "syslog_severity": 6, "outer_ts": "Mar  7 10:11:12", "host": "host", "process": "sglang"},
        ("syslog",),
    ),
    ("journald short-precise", "Mar 07 10:11:12.345678 host python3[9]: " + OWN, OWN, {"outer_ts": "Mar 07 10:11:12.345678", "host": "host", "process": "python3", "pid": 9}, ("syslog",)),
    ("journald short-iso", "2025-03-07T10:11:12+0000 host python3[9]: " + OWN, OWN, {"outer_ts": "2025-03-07T10:11:12+0000", "host": "host", "process": "python3", "pid": 9}, ("syslog",)),
    ("journald short-unix", "1741342272.123456 host python3[9]: " + OWN, OWN, {"outer_ts": "1741342272.123456", "host": "host", "process": "python3", "pid": 9}, ("syslog",)),
    (
        "RFC 5424 nil fields",
        "<14>1 2025-03-07T10:11:12.123Z host python 1234 - - " + OWN,
        OWN,
        {"syslog_priority": 14, "syslog_facility": 1, "syslog_severity": 6, "outer_ts": "2025-03-07T10:11:12.123Z", "host": "host", "process": "python", "pid": 1234},
        ("rfc5424",),
    ),
    (
        "RFC 5424 structured data",
        '<165>1 2025-03-07T10:11:12Z h app 7 ID47 [ex@32473 iut="3" a="]"] ' + OWN,
        OWN,
        {
            "syslog_priority": 165,
            "syslog_facility": 20,
            "syslog_severity": 5,
            "outer_ts": "2025-03-07T10:11:12Z",
            "host": "h",
            "process": "app",
            "pid": 7,
            "msgid": "ID47",
            "structured_data": '[ex@32473 iut="3" a="]"]',
        },
        ("rfc5424",),
    ),
    ("wrapper logger, level", "2025-03-07 10:11:12,345 INFO " + OWN, OWN, {"outer_ts": "2025-03-07 10:11:12,345", "outer_meta": "INFO", "outer_level": "INFO"}, ("wrapper_log",)),
    (
        "wrapper logger, dashes",
        "2025-03-07 10:11:12,345 - verl.rollout - WARNING - " + MAIN,
        MAIN,
        {"outer_ts": "2025-03-07 10:11:12,345", "outer_meta": "verl.rollout - WARNING", "outer_level": "WARNING"},
        ("wrapper_log",),
    ),
    ("wrapper logger, no level", "2025-03-07 10:11:12 " + MAIN, MAIN, {"outer_ts": "2025-03-07 10:11:12"}, ("wrapper_log",)),
    ("wrapper bracketed time", "[2025-03-07 10:11:12] " + OWN, OWN, {"outer_ts": "2025-03-07 10:11:12"}, ("wrapper_bracket_ts",)),
    (
        "wrapper bracketed time and level",
        "[2025-03-07 10:11:12,345] [INFO] " + MAIN,
        MAIN,
        {"outer_ts": "2025-03-07 10:11:12,345", "outer_meta": "[INFO]", "outer_level": "INFO"},
        ("wrapper_bracket_ts",),
    ),
    ("python logging default", "INFO:rollout:" + OWN, OWN, {"outer_level": "INFO", "outer_logger": "rollout"}, ("pylog_basic",)),
    ("Ray actor", "(SGLangEngine pid=952, ip=10.0.0.1) " + OWN, OWN, {"ray_actor": "SGLangEngine", "ray_pid": 952, "ray_ip": "10.0.0.1"}, ("ray_actor",)),
    ("Ray actor, same node", "(SchedulerActor pid=123) " + OWN, OWN, {"ray_actor": "SchedulerActor", "ray_pid": 123}, ("ray_actor",)),
    ("Ray task, no name", "(pid=123) " + OWN, OWN, {"ray_pid": 123}, ("ray_actor",)),
    ("Ray actor __repr__", "(Worker(rank=3) pid=44, ip=fe80::1) " + OWN, OWN, {"ray_actor": "Worker(rank=3)", "ray_pid": 44, "ray_ip": "fe80::1"}, ("ray_actor",)),
    ("Ray Serve replica", "(ServeReplica:app:Llm pid=5) " + MAIN, MAIN, {"ray_actor": "ServeReplica:app:Llm", "ray_pid": 5}, ("ray_actor",)),
    ("Ray coloured", "\x1b[36m(SGLangEngine pid=952)\x1b[0m " + OWN, OWN, {"ray_actor": "SGLangEngine", "ray_pid": 952}, ("ray_actor",)),
    ("Ray colour codes without ESC", "[36m(pid=860)[0m " + OWN, OWN, {"ray_pid": 860}, ("ray_actor",)),
    ("raylet", "(raylet) " + OWN, OWN, {"ray_actor": "raylet"}, ("ray_system",)),
    ("raylet remote", "(raylet, ip=10.0.0.7) Traceback (most recent call last):", "Traceback (most recent call last):", {"ray_actor": "raylet", "ray_ip": "10.0.0.7"}, ("ray_system",)),
    ("Ray autoscaler", "(autoscaler +1m2s) Adding 1 node(s).", "Adding 1 node(s).", {"ray_actor": "autoscaler", "ray_uptime": "1m2s"}, ("ray_system",)),
    ("Ray de-duplicated", "(SGLangEngine pid=1) " + OWN + " [repeated 7x across cluster]", OWN, {"ray_actor": "SGLangEngine", "ray_pid": 1, "ray_repeated": 7}, ("ray_actor", "ray_repeated")),
    (
        "Ray job relay",
        "2025-12-18 08:24:01 rollout-0 >> (SGLangEngine pid=3111) " + OWN,
        OWN,
        {"outer_ts": "2025-12-18 08:24:01", "ray_job": "rollout-0", "ray_actor": "SGLangEngine", "ray_pid": 3111},
        ("ray_job", "ray_actor"),
    ),
    ("gpu (0.2.x)", "[gpu=3] Init nccl begin.", "Init nccl begin.", {"gpu": 3}, ("gpu",)),
    ("kubectl --prefix", "[pod/sglang-0/server] " + OWN, OWN, {"pod": "sglang-0", "container": "server"}, ("kubectl_prefix",)),
    ("mpirun --tag-output", "[1,3]<stderr>:" + OWN, OWN, {"mpi_job": 1, "mpi_rank": 3, "stream": "stderr"}, ("mpi_tag",)),
    ("srun --label", " 7: " + OWN, OWN, {"task": 7}, ("srun_label",)),
    # combinations
    (
        "compose + Ray",
        "sglang-1  | (SGLangEngine pid=1, ip=10.0.0.2) " + OWN,
        OWN,
        {"container": "sglang-1", "ray_actor": "SGLangEngine", "ray_pid": 1, "ray_ip": "10.0.0.2"},
        ("compose", "ray_actor"),
    ),
    ("compose + docker ts", "sglang-1  | " + TS_CRI + " " + OWN, OWN, {"container": "sglang-1", "outer_ts": TS_CRI}, ("compose", "docker_ts")),
    (
        "CRI + wrapper logger",
        TS_CRI + " stdout F 2025-03-07 10:11:12,345 INFO " + OWN,
        OWN,
        {"outer_ts": TS_CRI, "stream": "stdout", "cri_partial": False, "outer_ts_2": "2025-03-07 10:11:12,345", "outer_meta": "INFO", "outer_level": "INFO"},
        ("cri", "wrapper_log"),
    ),
    (
        "journald + Ray",
        "Mar 07 10:11:12 h python[1]: (SGLangEngine pid=2) " + OWN,
        OWN,
        {"outer_ts": "Mar 07 10:11:12", "host": "h", "process": "python", "pid": 1, "ray_actor": "SGLangEngine", "ray_pid": 2},
        ("syslog", "ray_actor"),
    ),
    (
        "docker ts + compose + Ray + dedup",
        TS_CRI + " svc  | (A pid=2) " + MAIN + " [repeated 2x across cluster]",
        MAIN,
        {"outer_ts": TS_CRI, "container": "svc", "ray_actor": "A", "ray_pid": 2, "ray_repeated": 2},
        ("docker_ts", "compose", "ray_actor", "ray_repeated"),
    ),
    (
        "wrapper time + gpu",
        "2025-03-07 10:11:12,345 INFO [gpu=1] Init nccl begin.",
        "Init nccl begin.",
        {"outer_ts": "2025-03-07 10:11:12,345", "outer_meta": "INFO", "outer_level": "INFO", "gpu": 1},
        ("wrapper_log", "gpu"),
    ),
    # page damage
    ("padded blank line", " " * 80, "", {"padding": 80}, ("padding",)),
    ("terminal padding", OWN + " " * 40, OWN, {"padding": 40}, ("padding",)),
    ("padding after SGLang's own ', '", OWN + ", " + " " * 30, OWN + ", ", {"padding": 30}, ("padding",)),
    ("compose + padding", "svc  | " + OWN + " " * 9, OWN, {"padding": 9, "container": "svc"}, ("padding", "compose")),
    ("Markdown links", '  File "/s/[model_runner.py](http://model_runner.py)", line 123, in f', '  File "/s/model_runner.py", line 123, in f', {"md_links": 1}, ("md_links",)),
    ("Markdown link, file:line", "[2025-01-01 00:00:00] WARNING [config.py](https://config.py):12: x", "[2025-01-01 00:00:00] WARNING config.py:12: x", {"md_links": 1}, ("md_links",)),
]


@pytest.mark.parametrize(("line", "text", "fields", "wrappers"), [c[1:] for c in POSITIVE], ids=[c[0] for c in POSITIVE])
def test_strips(line, text, fields, wrappers):
    got_text, got = strip_outer(line)
    assert got_text == text
    assert got.pop("wrappers") == wrappers
    assert got == fields


NEGATIVE = [
    OWN,
    MAIN,
    "[10:15:02 TP0] Load weight begin. avail mem=78.50 GB",  # 0.2.15 - 0.3.3
    "[2026-02-23 10:15:02.347 PP0 ATTN_CP1 MOE_DP0 TP5 EP5] Load weight begin. avail mem=78.50 GB",
    "[2025-01-01 00:00:00] INFO:     Uvicorn running on http://0.0.0.0:30000 (Press CTRL+C to quit)",
    "[2026-03-27 09:31:16] WARNING model_config.py:1178: Casting torch.bfloat16 to torch.float16.",
    'INFO:     127.0.0.1:1234 - "GET /health HTTP/1.1" 200 OK',
    '  File "/usr/lib/python3.12/site-packages/sglang/srt/managers/scheduler.py", line 2857, in run',
    'File "/opt/sglang/srt/model_loader/loader.py", line 437, in load_model',  # indentation eaten
    "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.02s/it]",
    "100%|██████████| 52/52 [00:10<00:00,  5.01it/s]",
    "| model | tp | tokens/s |",
    "ls | wc -l",
    "INFO     | sglang.launch:main:12 - starting",
    "10:11:12 started the server",
    "2025-03-07 10:11:12,345 INFO hello from the wrapper",
    "2025-12-04 20:35:53 INFO 151972 [scheduler_metrics_mixin.py:287] Decode batch. #running-req: 48",
    "2026-07-04 05:00:55,178 - INFO - Command: python3 -m sglang.bench_serving",
    "[2026-01-20 21:24:54,336] LMCache INFO: Stored 80 out of total 135 tokens.",
    "[rank4]:[E304 12:54:52.122900428 ProcessGroupNCCL.cpp:616] [Rank 4] Watchdog caught collective operation timeout",
    "I0227 11:31:26.136366 1021616 transfer_engine_impl.cpp:172] Transfer Engine RPC using P2P handshake",
    "WARNING 09-02 10:15:06 config.py:1234] Casting torch.bfloat16 to torch.float16.",
    "(optional) remove the cache directory",
    "x >> 2",
    "[Gloo] Rank 0 is connected to 7 peer ranks. Expected number of connected peer ranks is : 7",
    "Traceback (most recent call last):",
    "RuntimeError: CUDA error: an illegal memory access was encountered",
    "frame #15: sglang::scheduler_TP0() + 0x1a (0x7f in /usr/lib/x.so)",
    "",
    "See [the docs](https://docs.sglang.ai) for more.",
    "Prefill batch. #new-seq: 1, #new-token: 10, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, ",
]


@pytest.mark.parametrize("line", NEGATIVE)
def test_leaves_alone(line):
    assert strip_outer(line) == (line, {})


def test_shape_names_unique():
    names = [s.name for s in SHAPES]
    assert len(names) == len(set(names))


# ---------------------------------------------------------------- per file
def test_unwrapper_inactive_on_plain_log():
    u = Unwrapper.for_lines([OWN, MAIN, '  File "x.py", line 1, in f', "Traceback (most recent call last):"])
    assert not u.active and u.present == ()
    wrapped = "svc  | " + OWN
    assert u.feed(wrapped) == (wrapped, {})  # the caller skips it anyway


def test_unwrapper_loosens_guarded_shape():
    lines = ["2025-03-07 10:11:12,345 INFO " + OWN, "2025-03-07 10:11:12,346 INFO " + MAIN]
    u = Unwrapper.for_lines(lines)
    assert u.present == ("wrapper_log",)
    # alone, a wrapper time before a traceback line is not stripped; in this file it is
    tb = '2025-03-07 10:11:12,347 ERROR   File "x.py", line 1, in f'
    assert strip_outer(tb) == (tb, {})
    assert u.feed(tb) == ('  File "x.py", line 1, in f', {"outer_ts": "2025-03-07 10:11:12,347", "outer_level": "ERROR", "wrappers": ("wrapper_log",)})


def test_unwrapper_compose_needs_two_lines():
    assert Unwrapper.for_lines([OWN, OWN, "a  | b"]).present == ()
    assert Unwrapper.for_lines(["a  | b", "a  | c", OWN]).present == ("compose",)
    assert Unwrapper.for_lines(["svc  | " + OWN]).present == ("compose",)  # a one-line paste


def test_unwrapper_before_detect_is_strip_outer():
    line = "(A pid=1) " + OWN
    assert Unwrapper().feed(line) == strip_outer(line)


def test_bracket_wrapper_never_loosened():
    u = Unwrapper.for_lines(["[2025-03-07 10:11:12] " + OWN] * 3)
    assert u.feed(MAIN) == (MAIN, {})  # SGLang's own `[time] ` stays


# ---------------------------------------------------------------- properties
@settings(max_examples=300, deadline=None)
@given(st.text())
def test_never_raises_and_returns_a_slice(line):
    text, fields = strip_outer(line)
    if "](http" not in line:
        assert text in line
    assert (text != line) == bool(fields)


_ts = st.builds(
    lambda d, t, ms: f"2025-{d:02d}-1{d % 9} {t:02d}:1{t % 9}:2{t % 7}" + (f".{ms:03d}" if ms is not None else ""),
    st.integers(1, 12),
    st.integers(0, 23),
    st.none() | st.integers(0, 999),
)
_ranks = st.lists(st.sampled_from(["DP", "PP", "ATTN_CP", "MOE_DP", "TP", "EP"]), unique=True, max_size=4).flatmap(
    lambda names: st.tuples(*[st.integers(0, 63) for _ in names]).map(lambda ns: "".join(f" {a}{n}" for a, n in zip(names, ns)))
)
_msg = st.text(st.characters(min_codepoint=32, max_codepoint=0x2FF, blacklist_characters="\x7f"), max_size=60).map(str.strip)
SGLANG_LINE = st.builds(lambda ts, r, m: f"[{ts}{r}] {m}", _ts, _ranks, _msg).filter(lambda s: "](http" not in s and "across cluster]" not in s)
_name = st.from_regex(r"[a-z][a-z0-9]{0,8}(-[a-z0-9]{1,5}){0,2}", fullmatch=True)
_rfc = st.builds(lambda n: f"2025-03-07T10:11:12.{n}Z", st.from_regex(r"[0-9]{1,9}", fullmatch=True))
OUTERS = (  # wrappers that may stand anywhere outside (each at most once)
    st.builds(lambda n, pad: n + " " * pad + "| ", _name, st.integers(2, 12)),
    st.builds(lambda t: t + " ", _rfc),
    st.builds(lambda t, s, p: f"{t} {s} {p} ", _rfc, st.sampled_from(["stdout", "stderr"]), st.sampled_from("PF")),
    st.builds(lambda h, p: f"Mar 07 10:11:12 {h} python[{p}]: ", _name, st.integers(1, 99999)),
    st.builds(lambda h, p: f"<14>1 2025-03-07T10:11:12.003Z {h} python {p} - - ", _name, st.integers(1, 99999)),
)
OUTER = st.permutations(range(len(OUTERS))).flatmap(lambda order: st.integers(0, 3).flatmap(lambda k: st.tuples(*[OUTERS[i] for i in order[:k]])))
INNER = st.one_of(  # wrappers that need SGLang's prefix (or Ray's) right after them
    st.just("2025-03-07 10:11:12,345 INFO "),
    st.just("2025-03-07 10:11:12,345 - wrapper - INFO - "),
    st.just("[2025-03-07 10:11:12] "),
    st.builds(lambda n: f"{n} >> ", _name),
)
RAY = st.builds(
    lambda a, p, ip: f"({a + ' ' if a else ''}pid={p}{', ip=' + ip if ip else ''}) ",
    st.none() | st.from_regex(r"[A-Z][A-Za-z0-9_:]{0,15}", fullmatch=True),
    st.integers(1, 10**6),
    st.none() | st.ip_addresses().map(str),
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(SGLANG_LINE, OUTER, st.none() | INNER, st.none() | RAY)
def test_wrap_then_strip_gives_the_line_back(line, outer, inner, ray):
    layers = [*outer, *([inner] if inner else []), *([ray] if ray else [])]
    wrapped = "".join(layers) + line
    text, fields = strip_outer(wrapped)
    assert text == line
    assert len(fields.get("wrappers", ())) == len(layers)
    assert strip_outer(line) == (line, {})


# ---------------------------------------------------------------- hard-wrapped pastes


def _hard_wrap(lines: list[str], width: int) -> list[str]:
    out = []
    for line in lines:
        while len(line) > width:
            out.append(line[:width])
            line = line[width:]
        out.append(line)
    return out


_LONG = [
    "[2025-03-04 12:54:52 TP4] Scheduler hit an exception: Watchdog caught collective operation timeout: WorkNCCL(SeqNum=151721, OpType=_ALLGATHER_BASE, NumelIn=8080, NumelOut=129280, Timeout(ms)=600000) ran for 600049 milliseconds",
    "[2025-03-04 12:54:53 TP0] Load weight begin. avail mem=78.50 GB",
    "[2025-03-04 12:54:54 TP0] Decode batch, #running-req: 5, #token: 100, token usage: 0.01, cuda graph: True, gen throughput (token/s): 12.50, #queue-req: 0",
]


def test_hard_wrap_width_is_found_and_only_then():
    from sglog.read.envelope import hard_wrap_width
    from sglog.read.records import is_start

    wrapped = _hard_wrap(_LONG, 80)
    assert hard_wrap_width(wrapped, is_start) == 80
    assert hard_wrap_width(_LONG, is_start) == 0  # whole lines: no width
    assert hard_wrap_width(["short"] * 10, is_start) == 0


def test_a_hard_wrapped_paste_reads_as_the_whole_lines(tmp_path):
    from sglog.read.parse import parse_file

    log = tmp_path / "w.log"
    log.write_text("\n".join(_hard_wrap(_LONG, 80)) + "\n")
    whole = tmp_path / "whole.log"
    whole.write_text("\n".join(_LONG) + "\n")
    got, want = parse_file(str(log)), parse_file(str(whole))
    assert got.lines == len(_hard_wrap(_LONG, 80)) and got.unparsed == 0
    assert sorted(got.kinds.items()) == sorted(want.kinds.items())
    assert got.batches.height == 1 and got.batches["running_req"].to_list() == [5]
