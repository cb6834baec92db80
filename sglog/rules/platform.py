"""Platform rules (SGL4xx): the GPU, its kernels, the collectives and the installed packages."""

from __future__ import annotations

import re
from dataclasses import replace
from typing import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Rule, event_evidence, exception_evidence, exception_line, nearby_line_evidence, pick_remedy

# (patterns, args patch, what to do)
_ARCH_REMEDIES = (
    (("fp8e4nv",), {"--kv-cache-dtype": "fp8_e5m2"}, "Triton on this GPU (sm_80/sm_86) cannot emit fp8 e4m3: use --kv-cache-dtype fp8_e5m2 with the Triton backend, or --attention-backend flashinfer."),
    (("torchsymmmemcommunicator", "torch_symm_mem", "keyerror: 12"), {"--enable-torch-symm-mem": None}, "Torch symmetric memory supports only SM90/SM100: drop --enable-torch-symm-mem."),
    (("trtllm", "tllmgen", "only supported on blackwell", "backends are supported on blackwell"), {"--attention-backend": "triton"}, "The chosen attention kernels exist only for SM100 (B200): use --attention-backend triton on this GPU."),
    (("flashinfer", "no supported cuda architectures found", "requires gpus with sm"), {"--attention-backend": "triton", "--sampling-backend": "pytorch"}, "FlashInfer's JIT cannot build for this GPU (needs a CUDA >= 12.9 toolkit for SM12x): use --attention-backend triton and --sampling-backend pytorch, or install a newer CUDA toolkit (CUDA_HOME)."),
    (("no kernel image is available",), {}, "The installed kernels were not built for this GPU architecture: install a build (wheel or image) for it, or a backend that JIT-compiles (--attention-backend triton)."),
)


class UnsupportedGpuArch(Rule):
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
    `ValueError("type fp8e4nv not supported in this architecture. The
    supported fp8 dtypes are ('fp8e4b15', 'fp8e5')")` in Triton decode
    attention on an RTX 3090 -> `--kv-cache-dtype fp8_e5m2`.
    """

    code = "SGL401"
    name = "unsupported-gpu-arch"
    severity = "error"

    def _check(self, run, o) -> Iterator:
        c = facts.crash_of(run, self.name)
        if c is not None:
            rc = c.event
            ev = exception_evidence(rc)
            arch_line = nearby_line_evidence(run, rc, facts.ARCH_PATTERNS)
            if arch_line is not None and all(arch_line.line != x.line for x in ev):
                ev.append(arch_line)
            args, what = pick_remedy(c.text, _ARCH_REMEDIES, ({}, "Use a backend built for this GPU."))
            detail = arch_line.text.strip() if arch_line is not None and arch_line.text else exception_line(rc)
            if "torch_symm_mem" in " ".join(facts.frame_files(rc)) and arch_line is None:
                detail = f"TorchSymmMemCommunicator raised {detail} (its size table has no entry for this GPU's major version)"
            msg = f"A kernel is not supported on this GPU architecture: {detail[:180]}"
            yield self.finding(run, msg, ev, Fix(summary=what, args=args, safety=self.fix_safety))
            return
        # a warning the server survives: torch symmetric memory unavailable
        for e in run.events:
            if "TorchSymmMemCommunicator: Device capability" in (e.text or "") and "not supported" in (e.text or ""):
                msg = "Torch symmetric memory is not available on this GPU (it supports SM90/SM100 only): --enable-torch-symm-mem has no effect."
                fix = Fix(summary="Drop --enable-torch-symm-mem on this GPU.", args={"--enable-torch-symm-mem": None}, safety="None: the communicator was already disabled.")
                yield self.finding(run, msg, [event_evidence(e)], fix, severity="warning")
                return


_DEPENDENCY_REMEDIES = (
    ("deepep", {"--moe-a2a-backend": None}, "Install DeepEP (github.com/deepseek-ai/deepep) or drop --moe-a2a-backend deepep (the default all-to-all needs no extra package)."),
    ("mooncake", {}, "Install the Mooncake transfer engine (pip install mooncake-transfer-engine) or choose another --disaggregation-transfer-backend."),
    ("flashinfer", {"--attention-backend": "triton", "--sampling-backend": "pytorch"}, "Install flashinfer matching the torch/CUDA version, or avoid it: --attention-backend triton --sampling-backend pytorch."),
    ("sgl_kernel", {}, "Install sgl-kernel matching the SGLang version (pip install sgl-kernel==<version>)."),
    ("vllm", {}, "This quantization or model path imports vLLM: install the vLLM version SGLang pins, or use a format SGLang supports natively."),
)
_MODULE = re.compile(r"No module named '([^']+)'|([A-Za-z][\w.\-]*) is not installed|cannot import name '([^']+)' from '([^']+)'")


class MissingDependency(Rule):
    """An optional package the chosen backend needs is not installed.

    ## What it finds
    A crash whose root cause is an `ImportError` / `ModuleNotFoundError`
    (`DeepEP is not installed`, `No module named 'mooncake'`...).

    ## Why it matters
    Backends such as DeepEP (expert-parallel all-to-all), Mooncake
    (disaggregation) or FlashInfer are separate packages; choosing them on the
    command line without installing them kills startup, usually on every rank.

    ## Evidence
    The exception line naming the module.

    ## Suggested fix
    Install the package, or drop the flag that selected the backend: DeepEP ->
    remove `--moe-a2a-backend`; FlashInfer -> `--attention-backend triton
    --sampling-backend pytorch`; others: the install command.

    ## Fix safety
    Without DeepEP, expert parallelism falls back to the default all-to-all
    (slower at large EP); the Triton backend can be slower than FlashInfer.

    ## Example
    `ImportError: DeepEP is not installed. Please install DeepEP package from
    https://github.com/deepseek-ai/deepep.` with `--moe-a2a-backend deepep`.
    """

    code = "SGL402"
    name = "missing-dependency"
    severity = "error"

    def _check(self, run, o) -> Iterator:
        c = facts.crash_of(run, self.name)
        if c is None:
            return
        rc = c.event
        text = "\n".join(f"{x.get('message') or ''}" for x in rc.get("exceptions") or []) or (rc.get("exc_message") or "")
        m = _MODULE.search(text)
        module = next((g for g in m.groups() if g), None) if m else None
        args, what = pick_remedy(c.text, _DEPENDENCY_REMEDIES, ({}, f"Install the missing package{f' ({module})' if module else ''} in the server's environment."))
        if "--moe-a2a-backend" in args and run.args and run.args.get("moe_a2a_backend") in (None, "none"):
            args = {}
        exc = exception_line(rc)
        msg = f"Startup failed on a missing package{f' ({module})' if module else ''}: {exc[:180]}"
        yield self.finding(run, msg, exception_evidence(rc), Fix(summary=what, args=args, safety=self.fix_safety))


class NcclTimeout(Rule):
    """A collective (NCCL) timed out or the communicator failed.

    ## What it finds
    A crash whose root cause is an NCCL error (`NCCL error`, `ProcessGroupNCCL`
    watchdog `collective operation timeout`, `remote process exited or there
    was a network error`), or a crash preceded by NCCL/NVSHMEM warnings when
    the root cause itself is unspecific.

    ## Why it matters
    All ranks wait for each other in every collective: one rank that hangs,
    dies or cannot reach the others stops the whole group.  Multi-node setups
    fail on the network (wrong interface, blocked port, IPv6/IPv4 mix-ups);
    single nodes on P2P/shared-memory problems or a custom all-reduce hang.

    ## Evidence
    The NCCL error line and the first NCCL warning lines before it.

    ## Suggested fix
    Multi-node or network errors: run with `NCCL_DEBUG=INFO`, pin the interface
    (`NCCL_SOCKET_IFNAME`, `GLOO_SOCKET_IFNAME`), check `--dist-init-addr` is
    reachable from every node.  Single node: `--disable-custom-all-reduce`;
    if P2P is broken, `NCCL_P2P_DISABLE=1`; give containers a large `--shm-size`.

    ## Fix safety
    Disabling custom all-reduce or P2P slows all-reduces (most on NVLink).
    Environment variables are not flags: set them in the launch environment.

    ## Example
    `RuntimeError: NCCL error: remote process exited or there was a network
    error` on 16 ranks of a 2-node TP16 launch after `socketPollConnect ...
    Connection refused` -> check the interface and init address.
    """

    code = "SGL403"
    name = "nccl-timeout"
    severity = "error"

    def _check(self, run, o) -> Iterator:
        c = facts.crash_of(run, self.name)
        if c is None:
            return
        rc = c.event
        warns = [e for e in run.events if e.kind == "nccl_log" and (e.file, e.line) <= (rc.file, rc.line) and str(e.get("level") or "") in ("WARN", "ERROR")]
        ev = [event_evidence(e) for e in warns[:2]] + exception_evidence(rc)
        multi = (run.parallelism.get("nnodes") or 1) > 1 or facts.has_any(c.text, ("network", "socket", "connection", "remote process")) or any(facts.has_any((e.text or "").lower(), ("socket", "connection", "network")) for e in warns)
        if multi:
            fix = Fix(
                summary="Network/rendezvous failure between ranks: rerun with NCCL_DEBUG=INFO, pin the interface with NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME, and check that --dist-init-addr is reachable from every node.",
                args={},
                safety=self.fix_safety,
            )
        else:
            fix = Fix(
                summary="A collective hung or failed on one node: --disable-custom-all-reduce; if P2P is broken set NCCL_P2P_DISABLE=1; in containers use a large --shm-size.",
                args={} if run.args.get("disable_custom_all_reduce") is True else {"--disable-custom-all-reduce": "true"},
                safety=self.fix_safety,
            )
        where = f" on {rc.rank.label}" if rc.rank else ""
        if facts.has_any(facts.lower_blob(rc), facts.NCCL_PATTERNS) or not warns:
            what = (rc.get("exc_message") or "").split("\n")[0]
            msg = f"A collective failed{where}: {(rc.get('exc_type') or 'NCCL')}: {what[:160]}".rstrip(": ")
        else:
            lib = "NVSHMEM" if any("nvshmem" in (e.text or "").lower() for e in warns) else "NCCL"
            first = warns[0].get("message") or (warns[0].text or "")
            msg = f"{lib} failed before the crash ({len(warns)} error/warning lines, first: {first.strip()[:120]}); the processes then exited ({rc.get('exc_type') or rc.kind})."
        yield self.finding(run, msg, ev, fix)


class IllegalMemoryAccess(Rule):
    """A GPU kernel faulted: illegal memory access (CUDA) or a hardware exception (ROCm/HSA).

    ## What it finds
    A crash whose root cause is `CUDA error: an illegal memory access was
    encountered` (or an illegal instruction, misaligned address, unspecified
    launch failure) or ROCm's `HSA_STATUS_ERROR_EXCEPTION` / `Memory access
    fault by GPU`.

    ## Why it matters
    The process and its CUDA context are dead; every rank follows.  Causes: a
    kernel bug for this shape/backend, an out-of-memory in disguise (SGLang's
    troubleshooting notes it), a mismatched build.  The failing kernel is often
    not the one in the traceback (errors are asynchronous).

    ## Evidence
    The error line (and the Python exception carrying it).

    ## Suggested fix
    Treat it as an OOM in disguise first: lower `--mem-fraction-static` by
    `step` (0.05).  To find the kernel, rerun with `CUDA_LAUNCH_BLOCKING=1`
    (and `--disable-cuda-graph` to bisect graphs); try another
    `--attention-backend`; update SGLang / the kernels.

    ## Fix safety
    A lower fraction shrinks the KV pool; `CUDA_LAUNCH_BLOCKING=1` and
    `--disable-cuda-graph` are for diagnosis only (much slower).

    ## Example
    `HSA_STATUS_ERROR_EXCEPTION: An HSAIL operation resulted in a hardware
    exception` in the sampler of a ROCm TP2 server with fraction 0.85 ->
    `--mem-fraction-static 0.80`.
    """

    code = "SGL404"
    name = "illegal-memory-access"
    severity = "error"

    def _check(self, run, o) -> Iterator:
        c = facts.crash_of(run, self.name)
        if c is None:
            return
        rc = c.event
        ev = exception_evidence(rc)
        hit = nearby_line_evidence(run, rc, facts.ILLEGAL_MEMORY_PATTERNS)
        if hit is not None:
            low = (hit.text or "").lower()
            at = min((low.find(p) for p in facts.ILLEGAL_MEMORY_PATTERNS if p in low), default=-1)
            if at > 0:
                hit = replace(hit, note=(hit.text or "")[at:].split(":", 1)[0])
            ev.insert(0, hit)
        mfs = run.memory.mem_fraction_static
        args = {"--mem-fraction-static": f"{mfs - 0.05:.2f}"} if mfs is not None else {}
        fix = Fix(
            summary=("Lower --mem-fraction-static by 0.05 (an OOM in disguise is the common cause); " if mfs is not None else "")
            + "locate the kernel with CUDA_LAUNCH_BLOCKING=1 (and --disable-cuda-graph to bisect), try another --attention-backend, update the kernels.",
            args=args,
            safety=self.fix_safety,
        )
        detail = (rc.get("exc_message") or "").split("\n")[0]
        if hit is not None and hit.text:
            low = hit.text.lower()
            at = min((low.find(p) for p in facts.ILLEGAL_MEMORY_PATTERNS if p in low), default=0)
            detail = hit.text[at:].strip()
        detail = detail[:180]
        msg = f"A GPU kernel faulted during {c.phase or 'the run'}: {detail}"
        yield self.finding(run, msg, ev, fix)
