"""Scheduling rules (SGL2xx): what the decode lines say about KV capacity, queueing and CUDA graphs."""

from __future__ import annotations

import itertools
import operator
from collections.abc import Iterator

import polars as pl

from sglog.findings import Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, event_evidence, floor_to, row_evidence, window_evidence

GiB = 2**30


class KvRetraction(Rule):
    """The KV pool fills up and the scheduler retracts running requests, more often than about once a minute.

    ## What it finds
    `KV cache pool is full. Retract requests.` (`Decode out of memory
    happened.` in old versions) at least `min_count` times and more than
    `max_per_minute` times per minute of serving; or, however rare, a
    retraction followed within `crash_within_seconds` by a crash while
    serving, with no batch between them.

    ## Why it matters
    A retracted request loses its KV cache and is prefilled again later:
    wasted compute, latency spikes, and in bad cases a throughput collapse.
    SGLang's guide: about once a minute is fine, frequent retraction is not.

    ## Evidence
    The first retraction lines and the rate over the serving window.

    ## Suggested fix
    `--schedule-conservativeness` = max(1.3, current x 1.3) (the guide's
    value): the scheduler then reserves more KV per admitted request.  If the
    pool is simply too small grow it (`kv-headroom-wasted`,
    `cuda-graph-bs-oversized`, `--kv-cache-dtype fp8_e4m3`).

    ## Fix safety
    A more conservative scheduler admits fewer requests at once: lower peak
    concurrency, slightly lower throughput when retraction was rare.

    ## Example
    42 retractions in 6 minutes of serving with conservativeness 1.0 ->
    `--schedule-conservativeness 1.3`.
    """

    code = "SGL201"
    name = "kv-retraction"
    severity = "warning"
    options = {
        "min_count": Option(3, "retractions needed before judging the rate"),
        "max_per_minute": Option(1.0, "acceptable retractions per minute of serving"),
        "crash_within_seconds": Option(30.0, "a retraction this close before a crash while serving (no batch between) is reported however rare"),
    }

    def _check(self, run, o) -> Iterator:
        evs = run.events_of("retraction")
        rts = list(itertools.compress(evs, map(operator.not_, facts.field_of(evs, "testing"))))
        if len(rts) < o["min_count"]:
            before = self._before_crash(run, rts, o)
            if before is not None:
                yield before
            return
        minutes = facts.serving_minutes(run)
        ts = list(filter(None, map(operator.attrgetter("ts"), rts)))
        if ts and len(ts) > 1:
            span = (max(ts) - min(ts)).total_seconds() / 60
            minutes = max(minutes or 0, span)
        minutes = max(minutes or 0.0, 1.0)
        rate = len(rts) / minutes
        if rate <= o["max_per_minute"]:
            return
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        new = max(1.3, round(sc * 1.3, 2))
        retracted = sum(filter(None, facts.field_of(rts, "retracted_reqs")))
        ev = [event_evidence(e) for e in rts[:3]]
        ev.append(window_evidence(run, f"{len(rts)} retractions ({retracted} requests) in {minutes:.1f} min of serving = {rate:.1f}/min"))
        msg = f"The KV pool filled up {len(rts)} times ({rate:.1f} per minute), retracting {retracted} running requests that must be prefilled again."
        fix = Fix(
            summary=f"Raise --schedule-conservativeness from {sc:g} to {new:g} so fewer requests are admitted than the pool can finish; or grow the KV pool.",
            args={"--schedule-conservativeness": f"{new:g}"},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, rate_per_min=round(rate, 3))

    def _before_crash(self, run, rts, o):
        """Too few retractions for a rate, but the last one came just before the crash: the pool ran out
        and the next step died (retraction paths are where speculative decoding's bookkeeping breaks)."""
        c = facts.crash(run)
        if c is None or not rts or c.phase not in (None, "launch", "serving", "prefill", "decode", "forward"):
            return None  # (a retraction happens only while serving: a tail that shows no startup is serving)
        rc = c.event
        label = rc.rank.label if rc.rank else None
        last = next((e for e in reversed(rts) if (e.file, e.line) < (rc.file, rc.line) and (label is None or e.rank is None or e.rank.label == label)), None)
        if last is None:
            return None
        tail, _counts = facts.batches_before(run, rc.file, rc.line, 1)
        if tail and tail[-1].get("line", 0) > last.line:
            return None  # the server kept serving after the retraction
        gap = (rc.ts - last.ts).total_seconds() if rc.ts is not None and last.ts is not None else None
        if gap is not None and gap > o["crash_within_seconds"]:
            return None
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        new = max(1.3, round(sc * 1.3, 2))
        n = last.get("retracted_reqs")
        when = f"{gap:.0f} s before the crash" if gap is not None else "right before the crash"
        msg = (
            f"The KV pool ran out while serving: {n if n is not None else 'running'} request(s) were retracted {when}, with no batch logged between them"
            + (f" ({len(rts)} retraction{'s' if len(rts) != 1 else ''} in the log)" if len(rts) > 1 else "")
            + "; the crash is in the step after the retraction."
        )
        fix = Fix(
            summary=f"Keep the pool from running out: raise --schedule-conservativeness from {sc:g} to {new:g} (fewer requests admitted than the pool can finish), or grow the KV pool. If the same crash follows a retraction again, report its traceback upstream: the retraction path is where it broke.",
            args={"--schedule-conservativeness": f"{new:g}"},
            safety=self.fix_safety,
        )
        return self.finding(run, msg, [event_evidence(last, note="the last retraction"), event_evidence(rc, note="the crash that followed")], fix, before_crash=True)


def _usage_rows(frame: pl.DataFrame, min_rows: int):
    """(the rows with token usage and a queue length, the usage column), or (None, None) below min_rows."""
    u = facts.usage_col(frame)
    if frame.height < min_rows or u is None or "queue_req" not in frame.columns:
        return None, None
    frame = facts.present(frame, u, "queue_req")
    return (frame, u) if frame.height >= min_rows else (None, None)


def _steady_usage(run, min_rows: int):
    return _usage_rows(facts.steady(run), min_rows)


class SchedulerTooConservative(Rule):
    """Requests wait in the queue while most of the KV cache is idle.

    ## What it finds
    Steady-state decode lines (at least `min_rows`) where `token usage <
    usage_below` *and* `#queue-req > 0` in at least `share` of the lines.

    ## Why it matters
    The scheduler reserves KV for each request's full `max_new_tokens`; when
    requests stop early (EOS, stop strings) the reservation is pessimistic and
    requests wait although memory is free.  Or the request cap
    (`max_running_requests`) is the limit, not the memory.

    ## Evidence
    The decode window (share of lines with idle KV and a queue) and one such line.

    ## Suggested fix
    If `#running-req` sits at `max_running_requests`: raise the cap to
    `0.9 x max_total_num_tokens / (tokens per running request)` (median of
    `#token / #running-req`), at most 4x.  Otherwise
    `--schedule-conservativeness 0.3` (SGLang's guide).

    ## Fix safety
    A less conservative scheduler retracts more when requests do run long (see
    `kv-retraction`); a higher request cap raises latency per request and,
    with speculative decoding, needs graphs for the larger batches.

    ## Example
    Token usage 0.45 with 30 queued requests in 80% of decode lines ->
    `--schedule-conservativeness 0.3`.
    """

    code = "SGL202"
    name = "scheduler-too-conservative"
    severity = "warning"
    options = {"min_rows": Option(10, "steady decode lines needed"), "usage_below": Option(0.9, "token usage that counts as idle"), "share": Option(0.5, "share of lines with idle KV and a queue")}

    def _check(self, run, o) -> Iterator:
        s, u = _steady_usage(run, o["min_rows"])
        if s is None:
            return
        idle = (pl.col(u) < o["usage_below"]) & (pl.col("queue_req") > 0)
        share = s.select(idle.sum()).item() / s.height  # (counted first: most runs stop here, no copy)
        if share < o["share"]:
            return
        hit = s.filter(idle)
        m = run.memory
        mrr = m.max_running_requests
        usage = float(hit.get_column(u).median())
        queue = float(hit.get_column("queue_req").median())
        ev = [
            row_evidence(hit.head(1).to_dicts()[0]),
            window_evidence(
                run, f"{share:.0%} of {s.height} steady decode lines have token usage < {o['usage_below']} and a queue (median usage {usage:.2f}, median queue {queue:g}; {facts.line_span(s)})"
            ),
        ]
        at_cap = mrr is not None and "running_req" in hit.columns and (hit.get_column("running_req") >= mrr).mean() >= 0.5
        if at_cap:
            tok_col = "token" if "token" in hit.columns else "full_token" if "full_token" in hit.columns else None
            per_req = None
            if tok_col is not None:
                r = hit.filter(pl.col("running_req") > 0)
                if r.height:
                    per_req = float((r.get_column(tok_col) / r.get_column("running_req")).median())
            if per_req and m.max_total_num_tokens:
                new = int(min(4 * mrr, 0.9 * m.max_total_num_tokens / max(per_req, 1.0)))
                if new > mrr:
                    msg = f"Requests queue (median {queue:g}) while the KV cache is {usage:.0%} used: #running-req is pinned at max_running_requests={mrr}."
                    fix = Fix(
                        summary=f"Raise --max-running-requests from {mrr} to {new} = 0.9 x {m.max_total_num_tokens:,} pool tokens / {per_req:.0f} tokens per running request.",
                        args={"--max-running-requests": str(new)},
                        safety=self.fix_safety,
                    )
                    yield self.finding(run, msg, ev, fix, share=round(share, 3))
                    return
            return
        sc = facts.num(run.args.get("schedule_conservativeness")) or 1.0
        if sc <= 0.3:
            return
        msg = f"Requests queue (median {queue:g}) while the KV cache is only {usage:.0%} used in {share:.0%} of steady decode lines: the scheduler reserves more than requests use."
        fix = Fix(
            summary=f"Lower --schedule-conservativeness from {sc:g} to 0.3 (SGLang's tuning guide) so the scheduler admits more requests.",
            args={"--schedule-conservativeness": "0.3"},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, share=round(share, 3))


class KvCapacityBound(Rule):
    """The KV cache is full and requests queue: throughput is bounded by KV capacity.

    ## What it finds
    Steady-state decode lines (at least `min_rows`) with `token usage >=
    usage_at_least` *and* `#queue-req > 0` in at least `share` of the lines.
    A run with no decode lines (a PD prefill server, or an excerpt of one) is
    read from its prefill lines (at least `min_prefill_rows`); when most of
    the pool is held by requests waiting for their KV transfer
    (`#transferring-req` / `#inflight-req`), the decode side is the bottleneck.

    ## Why it matters
    With the pool full the scheduler cannot admit queued requests: throughput
    plateaus and latency grows with the queue.  More KV (or less KV per
    request) is the only lever.

    ## Evidence
    The decode window and one line at high usage with a queue.

    ## Suggested fix
    In order: if `available_gpu_mem` exceeds `target_gb`, raise
    `--mem-fraction-static` by `(F - target_gb) / T`; else if the KV cache is
    16-bit, `--kv-cache-dtype fp8_e4m3` (about twice the tokens); else add
    GPUs with data parallelism (`--dp`, or more replicas behind the router).

    ## Fix safety
    A higher fraction leaves less activation memory; an fp8 KV cache can cost
    accuracy on some models; data parallelism needs more GPUs.

    ## Example
    Token usage 0.94 with 5 queued requests on every decode line ->
    `--kv-cache-dtype fp8_e4m3`.
    """

    code = "SGL203"
    name = "kv-capacity-bound"
    severity = "warning"
    options = {
        "min_rows": Option(5, "steady decode lines needed"),
        "min_prefill_rows": Option(3, "prefill lines needed when the run logs no decode lines (a PD prefill server)"),
        "usage_at_least": Option(0.9, "token usage that counts as full"),
        "share": Option(0.5, "share of lines full with a queue"),
        "target_gb": Option(6.0, "free memory to keep when raising the fraction"),
    }

    def _check(self, run, o) -> Iterator:
        s, u = _steady_usage(run, o["min_rows"])
        lines = "steady decode lines"
        if s is None and run.decode.height == 0:
            # a PD prefill server logs no decode lines: its prefill lines show the pool (and an excerpt may hold only them)
            s, u = _usage_rows(run.prefill, o["min_prefill_rows"])
            lines = "prefill lines (the run logs no decode lines: a PD prefill server, or an excerpt of one)"
        if s is None:
            return
        hit = s.select([c for c in ("file", "line", u, "queue_req", "transfer_req", "inflight_req") if c in s.columns]).filter((pl.col(u) >= o["usage_at_least"]) & (pl.col("queue_req") > 0))
        share = hit.height / s.height
        if share < o["share"]:
            return
        usage = float(hit.get_column(u).median())
        queue = float(hit.get_column("queue_req").median())
        held = next(
            (
                f"; a median {float(hit.get_column(c).median()):g} requests hold their KV while it is sent to the decode server"
                for c in ("transfer_req", "inflight_req")
                if c in hit.columns and hit.get_column(c).drop_nulls().len() and hit.get_column(c).median()
            ),
            "",
        )
        ev = [
            row_evidence(hit.head(1).to_dicts()[0]),
            window_evidence(
                run, f"{share:.0%} of {s.height} {lines.split(' (')[0]} have token usage >= {o['usage_at_least']} and a queue (median usage {usage:.2f}, median queue {queue:g}; {facts.line_span(s)})"
            ),
        ]
        m = run.memory
        F, T, mfs = m.available_gpu_mem_gb, m.total_gb, m.mem_fraction_static
        kvd = str(run.args.get("kv_cache_dtype") or "")
        waiting = max((float(hit.get_column(c).median() or 0) for c in ("transfer_req", "inflight_req") if c in hit.columns and hit.get_column(c).drop_nulls().len()), default=0.0)
        if waiting > queue:
            fix = Fix(
                summary=f"Most of this prefill server's pool holds requests already prefilled and waiting to be sent (a median {waiting:g}, against {queue:g} queued): the decode side or the KV transfer is the bottleneck. Add decode capacity or check the transfer backend's throughput; a bigger prefill pool would only hold more waiting requests.",
                args={},
                safety=self.fix_safety,
            )
        elif F is not None and T and mfs is not None and F > o["target_gb"] + 1:
            new = floor_to(mfs + (F - o["target_gb"]) / T)
            fix = Fix(
                summary=f"Grow the KV pool: --mem-fraction-static {new:.2f} = {mfs:.2f} + ({F:.2f} - {o['target_gb']:.0f}) GB free / T {T:.1f} GB.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety=self.fix_safety,
            )
        elif kvd in ("auto", "bfloat16", "float16", "bf16", "fp16"):
            fix = Fix(summary="Fit about twice the tokens in the same memory: --kv-cache-dtype fp8_e4m3.", args={"--kv-cache-dtype": "fp8_e4m3"}, safety=self.fix_safety)
        else:
            fix = Fix(
                summary="More KV capacity is needed: an fp8 KV cache (--kv-cache-dtype fp8_e4m3) if not already used, or more GPUs with data parallelism (--dp or more replicas).",
                args={},
                safety=self.fix_safety,
            )
        msg = f"The KV cache is full (median token usage {usage:.2f}) while requests queue (median {queue:g}) in {share:.0%} of {lines}{held}: throughput is bound by KV capacity."
        yield self.finding(run, msg, ev, fix, share=round(share, 3))


class DecodeBatchExceedsCudaGraph(Rule):
    """Decode batches larger than the biggest captured CUDA graph run without graphs.

    ## What it finds
    Decode lines with `cuda graph: False` and `#running-req` above the largest
    captured batch size, in at least `min_rows` lines or `min_share` of them.

    ## Why it matters
    A batch above `--cuda-graph-max-bs` runs eagerly: per-step CPU launch
    overhead multiplies the time per token, requests stay longer and the batch
    stays large (a self-sustaining slow state).  `max_running_requests` and
    `cuda_graph_max_bs` are chosen independently, so this happens by default.

    ## Evidence
    The server-args line and decode lines running without graphs above the maximum.

    ## Suggested fix
    `--cuda-graph-max-bs` = p95 of `#running-req` on those lines, rounded up to
    SGLang's capture grid (multiples of 8 up to 256, of 16 above); graph memory
    grows about `G x new / old`.  Or cap `--max-running-requests` at the
    current maximum.

    ## Fix safety
    More graph sizes cost memory (less KV) and capture time; a lower request cap
    queues requests instead.

    ## Example
    `cuda_graph_max_bs=32` and decode lines at 48-67 running with `cuda graph:
    False` -> `--cuda-graph-max-bs 72`.
    """

    code = "SGL204"
    name = "decode-batch-exceeds-cuda-graph"
    severity = "warning"
    options = {"min_rows": Option(3, "decode lines above the graphs needed"), "min_share": Option(0.05, "or this share of decode lines")}

    def _check(self, run, o) -> Iterator:
        M = facts.max_graph_bs(run)
        d = facts.decode_rows(run)
        if not M or facts.graphs_disabled(run) or d.height == 0 or "cuda_graph" not in d.columns or "running_req" not in d.columns:
            return
        over = d.filter((pl.col("cuda_graph") == False) & (pl.col("running_req") > M))  # noqa: E712
        if over.height < o["min_rows"] and over.height < o["min_share"] * d.height or over.height == 0:
            return
        p95 = float(over.get_column("running_req").quantile(0.95, "higher"))
        new = facts.round_up_capture(p95)
        m = run.memory
        cost = f"; graphs grow from {m.cuda_graph_gb:.2f} to ~{m.cuda_graph_gb * new / M:.2f} GB" if m.cuda_graph_gb else ""
        ev = []
        sa = run.first("server_args")
        if sa is not None:
            ev.append(event_evidence(sa, note=f"cuda_graph_max_bs={M}"))
        ev += [row_evidence(r) for r in over.head(2).to_dicts()]
        ev.append(window_evidence(run, f"{over.height} of {d.height} decode lines ran without CUDA graphs above batch size {M} (p95 #running-req {p95:g})"))
        msg = f"{over.height} decode lines ({over.height / d.height:.0%}) ran {p95:g}-request batches without CUDA graphs: the largest captured size is {M}."
        fix = Fix(
            summary=f"Capture graphs for the batches that occur: --cuda-graph-max-bs {new} (p95 {p95:g} rounded up to the capture grid){cost}; or cap --max-running-requests at {M}.",
            args={"--cuda-graph-max-bs": str(new)},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, new_max_bs=new)


class CudaGraphsNeverCaptured(Rule):
    """Every decode batch ran without CUDA graphs.

    ## What it finds
    At least `min_rows` decode lines, all with `cuda graph: False`, at batch
    sizes the graphs would cover (at most `--cuda-graph-max-bs` when known).
    A shorter log (an excerpt pasted into an issue) with at least
    `min_rows_info` such lines gets an info finding that says how few lines it
    is based on: each decode line summarises ~40 decode steps, so even two
    lines without a graph are a signal, but not proof that the whole run
    lacked graphs.

    ## Why it matters
    Without graphs each decode step pays the CPU cost of launching every
    kernel: small-batch decode is often 2-3x slower.  Either graphs are
    disabled (`--disable-cuda-graph`) or capture silently did not happen.

    ## Evidence
    The server-args line (`disable_cuda_graph`) and a decode line.

    ## Suggested fix
    Remove `--disable-cuda-graph` when it is set (an explicit choice is
    reported as info); otherwise check the startup log for the capture lines
    (`Capture cuda graph begin/end`) and whether the platform supports them.

    ## Fix safety
    Capture costs startup time and memory (less KV); on some platforms (ROCm
    consumer cards, new architectures) it can fail: keep the flag there.

    ## Example
    `disable_cuda_graph=True` and 40 decode lines with `cuda graph: False` at
    1-4 running requests -> drop `--disable-cuda-graph`.
    """

    code = "SGL205"
    name = "cuda-graphs-never-captured"
    severity = "warning"
    options = {
        "min_rows": Option(5, "decode lines needed for a warning"),
        "min_rows_info": Option(2, "decode lines needed for an info finding that names how few lines it rests on"),
    }

    def _check(self, run, o) -> Iterator:
        d = facts.decode_rows(run)
        least = min(o["min_rows"], o["min_rows_info"])
        if d.height < least or "cuda_graph" not in d.columns:
            return
        g = facts.present(d, "cuda_graph")
        if g.height < least or g.get_column("cuda_graph").any():
            return
        few = g.height < o["min_rows"]
        only = f" (based on only {g.height} decode lines)" if few else ""
        lines = "The log's decode lines" if few else f"All {g.height} decode lines"
        M = facts.max_graph_bs(run)
        if M and "running_req" in g.columns and (g.get_column("running_req") > M).mean() > 0.5:
            return  # decode-batch-exceeds-cuda-graph explains it
        ev = []
        sa = run.first("server_args")
        disabled = facts.graphs_disabled(run)
        if sa is not None:
            ev.append(event_evidence(sa, note=f"disable_cuda_graph={run.args.get('disable_cuda_graph')}"))
        ev.append(row_evidence(g.head(1).to_dicts()[0]))
        ev.append(window_evidence(run, f"{g.height} decode lines, none with cuda graph: True ({facts.line_span(g)})"))
        label = "npu graph" if "graph_backend" in g.columns and (g.get_column("graph_backend") == "npu").any() else "cuda graph"
        if disabled:
            msg = f"{lines} ran without CUDA graphs: --disable-cuda-graph is set{only}."
            fix = Fix(summary="Remove --disable-cuda-graph to capture decode graphs (if the platform supports them).", args={"--disable-cuda-graph": None}, safety=self.fix_safety)
            yield self.finding(run, msg, ev, fix, severity="info")
            return
        msg = f"{lines} report {label}: False although graphs are not disabled: capture did not happen or does not cover these batches{only}."
        fix = Fix(
            summary="Check the startup log for `Capture cuda graph begin/end`; make sure --cuda-graph-max-bs covers the running batch and that the attention backend supports graphs.",
            args={},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix, severity="info" if few else None)
