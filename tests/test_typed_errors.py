"""Typed errors from the reader (#27 item 1): what an error block's fields say happened.

Every traceback / exception / OOM / thread dump / C++ abort carries ``sglang_frame``,
``sglang_chain``, ``phase``, ``rank``, ``collective`` and, for SGLang's own messages,
``message_template`` / ``message_source`` / ``message_fields`` (sglog/read/blocks.py,
sglog/read/frames.py).  Checked on real excerpts (byte copies of corpus logs in
``fixtures/logs/real`` and ``fixtures/logs/errors``, see their SOURCES.md) and on constructed
blocks (``fixtures/logs/errors``).  Lines a web page
wrapped are joined again only when the pieces make a known message (sglog/read/records.py).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from conftest import ERRORS, REAL
from sglog.read import blocks, frames
from sglog.read.parse import RecordParser, parse_file
from sglog.read.records import fold
from sglog.schema import ERROR_PHASES

ERROR_KINDS = ("traceback", "scheduler_exception", "oom", "fatal_error", "cpp_exception", "logging_error", "native_backtrace")


def real(prefix: str) -> Path:
    """A real excerpt: its copy in fixtures/logs/errors (2xx) or fixtures/logs/real."""
    (path,) = list(ERRORS.glob(f"{prefix}-*.log")) or list(REAL.glob(f"{prefix}-*.log"))
    return path


def errors_in(path: Path) -> dict[int, object]:
    return {e.line: e for e in parse_file(str(path)).events if e.kind in ERROR_KINDS}


def read(text: str) -> list:
    """The events of a piece of log text (record folder + parser, as the reader does)."""
    lines = text.split("\n")
    rp = RecordParser("case.log")
    return [rp(r) for r in fold(list(enumerate(lines, start=1))) if r.mode != "blank"]


def block_cases() -> dict[str, str]:
    text = (ERRORS / "blocks.log").read_text(encoding="utf-8")
    parts = re.split(r"^# case: (\S+)\n", text, flags=re.M)
    return {name: body.strip("\n") for name, body in zip(parts[1::2], parts[2::2])}


def one_error(name: str):
    evs = [e for e in read(block_cases()[name]) if e.kind in ERROR_KINDS]
    assert len(evs) == 1, [(e.kind, e.line) for e in evs]
    return evs[0]


# ---------------------------------------------------------------- modules from paths


@pytest.mark.parametrize(
    ("path", "module"),
    [
        ("/usr/local/lib/python3.10/dist-packages/sglang/srt/managers/scheduler.py", "sglang.srt.managers.scheduler"),
        ("/sgl-workspace/sglang/python/sglang/srt/model_executor/model_runner.py", "sglang.srt.model_executor.model_runner"),
        ("/app/sglang/sglang-latest/lib64/python3.12/site-packages/sglang/srt/disaggregation/mooncake/conn.py", "sglang.srt.disaggregation.mooncake.conn"),
        ("/home/u/2x-R9700-sglang-inference/components/sglang/python/sglang/srt/layers/quantization/unquant.py", "sglang.srt.layers.quantization.unquant"),
        ("/opt/miniconda/envs/sglang/lib/python3.12/site-packages/sglang/srt/models/qwen3.py", "sglang.srt.models.qwen3"),
        ("/home/u/miniforge3/envs/sglang-v0512/lib/python3.12/site-packages/torch/nn/modules/module.py", "torch.nn.modules.module"),
        ("/venv/sglang/lib/python3.11/site-packages/rpyc/core/protocol.py", "rpyc.core.protocol"),
        ("/usr/lib64/python3.12/multiprocessing/connection.py", "multiprocessing.connection"),
        ("/usr/local/lib/python3.12/dist-packages/sgl_kernel/allreduce.py", "sgl_kernel.allreduce"),
        ("/sgl/python/sglang/srt/layers/attention/__init__.py", "sglang.srt.layers.attention"),
        ("<site-packages>/sglang/srt/managers/scheduler.py", "sglang.srt.managers.scheduler"),
        ("C:\\envs\\sg\\Lib\\site-packages\\sglang\\srt\\utils.py", "sglang.srt.utils"),
        ("<frozen runpy>", "runpy"),
        ("<string>", None),
        ("/data/sglang-rebase-v0512/python/sglang/jit_kernel/moe_wna16_marlin.py", "sglang.jit_kernel.moe_wna16_marlin"),
    ],
)
def test_module_of(path, module):
    assert frames.module_of(path) == module


def test_phase_table_speaks_the_vocabulary():
    """Every row names a phase of schema.ERROR_PHASES (or none), and every phase has rows."""
    used = {phase for _m, _f, phase in frames.PHASES}
    assert used - {None} <= set(ERROR_PHASES)
    assert set(ERROR_PHASES) <= used
    assert frames.frame_phase("sglang.srt.model_executor.model_runner", "init_attention_backend") == "attention_backend_init"
    assert frames.frame_phase("sglang.srt.model_executor.cuda_graph_runner", "capture_one_batch_size") == "cuda_graph_capture"
    assert frames.frame_phase("sglang.srt.model_executor.cuda_graph_runner", "replay") == "decode"  # serving, not capture
    assert frames.frame_phase("sglang.srt.disaggregation.decode", "event_loop_normal_disagg_decode") is None
    assert frames.frame_phase("sglang.srt.disaggregation.mooncake.conn", "send_kvcache") == "pd_transfer"
    assert frames.frame_phase("torch.nn.modules.module", "forward") is None  # torch's forward says nothing


def test_phase_table_names_modules_sglang_has():
    """Each SGLang module pattern of the table names modules of SGLang's: ones the catalogue's sources
    list (mined from every release's code) or ones in the frames of the real excerpts."""
    from sglog.read import catalog

    modules = {"sglang." + s.partition(":")[0].removesuffix(".py").replace("/", ".") for s in catalog.load().sources()}
    for path in [*REAL.glob("0*.log"), *ERRORS.glob("2*.log")]:
        for e in errors_in(path).values():
            modules.update(x.partition(":")[0] for x in e.fields["sglang_chain"])
    for mod, _funcs, _phase in frames.PHASES:
        if mod.startswith("sglang"):
            rx = re.compile(frames._pattern(mod))
            assert any(rx.fullmatch(m) for m in modules), mod


def test_stitch_puts_a_chained_exception_under_the_frames_that_caught_it():
    outer = [{"file": "a.py", "function": "main", "line": 1}, {"file": "b.py", "function": "init", "line": 9}]
    inner = [{"file": "b.py", "function": "init", "line": 7}, {"file": "c.py", "function": "capture", "line": 3}]
    assert [f["function"] for f in frames.stitch([inner, outer])] == ["main", "init", "capture"]
    assert frames.stitch([inner, []]) == inner
    assert frames.stitch([[], outer]) == outer


# ---------------------------------------------------------------- real excerpts

REAL_CASES = [
    # (corpus file, line, expected fields: a `module:function` chain end, phase, rank ...)
    (
        "001",
        3,
        {
            "kind": "oom",
            "phase": "attention_backend_init",
            "frame": "sglang.srt.layers.attention.flashinfer_backend:__init__",
            "rank": 0,
            "rank_from": "tag",
            "chain_start": "sglang.srt.managers.scheduler:run_scheduler_process",
        },
    ),
    (
        "009",
        52,
        {
            "phase": "distributed_init",
            "frame": "sglang.srt.distributed.device_communicators.pynccl_wrapper:NCCL_CHECK",
            "rank": 10,
            "message_template": "NCCL error: {}",
            "message_fields": {"error_str": "remote process exited or there was a network error"},
        },
    ),
    ("011", 2, {"phase": "weight_load", "rank": 1, "message_template": "DeepEP is not installed. Please install DeepEP package from https://github.com/deepseek-ai/deepep."}),
    ("012", 31, {"phase": "pd_transfer", "frame": "sglang.srt.disaggregation.mooncake.transfer_engine:initialize", "rank": 13}),
    ("020", 38, {"kind": "oom", "phase": "weight_load", "frame": "sglang.srt.layers.quantization.unquant:create_weights", "rank": 1}),
    ("026", 18, {"phase": "cuda_graph_capture", "frame": "sglang.srt.model_executor.cuda_graph_runner:__init__", "rank": 4}),
    ("030", 5, {"phase": "prefill", "frame": "sglang.srt.managers.tp_worker_overlap_thread:resolve_last_batch_result", "rank": 3}),
    ("035", 1, {"phase": "weight_load", "frame": "sglang.srt.models.llama2:__init__", "rank": None}),
    ("038", 1, {"phase": "prefill", "frame": "sglang.srt.managers.router.infer_batch:prepare_for_extend", "message_template": None}),
    ("042", 1, {"phase": "cuda_graph_capture", "frame": "sglang.srt.layers.attention.triton_backend:init_cuda_graph_state"}),
    ("010", 59, {"phase": None, "frame": "sglang.srt.entrypoints.openai.serving_base:__init__", "message_template": None}),
    ("202", 1, {"phase": "forward", "frame": "sglang.srt.managers.scheduler:run_batch", "rank": 0}),  # every line behind a Ray prefix
    ("210", 1, {"phase": "weight_load", "frame": "sglang.srt.models.qwen3:load_weights", "exc_type": "KeyError"}),
    ("216", 14, {"phase": None, "frame": "sglang.srt.model_loader.utils:resolve_transformers_arch", "message_fields": {"arch": "Cosmos3ForConditionalGeneration"}}),
    ("220", 2, {"phase": "weight_load", "frame": "sglang.srt.model_executor.model_runner:initialize"}),  # cut at `self.load_model()`
    ("222", 32, {"phase": "decode", "frame": "sglang.srt.layers.attention.flashinfer_backend:forward_decode", "rank": 0}),
]


@pytest.mark.parametrize(("prefix", "line", "want"), REAL_CASES, ids=[f"{c[0]}:{c[1]}" for c in REAL_CASES])
def test_real_error_fields(prefix, line, want):
    e = errors_in(real(prefix))[line]
    f = e.fields
    for key, value in want.items():
        if key == "kind":
            assert e.kind == value
        elif key == "frame":
            assert f["sglang_frame"] and f"{f['sglang_frame']['module']}:{f['sglang_frame']['function']}" == value
            assert f["sglang_chain"][-1] == value  # the chain ends at the innermost SGLang frame
        elif key == "chain_start":
            assert f["sglang_chain"][0] == value
        else:
            assert f.get(key) == value, key
    assert f["phase"] is None or f["phase"] in ERROR_PHASES


def test_real_frames_keep_their_line_and_file():
    e = errors_in(real("001"))[3]
    frame = e.fields["sglang_frame"]
    assert frame["line"] == 202 and frame["file"].endswith("/sglang/srt/layers/attention/flashinfer_backend.py")
    assert all(":" in x and x.startswith("sglang.") for x in e.fields["sglang_chain"])


def test_every_real_error_has_the_typed_fields():
    """The fields are there on every error event of every real excerpt (None when unknown), and the
    phase is one of the vocabulary."""
    for path in sorted([*REAL.glob("*.log"), *ERRORS.glob("*.log")]):
        if path.name[:3].isdigit() and int(path.name[:3]) > 200 and int(path.name[:3]) % 2:
            continue  # (held out)
        for e in errors_in(path).values():
            for key in ("sglang_frame", "sglang_chain", "phase", "rank"):
                assert key in e.fields, (path.name, e.line, key)
            assert e.fields["phase"] is None or e.fields["phase"] in ERROR_PHASES


def test_watchdog_lines_a_web_page_wrapped_are_read_whole():
    """Corpus 204: torch's watchdog lines, wrapped mid-number by the page they were copied from."""
    log = parse_file(str(real("204")))
    kinds = [(e.kind, e.line, e.end_line) for e in log.events]
    assert kinds == [("torch_log", 1, 2), ("torch_log", 3, 4), ("torch_log", 5, 5)]
    first, second, third = (e.fields["collective"] for e in log.events)
    assert first == {"seq_num": 151721, "op_type": "_ALLGATHER_BASE", "numel_in": 8080, "numel_out": 129280, "timeout_ms": 600000, "ran_ms": 600049, "rank": 4, "timeout": True}
    assert second == {"rank": 4, "pg": 2, "seq_num": 151721, "last_enqueued": 151721, "last_completed": 151720}
    assert third == {**second, "timeout": True}


# ---------------------------------------------------------------- constructed blocks


def test_capture_failure_chain():
    e = one_error("capture-chain")
    f = e.fields
    assert f["phase"] == "cuda_graph_capture"  # the forward inside the capture is the capture
    assert f["exc_type"] == "RuntimeError" and f["final_exc_type"] == "Exception"
    # the root's stack, under the frames of the exception raised from it
    assert f["sglang_chain"][0] == "sglang.srt.managers.scheduler:run_scheduler_process"
    assert "sglang.srt.model_executor.model_runner:init_device_graphs" in f["sglang_chain"]
    assert f["sglang_chain"][-1] == "sglang.srt.layers.attention.flashinfer_backend:forward_decode"
    assert f["sglang_frame"]["line"] == 700
    # the root's message is CUDA's (raised below a kernel call); the chained one is SGLang's own
    assert f["message_template"] == "Capture cuda graph failed: {}"
    assert list(f["message_fields"].values()) == ["CUDA error: out of memory"]
    assert f["rank"] == 1 and f["rank_from"] == "tag"
    assert f["hints"][0] == "Possible solutions:"


@pytest.mark.parametrize(
    ("case", "phase", "exc_type"),
    [
        ("spec-verify", "decode", "RuntimeError"),  # a verify step runs extend kernels inside a decode step
        ("prefill", "prefill", "triton.runtime.errors.OutOfResources"),
        ("warmup-forward", "warmup", "RuntimeError"),
        ("attention-backend-oom", "attention_backend_init", "torch.OutOfMemoryError"),  # not graph capture
        ("kv-pool-rank-in-text", "kv_pool", "RuntimeError"),
        ("shutdown", "shutdown", "ProcessLookupError"),
    ],
)
def test_phase_from_frames(case, phase, exc_type):
    f = one_error(case).fields
    assert f["phase"] == phase
    assert f["exc_type"] == exc_type


def test_exception_type_the_suffix_list_misses_ends_the_block():
    """After its exception line a block's message goes on, up to a line that is a record of its
    own: so also after an exception type outside TB_EXCEPTION's suffixes."""
    bar = "Loading safetensors checkpoint shards:  50% Completed | 2/4 [00:02<00:02,  1.02s/it]"
    evs = read(block_cases()["prefill"] + "\n" + bar)
    assert [e.kind for e in evs] == ["scheduler_exception", "progress"]
    assert evs[0].fields["exc_message"].startswith("out of resource: shared memory, Required: 147456")


def test_thread_dump_reads_the_thread_that_crashed():
    e = one_error("thread-dump")
    f = e.fields
    assert e.kind == "fatal_error" and f["threads"] == 2
    assert f["sglang_frame"]["function"] == "top_k_top_p_min_p_sampling_from_probs_torch"
    assert f["sglang_chain"][0] == "sglang.srt.managers.scheduler:event_loop_normal"  # outermost first (the dump lists innermost first)
    assert f["phase"] == "decode"


def test_collective_from_cpp_frames_alone():
    f = one_error("cpp-frames-only").fields
    assert f["collective"] == {"timeout": True}
    assert f["sglang_frame"] is None and f["sglang_chain"] == [] and f["phase"] is None


def test_collective_from_cpp_what():
    f = one_error("cpp-what").fields
    assert f["exc_type"] == "c10::DistBackendError"
    assert f["exc_message"].endswith("ran for 600021 milliseconds before timing out.")
    assert f["collective"] == {
        "seq_num": 1203,
        "op_type": "ALLREDUCE",
        "numel_in": 1,
        "numel_out": 1,
        "timeout_ms": 600000,
        "ran_ms": 600021,
        "rank": 3,
        "pg": 0,
        "pg_name": "default_pg",
        "timeout": True,
    }
    assert (f["rank"], f["rank_from"]) == (3, "text")


def test_collective_from_a_python_exception():
    f = one_error("python-collective").fields
    assert f["collective"]["op_type"] == "_ALLGATHER_BASE" and f["collective"]["seq_num"] == 9001
    assert f["collective"]["rank"] == 12 and f["rank"] == 12
    assert f["phase"] == "forward"


def test_torch_log_and_blocks_share_the_collective_reader():
    line = (ERRORS / "wrap-lines.log").read_text().split("\n")[1]
    (e,) = read(line)
    assert e.kind == "torch_log"
    assert (
        e.fields["collective"]
        == blocks.collective(e.fields["message"])
        == {"seq_num": 42, "op_type": "ALLREDUCE", "numel_in": 4096, "numel_out": 4096, "timeout_ms": 600000, "ran_ms": 600123, "rank": 7, "timeout": True}
    )


def test_no_collective_where_c10d_says_nothing():
    assert blocks.collective("[Rank 3] something else entirely") is None
    assert blocks.collective("NCCL error: remote process exited or there was a network error") is None
    assert one_error("interpreter-error").fields.get("collective") is None


def test_an_interpreter_error_is_not_sglang_message():
    """SGLang words `'X' object has no attribute 'y'` somewhere too; an AttributeError the interpreter
    raised in SGLang's code is still not that message."""
    f = one_error("interpreter-error").fields
    assert "message_template" not in f
    assert f["phase"] == "prefill"


def test_a_raised_message_alone_is_taken_at_its_word():
    f = one_error("raised-alone").fields
    assert f["message_template"].startswith("Input length ({} tokens) exceeds the maximum allowed length ({} tokens).")
    assert list(f["message_fields"].values()) == [160062, 59862]
    assert f["message_source"].startswith("srt/")


@pytest.mark.parametrize(
    ("text", "rank"),
    [
        ("[rank3]:[E1203 10:00:00.1 ProcessGroupNCCL.cpp:1] x", 3),
        ("[PG ID 2 PG GUID 3 Rank 4] Timeout at NCCL work: 1", 4),
        ("Not enough memory on rank15.", 15),
        ("frame #15: sglang::scheduler_TP0() + 0x1 (0x1 in sglang::scheduler_TP0)", 0),
        ("CUDA out of memory. Tried to allocate 2.00 MiB. GPU 1 has a total capacity of 80 GiB", 1),
        ("no rank here: TPU v5, GPU0", None),
    ],
)
def test_rank_in_text(text, rank):
    assert blocks.rank_in(text) == rank


def test_rank_from_text_when_the_record_has_no_tag():
    f = one_error("kv-pool-rank-in-text").fields
    assert (f["rank"], f["rank_from"]) == (5, "text")


# ---------------------------------------------------------------- lines a web page wrapped


def wrap_lines() -> list[str]:
    return [t for t in (ERRORS / "wrap-lines.log").read_text(encoding="utf-8").split("\n") if t and not t.startswith("# ")]


def _comparable(e) -> dict:
    d = e.to_dict()
    for k in ("text", "end_line", "file"):
        d.pop(k, None)
    return json.loads(json.dumps(d, default=str))


def wrapped(whole: str, width: int) -> str:
    """The line as a page wraps it at ``width``: cut there, a space at the cut left at the end of
    the first piece."""
    cut = width + 1 if whole[width : width + 1] == " " else width
    return whole[:cut] + "\n" + whole[cut:]


# cuts of each line of wrap-lines.log (mid-word, mid-number, inside brackets, at a space); a
# key/value line is cut in its keys: cut inside a value, its first piece is a shorter key/value
# line, a message of its own, and the rule joins nothing then (test below)
CUTS = {0: [37, 61, 88, 113, 150, 190], 1: [37, 61, 88, 113, 150], 2: [30, 61, 88, 113, 150], 3: [30, 45, 61, 88], 4: [30, 45, 58, 70, 90], 5: [30, 40, 70, 95, 115]}


@pytest.mark.parametrize(("index", "width"), [(i, w) for i, ws in CUTS.items() for w in ws])
def test_a_wrapped_line_is_read_as_the_whole_line(index, width):
    """Each line cut at the width reads as the line itself: one event of two physical lines, with
    the same kind and fields (torch's watchdog lines, SGLang messages the grammar or only the
    catalogue names)."""
    whole = wrap_lines()[index]
    (want,) = read(whole)
    assert want.kind != "unparsed"
    text = wrapped(whole, width)
    got = read(text)
    assert len(got) == 1, [(e.kind, e.line, e.end_line) for e in got]
    assert (got[0].line, got[0].end_line) == (1, 2)
    assert got[0].text == text  # the raw lines are kept as they were
    assert _comparable(got[0]) == _comparable(want)


def test_a_key_value_line_cut_inside_a_value_is_not_joined():
    """`... K size: 53.3` is a KV-cache line already (a shorter one): the pieces stay apart, the
    second unparsed, rather than guessing that they belong together."""
    whole = wrap_lines()[4]
    evs = read(wrapped(whole, whole.index("53.31") + 3))
    assert [(e.kind, e.line) for e in evs] == [("kv_cache_allocated", 1), ("unparsed", 2)]


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("some words nobody logs", "and more of them"),  # neither piece nor the pair is a message
        ("[2026-02-23 10:15:13 TP0] Load weight begin. avail mem=75.12 GB", "12 trailing words"),  # the first is whole already
        ("[rank7]:[E1203 10:00:00.123 ProcessGroupNCCL.cpp:632] [Rank 7] Watchdog caught collective operation timeout: WorkNCCL(SeqNum=4", "garbage that completes nothing"),
        ("[2025-03-03 06:49:28 TP5] Input length (160062 tokens) exceeds the maximum", "Load weight begin. avail mem=75.12 GB"),  # the second is a message of its own
    ],
)
def test_lines_are_not_joined_unless_the_pair_is_a_known_message(first, second):
    evs = read(first + "\n" + second)
    assert [(e.line, e.end_line) for e in evs] == [(1, 1), (2, 2)]


def test_wrapped_lines_read_the_same_on_the_fast_path(tmp_path):
    """In a file whose other lines the vectorised path reads, the wrapped pieces still join, and the
    fast and the lark-only readings agree."""
    decode = "[2026-02-23 10:16:{s:02d} TP0] Decode batch. #running-req: 3, #token: 1200, token usage: 0.05, cuda graph: True, gen throughput (token/s): 150.00, #queue-req: 0"
    lines = []
    for i, whole in enumerate(wrap_lines()):
        lines += [decode.format(s=2 * i), *wrapped(whole, CUTS[i][1]).split("\n"), decode.format(s=2 * i + 1)]
    path = tmp_path / "wrapped.log"
    path.write_text("\n".join(lines) + "\n")
    fast = parse_file(str(path))
    slow = parse_file(str(path), fast=False)
    assert [d for d in fast.iter_dicts()] == [d for d in slow.iter_dicts()]
    joined = [e for e in fast.events if e.end_line == e.line + 1]
    assert len(joined) == len(wrap_lines()) and not [e for e in fast.events if e.kind == "unparsed"]
    assert fast.batches.height == 2 * len(wrap_lines())
