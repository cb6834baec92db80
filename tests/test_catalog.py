"""The message catalogue: loading, filtering, matching, typed fields, choosing among matches."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

import sglog
from conftest import FIXTURES
from sglog.errors import ExitCode, InternalError
from sglog.read import catalog
from sglog.read.catalog import Catalogue, CatalogueError, CatalogueMatch

RELEASES = ["0.1.3", "0.2.0", "0.3.0", "0.4.0", "0.4.6.post5", "0.5.10", "0.5.23"]


def T(t: str, p: list[str], v: tuple[int, int] = (0, 6), s: str = "srt/x.py:1", l: str = "info", k: str = "log", **kw):  # noqa: E741 (the catalogue's own one-letter keys)
    return {"t": t, "p": p, "l": l, "k": k, "s": s, "v": list(v), **kw}


TEMPLATES = [
    T("Load weight begin. avail mem={} GB", ["avail_mem"], (2, 6), "srt/model_executor/model_runner.py:234"),
    T(
        "Load weight end. type={}, dtype={}, avail mem={} GB, mem usage={} GB.",
        ["type", "dtype", "avail_mem", "mem_usage"],
        (3, 6),
        "srt/model_executor/model_runner.py:260",
    ),
    T("Capture cuda graph begin. This can take up to several minutes.", [], (1, 3), "srt/model_executor/cuda_graph_runner.py:200"),
    T(
        "Capture cuda graph begin. This can take up to several minutes. avail mem={} GB",
        ["avail_mem"],
        (4, 6),
        "srt/model_executor/cuda_graph_runner.py:250",
    ),
    # ambiguity: an exact old message and a newer, less specific one
    T("Init torch distributed begin.", [], (0, 2), "srt/old.py:10"),
    T("Init torch distributed {}.", ["what"], (3, 6), "srt/new.py:20"),
    # ambiguity: the same text printed from two places in two eras
    T("Server is ready to accept requests on port {}", ["port"], (0, 3), "server_old.py:5"),
    T("Server is ready to accept requests on port {}", ["port"], (4, 6), "srt/entrypoints/http_server.py:9"),
    # specificity
    T("Scheduler hit an exception: {}", ["e"], (2, 6), "srt/managers/scheduler.py:1"),
    T("Scheduler hit an exception: Traceback {}", ["rest"], (2, 6), "srt/managers/scheduler.py:2"),
    # typed fields, names
    T("Stats: n={} rate={} ratio={} flag={} other={} size={} tiny={} neg={}", ["n", "rate", "ratio", "flag", "other", "size", "tiny", "neg"]),
    T("Pair {} and {} and {}", ["x", "x", ""]),
    # braces, placeholder inside a word, empty placeholder
    T("Received config {{model: {}}} from the router", ["model"]),
    T("Capturing layer{} of the draft model", ["i"]),
    T("Loading model {} from the local disk", ["name"]),
    # shared with vLLM
    T("Downcasting {} to {} for the custom allreduce", ["a", "b"], shared="vllm"),
    # generic templates: dropped
    T("{}", [""]),
    T("{}: {}", ["a", "b"]),
    T("Error: {}", ["e"]),  # 5 constant letters
    T("Got {} {}", ["a", "b"]),
    T("{} is ready now", ["x"]),  # starts with a placeholder, 12 constant letters
    # a leading placeholder with a long constant tail: kept
    T("{} has finished loading all of its weights", ["who"]),
]


def write(path: Path, data) -> Path:
    raw = data if isinstance(data, bytes) else json.dumps(data).encode()
    path.write_bytes(gzip.compress(raw))
    return path


@pytest.fixture
def cat(tmp_path) -> Catalogue:
    data = {"schema": 1, "releases": RELEASES, "vllm_releases": ["0.6.0"], "templates": TEMPLATES}
    return catalog.load(write(tmp_path / "catalog.json.gz", data))


def test_load_is_cached(tmp_path, cat):
    assert catalog.load(tmp_path / "catalog.json.gz") is cat
    assert cat.releases == tuple(RELEASES) and cat.vllm_releases == ("0.6.0",)


def test_generic_templates_are_dropped_and_counted(cat):
    assert cat.total == len(TEMPLATES)
    assert cat.dropped == {"placeholders-only": 2, "too-few-constants": 2, "leading-placeholder": 1}
    assert len(cat) == cat.total - 5
    assert cat.match("Error: boom") is None
    assert cat.match("x is ready now") is None
    assert cat.match("anything: at all") is None
    m = cat.match("The draft worker has finished loading all of its weights")
    assert m is not None and m.fields == {"who": "The draft worker"}


def test_match_names_the_message(cat):
    m = cat.match("Load weight begin. avail mem=75.12 GB")
    assert m == CatalogueMatch(
        template="Load weight begin. avail mem={} GB",
        source="srt/model_executor/model_runner.py:234",
        level="info",
        kind="log",
        versions=("0.3.0", "0.5.23"),
        shared=None,
        fields={"avail_mem": 75.12},
    )
    assert m.sglang_only
    m = cat.match("Load weight end. type=LlamaForCausalLM, dtype=torch.bfloat16, avail mem=60.5 GB, mem usage=14.99 GB.")
    assert m is not None
    assert m.fields == {"type": "LlamaForCausalLM", "dtype": "torch.bfloat16", "avail_mem": 60.5, "mem_usage": 14.99}


def test_no_match(cat):
    assert cat.match("Load weight begun. avail mem=75.12 GB") is None
    assert cat.match('INFO:     127.0.0.1:52314 - "POST /generate HTTP/1.1" 200 OK') is None
    assert cat.match("") is None and cat.match("   ") is None
    # a full match: text around the message is not the message
    assert cat.match("oops Load weight begin. avail mem=1 GB") is None
    assert cat.match("Load weight begin. avail mem=1 GB and more") is None


def test_whitespace_is_normalised(cat):
    m = cat.match("  Load weight begin.\tavail   mem=1.5 GB \r")
    assert m is not None and m.fields == {"avail_mem": 1.5}
    m = cat.match("Capture cuda graph begin.  This can take up to several minutes.")
    assert m is not None and m.versions == ("0.2.0", "0.4.0")


def test_typed_fields(cat):
    m = cat.match("Stats: n=12 rate=3.5 ratio=1e-3 flag=True other=False size=1.2 GB tiny=.5 neg=-7")
    assert m is not None
    assert m.fields == {"n": 12, "rate": 3.5, "ratio": 0.001, "flag": True, "other": False, "size": "1.2 GB", "tiny": 0.5, "neg": -7}
    assert type(m.fields["n"]) is int and type(m.fields["flag"]) is bool
    m = cat.match("Stats: n=None rate=[1, 2] ratio=nan flag=true other=0x10 size=1,000 tiny=v1 neg=3.")
    assert m is not None
    assert m.fields == {"n": "None", "rate": "[1, 2]", "ratio": "nan", "flag": "true", "other": "0x10", "size": "1,000", "tiny": "v1", "neg": 3.0}


def test_placeholder_names_are_unique_and_never_empty(cat):
    m = cat.match("Pair 1 and b and c d")
    assert m is not None and m.fields == {"x": 1, "x_2": "b", "arg2": "c d"}


def test_braces_and_placeholders_inside_words(cat):
    m = cat.match("Received config {model: llama} from the router")
    assert m is not None and m.fields == {"model": "llama"}
    m = cat.match("Capturing layer12 of the draft model")
    assert m is not None and m.fields == {"i": 12}


def test_an_empty_placeholder_collapses_with_its_space(cat):
    m = cat.match("Loading model  from the local disk")
    assert m is not None and m.fields == {"name": ""}
    m = cat.match("Loading model Qwen/Qwen3-8B from the local disk")
    assert m is not None and m.fields == {"name": "Qwen/Qwen3-8B"}


def test_the_most_specific_template_wins(cat):
    m = cat.match("Scheduler hit an exception: Traceback (most recent call last):")
    assert m is not None and m.source == "srt/managers/scheduler.py:2"
    assert m.fields == {"rest": "(most recent call last):"}
    m = cat.match("Scheduler hit an exception: RuntimeError: CUDA error")
    assert m is not None and m.source == "srt/managers/scheduler.py:1"
    # exact text beats a placeholder, whatever the versions, when no version is given
    m = cat.match("Init torch distributed begin.")
    assert m is not None and m.source == "srt/old.py:10" and m.fields == {}


def test_the_log_version_decides_first(cat):
    assert cat.match("Init torch distributed begin.", version="0.2.0").source == "srt/old.py:10"
    m = cat.match("Init torch distributed begin.", version="0.5.10")
    assert m.source == "srt/new.py:20" and m.fields == {"what": "begin"}
    # no template has the version: the most specific still names it
    assert cat.match("Init torch distributed end.", version="0.1.3").source == "srt/new.py:20"


def test_same_text_in_two_eras_newest_unless_the_version_says(cat):
    line = "Server is ready to accept requests on port 30000"
    assert cat.match(line).source == "srt/entrypoints/http_server.py:9"
    assert cat.match(line, version="0.2.0").source == "server_old.py:5"
    assert cat.match(line, version="0.4.6.post5").versions == ("0.4.6.post5", "0.5.23")
    # a release between mined ones counts as the newest mined one before it
    assert cat.match(line, version="0.4.5").source == "server_old.py:5"
    assert cat.match(line, version="0.4.6.post6").source == "srt/entrypoints/http_server.py:9"
    # a future release counts as the newest mined one; a non-version is ignored
    assert cat.match(line, version="0.7.1").source == "srt/entrypoints/http_server.py:9"
    assert cat.match(line, version="main").source == "srt/entrypoints/http_server.py:9"
    assert cat.match(line, version="").source == "srt/entrypoints/http_server.py:9"


def test_shared_messages_are_not_sglang_only(cat):
    m = cat.match("Downcasting torch.float32 to torch.float16 for the custom allreduce")
    assert m is not None and m.shared == "vllm" and not m.sglang_only


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ("0.5.10", "0.5.9"),
        ("0.5.10.post1", "0.5.10"),
        ("0.5.10", "0.5.10rc1"),
        ("0.4.6.post5", "0.4.6.post4"),
        ("v0.3.1", "0.3.0"),
        ("1.0", "0.5.23"),
    ],
)
def test_version_order(a, b):
    assert catalog.version_key(a) > catalog.version_key(b)


def test_version_key_edge_cases():
    assert catalog.version_key("0.5") == catalog.version_key("0.5.0")
    assert catalog.version_key("0.4.1+cu121") == catalog.version_key("0.4.1")
    assert catalog.version_key("main") is None and catalog.version_key("") is None


# ---- a missing or corrupt file


def test_catalogue_error_is_an_internal_error():
    assert issubclass(CatalogueError, InternalError) and CatalogueError.exit_code is ExitCode.INTERNAL


def test_missing_file_names_it(tmp_path):
    p = tmp_path / "nope.json.gz"
    with pytest.raises(CatalogueError, match="nope.json.gz"):
        catalog.load(p)


@pytest.mark.parametrize(
    "payload",
    [
        b"\x1f\x8b\x08\x00 not really gzip",
        "gzip-ok-json-bad",
        {"schema": 2, "releases": [], "templates": []},
        {"schema": 1, "templates": []},
        {"schema": 1, "releases": RELEASES, "templates": [{"p": []}]},
        {"schema": 1, "releases": RELEASES, "templates": [T("Load weight begin. avail mem={} GB", ["m"], (0, 9))]},
        [1, 2, 3],
    ],
    ids=["bad-gzip", "bad-json", "schema", "no-releases", "no-text", "bad-versions", "not-an-object"],
)
def test_corrupt_file_names_it(tmp_path, payload):
    p = tmp_path / "broken.json.gz"
    if isinstance(payload, bytes):
        p.write_bytes(payload)
    elif isinstance(payload, str):
        write(p, payload.encode())
    else:
        write(p, payload)
    with pytest.raises(CatalogueError, match="broken.json.gz"):
        catalog.load(p)


# ---- the shipped catalogue, on real lines

SAMPLE = FIXTURES / "catalog" / "sample.log"
PREFIX = re.compile(r"\[(?:gpu=\d+|[^\]]*\d\d:\d\d:\d\d[^\]]*)\] ")

# (template, source module) per `# sglang` line of the sample, in order: 0.2.13, 0.3.x, 2024, 0.5.x
EXPECTED = [
    ("Init nccl begin.", "srt/model_executor/model_runner.py"),
    ("Load weight begin. avail mem={} GB", "srt/model_executor/model_runner.py"),
    ("max_total_num_tokens={}, max_prefill_tokens={}, max_running_requests={}, context_len={}", "srt/managers/scheduler.py"),
    ("Capture cuda graph begin. This can take up to several minutes.", "srt/model_executor/model_runner.py"),
    ("Exception in run_tp_server:", "srt/managers/tp_worker.py"),
    ("Processor tokenizer for {}", "srt/utils/hf_transformers/processor.py"),
    ("Prefill transfer failed for request rank={}", "srt/disaggregation/prefill.py"),
    ("Scheduler hit an exception: {}", "srt/managers/scheduler.py"),
    ("Received sigquit from a child process.", "srt/entrypoints/engine.py"),
]


def sample() -> tuple[list[str], list[str]]:
    ours: list[str] = []
    other: list[str] = []
    kind = None
    for line in SAMPLE.read_text().splitlines():
        if line.startswith("# "):
            kind = line.split()[1]
            continue
        (ours if kind == "sglang" else other).append(PREFIX.sub("", line, count=1))
    return ours, other


def test_the_shipped_catalogue_loads():
    cat = catalog.load()
    assert cat is catalog.load()
    assert cat.releases[0] == "0.1.3" and len(cat.releases) > 100
    assert len(cat) > 10_000
    assert sum(cat.dropped.values()) == cat.total - len(cat) > 0


def test_real_sglang_messages_are_named():
    cat = catalog.load()
    ours, _ = sample()
    assert len(ours) == len(EXPECTED)
    for message, (template, module) in zip(ours, EXPECTED):
        m = cat.match(message)
        assert m is not None, message
        assert m.template.startswith(template) and m.source.split(":")[0] == module, (message, m)
        assert m.sglang_only


def test_other_programs_lines_are_not_sglang_only_matches():
    cat = catalog.load()
    _, other = sample()
    assert len(other) == 3
    for line in other:
        m = cat.match(line)
        assert m is None or not m.sglang_only, (line, m)


def test_the_log_prefix_source_line_picks_among_matches(tmp_path):
    data = {
        "schema": 1,
        "releases": ["0.5.8", "0.5.22"],
        "templates": [
            {"t": "Setting page size to 64 for DeepSeek DSA.", "p": [], "l": "warning", "k": "log", "s": "srt/a/deepseek_v2.py:138", "v": [0, 0]},
            {"t": "Setting page size to {} for DeepSeek DSA.", "p": ["page_size"], "l": "warning", "k": "log", "s": "srt/b/deepseek_v2.py:173", "v": [1, 1]},
        ],
    }
    cat = catalog.Catalogue(data)
    msg = "Setting page size to 64 for DeepSeek DSA."
    assert cat.match(msg).source.endswith(":138")  # the most specific, without a hint
    assert cat.match(msg, source="deepseek_v2.py:173").fields == {"page_size": 64}
    assert cat.match(msg, source="other.py:1").source.endswith(":138")


# ---- the index: what the matcher needs, computed by the generator (mine.dumps) for the shipped file


def _old_index(data) -> tuple[list[dict], list[list[int]]]:
    """The kept templates in preference order and each key piece's ranks, as the catalogue computed
    them on every load before the index (an independent check of ``build_index``)."""
    kept = []
    for i, raw in enumerate(data["templates"]):
        if (catalog._library_verdict if raw.get("lib") else catalog._verdict)(raw["t"]) is None:
            t = raw["t"]
            kept.append(((-(len(t) - t.count(" ") - 2 * t.count("{}")), 1 if raw.get("lib") else 0, -raw["v"][1], -raw["v"][0], i), raw))
    kept.sort(key=lambda x: x[0])
    by_piece: dict[str, list[int]] = {}
    for rank, (_key, raw) in enumerate(kept):
        by_piece.setdefault(catalog._key_piece(raw["t"])[: catalog.KEY_CHARS], []).append(rank)
    return [raw for _k, raw in kept], list(by_piece.values())


def test_the_shipped_index_is_that_of_its_templates():
    data = json.loads(gzip.decompress(catalog._shipped().read_bytes()))
    assert data["index"] == catalog.build_index(data["templates"], len(data["releases"]))  # (written by `make catalog`: tools/catalog/mine.py)
    cat = catalog.load()
    assert cat.releases == tuple(data["releases"]) and cat.vllm_releases == tuple(data["vllm_releases"])
    assert len(cat) and isinstance(cat._raw.templates, catalog._Lines)  # (its templates are decoded when needed)
    kept, pieces = _old_index(data)
    cat._build()
    assert list(cat._raw) == kept and [list(g) for g in cat._pieces] == pieces
    assert sum(cat.dropped.values()) == cat.total - len(cat)


def test_an_indexed_file_matches_as_one_without(tmp_path):
    import importlib.util
    import sys

    from conftest import ROOT

    spec = importlib.util.spec_from_file_location("catalog_mine_for_index", ROOT / "tools" / "catalog" / "mine.py")
    mine = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mine
    spec.loader.exec_module(mine)
    data = {"schema": 1, "releases": RELEASES, "vllm_releases": ["0.6.0"], "templates": sorted(TEMPLATES, key=lambda t: (t["t"], t["l"]))}
    path = tmp_path / "indexed.json.gz"
    path.write_bytes(mine.dumps(data))
    indexed, plain = catalog.load(path), Catalogue(data)
    assert indexed._body is not None and indexed.releases == plain.releases and indexed.vllm_releases == plain.vllm_releases  # (its head only)
    assert indexed.dropped == plain.dropped and len(indexed) == len(plain) and isinstance(indexed._raw.templates, catalog._Lines)
    kept, _pieces = _old_index(data)
    assert list(indexed._raw) == kept == list(plain._raw)
    for message in [
        "Load weight begin. avail mem=75.12 GB",
        "Init torch distributed begin.",
        "Scheduler hit an exception: Traceback x",
        "Received config {model: m} from the router",
        "nothing at all",
    ]:
        for version in (None, "0.2.0", "0.5.23"):
            assert indexed.match(message, version) == plain.match(message, version), (message, version)
    assert indexed.sources() == plain.sources()


def test_a_corrupt_index_or_template_line_names_the_file(tmp_path):
    data = {"schema": 1, "releases": RELEASES, "templates": [T("Load weight begin. avail mem={} GB", ["m"]), T("Init torch distributed begin.", [])]}
    index = catalog.build_index(data["templates"], len(RELEASES))
    head = json.dumps({"schema": 1, "releases": RELEASES, "index": index | {"order": [0]}})[:-1] + ',"templates":['
    lines = [json.dumps(t) for t in data["templates"]]
    short = write(tmp_path / "short.json.gz", (head + "\n" + ",\n".join(lines) + "\n]}\n").encode())
    with pytest.raises(CatalogueError, match="short.json.gz"):
        catalog.load(short)
    head = json.dumps({"schema": 1, "releases": RELEASES, "index": index})[:-1] + ',"templates":['
    bad = write(tmp_path / "bad-line.json.gz", (head + "\n" + lines[0][:-3] + ",\n" + lines[1] + "\n]}\n").encode())
    cat = catalog.load(bad)  # (a template is decoded when a message needs it)
    with pytest.raises(CatalogueError, match="bad-line.json.gz"):
        cat.match("Load weight begin. avail mem=1 GB")


def test_the_releases_are_read_without_the_templates():
    """sglog.runs.formats asks the catalogue only for its releases: load() reads the shipped file's
    head, and the rest when a template is first needed."""
    catalog._cache.clear()
    try:
        cat = catalog.load()
        assert cat._body is not None and cat.releases[0] == "0.1.3" and cat.release_index("0.5.9") is not None
        assert cat.match("Load weight begin. avail mem=75.12 GB") is not None and cat._body is None
    finally:
        catalog._cache.clear()


# ------------------------------------------------------------------ a paste cut mid-line


def _tails_catalogue():
    templates = [
        {"t": "Loaded {} weights in {} s, and the KV pool holds {} tokens", "p": ["model", "seconds", "tokens"], "l": "info", "k": "log", "s": "srt/a.py:1", "v": [0, 1]},
        {"t": "{} is ready", "p": ["what"], "l": "info", "k": "log", "s": "srt/b.py:2", "v": [0, 1]},
    ]
    return catalog.Catalogue({"schema": 1, "releases": ["0.4.0", "0.5.0"], "templates": templates}, "<test>")


def test_a_message_cut_at_its_start_is_named_by_its_rest():
    """A paste that begins inside a placeholder's value: the fields after the cut are read."""
    c = _tails_catalogue()
    m = c.match_tail("ama-3-8B weights in 3.25 s, and the KV pool holds 81920 tokens")
    assert m is not None and m.template.startswith("Loaded {} weights") and m.fields == {"seconds": 3.25, "tokens": 81920}
    assert c.match_tail("the KV pool holds 81920 tokens") is None  # (the rest after the cut keeps too few constants)
    assert c.match_tail("nothing of the kind") is None


def test_only_a_files_first_line_is_read_as_a_cut_message(tmp_path):
    """Corpus 206's first line is the end of the scheduler's watchdog dump (its reqs list cut);
    the same text on a later line is not taken for one."""
    from conftest import REAL

    first = next(REAL.glob("206-*.log")).read_text(encoding="utf-8").split("\n", 1)[0]
    log = tmp_path / "x.log"
    log.write_text(first + "\n[2025-06-26 07:25:31 DP4 TP4] Watchdog timeout (self.watchdog_timeout=300)\n" + first + "\n", encoding="utf-8")
    (run,) = sglog.load(log)
    e1, *_, e3 = [e for e in run.events if e.kind != "blank"]
    assert e1.kind == "sglang_message" and e1.get("cut") == "start" and e1.get("available_size") == 798917 and e1.get("evictable_size") == 0
    assert e3.kind == "unparsed"


# ---- the libraries SGLang runs (tools/catalog/mine.py LIBRARIES): their messages are theirs


def _with_library() -> Catalogue:
    return catalog.Catalogue(
        {
            "schema": 1,
            "releases": ["0.1.3", "0.4.0", "0.5.23"],
            "templates": [
                T("Application startup complete.", [], (0, 2), "uvicorn/lifespan/on.py:62", pkg="uvicorn", pv=["0.25.0", "0.55.0"], lib=1),
                T("Application startup complete{}", ["rest"], (2, 2), "srt/entrypoints/http_server.py:10"),
                T("Loading adapter weights from {} led to unexpected keys", ["where"], (0, 2), "transformers/integrations/peft.py:287", pkg="transformers", pv=["4.36.2", "5.25.0"], lib=1),
                T("Loading {} from {}", ["what", "where"], (2, 2), "multimodal_gen/loader.py:5"),
                T("Loading weights with BitsAndBytes quantization. May take a while ...", [], (1, 2), "srt/model_loader/loader.py:2890"),
                T("Loading weights with {} quantization.{}", ["how", "rest"], (0, 2), "transformers/convert.py:71", pkg="transformers", pv=["4.36.2", "5.25.0"], lib=1),
                T("server started on [{}]:{}", ["host", "port"], (0, 2), "rpyc/utils/server.py:251", pkg="rpyc", pv=["5.3.1", "6.0.2"], lib=1),
                T("Started the server process [{}]", ["pid"], (0, 2), "uvicorn/server.py:76", pkg="uvicorn", pv=["0.25.0", "0.55.0"], lib=1),
                T("Started the server process [{}]", ["pid"], (1, 1), "srt/server.py:3"),
                T("welcome {}", ["who"], (0, 2), "rpyc/core/protocol.py:9", pkg="rpyc", pv=["5.3.1", "6.0.2"], lib=1),
            ],
        }
    )


def test_a_library_message_is_named_with_the_library_and_its_releases():
    m = _with_library().match("server started on [0.0.0.0]:10007")
    assert m.library == "rpyc" and m.package is None and m.versions == ("5.3.1", "6.0.2")
    assert m.fields == {"host": "0.0.0.0", "port": 10007}
    assert not m.sglang_only  # (someone else's message: no evidence of SGLang)


def test_a_library_template_names_a_line_only_when_more_specific_than_every_sglang_one():
    cat = _with_library()
    # (SGLang's template as specific: SGLang's, in any release)
    assert cat.match("Started the server process [7]").library is None
    assert cat.match("Started the server process [7]", "0.5.23").library is None
    # (the library's exact wording, more specific than SGLang's: the library's)
    assert cat.match("Application startup complete.").library == "uvicorn"
    assert cat.match("Application startup complete, at last").library is None
    # (the library's more specific than SGLang's generic one: the library's, in any release)
    for version in (None, "0.5.23", "0.1.3"):
        assert cat.match("Loading adapter weights from state_dict led to unexpected keys", version).library == "transformers"
    # (SGLang's exact wording beats a library's looser one, even out of the log's releases)
    line = "Loading weights with BitsAndBytes quantization. May take a while ..."
    for version in (None, "0.1.3", "0.5.23"):
        m = cat.match(line, version)
        assert m.library is None and m.source == "srt/model_loader/loader.py:2890", version
    m = cat.match(line, "0.1.3", source="other.py:1")
    assert m.library is None and m.source == "srt/model_loader/loader.py:2890"
    # (the logger prefix's file.py:N names the library's line)
    assert cat.match("Application startup complete.", source="on.py:62").library == "uvicorn"


def test_a_librarys_generic_wording_is_not_kept():
    cat = _with_library()
    assert cat.match("welcome to the cluster") is None
    assert cat.dropped["too-few-constants"] == 1


def test_an_exception_sglang_raised_is_named_by_sglangs_templates_only():
    cat = _with_library()
    assert cat.match("Loading adapter weights from state_dict led to unexpected keys", libraries=False).source == "multimodal_gen/loader.py:5"
    assert cat.match("server started on [0.0.0.0]:1", libraries=False) is None


def test_an_sglang_raise_template_is_not_lost_to_a_library_one():
    from sglog.read.parse import RecordParser

    p = RecordParser("x.log")
    p.version = "0.4.0"  # (the template is newer than the log's release; a library's matches too)
    got = p.raised("Loading FP8 shared expert weights into FP4 fused MoE weights requires block-FP8 weight_block_size.", "srt/models/deepseek_v2.py:1")
    assert got is not None and got["source"].startswith("srt/layers/moe/"), got


def test_library_sources_are_not_sglang_modules():
    assert sorted(_with_library().sources()) == ["multimodal_gen/loader.py:5", "srt/entrypoints/http_server.py:10", "srt/model_loader/loader.py:2890", "srt/server.py:3"]
    libs = ("uvicorn/", "rpyc/", "huggingface_hub/", "transformers/", "flashinfer/")
    assert not [s for s in catalog.load().sources() if s.startswith(libs)]


# Real messages of the libraries, as the shipped catalogue names them (checked against the wheels).
LIBRARY_LINES = [
    ("server started on [0.0.0.0]:10007", "rpyc", "rpyc/utils/server.py"),
    ("Waiting for application startup.", "uvicorn", "uvicorn/lifespan/on.py"),
    ("Special tokens have been added in the vocabulary, make sure the associated word embeddings are fine-tuned or trained.", "transformers", "transformers/tokenization_utils_base.py"),
]


@pytest.mark.parametrize(("line", "library", "module"), LIBRARY_LINES)
def test_the_shipped_catalogue_names_library_messages(line, library, module):
    m = catalog.load().match(line)
    assert m is not None and m.library == library and m.source.split(":")[0] == module, m
    assert not m.sglang_only


def test_a_library_line_is_a_library_log_and_no_evidence_of_sglang(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("server started on [0.0.0.0]:10007\nSpecial tokens have been added in the vocabulary, make sure the associated word embeddings are fine-tuned or trained.\n")
    from sglog.read.parse import parse_file

    parsed = parse_file(str(log))
    a, b = (e for e in parsed.events if e.kind != "blank")
    assert (a.kind, a.get("library"), a.get("host"), a.get("port"), a.get("source").split(":")[0]) == ("library_log", "rpyc", "0.0.0.0", 10007, "rpyc/utils/server.py")
    assert a.get("message") == "server started on [0.0.0.0]:10007" and a.get("versions") and a.get("template") == "server started on [{}]:{}"
    assert (b.kind, b.get("library")) == ("library_log", "transformers")
    assert parsed.sources()["third_party"] == 2 and parsed.unparsed == 0
    from sglog.diagnose import looks_like_sglang

    ok, doc = looks_like_sglang([parsed])
    assert ok and doc["files"][0]["verdict"] == "no_sglang_specific_line"  # (diagnosed, and said so)


def test_a_library_line_behind_sglangs_prefix_keeps_the_prefix(tmp_path):
    log = tmp_path / "x.log"
    log.write_text("[2025-01-01 10:00:00 TP0] Special tokens have been added in the vocabulary, make sure the associated word embeddings are fine-tuned or trained.\n")
    (run,) = sglog.load(log)
    (e,) = [e for e in run.events if e.kind != "blank"]
    assert e.kind == "library_log" and e.get("library") == "transformers" and e.rank is not None and e.ts is not None


def test_a_first_line_cut_inside_a_library_message_is_the_librarys(tmp_path, monkeypatch):
    cat = catalog.Catalogue(
        {
            "schema": 1,
            "releases": ["0.1.3", "0.5.23"],
            "templates": [
                T("Downloading shard {} of the checkpoint from the model hub now", ["i"], (0, 1), "huggingface_hub/file_download.py:9", pkg="huggingface-hub", pv=["0.20.3", "2.4.0"], lib=1)
            ],
        }
    )
    from sglog.read import evidence, records
    from sglog.read.parse import parse_file

    monkeypatch.setattr(catalog, "load", lambda path=None: cat)
    log = tmp_path / "x.log"
    log.write_text("7 of the checkpoint from the model hub now\n")
    try:
        (e,) = [e for e in parse_file(str(log)).events if e.kind != "blank"]
    finally:  # (what was cached from this catalogue)
        records._catalogued.cache_clear()
        evidence._sglang_modules.cache_clear()
    assert (e.kind, e.get("library"), e.get("cut")) == ("library_log", "huggingface-hub", "start")
