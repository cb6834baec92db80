"""Error signatures (issue 27 item 1): the reader names the failure class an error's words name; rules read the names.

The lines are real: each comes from a corpus log (fixtures/logs/real, SOURCES.md) or a rule case.
"""

from __future__ import annotations

import ast

import pytest

import sglog
from conftest import ROOT
from sglog.read import signatures


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("RuntimeError: NCCL error: remote process exited or there was a network error", ["collective_failure"]),  # 009
        ("RuntimeError: CUDA error: an illegal memory access was encountered", ["device_fault"]),
        ("ValueError: type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')", ["arch_unsupported"]),  # 003
        ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 384.00 MiB.", ["out_of_memory"]),
        ("RuntimeError: Not enough memory. Please try to increase --mem-fraction-static. Current value: mem_fraction_static=0.76", ["kv_memory_insufficient"]),
        ("Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing", ["capture_failed"]),
        ("RuntimeError: size_k = 704, is not divisible by b_scales.size(1) = 5", []),  # 002: no class, the generic crash
    ],
)
def test_phrases_name_the_class(text, names):
    assert signatures.of_text(text) == names


def test_an_import_error_names_the_missing_module(tmp_path):
    log = tmp_path / "x.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/moe/ep_moe/token_dispatcher.py", line 20, in <module>\n'
        "    from deep_ep import Buffer\n"
        "ModuleNotFoundError: No module named 'deep_ep'\n",
        encoding="utf-8",
    )
    (run,) = sglog.load(log)
    (e,) = run.events_of("traceback")
    assert "missing_module" in e.get("signatures") and e.get("missing_module") == "deep_ep"


def test_signatures_are_read_from_the_messages_not_the_frames(tmp_path):
    """A frame in nccl code does not make an unrelated error a collective failure."""
    log = tmp_path / "x.log"
    log.write_text(
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.10/dist-packages/sglang/srt/distributed/device_communicators/pynccl.py", line 20, in all_reduce\n'
        "    x()\n"
        "KeyError: 'weight'\n",
        encoding="utf-8",
    )
    (run,) = sglog.load(log)
    assert run.events_of("traceback")[0].get("signatures") == []


def test_crash_rules_claim_by_signature_not_by_text():
    """The crash rules' claims read typed fields: no phrase table or text search in a claim."""
    for path in (ROOT / "sglog/rules").rglob("*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for fn in (n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == "claim"):
            src = ast.unparse(fn)
            assert "c.text" not in src and "has_any" not in src and ".text" not in src, f"{path.name}: {src}"


@pytest.mark.parametrize(
    ("text", "causes"),
    [
        ("ValueError: type fp8e4nv not supported in this architecture. The supported fp8 dtypes are ('fp8e4b15', 'fp8e5')", ["triton_fp8e4nv"]),  # 003
        ("RuntimeError: NCCL error: remote process exited or there was a network error", ["nccl", "network"]),  # 009
        ("Exception: Capture cuda graph failed: CUDA error: operation not permitted when stream is capturing", ["capture_collective"]),
        ("RuntimeError: No supported CUDA architectures found for major versions [12]", ["cuda_arch_list"]),
        ("RuntimeError: size_k = 704, is not divisible by b_scales.size(1) = 5", []),  # 002
    ],
)
def test_causes_name_the_part_that_failed(text, causes):
    assert signatures.causes_of(text) == causes


def _traceback(tmp_path, frame_file: str, function: str, exc: str):
    log = tmp_path / "x.log"
    log.write_text(f'Traceback (most recent call last):\n  File "{frame_file}", line 20, in {function}\n    x()\n{exc}\n', encoding="utf-8")
    (run,) = sglog.load(log)
    return run.events_of("traceback")[0]


def test_a_frame_names_the_layer_only_for_the_causes_frames_tell(tmp_path):
    """The module an error was raised in names the layer (torch/_dynamo: torch.compile); a frame in
    multiprocessing/connection.py is no network failure."""
    e = _traceback(tmp_path, "/usr/local/lib/python3.10/dist-packages/torch/_dynamo/eval_frame.py", "_fn", "RuntimeError: something went wrong")
    assert e.get("causes") == ["torch_compile"]
    e = _traceback(tmp_path, "/usr/lib/python3.12/multiprocessing/connection.py", "_recv", "EOFError")
    assert e.get("causes") is None


def test_an_import_error_names_the_package_it_imported_from(tmp_path):
    e = _traceback(
        tmp_path,
        "/usr/local/lib/python3.10/dist-packages/sglang/srt/layers/attention/flashinfer_backend.py",
        "<module>",
        "ImportError: cannot import name 'BatchMLAPagedAttentionWrapper' from 'flashinfer.mla'",
    )
    assert e.get("missing_module") == "BatchMLAPagedAttentionWrapper" and e.get("missing_from") == "flashinfer.mla"
