"""Memory rules (SGL1xx): how the GPU memory budget was split, and the OOMs that follow.

Notation used in the docs (all per GPU, GB; the minimum over ranks for free
memory, the maximum for what was used):

* `T`: free memory when the weights start loading (`Load weight begin. avail mem`),
  what SGLang budgets `--mem-fraction-static` against;
* `A_w`: free after the target weights (`Load weight end. avail mem`); `T - A_w` is
  what weights and runtime use before the KV pool is sized;
* `K`: KV pool size, `bytes/token` = K / #tokens (`KV Cache is allocated`);
* `G`: CUDA-graph memory (`Capture ... end. mem usage`); `W_d`: draft weights;
* `F`: `available_gpu_mem` in the ready summary; `H`: activation headroom
  (SGLang's tuning guide: keep 5-8 GB free).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from sglog.findings import Evidence, Fix
from sglog.rules import facts
from sglog.rules.base import Option, Rule, ceil_to, event_evidence, exception_evidence, floor_to, fmt_frac, gb, pick_remedy, row_evidence, text_line_evidence, window_evidence
from sglog.rules.ownership import CONTEXT, SIGNATURE, CrashRule

GiB = 2**30


# ------------------------------------------------------------------ shared helpers


def _budget_evidence(run) -> list[Evidence]:
    """Server args, weight load and KV lines: where the budget numbers come from."""
    out = []
    sa = run.first("server_args")
    if sa is not None:
        out.append(event_evidence(sa, note="server args in effect"))
    begins = [e for e in run.events_of("weight_load_begin") if e.get("avail_mem") is not None]
    rank = min(begins, key=lambda e: e.get("avail_mem")).rank if begins else None
    label = rank.label if rank else None
    seen = set()
    for e in run.events_of("weight_load_begin", "weight_load_end", "kv_cache_allocated", "memory_pool_end"):
        if e.kind not in seen:
            if label is not None and e.rank is not None and e.rank.label != label:
                continue
            seen.add(e.kind)
            out.append(event_evidence(e))
    return out


def _total_gb(run, rc=None) -> tuple[float | None, str]:
    """T and where it came from."""
    m = run.memory
    if m.total_gb:
        return m.total_gb, "free memory at `Load weight begin`"
    if rc is not None and rc.get("capacity_gb"):
        return rc.get("capacity_gb"), "GPU capacity in the OOM message"
    return None, ""


def _graph_gb(run, o, spec: bool) -> tuple[float, str | None]:
    """G measured, or estimated from --cuda-graph-max-bs (then an assumption to state)."""
    m = run.memory
    if m.cuda_graph_gb is not None:
        return (m.cuda_graph_gb or 0.0) + (m.draft_cuda_graph_gb or 0.0), None
    if facts.graphs_disabled(run):
        return 0.0, None
    bs = facts.max_graph_bs(run) or 160
    per = o["graph_mb_per_bs"] * (2 if spec else 1)
    est = per * bs / 1024
    return est, f"CUDA graphs {est:.2f} GB (not captured yet: {o['graph_mb_per_bs']:g} MB per batch size x max bs {bs}{' x target+draft' if spec else ''})"


def _oom_numbers(e) -> str:
    parts = []
    if e.get("tried_gb") is not None:
        parts.append(f"tried to allocate {gb(e.get('tried_gb'))}")
    if e.get("free_gb") is not None:
        parts.append(f"{gb(e.get('free_gb'))} free")
    if e.get("capacity_gb") is not None:
        parts.append(f"of {gb(e.get('capacity_gb'))}")
    return ", ".join(parts)


def _suggested_above(text: str) -> float | None:
    """SGLang 0.5.14+ names its own lower bound: `Raise --mem-fraction-static above 0.812`."""
    m = re.search(r"above (\d\.\d+)", text)
    return float(m.group(1)) if m else None


# ------------------------------------------------------------------ SGL101


class DraftModelExceedsStaticPool(CrashRule):
    """A speculative run whose automatic `--mem-fraction-static` left no room: it crashed sizing the memory pool.

    ## What it finds
    A run with `--speculative-algorithm` (EAGLE, EAGLE3, NEXTN, STANDALONE...)
    and an automatic (not explicitly set) `mem_fraction_static` that dies while
    the memory pools are set up: `Not enough memory. Please try to increase
    --mem-fraction-static` or a CUDA out-of-memory error in `init_memory_pool`,
    the draft model's load, its KV pool or its CUDA-graph capture.

    ## Why it matters
    SGLang's automatic fraction is computed as if only the target model existed:
    it adds a flat reservation (2 GB for EAGLE-family drafts, 6 GB for
    STANDALONE) but never the draft's weights, its KV pool or its graphs.  When
    the target weights fill most of the card the static pool ends up smaller
    than the weights, so the KV pool size is negative.  The error tells you to
    *increase* the fraction while the generic advice for OOMs is to *decrease*
    it: only the numbers say which way to turn it.

    ## Evidence
    The server-args line (algorithm, the automatic fraction), the `Load weight
    begin/end` lines (`T`, `A_w`) and the exception line.

    ## Suggested fix
    Set `--mem-fraction-static` explicitly to a value inside the feasible window:

    * lower bound `mfs_min = (T - A_w + kv_min) / T`: the weights plus a minimal
      KV pool of `min_kv_tokens` tokens (bytes/token from the KV line; if the
      log has none, `min_kv_gb_if_unknown`).  If SGLang's own message names a
      minimum (`Raise --mem-fraction-static above X`), the larger is used.
    * upper bound `mfs_max = 1 - (H + G + W_d + K_d) / T`: leave the activation
      headroom `H` (`headroom_gb`, at most `headroom_share` x T), the CUDA graphs `G` and the draft's
      weights `W_d` and KV `K_d` outside the static pool (builds that already
      budget the draft, 0.5.14+, use `1 - (H + G) / T`).
    * suggestion: `mfs_max - 0.01` rounded down to 0.01 (the most KV that keeps
      the headroom), if it is not below `mfs_min`.

    Values not in the log are assumptions and the fix says so: the draft
    weights when the crash came before the draft loaded
    (`draft_weights_gb_if_unknown`, `standalone_draft_weights_gb_if_unknown`
    for STANDALONE drafts), the graph memory before any capture
    (`graph_mb_per_bs` x `--cuda-graph-max-bs`, doubled for target + draft).
    When the window is empty the fix says so and shrinks the graphs instead.

    ## Fix safety
    A higher fraction reserves memory up front: if the draft, its KV pool or its
    graphs are larger than assumed the server can still fail at draft load or
    capture, and with less than `H` GB of activation room a long prefill can
    run out of memory at runtime.  Check `available_gpu_mem` in the ready line
    of the next run (5-8 GB is the target).

    ## Example
    EAGLE-3 on 8 x 96 GB: the target uses 72.3 GB of `T` = 94 GB; auto
    `mem_fraction_static=0.76` reserves 71.4 GB, less than the weights, and the
    server dies with `Not enough memory`.  sglog suggests
    `--mem-fraction-static 0.89` (window 0.80-0.90); 0.88 is what worked.
    """

    code = "SGL101"
    name = "draft-model-exceeds-static-pool"
    severity = "error"
    precedence = 70
    options = {
        "headroom_gb": Option(6.0, "H: activation memory to keep outside the static pool (SGLang's guide: 5-8 GB)"),
        "headroom_share": Option(0.10, "H as a share of T on small cards (whichever is smaller applies)"),
        "min_kv_tokens": Option(32768, "smallest useful KV pool, in tokens (lower bound)"),
        "min_kv_gb_if_unknown": Option(2.0, "smallest useful KV pool in GB when the log has no KV line"),
        "draft_weights_gb_if_unknown": Option(2.0, "W_d assumed when the draft never loaded (SGLang's own EAGLE reservation)"),
        "standalone_draft_weights_gb_if_unknown": Option(6.0, "W_d assumed for STANDALONE drafts"),
        "graph_mb_per_bs": Option(4.0, "graph memory per batch size (MB) when no capture happened yet"),
    }

    def claim(self, run, c) -> int | None:
        # the draft model is what the auto-chosen static pool did not budget for
        if not facts.is_spec_auto(run):
            return None
        if facts.not_enough_memory(c):
            return SIGNATURE
        if facts.oom_crash(c) and (c.phase in facts.DRAFT_PHASES or "init_memory_pool" in facts.frame_functions(c.event)):
            return SIGNATURE
        return None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        m = run.memory
        T, t_src = _total_gb(run, rc)
        algo = facts.spec_algo(run) or "speculative"
        mfs = m.mem_fraction_static
        evidence = _budget_evidence(run) + exception_evidence(rc)
        assumptions: list[str] = []
        if not T or m.avail_after_weights_gb is None:
            msg = f"{algo} run with automatic --mem-fraction-static{'' if mfs is None else f' {mfs:.2f}'} crashed setting up the memory pool ({(rc.get('exc_type') or 'error')})"
            fix = Fix(
                summary="Set --mem-fraction-static explicitly: the automatic value does not budget the draft model. "
                "The log lacks the `Load weight begin/end` lines needed to compute a value; start from the automatic value + 0.05 and watch `available_gpu_mem`.",
                args={"--mem-fraction-static": fmt_frac(min(0.95, (mfs or 0.8) + 0.05))} if mfs else {},
                safety=self.safety({"H": o["headroom_gb"]}),
            )
            yield self.finding(run, msg, evidence, fix)
            return
        used = T - m.avail_after_weights_gb
        bpt = m.bytes_per_kv_token
        if bpt:
            kv_min = o["min_kv_tokens"] * bpt / GiB
            kv_src = f"{o['min_kv_tokens']} tokens x {bpt / 1024:.1f} KB"
        else:
            kv_min = o["min_kv_gb_if_unknown"]
            kv_src = None
            assumptions.append(f"minimum KV pool {kv_min:.1f} GB (no KV Cache line: bytes/token unknown)")
        if m.draft_weights_gb is not None:
            w_d = m.draft_weights_gb
        else:
            w_d = o["standalone_draft_weights_gb_if_unknown"] if algo == "STANDALONE" else o["draft_weights_gb_if_unknown"]
            assumptions.append(f"draft weights {w_d:.1f} GB (the crash came before the draft model loaded)")
        k_d = m.draft_kv_gb or 0.0
        g, g_assumed = _graph_gb(run, o, spec=True)
        if g_assumed:
            assumptions.append(g_assumed)
        h = min(o["headroom_gb"], o["headroom_share"] * T)
        draft_counted = "draft weights are now counted" in c.text
        mfs_min = (used + kv_min + ((w_d + k_d) if draft_counted else 0.0)) / T
        above = _suggested_above(c.text)
        if above is not None:
            mfs_min = max(mfs_min, above)
        outside = h + g + (0.0 if draft_counted else w_d + k_d)
        mfs_max = 1 - outside / T
        lo, hi = ceil_to(mfs_min), floor_to(mfs_max)
        suggestion = floor_to(mfs_max - 0.01)
        static = (mfs or 0) * T
        if mfs is not None and static < used:
            why = f"reserves {static:.1f} of {T:.1f} GB, less than the {used:.1f} GB the target weights already use"
        elif mfs is not None:
            why = f"reserves {static:.1f} of {T:.1f} GB, leaving {static - used:.1f} GB beyond the target weights ({used:.1f} GB) for KV cache and the draft"
        else:
            why = f"does not leave room beyond the {used:.1f} GB of target weights"
        mfs_txt = f" {mfs:.2f}" if mfs is not None else ""
        msg = f"{algo} run crashed setting up the memory pool: the automatic --mem-fraction-static{mfs_txt} {why}; the draft model is not budgeted."
        basis = (
            f"lower bound {lo:.2f} = (weights {used:.1f} GB + minimum KV {kv_min:.1f} GB{' ' + kv_src if kv_src else ''}) / T {T:.1f} GB; "
            f"upper bound {hi:.2f} = 1 - (headroom {h:.1f} + CUDA graphs {g:.1f}" + ("" if draft_counted else f" + draft {w_d + k_d:.1f}") + f" GB) / T {T:.1f} GB"
        )
        assume = (" Assumed: " + "; ".join(assumptions) + ".") if assumptions else ""
        if suggestion >= ceil_to(mfs_min) - 1e-9:
            fix = Fix(
                summary=f"Set --mem-fraction-static {suggestion:.2f} explicitly (feasible window {lo:.2f}-{hi:.2f}: {basis}).{assume}",
                args={"--mem-fraction-static": f"{suggestion:.2f}"},
                safety=self.safety({"H": round(h, 1)}),
            )
        else:
            bs = facts.max_graph_bs(run)
            smaller = facts.round_up_capture((bs or 32) / 4) if bs else 8
            args = {"--mem-fraction-static": f"{lo:.2f}", "--cuda-graph-max-bs": str(smaller)}
            fix = Fix(
                summary=f"No fraction fits: the lower bound {lo:.2f} is above the upper bound {hi:.2f} ({basis}). "
                f"Shrink what lives outside the static pool: --cuda-graph-max-bs {smaller}, a smaller draft tree "
                f"(--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4), --chunked-prefill-size 4096; or use more GPUs.{assume}",
                args=args,
                safety="With fewer graph sizes, batches above the largest one run without CUDA graphs (slower); at the lower bound the KV pool is minimal and long prompts queue.",
            )
        yield self.finding(run, msg, evidence, fix, total_gb=T, total_source=t_src, mfs=mfs, mfs_min=round(mfs_min, 4), mfs_max=round(mfs_max, 4), suggested=suggestion, assumptions=assumptions)


# ------------------------------------------------------------------ SGL102


class KvPoolStarvedByWeights(CrashRule):
    """The weights leave (almost) nothing for the KV cache: startup fails with `Not enough memory`.

    ## What it finds
    (error) A crash with `Not enough memory. Please try to increase
    --mem-fraction-static` / `Loaded weights leave no GPU memory for the KV
    cache` (speculative runs with an automatic fraction are
    `draft-model-exceeds-static-pool` instead).  A server that starts with a
    KV pool smaller than one full-length request is
    `kv-pool-smaller-than-request`.

    ## Why it matters
    `mem_fraction_static x T` must hold the weights *and* the KV pool.  When
    the weights use nearly all of it the pool is empty (startup fails) or tiny
    (long prompts are rejected, requests queue).  Lowering the fraction, the
    usual OOM advice, makes this worse.

    ## Evidence
    The weight-load lines (`T`, `A_w`), the KV/ready lines and the exception.

    ## Suggested fix
    Raise the fraction to `mfs = (T - A_w + kv_need) / T` rounded up to 0.01,
    where `kv_need` = `context_len` x bytes/token for a small pool (for a
    crash without a KV line: `min_kv_gb_if_unknown`).  If that leaves less than
    `min(headroom_gb, headroom_share x T)` free (`mfs > 1 - headroom/T`) no fraction works: the fix
    then caps `--context-length` to what the pool holds (small pool) or asks
    for more GPUs / a quantized checkpoint / `--kv-cache-dtype fp8_e4m3`.

    ## Fix safety
    A higher fraction leaves less memory for activations and CUDA graphs: check
    that `available_gpu_mem` stays at 5-8 GB in the next run.  A shorter
    `--context-length` rejects longer prompts.

    ## Example
    `Load weight begin. avail mem=23.2 GB` then `Load weight end ... avail
    mem=5.1 GB` with `mem_fraction_static=0.78`: 0.78 x 23.2 = 18.1 GB, all of
    it weights -> `--mem-fraction-static 0.87` = (18.1 + 2 GB of KV) / 23.2.
    """

    code = "SGL102"
    name = "kv-pool-starved-by-weights"
    severity = "error"
    precedence = 70
    options = {
        "headroom_gb": Option(5.0, "activation memory that must stay outside the static pool"),
        "headroom_share": Option(0.10, "the same as a share of T (whichever is smaller applies: small cards)"),
        "min_kv_gb_if_unknown": Option(2.0, "KV pool to aim for when the log has no KV line (crash before allocation)"),
    }

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.not_enough_memory(c) and not facts.is_spec_auto(run) else None

    def _check(self, run, o) -> Iterator:
        c = facts.crash(run)
        if c is not None and self.owned_crash(run) is not None:
            yield self._crash(run, o, c)
            return
        # (a server whose pool is smaller than one full-length request is kv-pool-smaller-than-request's)

    def _crash(self, run, o, c):
        rc = c.event
        m = run.memory
        T, _ = _total_gb(run, rc)
        ev = _budget_evidence(run) + exception_evidence(rc)
        mfs = m.mem_fraction_static
        mfs_txt = f"--mem-fraction-static {mfs:.2f}" if mfs is not None else "--mem-fraction-static"
        if not T or m.avail_after_weights_gb is None:
            above = _suggested_above(c.text)
            msg = f"Startup failed: the weights leave no memory for the KV cache under {mfs_txt}."
            if above is not None:
                new = ceil_to(above + 0.005)
                fix = Fix(
                    f"Raise --mem-fraction-static to {new:.2f} (SGLang's message names {above:.3f} as the minimum).",
                    {"--mem-fraction-static": f"{new:.2f}"},
                    "Less memory stays free for activations and CUDA graphs.",
                )
            elif mfs is not None:
                new = ceil_to(min(0.95, mfs + 0.05))
                fix = Fix(
                    f"Raise --mem-fraction-static (try {new:.2f}); the log lacks the weight-load lines needed to compute the value.",
                    {"--mem-fraction-static": f"{new:.2f}"},
                    "Less memory stays free for activations and CUDA graphs.",
                )
            else:
                fix = Fix(
                    "Raise --mem-fraction-static; the log lacks the weight-load lines and the current value needed to compute one.", {}, "Less memory stays free for activations and CUDA graphs."
                )
            return self.finding(run, msg, ev, fix)
        used = T - m.avail_after_weights_gb
        bpt = m.bytes_per_kv_token
        if bpt and m.context_len:
            kv_need = m.context_len * bpt / GiB
            kv_src = f"one full context ({m.context_len:,} tokens x {bpt / 1024:.1f} KB)"
        else:
            kv_need = o["min_kv_gb_if_unknown"]
            kv_src = f"{kv_need:.1f} GB (assumed: no KV line in the log)"
        new = ceil_to((used + kv_need) / T)
        above = _suggested_above(c.text)
        if above is not None:
            new = max(new, ceil_to(above + 0.005))
        headroom = min(o["headroom_gb"], o["headroom_share"] * T)
        upper = floor_to(1 - headroom / T)
        static = (mfs or 0) * T
        msg = (
            f"Startup failed: {mfs_txt} reserves {static:.1f} of {T:.1f} GB, about what the weights use ({used:.1f} GB), so the KV pool is empty."
            if mfs is not None
            else f"Startup failed: the weights use {used:.1f} of {T:.1f} GB and leave no room for the KV pool."
        )
        if new <= upper:
            fix = Fix(
                summary=f"Raise --mem-fraction-static to {new:.2f} = (weights {used:.1f} GB + KV {kv_src}) / T {T:.1f} GB; at most {upper:.2f} keeps {headroom:.1f} GB for activations.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety="Less memory stays free for activations and CUDA graphs; check available_gpu_mem (5-8 GB) in the next run.",
            )
        else:
            fix = Fix(
                summary=f"No fraction fits: the weights plus a minimal KV pool need {new:.2f} of the card but at most {upper:.2f} leaves {headroom:.1f} GB for activations. "
                "Use more GPUs (--tp), a quantized checkpoint or --kv-cache-dtype fp8_e4m3.",
                args={"--kv-cache-dtype": "fp8_e4m3"} if str(run.args.get("kv_cache_dtype") or "auto") in ("auto", "bfloat16", "float16", "bf16") else {},
                safety="An fp8 KV cache halves KV memory but can cost accuracy on some models.",
            )
        return self.finding(run, msg, ev, fix, mfs_needed=new, mfs_upper=upper)


# ------------------------------------------------------------------ SGL103

_CAPTURE_PROGRESS = re.compile(r"bs=(\d+)\s+avail_mem=([\d.]+)\s*GB")


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
    `Capture cuda graph begin ... avail mem=6.10 GB` then `Capturing batches
    (bs=512 avail_mem=0.13 GB)` and `CUDA out of memory` -> 5.97 GB for bs 512,
    11.9 MB per size -> `--cuda-graph-max-bs 336` fits in 6.10 - 2 GB.
    """

    code = "SGL103"
    name = "cuda-graph-capture-oom"
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
            if (e.file, e.line) < (rc.file, rc.line) and _CAPTURE_PROGRESS.search(e.text or ""):
                progress = e
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
            hits = _CAPTURE_PROGRESS.findall(progress.text or "")
            if hits:
                bs_reached, avail = int(hits[-1][0]), float(hits[-1][1])
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
        args = {"--cuda-graph-max-bs": str(n)}
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


# ------------------------------------------------------------------ SGL104

_CAPTURE_REMEDIES = (
    (
        ("custom_all_reduce", "custom allreduce", "cudaipc", "ipc handle"),
        {"--disable-custom-all-reduce": "true"},
        "The custom all-reduce kernels failed inside capture: disable them (NCCL is used instead).",
    ),
    (("dynamo", "inductor", "torch.compile", "torch._"), {"--enable-torch-compile": None}, "torch.compile failed inside capture: drop --enable-torch-compile."),
    (("piecewise",), {"--disable-piecewise-cuda-graph": "true"}, "The piecewise (prefill) graphs failed: disable them; decode graphs stay."),
    (
        ("operation not permitted when stream is capturing", "operation failed due to a previous error during capture", "nccl"),
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
    `Capture cuda graph failed: CUDA error: operation not permitted when stream
    is capturing` -> `--disable-custom-all-reduce`.
    """

    code = "SGL104"
    name = "cuda-graph-capture-failed"
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
        args, why = pick_remedy(c.text, _CAPTURE_REMEDIES, ({"--disable-cuda-graph": "true"}, "Get the server up without CUDA graphs while the capture error is reported upstream."))
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


# ------------------------------------------------------------------ SGL105


class CudaGraphBsOversized(Rule):
    """CUDA graphs are captured for batch sizes far above what the run ever decoded.

    ## What it finds
    A run that served at least `min_decode_lines` decode batches whose
    99th-percentile `#running-req` is a small fraction (`ratio`) of
    `--cuda-graph-max-bs` (auto-chosen up to 512 on large cards with TP >= 4),
    when lowering it frees at least `min_free_gb`.

    ## Why it matters
    Every captured size costs graph memory, taken from the memory that would
    otherwise hold KV cache (with the automatic fraction SGLang also reserves
    2 MB per size).  Graphs for batches that never occur buy nothing.  In the
    story, 512 -> 128 freed memory for KV and raised single-stream decode from
    82 to 89.5 tok/s.

    ## Evidence
    The server-args line (`cuda_graph_max_bs`), the capture-end line (graph
    memory `G`) and the decode window with the p99 of `#running-req`.

    ## Suggested fix
    `--cuda-graph-max-bs N` with `N` = the smallest captured size >= p99
    `#running-req` (at least `min_bs`).  Memory freed ~ `G x (1 - N/old)`
    (measured graph memory, linear in the largest size) or `2 MB x (old - N)`
    (SGLang's reservation) when `G` is not in the log; the KV tokens it buys =
    freed / bytes per token.  To hand the memory to the KV pool, set
    `--mem-fraction-static` = `mfs + (F + freed - target_free_gb) / T` rounded
    down (`F` = available_gpu_mem; without `F`, an explicit fraction grows by
    `freed / T`).  The automatic fraction grows by only SGLang's 2 MB per size.

    ## Fix safety
    The p99 is of *this* log's traffic: if concurrency grows, batches above
    `N` run without graphs (see `decode-batch-exceeds-cuda-graph`); cap them
    with `--max-running-requests N` when latency matters more than peak
    throughput.

    ## Example
    `cuda_graph_max_bs=512`, graphs 3.1 GB, decode p99 running 96 ->
    `--cuda-graph-max-bs 96` frees ~2.5 GB (~36,000 KV tokens).
    """

    code = "SGL105"
    name = "cuda-graph-bs-oversized"
    severity = "warning"
    options = {
        "ratio": Option(4.0, "fire when max bs >= ratio x p99 #running-req"),
        "min_decode_lines": Option(20, "decode lines needed to trust the p99"),
        "min_free_gb": Option(1.0, "do not report when less than this would be freed"),
        "min_bs": Option(8, "never suggest a maximum below this (a few concurrent requests stay in graphs)"),
        "target_free_gb": Option(6.0, "free memory to keep when the freed memory goes to the KV pool"),
    }

    def _check(self, run, o) -> Iterator:
        if facts.graphs_disabled(run) or facts.crash(run) is not None:
            return
        M = facts.max_graph_bs(run)
        d = facts.decode_rows(run)
        if not M or d.height < o["min_decode_lines"] or "running_req" not in d.columns:
            return
        running = d.get_column("running_req").drop_nulls()
        running = running.filter(running > 0)
        if running.len() < o["min_decode_lines"]:
            return
        p99 = float(running.quantile(0.99, "higher"))
        peak = int(running.max())
        if M < o["ratio"] * max(p99, 1.0):
            return
        sizes = facts.captured_bs(run)
        n = facts.round_up_capture(max(p99, o["min_bs"]), sizes)
        if n >= M:
            return
        m = run.memory
        if m.cuda_graph_gb:
            freed = m.cuda_graph_gb * (1 - n / M)
            how = f"{m.cuda_graph_gb:.2f} GB of target graphs x (1 - {n}/{M})"
        else:
            freed = 2 * (M - n) / 1024
            how = f"2 MB x ({M} - {n}), SGLang's reservation per size"
        if freed < o["min_free_gb"]:
            return
        tokens = f", ~{int(freed * GiB / m.bytes_per_kv_token):,} more KV tokens" if m.bytes_per_kv_token else ""
        args = {"--cuda-graph-max-bs": str(n)}
        more = ""
        mfs, T, F = m.mem_fraction_static, m.total_gb, m.available_gpu_mem_gb
        if mfs is not None and T and F is not None:
            new = floor_to(mfs + (F + freed - o["target_free_gb"]) / T)
            how_mfs = f"{mfs:.2f} + ({F:.2f} free + {freed:.2f} freed - {o['target_free_gb']:.0f}) GB / T {T:.1f} GB"
            args["--mem-fraction-static"] = f"{new:.2f}"
            if new > mfs + 0.005:
                more = f"; then --mem-fraction-static {new:.2f} = {how_mfs} gives it to the KV pool"
            else:
                more = f"; set --mem-fraction-static {new:.2f} = {how_mfs} to keep {o['target_free_gb']:.0f} GB free"
        elif mfs is not None and T and m.mem_fraction_static_origin == "explicit":
            new = floor_to(mfs + freed / T)
            if new >= mfs + 0.01:
                args["--mem-fraction-static"] = f"{new:.2f}"
                more = f"; then --mem-fraction-static {new:.2f} = {mfs:.2f} + {freed:.2f} GB / T {T:.1f} GB gives it to the KV pool"
        elif m.mem_fraction_static_origin == "auto":
            more = f"; the automatic --mem-fraction-static grows by only 2 MB per size ({2 * (M - n) / 1024:.2f} GB): set it explicitly to give the rest to the KV pool"
        floor_note = f", at least {o['min_bs']}" if p99 < o["min_bs"] else ""
        ev = []
        sa = run.first("server_args")
        if sa is not None:
            ev.append(event_evidence(sa, note=f"cuda_graph_max_bs={M}"))
        ce = next((e for e in run.events_of("cuda_graph_capture_end") if e.get("role", "target") == "target"), None)
        if ce is not None:
            ev.append(event_evidence(ce))
        peak_row = d.filter(d.get_column("running_req") == peak).head(1).to_dicts()
        if peak_row:
            ev.append(row_evidence(peak_row[0], note=f"peak #running-req {peak}"))
        ev.append(window_evidence(run, f"p99 #running-req = {p99:g} over {running.len()} decode lines ({facts.line_span(d)})"))
        msg = (
            f"CUDA graphs are captured up to batch size {M} but decode batches peaked at {peak} running request{'s' if peak != 1 else ''} (p99 {p99:g}): ~{freed:.2f} GB of graph memory is never used."
        )
        fix = Fix(
            summary=f"Lower --cuda-graph-max-bs to {n} (smallest captured size >= p99 {p99:g}{floor_note}); frees ~{freed:.2f} GB ({how}){tokens}{more}.",
            args=args,
            safety=self.safety({"N": n}),
        )
        yield self.finding(run, msg, ev, fix, new_max_bs=n, freed_gb=round(freed, 3), p99_running=p99, peak_running=peak)


# ------------------------------------------------------------------ SGL106 / SGL107


def _summary_evidence(run) -> list[Evidence]:
    e = run.first("memory_summary")
    return [event_evidence(e)] if e is not None else []


class KvHeadroomWasted(Rule):
    """Much more GPU memory stays free after startup than activations need: KV cache left on the table.

    ## What it finds
    A ready server whose `available_gpu_mem` (the `max_total_num_tokens=...`
    line) is at least `high_gb`.

    ## Why it matters
    SGLang's tuning guide: 5-8 GB free is right; 10-20 GB is too much and
    `--mem-fraction-static` should go up.  Memory that stays free is KV cache
    the scheduler cannot use: fewer concurrent requests, more queueing and
    retraction.

    ## Evidence
    The `max_total_num_tokens=..., available_gpu_mem=...` line.

    ## Suggested fix
    `mfs_new = mfs + (F - target_gb) / T` rounded down to 0.01, `F` =
    available_gpu_mem, `T` = free memory at weight load; extra KV tokens =
    `(F - target_gb)` GB / bytes per token.

    ## Fix safety
    Workloads with long prompts, big prefill chunks, logprobs or multimodal
    inputs need more activation memory: raise in steps and watch for OOMs.

    ## Example
    `available_gpu_mem=16.4 GB` on `T` = 78.5 GB with 0.80:
    `0.80 + (16.4 - 6) / 78.5 = 0.932`, rounded down -> `--mem-fraction-static 0.93`.
    """

    code = "SGL106"
    name = "kv-headroom-wasted"
    severity = "info"
    options = {"high_gb": Option(10.0, "free memory after startup that counts as wasted"), "target_gb": Option(6.0, "free memory to aim for (middle of 5-8 GB)")}

    def _check(self, run, o) -> Iterator:
        m = run.memory
        F = m.available_gpu_mem_gb
        if F is None or F < o["high_gb"] or facts.crash(run) is not None:
            return
        spare = F - o["target_gb"]
        tokens = f" (~{int(spare * GiB / m.bytes_per_kv_token):,} more KV tokens)" if m.bytes_per_kv_token else ""
        msg = f"{F:.2f} GB of GPU memory stays free after startup; {o['target_gb']:.0f} GB is enough for activations, so ~{spare:.1f} GB could hold KV cache{tokens}."
        if m.mem_fraction_static is not None and m.total_gb:
            new = min(0.95, floor_to(m.mem_fraction_static + spare / m.total_gb))
            if new <= m.mem_fraction_static:
                return
            fix = Fix(
                summary=f"Raise --mem-fraction-static from {m.mem_fraction_static:.2f} to {new:.2f} = {m.mem_fraction_static:.2f} + ({F:.2f} - {o['target_gb']:.0f}) GB / T {m.total_gb:.1f} GB.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety=self.fix_safety,
            )
        else:
            by = f"{spare / m.total_gb:.2f} = {spare:.1f} GB / T {m.total_gb:.1f} GB" if m.total_gb else f"{spare:.1f} GB over the memory free at weight load (no `Load weight begin` line in this log)"
            fix = Fix(
                summary=f"Raise --mem-fraction-static by about {by}" + ("; the log does not show the current fraction." if m.mem_fraction_static is None else "."), args={}, safety=self.fix_safety
            )
        yield self.finding(run, msg, _budget_evidence(run)[:1] + _summary_evidence(run), fix, spare_gb=round(spare, 3))


class KvHeadroomTooSmall(Rule):
    """Too little GPU memory stays free after startup: activations will run out under load.

    ## What it finds
    A ready server whose `available_gpu_mem` is below
    `min(low_gb, low_share x T)` (the share keeps small cards from being
    judged by the 80 GB-card band).

    ## Why it matters
    After the static pool and the CUDA graphs, this memory holds activations,
    sampling buffers and allocator slack.  SGLang's guide: below 5 GB you risk
    out-of-memory errors later (long prefills, large batches, logprobs).

    ## Evidence
    The `max_total_num_tokens=..., available_gpu_mem=...` line.

    ## Suggested fix
    `mfs_new = mfs - (target_gb - F) / T` rounded down to 0.01 (`target_gb`
    capped at 1.2 x `low_share` x T on small cards); or keep the
    fraction and shrink activations (`--chunked-prefill-size 4096`) or graphs
    (`--cuda-graph-max-bs`).

    ## Fix safety
    A lower fraction shrinks the KV pool: fewer concurrent tokens.

    ## Example
    `available_gpu_mem=2.10 GB` on `T` = 78.5 GB with 0.90 ->
    `0.90 - (6 - 2.1) / 78.5` -> `--mem-fraction-static 0.85`.
    """

    code = "SGL107"
    name = "kv-headroom-too-small"
    severity = "warning"
    options = {
        "low_gb": Option(5.0, "free memory below which activations may run out"),
        "low_share": Option(0.10, "the same as a share of T (whichever is smaller applies)"),
        "target_gb": Option(6.0, "free memory to aim for (scaled down with low_share on small cards)"),
    }

    def _check(self, run, o) -> Iterator:
        m = run.memory
        F = m.available_gpu_mem_gb
        if F is None:
            return
        T = m.total_gb
        low = min(o["low_gb"], o["low_share"] * T) if T else o["low_gb"]
        if F >= low:
            return
        target = min(o["target_gb"], 1.2 * o["low_share"] * T) if T else o["target_gb"]
        msg = f"Only {F:.2f} GB of GPU memory stays free after startup (less than {low:.1f} GB): long prefills or large batches may run out of memory."
        if m.mem_fraction_static is not None and T:
            new = floor_to(m.mem_fraction_static - (target - F) / T)
            fix = Fix(
                summary=f"Lower --mem-fraction-static from {m.mem_fraction_static:.2f} to {new:.2f} = {m.mem_fraction_static:.2f} - ({target:.1f} - {F:.2f}) GB / T {T:.1f} GB; or keep it and use --chunked-prefill-size 4096.",
                args={"--mem-fraction-static": f"{new:.2f}"},
                safety=self.fix_safety
                + f" Here: {(m.mem_fraction_static - new) * T:.1f} GB less KV"
                + (f" (~{int((m.mem_fraction_static - new) * T * GiB / m.bytes_per_kv_token):,} tokens)." if m.bytes_per_kv_token else "."),
            )
        else:
            by = (
                f"{(target - F) / T:.2f} = ({target:.1f} - {F:.2f}) GB / T {T:.1f} GB"
                if T
                else f"({target:.1f} - {F:.2f}) GB over the memory free at weight load (no `Load weight begin` line in this log)"
            )
            fix = Fix(summary=f"Lower --mem-fraction-static by about {by}, or use --chunked-prefill-size 4096.", args={}, safety=self.fix_safety)
        yield self.finding(run, msg, _budget_evidence(run)[:1] + _summary_evidence(run), fix)


# ------------------------------------------------------------------ SGL108


class RuntimeOom(CrashRule):
    """The server ran out of memory while serving (prefill or decode).

    ## What it finds
    A crash after the server was ready whose root cause is a CUDA OOM or
    SGLang's `Prefill/Decode out of memory. Try to lower your batch size.`

    ## Why it matters
    The static pool fit at startup, but a batch needed more activation (or KV)
    memory than was left.  Which knob helps depends on the phase: prefill
    activations scale with the tokens per forward, decode with the number of
    running requests.

    ## Evidence
    The OOM lines and the last batch line before them (the batch that ran out).

    ## Suggested fix
    Prefill: halve `--chunked-prefill-size` (from its value, or 8192) until
    `1.5 MB x chunked_prefill_size <= F - 2 GB` (SGLang's own activation
    coefficient; `F` = available_gpu_mem), at least 1024.  Decode:
    `--max-running-requests = 0.8 x #running-req at the crash`, rounded down
    to a captured graph size.

    ## Fix safety
    Smaller prefill chunks lengthen time-to-first-token for long prompts; a
    lower running cap limits concurrency (requests queue).

    ## Example
    `Prefill batch. #new-token: 16384` then `torch.OutOfMemoryError` with
    `chunked_prefill_size=16384` and 5.2 GB free -> `--chunked-prefill-size 2048`.
    """

    code = "SGL108"
    name = "runtime-oom"
    severity = "error"
    precedence = 85

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.oom_crash(c) and c.phase == "serving" else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        tail, _counts = facts.batches_before(run, rc.file, rc.line, 1)
        last = tail[-1] if tail else None
        phase = rc.get("phase")
        if phase not in ("prefill", "decode"):
            fns = " ".join(facts.frame_functions(rc)).lower()
            if "prefill" in c.text or "extend" in fns or "prefill" in fns:
                phase = "prefill"
            elif "decode" in c.text or "decode" in fns:
                phase = "decode"
            elif last is not None:
                phase = "prefill" if last.get("kind") == "prefill_batch" else "decode"
            else:
                phase = "prefill"
        ev = exception_evidence(rc)
        if last is not None:
            ev.append(row_evidence(last, note="last batch before the OOM"))
        m = run.memory
        if phase == "prefill":
            cps = m.chunked_prefill_size if m.chunked_prefill_size and m.chunked_prefill_size > 0 else 8192
            F = m.available_gpu_mem_gb
            new = cps // 2
            if F is not None:
                while new > 1024 and 1.5 * new / 1024 > F - 2:
                    new //= 2
            new = max(1024, new)
            act = 1.5 * new / 1024  # (GB of prefill activations: SGLang's 1.5 MB per token)
            basis = f"half of {cps}" + (f", halved until 1.5 MB x {new} = {act:.1f} GB {'fits in' if act <= F - 2 else 'comes closest to'} available {F:.2f} GB - 2 GB" if F is not None else "")
            fix = Fix(summary=f"Prefill ran out of memory: --chunked-prefill-size {new} ({basis}).", args={"--chunked-prefill-size": str(new)}, safety=self.fix_safety)
        else:
            r = (last or {}).get("running_req")
            if r:
                sizes = facts.captured_bs(run)
                cap = int(0.8 * r)
                below = [s for s in sizes if s <= cap]
                new = max(below) if below else max(1, cap)
                fix = Fix(
                    summary=f"Decode ran out of memory at {r} running requests: --max-running-requests {new} (0.8 x {r}, rounded down to a captured size).",
                    args={"--max-running-requests": str(new)},
                    safety=self.fix_safety,
                )
            else:
                fix = Fix(summary="Decode ran out of memory: lower --max-running-requests (the running count at the crash is not in the log).", args={}, safety=self.fix_safety)
        nums = _oom_numbers(rc)
        msg = f"Out of GPU memory during {phase} while serving" + (f" ({nums})" if nums else "") + "."
        yield self.finding(run, msg, ev, fix, phase=phase)


# ------------------------------------------------------------------ SGL109


class TpMemoryImbalance(CrashRule):
    """GPUs of one tensor-parallel group have different amounts of free memory.

    ## What it finds
    (error) A crash with `The memory capacity is unbalanced. Some GPUs may be
    occupied by other processes.`  (warning) Per-rank free memory at weight
    load (`Load weight begin. avail mem`) differing by more than
    `max_imbalance` (1 - min/max).

    ## Why it matters
    SGLang sizes every rank's pools by the smallest one: memory on the other
    GPUs is wasted, and older versions refuse to start when the spread is over
    10%.  The usual cause is another process (a second server, a notebook, a
    display) holding memory on one GPU.

    ## Evidence
    The per-rank `Load weight begin` lines with the smallest and largest free
    memory, or the exception.

    ## Suggested fix
    Free the GPU (`nvidia-smi`: stop the stray process), or move the server to
    other GPUs with `CUDA_VISIBLE_DEVICES`.  `SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0`
    only silences the check (pools stay sized to the smallest GPU).  The fix
    reports the wasted memory per rank = max - min.

    ## Fix safety
    Nothing changes on the command line; killing a process on a shared machine
    may hurt someone else's job.

    ## Example
    TP0-TP6 `avail mem=78.50 GB`, TP7 `avail mem=62.10 GB`: 21% imbalance,
    16.4 GB wasted on each of the other ranks.
    """

    code = "SGL109"
    name = "tp-memory-imbalance"
    severity = "error"
    precedence = 20
    options = {"max_imbalance": Option(0.10, "1 - min/max of per-rank free memory at weight load")}

    def claim(self, run, c) -> int | None:
        return SIGNATURE if "memory_imbalance" in c.signatures else None

    def _check(self, run, o) -> Iterator:
        c = facts.crash(run)
        per = {}
        loads = [e for e in run.events_of("weight_load_begin") if e.get("avail_mem") is not None]
        untagged = bool(loads) and all(e.rank is None for e in loads) and len(loads) <= max(facts.tp_size(run), 1) and not facts.is_spec(run)
        for e in loads:
            # (a log without rank tags: each target weight load is one rank's, as long as there are no more than TP of them)
            per.setdefault(f"line {e.line}" if untagged else (e.rank.label if e.rank else "-"), e)
        assumed = " (the log has no rank tags: each `Load weight begin` line is taken as a different rank)" if untagged and len(per) > 1 else ""
        fix = Fix(
            summary="Free the GPU that has less memory (nvidia-smi: stop the other process) or exclude it with CUDA_VISIBLE_DEVICES; SGLANG_ENABLE_TP_MEMORY_INBALANCE_CHECK=0 only silences the check.",
            args={},
            safety=self.fix_safety,
        )
        if c is not None and self.owned_crash(run) is not None:
            ev = exception_evidence(c.event)
            if len(per) > 1:
                lo = min(per.values(), key=lambda e: e.get("avail_mem"))
                hi = max(per.values(), key=lambda e: e.get("avail_mem"))
                ev = [event_evidence(lo), event_evidence(hi)] + ev
            yield self.finding(run, "Startup refused: the GPUs of the tensor-parallel group have unbalanced free memory (another process is using one of them).", ev, fix)
            return
        if len(per) < 2:
            return
        lo = min(per.values(), key=lambda e: e.get("avail_mem"))
        hi = max(per.values(), key=lambda e: e.get("avail_mem"))
        a, b = lo.get("avail_mem"), hi.get("avail_mem")
        if not b or 1 - a / b <= o["max_imbalance"]:
            return
        imb = 1 - a / b
        label = lo.rank.label if lo.rank else "one rank"
        msg = f"Free memory at weight load differs across ranks by {imb:.0%} ({label}: {a:.2f} GB vs {b:.2f} GB): pools are sized to the smallest, {b - a:.2f} GB per GPU is wasted{assumed}."
        yield self.finding(run, msg, [event_evidence(lo), event_evidence(hi)], fix, severity="warning", imbalance=round(imb, 4), wasted_gb=round(b - a, 3))


# ------------------------------------------------------------------ SGL110 / SGL111


class WeightsExceedGpuMemory(CrashRule):
    """The model's weights do not fit: CUDA out of memory while loading them.

    ## What it finds
    A crash whose root cause is a CUDA OOM raised while the weights load
    (`weight_load` phase, or `load_model`/`load_weights` frames).

    ## Why it matters
    No fraction or batch setting helps: the per-GPU shard of the checkpoint
    (plus the CUDA context) is larger than the GPU.

    ## Evidence
    The `Load weight begin` line and the OOM line (capacity, free memory).

    ## Suggested fix
    Shard over more GPUs: `--tp 2 x current`; or a quantized checkpoint
    (AWQ/GPTQ/FP8), or `--cpu-offload-gb` for the part that does not fit.

    ## Fix safety
    Doubling TP needs twice the GPUs and adds all-reduce traffic; CPU offload is
    much slower per token.

    ## Example
    `Load weight begin. avail mem=31.42 GB` then `CUDA out of memory. Tried to
    allocate 384.00 MiB. GPU 1 has a total capacity of 31.86 GiB of which 124.00
    MiB is free` on TP2 -> `--tp 4`.
    """

    code = "SGL110"
    name = "weights-exceed-gpu-memory"
    severity = "error"
    precedence = 90

    def claim(self, run, c) -> int | None:
        loading = c.phase in ("weight_load", "distributed_init") or any(fn in ("load_model", "load_weights") for fn in facts.frame_functions(c.event))
        return SIGNATURE if facts.oom_crash(c) and loading else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        ev = []
        b = run.first("weight_load_begin")
        if b is not None:
            ev.append(event_evidence(b))
        ev += exception_evidence(rc)
        tp = facts.tp_size(run)
        nums = _oom_numbers(rc)
        msg = "Out of GPU memory while loading the weights" + (f" ({nums})" if nums else "") + f": the model does not fit on {tp} GPU{'s' if tp > 1 else ''}."
        fix = Fix(
            summary=f"Shard the weights over more GPUs (--tp {2 * tp}), use a quantized checkpoint, or offload part of it with --cpu-offload-gb.",
            args={"--tp": str(2 * tp)},
            safety=self.fix_safety,
        )
        yield self.finding(run, msg, ev, fix)


class StartupOom(CrashRule):
    """CUDA out of memory during startup after the KV pool was allocated (attention workspaces, warm-up): the static pool left too little.

    ## What it finds
    A startup crash with a CUDA OOM after the weights loaded and outside
    CUDA-graph capture and the draft model: attention-backend workspaces,
    sampler buffers, the warm-up request.

    ## Why it matters
    This OOM goes the *opposite* way from `Not enough memory`: the static pool
    (weights + KV) took so much that nothing is left for workspaces.  Lowering
    `--mem-fraction-static` is the fix.

    ## Evidence
    The `Memory pool end` line (free memory after the pools) and the OOM.

    ## Suggested fix
    `mfs_new = mfs - (headroom_gb - avail_after_pool) / T` rounded down to
    0.01, `T` = free memory at weight load (or the capacity in the OOM
    message); when the current fraction is not in the log the fix states the
    decrease.

    ## Fix safety
    The KV pool shrinks by the same amount: fewer concurrent tokens.  If the
    weights alone nearly fill the GPU, no fraction is enough: use more GPUs.

    ## Example
    `Memory pool end. avail mem=0.49 GB` then `torch.OutOfMemoryError` in
    `init_attention_backend` on a 23.56 GB card with 0.97 -> lower the fraction
    by 0.15 -> `--mem-fraction-static 0.82`.
    """

    code = "SGL111"
    name = "startup-oom"
    severity = "error"
    precedence = 95
    options = {"headroom_gb": Option(4.0, "free memory to leave after the pools for workspaces and activations")}

    def claim(self, run, c) -> int | None:
        return SIGNATURE if facts.oom_crash(c) else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        pool = facts.last_before(run, "memory_pool_end", rc)
        ev = ([event_evidence(pool)] if pool is not None else []) + exception_evidence(rc)
        T, t_src = _total_gb(run, rc)
        avail = pool.get("avail_mem") if pool is not None else rc.get("free_gb")
        mfs = run.memory.mem_fraction_static
        nums = _oom_numbers(rc)
        where = " in " + next((f for f in reversed(facts.frame_functions(rc)) if f.startswith("init_")), c.phase or "startup") if facts.frame_functions(rc) else f" during {c.phase or 'startup'}"
        msg = f"Out of GPU memory at startup{where}" + (f" ({nums})" if nums else "") + (f"; only {avail:.2f} GB was free after the memory pools." if avail is not None else ".")
        if T and avail is not None:
            delta = ceil_to(max(0.01, (o["headroom_gb"] - avail) / T))
            if mfs is not None:
                new = floor_to(mfs - delta)
                fix = Fix(
                    summary=f"Lower --mem-fraction-static from {mfs:.2f} to {new:.2f} = {mfs:.2f} - ({o['headroom_gb']:.0f} - {avail:.2f}) GB / T {T:.2f} GB ({t_src}).",
                    args={"--mem-fraction-static": f"{new:.2f}"},
                    safety=self.fix_safety,
                )
            else:
                fix = Fix(
                    summary=f"Lower --mem-fraction-static by {delta:.2f} = ({o['headroom_gb']:.0f} - {avail:.2f}) GB / T {T:.2f} GB ({t_src}); the current value is not in this log.",
                    args={},
                    safety=self.fix_safety,
                )
        else:
            fix = Fix(summary="Lower --mem-fraction-static so that 4-6 GB stay free after the memory pools.", args={}, safety=self.fix_safety)
        yield self.finding(run, msg, ev, fix)
