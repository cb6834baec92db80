"""The named-message table (sglog/read/named.py): its templates are the shipped catalogue's, every
wording of a message is in it, and a logged line and a raised exception read the same.

Logs here are written from SGLang's source formats (the catalogued templates) or copied from
fixtures/logs/real (sources in fixtures/logs/real/SOURCES.md).
"""

from __future__ import annotations

import ast
import gzip
import json
import re
from importlib import resources

import pytest

import sglog
from conftest import REAL, ROOT
from sglog.events import KIND_CLASSES, NAMED_KINDS
from sglog.read import catalog, named
from sglog.rules.said import said


def _catalogue_templates() -> dict[str, list[dict]]:
    raw = resources.files("sglog.read").joinpath("data", "catalog.json.gz").read_bytes()
    out: dict[str, list[dict]] = {}
    for t in json.loads(gzip.decompress(raw))["templates"]:
        out.setdefault(t["t"], []).append(t)
    return out


CATALOGUE = _catalogue_templates()


@pytest.mark.parametrize("template", sorted(named.SGLANG))
def test_every_template_is_in_the_shipped_catalogue(template):
    assert template in CATALOGUE, f"not a catalogued SGLang message: {template!r}"
    name = named.SGLANG[template]
    holes = len(catalog._parts(template)) - len([p for p in catalog._parts(template) if p is not None])
    assert len(name.fields) in (0, holes), f"{template!r}: {len(name.fields)} field names for {holes} placeholders"
    if name.fields:
        assert len(name.fields) == holes
    # the message is kept by the catalogue (not dropped as too generic), so the reader can name it
    assert catalog.load().match(template.replace("{}", "7")) is not None or "{}" not in template


def test_every_name_is_an_event_kind_with_typed_fields():
    for template, name in {**named.SGLANG, **named.FOREIGN}.items():
        cls = KIND_CLASSES[name.kind]
        old_wording = name.kind in ("memory_summary", "prefill_batch", "decode_batch", "kv_transfer_failed")  # a grammar kind's older wordings
        assert name.kind in NAMED_KINDS or old_wording, name.kind
        for f in name.fields:
            assert f is None or f in cls.FIELDS or name.kind == "memory_summary", f"{template!r}: {f} is not in {cls.__name__}.FIELDS"
        for f in name.consts:
            assert f in cls.FIELDS, f"{template!r}: constant {f} is not in {cls.__name__}.FIELDS"


# a template's distinctive head -> the catalogue's templates that start with it must all be named
# (every wording across releases), except those listed as not this failure
HEADS = {
    "Input length (": (),
    "The input ({} tokens) is longer than the model's context length": (),
    "Requested token count": (),
    "Request length is longer than the KV cache pool size": (),
    "Detected errors during sampling!": (),
    "NaN detected in {}; values were sanitized": (),
    "Could not fetch bootstrap info": (),
    "Could not fetch prefill": (),
    "Error fetching prefill": (),
    "Prefill instance failed to": (),
    "Prefill Failed to": (),
    "Decode handshake failed": (),
    "Prefill bootstrap failed": (),
    "NIXL memory registration failed": ("NIXL memory registration failed for staging buffer (ptr=0x{}, size={})",),
    "SWA pool": (),
    "Prefill transfer failed for request": (),
    "Decode transfer failed for request": (),
    "MLX auxiliary-state cache is too small": (),
    "max_running_requests is capped to {} by the mamba state cache": (),
    "Not enough memory. Please try to increase --mem-fraction-static": (),
    "Not enought memory. Please try to increase --mem-fraction-static": (),
    "Loaded weights leave no GPU memory for the KV cache": (),
    "Rank {}: max_total_num_token=": (),
    "[gpu_id={}] max_total_num_tokens=": (),
    "[rank={}] max_total_num_tokens=": (),
}


@pytest.mark.parametrize("head", sorted(HEADS))
def test_every_wording_across_releases_is_named(head):
    wordings = [t for t in CATALOGUE if t.startswith(head)]
    assert wordings, head
    missing = [t for t in wordings if t not in named.SGLANG and t not in HEADS[head]]
    assert not missing, f"{head!r}: unnamed wordings {missing}"


def test_a_name_can_be_limited_to_its_source_modules():
    t = "Mooncake memory registration failed."
    assert named.kind_of(t, "srt/disaggregation/mooncake/transfer_engine.py:35") == "pd_bootstrap_failed"
    assert named.kind_of(t, "srt/elastic_ep/expert_backup_manager.py:161") is None  # the same words for elastic EP
    assert named.kind_of("Dump a tensor to {}. Shape = {}") is None


def test_values_are_typed_by_the_event_class():
    kind, fields = named.read("Request {} exceeds the maximum number of tokens: {} > {}", ["'r1'", "70000", "65536"])
    assert kind == "request_too_long"
    assert fields == {"rid": "r1", "input_tokens": 70000, "limit": 65536, "limit_kind": "max_total_tokens", "action": "rejected"}
    assert named.read("not a template", []) is None


def test_foreign_messages_are_named():
    assert named.read_foreign("probability tensor contains either `inf`, `nan` or element < 0") == ("nan_logits", {"where": "probability", "origin_library": "torch"})
    assert named.read_foreign("probability tensor has a different shape") is None


def _log(tmp_path, text: str):
    p = tmp_path / "server.log"
    p.write_text(text, encoding="utf-8")
    (run,) = sglog.load(p)
    return run


def test_a_logged_line_and_a_raised_exception_read_the_same(tmp_path):
    run = _log(
        tmp_path,
        "[2025-06-01 10:00:00] The input (61709 tokens) is longer than the model's context length (40960 tokens).\n"
        "[2025-06-01 10:00:01] Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/dist-packages/sglang/srt/managers/tokenizer_manager.py", line 1348, in _validate_one_request\n'
        "    raise ValueError(error_msg)\n"
        "ValueError: The input (61709 tokens) is longer than the model's context length (40960 tokens).\n",
    )
    items = said(run, "request_too_long")
    assert [s.raised for s in items] == [False, True]
    logged, raised = items
    assert logged.event.kind == "request_too_long" and raised.event.kind == "traceback"
    keys = ("input_tokens", "limit", "limit_kind", "action")
    assert {k: logged.fields[k] for k in keys} == {k: raised.fields[k] for k in keys} == {"input_tokens": 61709, "limit": 40960, "limit_kind": "context_len", "action": "rejected"}


def test_named_lines_count_as_catalogue_lines_and_as_sglang_evidence(tmp_path):
    from sglog.read.evidence import event_evidence
    from sglog.read.parse import source_of

    run = _log(tmp_path, "Input length (160062 tokens) exceeds the maximum allowed length (59862 tokens). Use a shorter input or enable --allow-auto-truncate.\n")
    (e,) = run.events_of("request_too_long")
    assert source_of("request_too_long") == "catalogue" == source_of("sglang_message")
    assert event_evidence(e) == "catalogue"


def test_old_capacity_summaries_fill_the_memory_budget(tmp_path):
    run = _log(tmp_path, "Rank 0: max_total_num_token=1378, max_prefill_num_token=4096, context_len=4096, \n")
    assert run.first("memory_summary") is not None
    assert (run.memory.max_total_num_tokens, run.memory.context_len) == (1378, 4096)


@pytest.mark.parametrize(
    ("name", "rule", "numbers"),
    [
        ("012-deepseek-r1-pd-decode-mooncake-address-family-crash.log", "pd-bootstrap-failed", {"stages": ["engine_init"], "backend": "mooncake", "failures": 8}),
        # the transfer engine's own errors: the KV transfer layer failed (kv-transfer-failed), SGLang's set-up did not
        ("214-early-pd-mooncake-prefill-metadata-404-segment-descriptor-missing.log", "kv-transfer-failed", {"stages": ["metadata"]}),
        ("212-pd-nixl-ucx-tcp-segfault-backtrace-after-bootstrap-route.log", "kv-transfer-failed", {"stages": ["native"], "backend": "nixl"}),
        (
            "218-deepseek-r1-tp8-160k-input-exceeds-max-allowed-59862-scheduler-typeerror.log",
            "request-too-long",
            {"requests": 1, "limit": 59862, "longest_input": 160062, "limit_kind": "allowed_maximum"},
        ),
        ("230-rocm-rx7900xtx-tp2-v03-startup-int8-kv-nan-in-logits.log", "nan-logits", {"messages": 14, "where": ["logits"]}),
    ],
)
def test_real_logs_get_the_new_findings(monkeypatch, name, rule, numbers):
    if not (REAL / name).exists():
        pytest.skip(f"fixtures/logs/real/{name} is not in this checkout")
    from sglog.rules import get_rule

    monkeypatch.chdir(ROOT)
    (run,) = sglog.load(f"fixtures/logs/real/{name}")
    (f,) = get_rule(rule).check(run)
    for key, value in numbers.items():
        assert f.details[key] == value, (key, f.details)
    if rule == "nan-logits":
        assert f.fix.args == {"--kv-cache-dtype": "auto"}  # kv_cache_dtype='int8' in its server args


def test_the_new_rule_modules_are_pure():
    """No printing, files, clocks or processes in the rule packages (as tests/test_rules.py checks sglog/rules/*.py)."""
    banned_calls = {"print", "open", "input", "exec", "eval"}
    for pkg in ("requests", "capacity", "numerics", "disaggregation"):
        for path in sorted((ROOT / "sglog" / "rules" / pkg).glob("*.py")):
            tree = ast.parse(path.read_text(encoding="utf-8"))
            for node in ast.walk(tree):
                if isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                    assert node.func.id not in banned_calls, f"{path.name}:{node.lineno}"
                if isinstance(node, (ast.Import, ast.ImportFrom)):
                    mods = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
                    assert not any(m.split(".")[0] in ("subprocess", "socket", "time", "random", "re") for m in mods), f"{path.name}: {mods}"
                    assert not any(m.startswith("sglog.read") for m in mods), f"{path.name}: a rule reads events, not the reader"
    assert re.fullmatch(r"SGL\d{3}", "SGL206")


def test_old_batch_wordings_feed_the_batch_frame(tmp_path):
    """0.1.x's `new fill batch` and bare decode lines (SGLang 0.1.3-0.1.17 source formats) are prefill/decode rows."""
    import sglog

    log = tmp_path / "v01.log"
    log.write_text(
        "new fill batch. #seq: 2. #cached_token: 5. #new_token: 90. #remaining_req: 3. #running_req: 1\n"
        "new fill batch. #seq: 1. #cached_token: 0. #new_token: 9. #remaining_req: 0. #running_req: 0. tree_cache_hit_rate: 0.00%.\n"
        "#running-req: 3, #token: 120, token usage: 0.01, gen throughput (token/s): 45.20, #queue-req: 0\n",
        encoding="utf-8",
    )
    (run,) = sglog.load(log)
    rows = run.batches.sort("line").select("kind", "new_seq", "cached_token", "new_token", "queue_req", "running_req", "gen_throughput").rows()
    assert rows == [("prefill_batch", 2, 5, 90, 3, 1, None), ("prefill_batch", 1, 0, 9, 0, 0, None), ("decode_batch", None, None, None, 0, 3, 45.2)]
    assert not {"sum", "arg4", "len_can_run_list"} & set(run.batches.columns)  # the miner's placeholder names stay out


def test_sglang_names_its_own_lower_bound_for_the_static_pool(tmp_path):
    """0.5.14+'s start-up check names the fraction it needs and that the draft weights count: typed
    fields the memory rules read (they read no message text, #27)."""
    run = _log(
        tmp_path,
        "ValueError: Loaded weights leave no GPU memory for the KV cache under --mem-fraction-static=0.7. Raise --mem-fraction-static above 0.812 "
        "(minimum viable = 1 - available/pre = 0.7620). If using speculative decoding, draft weights are now counted.\n",
    )
    (e,) = [e for e in run.events if e.get("named_kind")]
    assert e.get("named_kind") == "kv_memory_insufficient"
    assert e.get("named_fields") == {"mem_fraction_static": 0.7, "suggested_mem_fraction_static": 0.812, "minimum_mem_fraction_static": 0.762, "draft_counted": True}


def test_the_catalogue_templates_rules_name_are_shipped():
    """A rule that recognises an SGLang warning by its catalogue template names one that exists."""
    from sglog.rules.platform.unsupported_gpu_arch import TORCH_SYMM_MEM_UNSUPPORTED

    assert TORCH_SYMM_MEM_UNSUPPORTED in CATALOGUE
