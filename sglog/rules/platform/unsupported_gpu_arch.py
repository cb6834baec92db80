"""SGL401 unsupported-gpu-arch: a kernel, backend or data type is not available on this GPU architecture."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.read.signatures import PHRASES
from sglog.rules import facts
from sglog.rules.base import event_evidence, exception_evidence, exception_line, nearby_line_evidence, pick_remedy
from sglog.rules.ownership import SIGNATURE, CrashRule

# (causes, as the reader names them: sglog/read/signatures.py CAUSES; args patch, what to do)
_ARCH_REMEDIES: tuple[tuple[tuple[str, ...], dict[str, str | None], str], ...] = (
    (
        ("triton_fp8e4nv",),
        {"--kv-cache-dtype": "fp8_e5m2"},
        "Triton on this GPU (sm_80/sm_86) cannot emit fp8 e4m3: use --kv-cache-dtype fp8_e5m2 with the Triton backend, or --attention-backend flashinfer.",
    ),
    (("torch_symm_mem",), {"--enable-torch-symm-mem": None}, "Torch symmetric memory supports only SM90/SM100: drop --enable-torch-symm-mem."),
    (
        ("blackwell_only_kernel",),
        {"--attention-backend": "triton"},
        "The chosen attention kernels exist only for SM100 (B200): use --attention-backend triton on this GPU.",
    ),
    (
        ("flashinfer", "cuda_arch_list"),
        {"--attention-backend": "triton", "--sampling-backend": "pytorch"},
        "FlashInfer's JIT cannot build for this GPU (needs a CUDA >= 12.9 toolkit for SM12x): use --attention-backend triton and --sampling-backend pytorch, or install a newer CUDA toolkit (CUDA_HOME).",
    ),
    (
        ("no_kernel_image",),
        {},
        "The installed kernels were not built for this GPU architecture: install a build (wheel or image) for it, or a backend that JIT-compiles (--attention-backend triton).",
    ),
)


# SGLang's warning (0.5.4.post3-) that torch symmetric memory has no support for this GPU: a
# catalogue template, matched by the reader
TORCH_SYMM_MEM_UNSUPPORTED = "TorchSymmMemCommunicator: Device capability {} not supported, communicator is not available."


class UnsupportedGpuArch(CrashRule):
    """A kernel, backend or data type is not available on this GPU architecture.

    ## What it finds
    A crash whose exception says the architecture is not supported: `no kernel
    image is available for execution on the device`, `Unsupported
    architecture` (TRT-LLM kernels on SM120), `type fp8e4nv not supported in
    this architecture` (Triton fp8 on sm_86), FlashInfer JIT without support
    for the GPU, `TorchSymmMemCommunicator: Device capability 12 not supported`
    (or, in older builds, `KeyError: 12` raised from `torch_symm_mem.py`).

    ## Why it matters
    Consumer and workstation Blackwell (SM120), Ampere (sm_86) and new cards
    lack kernels that SGLang's auto-selection may pick.  The generic hint after
    a failed capture (lower the memory fraction) does not apply: a different
    backend or data type does.

    ## Evidence
    The exception line naming the architecture problem.

    ## Suggested fix
    From the error text: fp8e4nv -> `--kv-cache-dtype fp8_e5m2` (or FlashInfer
    attention); TRT-LLM / SM100-only kernels -> `--attention-backend triton`;
    FlashInfer JIT -> `--attention-backend triton --sampling-backend pytorch`
    (or a CUDA >= 12.9 toolkit); torch symmetric memory -> drop
    `--enable-torch-symm-mem`; missing kernel image -> a build for this GPU.

    ## Fix safety
    Triton attention is portable but can be slower and does not support every
    feature (page size > 1); fp8_e5m2 keeps less precision than e4m3.

    ## Example
    Case: Triton cannot emit fp8e4nv on sm_86

    `ValueError("type fp8e4nv not supported in this architecture. The supported
    fp8 dtypes are ('fp8e4b15', 'fp8e5')")` in Triton's `decode_attention_fwd_grouped`:
    Triton on this GPU (`sm_80/sm_86`) cannot emit fp8 e4m3, so sglog suggests
    `--kv-cache-dtype fp8_e5m2` with the Triton backend, or `--attention-backend
    flashinfer`.
    """

    code = "SGL401"
    name = "unsupported-gpu-arch"
    triggers = ("sglang_message", "crash", "text")  # (text: the line of the error naming the architecture, for evidence)
    severity = "error"
    precedence = 50
    signature = "arch_unsupported"

    def claim(self, run, c) -> int | None:
        return SIGNATURE if self.signature in c.signatures else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is not None:
            rc = c.event
            ev = exception_evidence(rc)
            arch_line = nearby_line_evidence(run, rc, PHRASES[self.signature])
            if arch_line is not None and all(arch_line.line != x.line for x in ev):
                ev.append(arch_line)
            args, what = pick_remedy(c.causes, _ARCH_REMEDIES, ({}, "Use a backend built for this GPU."))
            detail = arch_line.text.strip() if arch_line is not None and arch_line.text else exception_line(rc)
            if "torch_symm_mem" in " ".join(facts.frame_files(rc)) and arch_line is None:
                detail = f"TorchSymmMemCommunicator raised {detail} (its size table has no entry for this GPU's major version)"
            msg = f"A kernel is not supported on this GPU architecture: {detail[:180]}"
            yield self.finding(run, msg, ev, Fix(summary=what, args=args, safety=self.fix_safety))
            return
        # a warning the server survives: torch symmetric memory unavailable
        for e in run.events_of("sglang_message"):
            if e.get("template") == TORCH_SYMM_MEM_UNSUPPORTED:
                msg = "Torch symmetric memory is not available on this GPU (it supports SM90/SM100 only): --enable-torch-symm-mem has no effect."
                fix = Fix(summary="Drop --enable-torch-symm-mem on this GPU.", args={"--enable-torch-symm-mem": None}, safety="None: the communicator was already disabled.")
                yield self.finding(run, msg, [event_evidence(e)], fix, severity="warning")
                return
