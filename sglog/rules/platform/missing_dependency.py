"""SGL402 missing-dependency: an optional package the chosen backend needs is not installed."""

from __future__ import annotations

from collections.abc import Iterator

from sglog.findings import Fix
from sglog.rules.base import exception_evidence, exception_line, pick_remedy
from sglog.rules.ownership import SIGNATURE, CrashRule

# (packages, as ``_package`` spells a module's top-level name, args patch, what to do)
_DEPENDENCY_REMEDIES: tuple[tuple[str, dict[str, str | None], str], ...] = (
    ("deepep", {"--moe-a2a-backend": None}, "Install DeepEP (github.com/deepseek-ai/deepep) or drop --moe-a2a-backend deepep (the default all-to-all needs no extra package)."),
    ("mooncake", {}, "Install the Mooncake transfer engine (pip install mooncake-transfer-engine) or choose another --disaggregation-transfer-backend."),
    (
        "flashinfer",
        {"--attention-backend": "triton", "--sampling-backend": "pytorch"},
        "Install flashinfer matching the torch/CUDA version, or avoid it: --attention-backend triton --sampling-backend pytorch.",
    ),
    ("sglkernel", {}, "Install sgl-kernel matching the SGLang version (pip install sgl-kernel==<version>)."),
    ("vllm", {}, "This quantization or model path imports vLLM: install the vLLM version SGLang pins, or use a format SGLang supports natively."),
)


def _package(module: str) -> str:
    """A module's top-level package, as the remedies name it: ``deep_ep.buffer`` -> ``deepep``."""
    return module.split(".", 1)[0].lower().replace("_", "").replace("-", "")


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
    Case: DeepEP selected but not installed

    `ImportError: DeepEP is not installed. Please install DeepEP package from
    https://github.com/deepseek-ai/deepep.` at startup: sglog says to install
    DeepEP (`github.com/deepseek-ai/deepep`) or drop `--moe-a2a-backend` (`the
    default all-to-all needs no extra package`).
    """

    code = "SGL402"
    name = "missing-dependency"
    triggers = ("args", "crash")
    severity = "error"
    precedence = 60

    def claim(self, run, c) -> int | None:
        return SIGNATURE if "missing_module" in (c.event.get("signatures") or ()) else None

    def _check(self, run, o) -> Iterator:
        c = self.owned_crash(run)
        if c is None:
            return
        rc = c.event
        module = rc.get("missing_module")  # (the reader's: sglog/read/signatures.py)
        packages = [_package(str(m)) for m in (module, rc.get("missing_from")) if m]
        args, what = pick_remedy(packages, _DEPENDENCY_REMEDIES, ({}, f"Install the missing package{f' ({module})' if module else ''} in the server's environment."))
        if "--moe-a2a-backend" in args and run.args and run.args.get("moe_a2a_backend") in (None, "none"):
            args = {}
        exc = exception_line(rc)
        msg = f"Startup failed on a missing package{f' ({module})' if module else ''}: {exc[:180]}"
        yield self.finding(run, msg, exception_evidence(rc), Fix(summary=what, args=args, safety=self.fix_safety))
