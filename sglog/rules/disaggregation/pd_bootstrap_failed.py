"""SGL407 pd-bootstrap-failed: PD disaggregation could not set up its KV transfer or hand a request over."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from sglog.events import BLOCK_KINDS
from sglog.findings import Fix
from sglog.rules.base import event_evidence, exception_evidence, exception_line, window_evidence
from sglog.rules.ownership import SIGNATURE, CrashRule
from sglog.rules.said import said

# SGLang functions that set up PD disaggregation (a traceback through one failed the set-up)
SETUP_FUNCTIONS = frozenset({"init_disaggregation", "_init_kv_manager", "init_engine", "register_buffer_to_engine", "_register_to_bootstrap", "register_to_bootstrap", "_connect_to_bootstrap_server"})
# ... and, inside SGLang's disaggregation package, the constructors and initialisers
SETUP_IN_PACKAGE = frozenset({"__init__", "initialize", "init_engine"})
DISAGG_PACKAGE = "/sglang/srt/disaggregation/"
BOOTSTRAP_ROUTE = "/route"  # the path of SGLang's PD bootstrap server (`GET /route?engine_rank=0`)
# transfer backends by a word of their package path / library name
BACKENDS = (("mooncake", "mooncake"), ("nixl", "nixl"), ("mori", "mori"), ("ascend", "ascend"), ("libuc", "nixl"), ("ucx", "nixl"))
# glog sources (file name prefixes) of the transfer engines, and the part of the set-up each does
GLOG_SOURCES = (
    ("transfer_metadata", "metadata"),
    ("transfer_engine", "engine"),
    ("multi_transport", "engine"),
    ("topology", "engine"),
    ("rdma_", "rdma"),
    ("worker_pool", "rdma"),
    ("tcp_transport", "tcp"),
    ("nvlink_transport", "nvlink"),
    ("nixl_", "nixl"),
    ("ucx_backend", "nixl"),
    ("ucx_utils", "nixl"),
)
# native libraries of the transfer engines (a crash in one of them)
LIBRARIES = ("libucs", "libucp", "libuct", "libucm", "nixl", "mooncake", "libtransfer_engine")
ERROR_LEVELS = ("ERROR", "FATAL")
HANDLERS = ("ucs_handle_error", "ucs_error_", "ucs_debug_", "ucs_log_")  # UCX's signal handler frames

STAGE_ORDER = ("engine_init", "config", "memory_registration", "connect", "register", "fetch_info", "metadata", "handshake", "timeout", "transport", "native")


@dataclass(frozen=True)
class Failure:
    """One piece of evidence of a failed set-up: the event, the stage, the backend it names."""

    event: Any
    stage: str
    backend: str | None
    detail: str  # what failed, for the message
    raised: bool = False


def clip(text: str, n: int) -> str:
    """`text` cut to about `n` characters at a space (never inside a word), with an ellipsis."""
    if len(text) <= n:
        return text
    cut = text.rfind(" ", 0, n)
    return (text[:cut] if cut > n // 2 else text[:n]).rstrip(" ,;:") + " ..."


def _backend_of_path(path: str) -> str | None:
    low = path.lower()
    return next((b for word, b in BACKENDS if word in low), None)


def _setup_frames(e) -> list[dict]:
    return [
        f for f in e.get("frames") or [] if isinstance(f, dict) and (f.get("function") in SETUP_FUNCTIONS or (DISAGG_PACKAGE in str(f.get("file") or "") and f.get("function") in SETUP_IN_PACKAGE))
    ]


def in_setup(e) -> bool:
    """A traceback through SGLang's PD set-up (the scheduler's init_disaggregation, a KV manager, a transfer engine)."""
    return bool(_setup_frames(e))


def _glog_part(e) -> str | None:
    name = str(e.get("source") or "").rsplit("/", 1)[-1]
    return next((part for prefix, part in GLOG_SOURCES if name.startswith(prefix)), None)


def _serving_since(run):
    """(file, line) of the first sign the server was serving (ready, a batch), or None."""
    ready = run.first("server_ready")
    marks = [(ready.file, ready.line)] if ready is not None else []
    b = run.batches
    if b.height and "line" in b.columns and "file" in b.columns:
        at = b.get_column("line").arg_min()  # (the earliest batch line; not a sort of the frame)
        if at is not None:
            marks.append((b.get_column("file")[at], b.get_column("line")[at]))
    return min(marks) if marks else None


def failures(run) -> list[Failure]:
    """The run's evidence of a failed PD set-up, in log order (once per run)."""
    return run.memo("pd_bootstrap_failures", _failures)


def _failures(run) -> list[Failure]:
    out: list[Failure] = []
    arg_backend = (run.args or {}).get("disaggregation_transfer_backend")
    for s in said(run, "pd_bootstrap_failed"):
        backend = s.get("backend") or arg_backend
        detail = exception_line(s.event) if s.raised else (s.event.text or "").split("\n", 1)[0]
        out.append(Failure(s.event, str(s.get("stage") or "handshake"), backend, detail, s.raised))
    named = {id(f.event) for f in out}
    for e in run.events_of(*BLOCK_KINDS):
        if id(e) in named or not in_setup(e):
            continue
        frames = _setup_frames(e)
        backend = next((b for f in e.get("frames") or [] if (b := _backend_of_path(str(f.get("file") or ""))) is not None), None) or arg_backend
        inner = frames[-1].get("function") if frames else None
        stage = "memory_registration" if inner == "register_buffer_to_engine" else "engine_init"
        out.append(Failure(e, stage, backend, exception_line(e), True))
    engine = run.events_of("glog", "ucx_log", "native_backtrace")
    since = _serving_since(run) if engine else None
    for e in engine:
        serving = since is not None and (e.file, e.line) > since
        if e.kind == "glog":
            part = _glog_part(e)
            if part is None or str(e.get("level") or "") not in ERROR_LEVELS:
                continue
            if part == "metadata":
                out.append(Failure(e, "metadata", "mooncake", str(e.get("message") or "")))
            elif not serving:
                out.append(Failure(e, "transport", "nixl" if part == "nixl" else "mooncake", str(e.get("message") or "")))
        elif e.kind == "ucx_log":
            if str(e.get("level") or "") in ERROR_LEVELS and not serving:
                out.append(Failure(e, "transport", "nixl", str(e.get("message") or "")))
        else:
            libs = [str(f.get("library") or "") for f in e.get("frames") or [] if isinstance(f, dict)]
            hit = next((lib for lib in libs if any(w in lib.lower() for w in LIBRARIES)), None)
            if hit is not None and not serving:
                # the innermost named frame that is not the library's own signal handler
                named_frames = [f for f in e.get("frames") or [] if isinstance(f, dict) and str(f.get("symbol") or "")[:1].isalpha() and not str(f.get("symbol")).startswith(HANDLERS)]
                top = named_frames[0] if named_frames else None
                lib = str(top.get("library") or hit) if top else hit
                name = lib.rsplit("/", 1)[-1].split("-")[0].split(".so")[0]
                detail = f"{e.get('reason') or 'a signal'} in {name}" + (f" ({str(top.get('symbol')).split('+')[0]})" if top else "")
                out.append(Failure(e, "native", _backend_of_path(hit), detail))
    out.sort(key=lambda f: (f.event.file, f.event.line))
    return out


def _pd_run(run) -> bool | None:
    """Is this a PD-disaggregated run?  None when the log has no server args to tell."""
    if not run.args:
        return None
    mode = run.args.get("disaggregation_mode")
    return mode not in (None, "null", "None", False)


_STAGE_WORDS = {
    "engine_init": "the {backend}transfer engine failed to initialise",
    "config": "the {backend}transfer settings were refused",
    "memory_registration": "registering the KV cache with the {backend}transfer engine failed",
    "connect": "the prefill instance could not connect to its bootstrap server",
    "register": "the prefill instance could not register with its bootstrap server",
    "fetch_info": "the decode instance could not fetch the prefill instance's bootstrap info",
    "metadata": "the {backend}transfer engine could not find the peer's segment in the metadata service",
    "handshake": "request handshakes between prefill and decode failed",
    "timeout": "requests timed out while bootstrapping (the prefill never got their KV indices)",
    "transport": "the {backend}transport reported errors while connecting",
    "native": "the {backend}transfer library crashed",
}

_ADVICE = {
    "engine_init": "The transfer engine could not open its transport on this node: on every node set MC_TCP_BIND_ADDRESS (mooncake) and SGLANG_HOST_IP to the node's IPv4 address that the peers reach (an IPv6 or wrong-NIC address fails with 'Address family not supported' or 'Cannot assign requested address'); with RDMA pass --disaggregation-ib-device (e.g. mlx5_0); do not force TCP (MC_FORCE_TCP) on a host without that address family.",
    "config": "Fix the transfer backend's settings as the message says (one device selection, HCA names without port suffixes), then restart.",
    "memory_registration": "Registering GPU memory for RDMA failed: check that the RDMA device exists (--disaggregation-ib-device), that GPUDirect RDMA is loaded (nvidia-peermem) and that the memlock limit is unlimited (ulimit -l, docker --ulimit memlock=-1).",
    "connect": "Start the prefill instance first and check that its bootstrap port (--disaggregation-bootstrap-port, default 8998) is reachable from the decode nodes and the router at the address they use.",
    "register": "Check the prefill instance's bootstrap server (--disaggregation-bootstrap-port, default 8998) is up and reachable from every prefill rank; multi-node prefill needs torch.distributed initialised first (same --dist-init-addr on every node).",
    "fetch_info": "The decode instance cannot reach the prefill's bootstrap server: check the bootstrap address the router passes{addr}, that the port (default 8998) is open between the nodes, and that the prefill instance is up.",
    "metadata": "The peer's transfer segment is not registered where this instance looks it up: both instances must use the same metadata service or handshake mode (MC_METADATA_SERVER / P2P handshake) and the same mooncake version, and register under reachable addresses (MC_TCP_BIND_ADDRESS / SGLANG_HOST_IP per node).",
    "handshake": "The two instances could not exchange a request's KV indices: check that both run the same SGLang version, --disaggregation-transfer-backend and page size, and that the decode side reaches the prefill's bootstrap server; the error of the first failed handshake names the cause.",
    "timeout": "The decode side never sent the KV indices in time: check that the decode instance is alive and reachable; if it is only slow to admit requests, raise SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT (e.g. 600 s).",
    "transport": "The transfer engine's transport could not connect: check the RDMA device (--disaggregation-ib-device, UCX_NET_DEVICES), UCX_TLS for NIXL, and that the peers' addresses are reachable on that network.",
    "native": "The transfer library crashed in its own code: select the transport explicitly (UCX_TLS=rc,cuda_copy for RDMA instead of the TCP path), update NIXL/UCX (or mooncake), or try the other --disaggregation-transfer-backend.",
}


class PdBootstrapFailed(CrashRule):
    """PD disaggregation could not set up its KV transfer, or could not hand a request over (bootstrap).

    ## What it finds
    The set-up of prefill-decode disaggregation failing, before any KV cache
    moves: a crash in `init_disaggregation` / a KV manager / the transfer
    engine's initialisation (`RuntimeError: open: Address family not
    supported by protocol` from mooncake); SGLang's bootstrap messages (the
    prefill `failed to connect/register to bootstrap server`, the decode
    `Could not fetch bootstrap info` / `Error fetching prefill info from
    bootstrap`, `Decode handshake failed` / `Prefill bootstrap failed` for a
    request, `Some requests timed out when bootstrapping`, transfer-engine
    initialisation and memory-registration failures).  The transfer engines'
    own errors (mooncake / NIXL glog lines at ERROR and UCX `ERROR` lines
    while connecting, a segment missing from mooncake's metadata service, a
    native crash inside UCX, NIXL or mooncake) and a request's KV transfer
    that fails after the set-up (`KVTransferError`, "Prefill/Decode transfer
    failed") are kv-transfer-failed's: the KV transfer layer failed, not
    SGLang's set-up.

    ## Why it matters
    Without a working bootstrap no request crosses from prefill to decode:
    startup dies on every rank, or the server looks healthy and every request
    hangs or fails.  The cause is nearly always the network set-up (which
    address or NIC the transfer engine binds, an unreachable bootstrap port,
    a metadata service the peers do not share), not the model.

    ## Evidence
    The first failure (the exception, or the error line), and a summary: the
    stages that failed, the backend, the ranks, how many lines.

    ## Suggested fix
    By the earliest stage that failed: engine initialisation -> bind the
    engine to the node's reachable IPv4 (`MC_TCP_BIND_ADDRESS`,
    `SGLANG_HOST_IP`), `--disaggregation-ib-device` for RDMA; bootstrap
    connect / register / fetch -> the prefill's bootstrap port (default 8998)
    reachable at the address the router passes; metadata -> one metadata
    service (or P2P handshake) for both instances; handshakes -> same SGLang
    version, backend and page size on both sides; a native crash -> another
    UCX transport (its UCX_TLS setting) or backend.  No args patch: the fix is the
    environment and the network.

    ## Fix safety
    These settings choose the network the KV cache travels on; the model and
    the scheduling do not change.  Environment variables are not flags: set
    them in every node's launch environment and restart both instances.

    ## Example
    Case: corpus 012 (devopsrustem/slurmv4): every decode rank crashes in init_disaggregation, mooncake address family

    A PD decode instance on Mooncake: TP13 crashes in `self.init_disaggregation()`
    -> `MooncakeTransferEngine(` -> `self.engine.initialize(` with `RuntimeError:
    open: Address family not supported by protocol`.  sglog: `the mooncake
    transfer engine failed to initialise on TP13`; set `MC_TCP_BIND_ADDRESS` and
    `SGLANG_HOST_IP` to the node's IPv4 address that the peers reach, and do not
    force TCP (`MC_FORCE_TCP`) on a host without that address family.
    """

    code = "SGL407"
    name = "pd-bootstrap-failed"
    triggers = (
        "aiohttp_access",
        "cpp_exception",
        "fatal_error",
        "glog",
        "http_access",
        "logging_error",
        "native_backtrace",
        "oom",
        "pd_bootstrap_failed",
        "scheduler_exception",
        "server_ready",
        "traceback",
        "ucx_log",
        "args",
        "batches",
        "crash",
    )
    severity = "error"
    precedence = 40

    def claim(self, run, c) -> int | None:
        e = c.event
        return SIGNATURE if e.get("named_kind") == "pd_bootstrap_failed" or in_setup(e) else None

    def _check(self, run, o) -> Iterator:
        found = [f for f in failures(run) if f.stage not in ENGINE_STAGES]
        yield from report(self, run, found, "PD disaggregation could not set up the KV transfer")


# the transfer engine's own errors (its transport, its metadata service, a crash in its library): the
# KV transfer layer failed, which is kv-transfer-failed's (sglog/rules/disaggregation/kv_transfer_failed.py); SGLang's set-up
# and handshakes are this rule's
ENGINE_STAGES = ("transport", "native", "metadata")


def engine_failures(run) -> list[Failure]:
    """The transfer engine's own failures (ENGINE_STAGES), for kv-transfer-failed."""
    return [f for f in failures(run) if f.stage in ENGINE_STAGES]


def report(rule, run, found: list[Failure], headline: str) -> Iterator:
    """The finding of `rule` for these failures: the earliest stage leads, its advice is the fix."""
    if not found:
        return
    pd = _pd_run(run)
    if pd is False and not any(f.stage not in ENGINE_STAGES for f in found):
        return  # a transfer engine's errors in a run that is not PD (e.g. a HiCache store): not a bootstrap
    stages = sorted({f.stage for f in found}, key=STAGE_ORDER.index)
    lead = next(f for f in found if f.stage == stages[0])
    backend = lead.backend or (run.args or {}).get("disaggregation_transfer_backend")
    ranks = sorted({f.event.rank.label for f in found if f.event.rank is not None}, key=lambda r: (len(r), r))
    words = _STAGE_WORDS[lead.stage].format(backend=f"{backend} " if backend else "")
    where = f" on {len(ranks)} ranks ({', '.join(ranks[:4])}{' ...' if len(ranks) > 4 else ''})" if len(ranks) > 1 else (f" on {ranks[0]}" if ranks else "")
    n = len(found)
    more = f"; {n} failure lines" + (f" ({', '.join(stages)})" if len(stages) > 1 else "") if n > 1 else ""
    msg = f"{headline}: {words}{where}: {clip(lead.detail.strip(), 200)}{more}."
    if pd is None:
        msg = msg[:-1] + " (assumed PD disaggregation: the log has no server args)."
    ev = exception_evidence(lead.event) if lead.raised else [event_evidence(lead.event)]
    ev += [event_evidence(f.event) for f in found if f.event is not lead.event][:2]
    # the bootstrap server's route request just before a transport failure: the handshake was under way
    route = [e for e in run.events_of("http_access", "aiohttp_access") if str(e.get("path") or "").startswith(BOOTSTRAP_ROUTE) and (e.file, e.line) < (lead.event.file, lead.event.line)]
    if route and lead.stage in ("native", "transport", "metadata"):
        ev.insert(0, event_evidence(route[-1], note="the bootstrap route request just before it"))
    note = [f"{n} failure line{'s' if n != 1 else ''}", f"stages {', '.join(stages)}"]
    if backend:
        note.append(f"backend {backend}")
    if ranks:
        note.append(f"ranks {', '.join(ranks)}")
    ev.append(window_evidence(run, "; ".join(note)))
    addr = next((str(f.event.get("bootstrap_addr")) for f in found if f.event.get("bootstrap_addr")), None)
    advice = _ADVICE[lead.stage].format(addr=f" ({addr})" if addr else "")
    ib = (run.args or {}).get("disaggregation_ib_device")
    if ib and lead.stage in ("engine_init", "memory_registration", "transport"):
        advice += f" This run passed --disaggregation-ib-device {ib}: check that it is this node's RDMA device."
    yield rule.finding(run, msg, ev, Fix(summary=advice, args={}, safety=rule.fix_safety), stages=stages, backend=backend, ranks=ranks, failures=n)
