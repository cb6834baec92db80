"""Every real corpus log gets the finding a careful operator expects (issue 27, "done when").

The expectations for 201-238 are the corpus INDEX's `expected` column, copied verbatim (written from
each thread, not from any tool's output): `a or b` means either finding is right, `;` separates
requirements, `>= N kind` counts events, `healthy` means no error finding, `not SGLang` means the log
is refused with exit 2.  For 001-048 the INDEX gives "what it shows / root cause" in prose; the
expectation below is that prose in rule names.  The findings' numbers are checked by the JSON
snapshots of tests/test_diagnose_real.py (the same files).
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from conftest import REAL, ROOT
from sglog.diagnose import diagnose_runs, looks_like_sglang
from sglog.read.parse import parse_file
from sglog.runs.build import build_runs

FOREIGN = ROOT / "fixtures" / "logs" / "foreign" / "real"

# from corpus/real/INDEX.md, column `expected` (verbatim)
INDEX_EXPECTED = {
    "201-v03-phi35-tp0-capture-cuda-graph-traceback-flashinfer-begin-forward.log": "cuda-graph-capture-failed",
    "202-ray-sglangengine-prefix-eagle-tp0-scheduler-exception.log": "crash",
    "203-deepseek-r1-multinode-worker-rank15-nccl-checktimeout-frames.log": "nccl-timeout",
    "204-deepseek-r1-2x8h100-watchdog-allgather-timeout-after-hours-wrapped.log": "nccl-timeout",
    "205-deepseek-r1-2node-h100-allgather-watchdog-timeout-terminal-padded.log": "nccl-timeout",
    "206-deepseek-r1-0528-dp4-tp4-decode-hang-watchdog-timeout-pyspy-missing.log": "watchdog-timeout",
    "207-v055-custom-allreduce-crash-docker-rfc3339-prefix-fatal-python-error.log": "crash",
    "208-v02-runtime-import-no-module-named-flashinfer.log": "missing-dependency",
    "209-slime-rl-eagle3-double-prefixed-sglangengine-tp7-scheduler-exception.log": "crash",
    "210-qwen3-14b-eagle3-draft-loaded-as-qwen3-keyerror-midlayer.log": "crash",
    "211-pd-prefill-large-page-token-usage-095-transferring-req-1015.log": "kv-capacity-bound; >= 3 prefill_batch",
    "212-pd-nixl-ucx-tcp-segfault-backtrace-after-bootstrap-route.log": "kv-transfer-failed or crash",
    "213-ci-pd-nixl-ucx-gdaki-cq-create-failed-nixl-err-backend.log": "kv-transfer-failed",
    "214-early-pd-mooncake-prefill-metadata-404-segment-descriptor-missing.log": "kv-transfer-failed; >= 1 prefill_batch",
    "215-pd-decode-mooncake-transfer-failed-aborted-by-abortreq-after-warmup.log": "kv-transfer-failed",
    "216-v0519-sglang-omni-stage-engine-unregistered-arch-valueerror-pytest.log": "crash",
    "217-dsv32-exp-dp8-torch-compile-capture-failed-empty-message-compose-prefix.log": "cuda-graph-capture-failed",
    "218-deepseek-r1-tp8-160k-input-exceeds-max-allowed-59862-scheduler-typeerror.log": "kv-capacity-bound or kv-headroom-too-small; crash",
    "219-dp-attention-prefill-token-usage-091-then-dp1-tp2-scheduler-exception.log": "crash; >= 3 prefill_batch",
    "220-ktransformers-061-dsv32-tp2-sigquit-scheduler-exception-in-load-model.log": "weights-exceed-gpu-memory or crash",
    "221-ascend-dsv32-pd-decode-dp-attention-nextn-cpu-graph-64k.log": "healthy: no error finding; >= 83 decode_batch",
    "222-llama2-7b-eagle2-l4-mtbench-queue-decode-oom-retract-then-crash.log": "kv-retraction; crash; >= 1 decode_batch, >= 23 prefill_batch",
    "223-v01-llava34b-tp2-rpyc-startup-tiny-kv-pool-fill-batch.log": ">= 2 prefill_batch",
    "224-v0213-mixtral-tp8-l4-gpu-prefix-startup-dies-after-warmup.log": "crash or server-never-ready; >= 1 prefill_batch",
    "225-qwen3-4b-rtx4090-v0518-decode-past-cuda-graph-bs24-then-kv-full-retract.log": "kv-retraction; decode-batch-exceeds-cuda-graph; >= 63 decode_batch, >= 78 prefill_batch",
    "226-2026-04-comma-format-no-rank-tag-chat-prefill-cuda-graph-true-uvicorn.log": "healthy: no error finding; >= 1 decode_batch, >= 3 prefill_batch",
    "227-2025-05-prefill-dot-no-rank-tag-cached-tokens-uvicorn-burst.log": "healthy: no error finding; >= 3 prefill_batch",
    "228-hicache-tp4-startup-tail-host-memory-allocation-then-bench-output.log": "healthy: no error finding",
    "229-sglang-jax-tpu-dot-decode-cache-miss-field.log": "healthy: no error finding; >= 9 decode_batch",
    "230-rocm-rx7900xtx-tp2-v03-startup-int8-kv-nan-in-logits.log": ">= 1 prefill_batch",
    "231-deepseek-r1-dp8-tbo-decode-per-rank-mixed-with-custom-router-handler-lines.log": "healthy: no error finding; >= 9 decode_batch",
    "232-deepseek-v3-tp8-cuda-graph-capture-391s-fired-up-first-decode.log": "slow-cuda-graph-capture; >= 2 prefill_batch, >= 1 decode_batch",
    "233-ascend-qwen3-32b-tp16-eagle3-18k-prompt-single-request-accept-len-1p5.log": "healthy: no error finding; >= 44 decode_batch, >= 3 prefill_batch",
    "234-not-sglang-lmdeploy-api-server-uvicorn-post-generate-asgi-error.log": "not SGLang: refuse (exit 2)",
    "235-not-sglang-triton-tensorrtllm-backend-tp-kv-cache-blocks.log": "not SGLang: refuse (exit 2)",
    "236-not-sglang-vllm-v1-apiserver-specdecoding-metrics-dual-4090.log": "not SGLang: refuse (exit 2)",
    "237-not-sglang-tabbyapi-exllamav3-metrics-draft-accepted-wrapped.log": "not SGLang: refuse (exit 2)",
    "238-not-sglang-vllm-084-v1-ray-multinode-rayworkerwrapper-pid-prefix.log": "not SGLang: refuse (exit 2)",
}

# 001-048: the INDEX's "what it shows / root cause", in rule names
PROSE_EXPECTED = {
    "001-glm45-air-tp2-3090-startup-oom-flashinfer-workspace.log": "startup-oom",
    "002-glm45-air-tp2-3090-marlin-moe-prefill-crash.log": "crash",
    "003-qwen3-moe-triton-fp8e4nv-bootfail-sm86.log": "unsupported-gpu-arch",
    "004-qwen36-ngram-spec-triton-conv1d-bootfail.log": "crash",
    "007-fastrl-spec-decode-accept-len-cuda-graph-false.log": "cuda-graphs-never-captured",
    "008-hisparse-decode-cuda-graph-2026.log": "healthy: no error finding",
    "009-deepseek-r1-tp16-2node-pd-decode-nccl-init-failure.log": "nccl-timeout",
    "010-deepseek-r1-2node-nvshmem-init-fail-scheduler-terminated.log": "nccl-timeout",
    "011-deepseek-r1-dp-attention-ep-deepep-not-installed.log": "missing-dependency",
    "012-deepseek-r1-pd-decode-mooncake-address-family-crash.log": "pd-bootstrap-failed",
    "013-deepseek-r1-pd-mooncake-kv-transfer-failed.log": "kv-transfer-failed",
    "014-deepseek-r1-pd-decode-node-decode-batch.log": "healthy: no error finding",
    "015-laguna-dflash-spec-gb10-full-run-accept-len.log": "healthy: no error finding",
    "016-laguna-nvfp4-dflash-gb10-prefill-graph-capture-stall.log": "server-never-ready",
    "017-devstral-awq-rocm-rdna4-tp2-healthy-smoke.log": "healthy: no error finding",
    "018-laguna-nvfp4-dflash-gb10-aborted-during-weight-load.log": "server-never-ready",
    "019-deepseek-r1-w4a8-ascend-npu-tp16-dp4-ep-eagle-benchmark.log": "healthy: no error finding",
    "020-qwen3-coder-next-awq-rocm-tp2-startup-oom.log": "weights-exceed-gpu-memory",
    "021-gemma4-26b-awq-rocm-tp2-hsa-exception-sampler-crash.log": "illegal-memory-access",
    "024-overlap-retract-high-token-usage-queue.log": "kv-capacity-bound",
    "026-deepseek-v25-tp8-capture-cuda-graph-failed-2024.log": "cuda-graph-capture-failed",
    "027-deepseek-r1-4node-a100-tp32-load-weights-before-watchdog.log": "server-never-ready",
    "030-verl-agent-rollout-sglang-tp3-scheduler-exception-mixed.log": "crash",
    "032-uvicorn-access-only-no-decode-batch-lines.log": "healthy: no error finding",
    "033-kimi-vl-ci-prefill-uvicorn-image-processor-warnings.log": "healthy: no error finding",
    "035-v01-llama-8xL4-startup-oom-rpyc-model-rpc-traceback.log": "crash",
    "038-v01-model-rpc-exposed-step-nonetype-req-pool-2024-02.log": "crash",
    "039-qwen3-14b-tp2-a4500-cpu-offload-startup-ends-in-graph-capture.log": "server-never-ready",
    "041-tp2-capture-end-piecewise-tokens-dynamo-warning.log": "healthy: no error finding",
    "042-eagle2-deepseek-v2-8xh20-cuda-graph-init-oom-2024.log": "cuda-graph-capture-failed",
    "045-pd-decode-transfer-failed-unknown-reason-health-ok.log": "kv-transfer-failed",
    "046-hicache-mooncake-store-startup-glog-mixed.log": "healthy: no error finding",
    "047-npu-qwen36-mtp-mamba-prefix-cache-bench-mixed.log": "healthy: no error finding",
    "048-lmcache-sglang-decode-lines-mixed-with-lmcache-info.log": "healthy: no error finding",
}

EXPECTED = {**PROSE_EXPECTED, **INDEX_EXPECTED}

# rules added after the INDEX was written that state one of its conclusions more precisely: a choice
# in the INDEX is met by the finer rule too (and only by these, each with the reason)
REFINES = {
    # a request refused because it is longer than the allowed maximum, the smaller of the context
    # length and the KV pool: the finding says which binds and computes the fraction that grows the pool
    "request-too-long": {"kv-capacity-bound", "kv-headroom-too-small"},
}
_COUNT = re.compile(r">=\s*(\d+)\s+([a-z_]+)")


def parse_expectation(text: str) -> dict:
    """{"refuse": bool, "healthy": bool, "any_of": [[names]], "counts": {kind: n}} of one `expected` cell."""
    out: dict = {"refuse": False, "healthy": False, "any_of": [], "counts": {}}
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        if part.startswith("not SGLang"):
            out["refuse"] = True
        elif part.startswith("healthy"):
            out["healthy"] = True
        elif part.startswith(">="):
            out["counts"].update({kind: int(n) for n, kind in _COUNT.findall(part)})
        else:
            out["any_of"].append([name.strip() for name in part.split(" or ")])
    return out


def path_of(name: str) -> Path:
    return (FOREIGN if "not-sglang" in name else REAL) / name


def test_every_corpus_log_has_an_expectation():
    logs = {p.name for p in REAL.glob("*.log")} | {p.name for p in FOREIGN.glob("*.log")}
    assert logs == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_expected_diagnosis(monkeypatch, name):
    monkeypatch.chdir(ROOT)
    want = parse_expectation(EXPECTED[name])
    parsed = [parse_file(str(path_of(name).relative_to(ROOT)))]
    verdict = looks_like_sglang(parsed)
    if want["refuse"]:
        assert not verdict[0], f"{name}: another server's log must be refused"
        return
    assert verdict[0], f"{name}: an SGLang log must not be refused"
    runs = build_runs(parsed)
    findings = diagnose_runs(runs)
    names = {f.name for f in findings}
    for choice in want["any_of"]:
        met = names & set(choice) or {n for n in names if REFINES.get(n, set()) & set(choice)}
        assert met, f"{name}: expected {' or '.join(choice)}, got {sorted(names) or 'no finding'}"
    if want["healthy"]:
        errors = sorted(f.name for f in findings if f.severity == "error")
        assert not errors, f"{name}: a healthy log got errors {errors}"
    kinds: dict[str, int] = {}
    for run in runs:
        for kind in want["counts"]:
            kinds[kind] = kinds.get(kind, 0) + run.count(kind)
    for kind, n in want["counts"].items():
        assert kinds.get(kind, 0) >= n, f"{name}: expected >= {n} {kind}, read {kinds.get(kind, 0)}"
