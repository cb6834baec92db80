"""Is this SGLang's log? Evidence in the events (sglog/read/evidence.py), never coverage."""

from __future__ import annotations

import pytest

from sglog.diagnose import looks_like_sglang
from sglog.read.evidence import OTHER_SERVERS, other_server
from sglog.read.parse import parse_file


def _verdict(tmp_path, text: str) -> dict:
    log = tmp_path / "x.log"
    log.write_text(text)
    return looks_like_sglang([parse_file(str(log))])[1]["files"][0]


TRACEBACK_WITH_SGLANG = """Traceback (most recent call last):
  File "/usr/lib/python3.10/site-packages/sglang/srt/managers/scheduler.py", line 2300, in run_scheduler_process
    scheduler.event_loop_normal()
RuntimeError: boom
"""


@pytest.mark.parametrize(
    "text, evidence",
    [
        ("[2025-06-26 07:25:31 DP4 TP4] something new that no rule names\n", "envelope"),
        ("[2025-06-26 07:25:31] something new that no rule names\n", "envelope"),
        (TRACEBACK_WITH_SGLANG, "traceback"),
        ("python3 -m sglang.launch_server --model-path Qwen/Qwen3-8B --port 30000\n", "launch"),
    ],
)
def test_each_kind_of_evidence(tmp_path, text, evidence):
    f = _verdict(tmp_path, text)
    assert f["verdict"] == "sglang" and evidence in f["evidence"]


def test_sglang_evidence_wins_over_another_servers_words(tmp_path):
    f = _verdict(tmp_path, "[2025-06-26 07:25:31 TP0] Ignore import error when loading vllm.model_executor: none\nvLLM is not installed\n")
    assert f["verdict"] == "sglang" and f["other_server"] is None


def test_generic_torch_output_is_a_fragment(tmp_path):
    text = "[rank0]:[W1103 10:00:00.123456 ProcessGroupNCCL.cpp:1234] Warning: something\n"
    f = _verdict(tmp_path, text)
    assert f["sglang"] and f["verdict"] == "no_sglang_specific_line"


@pytest.mark.parametrize(
    "line, server",
    [
        ("INFO 04-16 10:27:28 [api_server.py:1034] vLLM API server version 0.8.4", "vLLM"),
        ("(EngineCore_0 pid=123) INFO 05-04 01:06:53 [core.py:1] hello", "vLLM"),
        ("2024-10-01T10:00:00.000000Z  INFO text_generation_launcher: Starting shard", "TGI (text-generation-inference)"),
        ("2025-02-10 08:01:12,345 - lmdeploy - INFO - builder.py:63 - x", "LMDeploy"),
        ("llm_load_tensors: offloaded 33/33 layers to GPU", "llama.cpp"),
        ('[GIN] 2025/03/01 - 10:00:05 | 200 |    1.2ms |       127.0.0.1 | GET      "/api/tags"', "Ollama"),
        ("[TensorRT-LLM][INFO] Max KV cache pages per sequence: 64", "Triton / TensorRT-LLM"),
    ],
)
def test_other_servers_are_named_by_their_own_words(line, server):
    assert other_server([line]) == server


def test_plain_words_name_no_server():
    assert other_server(['INFO:     127.0.0.1:1 - "GET /health HTTP/1.1" 200 OK', "Killed", "loading the model"]) is None
    assert {name for name, _ in OTHER_SERVERS} >= {"vLLM", "LMDeploy", "llama.cpp", "Ollama"}


@pytest.mark.parametrize(
    "block",
    [
        "terminate called after throwing an instance of 'c10::Error'\n  what():  CUDA error\nException raised from c10_cuda_check_implementation at /pytorch/c10/cuda/CUDAException.cpp:43 (most recent call first):\nframe #0: <unknown function> + 0x1234 (0x7f in /usr/local/lib/python3.12/dist-packages/sgl_kernel/common_ops.abi3.so)\n",
        'Fatal Python error: Aborted\n\nThread 0x00007f (most recent call first):\n  File "/usr/lib/python3/dist-packages/sglang/srt/managers/scheduler.py", line 10 in event_loop\n',
    ],
)
def test_sglang_code_in_a_block_is_evidence(tmp_path, block):
    f = _verdict(tmp_path, block)
    assert f["verdict"] == "sglang" and "traceback" in f["evidence"]


def test_an_sglang_module_in_a_logger_prefix_is_evidence(tmp_path):
    # a message no rule or template names, behind `LEVEL file.py:N: ` naming an SGLang module
    f = _verdict(tmp_path, "WARNING scheduler.py:999: a brand-new message of a future release\n")
    assert f["verdict"] == "sglang" and "module" in f["evidence"]
    f = _verdict(tmp_path, "WARNING utils.py:12: a message of some program\n")  # too common a name to tell
    assert f["verdict"] != "sglang"
