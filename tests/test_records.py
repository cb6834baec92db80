"""The record layer: physical lines -> records (folding, blank lines, cleaning).

Every physical line must end up in exactly one record, and each multi-line
block shape must fold into one record with the right extent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import LINES, REAL
from sglog.read.records import Folder, clean, fold


def _fold_text(text: str) -> list[tuple[int, int, str]]:
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return [(r.line, r.end_line, r.mode) for r in fold(list(enumerate(lines, start=1)))]


def _physical(path: Path) -> list[str]:
    lines = path.read_bytes().decode("utf-8", errors="replace").split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ---------------------------------------------------------------- accounting


def _all_logs() -> list[Path]:
    return sorted(REAL.glob("*.log")) + sorted(LINES.glob("*.log"))


@pytest.mark.parametrize("path", _all_logs(), ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_physical_line_in_exactly_one_record(path: Path) -> None:
    lines = _physical(path)
    records = fold(list(enumerate(lines, start=1)))
    covered = [n for r in records for n in range(r.line, r.end_line + 1)]
    assert covered == list(range(1, len(lines) + 1))
    for r in records:
        assert len(r.raw) == r.end_line - r.line + 1 == len(r.lines)
        assert r.raw == lines[r.line - 1 : r.end_line]


def test_records_are_emitted_in_order_while_streaming() -> None:
    """`take()` hands out finished records; an open block stays open until it ends."""
    f = Folder()
    f.feed(1, "[2026-02-23 10:15:13 TP0] Scheduler hit an exception: Traceback (most recent call last):")
    f.feed(2, '  File "/x.py", line 1, in f')
    assert f.take() == []
    f.feed(3, "RuntimeError: boom")
    f.feed(4, "")
    f.feed(5, "[2026-02-23 10:15:14] Received sigquit from a child process. It usually means the child failed.")
    done = f.take()
    assert [(r.line, r.end_line, r.mode) for r in done] == [(1, 3, "traceback"), (4, 4, "blank")]
    assert [(r.line, r.end_line) for r in f.flush()] == [(5, 5)]


def test_a_gap_in_line_numbers_closes_a_block() -> None:
    """Lines taken by the fast path leave gaps; a block never spans one."""
    f = Folder()
    f.feed(1, "Traceback (most recent call last):")
    f.feed(2, '  File "/x.py", line 1, in f')
    f.feed(4, '  File "/y.py", line 2, in g')
    assert [(r.line, r.end_line) for r in f.flush()] == [(1, 2), (4, 4)]


# ---------------------------------------------------------------- blank lines


def test_blank_lines_between_records_are_one_blank_record() -> None:
    text = "[2026-02-23 10:15:24] The server is fired up and ready to roll!\n\n\n   \nKilled\n"
    assert _fold_text(text) == [(1, 1, "sglang"), (2, 4, "blank"), (5, 5, "line")]


def test_blank_lines_inside_a_chained_traceback_stay_in_it() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/a.py", line 1, in f\n'
        "ValueError: first\n"
        "\n"
        "During handling of the above exception, another exception occurred:\n"
        "\n"
        "Traceback (most recent call last):\n"
        '  File "/b.py", line 2, in g\n'
        "KeyError: 'second'\n"
        "\n"
        "[2026-02-23 10:15:14] Received sigquit from a child process. It usually means the child failed.\n"
    )
    assert _fold_text(text) == [(1, 9, "traceback"), (10, 10, "blank"), (11, 11, "sglang")]


def test_trailing_blank_lines_of_a_block_are_left_out_of_it() -> None:
    text = 'Fatal Python error: Aborted\n\nThread 0x1 (most recent call first):\n  File "/a.py", line 1 in f\n\n\n'
    assert _fold_text(text) == [(1, 4, "fatal"), (5, 6, "blank")]


# ---------------------------------------------------------------- block shapes


def test_traceback_with_envelope_preface_carets_and_exception() -> None:
    text = (
        "[2026-02-23 10:15:13 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/scheduler.py", line 3120, in run_scheduler_process\n'
        "    scheduler = Scheduler(\n"
        "                ^^^^^^^^^^\n"
        "RuntimeError: Not enough memory. Please try to increase --mem-fraction-static.\n"
        "\n"
        "[2026-02-23 10:15:13] Received sigquit from a child process. It usually means the child failed.\n"
    )
    assert _fold_text(text) == [(1, 5, "traceback"), (6, 6, "blank"), (7, 7, "sglang")]


def test_traceback_hint_block_after_the_exception() -> None:
    text = (
        "[2025-08-03 10:15:20 TP0] Scheduler hit an exception: Traceback (most recent call last):\n"
        '  File "/sgl/cuda_graph_runner.py", line 380, in __init__\n'
        "Exception: Capture cuda graph failed: invalid argument\n"
        "Possible solutions:\n"
        "1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)\n"
        "2. set --cuda-graph-max-bs to a smaller value (e.g., 16)\n"
        "Open an issue on GitHub https://github.com/sgl-project/sglang/issues/new/choose \n"
    )
    assert _fold_text(text) == [(1, 7, "traceback")]


def test_exception_message_over_several_lines_ends_at_a_record_of_its_own() -> None:
    text = (
        '  File "/env/triton/compiler.py", line 80, in make_ir\n'
        "triton.compiler.errors.CompilationError: at 1:0:\n"
        "def _fwd_grouped_kernel_stage1(\n"
        "^\n"
        'ValueError("type fp8e4nv not supported in this architecture.")\n'
        "Killed\n"
    )
    assert _fold_text(text) == [(1, 5, "traceback"), (6, 6, "line")]


def test_excerpt_starting_mid_traceback_is_one_block() -> None:
    text = "                                   ^^^^^^^^^^^^^^^^^^^^\n  File \"/env/triton/jit.py\", line 720, in run\n    kernel = self._do_compile(key)\nAssertionError('bad')\n"
    assert _fold_text(text) == [(1, 4, "traceback")]


def test_component_preface_on_its_own_line_joins_the_traceback() -> None:
    text = (
        "[23:17:08 TP4] Exception in run_tp_server:\n"
        "Traceback (most recent call last):\n"
        '  File "/sgl/cuda_graph_runner.py", line 147, in __init__\n'
        "    self.capture()\n"
        "[23:17:09 TP5] Exception in run_tp_server:\n"
    )
    assert _fold_text(text) == [(1, 4, "traceback"), (5, 5, "traceback")]


def test_fatal_error_thread_dump_with_blank_lines() -> None:
    text = (
        "Fatal Python error: Aborted\n"
        "\n"
        "Thread 0x00007f54bb7ff6c0 (most recent call first):\n"
        '  File "/sgl/watchdog.py", line 147 in _watchdog_once\n'
        "\n"
        "Current thread 0x00007f60f8184780 (most recent call first):\n"
        '  File "/sgl/sampler.py", line 497 in sample\n'
        "\n"
        "Extension modules: numpy._core._multiarray_umath (total: 1)\n"
        "Failed to write segment data to pipe: Broken pipe\n"
    )
    assert _fold_text(text) == [(1, 9, "fatal"), (10, 10, "line")]


def test_cpp_terminate_block() -> None:
    text = (
        "terminate called after throwing an instance of 'c10::DistBackendError'\n"
        "  what():  [Rank 3] Watchdog caught collective operation timeout\n"
        "Exception raised from checkTimeout at ProcessGroupNCCL.cpp:632 (most recent call first):\n"
        "frame #0: c10::Error::Error() + 0x98 (0x7f in libc10.so)\n"
        "frame #1: <unknown function> + 0x5b8e (0x7f in libtorch_cuda.so)\n"
        "[2026-02-23 10:40:01] Received sigquit from a child process. It usually means the child failed.\n"
    )
    assert _fold_text(text) == [(1, 5, "cpp"), (6, 6, "sglang")]


def test_logging_error_block_and_a_lone_header() -> None:
    text = (
        "--- Logging error ---\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/lib/python3.12/logging/__init__.py", line 1163, in emit\n'
        "BrokenPipeError: [Errno 32] Broken pipe\n"
        "Call stack:\n"
        '  File "/sgl/engine.py", line 700, in sigquit_handler\n'
        "Message: 'Received sigquit'\n"
        "Arguments: ()\n"
        "--- Logging error ---\n"
        "[2026-02-25 16:33:59 TP13] Scheduler hit an exception: Traceback (most recent call last):\n"
    )
    assert _fold_text(text) == [(1, 8, "traceback"), (9, 9, "traceback"), (10, 10, "traceback")]


def test_python_warning_with_source_and_whitespace_only_lines() -> None:
    text = (
        "/env/torch_npu/contrib/transfer_to_npu.py:347: ImportWarning: \n"
        "    ****\n"
        "    The torch.Tensor.cuda is replaced with torch.Tensor.npu now..\n"
        "    \n"
        "  warnings.warn(msg, ImportWarning)\n"
        "/env/sglang/srt/layers/quantization/awq.py:77: UserWarning: Only CUDA, HIP and XPU support AWQ currently.\n"
        '  warnings.warn(f"Only CUDA, HIP and XPU support AWQ currently.")\n'
    )
    assert _fold_text(text) == [(1, 5, "warning"), (6, 7, "warning")]


def test_wrapped_server_args_dump_is_one_record() -> None:
    text = (
        "[2026-02-23 10:15:00] server_args=ServerArgs(model_path='m', tp_size=2,\n"
        "nested={'a': [1,\n"
        "2]}, mem_fraction_static=0.8)\n"
        "[2026-02-23 10:15:01] Using default HuggingFace chat template with detected content format: string\n"
    )
    assert _fold_text(text) == [(1, 3, "wrapped"), (4, 4, "sglang")]


def test_batch_oom_block_of_three_lines() -> None:
    text = (
        "[2026-02-23 10:31:02 TP0] Decode out of memory. Try to lower your batch size.\n"
        "Try to allocate 64 tokens.\n"
        "Available tokens: 12 (available_size=12 + evictable_size=0)\n"
        "\n"
        "[2026-02-23 10:31:03 TP0] Decode batch, #running-req: 8, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0\n"
    )
    assert _fold_text(text) == [(1, 3, "sglang"), (4, 4, "blank"), (5, 5, "sglang")]


_BANNER = (
    "[2025-04-20 10:00:01 TP0] \n"
    "\n"
    "CUDA Graph is DISABLED.\n"
    "This will cause significant performance degradation.\n"
    "CUDA Graph should almost never be disabled in most usage scenarios.\n"
    "If you encounter OOM issues, please try setting --mem-fraction-static to a lower value (such as 0.8 or 0.7) instead of disabling CUDA Graph.\n"
    "\n"
)


def test_a_message_that_starts_with_a_newline_holds_its_lines() -> None:
    """0.4.5.post3's banner (a warning "\\n\\nCUDA Graph is DISABLED.\\n...\\n"): the envelope line is
    empty, then a blank line, the text, and a blank line from the message's own last newline."""
    after = "[2025-04-20 10:00:02 TP0] Load weight begin. avail mem=78.00 GB\n"
    assert _fold_text(_BANNER + after) == [(1, 6, "newline"), (7, 7, "blank"), (8, 8, "sglang")]
    # without the trailing blank line, the next record's start ends it
    assert _fold_text(_BANNER[:-1] + after) == [(1, 6, "newline"), (7, 7, "sglang")]
    # an envelope alone before a record start, or before blank lines and a start, stays alone
    assert _fold_text("[2025-04-20 10:00:01 TP0] \n" + after) == [(1, 1, "newline"), (2, 2, "sglang")]
    assert _fold_text("[2025-04-20 10:00:01 TP0] \n\n\n" + after) == [(1, 1, "newline"), (2, 3, "blank"), (4, 4, "sglang")]
    # a line that is a record of its own is never held: the OOM killer's `Killed`, a progress bar
    assert _fold_text("[2025-04-20 10:00:01 TP0] \nKilled\n") == [(1, 1, "newline"), (2, 2, "line")]
    bar = "Loading safetensors checkpoint shards: 100% Completed | 2/2 [00:02<00:00,  1.2it/s]\n"
    assert _fold_text("[2025-04-20 10:00:01 TP0] \n\n" + bar) == [(1, 1, "newline"), (2, 2, "blank"), (3, 3, "line")]
    # text right after the envelope (a message "\\nfoo") and a later blank line ends it
    assert _fold_text("[2025-04-20 10:00:01] \nfoo\nbar\n\nbaz\n") == [(1, 3, "newline"), (4, 4, "blank"), (5, 5, "line")]


def test_playwright_call_log_block() -> None:
    text = 'Call log:\n  - navigating to "http://x/a.txt", waiting until "load"\n\n[2025-05-19 23:22:26] x\n'
    assert _fold_text(text) == [(1, 2, "call_log"), (3, 3, "blank"), (4, 4, "sglang")]


def test_records_never_swallow_the_next_envelope() -> None:
    text = (
        '[2026-02-23 10:15:13 TP0] Load weight begin. avail mem=78.50 GB\n[2026-02-23 10:15:13 TP1] Load weight begin. avail mem=78.50 GB\nINFO:     127.0.0.1:57114 - "GET /health HTTP/1.1" 200 OK\n'
    )
    assert _fold_text(text) == [(1, 1, "sglang"), (2, 2, "sglang"), (3, 3, "line")]


# ---------------------------------------------------------------- cleaning


@pytest.mark.parametrize(
    ("raw", "cleaned"),
    [
        ("[2026-02-23 10:15:02 TP0] Load weight begin.\r", "[2026-02-23 10:15:02 TP0] Load weight begin."),
        ("\x1b[32mINFO\x1b[0m:     Started server process [1]", "INFO:     Started server process [1]"),
        ("\rA:   0% Completed | 0/2 [00:00<?, ?it/s]\rA:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]", "A:  50% Completed | 1/2 [00:01<00:01,  1.00s/it]"),
        (
            "\rMulti-thread loading shards:   0% Completed | 0/15 [00:00<?, ?it/s][2026-08-01 23:37:54] Parameter x not found in params_dict",
            "[2026-08-01 23:37:54] Parameter x not found in params_dict",
        ),
        (
            "Capturing batches (bs=32 avail_mem=8.83 GB):  17%|#         | 1/6 [02:22<11:51, 142.40s/it] [rank1]:[W206 12:14:25.398606072 compiler_depend.ts:207] Warning: x",
            "[rank1]:[W206 12:14:25.398606072 compiler_depend.ts:207] Warning: x",
        ),
        (
            "Capturing (bs=1 avail_mem=5.89 GB):   0%|          | 0/58 [00:00<?, ?it/s]/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: leaked",
            "/usr/lib/python3.12/multiprocessing/resource_tracker.py:279: UserWarning: leaked",
        ),
        ('................[2026-02-06 12:20:06] INFO:     127.0.0.1:1 - "GET / HTTP/1.1" 200 OK', '[2026-02-06 12:20:06] INFO:     127.0.0.1:1 - "GET / HTTP/1.1" 200 OK'),
        ("  [2026-02-20 11:13:52 DP1 TP3 EP3] Load weight begin. avail mem=77.48 GB", "[2026-02-20 11:13:52 DP1 TP3 EP3] Load weight begin. avail mem=77.48 GB"),
        # not glued: a log message that merely contains brackets stays whole
        ("[2026-02-23 10:15:02] Capture cuda graph bs [1, 2][2026-02-23 10:15:03] x", "[2026-02-23 10:15:02] Capture cuda graph bs [1, 2][2026-02-23 10:15:03] x"),
        ("    File in an indented block", "    File in an indented block"),
    ],
)
def test_clean(raw: str, cleaned: str) -> None:
    assert clean(raw) == cleaned


def test_a_run_of_blank_lines_is_not_cut_where_the_records_are_taken():
    """The parser takes completed records at each chunk's end; a run of blank lines there may go
    on in the next chunk (found by hypothesis: two blank lines across a 1 KB chunk boundary
    were two blank records on the fast path, one for lark)."""
    from sglog.read.records import Folder

    f = Folder()
    f.feed(1, "x")
    f.feed(2, "")
    taken = f.take()
    assert [(r.line, r.end_line) for r in taken] == [(1, 1)]
    f.feed(3, "")
    f.feed(4, "y")
    rest = f.take() + f.flush()
    assert [(r.line, r.end_line, r.mode) for r in rest] == [(2, 3, "blank"), (4, 4, "line")]


def test_blank_lines_across_a_chunk_boundary_read_like_lark(tmp_path):
    from sglog.read.parse import comparable, parse_file

    prefill = (
        "[2026-02-23 10:16:52 TP1] Prefill batch, #new-seq: 1, #new-token: 7, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0, input throughput (token/s): 0.00, cuda graph: False"
    )
    decode = "[2026-02-23 10:16:52 TP0] Decode batch, #running-req: 8, #token: 1840, token usage: 0.01, cuda graph: True, gen throughput (token/s): 412.37, #queue-req: 0"
    for blanks in range(1, 5):
        for lead in range(0, 12):
            lines = [decode] * lead + [prefill] + [""] * blanks + [prefill]
            p = tmp_path / f"x{blanks}_{lead}.log"
            p.write_text("\n".join(lines) + "\n")
            fast = [comparable(d) for d in parse_file(str(p), keep_text=True, chunk_bytes=1024, threads=2).iter_dicts()]
            slow = [comparable(d) for d in parse_file(str(p), keep_text=True, fast=False).iter_dicts()]
            assert fast == slow, (blanks, lead)


# ---------------------------------------------------------------- fragments (pasted excerpts)


def test_tail_starting_mid_traceback_is_one_block() -> None:
    text = (
        '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 1100, in run_scheduler_process\n'
        "    scheduler = Scheduler(server_args, port_args, gpu_id, tp_rank)\n"
        "                ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^\n"
        "RuntimeError: boom\n"
        "[2026-02-23 10:15:14] Received sigquit from a child process. It usually means the child failed.\n"
    )
    assert _fold_text(text) == [(1, 4, "traceback"), (5, 5, "sglang")]


def test_unindented_frames_fold_into_a_traceback() -> None:
    """GitHub stored the excerpt with its indentation stripped: frames start at column 0."""
    text = (
        'File "/x/loader.py", line 437, in load_model\n'
        "    self.load_weights_and_postprocess(\n"
        'File "/x/qwen3.py", line 493, in load_weights\n'
        "param = params_dict[name]\n"
        "KeyError: 'midlayer.weight'\n"
    )
    assert _fold_text(text) == [(1, 5, "traceback")]


def test_source_line_and_exception_line_fold_and_the_sglang_line_after_stays_its_own() -> None:
    text = (
        "if self.sampling_params.max_new_tokens > 0:\n"
        "TypeError: '>' not supported between instances of 'NoneType' and 'int'\n"
        "[2025-03-03 06:49:28 TP5] Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens).\n"
        "[2025-03-03 06:49:28 TP5] Scheduler hit an exception: Traceback (most recent call last):\n"
    )
    assert _fold_text(text) == [(1, 2, "traceback"), (3, 3, "sglang"), (4, 4, "traceback")]


def test_an_exception_line_alone_is_a_traceback_fragment_but_a_known_line_before_it_is_not_swallowed() -> None:
    assert _fold_text("TypeError: bad operand\n") == [(1, 1, "traceback")]
    # `Killed` is a record of its own (a grammar rule reads it): it does not become a source line
    assert _fold_text("Killed\nRuntimeError: x\n") == [(1, 1, "line"), (2, 2, "traceback")]


def test_cpp_frames_alone_and_from_exception_raised_from() -> None:
    frames = "".join(f"frame #{i}: fn{i}() + 0x1b9 (0x7f3b1c7a2a09 in /env/torch/lib/libtorch_cuda.so)\n" for i in range(3))
    assert _fold_text(frames) == [(1, 3, "cpp")]
    raised = "Exception raised from checkTimeout at ../torch/csrc/distributed/c10d/ProcessGroupNCCL.cpp:618 (most recent call first):\n"
    assert _fold_text(raised + frames + "[2026-02-23 10:15:14] Received sigquit from a child process.\n") == [(1, 4, "cpp"), (5, 5, "sglang")]


def test_c10_frames_inside_a_python_exception_message_stay_in_the_traceback() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x.py", line 1, in f\n'
        "RuntimeError: NCCL error\n"
        "Exception raised from getNCCLComm at ../ProcessGroupNCCL.cpp:1957 (most recent call first):\n"
        "frame #0: c10::Error::Error() + 0x57 (0x7f0d2c1b3897 in /env/libc10.so)\n"
    )
    assert _fold_text(text) == [(1, 5, "traceback")]


def test_thread_dump_from_the_middle() -> None:
    text = (
        "Thread 0x00007f54bb7ff6c0 (most recent call first):\n"
        '  File "/env/lib/python3.12/threading.py", line 331 in wait\n'
        "\n"
        "Current thread 0x00007f60f8184780 (most recent call first):\n"
        '  File "/sgl/python/sglang/srt/managers/scheduler.py", line 880 in event_loop_overlap\n'
        "\n"
        "Extension modules: numpy._core._multiarray_umath (total: 1)\n"
        "[2026-02-23 10:15:14] Received sigquit from a child process.\n"
    )
    assert _fold_text(text) == [(1, 7, "fatal"), (8, 8, "sglang")]
    # faulthandler's frames alone (no comma before `in`) are a dump, not a traceback
    assert _fold_text('  File "/x.py", line 3 in f\n  File "/y.py", line 4 in g\n') == [(1, 2, "fatal")]


def test_a_traceback_does_not_swallow_a_thread_dump_after_it() -> None:
    text = (
        "Traceback (most recent call last):\n"
        '  File "/x.py", line 1, in f\n'
        "RuntimeError: boom\n"
        "Thread 0x00007f54bb7ff6c0 (most recent call first):\n"
        '  File "/env/lib/python3.12/threading.py", line 331 in wait\n'
    )
    assert _fold_text(text) == [(1, 3, "traceback"), (4, 5, "fatal")]


def test_native_backtrace_block_and_its_frames_alone() -> None:
    text = (
        "[host:12796:1:13303] Caught signal 11 (Segmentation fault: address not mapped to object at address 0x8)\n"
        "==== backtrace (tid:  13303) ====\n"
        " 0  /usr/lib/libucs.so.0(ucs_handle_error+0x294) [0x7fbec008fba4]\n"
        " 1  /usr/lib/x86_64-linux-gnu/libc.so.6(+0x1a07cd) [0x7fc0957437cd]\n"
        "=================================\n"
        "[2026-02-23 10:15:14] Received sigquit from a child process.\n"
    )
    assert _fold_text(text) == [(1, 5, "native"), (6, 6, "sglang")]
    assert _fold_text(" 3  /usr/lib/libucp.so.0(+0x8e6da) [0x7fbeb80ee6da]\n 4  /usr/lib/libuct.so.0(+0x1) [0x7fbeb852804a]\n") == [(1, 2, "native")]


def test_warning_fragment_without_its_header() -> None:
    text = "  Example: sglang serve --model-path <model> [options]\n  warnings.warn(\n[2026-02-23 10:15:14] Received sigquit from a child process.\n"
    assert _fold_text(text) == [(1, 2, "warning"), (3, 3, "sglang")]
    # indented lines no rule reads, without an echo after them, stay unparsed lines (one record)
    assert _fold_text("  some text\n  more text\nplain\n") == [(1, 2, "indent"), (3, 3, "line")]


def test_fragments_parse_as_their_kinds() -> None:
    from sglog.read.parse import RecordParser

    rp = RecordParser("x.log")
    cases = {
        "frame #3: c10d::ProcessGroupNCCL::watchdogHandler() + 0x1b9 (0x7f in /x/libtorch_cuda.so)\n": "cpp_exception",
        "TypeError: bad\n": "traceback",
        " 3  /usr/lib/libucp.so.0(+0x8e6da) [0x7fbeb80ee6da]\n": "native_backtrace",
        "  Example: x\n  warnings.warn(\n": "python_warning",
        'Thread 0x00007f54bb7ff6c0 (most recent call first):\n  File "/t.py", line 331 in wait\n': "fatal_error",
    }
    for text, kind in cases.items():
        lines = text.rstrip("\n").split("\n")
        (rec,) = fold(list(enumerate(lines, start=1)))
        ev = rp(rec)
        assert ev.kind == kind, (text, ev.kind)
        assert ev.fields.get("fragment") is True, (text, ev.fields)
