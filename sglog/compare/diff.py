"""Two runs side by side: what changed between them, and whether it helped.

``compare(a, b)`` is a pure function of two runs (and, optionally, their
findings).  It returns a frozen ``DiffResult``: the verdict first, then the
launch-argument changes, startup phases, memory budget, captured CUDA-graph
sizes, steady-state serving numbers, the speculative-vs-baseline arithmetic and
the findings added / gone / unchanged.  Renderers live in ``sglog/render/diff.py``.

Whether a decode-throughput difference is real is decided on the steady-state
``gen throughput`` samples of the two runs (warm-up excluded, see
``sglog.timeline.steady_mask``) with two tests written here on the stdlib:

* a two-sided Mann-Whitney U test (normal approximation, tie-corrected), and
* a seeded percentile bootstrap 95% interval of the difference of medians.

A difference is *significant* when p < 0.01, the interval excludes zero and the
medians differ by at least 1% (smaller differences are real but not worth a
verdict).

Speculative run vs a baseline of the same model uses the cycle-time model of
``failure-modes.md`` §C, per request (throughputs divided by running requests)::

    t_base  = 1 / baseline_tok_s        t_cycle = L / spec_tok_s
    L*      = t_cycle / t_base = L * baseline_tok_s / spec_tok_s

Speculation pays when the achieved accept length L exceeds the break-even L*.
"""

from __future__ import annotations

import math
import os
import re
import statistics
from dataclasses import dataclass, field
from functools import lru_cache
from typing import TYPE_CHECKING, Any

from sglog import schema
from sglog.errors import InputError, UsageError
from sglog.read import args as sargs

if TYPE_CHECKING:
    from sglog.findings import Finding
    from sglog.runs.build import Run

SCHEMA_VERSION = schema.SCHEMA_VERSION

# significance
ALPHA = 0.01
CONFIDENCE = 0.95
RESAMPLES = 2000
SEED = 0
MIN_EFFECT_PCT = 1.0  # smaller median differences are not worth a verdict
MIN_SAMPLES = 5
MAX_SAMPLES = 2000  # longer sample lists are thinned evenly (keeps the bootstrap under a second)

# comparability
CONCURRENCY_RATIO = 2.0  # median running requests differing by more than this ...
CONCURRENCY_MIN = 4  # ... and reaching at least this many -> different workload shape

KV_CHANGE_GB = 0.05  # smaller KV pool changes are not mentioned in the verdict
GRAPH_CHANGE_GB = 0.5  # nor smaller CUDA-graph memory changes

# argument fields whose differences say nothing about the run
NOISE_FIELDS = frozenset({"random_seed"})
# identity fields (reported as identity changes; not "config" in the verdict)
IDENTITY_FIELDS = frozenset({"model_path", "tokenizer_path", "served_model_name"})

MEMORY_KEYS = (
    "total_gb",
    "target_weights_gb",
    "draft_weights_gb",
    "avail_after_weights_gb",
    "mem_fraction_static",
    "static_pool_gb",
    "kv_gb",
    "kv_tokens",
    "draft_kv_gb",
    "draft_kv_tokens",
    "bytes_per_kv_token",
    "cuda_graph_gb",
    "draft_cuda_graph_gb",
    "available_gpu_mem_gb",
    "max_total_num_tokens",
    "max_running_requests",
    "context_len",
)

_ORIGIN_RANK = {"explicit": 0, "auto": 1, "default": 2, None: 3}


# ------------------------------------------------------------------ results


@dataclass(frozen=True)
class RunRef:
    """Who is A or B: the spec the user typed and what the run is."""

    label: str  # "A" | "B"
    spec: str  # as typed: FILE or FILE#N
    name: str  # Run.name, e.g. "baseline.log#1"
    model: str | None
    model_class: str | None
    version: str | None
    parallelism: dict[str, int]
    speculative: dict[str, Any] | None
    ending: str | None  # Ending.describe()
    status: str | None  # Ending.status

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec": self.spec,
            "name": self.name,
            "model": self.model,
            "model_class": self.model_class,
            "version": self.version,
            "parallelism": dict(self.parallelism),
            "speculative": _plain(self.speculative),
            "status": self.status,
            "ending": self.ending,
        }


@dataclass(frozen=True)
class Verdict:
    """One sentence a user would say, and the numbers behind it."""

    text: str
    kind: str  # faster | slower | no-change | not-comparable | no-data
    metric: str = "decode_tok_s_median"
    a: float | None = None
    b: float | None = None
    change_pct: float | None = None  # (b - a) / a * 100
    significant: bool = False

    @property
    def summary(self) -> str:
        return self.text

    def __str__(self) -> str:
        return self.text

    def to_dict(self) -> dict[str, Any]:
        return {
            "text": self.text,
            "kind": self.kind,
            "metric": self.metric,
            "a": _r(self.a),
            "b": _r(self.b),
            "change_pct": _r(self.change_pct),
            "significant": self.significant,
        }


@dataclass(frozen=True)
class ConfigChange:
    """A launch argument whose value differs.  Origins: explicit | auto | default | None (absent)."""

    flag: str  # ServerArgs field name, e.g. cuda_graph_max_bs
    a: Any
    b: Any
    origin_a: str | None
    origin_b: str | None

    @property
    def origin(self) -> str:
        """explicit if either run set it, else auto if either run had it chosen at startup, else default."""
        o = {self.origin_a, self.origin_b}
        return "explicit" if "explicit" in o else "auto" if "auto" in o else "default"

    @property
    def cli_flag(self) -> str:
        return sargs.flag_of(self.flag)

    def to_dict(self) -> dict[str, Any]:
        return {
            "flag": self.flag,
            "cli_flag": self.cli_flag,
            "a": _plain(self.a),
            "b": _plain(self.b),
            "origin": self.origin,
            "origin_a": self.origin_a,
            "origin_b": self.origin_b,
        }


@dataclass(frozen=True)
class Significance:
    """Is the decode-throughput difference real?  (see the module docstring)"""

    method: str
    n_a: int
    n_b: int
    median_diff: float | None = None  # median(B) - median(A), tok/s
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    prob_b_greater: float | None = None  # U / (n_a n_b): chance a B sample beats an A sample
    statistically_significant: bool = False
    significant: bool = False  # statistically and by at least MIN_EFFECT_PCT
    note: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "alpha": ALPHA,
            "confidence": CONFIDENCE,
            "resamples": RESAMPLES,
            "seed": SEED,
            "min_effect_pct": MIN_EFFECT_PCT,
            "n_a": self.n_a,
            "n_b": self.n_b,
            "median_diff": _r(self.median_diff, 3),
            "ci_low": _r(self.ci_low, 3),
            "ci_high": _r(self.ci_high, 3),
            "p_value": _p(self.p_value),
            "prob_b_greater": _r(self.prob_b_greater, 3),
            "statistically_significant": self.statistically_significant,
            "significant": self.significant,
            "note": self.note,
        }


@dataclass(frozen=True)
class Speculation:
    """A speculative run against a baseline of the same model (cycle-time model, per request)."""

    spec_side: str  # "a" | "b"
    algorithm: str | None
    num_steps: int | None
    num_draft_tokens: int | None
    spec_tok_s: float  # per request, steady-state median
    baseline_tok_s: float  # per request, steady-state median
    spec_running: float | None
    baseline_running: float | None
    accept_len: float | None  # achieved L (steady-state median)
    accept_rate: float | None
    speedup_pct: float  # spec vs baseline, per request
    t_base_ms: float
    t_cycle_ms: float | None
    break_even: float | None  # L*
    margin: float | None  # L - L*
    significant: bool
    finding: str | None  # "speculation-slower-than-baseline" when it is

    def to_dict(self) -> dict[str, Any]:
        return {
            "spec_side": self.spec_side,
            "algorithm": self.algorithm,
            "num_steps": self.num_steps,
            "num_draft_tokens": self.num_draft_tokens,
            "spec_tok_s_per_request": _r(self.spec_tok_s),
            "baseline_tok_s_per_request": _r(self.baseline_tok_s),
            "spec_running": _r(self.spec_running),
            "baseline_running": _r(self.baseline_running),
            "accept_len": _r(self.accept_len),
            "accept_rate": _r(self.accept_rate),
            "speedup_pct": _r(self.speedup_pct),
            "t_base_ms": _r(self.t_base_ms),
            "t_cycle_ms": _r(self.t_cycle_ms),
            "break_even_accept_len": _r(self.break_even),
            "margin": _r(self.margin),
            "significant": self.significant,
            "finding": self.finding,
        }


@dataclass(frozen=True)
class DiffResult:
    a: RunRef
    b: RunRef
    comparable: bool
    reasons: tuple[str, ...]  # why not comparable
    caveats: tuple[str, ...]  # comparable, but worth knowing
    verdict: Verdict
    identity_changes: tuple[dict[str, Any], ...]
    config_changes: tuple[ConfigChange, ...]
    args_known: bool
    startup: dict[str, Any]
    memory: dict[str, Any]
    cuda_graph: dict[str, Any]
    serving: dict[str, Any]
    significance: Significance | None
    speculation: Speculation | None
    spec_steps: dict[str, Any] | None
    findings: dict[str, Any] = field(default_factory=dict)

    @property
    def regression(self) -> str | None:
        """Why B is worse than A, or None: B crashed and A did not, or B decodes significantly slower."""
        if self.b.status == "crashed" and self.a.status != "crashed":
            return f"B crashed ({self.b.ending}) and A did not"
        if self.verdict.kind == "slower" and self.verdict.significant:
            return self.verdict.text
        return None

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": SCHEMA_VERSION,
            "a": self.a.to_dict(),
            "b": self.b.to_dict(),
            "comparable": self.comparable,
            "not_comparable_reasons": list(self.reasons),
            "caveats": list(self.caveats),
            "verdict": self.verdict.to_dict(),
            "identity_changes": [dict(c) for c in self.identity_changes],
            "args_known": self.args_known,
            "config_changes": [c.to_dict() for c in self.config_changes],
            "startup": self.startup,
            "memory": self.memory,
            "cuda_graph": self.cuda_graph,
            "serving": self.serving | {"significance": self.significance.to_dict() if self.significance else None},
            "speculation": self.speculation.to_dict() if self.speculation else None,
            "spec_steps": self.spec_steps,
            "findings": self.findings,
        }


# ------------------------------------------------------------------ run specs


def split_run_spec(spec: str) -> tuple[str, int | None]:
    """``FILE`` or ``FILE#N`` -> (file, N or None).

    >>> split_run_spec("crash.log#2")
    ('crash.log', 2)
    >>> split_run_spec("server.log")
    ('server.log', None)
    """
    if "#" in spec and not os.path.exists(spec):
        path, _, n = spec.rpartition("#")
        if not n.isdigit() or int(n) < 1:
            raise UsageError(f"{spec}: bad run number {n!r} (use FILE#N with N = 1, 2, ...)")
        return path, int(n)
    return spec, None


@lru_cache(maxsize=8)
def _load_cached(path: str, abspath: str, mtime_ns: int, size: int) -> tuple[Run, ...]:
    from sglog.runs.build import load_runs

    return tuple(load_runs([path]))


def _load(path: str) -> tuple[Run, ...]:
    try:
        st = os.stat(path)
    except OSError:
        from sglog.read.inputs import open_source

        open_source(path)  # raises the one-line InputError
        raise InputError(f"{path}: cannot read") from None
    return _load_cached(path, os.path.abspath(path), st.st_mtime_ns, st.st_size)


def resolve_run_spec(spec: str) -> Run:
    """The run named by ``FILE`` (a file with one run) or ``FILE#N`` (its Nth run, 1-based)."""
    path, n = split_run_spec(spec)
    runs = _load(path)
    if not runs:
        raise InputError(f"{path}: no SGLang server run found")
    if n is None:
        if len(runs) == 1:
            return runs[0]
        raise UsageError(f"{path} holds {len(runs)} runs; pick one with {path}#1 ... {path}#{len(runs)}")
    if n > len(runs):
        raise UsageError(f"{spec}: {path} holds {len(runs)} run{'s' if len(runs) != 1 else ''}")
    return runs[n - 1]


# ------------------------------------------------------------------ statistics


def _normal_sf(z: float) -> float:
    return 0.5 * math.erfc(z / math.sqrt(2.0))


def mann_whitney(a: list[float], b: list[float]) -> tuple[float, float]:
    """Two-sided Mann-Whitney U test of B vs A -> (p value, U_b / (n_a n_b)).

    Normal approximation with tie correction and continuity correction.

    >>> p, prob = mann_whitney([1, 2, 3, 4, 5, 6], [7, 8, 9, 10, 11, 12])
    >>> round(p, 4), prob
    (0.0051, 1.0)
    >>> mann_whitney([5.0] * 8, [5.0] * 8)
    (1.0, 0.5)
    """
    na, nb = len(a), len(b)
    if na == 0 or nb == 0:
        return 1.0, 0.5
    pooled = sorted([(x, 1) for x in a] + [(x, 0) for x in b])  # B sorts first among ties: order does not matter for ranks
    n = na + nb
    rank_b = 0.0
    ties = 0.0
    i = 0
    while i < n:
        j = i
        while j + 1 < n and pooled[j + 1][0] == pooled[i][0]:
            j += 1
        avg = (i + j + 2) / 2.0  # 1-based average rank of the tie group
        t = j - i + 1
        ties += t**3 - t
        rank_b += avg * sum(1 for k in range(i, j + 1) if pooled[k][1] == 0)
        i = j + 1
    u_b = rank_b - nb * (nb + 1) / 2.0
    mean = na * nb / 2.0
    var = na * nb / 12.0 * ((n + 1) - ties / (n * (n - 1))) if n > 1 else 0.0
    prob = u_b / (na * nb)
    if var <= 0:
        return 1.0, prob
    z = (abs(u_b - mean) - 0.5) / math.sqrt(var)
    return min(1.0, 2.0 * _normal_sf(max(z, 0.0))), prob


def bootstrap_median_diff(a: list[float], b: list[float], resamples: int = RESAMPLES, seed: int = SEED, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Percentile bootstrap interval of median(B) - median(A); seeded, deterministic.

    Each run's samples are resampled with replacement independently (polars,
    one vectorised draw per run).

    >>> bootstrap_median_diff([1.0] * 10, [3.0] * 10)
    (2.0, 2.0)
    """
    import polars as pl

    def medians(values: list[float], salt: int) -> list[float]:
        n = len(values)
        s = pl.Series("v", values, dtype=pl.Float64)
        draw = s.sample(n * resamples, with_replacement=True, seed=seed + salt)
        frame = pl.DataFrame({"v": draw, "g": pl.int_range(0, n * resamples, eager=True) // n})
        return frame.group_by("g").agg(pl.col("v").median()).sort("g").get_column("v").to_list()

    diffs = sorted(mb - ma for ma, mb in zip(medians(a, 1), medians(b, 2)))
    lo_i = int(math.floor((1 - confidence) / 2 * (len(diffs) - 1)))
    hi_i = int(math.ceil((1 + confidence) / 2 * (len(diffs) - 1)))
    return diffs[lo_i], diffs[hi_i]


def _thin(values: list[float], cap: int = MAX_SAMPLES) -> list[float]:
    if len(values) <= cap:
        return values
    step = len(values) / cap
    return [values[int(i * step)] for i in range(cap)]


def significance(a: list[float], b: list[float]) -> Significance:
    method = (
        f"Mann-Whitney U (two-sided, alpha {ALPHA}) and bootstrap {int(CONFIDENCE * 100)}% interval of the median "
        f"difference ({RESAMPLES} resamples, seed {SEED}) on steady-state decode throughput samples"
    )
    a, b = _thin(list(a)), _thin(list(b))
    if len(a) < MIN_SAMPLES or len(b) < MIN_SAMPLES:
        return Significance(method, len(a), len(b), note=f"too few steady-state decode lines (need {MIN_SAMPLES} per run)")
    p, prob = mann_whitney(a, b)
    lo, hi = bootstrap_median_diff(a, b)
    ma, mb = statistics.median(a), statistics.median(b)
    stat = p < ALPHA and (lo > 0 or hi < 0)
    pct = (mb - ma) / ma * 100 if ma else None
    real = stat and pct is not None and abs(pct) >= MIN_EFFECT_PCT
    note = None
    if stat and not real:
        note = f"statistically detectable but under {MIN_EFFECT_PCT:g}%"
    return Significance(method, len(a), len(b), mb - ma, lo, hi, p, prob, stat, real, note)


# ------------------------------------------------------------------ pieces


def _ref(label: str, spec: str | None, run: Run) -> RunRef:
    return RunRef(
        label=label,
        spec=spec or run.name,
        name=run.name,
        model=run.model,
        model_class=run.model_class,
        version=run.version,
        parallelism=run.parallelism,
        speculative=run.spec,
        ending=ending_text(run),
        status=run.ending.status if run.ending else None,
    )


def ending_text(run: Run) -> str | None:
    """How the run ended, with the root cause's first line whole (a renderer cuts it, with an ellipsis)."""
    return run.ending.describe() if run.ending is not None else None


def config_changes(a: Run, b: Run) -> tuple[ConfigChange, ...]:
    """Launch arguments whose values differ (explicit first, then auto-chosen, then defaults)."""
    out = []
    for key in sorted(set(a.args) | set(b.args)):
        if key in NOISE_FIELDS:
            continue
        va, vb = a.args.get(key), b.args.get(key)
        if _same(va, vb):
            continue
        if (key not in a.args and b.arg_origins.get(key) == "default") or (key not in b.args and a.arg_origins.get(key) == "default"):
            continue  # a field only one version's dump has, at its default
        out.append(ConfigChange(key, va, vb, a.arg_origins.get(key) if key in a.args else None, b.arg_origins.get(key) if key in b.args else None))
    return tuple(sorted(out, key=lambda c: (_ORIGIN_RANK.get(c.origin, 3), c.flag)))


def _same(x: Any, y: Any) -> bool:
    if isinstance(x, float) or isinstance(y, float):
        try:
            return math.isclose(float(x), float(y), rel_tol=1e-9)
        except (TypeError, ValueError):
            return False
    return x == y


def model_name(path: str) -> str:
    """The model's name in a path: the last component, or the repo of a Hugging Face cache snapshot.

    >>> model_name("/data/models/Kimi-K2.5/")
    'Kimi-K2.5'
    >>> model_name("/hf/hub/models--mattbucci--Devstral-24B-AWQ/snapshots/91382f53f37f6d40756166361f51885fb823d123")
    'Devstral-24B-AWQ'
    """
    m = _HF_CACHE.search(path)
    if m:
        return m.group(1).split("--")[-1]
    return path.rstrip("/").rsplit("/", 1)[-1]


_HF_CACHE = re.compile(r"models--([^/]+)/snapshots/")


def _model_key(run: Run) -> str | None:
    m = run.args.get("model_path")
    if m:
        return model_name(str(m)).lower()
    return (run.model_class or "").lower() or None


def identity_changes(a: Run, b: Run) -> tuple[dict[str, Any], ...]:
    out = []
    for what, va, vb in (
        ("model", a.model, b.model),
        ("model_class", a.model_class, b.model_class),
        ("version", a.version, b.version),
        ("parallelism", a.parallelism, b.parallelism),
        ("speculative_algorithm", (a.spec or {}).get("algorithm"), (b.spec or {}).get("algorithm")),
    ):
        if va != vb:
            out.append({"what": what, "a": _plain(va), "b": _plain(vb)})
    return tuple(out)


def _pair(a: Any, b: Any, nd: int = 2) -> dict[str, Any]:
    d: dict[str, Any] = {"a": _r(a, nd), "b": _r(b, nd), "delta": None, "change_pct": None}
    if _num(a) and _num(b):
        d["delta"] = _r(b - a, nd)
        if a:
            d["change_pct"] = _r((b - a) / abs(a) * 100, 2)
    return d


def _num(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def startup_section(a: Run, b: Run) -> dict[str, Any]:
    from sglog.runs.build import PHASES

    pa = a.startup.phases if a.startup else {}
    pb = b.startup.phases if b.startup else {}
    phases = []
    for name in PHASES:
        if name not in pa and name not in pb:
            continue
        x, y = pa.get(name), pb.get(name)
        if (x is None or x.duration is None) and (y is None or y.duration is None):
            continue
        row = {"name": name} | _pair(x.duration if x else None, y.duration if y else None)
        row["complete_a"] = x.complete if x else None
        row["complete_b"] = y.complete if y else None
        row["slowest_rank_a"] = x.slowest_rank if x else None
        row["slowest_rank_b"] = y.slowest_rank if y else None
        phases.append(row)
    return {
        "total_s": _pair(a.startup.total_s if a.startup else None, b.startup.total_s if b.startup else None),
        "phases": phases,
    }


def memory_section(a: Run, b: Run) -> dict[str, Any]:
    da, db = a.memory.to_dict(), b.memory.to_dict()
    out = {k: _pair(da.get(k), db.get(k), 4 if k in ("mem_fraction_static",) else 2) for k in MEMORY_KEYS}
    out["mem_fraction_static"] |= {"origin_a": da.get("mem_fraction_static_origin"), "origin_b": db.get("mem_fraction_static_origin")}
    return out


def captured_sizes(run: Run) -> tuple[list[int] | None, str | None]:
    """The target's captured CUDA-graph batch sizes and where they were read."""
    for e in run.events:
        if e.kind == "cuda_graph_bs" and isinstance(e.get("bs"), list):
            return [int(x) for x in e.get("bs") if _num(x)], "capture log line"
    for e in run.events:
        if e.kind in ("cuda_graph_capture_begin", "cuda_graph_capture_end") and e.get("role", "target") == "target" and isinstance(e.get("bs"), list):
            return [int(x) for x in e.get("bs") if _num(x)], "capture log line"
    bs = run.args.get("cuda_graph_bs")
    if isinstance(bs, list) and bs:
        return [int(x) for x in bs if _num(x)], "server args"
    return None, None


def cuda_graph_section(a: Run, b: Run) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for side, run in (("a", a), ("b", b)):
        sizes, source = captured_sizes(run)
        disabled = bool(run.args.get("disable_cuda_graph"))
        out[side] = {
            "disabled": disabled,
            "max_bs_arg": _plain(run.args.get("cuda_graph_max_bs")),
            "sizes": sizes,
            "count": len(sizes) if sizes is not None else None,
            "max": max(sizes) if sizes else None,
            "source": source,
        }
    return out


def _steady(run: Run):
    from sglog import timeline

    d = timeline.decode_frame(run)
    if d.height == 0 or "gen_throughput" not in d.columns:
        return None
    return timeline.steady_rows(run)


def _per_request_median(run: Run) -> float | None:
    import polars as pl

    s = _steady(run)
    if s is None:
        return None
    if "running_req" not in s.columns:
        return s.get_column("gen_throughput").drop_nulls().median()
    t = s.filter(pl.col("running_req") > 0).select((pl.col("gen_throughput") / pl.col("running_req")).alias("t")).get_column("t").drop_nulls()
    return t.median() if t.len() else None


def _retractions(run: Run) -> tuple[int, int]:
    evs = run.events_of("retraction")
    return len(evs), sum(int(e.get("retracted_reqs") or 0) for e in evs)


def serving_section(a: Run, b: Run, sa: dict[str, Any], sb: dict[str, Any]) -> dict[str, Any]:
    from sglog import timeline

    pa, pb = timeline.prefill_stats(a), timeline.prefill_stats(b)
    ra, rb = _retractions(a), _retractions(b)

    def dist(s: dict[str, Any]) -> dict[str, Any] | None:
        if not s:
            return None
        return {"n": s.get("n"), "warmup_rows": s.get("warmup_rows"), "p10": _r(s.get("p10")), "p50": _r(s.get("p50")), "p90": _r(s.get("p90")), "mean": _r(s.get("mean"))}

    out: dict[str, Any] = {
        "steady_state": "decode lines after warm-up with requests running (sglog.timeline.steady_mask)",
        "decode_tok_s": {"a": dist(sa), "b": dist(sb)} | {k: v for k, v in _pair(sa.get("p50"), sb.get("p50")).items() if k in ("delta", "change_pct")},
        "decode_tok_s_per_request_median": _pair(_per_request_median(a), _per_request_median(b)),
        "prefill_tok_s_median": _pair(pa.get("p50"), pb.get("p50")),
        "prefill_tok_s_p90": _pair(pa.get("p90"), pb.get("p90")),
        "prefill_batches": _pair(pa.get("n"), pb.get("n")),
    }
    for name in ("running", "queue", "token_usage", "accept_len", "accept_rate"):
        nd = 3 if name in ("token_usage", "accept_rate") else 2
        out[f"{name}_median"] = _pair(sa.get(f"{name}_p50"), sb.get(f"{name}_p50"), nd)
        out[f"{name}_max"] = _pair(sa.get(f"{name}_max"), sb.get(f"{name}_max"), nd)
    out["cuda_graph_share"] = _pair(sa.get("cuda_graph_share"), sb.get("cuda_graph_share"), 3)
    out["retractions"] = _pair(ra[0], rb[0])
    out["retracted_requests"] = _pair(ra[1], rb[1])
    return out


def _has_spec(run: Run, s: dict[str, Any]) -> bool:
    return bool(run.args.get("speculative_algorithm")) or s.get("accept_len_p50") is not None


def speculation_section(a: Run, b: Run, sa: dict[str, Any], sb: dict[str, Any], sig: Significance | None) -> Speculation | None:
    """Spec run vs non-spec baseline of the same model: speed-up, break-even accept length L*."""
    spec_a, spec_b = _has_spec(a, sa), _has_spec(b, sb)
    if spec_a == spec_b:
        return None
    side = "a" if spec_a else "b"
    spec, base = (a, b) if spec_a else (b, a)
    ss, sbase = (sa, sb) if spec_a else (sb, sa)
    spec_tps, base_tps = _per_request_median(spec), _per_request_median(base)
    if not spec_tps or not base_tps:
        return None
    L = ss.get("accept_len_p50")
    t_base = 1.0 / base_tps
    t_cycle = L / spec_tps if L else None
    be = t_cycle / t_base if t_cycle else None
    steps = spec.args.get("speculative_num_steps")
    steps = steps if isinstance(steps, int) and steps > 0 else None
    speedup = (spec_tps / base_tps - 1) * 100
    significant = bool(sig and sig.significant)
    return Speculation(
        spec_side=side,
        algorithm=(spec.spec or {}).get("algorithm"),
        num_steps=steps,
        num_draft_tokens=spec.args.get("speculative_num_draft_tokens") if isinstance(spec.args.get("speculative_num_draft_tokens"), int) else None,
        spec_tok_s=spec_tps,
        baseline_tok_s=base_tps,
        spec_running=ss.get("running_p50"),
        baseline_running=sbase.get("running_p50"),
        accept_len=L,
        accept_rate=ss.get("accept_rate_p50"),
        speedup_pct=speedup,
        t_base_ms=t_base * 1000,
        t_cycle_ms=t_cycle * 1000 if t_cycle else None,
        break_even=be,
        margin=(L - be) if (L and be) else None,
        significant=significant,
        finding="speculation-slower-than-baseline" if speedup < 0 and significant else None,
    )


def steps_section(a: Run, b: Run, sa: dict[str, Any], sb: dict[str, Any]) -> dict[str, Any] | None:
    """Two speculative runs with different draft steps: fit t_cycle = fixed + per_step * steps (§C).

    t_cycle = L / per-request tok/s for each run; the two points give the cost of
    one more draft step and what it bought in accept length.
    """
    if not (_has_spec(a, sa) and _has_spec(b, sb)):
        return None
    s_a, s_b = a.args.get("speculative_num_steps"), b.args.get("speculative_num_steps")
    la, lb = sa.get("accept_len_p50"), sb.get("accept_len_p50")
    ta, tb = _per_request_median(a), _per_request_median(b)
    if not (isinstance(s_a, int) and isinstance(s_b, int)) or s_a == s_b or not (la and lb and ta and tb):
        return None
    ca, cb = la / ta * 1000, lb / tb * 1000
    per_step = (cb - ca) / (s_b - s_a)
    return {
        "steps_a": s_a,
        "steps_b": s_b,
        "t_cycle_ms_a": _r(ca),
        "t_cycle_ms_b": _r(cb),
        "ms_per_step": _r(per_step, 3),
        "fixed_ms": _r(ca - per_step * s_a),
        "accept_len_per_step": _r((lb - la) / (s_b - s_a), 4),
    }


def comparability(a: Run, b: Run, sa: dict[str, Any], sb: dict[str, Any]) -> tuple[list[str], list[str]]:
    reasons, caveats = [], []
    ka, kb = _model_key(a), _model_key(b)
    if ka and kb and ka != kb:
        reasons.append(f"different models ({_short_model(a)} vs {_short_model(b)})")
    elif a.model_class and b.model_class and a.model_class != b.model_class:
        reasons.append(f"different model classes ({a.model_class} vs {b.model_class})")
    ra, rb = sa.get("running_p50"), sb.get("running_p50")
    if ra and rb and max(ra, rb) / min(ra, rb) > CONCURRENCY_RATIO and max(ra, rb) >= CONCURRENCY_MIN:
        reasons.append(f"different workload shape (median running requests {_fmt(ra)} vs {_fmt(rb)})")
    for ref, run in (("A", a), ("B", b)):
        if not run.args.get("model_path") and not run.model_class:
            caveats.append(f"the model of {ref} is not in its log")
    if a.version and b.version and a.version != b.version:
        exact = all(re.fullmatch(r"\d+(\.\d+)*(\.?post\d+)?", v) for v in (a.version, b.version))
        caveats.append(f"SGLang version {'differs' if exact else 'may differ'} ({a.version} vs {b.version})")
    if a.parallelism and b.parallelism and a.parallelism != b.parallelism:
        caveats.append(f"parallelism differs ({_par(a.parallelism)} vs {_par(b.parallelism)})")
    la, lb = _prompt_len(a), _prompt_len(b)
    if la and lb and max(la, lb) / min(la, lb) > 4:
        caveats.append(f"prompt lengths differ (median new tokens per prefill batch {_fmt(la)} vs {_fmt(lb)})")
    return reasons, caveats


def _prompt_len(run: Run) -> float | None:
    p = run.prefill
    if p.height == 0 or "new_token" not in p.columns:
        return None
    t = p.get_column("new_token").drop_nulls()
    m = t.median() if t.len() else None
    return float(m) if isinstance(m, (int, float)) else None


def _short_model(run: Run) -> str:
    m = run.args.get("model_path")
    return model_name(str(m)) if m else (run.model_class or "?")


def _par(p: dict[str, int]) -> str:
    return " ".join(f"{k}{v}" for k, v in p.items() if v != 1 or k == "tp") or "?"


# ------------------------------------------------------------------ findings


def _diagnose(run: Run) -> list[Finding] | None:
    try:
        from sglog.diagnose import diagnose_runs
    except ImportError:
        return None
    return [f for f in diagnose_runs([run]) if f.run == run.index]


def findings_section(fa: list[Finding] | None, fb: list[Finding] | None) -> dict[str, Any]:
    if fa is None or fb is None:
        return {"available": False, "added": [], "removed": [], "unchanged": []}

    def by_name(fs: list[Finding]) -> dict[str, Finding]:
        out: dict[str, Finding] = {}
        for f in fs:
            out.setdefault(f.name, f)
        return out

    na, nb = by_name(fa), by_name(fb)

    def item(f: Finding) -> dict[str, Any]:
        return {"name": f.name, "code": f.code, "severity": f.severity, "message": f.message}

    return {
        "available": True,
        "added": [item(nb[k]) for k in sorted(set(nb) - set(na))],
        "removed": [item(na[k]) for k in sorted(set(na) - set(nb))],
        "unchanged": [item(nb[k]) for k in sorted(set(na) & set(nb))],
    }


# ------------------------------------------------------------------ verdict


def _fmt(x: Any) -> str:
    if isinstance(x, bool) or x is None:
        return "unset" if x is None else str(x)
    if isinstance(x, float):
        if x.is_integer() and abs(x) >= 10:
            return f"{x:.0f}"
        return f"{x:.3f}".rstrip("0").rstrip(".") if abs(x) < 10 else f"{x:.1f}"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, (list, tuple)):
        if len(x) > 6:
            return f"[{', '.join(map(_fmt, x[:3]))}, ..., {_fmt(x[-1])}] ({len(x)})"
        return "[" + ", ".join(map(_fmt, x)) + "]"
    return str(x)


def _change_text(c: ConfigChange) -> str:
    if c.origin_a and c.origin_b and c.origin_a != c.origin_b:
        return f"{c.flag} {_fmt(c.a)} ({c.origin_a}) -> {_fmt(c.b)} ({c.origin_b})"
    return f"{c.flag} {_fmt(c.a)} -> {_fmt(c.b)}"


def _gb(x: float) -> str:
    return f"{abs(x):.2f}" if abs(x) < 10 else f"{abs(x):.1f}"


def _memory_effect(memory: dict[str, Any]) -> tuple[str, str]:
    """What the memory budget did, as (causal verb phrase, neutral clause); ('', '') when nothing notable.

    Causal: 'cut CUDA-graph memory by 2.10 GB and left 0.75 GB more for KV cache (+11,496 tokens)'.
    Neutral: 'B has 0.75 GB more KV cache (+11,496 tokens) and 2.10 GB less CUDA-graph memory'.
    """
    causal, neutral = [], []
    cg = memory["cuda_graph_gb"]["delta"]
    if cg is not None and abs(cg) >= GRAPH_CHANGE_GB:
        causal.append(f"{'cut' if cg < 0 else 'raised'} CUDA-graph memory by {_gb(cg)} GB")
        neutral.append(f"{_gb(cg)} GB {'less' if cg < 0 else 'more'} CUDA-graph memory")
    gb = memory["kv_gb"]["delta"]
    if gb is not None and abs(gb) >= KV_CHANGE_GB:
        tok = memory["kv_tokens"]["delta"]
        tokens = f" ({int(tok):+,} tokens)" if tok else ""
        causal.append(f"left {_gb(gb)} GB {'more' if gb > 0 else 'less'} for KV cache{tokens}")
        neutral.insert(0, f"{_gb(gb)} GB {'more' if gb > 0 else 'less'} KV cache{tokens}")
    if not causal:
        return "", ""
    return " and ".join(causal), "B has " + " and ".join(neutral)


def _config_sentence(changes: tuple[ConfigChange, ...], args_known: bool, effect: tuple[str, str]) -> str:
    causal, neutral = effect
    if not args_known:
        return "launch arguments are not in both logs" + (f"; {neutral}" if neutral else "")
    relevant = [c for c in changes if c.flag not in IDENTITY_FIELDS]
    explicit = [c for c in relevant if c.origin == "explicit"]
    # auto-chosen lists (cuda_graph_bs) follow from their scalar settings: in the tables, not in the sentence
    auto = [c for c in relevant if c.origin == "auto" and not isinstance(c.a, (list, tuple)) and not isinstance(c.b, (list, tuple))]
    other = [c for c in relevant if c.origin == "default"]
    auto_text = ", ".join(_change_text(c) for c in auto[:2]) + (f" (+{len(auto) - 2} more)" if len(auto) > 2 else "")
    if not explicit and not auto and not other:
        return ("no config changes" if not relevant else "no config changes besides auto-chosen lists") + (f"; {neutral}" if neutral else "")
    if len(explicit) == 1 and not other:
        s = f"the only {'explicit ' if auto else ''}config change is {_change_text(explicit[0])}"
        if auto:
            s += f" (auto-chosen {auto_text} followed)"
        return s + (f", which {causal}" if causal else "")
    if not explicit and not other:
        s = f"no explicit config change; auto-chosen {auto_text}"
        return s + (f"; {neutral}" if neutral else "")
    shown = explicit + other
    s = "config changes: " + ", ".join(_change_text(c) for c in shown[:3]) + (f" (+{len(shown) - 3} more)" if len(shown) > 3 else "")
    if auto:
        s += f"; auto-chosen {auto_text}"
    return s + (f"; together they {causal}" if causal else "")


def _no_data_reason(ref: RunRef) -> str:
    if ref.status == "crashed":
        return f"{ref.label} {ref.ending}"
    if ref.status in ("incomplete",):
        return f"{ref.label}: {ref.ending} (no decode lines)"
    return f"{ref.label} has no decode lines"


def _spec_label(run: Run) -> str:
    s = run.spec or {}
    algo = s.get("algorithm") or "speculation"
    steps = s.get("num_steps")
    return f"{algo}, {steps} steps" if steps else str(algo)


def make_verdict(
    a: Run,
    b: Run,
    ra: RunRef,
    rb: RunRef,
    reasons: list[str],
    sa: dict[str, Any],
    sb: dict[str, Any],
    sig: Significance | None,
    spec: Speculation | None,
    changes: tuple[ConfigChange, ...],
    args_known: bool,
    memory: dict[str, Any],
    steps: dict[str, Any] | None = None,
) -> Verdict:
    ma, mb = sa.get("p50"), sb.get("p50")
    pct = (mb - ma) / ma * 100 if (ma and mb is not None) else None
    if reasons:
        return _not_comparable_verdict(reasons, ma, mb, pct)
    config = _config_sentence(changes, args_known, _memory_effect(memory))
    if not ma or not mb:
        return _no_data_verdict(ra, rb, ma, mb, config)
    significant = bool(sig and sig.significant)
    if spec is not None:
        return _speculation_verdict(a, b, spec, ma, mb, pct, significant)
    return _decode_verdict(ma, mb, pct, sig, significant, config, _accept_text(sa, sb, steps))


def _not_comparable_verdict(reasons: list[str], ma: float | None, mb: float | None, pct: float | None) -> Verdict:
    extra = f"; decode medians A {_fmt1(ma)}, B {_fmt1(mb)} tok/s are shown for reference only" if (ma and mb) else ""
    return Verdict(f"Not comparable: {'; '.join(reasons)}{extra}.", "not-comparable", a=ma, b=mb, change_pct=pct)


def _no_data_verdict(ra: RunRef, rb: RunRef, ma: float | None, mb: float | None, config: str) -> Verdict:
    """A run without decode medians: why, for each run that has none."""
    parts = []
    for ref, m in ((ra, ma), (rb, mb)):
        parts.append(_no_data_reason(ref) if not m else f"{ref.label} decodes at {_fmt1(m)} tok/s median")
    return Verdict(f"No throughput comparison: {'; '.join(parts)}; {config}.", "no-data", a=ma, b=mb)


def _speculation_verdict(a: Run, b: Run, spec: Speculation, ma: float, mb: float, pct: float | None, significant: bool) -> Verdict:
    """The speculative run against the baseline run, whichever side each is on (kind is about B)."""
    base_label, spec_label_ = ("A", "B") if spec.spec_side == "b" else ("B", "A")
    spec_run = b if spec.spec_side == "b" else a
    s_m, b_m = (mb, ma) if spec.spec_side == "b" else (ma, mb)
    change = (s_m - b_m) / b_m * 100
    be = _break_even_text(spec)
    who = f"{spec_label_} ({_spec_label(spec_run)})"
    vs = f"({_fmt1(s_m)} vs {_fmt1(b_m)} tok/s median)"
    if not significant:
        text = f"{who} and {base_label} without speculation decode at the same speed within the noise {vs}{be}"
        kind = "no-change"
    elif change < 0:
        text = f"{who} decodes {abs(change):.1f}% slower than {base_label} without speculation {vs}: speculation does not pay off here{be}"
        kind = "slower" if spec.spec_side == "b" else "faster"
    else:
        text = f"{who} decodes {change:.1f}% faster than {base_label} without speculation {vs}: speculation pays off{be}"
        kind = "faster" if spec.spec_side == "b" else "slower"
    return Verdict(text + ".", kind, a=ma, b=mb, change_pct=pct, significant=significant)


def _break_even_text(spec: Speculation) -> str:
    """'; break-even accept length L* = ..., achieved ... (... short|above)', or '' without both numbers."""
    if spec.break_even is None or spec.accept_len is None:
        return ""
    gap = spec.accept_len - spec.break_even
    return f"; break-even accept length L* = {spec.break_even:.2f}, achieved {spec.accept_len:.2f} ({abs(gap):.2f} {'short' if gap < 0 else 'above'})"


def _accept_text(sa: dict[str, Any], sb: dict[str, Any], steps: dict[str, Any] | None) -> str:
    """How the accept length changed, and what each extra draft step costs; '' when neither is known."""
    accept = ""
    la, lb = sa.get("accept_len_p50"), sb.get("accept_len_p50")
    if la is not None and lb is not None and abs(lb - la) >= 0.01:
        accept = f"; accept length {la:.2f} -> {lb:.2f}"
    if steps and steps["ms_per_step"] > 0:
        accept += f" (each extra draft step costs {steps['ms_per_step']:.1f} ms per cycle for {steps['accept_len_per_step']:+.2f} accepted tokens)"
    return accept


def _decode_verdict(ma: float, mb: float, pct: float | None, sig: Significance | None, significant: bool, config: str, accept: str) -> Verdict:
    """B's decode throughput against A's (no speculation involved), with the config changes."""
    if significant and pct is not None:  # (a significant change has both medians, so a percentage)
        nums = f"({_fmt1(mb)} vs {_fmt1(ma)} tok/s median)"
        text = f"B decodes {abs(pct):.1f}% {'faster' if pct > 0 else 'slower'} {nums}; {config}{accept}."
        kind = "faster" if pct > 0 else "slower"
    else:
        why = f"; {sig.note}" if sig and sig.note else (f", Mann-Whitney p = {_p(sig.p_value)}" if sig and sig.p_value is not None else "")
        text = f"No significant change in decode throughput ({_fmt1(mb)} vs {_fmt1(ma)} tok/s median{why}); {config}{accept}."
        kind = "no-change"
    return Verdict(text, kind, a=ma, b=mb, change_pct=pct, significant=significant)


def _fmt1(x: float | None) -> str:
    return "?" if x is None else f"{x:.1f}"


# ------------------------------------------------------------------ compare


def compare(a: Run, b: Run, findings_a: list[Finding] | None = None, findings_b: list[Finding] | None = None, *, spec_a: str | None = None, spec_b: str | None = None) -> DiffResult:
    """What changed between run A and run B, and whether it helped.

    ``findings_a``/``findings_b``: the runs' findings; computed with
    ``sglog.diagnose.diagnose_runs`` when omitted (and left out if the rules
    engine is not available).  ``spec_a``/``spec_b``: how the user named the
    runs (``FILE#N``), for display; defaults to the run names.
    """
    from sglog import timeline

    sa, sb = timeline.decode_stats(a, values=True), timeline.decode_stats(b, values=True)
    ra, rb = _ref("A", spec_a, a), _ref("B", spec_b, b)
    reasons, caveats = comparability(a, b, sa, sb)
    sig = significance(sa.get("values") or [], sb.get("values") or []) if (sa.get("values") and sb.get("values")) else None
    changes = config_changes(a, b)
    args_known = bool(a.args) and bool(b.args)
    memory = memory_section(a, b)
    spec = None if reasons else speculation_section(a, b, sa, sb, sig)
    steps = None if reasons else steps_section(a, b, sa, sb)
    verdict = make_verdict(a, b, ra, rb, reasons, sa, sb, sig, spec, changes, args_known, memory, steps)
    if findings_a is None:
        findings_a = _diagnose(a)
    if findings_b is None:
        findings_b = _diagnose(b)
    return DiffResult(
        a=ra,
        b=rb,
        comparable=not reasons,
        reasons=tuple(reasons),
        caveats=tuple(caveats),
        verdict=verdict,
        identity_changes=identity_changes(a, b),
        config_changes=changes,
        args_known=args_known,
        startup=startup_section(a, b),
        memory=memory,
        cuda_graph=cuda_graph_section(a, b),
        serving=serving_section(a, b, sa, sb),
        significance=sig,
        speculation=spec,
        spec_steps=steps,
        findings=findings_section(findings_a, findings_b),
    )


def diff_specs(spec_a: str, spec_b: str, **kw) -> DiffResult:
    """``compare`` two runs named as on the command line (``FILE`` / ``FILE#N``)."""
    return compare(resolve_run_spec(spec_a), resolve_run_spec(spec_b), spec_a=spec_a, spec_b=spec_b, **kw)


# ------------------------------------------------------------------ helpers


def _r(x: Any, nd: int = 2) -> Any:
    if isinstance(x, float):
        return round(x, nd)
    return x


def _p(p: float | None) -> Any:
    if p is None:
        return None
    return float(f"{p:.3g}") if p >= 1e-4 else float(f"{p:.1e}")


def _plain(v: Any) -> Any:
    if isinstance(v, (str, int, float, bool)) or v is None:
        return v
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, dict):
        return {str(k): _plain(x) for k, x in v.items()}
    return str(v)
