"""SGL405 kv-transfer-failed: KV-cache transfers between the prefill and decode instances of a PD-disaggregated deployment failed."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import ClassVar

import polars as pl

from sglog.events import BLOCK_KINDS
from sglog.findings import Fix
from sglog.rules.base import Option, Rule, event_evidence, first_line, row_evidence, window_evidence
from sglog.schema import DESCRIBED_KINDS


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
    """The failed KV transfers, in ``events`` order: kv_transfer_failed events (every release's
    wording), and the errors and lines the reader signed ``kv_transfer`` (a KVTransferError raised,
    a third-party or unparsed line naming one: sglog/read/signatures.py)."""
    hits = list(run.by_kind.get("kv_transfer_failed", ()))
    for kind in (*BLOCK_KINDS, *DESCRIBED_KINDS):
        hits += [i for i in run.by_kind.get(kind, ()) if "kv_transfer" in (run.events[i].get("signatures") or ())]
    return [run.events[i] for i in sorted(set(hits))]


@dataclass(frozen=True)
class _Failures:
    """What the failed transfers say: which requests, which ranks, which peers, which errors."""

    lines: list  # the failure events, in ``events`` order
    rooms: list  # the distinct bootstrap rooms (one per request), sorted
    sides: dict[str, set[int]]  # "prefill" / "decode" -> the ranks whose transfers failed
    hosts: list[str]  # the hosts of the unreachable Mooncake sessions, sorted
    errors: list[str]  # the exception messages, in order
    first_err: str  # the first exception message (else the first line's message)

    @property
    def where(self) -> str:
        """'prefill ranks 0-1 and decode ranks 3' (prefill first)."""
        return " and ".join(f"{side} ranks {_ranges(rs)}" for side, rs in sorted(self.sides.items(), key=lambda kv: kv[0] != "prefill"))


def _sides(fails) -> dict[str, set[int]]:
    """The ranks whose transfers failed, by side: the line's transfer rank, else its TP rank."""
    sides: dict[str, set[int]] = {}
    for e in fails:
        side = e.get("side")
        r = e.get("transfer_rank")
        if r is None and e.rank is not None and e.rank.tp is not None:
            r = e.rank.tp
        if side and r is not None:
            sides.setdefault(side, set()).add(int(r))
    return sides


def _failures(fails) -> _Failures:
    sessions = sorted({str(e.get("peer_session")) for e in fails if e.get("peer_session")})  # (the reader's: sglog/read/signatures.py)
    errors = [m for m in ((e.get("exc_message") or "").strip() for e in fails) if m]
    return _Failures(
        lines=fails,
        rooms=sorted({e.get("bootstrap_room") for e in fails if e.get("bootstrap_room") is not None}),
        sides=_sides(fails),
        hosts=sorted({x.rsplit(":", 1)[0] for x in sessions}),
        errors=errors,
        first_err=errors[0] if errors else str(fails[0].get("message") or first_line(fails[0].text)).strip(),
    )


def _http_5xx(run, fails) -> list[dict]:
    """The access lines answered with HTTP 5xx from the first failure on (all of them when no failure has a time)."""
    t0 = next((e.ts for e in fails if e.ts is not None), None)
    acc = run.access
    bad = acc.filter(pl.col("status") >= 500) if acc.height and "status" in acc.columns else acc.head(0)
    if bad.height and t0 is not None and "ts" in bad.columns:
        bad = bad.filter(pl.col("ts").is_null() | (pl.col("ts") >= t0))
    return bad.to_dicts() if bad.height else []


def _message(f: _Failures, bad_rows: list[dict]) -> str:
    fails, rooms, where = f.lines, f.rooms, f.where
    req = f"{len(rooms)} request{'s' if len(rooms) != 1 else ''}" if rooms else "requests"
    http = ""
    if bad_rows:
        codes = sorted({int(r["status"]) for r in bad_rows})
        http = f"; {len(bad_rows)} HTTP {'/'.join(map(str, codes))} answer{'s' if len(bad_rows) != 1 else ''}"
    return f"PD-disaggregation KV transfers failed: {len(fails)} failure line{'s' if len(fails) != 1 else ''} for {req}{f' on {where}' if where else ''}{http}; first: {f.first_err[:150]}"


def _summary_note(f: _Failures) -> str:
    """The evidence's summary: lines, bootstrap rooms, ranks, unreachable sessions."""
    rooms, where = f.rooms, f.where
    note = [f"{len(f.lines)} transfer-failure lines"]
    if rooms:
        shown = ", ".join(str(x) for x in rooms[:3]) + (f" and {len(rooms) - 3} more" if len(rooms) > 3 else "")
        note.append(f"bootstrap room{'s' if len(rooms) != 1 else ''} {shown}")
    if where:
        note.append(where)
    if f.hosts:
        note.append(f"unreachable Mooncake sessions on {', '.join(f.hosts)}")
    return "; ".join(note)


def _evidence(run, f: _Failures, bad_rows: list[dict]) -> list:
    """The first failure lines, the summary, the first HTTP 5xx answers."""
    ev = [event_evidence(e) for e in f.lines[:3]]
    ev.append(window_evidence(run, _summary_note(f)))
    ev.extend(row_evidence(r, note=f"HTTP {r['status']}") for r in bad_rows[:2])
    return ev


def _leads(f: _Failures) -> list[str]:
    """What the errors point at: another rank, the unreachable decode sessions, the prefill instance."""
    low = " ".join(f.errors).lower() or f.first_err.lower()
    lead = []
    if "unknown reason from another rank" in low:
        lead.append(
            "another rank of this instance failed its part of the transfer: find its first error in the other ranks' logs and the Mooncake transfer-engine lines (e.g. an RDMA `local protection error`)"
        )
    if f.hosts:
        lead.append(
            f"the prefill side cannot reach the decode instance's Mooncake sessions on {', '.join(f.hosts)}: check that these are the decode nodes' RDMA/RoCE addresses and that the decode instance is alive"
        )
    if "prefill instance" in low:
        lead.append("the decode side could not fetch the KV cache from the prefill instance: check that it is alive and reachable on its RDMA network")
    return lead


def _fix_summary(run, f: _Failures) -> str:
    """The leads, then the common cause's fix (the addresses and the RDMA device)."""
    lead = _leads(f)
    ib = run.args.get("disaggregation_ib_device") if run.args else None
    ib_txt = f"check that --disaggregation-ib-device ({ib}) names the RDMA device(s)" if ib else "pass --disaggregation-ib-device with the RDMA device(s) (e.g. mlx5_0)"
    return (
        (_sentence("; ".join(lead)) + " " if lead else "")
        + "The common cause is Mooncake sessions registered on the wrong NIC/IP (a bond, management or IPv6 address): on every node set "
        + f"MC_TCP_BIND_ADDRESS and SGLANG_HOST_IP to that node's RDMA/RoCE-reachable IPv4 and {ib_txt}."
    )


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
    Case: prefill cannot reach the decode instance's mooncake sessions and the request gets HTTP 500

    Mooncake PD disaggregation: TP0 and TP1 of the prefill instance log
    `KVTransferError(bootstrap_room=804716023469713517): Decode instance could be
    dead, remote mooncake session 10.99.91.49:15366 is not alive` and the request
    gets `"POST /v1/chat/completions HTTP/1.1" 500`: `2 failure lines for 1
    request on prefill ranks 0-1; 1 HTTP 500 answer`.  The common cause is
    sessions registered on the wrong NIC or IP (a bond instead of the RoCE
    address): sglog says to set `MC_TCP_BIND_ADDRESS` and `SGLANG_HOST_IP` to
    each node's RDMA-reachable IPv4 and pass `--disaggregation-ib-device`.
    """

    code = "SGL405"
    name = "kv-transfer-failed"
    triggers: ClassVar[tuple[str, ...]] = (
        "aiohttp_access",
        "cpp_exception",
        "fatal_error",
        "glog",
        "http_access",
        "kv_transfer_failed",
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
        "access",
        # (and every kind the reader signs kv_transfer: BLOCK_KINDS and DESCRIBED_KINDS, below)
    )
    triggers = tuple(dict.fromkeys(triggers + BLOCK_KINDS + tuple(sorted(DESCRIBED_KINDS))))
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
        f = _failures(fails)
        bad_rows = _http_5xx(run, fails)
        repeated = len(f.rooms) >= o["repeat_requests"]
        yield self.finding(
            run,
            _message(f, bad_rows),
            _evidence(run, f, bad_rows),
            Fix(summary=_fix_summary(run, f), args={}, safety=self.fix_safety),
            severity=None if (bad_rows or repeated) else "warning",
            failures=len(fails),
            requests=len(f.rooms),
            http_5xx=len(bad_rows),
            ranks={k: sorted(v) for k, v in f.sides.items()},
            sessions=f.hosts,
        )
