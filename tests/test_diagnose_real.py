"""Findings for every real corpus log, as reviewed JSON snapshots (``--snapshot-update`` to accept a change).

Paths are relative to the repository root and the document holds nothing of
the machine (no clock, no absolute paths), so the snapshots are stable.
"""

from __future__ import annotations

import pytest
from syrupy.extensions.json import JSONSnapshotExtension

from conftest import REAL, ROOT
from sglog.diagnose import diagnose_runs, document, looks_like_sglang
from sglog.read.parse import parse_file
from sglog.runs.build import build_runs

LOGS = sorted(p.name for p in REAL.glob("*.log"))

# healthy runs according to the corpus index (fixtures/logs/real/SOURCES.md): they may get warnings, never errors
HEALTHY = (
    "008-hisparse-decode-cuda-graph-2026.log",
    "014-deepseek-r1-pd-decode-node-decode-batch.log",
    "015-laguna-dflash-spec-gb10-full-run-accept-len.log",
    "017-devstral-awq-rocm-rdna4-tp2-healthy-smoke.log",
    "019-deepseek-r1-w4a8-ascend-npu-tp16-dp4-ep-eagle-benchmark.log",
    "032-uvicorn-access-only-no-decode-batch-lines.log",
    "033-kimi-vl-ci-prefill-uvicorn-image-processor-warnings.log",
    "041-tp2-capture-end-piecewise-tokens-dynamo-warning.log",
    "046-hicache-mooncake-store-startup-glog-mixed.log",
    "047-npu-qwen36-mtp-mamba-prefix-cache-bench-mixed.log",
    "048-lmcache-sglang-decode-lines-mixed-with-lmcache-info.log",
)


@pytest.fixture
def json_snapshot(snapshot):
    return snapshot.use_extension(JSONSnapshotExtension)


def diagnose_doc(name: str) -> dict:
    rel = f"fixtures/logs/real/{name}"
    parsed = [parse_file(rel)]
    ok, coverage = looks_like_sglang(parsed)
    runs = build_runs(parsed)
    doc = document(runs, diagnose_runs(runs), coverage)
    doc["looks_like_sglang"] = ok
    return doc


@pytest.mark.skipif(not LOGS, reason="fixtures/logs/real is empty")
@pytest.mark.parametrize("name", LOGS)
def test_real_log_findings(monkeypatch, json_snapshot, name):
    monkeypatch.chdir(ROOT)
    doc = diagnose_doc(name)
    assert doc["looks_like_sglang"], f"{name}: a real SGLang log must not be rejected"
    text = str(doc)
    assert str(ROOT) not in text  # relative paths only
    assert doc == json_snapshot


@pytest.mark.parametrize("name", [h for h in HEALTHY if h in LOGS])
def test_healthy_real_logs_have_no_errors(monkeypatch, name):
    monkeypatch.chdir(ROOT)
    doc = diagnose_doc(name)
    assert not [f["name"] for f in doc["findings"] if f["severity"] == "error"]
