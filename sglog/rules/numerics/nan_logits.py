"""SGL406 nan-logits: NaN/inf in the logits or the sampling probabilities."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules.base import event_evidence, exception_evidence, window_evidence
from sglog.rules.ownership import SIGNATURE, CrashRule
from sglog.rules.said import ranks_of, said

# settings that make NaN likely, the strongest suspect first: (what, test on the run, args patch, advice)
_QUANT_KV = ("int8", "fp8", "fp8_e4m3", "fp8_e5m2", "fp4", "fp4_e2m1", "int4")
_HALF = ("float16", "half", "fp16", "torch.float16")
WHERE_WORDS = {"logits": "the logits", "probability": "the sampling probabilities", "sampling": "sampling (the kernel failed; NaN or inf probabilities are the usual cause)"}


def _weights_dtype(run) -> str | None:
    for e in run.events_of("weight_load_end"):
        if e.get("dtype"):
            return str(e.get("dtype"))
    return None


def suspects(run) -> list[tuple[str, dict[str, str | None], str]]:
    """What in the run's settings points to a cause of NaN, the strongest first: (cause, args, advice)."""
    a = run.args or {}
    out: list[tuple[str, dict[str, str | None], str]] = []
    kv = str(a.get("kv_cache_dtype") or "auto").lower()
    if kv in _QUANT_KV or any(str(e.get("dtype") or "").lower() in _QUANT_KV for e in run.events_of("kv_cache_dtype")):
        kv = kv if kv != "auto" else next(str(e.get("dtype")) for e in run.events_of("kv_cache_dtype") if str(e.get("dtype") or "").lower() in _QUANT_KV)
        out.append(
            (f"the {kv} KV cache (--kv-cache-dtype {kv}): its range or missing scales overflow to NaN in attention", {"--kv-cache-dtype": "auto"}, "run with --kv-cache-dtype auto (the model's dtype)")
        )
    dtype = str(a.get("dtype") or "auto").lower()
    wdt = (_weights_dtype(run) or "").lower()
    if dtype in _HALF or (dtype == "auto" and wdt in _HALF):
        src = f"--dtype {dtype}" if dtype != "auto" else "the weights loaded as torch.float16"
        out.append(
            (
                f"fp16 activations ({src}): values above 65,504 overflow to inf and then NaN",
                {"--dtype": "bfloat16"},
                "run with --dtype bfloat16 (same memory, the range of fp32) where the GPU supports it",
            )
        )
    quant = a.get("quantization")
    if quant:
        out.append((f"the {quant} quantised weights: a bad checkpoint or its kernel on this GPU", {}, f"try another checkpoint or quantization kernel for {quant}"))
    backend = a.get("attention_backend")
    if backend:
        out.append((f"the {backend} attention kernel", {}, f"try another --attention-backend than {backend}, and --disable-cuda-graph to tell graph replay from the kernel"))
    return out


class NanLogits(CrashRule):
    """NaN (or inf) in the logits or the sampling probabilities: the model produced garbage.

    ## What it finds
    SGLang's sampler check `Detected errors during sampling! NaN in the
    logits.` (and `NaN in the probability.` in 0.3.x, the speculative
    verify's same words, `NaN detected in logits; values were sanitized
    before sampling` from 0.5.14), logged or raised, and torch's
    `probability tensor contains either inf, nan or element < 0` raised by
    `torch.multinomial` in the sampler.  A raised one that ended the run is
    its crash.  It is a warning when every message says the values were
    sanitized.

    ## Why it matters
    The forward pass produced non-finite numbers: the server keeps running
    but the affected requests get nonsense (or the scheduler dies).  The
    usual causes are numeric range: fp16 activations overflowing, an
    int8/fp8 KV cache without good scales, a bad quantised checkpoint, or a
    kernel bug for this GPU, most often on ROCm and consumer cards.

    ## Evidence
    The first NaN lines (or the exception), and a summary: how many, on
    which ranks, from when; the settings that point to a cause.

    ## Suggested fix
    From the run's settings, the strongest suspect first: a quantised KV
    cache (`--kv-cache-dtype` int8/fp8) -> `--kv-cache-dtype auto`; fp16
    (`--dtype float16`, or weights loaded as torch.float16) -> `--dtype
    bfloat16`; quantised weights -> another checkpoint or kernel; an explicit
    `--attention-backend` -> another backend.  The args patch is the first
    suspect's.

    ## Fix safety
    An unquantised KV cache takes twice (int8/fp8) the memory per token: the
    pool holds fewer tokens.  bfloat16 needs a GPU that supports it (Ampere,
    RDNA3/CDNA and later) and differs slightly from fp16 in its outputs.

    ## Example
    Case: corpus 230 (sgl-project/sglang #1953): ROCm, int8 KV cache, weights loaded as fp16, NaN in the logits on both ranks

    `Detected errors during sampling! NaN in the logits.` on TP0 and TP1 of a
    ROCm server with `kv_cache_dtype='int8'` and a GPTQ-Int8 model loaded as
    `dtype=torch.float16`: `6 messages on TP1, TP0 from 04:44:04`, and the
    settings point to `the int8 KV cache`, so sglog suggests
    `--kv-cache-dtype auto` first, then `--dtype bfloat16` if NaN persists.
    """

    code = "SGL406"
    name = "nan-logits"
    triggers = ("cpp_exception", "fatal_error", "kv_cache_dtype", "logging_error", "nan_logits", "oom", "scheduler_exception", "traceback", "weight_load_end", "args", "crash")
    severity = "error"
    precedence = 20

    def claim(self, run, c) -> int | None:
        return SIGNATURE if c.event.get("named_kind") == "nan_logits" else None

    def _check(self, run, o) -> Iterator:
        items = said(run, "nan_logits")
        if not items:
            return
        ranks = ranks_of(items)
        first = items[0]
        wheres = sorted({str(s.get("where") or "logits") for s in items})
        sanitized = all(s.get("sanitized") for s in items)
        crashed = any(s.raised for s in items) and self.owned_crash(run) is not None
        sus = suspects(run)
        n = len(items)
        where = f" on {', '.join(ranks)}" if ranks else ""
        when = f" from {first.event.ts:%H:%M:%S}" if first.event.ts is not None else ""
        what = " and ".join(WHERE_WORDS.get(w, w) for w in wheres)
        tail = "; the scheduler crashed on it" if crashed else ("; the values were replaced before sampling" if sanitized else "")
        msg = f"NaN in {what}: {n} message{'s' if n != 1 else ''}{where}{when}{tail}."
        if sus:
            msg = msg[:-1] + f"; the settings point to {sus[0][0].split(':')[0]}."
        ev = exception_evidence(first.event) if first.raised else [event_evidence(first.event)]
        ev += [event_evidence(s.event) for s in items[1:2]]
        note = [f"{n} NaN message{'s' if n != 1 else ''}"]
        if ranks:
            note.append(f"ranks {', '.join(ranks)}")
        if sus:
            note.append("suspects: " + "; ".join(x[0].split(":")[0] for x in sus))
        ev.append(window_evidence(run, "; ".join(note)))
        if sus:
            cause, args, advice = sus[0]
            others = "; ".join(x[2] for x in sus[1:])
            summary = f"Most likely {cause}: {advice}." + (f" If NaN persists: {others}." if others else "")
            safety = {
                "--kv-cache-dtype": "An unquantised KV cache takes twice the memory per token of int8/fp8: the pool holds about half the tokens.",
                "--dtype": "bfloat16 needs a GPU that supports it; outputs differ slightly from fp16.",
            }.get(next(iter(args), ""), "Another checkpoint, kernel or backend can be slower; check throughput in the next run.")
        else:
            args = {}
            summary = "None of the log's settings points to a cause (no quantised KV cache, fp16 or quantised weights in the log): rerun with --kv-cache-dtype auto and --dtype bfloat16 to rule out numeric range, then try another --attention-backend and --disable-cuda-graph to find a kernel."
            safety = self.fix_safety
        yield self.finding(
            run, msg, ev, Fix(summary=summary, args=args, safety=safety), severity="warning" if sanitized and not crashed else None, messages=n, ranks=ranks, where=wheres, suspects=[x[0] for x in sus]
        )
