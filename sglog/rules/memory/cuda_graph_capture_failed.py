"""SGL104 cuda-graph-capture-failed: CUDA graph capture failed with an error that is *not* an out-of-memory."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import exception_evidence, pick_remedy, text_line_evidence
from sglog.rules.ownership import CONTEXT, SIGNATURE, CrashRule

# (causes, as the reader names them: sglog/read/signatures.py CAUSES; args patch, why)
_CAPTURE_REMEDIES = (
    (
        ("custom_all_reduce",),
        {"--disable-custom-all-reduce": "true"},
        "The custom all-reduce kernels failed inside capture: disable them (NCCL is used instead).",
    ),
    (("torch_compile",), {"--enable-torch-compile": None}, "torch.compile failed inside capture: drop --enable-torch-compile."),
    (("piecewise_graph",), {"--disable-piecewise-cuda-graph": "true"}, "The piecewise (prefill) graphs failed: disable them; decode graphs stay."),
    (
        ("capture_collective", "nccl"),
        {"--disable-custom-all-reduce": "true"},
        "A collective broke the capture (custom all-reduce or an NCCL override such as NCCL_ALGO): disable custom all-reduce and unset NCCL_ALGO.",
    ),
)


class CudaGraphCaptureFailed(CrashRule):
    """CUDA graph capture failed with an error that is *not* an out-of-memory.

    ## What it finds
    A crash in CUDA-graph capture (`Capture cuda graph failed:` or an
    exception raised from the graph runner) whose exception is not an OOM and
    not an unsupported-architecture error (that is `unsupported-gpu-arch`).

    ## Why it matters
    SGLang's hint after every capture failure says to lower
    `--mem-fraction-static` and `--cuda-graph-max-bs`.  For a non-memory
    error that advice only shrinks the KV pool and does not help; the cause is
    a kernel, a collective or a compiler.

    ## Evidence
    The capture-begin line and the exception line.

    ## Suggested fix
    Chosen from the exception text: custom all-reduce / IPC errors ->
    `--disable-custom-all-reduce`; torch.compile errors -> drop
    `--enable-torch-compile`; piecewise-graph errors ->
    `--disable-piecewise-cuda-graph`; errors of a collective during capture
    -> `--disable-custom-all-reduce` and unset `NCCL_ALGO`.  Otherwise
    `--disable-cuda-graph` to get the server up while the error is reported.
    Never a memory change.

    ## Fix safety
    Without custom all-reduce, all-reduces go through NCCL (slower on NVLink,
    often equal on PCIe).  `--disable-cuda-graph` costs a large part of decode
    throughput: a workaround, not a fix.

    ## Example
    Case: a collective broke the capture: disable custom all-reduce, never touch memory

    `Capture cuda graph failed: CUDA error: operation not permitted when stream
    is capturing`: a collective broke the capture, `lowering memory settings will
    not help` -> `--disable-custom-all-reduce`.
    """

    code = "SGL104"
    name = "cuda-graph-capture-failed"
    triggers = ("startup", "crash")
    severity = "error"
    precedence = 100

    def claim(self, run, c) -> int | None:
        rc = c.event
        named = facts.capture_named(c) or facts.in_capture_frames(rc)
        if not (named and facts.in_capture(run, c)):
            return None
        # a traceback cut before its exception line: the frames still place it in capture
        return CONTEXT if c.truncated else SIGNATURE

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        ev = exception_evidence(rc)
        hint = text_line_evidence(rc, "Capture cuda graph failed") or text_line_evidence(rc, "graph failed")
        if hint is not None:
            ev.append(hint)
        args, why = pick_remedy(c.causes, _CAPTURE_REMEDIES, ({"--disable-cuda-graph": "true"}, "Get the server up without CUDA graphs while the capture error is reported upstream."))
        where = f" on {rc.rank.label}" if rc.rank else ""
        if c.truncated:
            fn = next((f for f in reversed(facts.frame_functions(rc)) if f), None)
            msg = (
                f"CUDA graph capture failed{where}; the exception line is cut off in the log"
                + (f" (last frame: {fn})" if fn else "")
                + ", so this assumes a non-memory error: if the full log shows an out-of-memory error, lower --cuda-graph-max-bs instead (see cuda-graph-capture-oom)."
            )
            why = "Get the full traceback (the line after the last frame names the error). " + why
        else:
            what = (rc.get("exc_message") or "").split("\n")[0][:160]
            msg = f"CUDA graph capture failed{where} with a non-memory error: {rc.get('exc_type')}: {what}".rstrip(": ") + " (lowering memory settings will not help)."
        fix = Fix(summary=why, args=args, safety="--disable-cuda-graph costs much decode throughput; --disable-custom-all-reduce moves all-reduces to NCCL.")
        yield self.finding(run, msg, ev, fix)
