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


# ---------------------------------------------------------------- messages built by a function

extract = mine.extract

SERVER_ARGS = """\
import dataclasses


@dataclasses.dataclass
class ServerArgs:
    disable_radix_cache: bool = False

    def get_optional_modes_logging(self):
        return (
            f"disable_radix_cache={self.disable_radix_cache}, "
            f"enable_flashinfer={self.enable_flashinfer}"
        )

    def mode_str(self):
        if self.a:
            return "unified"
        elif self.b:
            return "decode"
        text = f"unknown {self.mode}"
        text += " mode"
        return text

    def describe(self):
        return self.name

    def prefix(self):
        return self._prefix()

    def _prefix(self):
        return f"[{self.rank}]"

    async def status(self):
        return "ready"

    def stream(self):
        yield "chunk"


class FlashInfer:
    def backend_name(self):
        return "flashinfer"


class Triton:
    def backend_name(self):
        return "triton"


def copied():
    return f"nccl=={major}.{minor}"


def value_str(v):
    if v is None:
        return "none"
    return str(v)


class Built(Protocol):
    def summary(self) -> str:
        ...  # implemented outside the package


class Check:
    def summary(self):
        return "SP check passed"
"""

RPC = """\
import logging

logger = logging.getLogger(__name__)


def run(server_args, backend, x):
    logger.info(server_args.get_optional_modes_logging())
    logger.warning(f"Mode: {server_args.mode_str()}")
    logger.info(server_args.describe())
    logger.info(f"{server_args.prefix()} started")
    logger.info(f"Attention backend: {backend.backend_name()}")
    logger.info(server_args.status())
    logger.info(server_args.stream())
    logger.info("Fmt " + server_args.mode_str() + " %s", x)
    logger.info(undefined_function())
    print_warning_once(server_args.get_optional_modes_logging())
    print(f"Using {copied()}")
    logger.info(f"Unchanged {str(x.join())} {len(x)}")
    logger.info(f"Value: {value_str(x)}")
    logger.info(f"Built: {x.summary()}")
"""

COPY = "def copied():\n    return f'nccl=={major}.{minor}'\n"


def _by_function(tmp_path: Path, files: dict[str, str]) -> list[tuple]:
    root = tmp_path / "sglang-1.0.0"
    for rel, text in {"sglang/__init__.py": "", "sglang/srt/__init__.py": "", **files}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return extract.mine_location(root, "sglang")["records"]


def test_a_message_built_by_a_function_is_mined_at_the_call(tmp_path: Path) -> None:
    """`logger.info(server_args.get_optional_modes_logging())` (SGLang 0.1.14): the method of a
    class in another module builds the message; its returns are the message's alternatives, at
    the call's level, kind and line; a branching function gives each of its strings (and the
    placeholder-only template the message had stays); `return self.other()` is followed, and
    `return str(v)` is a string of unknown text."""
    records = _by_function(tmp_path, {"sglang/srt/server_args.py": SERVER_ARGS, "sglang/srt/managers/rpc.py": RPC, "sglang/srt/copy.py": COPY})
    rpc = sorted((t, level, kind, line, names) for t, level, kind, path, line, names in records if path == "srt/managers/rpc.py")
    assert rpc == [
        ("Attention backend: {}", "info", "log", 11, ("backend_name",)),
        ("Built: {}", "info", "log", 20, ("summary",)),
        ("Fmt {} {}", "info", "log", 14, ("mode_str", "x")),
        ("Mode: decode", "warning", "log", 8, ()),
        ("Mode: unified", "warning", "log", 8, ()),
        ("Mode: unknown {} mode", "warning", "log", 8, ("mode",)),
        ("Mode: {}", "warning", "log", 8, ("mode_str",)),
        ("Unchanged {} {}", "info", "log", 18, ("join", "len_x")),
        ("Using nccl=={}.{}", "print", "print", 17, ("major", "minor")),
        ("Using {}", "print", "print", 17, ("copied",)),
        ("Value: none", "info", "log", 19, ()),
        ("Value: {}", "info", "log", 19, ("value_str",)),
        ("[{}] started", "info", "log", 10, ("rank",)),
        ("disable_radix_cache={}, enable_flashinfer={}", "info", "log", 7, ("disable_radix_cache", "enable_flashinfer")),
        ("disable_radix_cache={}, enable_flashinfer={}", "warning", "log", 16, ("disable_radix_cache", "enable_flashinfer")),
        ("{} started", "info", "log", 10, ("prefix",)),
    ]
    # the function's own returns are not messages
    assert not [r for r in records if r[3] == "srt/server_args.py"]


def test_a_function_that_returns_something_else_gives_no_template(tmp_path: Path) -> None:
    """A name resolves only if every function of that name returns strings: one returning
    another value (here in a second module), an `async def`, a generator, methods of several
    classes that say different things (a dispatch on the object), or a stub that returns
    nothing (a Protocol's, implemented elsewhere), and the call stays a placeholder."""
    other = "class Named:\n    def get_optional_modes_logging(self):\n        return self.modes\n"
    records = _by_function(tmp_path, {"sglang/srt/server_args.py": SERVER_ARGS, "sglang/srt/managers/rpc.py": RPC, "sglang/srt/named.py": other})
    templates = {r[0] for r in records}
    assert not any(t.startswith("disable_radix_cache") for t in templates)
    assert "Mode: unified" in templates  # other names still resolve
    assert not {"ready", "chunk", "flashinfer", "triton", "Attention backend: flashinfer", "Built: SP check passed"} & templates


def test_calls_resolve_in_one_module_too() -> None:
    source = "def f():\n    return 'Ready: ' + ('fast' if x else 'slow')\nprint(f())\nlogger.info('%s', f())\n"
    assert sorted(extract.mine_source(source, "m.py")) == [
        ("Ready: fast", "info", "log", "m.py", 4, ()),
        ("Ready: fast", "print", "print", "m.py", 3, ()),
        ("Ready: slow", "info", "log", "m.py", 4, ()),
        ("Ready: slow", "print", "print", "m.py", 3, ()),
    ]


def test_a_call_with_too_many_alternatives_stays_a_placeholder() -> None:
    """Each callee is substituted everywhere or nowhere, while the message keeps at most
    MAX_ALTERNATIVES: a second four-way call on top of a four-way one and two branches (32)
    stays `{}`; nothing is cut arbitrarily."""
    source = (
        "def kind():\n    if a: return 'a'\n    if b: return 'b'\n    if c: return 'c'\n    return 'd'\n"
        "def form():\n    if a: return 'x'\n    if b: return 'y'\n    if c: return 'z'\n    return 'w'\n"
        "logger.info(f\"Stats{', room' if r else ''} type={kind()}: {form()}\")\n"
    )
    got = sorted(r[0] for r in extract.mine_source(source, "m.py"))
    assert got == sorted([f"Stats{room} type={k}: {{}}" for room in ("", ", room") for k in "abcd"] + [f"Stats{room} type={{}}: {{}}" for room in ("", ", room")])


def test_mining_with_functions_is_deterministic(tmp_path: Path) -> None:
    """The same records, in the same order, from a folder and from a wheel of the same files."""
    files = {"sglang/srt/server_args.py": SERVER_ARGS, "sglang/srt/managers/rpc.py": RPC, "sglang/srt/copy.py": COPY}
    one = _by_function(tmp_path, files)
    wheel = tmp_path / "sglang-1.0.0-py3-none-any.whl"
    with zipfile.ZipFile(wheel, "w") as zf:
        for rel, text in reversed(list({"sglang/__init__.py": "", "sglang/srt/__init__.py": "", **files}.items())):
            zf.writestr(rel, text)
    two = [tuple(r) for r in extract.mine_location(wheel, "sglang")["records"]]
    assert one == two == _by_function(tmp_path, files)
    assert json.dumps(one)  # cached as JSON by mine.py


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
    head_libraries = shipped.get("libraries") or {}
    assert set(head_libraries) == set(mine.LIBRARIES), head_libraries
    for e in templates:
        assert set(e) <= {"t", "p", "l", "k", "s", "v", "shared", "pkg", "pv", "lib"}, e
        holes = re.sub(r"\{\{|\}\}", "", e["t"])
        assert holes.count("{}") == len(e["p"]) == holes.count("{") == holes.count("}"), e
        assert all(re.fullmatch(r"[a-z_][a-z0-9_]*", n) for n in e["p"]) and len(set(e["p"])) == len(e["p"]), e
        assert re.sub(r"\{\}|\s", "", holes), e  # some constant text
        assert e["t"] == e["t"].strip() and "  " not in e["t"] and "\n" not in e["t"], e
        assert e["l"] in LEVELS and e["k"] in KINDS, e
        assert 0 <= e["v"][0] <= e["v"][1] < len(releases), e
        assert re.fullmatch(r"[\w./-]+\.py:\d+", e["s"]), e
        assert e.get("shared", "vllm") == "vllm", e
        assert "pkg" not in e or "lib" in e or (e["pkg"] in head_packages and len(e["pv"]) == 2 and e["k"] != "raise"), e
        assert "lib" not in e or (e["lib"] == 1 and e["pkg"] in head_libraries and e["k"] in mine.LIBRARY_KINDS and e["pv"][0] in head_libraries[e["pkg"]]), e
        assert "lib" not in e or e["s"].startswith(mine.LIBRARIES[e["pkg"]][0] + "/"), e
    # (975 kB with the matcher's index, +51 kB for sglang-omni's 968 logged messages, +124 kB for
    # the libraries' 2,081)
    assert SHIPPED.stat().st_size < 1_250_000


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


def test_a_library_adds_what_it_logs_warns_and_shows_and_no_other_template_has():
    """``--add-library``: a library's logged, warned and progress messages that no other template
    has, each marked ``lib`` with the library and its releases, valid for any SGLang release; its
    raise messages and prints are left out, and so are SGLang's own wordings; a second run
    replaces the first."""
    catalog = {
        "schema": 1,
        "releases": ["0.4.0", "0.5.0"],
        "vllm_releases": [],
        "templates": [{"t": "Application startup complete.", "p": [], "l": "info", "k": "log", "s": "srt/x.py:1", "v": [0, 1]}],
    }
    rec = lambda t, level, kind, path, line, p=(): [t, level, kind, path, line, list(p)]  # noqa: E731
    mined = {
        "0.25.0": {"records": [rec("Started server process [{}]", "info", "log", "server.py", 70, ["pid"])]},
        "0.30.6": {
            "records": [
                rec("Started server process [{}]", "info", "log", "server.py", 76, ["pid"]),
                rec("Application startup complete.", "info", "log", "lifespan/on.py", 62),  # SGLang's own words: left out
                rec("Invalid HTTP request received.", "warning", "warn", "protocols/http/h11_impl.py", 90),
                rec("Downloading {}", "progress", "progress", "x.py", 3, ["name"]),
                rec("bad value {}", "raise", "raise", "y.py", 3, ["v"]),
                rec("usage: uvicorn {}", "print", "print", "main.py", 4, ["args"]),
            ]
        },
    }
    out = mine.add_library(catalog, "uvicorn", mined)
    added = {t["t"]: t for t in out["templates"] if t.get("lib")}
    assert set(added) == {"Started server process [{}]", "Invalid HTTP request received.", "Downloading {}"}
    assert added["Started server process [{}]"] == {
        "t": "Started server process [{}]",
        "p": ["pid"],
        "l": "info",
        "k": "log",
        "s": "uvicorn/server.py:76",
        "v": [0, 1],
        "pkg": "uvicorn",
        "pv": ["0.25.0", "0.30.6"],
        "lib": 1,
    }
    assert out["libraries"] == {"uvicorn": ["0.25.0", "0.30.6"]} and len(out["templates"]) == 4
    assert mine.add_library(out, "uvicorn", mined)["templates"] == out["templates"]
    assert [t["t"] for t in out["templates"]] == sorted(t["t"] for t in out["templates"])


def test_a_library_sample_takes_the_newest_final_release_of_each_minor_from_its_first():
    assert mine.library_sample(["4.35.2", "4.36.0", "4.36.2", "4.37.0rc1", "4.37.1", "5.0.0.dev0", "5.0.0"], "4.36") == ["4.36.2", "4.37.1", "5.0.0"]
    assert mine.library_sample(["5.3.1", "6.0.0", "6.0.2"], "5.3") == ["5.3.1", "6.0.2"]


def test_a_librarys_modules_that_never_run_in_a_server_are_skipped(tmp_path: Path) -> None:
    skip = mine.library_skips("transformers")
    assert skip("models/llama/modeling_llama.py") and skip("trainer.py") and skip("generation/utils.py") and skip("pipelines/base.py")
    assert not skip("models/llama/configuration_llama.py") and not skip("tokenization_utils_base.py") and not skip("generation/configuration_utils.py")
    assert not mine.library_skips("rpyc")("utils/server.py")
    root = tmp_path / "transformers"
    (root / "models" / "llama").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    code = "import logging\nlogger = logging.getLogger(__name__)\n"
    (root / "models" / "llama" / "configuration_llama.py").write_text(code + "logger.warning('rope_scaling is ignored for this config')\nprint('a print of the library')\n")
    (root / "models" / "llama" / "modeling_llama.py").write_text(code + "logger.warning('the modeling code of llama warns')\n")
    got = mine.extract.mine_location(tmp_path, "transformers", prints=lambda rel: False, skip=skip)
    assert [r[0] for r in got["records"]] == ["rope_scaling is ignored for this config"] and got["files"] == 2
