"""Platform rules (SGL4xx): the GPU, its kernels, the collectives, the KV transfer network and the installed packages."""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import replace

import polars as pl

from sglog.findings import Fix
from sglog.read.signatures import PHRASES
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, exception_evidence, exception_line, first_line, nearby_line_evidence, pick_remedy, row_evidence, window_evidence
from sglog.rules.ownership import CONTEXT, SIGNATURE, CrashRule

# (patterns, args patch, what to do)
_ARCH_REMEDIES = (
    (
        ("fp8e4nv",),
        {"--kv-cache-dtype": "fp8_e5m2"},
        "Triton on this GPU (sm_80/sm_86) cannot emit fp8 e4m3: use --kv-cache-dtype fp8_e5m2 with the Triton backend, or --attention-backend flashinfer.",
    ),
    (("torchsymmmemcommunicator", "torch_symm_mem", "keyerror: 12"), {"--enable-torch-symm-mem": None}, "Torch symmetric memory supports only SM90/SM100: drop --enable-torch-symm-mem."),
    (
        ("trtllm", "tllmgen", "only supported on blackwell", "backends are supported on blackwell"),
        {"--attention-backend": "triton"},
        "The chosen attention kernels exist only for SM100 (B200): use --attention-backend triton on this GPU.",
    ),
    (
        ("flashinfer", "no supported cuda architectures found", "requires gpus with sm"),
        {"--attention-backend": "triton", "--sampling-backend": "pytorch"},
        "FlashInfer's JIT cannot build for this GPU (needs a CUDA >= 12.9 toolkit for SM12x): use --attention-backend triton and --sampling-backend pytorch, or install a newer CUDA toolkit (CUDA_HOME).",
    ),
    (
        ("no kernel image is available",),
        {},
        "The installed kernels were not built for this GPU architecture: install a build (wheel or image) for it, or a backend that JIT-compiles (--attention-backend triton).",
    ),
)


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
    `ValueError("type fp8e4nv not supported in this architecture. The
    supported fp8 dtypes are ('fp8e4b15', 'fp8e5')")` in Triton decode
    attention on an RTX 3090 -> `--kv-cache-dtype fp8_e5m2`.
    """

    code = "SGL401"
    name = "unsupported-gpu-arch"
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
            args, what = pick_remedy(c.text, _ARCH_REMEDIES, ({}, "Use a backend built for this GPU."))
            detail = arch_line.text.strip() if arch_line is not None and arch_line.text else exception_line(rc)
            if "torch_symm_mem" in " ".join(facts.frame_files(rc)) and arch_line is None:
                detail = f"TorchSymmMemCommunicator raised {detail} (its size table has no entry for this GPU's major version)"
            msg = f"A kernel is not supported on this GPU architecture: {detail[:180]}"
            yield self.finding(run, msg, ev, Fix(summary=what, args=args, safety=self.fix_safety))
            return
        # a warning the server survives: torch symmetric memory unavailable
        for e in run.events if run.mentions("TorchSymmMemCommunicator: Device capability") else ():
            if "TorchSymmMemCommunicator: Device capability" in (e.text or "") and "not supported" in (e.text or ""):
                msg = "Torch symmetric memory is not available on this GPU (it supports SM90/SM100 only): --enable-torch-symm-mem has no effect."
                fix = Fix(summary="Drop --enable-torch-symm-mem on this GPU.", args={"--enable-torch-symm-mem": None}, safety="None: the communicator was already disabled.")
                yield self.finding(run, msg, [event_evidence(e)], fix, severity="warning")
                return


_DEPENDENCY_REMEDIES = (
    ("deepep", {"--moe-a2a-backend": None}, "Install DeepEP (github.com/deepseek-ai/deepep) or drop --moe-a2a-backend deepep (the default all-to-all needs no extra package)."),
    ("mooncake", {}, "Install the Mooncake transfer engine (pip install mooncake-transfer-engine) or choose another --disaggregation-transfer-backend."),
    (
        "flashinfer",
        {"--attention-backend": "triton", "--sampling-backend": "pytorch"},
        "Install flashinfer matching the torch/CUDA version, or avoid it: --attention-backend triton --sampling-backend pytorch.",
    ),
    ("sgl_kernel", {}, "Install sgl-kernel matching the SGLang version (pip install sgl-kernel==<version>)."),
    ("vllm", {}, "This quantization or model path imports vLLM: install the vLLM version SGLang pins, or use a format SGLang supports natively."),
)
_MODULE = re.compile(r"No module named '([^']+)'|([A-Za-z][\w.\-]*) is not installed|cannot import name '([^']+)' from '([^']+)'")


class MissingDependency(CrashRule):
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
    precedence = 60

    def claim(self, run, c) -> int | None:
        return SIGNATURE if "missing_module" in (c.event.get("signatures") or ()) else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
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


class NcclTimeout(CrashRule):
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
    precedence = 30
    signature = "collective_failure"

    def claim(self, run, c) -> int | None:
        if self.signature in c.signatures or c.event.get("collective"):
            return SIGNATURE
        rc = c.event
        if any(str(e.get("level") or "") in ("WARN", "ERROR") and e.file == rc.file and e.line < rc.line for e in run.events_of("nccl_log")):
            return CONTEXT  # an unspecific crash after NCCL/NVSHMEM errors
        return None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        warns = [e for e in run.events_of("nccl_log") if (e.file, e.line) <= (rc.file, rc.line) and str(e.get("level") or "") in ("WARN", "ERROR")]
        ev = [event_evidence(e) for e in warns[:2]] + exception_evidence(rc)
        multi = (
            (run.parallelism.get("nnodes") or 1) > 1
            or facts.has_any(c.text, ("network", "socket", "connection", "remote process"))
            or any(facts.has_any((e.text or "").lower(), ("socket", "connection", "network")) for e in warns)
        )
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
        where = f" on {rc.rank.label}" if rc.rank else (f" on rank {rc.get('rank')}" if rc.get("rank") is not None else "")
        timeout = next((x.get("collective") for x in (rc, *c.fanout) if (x.get("collective") or {}).get("timeout_ms") or (x.get("collective") or {}).get("op_type")), None) or rc.get("collective")
        if timeout and timeout.get("timeout"):
            msg, generic = self._timeout(run, rc, timeout, where)
            fix = fix if (multi or run.args) else generic  # (a fragment without the args: the node count is unknown)
        elif self.signature in (rc.get("signatures") or ()) or rc.get("collective") or not warns:
            what = (rc.get("exc_message") or "").split("\n")[0]
            msg = f"A collective failed{where}: {(rc.get('exc_type') or 'NCCL')}: {what[:160]}".rstrip(": ")
        else:
            lib = "NVSHMEM" if any("nvshmem" in (e.text or "").lower() for e in warns) else "NCCL"
            first = warns[0].get("message") or (warns[0].text or "")
            msg = f"{lib} failed before the crash ({len(warns)} error/warning lines, first: {first.strip()[:120]}); the processes then exited ({rc.get('exc_type') or rc.kind})."
        yield self.finding(run, msg, ev, fix)

    def _timeout(self, run, rc, coll: dict, where: str) -> tuple[str, Fix]:
        """A collective that timed out (c10d's watchdog): what it was, how long it ran, after how much serving."""
        rank = where or (f" on rank {coll['rank']}" if coll.get("rank") is not None else "")
        op = str(coll.get("op_type") or "a collective").strip("_")
        seq = f" (SeqNum {coll['seq_num']})" if coll.get("seq_num") is not None else ""
        ran = f" ran {coll['ran_ms'] / 1000:.0f} s" if coll.get("ran_ms") else " did not finish"
        limit = f" against the {coll['timeout_ms'] / 1000:.0f} s timeout" if coll.get("timeout_ms") else ""
        minutes = facts.serving_minutes(run)
        after = f", after {minutes / 60:.1f} h of serving" if minutes and minutes >= 60 else (f", after {minutes:.0f} min of serving" if minutes else "")
        if coll.get("op_type") or coll.get("ran_ms"):
            msg = f"A collective timed out{rank}: {op}{seq}{ran}{limit}{after}; torch's watchdog then takes the process down."
        else:
            msg = f"A collective timed out{rank}{after} (the log shows c10d's watchdog aborting, not which collective); torch's watchdog takes the process down."
        timeout_s = coll.get("timeout_ms", 0) / 1000 if coll.get("timeout_ms") else None
        fix = Fix(
            summary=(
                "One rank did not reach the collective: it was stuck, dead, or behind a slow or broken link. The cause is in another rank's log: "
                "look for the first error or the last progress line of every rank and node at that time, and rerun with NCCL_DEBUG=INFO. "
                + (
                    f"A longer --dist-timeout (now {timeout_s:.0f} s) only helps when a rank is legitimately slow (a long first compile)."
                    if timeout_s
                    else "A longer --dist-timeout only helps when a rank is legitimately slow (a long first compile)."
                )
            ),
            args={},
            safety=self.fix_safety,
        )
        return msg, fix


class IllegalMemoryAccess(CrashRule):
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
    precedence = 40
    signature = "device_fault"

    def claim(self, run, c) -> int | None:
        return SIGNATURE if self.signature in c.signatures else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        ev = exception_evidence(rc)
        hit = nearby_line_evidence(run, rc, PHRASES[self.signature])
        if hit is not None:
            low = (hit.text or "").lower()
            at = min((low.find(p) for p in PHRASES[self.signature] if p in low), default=-1)
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
            at = min((low.find(p) for p in PHRASES[self.signature] if p in low), default=0)
            detail = hit.text[at:].strip()
        detail = detail[:180]
        msg = f"A GPU kernel faulted during {c.phase or 'the run'}: {detail}"
        yield self.finding(run, msg, ev, fix)


# signatures of a failed PD-disaggregation KV transfer in lines the grammar did not type as `kv_transfer_failed`
KV_TRANSFER_PATTERNS = (
    "kvtransfererror",
    "prefill transfer failed",
    "decode transfer failed",
    "failed to get kvcache from prefill instance",
    "failed due to an unknown reason from another rank",
)
_MOONCAKE_SESSION = re.compile(r"mooncake session (\S+?) is not alive")


def _ranges(xs) -> str:
    """1, 2, 3, 5 -> '1-3, 5'."""
    xs = sorted(set(xs))
    out: list[str] = []
    i = 0
    while i < len(xs):
        j = i
        while j + 1 < len(xs) and xs[j + 1] == xs[j] + 1:
            j += 1
        out.append(str(xs[i]) if i == j else f"{xs[i]}-{xs[j]}")
        i = j + 1
    return ", ".join(out)


def _sentence(s: str) -> str:
    return s[:1].upper() + s[1:] + "."


def _kv_failures(run) -> list:
    """kv_transfer_failed events and events of other kinds whose first line names a KV transfer
    failure, in ``events`` order."""
    events = run.events
    hits = list(run.by_kind.get("kv_transfer_failed", ()))
    lowered = run.lowered_texts()
    for kind, positions in run.by_kind.items():
        if kind in ("kv_transfer_failed", "pd_bootstrap_failed", "uvicorn_log", "http_access"):
            continue
        # a kind's texts screened at once (tens of thousands of retraction and GC lines: two
        # scans in C of its lower-cased text; every pattern holds 'transfer' or 'fail'); only a
        # kind where one shows is read event by event
        low = lowered[kind]
        if "transfer" not in low and "fail" not in low:
            continue
        for i in positions:
            text = events[i].text
            if text:
                cut = text.find("\n")
                if facts.has_any((text if cut < 0 else text[:cut]).lower(), KV_TRANSFER_PATTERNS):
                    hits.append(i)
    return [events[i] for i in sorted(hits)]


class KvTransferFailed(Rule):
    """KV-cache transfers between the prefill and decode instances of a PD-disaggregated deployment failed.

    ## What it finds
    PD-disaggregation transfer failures: `Prefill transfer failed for request
    ... KVTransferError(...)` (prefill side, e.g. `Decode instance could be
    dead, remote mooncake session <ip:port> is not alive`), `Decode transfer
    failed ...` (decode side, e.g. `Failed to get kvcache from prefill
    instance, it might be dead` or `Failed due to an unknown reason from
    another rank`).  It is an error when failures hit at least
    `repeat_requests` distinct requests (bootstrap rooms) or when requests got
    HTTP 5xx answers, a warning otherwise.  Without such lines, the transfer
    engine's own errors: mooncake / NIXL glog lines at ERROR and UCX `ERROR`
    lines while connecting, a peer segment missing from mooncake's metadata
    service, a native crash inside UCX / NIXL / mooncake (the set-up and
    handshakes SGLang does itself are `pd-bootstrap-failed`'s).

    ## Why it matters
    The server keeps running and `/health` keeps answering 200, so nothing
    restarts it, but the affected requests fail (HTTP 500) or hang on the
    decode side.  With Mooncake over RDMA the common cause is the network, not
    SGLang: each node registers its transfer sessions under an address; when
    that is a bond, management or IPv6 address instead of the RDMA/RoCE one
    the peer cannot reach it and every transfer fails on every rank.  The
    other causes are a peer instance that really died, or one rank of an
    instance whose transfer failed (the others then report "an unknown reason
    from another rank").

    ## Evidence
    The first failure lines, a summary (number of lines, affected requests,
    prefill and decode ranks, unreachable Mooncake session addresses) and the
    HTTP 5xx access lines, if any.

    ## Suggested fix
    On every node set `MC_TCP_BIND_ADDRESS` and `SGLANG_HOST_IP` to the node's
    RDMA/RoCE-reachable IPv4 address and pass `--disaggregation-ib-device`
    with the RDMA device(s) (e.g. `mlx5_0`); check that the addresses in
    `mooncake session ... is not alive` are the peers' RDMA addresses; check
    that the peer instance is alive (its own log, `/health`).  For "unknown
    reason from another rank", read the other ranks' logs and the Mooncake
    transfer-engine lines for the first error (e.g. an RDMA `local protection
    error`).  The args patch is empty: the fix is environment variables and a
    device name only the operator knows.

    ## Fix safety
    These settings only choose the network the KV cache travels on; the model
    and scheduling do not change.  Environment variables are not flags: set
    them in each node's launch environment and restart every instance.  An
    address or device the node does not have fails startup instead (e.g.
    `open: Address family not supported by protocol` in
    `init_disaggregation`); send one request through the router afterwards.

    ## Example
    Four nodes (2 prefill + 2 decode, TP16 each), Mooncake over RDMA: every
    prefill rank logs `KVTransferError ... remote mooncake session
    10.99.91.49:15366 is not alive`, every decode rank `Failed to get kvcache
    from prefill instance`, the request gets HTTP 500; the sessions were
    registered with bond IPs instead of the RoCE IPs -> set
    `MC_TCP_BIND_ADDRESS` / `SGLANG_HOST_IP` per node.
    """

    code = "SGL405"
    name = "kv-transfer-failed"
    severity = "error"
    options = {"repeat_requests": Option(3, "distinct failed requests (bootstrap rooms) from which the failures are an error without HTTP 5xx")}

    def _check(self, run, o) -> Iterator:
        fails = _kv_failures(run)
        if not fails:
            # no request's transfer failed, but the transfer engine itself reported errors (its
            # transport, its metadata service, a crash in its library): the KV transfer layer failed
            from sglog.rules.disaggregation.pd_bootstrap_failed import engine_failures, report

            yield from report(self, run, engine_failures(run), "The PD KV-transfer engine failed")
            return
        rooms = sorted({e.get("bootstrap_room") for e in fails if e.get("bootstrap_room") is not None})
        sides: dict[str, set[int]] = {}
        for e in fails:
            side = e.get("side") or ("prefill" if "prefill transfer failed" in (e.text or "").lower() else "decode" if "decode transfer failed" in (e.text or "").lower() else None)
            r = e.get("transfer_rank")
            if r is None and e.rank is not None and e.rank.tp is not None:
                r = e.rank.tp
            if side and r is not None:
                sides.setdefault(side, set()).add(int(r))
        sessions = sorted({m.group(1) for e in fails for m in _MOONCAKE_SESSION.finditer(e.text or "")})
        hosts = sorted({x.rsplit(":", 1)[0] for x in sessions})
        errors = [m for m in ((e.get("exc_message") or "").strip() for e in fails) if m]
        first_err = errors[0] if errors else first_line(fails[0].text).strip()

        t0 = next((e.ts for e in fails if e.ts is not None), None)
        acc = run.access
        bad = acc.filter(pl.col("status") >= 500) if acc.height and "status" in acc.columns else acc.head(0)
        if bad.height and t0 is not None and "ts" in bad.columns:
            bad = bad.filter(pl.col("ts").is_null() | (pl.col("ts") >= t0))
        bad_rows = bad.to_dicts() if bad.height else []

        repeated = len(rooms) >= o["repeat_requests"]
        severity = None if (bad_rows or repeated) else "warning"

        req = f"{len(rooms)} request{'s' if len(rooms) != 1 else ''}" if rooms else "requests"
        where = " and ".join(f"{side} ranks {_ranges(rs)}" for side, rs in sorted(sides.items(), key=lambda kv: kv[0] != "prefill"))
        http = ""
        if bad_rows:
            codes = sorted({int(r["status"]) for r in bad_rows})
            http = f"; {len(bad_rows)} HTTP {'/'.join(map(str, codes))} answer{'s' if len(bad_rows) != 1 else ''}"
        msg = f"PD-disaggregation KV transfers failed: {len(fails)} failure line{'s' if len(fails) != 1 else ''} for {req}{f' on {where}' if where else ''}{http}; first: {first_err[:150]}"

        ev = [event_evidence(e) for e in fails[:3]]
        note = [f"{len(fails)} transfer-failure lines"]
        if rooms:
            shown = ", ".join(str(x) for x in rooms[:3]) + (f" and {len(rooms) - 3} more" if len(rooms) > 3 else "")
            note.append(f"bootstrap room{'s' if len(rooms) != 1 else ''} {shown}")
        if where:
            note.append(where)
        if sessions:
            note.append(f"unreachable Mooncake sessions on {', '.join(hosts)}")
        ev.append(window_evidence(run, "; ".join(note)))
        ev.extend(row_evidence(r, note=f"HTTP {r['status']}") for r in bad_rows[:2])

        low = " ".join(errors).lower() or first_err.lower()
        lead = []
        if "unknown reason from another rank" in low:
            lead.append(
                "another rank of this instance failed its part of the transfer: find its first error in the other ranks' logs and the Mooncake transfer-engine lines (e.g. an RDMA `local protection error`)"
            )
        if sessions:
            lead.append(
                f"the prefill side cannot reach the decode instance's Mooncake sessions on {', '.join(hosts)}: check that these are the decode nodes' RDMA/RoCE addresses and that the decode instance is alive"
            )
        if "prefill instance" in low:
            lead.append("the decode side could not fetch the KV cache from the prefill instance: check that it is alive and reachable on its RDMA network")
        ib = run.args.get("disaggregation_ib_device") if run.args else None
        ib_txt = f"check that --disaggregation-ib-device ({ib}) names the RDMA device(s)" if ib else "pass --disaggregation-ib-device with the RDMA device(s) (e.g. mlx5_0)"
        summary = (
            (_sentence("; ".join(lead)) + " " if lead else "")
            + "The common cause is Mooncake sessions registered on the wrong NIC/IP (a bond, management or IPv6 address): on every node set "
            + f"MC_TCP_BIND_ADDRESS and SGLANG_HOST_IP to that node's RDMA/RoCE-reachable IPv4 and {ib_txt}."
        )
        yield self.finding(
            run,
            msg,
            ev,
            Fix(summary=summary, args={}, safety=self.fix_safety),
            severity=severity,
            failures=len(fails),
            requests=len(rooms),
            http_5xx=len(bad_rows),
            ranks={k: sorted(v) for k, v in sides.items()},
            sessions=hosts,
        )
