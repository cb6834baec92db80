"""Generate sglog's message catalogue from SGLang's own source, across every release on PyPI.

    python tools/catalog/mine.py [--cache DIR] [--out FILE] [--jobs N] [--python PY]

Steps: list the releases (`pip index versions`), download each archive once into a cache
outside the repo (`pip download --no-deps`, wheels first), mine each archive's modules with
`ast` (extract.py, run under the newest Python found so that 3.12+ syntax parses), merge the
templates across releases, mark the ones vLLM prints too, and write
`sglog/read/data/catalog.json.gz`: sorted, no timestamps, gzip with mtime=0, so a rerun on
the same releases writes the same bytes. See README.md beside this file for the format.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import extract  # noqa: E402  (a sibling module; the tool is run as a script, not installed)

REPO = HERE.parent.parent
OUT = REPO / "sglog" / "read" / "data" / "catalog.json.gz"
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "sglog-catalog"
SCHEMA = 1
VLLM_FROM = (0, 2)  # vLLM's sample: the last release of each minor version from 0.2 on


def say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- releases and downloads


def version_key(version: str):
    from packaging.version import Version

    return Version(version)


def released_versions(package: str) -> list[str]:
    """Every release of `package` that `pip index versions` lists, oldest first."""
    out = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = next(ln for ln in out.splitlines() if ln.startswith("Available versions:"))
    versions = [v.strip() for v in line.split(":", 1)[1].split(",") if v.strip()]
    return sorted(versions, key=version_key)


def vllm_sample(versions: Iterable[str]) -> list[str]:
    """The newest release of each vLLM minor version from VLLM_FROM on.

    >>> vllm_sample(["0.1.7", "0.2.0", "0.2.7", "0.10.1.1", "0.10.2", "0.8.5.post1", "0.8.5"])
    ['0.2.7', '0.8.5.post1', '0.10.2']
    """
    newest: dict[tuple[int, int], str] = {}
    for v in sorted(versions, key=version_key):
        release = version_key(v).release
        minor = (release[0], release[1] if len(release) > 1 else 0)
        if minor >= VLLM_FROM:
            newest[minor] = v
    return [newest[m] for m in sorted(newest)]


def cached_archive(folder: Path, package: str, version: str) -> Path | None:
    """The archive of `package==version` already in `folder`, if any (a wheel before an sdist)."""
    want = version_key(version)
    found = []
    for p in folder.glob(f"{package}-*"):
        m = re.match(rf"{re.escape(package)}-([^-]+?)(-.*\.whl|\.tar\.gz|\.zip)$", p.name)
        if m and version_key(m[1]) == want:
            found.append((not p.name.endswith(".whl"), p.name, p))
    return min(found)[2] if found else None


def download(package: str, version: str, folder: Path) -> tuple[Path | None, str]:
    """Fetch one release into `folder`: a wheel, else an sdist that needs no build.

    Returns (archive, "") or (None, why it could not be had).
    """
    if (hit := cached_archive(folder, package, version)) is not None:
        return hit, ""
    pip = [sys.executable, "-m", "pip", "download", "--no-deps", "--quiet", "--disable-pip-version-check"]
    with tempfile.TemporaryDirectory(dir=folder, prefix=".part-") as tmp:
        attempts = [
            [*pip, "--only-binary", ":all:", "-d", tmp, f"{package}=={version}"],
            [*pip, "--no-build-isolation", "--no-binary", ":all:", "-d", tmp, f"{package}=={version}"],
        ]
        why = ""
        for argv in attempts:
            run = subprocess.run(argv, capture_output=True, text=True)
            got = sorted(Path(tmp).iterdir())
            if run.returncode == 0 and got:
                target = folder / got[0].name
                shutil.move(str(got[0]), target)
                return target, ""
            why = _last_error(run.stderr)
        return None, why


def _last_error(stderr: str) -> str:
    lines = [ln.strip() for ln in stderr.splitlines() if ln.strip() and not ln.startswith("WARNING: Location")]
    errors = [ln for ln in lines if ln.startswith("ERROR")] or lines
    return errors[-1] if errors else "pip download failed"


def fetch_all(package: str, versions: list[str], folder: Path, jobs: int) -> tuple[dict[str, Path], dict[str, str]]:
    """Download every release (`jobs` at a time); a failure is reported and skipped."""
    folder.mkdir(parents=True, exist_ok=True)
    archives: dict[str, Path] = {}
    failed: dict[str, str] = {}

    def one(version: str) -> tuple[str, Path | None, str]:
        return (version, *download(package, version, folder))

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for version, archive, why in pool.map(one, versions):
            if archive is None:
                failed[version] = f"download failed: {why}"
                say(f"skip {package} {version}: download failed: {why}")
            else:
                archives[version] = archive
    return archives, failed


# ---------------------------------------------------------------- mining


def newest_python() -> str:
    """The newest Python 3.12+ on this machine (pyenv, PATH), else the running one.

    SGLang releases from 2025 on use 3.12 syntax (PEP 695, PEP 701 f-strings) in some modules.
    """
    found = []
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [str(p / "bin" / "python") for p in pyenv.glob("3.*")] if pyenv.is_dir() else []
    candidates += [shutil.which(f"python3.{m}") or "" for m in range(12, 20)]
    for py in candidates:
        if not py or not os.access(py, os.X_OK):
            continue
        m = re.search(r"3\.(\d+)", py)
        try:
            out = subprocess.run([py, "-c", "import sys; print(sys.version_info[1])"], capture_output=True, text=True)
            minor = int(out.stdout.strip())
        except (OSError, ValueError):
            continue
        if minor >= 12 and m:
            found.append((minor, py))
    if sys.version_info >= (3, 12) or not found:
        return sys.executable
    return max(found)[1]


def miner_key(python: str) -> str:
    """Changes whenever the miner's code or the Python running it changes (invalidates the cache)."""
    version = subprocess.run([python, "-c", "import sys; print(sys.version)"], capture_output=True, text=True).stdout
    digest = hashlib.sha256((HERE / "extract.py").read_bytes() + version.encode())
    return digest.hexdigest()[:12]


def mine_archive(archive: Path, package: str, python: str, cache: Path | None, key: str, library: str | None = None) -> dict:
    """Mine one archive in a child process running `python`; the result is cached by `key`
    (and a library's settings, ``LIBRARIES``)."""
    if library is not None:
        key += "-" + hashlib.sha256(repr(LIBRARIES[library]).encode()).hexdigest()[:8]
    store = cache / f"{archive.name}.{key}.json" if cache else None
    if store is not None and store.exists():
        return json.loads(store.read_text())
    run = subprocess.run(
        [python, str(HERE / "mine.py"), "--mine-one", str(archive), "--package", package, *(["--library", library] if library else [])],
        capture_output=True,
        text=True,
    )
    if run.returncode != 0:
        raise RuntimeError(_last_error(run.stderr))
    result = json.loads(run.stdout)
    if store is not None:
        store.parent.mkdir(parents=True, exist_ok=True)
        store.write_text(json.dumps(result))
    return result


def mine_all(package: str, archives: dict[str, Path], python: str, cache: Path | None, jobs: int, library: str | None = None) -> tuple[dict[str, dict], dict[str, str]]:
    key = miner_key(python)
    mined: dict[str, dict] = {}
    failed: dict[str, str] = {}

    def one(item: tuple[str, Path]) -> tuple[str, dict | None, str]:
        version, archive = item
        try:
            return version, mine_archive(archive, package, python, cache, key, library), ""
        except (RuntimeError, OSError, ValueError) as err:
            return version, None, str(err)

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        for version, result, why in pool.map(one, sorted(archives.items())):
            if result is None or result["files"] == 0:
                why = why or "no modules of the package found in the archive"
                failed[version] = f"mining failed: {why}"
                say(f"skip {package} {version}: mining failed: {why}")
                continue
            mined[version] = result
            if result["failed"]:
                say(f"{package} {version}: {len(result['failed'])} of {result['files']} modules did not parse")
    return mined, failed


# ---------------------------------------------------------------- the catalogue


def build_catalog(sglang: dict[str, dict], vllm: dict[str, dict]) -> dict:
    """Merge each release's records into one entry per (template, level).

    An entry's source, kind and placeholder names come from the newest release that has it
    (its first occurrence by module path and line); `v` is the first and last release index.
    """
    releases = sorted(sglang, key=version_key)
    shared = {rec[0] for result in vllm.values() for rec in result["records"]}
    entries: dict[tuple[str, str], dict] = {}
    for index, version in enumerate(releases):
        first: dict[tuple[str, str], list] = {}
        for rec in sorted(sglang[version]["records"], key=lambda r: (r[3], r[4], r[0], r[1], r[2])):
            first.setdefault((rec[0], rec[1]), rec)
        for (t, level), rec in first.items():
            entry = entries.get((t, level))
            if entry is None:
                entry = entries[(t, level)] = {"t": t, "v": [index, index]}
            entry.update(p=list(rec[5]), l=level, k=rec[2], s=f"{rec[3]}:{rec[4]}")
            entry["v"][1] = index
    templates = []
    for t, level in sorted(entries):
        e = entries[(t, level)]
        entry = {"t": t, "p": e["p"], "l": level, "k": e["k"], "s": e["s"], "v": e["v"]}
        if t in shared:
            entry["shared"] = "vllm"
        templates.append(entry)
    return {
        "schema": SCHEMA,
        "releases": releases,
        "vllm_releases": sorted(vllm, key=version_key),
        "templates": templates,
    }


# packages of SGLang's project that run inside its processes and log beside it, mined into the same
# catalogue (`--add-package`): their messages are named as SGLang's are, marked with the package
ECOSYSTEM = {"sglang-omni": "sglang_omni"}  # distribution -> import name


def add_package(catalog: dict, dist: str, mined: dict[str, dict]) -> dict:
    """``catalog`` with the logged and printed templates of ``dist``'s releases (``mined``: version
    -> records) that SGLang's own do not have: each ``pkg`` = ``dist``, ``pv`` = its first and last release, ``v``
    every SGLang release (the package runs beside any), ``s`` under the package's import name.
    A package mined before is replaced; the result is sorted as ``build_catalog`` sorts."""
    # (what it logs and prints: its raise messages, lower trust, stay out of a file kept small)
    return _add_mined(catalog, dist, mined, ECOSYSTEM.get(dist, dist.replace("-", "_")), lambda kind: kind != "raise", "packages", {})


def _add_mined(catalog: dict, dist: str, mined: dict[str, dict], top: str, keep, head: str, marks: dict) -> dict:
    """``catalog`` with the templates of ``dist``'s releases of the kinds ``keep`` takes that no other
    template has (``add_package``, ``add_library``): ``marks`` on each, ``dist``'s releases under
    ``head`` in the catalogue's head."""
    releases = sorted(mined, key=version_key)
    own = [t for t in catalog["templates"] if t.get("pkg") != dist]
    have = {(t["t"], t["l"]) for t in own}
    entries: dict[tuple[str, str], dict] = {}
    for index, version in enumerate(releases):
        first: dict[tuple[str, str], list] = {}
        for rec in sorted(mined[version]["records"], key=lambda r: (r[3], r[4], r[0], r[1], r[2])):
            if keep(rec[2]):
                first.setdefault((rec[0], rec[1]), rec)
        for key, rec in first.items():
            if key in have:
                continue
            entry = entries.setdefault(key, {"pv": [index, index]})
            entry.update(p=list(rec[5]), k=rec[2], s=f"{top}/{rec[3]}:{rec[4]}")
            entry["pv"][1] = index
    last = len(catalog["releases"]) - 1
    added = [{"t": t, "p": e["p"], "l": level, "k": e["k"], "s": e["s"], "v": [0, last], "pkg": dist, "pv": [releases[e["pv"][0]], releases[e["pv"][1]]], **marks} for (t, level), e in entries.items()]
    out = {k: v for k, v in catalog.items() if k not in ("templates", "index")}
    out[head] = {**(catalog.get(head) or {}), dist: releases}
    out["templates"] = sorted(own + added, key=lambda t: (t["t"], t["l"]))
    return out


# libraries SGLang's server processes run, whose Python loggers and warnings print into its log
# between SGLang's own lines (`--add-library`): distribution -> (import name, the first minor
# release mined: the one current when SGLang began, 2024-01, or when SGLang began to use it;
# a pattern of the modules that never run in an SGLang server, relative to the package).
# The newest release of each minor version from that one on is mined (``library_sample``).
LIBRARIES: dict[str, tuple[str, str, str]] = {
    "uvicorn": ("uvicorn", "0.25", ""),  # the HTTP server
    "rpyc": ("rpyc", "5.3", ""),  # 0.1.x: the router and the model workers talk over RPyC
    # weights and configs downloaded (not its CLIs, uploads, repositories, inference clients or training mixins)
    "huggingface-hub": (
        "huggingface_hub",
        "0.20",
        r"^(commands|cli|inference|serialization)/|^(_commit_api|_commit_scheduler|_upload_large_folder|_local_folder_upload|repository|lfs|keras_mixin|fastai_utils"
        r"|hub_mixin|_tensorboard_logger|_webhooks_\w+|_space_api|_jobs_api|_login|_oauth|community|inference_api|_inference_endpoints|repocard\w*)\.py$",
    ),
    # configs, tokenizers and processors loaded; not the models' modeling code (SGLang has its own),
    # nor conversion scripts, generation, training and its integrations, pipelines, agents or CLIs
    "transformers": (
        "transformers",
        "4.36",
        r"(^|/)modeling_\w*\.py$|(^|/)convert_(?!slow_tokenizer\.py)\w*\.py$|^generation/(?!configuration_utils\.py)|^integrations/(?!(tiktoken|ggml|mistral)\.py)"
        r"|^(commands|cli|agents|tools|onnx|exporters|pipelines|sagemaker|kernels|quantizers|distributed|data|models/deprecated)/"
        r"|^(trainer|training_args|optimization|modelcard|debug_utils|hyperparameter_search)\w*\.py$",
    ),
    # attention kernels compiled just in time (its `flashinfer.jit` logger); not its experimental
    # modules nor the sources of other projects it bundles
    "flashinfer-python": ("flashinfer", "0.2", r"^(data|experimental)/"),
}
LIBRARY_KINDS = ("log", "warn", "progress")  # what a library's templates are: not its raise messages (lower trust) nor its prints (its command-line tools)


def library_sample(versions: Iterable[str], since: str) -> list[str]:
    """The newest final release of each minor version from ``since`` on.

    >>> library_sample(["0.24.0", "0.25.0", "0.25.3", "0.26.0rc1", "0.26.1", "1.0.0.dev1"], "0.25")
    ['0.25.3', '0.26.1']
    """
    floor = version_key(since).release[:2]
    newest: dict[tuple[int, ...], str] = {}
    for v in sorted(versions, key=version_key):
        key = version_key(v)
        if key.is_prerelease or key.is_devrelease:
            continue
        minor = (key.release + (0,))[:2]
        if minor >= floor:
            newest[minor] = v
    return [newest[m] for m in sorted(newest)]


def library_skips(dist: str):
    """The predicate of the modules of ``dist`` (``LIBRARIES``) that are not mined."""
    pattern = LIBRARIES[dist][2]
    return re.compile(pattern).search if pattern else (lambda rel: None)


def add_library(catalog: dict, dist: str, mined: dict[str, dict]) -> dict:
    """``catalog`` with the messages ``dist``'s releases (``mined``: version -> records) log, warn or
    show as progress (``LIBRARY_KINDS``) that no other template has: each with ``lib`` = 1, ``pkg`` =
    ``dist``, ``pv`` its first and last release mined, ``v`` every SGLang release (it runs under
    any) and ``s`` under its import name.  A library mined before is replaced; the result is sorted
    as ``build_catalog`` sorts.  sglog names such a line a ``library_log``, never SGLang's, and only
    where no SGLang template matches it as specifically (``sglog.read.catalog.Catalogue.match``)."""
    top = LIBRARIES[dist][0] if dist in LIBRARIES else dist.replace("-", "_")
    return _add_mined(catalog, dist, mined, top, lambda kind: kind in LIBRARY_KINDS, "libraries", {"lib": 1})


def dumps(catalog: dict) -> bytes:
    """The catalogue as gzip bytes: one template a line inside, no timestamp, no file name.

    The head line carries the matcher's index (``sglog.read.catalog.build_index``: the kept
    templates in preference order and their key pieces), so that sglog loads the index and
    decodes a template only when a message needs it."""
    from sglog.read.catalog import build_index

    head = {k: v for k, v in catalog.items() if k not in ("templates", "index", "_stats")}
    head["index"] = build_index(catalog["templates"], len(catalog["releases"]))
    lines = [json.dumps(head, ensure_ascii=False, separators=(",", ":"))[:-1] + ',"templates":[']
    body = [json.dumps(t, ensure_ascii=False, separators=(",", ":")) for t in catalog["templates"]]
    text = "\n".join(lines) + "\n" + ",\n".join(body) + "\n]}\n"
    return gzip.compress(text.encode(), compresslevel=9, mtime=0)


def generate(
    sglang: dict[str, Path],
    vllm: dict[str, Path],
    out: Path,
    python: str | None = None,
    cache: Path | None = None,
    jobs: int = 2,
    failed: dict[str, str] | None = None,
) -> dict:
    """Mine the given SGLang and vLLM releases (archives or folders) and write the catalogue."""
    python = python or sys.executable
    mined, failed_sglang = mine_all("sglang", sglang, python, cache, jobs)
    mined_vllm, failed_vllm = mine_all("vllm", vllm, python, cache, jobs)
    catalog = build_catalog(mined, mined_vllm)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(dumps(catalog))
    if failed is not None:
        failed.update({f"sglang {v}": why for v, why in failed_sglang.items()})
        failed.update({f"vllm {v}": why for v, why in failed_vllm.items()})
    catalog["_stats"] = {
        "files": sum(r["files"] for r in mined.values()),
        "unparsed": sorted({f"{v}:{p}" for v, r in mined.items() for p in r["failed"]}),
        "vllm_files": sum(r["files"] for r in mined_vllm.values()),
        "vllm_unparsed": sum(len(r["failed"]) for r in mined_vllm.values()),
    }
    return catalog


def summary(catalog: dict, failed: dict[str, str], seconds: float, download_bytes: int) -> str:
    from collections import Counter

    ts = catalog["templates"]
    by = lambda f: ", ".join(f"{k} {n}" for k, n in sorted(Counter(map(f, ts)).items()))  # noqa: E731
    stats = catalog.get("_stats", {})
    lines = [
        f"mined {len(catalog['releases'])} SGLang releases ({catalog['releases'][0]} .. {catalog['releases'][-1]})"
        f" and {len(catalog['vllm_releases'])} vLLM releases in {seconds:.0f} s;"
        f" archives in the cache: {download_bytes / 1e9:.2f} GB",
        f"{len(ts)} templates; by level: {by(lambda t: t['l'])}",
        f"by kind: {by(lambda t: t['k'])}",
        f"shared with vLLM: {sum('shared' in t for t in ts)}",
        f"modules: {stats.get('files', 0)} mined, {len(stats.get('unparsed', []))} did not parse; vLLM {stats.get('vllm_files', 0)} mined, {stats.get('vllm_unparsed', 0)} did not parse",
    ]
    if failed:
        lines.append(f"failed ({len(failed)}): " + "; ".join(f"{k}: {v}" for k, v in sorted(failed.items())))
    else:
        lines.append("failed: none")
    return "\n".join(lines)


# ---------------------------------------------------------------- command line


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=CACHE, help=f"download cache (default {CACHE})")
    ap.add_argument("--out", type=Path, default=OUT, help="the catalogue to write")
    ap.add_argument("--jobs", type=int, default=4, help="downloads at a time (mining uses 2)")
    ap.add_argument("--python", help="the Python that mines (default: the newest 3.12+ found)")
    ap.add_argument("--versions", nargs="*", help="mine only these SGLang releases")
    ap.add_argument("--no-vllm", action="store_true", help="do not mine vLLM (no shared marks)")
    ap.add_argument("--reindex", action="store_true", help="rewrite --out with the index of its templates, mining nothing")
    ap.add_argument("--add-package", metavar="DIST", help=f"mine every release of DIST (one of {', '.join(ECOSYSTEM)}) into --out, mining SGLang nothing")
    ap.add_argument("--add-library", metavar="DIST", help=f"mine the releases of DIST (one of {', '.join(LIBRARIES)}) into --out, mining SGLang nothing")
    ap.add_argument("--mine-one", type=Path, help=argparse.SUPPRESS)
    ap.add_argument("--package", default="sglang", help=argparse.SUPPRESS)
    ap.add_argument("--library", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args.mine_one is not None:  # the child process of mine_archive()
        if args.library:  # (a library: its prints aside, its modules that never run in a server skipped)
            json.dump(extract.mine_location(args.mine_one, args.package, prints=lambda rel: False, skip=library_skips(args.library)), sys.stdout)
        else:
            json.dump(extract.mine_location(args.mine_one, args.package), sys.stdout)
        return 0

    if args.reindex:  # (the index is derived from the templates: no need to mine again)
        args.out.write_bytes(dumps(json.loads(gzip.decompress(args.out.read_bytes()))))
        say(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
        return 0

    if args.add_package:
        start = time.monotonic()
        python = args.python or newest_python()
        versions = released_versions(args.add_package)
        archives, failed = fetch_all(args.add_package, versions, args.cache / args.add_package, args.jobs)
        mined, failed_mine = mine_all(ECOSYSTEM.get(args.add_package, args.add_package), archives, python, args.cache / "mined", 2)
        catalog = add_package(json.loads(gzip.decompress(args.out.read_bytes())), args.add_package, mined)
        args.out.write_bytes(dumps(catalog))
        n = sum(t.get("pkg") == args.add_package for t in catalog["templates"])
        say(f"{args.add_package}: {len(mined)} releases mined in {time.monotonic() - start:.0f} s, {n} templates SGLang does not have; failed: {failed | failed_mine or 'none'}")
        say(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
        return 0

    if args.add_library:
        return _add_library(args)

    start = time.monotonic()
    python = args.python or newest_python()
    say(f"mining with {python}")
    versions = args.versions or released_versions("sglang")
    vllm_versions = [] if args.no_vllm else vllm_sample(released_versions("vllm"))
    say(f"{len(versions)} SGLang releases, {len(vllm_versions)} vLLM releases ({', '.join(vllm_versions)})")
    sglang, failed = fetch_all("sglang", versions, args.cache / "sglang", args.jobs)
    vllm, failed_vllm = fetch_all("vllm", vllm_versions, args.cache / "vllm", min(args.jobs, 2))
    failed = {f"sglang {v}": why for v, why in failed.items()} | {f"vllm {v}": w for v, w in failed_vllm.items()}
    catalog = generate(sglang, vllm, args.out, python, args.cache / "mined", 2, failed)
    size = sum(p.stat().st_size for p in [*sglang.values(), *vllm.values()])
    say(summary(catalog, failed, time.monotonic() - start, size))
    say(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
    return 0


def _add_library(args: argparse.Namespace) -> int:
    dist = args.add_library
    if dist not in LIBRARIES:
        say(f"--add-library: {dist} is not one of {', '.join(LIBRARIES)} (mine.LIBRARIES)")
        return 2
    start = time.monotonic()
    python = args.python or newest_python()
    versions = library_sample(released_versions(dist), LIBRARIES[dist][1])
    archives, failed = fetch_all(dist, versions, args.cache / "libraries" / dist, args.jobs)
    mined, failed_mine = mine_all(LIBRARIES[dist][0], archives, python, args.cache / "mined", 2, library=dist)
    if not mined:
        say(f"{dist}: no release could be mined ({failed | failed_mine}); {args.out} left as it was")
        return 1
    catalog = add_library(json.loads(gzip.decompress(args.out.read_bytes())), dist, mined)
    args.out.write_bytes(dumps(catalog))
    n = sum(t.get("pkg") == dist for t in catalog["templates"])
    say(f"{dist}: {len(mined)} releases ({', '.join(sorted(mined, key=version_key))}) mined in {time.monotonic() - start:.0f} s, {n} templates no other has; failed: {failed | failed_mine or 'none'}")
    say(f"wrote {args.out} ({args.out.stat().st_size / 1e3:.0f} kB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
