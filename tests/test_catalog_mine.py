"""The catalogue generator (tools/catalog/mine.py) and the catalogue it shipped.

The generator is mined here from a synthetic source tree (no network); the shipped file is
checked for its contract (schema 1) and for real SGLang messages with their release ranges.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import sys
import zipfile
from pathlib import Path

import pytest

from conftest import ROOT

SHIPPED = ROOT / "sglog" / "read" / "data" / "catalog.json.gz"


def _load(name: str, path: Path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


mine = _load("catalog_mine", ROOT / "tools" / "catalog" / "mine.py")

RUNNER = """\
import logging
import warnings
from tqdm import tqdm

logger = logging.getLogger(__name__)


class Stats:
    def __str__(self):
        return f"Stats(tokens={self.num_tokens})"


def load(self, reqs, x, bs, a, b, q, elapsed):
    logger.info(f"Load weight begin. {x=} avail mem={self.avail_mem:.2f} GB")
    logger.warning("Queue %s has %d reqs (%.1f%%)", self.name, len(reqs), 3.5)
    logger.error("Chunk {} of {name}".format(bs, name=self.model_name))
    logger.debug("Part one, " + str(bs) + " part two" " and three")
    logger.info("mode: " + ("fast" if x else "slow"))
    logger.info("Took %.2f s for %s" % (elapsed, self.model_path))
    msg = f"Capture cuda graph begin. bs={bs}"
    logger.info(msg)
    prefix = "Scheduler"
    logger.info(f"{prefix}: started")
    line = f"Decode batch. #running-req: {len(reqs)}, "
    if x:
        line += f"#token: {x}, "
        line += "more"
    logger.info(line)
    warning_once("Deprecated flag %s", x)
    log_info_on_rank0(logger, f"KV Cache is allocated. #tokens: {x}")
    warnings.warn(f"Slow path for {x}", UserWarning)
    print(f"ready on port {self.port}")
    for _ in tqdm(reqs, desc=f"Capturing batches (bs={bs})"):
        pass
    logger.info("Multi-line first\\nsecond line {x}")
    logger.info(f"\\n   \\nAfter   blank   {x}\\nignored")
    logger.info("no args keeps %s literally")
    logger.info(f"{a.size} vs {b.size} {len(q)} {self.maxTokens}")
    logger.info(f"sum {x + 1} and {(lambda: 0)()}")
    logger.info(x)
    logging.getLogger("sglang").setLevel(logging.INFO)
    raise ValueError(f"Bad value: {x!r}")
"""

LANG = """\
import logging
logger = logging.getLogger(__name__)
print("not a server message")
logger.info("Lang module loaded")
"""


def _release(files: dict[str, str | bytes]) -> dict[str, bytes]:
    base = {
        "sglang/__init__.py": "",
        "sglang/launch.py": 'print("Top-level print")\n',
        "sglang/srt/__init__.py": "",
        "sglang/srt/bom.py": b"\xef\xbb\xbfimport logging\nlogging.info('BOM file message')\n",
        "sglang/srt/bad.py": "def f(:\n    pass\n",
        "sglang/test/test_x.py": "import logging\nlogging.info('test message')\n",
        "sglang/srt/tests/helper.py": "import logging\nlogging.info('test helper message')\n",
        "README.md": "not a module",
    }
    base.update(files)
    return {k: v.encode() if isinstance(v, str) else v for k, v in base.items()}


@pytest.fixture
def releases(tmp_path: Path) -> tuple[dict[str, Path], dict[str, Path]]:
    """0.1.0 as a folder, 0.2.0 as a wheel (one line moved, one message added, one gone)."""
    old = tmp_path / "sglang-0.1.0"
    for rel, data in _release({"sglang/srt/runner.py": RUNNER, "sglang/lang/other.py": LANG}).items():
        (old / rel).parent.mkdir(parents=True, exist_ok=True)
        (old / rel).write_bytes(data)
    new = tmp_path / "sglang-0.2.0-py3-none-any.whl"
    runner = RUNNER.replace("import logging\n", "import logging\nlogging.warning('New in two')\n", 1)
    with zipfile.ZipFile(new, "w") as zf:
        for rel, data in _release({"sglang/srt/runner.py": runner}).items():
            zf.writestr(rel, data)
    vllm = tmp_path / "vllm-0.9.0"
    (vllm / "vllm").mkdir(parents=True)
    (vllm / "vllm" / "__init__.py").write_text("")
    (vllm / "vllm" / "x.py").write_text("import logging\nlogger = logging.getLogger()\nlogger.info('Scheduler: started')\n")
    return {"0.2.0": new, "0.1.0": old}, {"0.9.0": vllm}


# (template, names, level, kind, line in 0.2.0, version range); the module is srt/runner.py
EXPECTED = [
    ("Bad value: {}", ["x"], "raise", "raise", 43, [0, 1]),
    ("Capture cuda graph begin. bs={}", ["bs"], "info", "log", 22, [0, 1]),
    ("Capturing batches (bs={})", ["bs"], "progress", "progress", 34, [0, 1]),
    ("Chunk {} of {}", ["bs", "name"], "error", "log", 17, [0, 1]),
    ("Decode batch. #running-req: {}, {}", ["len_reqs", "tail"], "info", "log", 29, [0, 1]),
    ("Decode batch. #running-req: {},", ["len_reqs"], "info", "log", 29, [0, 1]),
    ("Deprecated flag {}", ["x"], "warning", "log", 30, [0, 1]),
    ("After blank {}", ["x"], "info", "log", 37, [0, 1]),
    ("KV Cache is allocated. #tokens: {}", ["x"], "info", "log", 31, [0, 1]),
    ("Load weight begin. x={} avail mem={} GB", ["x", "avail_mem"], "info", "log", 15, [0, 1]),
    ("Multi-line first", [], "info", "log", 36, [0, 1]),
    ("New in two", [], "warning", "log", 2, [1, 1]),
    ("Part one, {} part two and three", ["bs"], "debug", "log", 18, [0, 1]),
    ("Queue {} has {} reqs ({}%)", ["name", "len_reqs", "arg2"], "warning", "log", 16, [0, 1]),
    ("Scheduler: started", [], "info", "log", 24, [0, 1]),
    ("Slow path for {}", ["x"], "warning", "warn", 32, [0, 1]),
    ("Stats(tokens={})", ["num_tokens"], "str", "str", 11, [0, 1]),
    ("Took {} s for {}", ["elapsed", "model_path"], "info", "log", 20, [0, 1]),
    ("mode: fast", [], "info", "log", 19, [0, 1]),
    ("mode: slow", [], "info", "log", 19, [0, 1]),
    ("no args keeps %s literally", [], "info", "log", 38, [0, 1]),
    ("ready on port {}", ["port"], "print", "print", 33, [0, 1]),
    ("sum {} and {}", ["x", "arg1"], "info", "log", 40, [0, 1]),
    ("{} vs {} {} {}", ["size", "size_2", "len_q", "max_tokens"], "info", "log", 39, [0, 1]),
]
OTHER = [  # messages outside srt/runner.py: (template, level, kind, source, range)
    ("BOM file message", "info", "log", "srt/bom.py:2", [0, 1]),
    ("Lang module loaded", "info", "log", "lang/other.py:4", [0, 0]),
    ("Top-level print", "print", "print", "launch.py:1", [0, 1]),
]


def test_mines_every_construction(releases, tmp_path: Path) -> None:
    sglang, vllm = releases
    out = tmp_path / "catalog.json.gz"
    catalog = mine.generate(sglang, vllm, out, jobs=1)
    data = json.loads(gzip.decompress(out.read_bytes()))
    assert data["schema"] == 1
    assert data["releases"] == ["0.1.0", "0.2.0"]
    assert data["vllm_releases"] == ["0.9.0"]
    want = [{"t": t, "p": p, "l": lv, "k": k, "s": f"srt/runner.py:{line}", "v": v} for t, p, lv, k, line, v in EXPECTED] + [
        {"t": t, "p": [], "l": lv, "k": k, "s": s, "v": v} for t, lv, k, s, v in OTHER
    ]
    for entry in want:
        if entry["t"] == "Scheduler: started":
            entry["shared"] = "vllm"
    assert data["templates"] == sorted(want, key=lambda e: (e["t"], e["l"]))
    assert catalog["_stats"]["unparsed"] == ["0.1.0:srt/bad.py", "0.2.0:srt/bad.py"]


def test_output_is_deterministic(releases, tmp_path: Path) -> None:
    sglang, vllm = releases
    one, two = tmp_path / "one.json.gz", tmp_path / "two.json.gz"
    mine.generate(sglang, vllm, one, jobs=2)
    mine.generate(dict(reversed(list(sglang.items()))), vllm, two, jobs=1)
    assert one.read_bytes() == two.read_bytes()
    assert one.read_bytes()[4:8] == b"\0\0\0\0"  # gzip mtime


def test_vllm_sample_takes_the_last_patch_of_each_minor() -> None:
    versions = ["0.1.7", "0.2.0", "0.2.7", "0.3.0", "0.8.5", "0.8.5.post1", "0.10.1.1", "0.10.2", "0.33.0"]
    assert mine.vllm_sample(versions) == ["0.2.7", "0.3.0", "0.8.5.post1", "0.10.2", "0.33.0"]


# ---------------------------------------------------------------- the shipped catalogue

LEVELS = {"debug", "info", "warning", "error", "critical", "exception", "print", "progress", "str", "raise"}
KINDS = {"log", "warn", "print", "progress", "str", "raise"}


@pytest.fixture(scope="module")
def shipped() -> dict:
    return json.loads(gzip.decompress(SHIPPED.read_bytes()))


def test_shipped_catalogue_is_well_formed(shipped: dict) -> None:
    assert shipped["schema"] == 1
    releases, templates = shipped["releases"], shipped["templates"]
    assert len(releases) > 100 and releases[0] == "0.1.3"
    assert [mine.version_key(v) for v in releases] == sorted(mine.version_key(v) for v in releases)
    assert shipped["vllm_releases"] == sorted(shipped["vllm_releases"], key=mine.version_key)
    keys = [(e["t"], e["l"]) for e in templates]
    assert keys == sorted(set(keys))
    head_packages = shipped.get("packages") or {}
    assert set(head_packages) <= set(mine.ECOSYSTEM), head_packages
    for e in templates:
        assert set(e) <= {"t", "p", "l", "k", "s", "v", "shared", "pkg", "pv"}, e
        holes = re.sub(r"\{\{|\}\}", "", e["t"])
        assert holes.count("{}") == len(e["p"]) == holes.count("{") == holes.count("}"), e
        assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", n) for n in e["p"]) and len(set(e["p"])) == len(e["p"]), e
        assert re.sub(r"\{\}|\s", "", holes), e  # some constant text
        assert e["t"] == e["t"].strip() and "  " not in e["t"] and "\n" not in e["t"], e
        assert e["l"] in LEVELS and e["k"] in KINDS, e
        assert 0 <= e["v"][0] <= e["v"][1] < len(releases), e
        assert re.fullmatch(r"[\w./-]+\.py:\d+", e["s"]), e
        assert e.get("shared", "vllm") == "vllm", e
        assert "pkg" not in e or (e["pkg"] in head_packages and len(e["pv"]) == 2 and e["k"] != "raise"), e
    # (975 kB with the matcher's index, +51 kB for sglang-omni's 968 logged messages)
    assert SHIPPED.stat().st_size < 1_100_000


# Real messages, with the releases that have them (checked against the wheels on PyPI).
KNOWN = [
    ("[gpu_id={}] Load weight begin. avail mem={} GB", "info", "0.1.17", "0.2.6"),
    ("The server is fired up and ready to roll!", "info", "0.1.18", "0.5.23"),
    ("Load weight begin. avail mem={} GB", "info", "0.2.14", "0.5.23"),
    ("Capture cuda graph begin. This can take up to several minutes.", "info", "0.2.14", "0.4.3.post2"),
    (
        "Decode batch. #running-req: {}, #token: {}, token usage: {}, gen throughput (token/s): {}, #queue-req: {}",
        "info",
        "0.2.14",
        "0.4.6.post3",
    ),
    ("Init torch distributed begin.", "info", "0.3.3.post1", "0.5.20"),
    ("KV Cache is allocated. #tokens: {}, K size: {} GB, V size: {} GB", "info", "0.4.3.post3", "0.5.12.post1"),
    ("Capturing batches (bs={} avail_mem={} GB)", "progress", "0.4.8.post1", "0.5.23"),
    ("KV Cache is allocated. dtype: {}, #tokens: {}, KV size: {} GB", "info", "0.5.13", "0.5.23"),
]


@pytest.mark.parametrize(("t", "level", "first", "last"), KNOWN)
def test_shipped_catalogue_names_known_messages(shipped: dict, t: str, level: str, first: str, last: str) -> None:
    found = {(e["t"], e["l"]): e for e in shipped["templates"]}
    entry = found[(t, level)]
    releases = shipped["releases"]
    assert (releases[entry["v"][0]], releases[entry["v"][1]]) == (first, last)


def test_an_ecosystem_package_adds_what_it_logs_and_sglang_does_not():
    """``--add-package``: the package's logged messages that SGLang's own templates lack, each
    marked with the package and its releases, and valid for any SGLang release; raise messages
    and SGLang's own wordings are left out; a second run replaces the first."""
    catalog = {
        "schema": 1,
        "releases": ["0.4.0", "0.5.0"],
        "vllm_releases": [],
        "templates": [{"t": "Load weight begin. avail mem={} GB", "p": ["avail_mem"], "l": "info", "k": "log", "s": "srt/x.py:1", "v": [0, 1]}],
    }
    rec = lambda t, level, kind, path, line: [t, level, kind, path, line, []]  # noqa: E731
    mined = {
        "0.1.1": {"records": [rec("Stage process {} failed", "error", "log", "pipeline/stage_workers.py", 678)]},
        "0.1.9": {
            "records": [
                rec("Stage process {} failed", "error", "log", "pipeline/stage_workers.py", 680),
                rec("Load weight begin. avail mem={} GB", "info", "log", "x.py", 2),
                rec("bad value {}", "raise", "raise", "y.py", 3),
            ]
        },
    }
    for r in mined.values():
        for x in r["records"]:
            x[5] = ["process_name"] if "{}" in x[0] else []
    out = mine.add_package(catalog, "sglang-omni", mined)
    added = [t for t in out["templates"] if t.get("pkg")]
    assert added == [
        {"t": "Stage process {} failed", "p": ["process_name"], "l": "error", "k": "log", "s": "sglang_omni/pipeline/stage_workers.py:680", "v": [0, 1], "pkg": "sglang-omni", "pv": ["0.1.1", "0.1.9"]}
    ]
    assert out["packages"] == {"sglang-omni": ["0.1.1", "0.1.9"]} and len(out["templates"]) == 2
    assert mine.add_package(out, "sglang-omni", mined)["templates"] == out["templates"]


def test_sglang_omni_messages_are_named_with_their_package(tmp_path):
    """Corpus 216's sglang-omni lines (a package of SGLang's project that runs SGLang's engine)."""
    from sglog.read import catalog

    m = catalog.load().match("Failed to import nixl: No module named 'nixl'. NixlRelay will not work.")
    assert m is not None and m.package == "sglang-omni" and m.source.startswith("sglang_omni/") and m.versions[0].startswith("0.1.")
