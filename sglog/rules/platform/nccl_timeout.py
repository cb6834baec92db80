"""SGL403 nccl-timeout: a collective (NCCL) timed out or the communicator failed."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import event_evidence, exception_evidence
from sglog.rules.ownership import CONTEXT, SIGNATURE, CrashRule


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
    Case: two nodes cannot reach each other

    A TP16 launch over two nodes: `NCCL WARN socketPollConnect: connect to
    10.99.91.49<41345> returned Connection refused`, then `RuntimeError: NCCL
    error: remote process exited or there was a network error` on TP10 in
    `init_distributed_environment`: a network or rendezvous failure, so sglog
    says to rerun with `NCCL_DEBUG=INFO`, pin the interface with
    `NCCL_SOCKET_IFNAME/GLOO_SOCKET_IFNAME` and check that `--dist-init-addr` is
    reachable from every node.
    """

    code = "SGL403"
    name = "nccl-timeout"
    triggers = ("nccl_log", "args", "batches", "crash")
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
            or "network" in c.causes  # (the reader's causes: sglog/read/signatures.py)
            or any("network" in facts.event_causes(e) for e in warns)
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
            lib = "NVSHMEM" if any("nvshmem" in facts.event_causes(e) for e in warns) else "NCCL"
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
