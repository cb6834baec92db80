"""SGL103 cuda-graph-capture-oom: startup ran out of GPU memory while capturing CUDA graphs."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, event_evidence, exception_evidence, floor_to
from sglog.rules.ownership import SIGNATURE, CrashRule


class CudaGraphCaptureOom(CrashRule):
    """Startup ran out of GPU memory while capturing CUDA graphs.

    ## What it finds
    A crash whose root cause is a CUDA out-of-memory error during CUDA-graph
    capture (`Capture cuda graph failed: ... out of memory`, an OOM raised
    from the graph runner, or an OOM in the capture phase).

    ## Why it matters
    Graph buffers grow with the number of captured batch sizes and with the
    largest one; SGLang captures the largest first.  Large `--cuda-graph-max-bs`
    (auto: up to 512 on big cards) and speculative decoding (target verify +
    draft + draft-extend graphs) make capture the first thing to run out.

    ## Evidence
    The `Capture ... begin` line (free memory before capture), the last
    `Capturing batches (bs=N avail_mem=X GB)` progress line and the exception.

    ## Suggested fix
    `--cuda-graph-max-bs N`: with the free memory at capture start `A_c` and
    the last progress line (`bs_reached`, `avail`), graph memory per batch
    size is `(A_c - avail) / bs_reached`; `N` is the largest captured size
    whose projected cost stays `reserve_gb` below `A_c`.  Without progress
    lines `N` is a quarter of the current maximum.  If `A_c` itself is below
    `reserve_gb`, the fraction is lowered too: `mfs - (reserve_gb - A_c) / T`.

    ## Fix safety
    Decode batches larger than `N` run without CUDA graphs (slower per step);
    pair with `--max-running-requests N` if the workload can exceed it.  A
    lower fraction shrinks the KV pool.

    ## Example
    Case: OOM at the largest batch size: project the graph cost and cap the sizes

    `Capture cuda graph begin ... avail mem=6.10 GB`, then `Capturing batches
    (bs=512 avail_mem=0.13 GB)` and `CUDA out of memory`: the graphs took
    `5.97 GB used by bs 512 (11.9 MB per size)`, so sglog suggests
    `--cuda-graph-max-bs 336`, which fits in the `6.10 GB free at capture start,
    keeping 2 GB`.
    """

    code = "SGL103"
    name = "cuda-graph-capture-oom"
    triggers = ("batch_oom", "cuda_graph_bs", "cuda_graph_capture_begin", "cuda_graph_capture_end", "oom", "progress", "args", "memory", "startup", "crash")
    severity = "error"
    precedence = 80
    options = {"reserve_gb": Option(2.0, "free memory to keep after the graphs are captured")}

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.oom_crash(c) and facts.in_capture(run, c) else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        begin = facts.last_before(run, "cuda_graph_capture_begin", rc)
        progress = None
        for e in run.events_of("progress"):
            if (e.file, e.line) < (rc.file, rc.line) and e.get("bs") is not None and e.get("avail_mem") is not None:
                progress = e  # (the capture bar's latest update: `Capturing batches (bs=N avail_mem=X GB)`, typed by the reader)
        ev = []
        if begin is not None:
            ev.append(event_evidence(begin))
        if progress is not None:
            ev.append(event_evidence(progress))
        ev += exception_evidence(rc)
        M = facts.max_graph_bs(run)
        sizes = facts.captured_bs(run)
        a_c = begin.get("avail_mem") if begin is not None else None
        bs_reached = avail = None
        if progress is not None:
            bs_reached, avail = int(progress.get("bs")), float(progress.get("avail_mem"))
        basis = ""
        n = None
        if a_c is not None and bs_reached and avail is not None and a_c - avail > 0.05:
            per = (a_c - avail) / bs_reached
            budget = a_c - o["reserve_gb"]
            if budget > 0:
                limit = budget / per
                cands = [s for s in sizes if s <= limit] if sizes else []
                n = max(cands) if cands else max(1, int(limit) // 8 * 8 or 1)
                basis = f"{a_c - avail:.2f} GB used by bs {bs_reached} ({per * 1024:.1f} MB per size) of {a_c:.2f} GB free at capture start, keeping {o['reserve_gb']:.0f} GB"
        if n is None:
            n = facts.round_up_capture((M or 64) / 4, sizes) if M else 16
            if M and n >= M:
                n = max(1, M // 2)
            basis = f"a quarter of the current maximum {M}" if M else "the log does not show the captured sizes"
        args: dict[str, str | None] = {"--cuda-graph-max-bs": str(n)}
        mfs, T = run.memory.mem_fraction_static, run.memory.total_gb
        extra = ""
        if a_c is not None and a_c < o["reserve_gb"] and mfs is not None and T:
            new = floor_to(mfs - (o["reserve_gb"] - a_c) / T)
            args["--mem-fraction-static"] = f"{new:.2f}"
            extra = f" Only {a_c:.2f} GB was free when capture began, so lower --mem-fraction-static to {new:.2f} as well (frees {o['reserve_gb'] - a_c:.2f} GB)."
        where = f" on {rc.rank.label}" if rc.rank and rc.rank.label else ""
        msg = f"CUDA graph capture ran out of memory{where}" + (f" at batch size {bs_reached} ({avail:.2f} GB free)" if bs_reached else "") + (f"; --cuda-graph-max-bs is {M}." if M else ".")
        fix = Fix(
            summary=f"Capture fewer/smaller graphs: --cuda-graph-max-bs {n} ({basis}).{extra}",
            args=args,
            safety=self.safety({"N": n}),
        )
        yield self.finding(run, msg, ev, fix, new_max_bs=n, avail_at_capture_gb=a_c)
