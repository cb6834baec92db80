"""Speed benchmark: sglog against the physical floor and its peers, same files, same run.

    python benchmarks/run.py                 # 1M, 5M and .gz logs (generated if missing), 3 runs each
    python benchmarks/run.py --runs 5 --no-5m
    python benchmarks/run.py --runs 1 --only-1gb   # every command on a 1 GB log: time, lines/s, peak RSS
    make bench BENCH_ARGS="--runs 1"

For every file it times, as subprocesses: ``sglog events --stats``, ``sglog
diagnose`` (the whole pipeline; if that command is missing or fails, the
library load ``sglog.load(path)`` instead, and says so), ``wc -l``, ``grep -c``
and the peers: a naive Python one (benchmarks/naive_peer.py), a Polars regex
pipeline in two forms (benchmarks/polars_peer.py) and, when it is installed,
lnav, headless: as it reads any log (it indexes the file and counts its messages
by level), and with a format of SGLang's batch lines (benchmarks/lnav_sglang.json:
their fields typed by its regexes, and queried).
Median wall time of N runs, lines/s, MB/s (uncompressed bytes), peak RSS
(``wait4``), and the ratio to ``grep -c``.  Also ``sglog --help`` and ``sglog diagnose`` on a 1,000-line
log, and a correctness check: on a sample, the events and the findings of
the fast path equal those of the lark-only path.  Commands run with their
bytecode cached (as an installed sglog does), after one warm-up run.  The
runs go in rounds (each tool on the 1M-line log and its .gz copy once per
round), so a slow spell of the machine hits every measurement alike.

A table goes to stdout, everything to benchmarks/results.json.  The machine
is shared and noisy: the load average at the start is recorded with the
numbers.
"""

from __future__ import annotations

import argparse
import atexit
import gzip
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(HERE))

import generate  # noqa: E402

# the targets of the speed issue (#7): `sglog diagnose` end to end; `events --stats` is checked too
TARGETS = {
    "lines_per_s_1m": 500_000,
    "scale_5m_over_1m": 5.5,
    # "under 1.5 GB", read strictly: 1.5e9 bytes = 1,430.5 MiB (this script reports MiB: GNU
    # time's KB / 1024; the JSON keys say _mb for MiB)
    "rss_5m_mib": 1.5e9 / 2**20,
    "gz_overhead": 0.30,
    "help_s": 0.3,
    "small_s": 0.6,
}


# ---------------------------------------------------------------- running things


def sglog_cmd() -> list[str]:
    exe = Path(sys.executable).parent / "sglog"
    if exe.exists():
        return [str(exe)]
    found = shutil.which("sglog")
    return [found] if found else [sys.executable, "-m", "sglog"]


TIME = "/usr/bin/time" if os.access("/usr/bin/time", os.X_OK) else None

# the commands run as an installed sglog runs: with its bytecode cached (pip compiles it at
# install; some sandboxes set PYTHONDONTWRITEBYTECODE, which would make every start compile
# sglog from source, ~0.1 s)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def run_once(argv, *, shell: bool = False, ok_codes=(0,), env: dict | None = None) -> dict:
    """Run a command, its output drained through a pipe (GNU grep stops early when writing to
    /dev/null); wall time, peak RSS, CPU time, exit code.  ``env``: variables set on top of
    ``ENV``.

    Peak RSS comes from GNU time when present (the command is then forked from a small
    process); otherwise from wait4, which also counts the launcher's memory at fork time.
    """
    cmd = ["sh", "-c", argv] if shell else list(argv)
    report = None
    if TIME:
        fd, report = tempfile.mkstemp(prefix="sglog-bench-", suffix=".time")
        os.close(fd)
        cmd = [TIME, "-f", "%M %U %S", "-o", report] + cmd
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT, env={**ENV, **(env or {})})
    _out, err = proc.communicate()
    wall = time.perf_counter() - t0
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    rss_mb, user, sys_ = usage.ru_maxrss / 1024, usage.ru_utime, usage.ru_stime
    if report:
        try:
            last = Path(report).read_text().strip().splitlines()[-1].split()
            rss_mb, user, sys_ = int(last[0]) / 1024, float(last[1]), float(last[2])
        except (OSError, IndexError, ValueError):
            pass
        finally:
            os.unlink(report)
    return {
        "wall_s": wall,
        "rss_mb": rss_mb,
        "user_s": user,
        "sys_s": sys_,
        "code": proc.returncode,
        "ok": proc.returncode in ok_codes,
        "stderr": err.decode("utf-8", "replace")[-400:],
    }


def measure(argv, runs: int, **kw) -> dict:
    return summarise(argv, [run_once(argv, **kw) for _ in range(runs)])


def summarise(argv, samples: list[dict]) -> dict:
    good = [s for s in samples if s["ok"]]
    use = good or samples
    return {
        "argv": argv if isinstance(argv, list) else ["sh", "-c", argv],
        "runs": [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in s.items() if k != "stderr"} for s in samples],
        "median_s": statistics.median(s["wall_s"] for s in use),
        "cpu_s": statistics.median(s["user_s"] + s["sys_s"] for s in use),
        "peak_rss_mb": max(s["rss_mb"] for s in use),
        "ok": bool(good),
        "stderr": "" if good else samples[-1]["stderr"],
    }


def diagnose_available() -> bool:
    try:
        r = subprocess.run(sglog_cmd() + ["diagnose", "--help"], capture_output=True, timeout=60, cwd=ROOT)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return r.returncode == 0 and b"to be written" not in r.stdout


def load_fallback(path: Path) -> list[str]:
    code = "import sys, sglog; sglog.load(sys.argv[1])"
    return [sys.executable, "-c", code, str(path)]


# ---------------------------------------------------------------- the table


def uncompressed_size(path: Path) -> int:
    if path.suffix != ".gz":
        return path.stat().st_size
    n = 0
    with gzip.open(path, "rb") as f:
        while block := f.read(8 << 20):
            n += len(block)
    return n


def line_count(path: Path) -> int:
    opener = gzip.open if path.suffix == ".gz" else open
    n = 0
    with opener(path, "rb") as f:
        while block := f.read(8 << 20):
            n += block.count(b"\n")
    return n


def file_tools(path: Path, diag: bool) -> list[tuple[str, object, dict, str]]:
    """(name, argv, run_once options, note) of each tool timed on ``path``."""
    q = lambda p: "'" + str(p).replace("'", "'\\''") + "'"  # noqa: E731
    gz = path.suffix == ".gz"
    tools: list[tuple[str, object, dict, str]] = [
        ("sglog events --stats", sglog_cmd() + ["events", "--stats", str(path)], {}, ""),
    ]
    if diag:
        tools.append(("sglog diagnose", sglog_cmd() + ["diagnose", str(path)], {"ok_codes": (0, 1)}, ""))
    else:
        tools.append(("sglog.load (diagnose fallback)", load_fallback(path), {}, "sglog diagnose missing or failing: timed sglog.load(path) instead"))
    if gz:
        tools += [
            ("wc -l", f"gzip -dc {q(path)} | wc -l", {"shell": True}, "gzip -dc | wc -l"),
            ("grep -c", f"gzip -dc {q(path)} | grep -c 'Decode batch'", {"shell": True}, "gzip -dc | grep -c"),
        ]
    else:
        tools += [
            ("wc -l", ["wc", "-l", str(path)], {}, ""),
            ("grep -c", ["grep", "-c", "Decode batch", str(path)], {}, ""),
        ]
    tools.append(("naive peer (Python re)", [sys.executable, str(HERE / "naive_peer.py"), str(path)], {}, ""))
    tools.append(("polars peer (field by field)", [sys.executable, str(HERE / "polars_peer.py"), "--field-by-field", str(path)], {}, ""))
    tools.append(("polars peer (one regex a kind)", [sys.executable, str(HERE / "polars_peer.py"), str(path)], {}, ""))
    tools += lnav_tools(path)
    return tools


# lnav's headless mode: load and index the file, then one SQL query over every message.  Plain,
# it reads the log in its generic format (timestamp, level, lines folded into messages) and no
# SGLang field; with benchmarks/lnav_sglang.json installed, a format of SGLang's lines whose
# regexes type the Decode and Prefill batch lines' fields (part of sglog's work), queried for them.
LNAV_QUERY = ";SELECT log_level, count(*) FROM all_logs GROUP BY log_level"
LNAV_FORMAT = HERE / "lnav_sglang.json"
LNAV_FORMAT_QUERY = ";SELECT count(running_req), count(new_token), avg(token_usage), avg(gen_throughput), max(queue_req) FROM sglang_log"
_LNAV_HOMES: dict[bool, str] = {}


def _lnav_env(home: str) -> dict[str, str]:
    return {"HOME": home, "XDG_CONFIG_HOME": os.path.join(home, ".config")}


def _lnav_home(exe: str, with_format: bool) -> str:
    """A HOME of lnav's own, one per form for the whole benchmark: no user formats or settings,
    and its state files stay out of the user's home; removed at exit.  Its first start, which
    writes its default configuration there, is not a timed run."""
    if with_format not in _LNAV_HOMES:
        home = tempfile.mkdtemp(prefix="sglog-bench-lnav-")
        atexit.register(shutil.rmtree, home, True)
        if with_format:
            formats = Path(home) / ".lnav" / "formats" / "installed"
            formats.mkdir(parents=True)
            shutil.copyfile(LNAV_FORMAT, formats / "sglang.json")
        subprocess.run([exe, "-n", "-c", LNAV_QUERY, os.devnull], capture_output=True, timeout=120, env={**ENV, **_lnav_env(home)})
        _LNAV_HOMES[with_format] = home
    return _LNAV_HOMES[with_format]


def lnav_tools(path: Path) -> list[tuple[str, list[str], dict, str]]:
    """The lnav peers, when lnav is installed (``apt install lnav``; CI machines do not have it):
    lnav as it reads any log, and lnav with a format of SGLang's batch lines."""
    exe = shutil.which("lnav")
    if not exe:
        return []
    forms = (
        ("lnav (headless, count by level)", LNAV_QUERY, False, "lnav -n -c '" + LNAV_QUERY + "': indexes every line (generic format), no SGLang fields"),
        ("lnav + SGLang format (batch fields)", LNAV_FORMAT_QUERY, True, "lnav with benchmarks/lnav_sglang.json: the Decode/Prefill batch fields typed by its regexes, queried"),
    )
    return [(name, [exe, "-n", "-c", query, str(path)], {"env": _lnav_env(_lnav_home(exe, fmt))}, note) for name, query, fmt, note in forms]


def bench_files(paths: list[Path], runs: int, diag: bool) -> dict[Path, list[dict]]:
    """Every tool on every file, ``runs`` times, in rounds: each round runs each (file, tool) once.

    The machine drifts (identical runs a few minutes apart differ by 10-30%); in rounds, every
    measurement's runs spread over the same stretch of time, so the ratios the targets compare
    (a .gz file against its plain copy, sglog against grep and the peer) do not depend on which
    was timed in a fast or a slow spell.
    """
    jobs = [(path, tool) for path in paths for tool in file_tools(path, diag)]
    samples: dict[int, list[dict]] = {i: [] for i in range(len(jobs))}
    for r in range(runs):
        for i, (path, (name, argv, kw, _note)) in enumerate(jobs):
            print(f"  round {r + 1}/{runs}: {path.name}: {name} ...", file=sys.stderr, flush=True)
            warm(path)
            samples[i].append(run_once(argv, **kw))
    out: dict[Path, list[dict]] = {path: [] for path in paths}
    for i, (path, (name, argv, _kw, note)) in enumerate(jobs):
        m = summarise(argv, samples[i])
        if name.startswith("sglog diagnose") and not m["ok"]:
            note = f"sglog diagnose failed (exit {m['runs'][-1]['code']}): timed sglog.load(path) instead"
            name = "sglog.load (diagnose fallback)"
            m = measure(load_fallback(path), runs)
        m.update(tool=name, note=note)
        out[path].append(m)
    return out


def gb_tools(path: Path, out: Path) -> list[tuple[str, list[str], dict, str]]:
    """Each command on the 1 GB log (the memory target of #28: each peaks at <= 1.5 GB), its
    outputs written under ``out`` (a report without images: their rendering does not grow with
    the log)."""
    s = sglog_cmd()
    return [
        ("sglog events --stats", s + ["events", "--stats", str(path)], {}, ""),
        ("sglog events -f parquet", s + ["events", "-f", "parquet", "-o", str(out / "events.parquet"), str(path)], {}, "every event, to a file"),
        ("sglog events -f jsonl", s + ["events", "-f", "jsonl", "-o", str(out / "events.jsonl"), str(path)], {}, "every event, to a file"),
        ("sglog diagnose", s + ["diagnose", str(path)], {"ok_codes": (0, 1)}, ""),
        ("sglog timeline -f parquet", s + ["timeline", "-f", "parquet", "-o", str(out / "timeline.parquet"), str(path)], {}, "10 s windows"),
        ("sglog report --no-images", s + ["report", "--no-images", "-o", str(out / "report"), str(path)], {"ok_codes": (0, 1)}, "Markdown, chart specs and HTML"),
    ]


def bench_gb(path: Path, runs: int) -> list[dict]:
    """Every command on the 1 GB log, ``runs`` times in rounds (a slow spell hits them alike)."""
    out = Path(tempfile.mkdtemp(prefix="sglog-bench-1gb-"))
    atexit.register(shutil.rmtree, out, True)
    tools = gb_tools(path, out)
    samples: list[list[dict]] = [[] for _ in tools]
    for r in range(runs):
        for i, (name, argv, kw, _note) in enumerate(tools):
            print(f"  round {r + 1}/{runs}: {path.name}: {name} ...", file=sys.stderr, flush=True)
            warm(path)
            samples[i].append(run_once(argv, **kw))
    rows = []
    for (name, argv, _kw, note), got in zip(tools, samples):
        m = summarise(argv, got)
        m.update(tool=name, note=note)
        rows.append(m)
    return rows


def warm(path: Path) -> None:
    """Read a file once, untimed, so that every tool reads it from the page cache.  This
    machine's cache does not keep all the logs: after the 5M-line runs (and the naive peer's
    5.6 GB) a third of the 1M-line log was no longer cached, and the first tool timed after
    them read it from disk (its runs 1.8-2.7 s against 1.6-2.1 s for the next tool's)."""
    with open(path, "rb") as f:
        while f.read(16 << 20):
            pass


def fmt_row(cols: list[str], widths: list[int]) -> str:
    return "  ".join(c.rjust(w) if i else c.ljust(w) for i, (c, w) in enumerate(zip(cols, widths)))


# ---------------------------------------------------------------- correctness


def correctness(sample_lines: int, source: Path) -> dict:
    """Fast path == lark-only path on the first lines of a benchmark log (and with tiny chunks)."""
    sys.path.insert(0, str(ROOT))
    from sglog.read.parse import parse_file

    with tempfile.TemporaryDirectory() as td:
        sample = Path(td) / "sample.log"
        with open(source, "rb") as fin, open(sample, "wb") as fout:
            for i, line in enumerate(fin):
                if i >= sample_lines:
                    break
                fout.write(line)
        t0 = time.perf_counter()
        ref = [normalise(d) for d in parse_file(str(sample), fast=False, keep_text=True).iter_dicts()]
        t_ref = time.perf_counter() - t0
        t0 = time.perf_counter()
        fast = [normalise(d) for d in parse_file(str(sample), keep_text=True).iter_dicts()]
        t_fast = time.perf_counter() - t0
        tiny = [normalise(d) for d in parse_file(str(sample), keep_text=True, chunk_bytes=64 << 10).iter_dicts()]
        findings = {label: _findings(parse_file(str(sample), fast=fast_)) for label, fast_ in (("lark", False), ("fast", True))}
    result = {"sample_lines": sample_lines, "events": len(ref), "lark_only_s": round(t_ref, 3), "fast_s": round(t_fast, 3)}
    result["findings"] = len(findings["lark"])
    result["findings_equal"] = findings["fast"] == findings["lark"]
    for label, got in (("fast", fast), ("fast_64k_chunks", tiny)):
        bad = [(a, b) for a, b in zip(got, ref) if a != b]
        result[f"{label}_mismatches"] = len(bad) + abs(len(got) - len(ref))
        result[f"{label}_examples"] = [{"line": b.get("line"), "fast": {k: a.get(k) for k in diff_keys(a, b)}, "lark": {k: b.get(k) for k in diff_keys(a, b)}} for a, b in bad[:3]]
    return result


def _findings(log) -> list[dict]:
    """The findings of a parsed log, as JSON data (what `sglog diagnose --format json` prints)."""
    from sglog.diagnose import diagnose_runs, finding_dict
    from sglog.runs.build import build_runs

    return [finding_dict(f) for f in diagnose_runs(build_runs([log]))]


def normalise(d: dict) -> dict:
    from sglog.read.parse import comparable

    return comparable(d)


def diff_keys(a: dict, b: dict) -> list[str]:
    return sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))


# ---------------------------------------------------------------- main


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3, help="runs per measurement (median is reported)")
    ap.add_argument("--no-5m", action="store_true", help="skip the 5M-line log")
    ap.add_argument("--no-1gb", action="store_true", help="skip the 1 GB log (every command on it: time, lines/s, peak RSS)")
    ap.add_argument("--only-1gb", action="store_true", help="only the 1 GB rows (and the targets they check)")
    ap.add_argument("--sample-lines", type=int, default=20_000, help="lines for the fast == lark-only check (0: skip)")
    ap.add_argument("--out", type=Path, default=HERE / "results.json")
    ap.add_argument("--data", type=Path, default=generate.DATA)
    args = ap.parse_args(argv)

    files = generate.ensure_standard(args.data, five_m=not args.no_5m)
    diag = diagnose_available()
    run_once(sglog_cmd() + ["diagnose", str(files["sglang-small.log"])], ok_codes=(0, 1))  # warm-up: bytecode, lark cache
    doc: dict = {
        "when": datetime.now(UTC).isoformat(timespec="seconds"),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "platform": platform.platform(),
            "load_avg_at_start": [round(x, 2) for x in os.getloadavg()],
        },
        "runs": args.runs,
        "files": {},
        "results": [],
    }
    try:
        import polars

        doc["machine"]["polars"] = polars.__version__
    except ImportError:
        pass
    # all three logs in the same rounds: the .gz/plain and 5M/1M ratios are targets, and a slow
    # spell of the machine (it drifts by a third and more) must hit both sides of each alike
    # (with the 5M log in rounds of its own, a run's 5M/1M ratios were 4.9 and 5.2 for sglog and
    # 6.2 for the naive peer, whose work is linear: its 5M rounds had met a slower spell)
    order = ["sglang-1m.log", "sglang-5m.log", "sglang-1m.log.gz"]
    groups = [] if args.only_1gb else [["sglang-1m.log", "sglang-1m.log.gz", "sglang-5m.log"]]
    measured: dict[str, list[dict]] = {}
    if not args.no_1gb:
        files["sglang-1gb.log"] = generate.ensure_gb(args.data)
        order.append("sglang-1gb.log")
        measured["sglang-1gb.log"] = bench_gb(files["sglang-1gb.log"], args.runs)
    for group in groups:
        paths = [files[name] for name in group if name in files]
        if paths:
            for path, rows in bench_files(paths, args.runs, diag).items():
                measured[path.name] = rows
    for name in order:
        if name not in measured:
            continue
        path = files[name]
        lines = line_count(path)
        size = uncompressed_size(path)
        doc["files"][name] = {"lines": lines, "bytes": size, "bytes_on_disk": path.stat().st_size}
        rows = measured[name]
        grep = next((r for r in rows if r["tool"] == "grep -c"), None)
        for r in rows:
            r["file"] = name
            r["lines_per_s"] = lines / r["median_s"]
            r["mb_per_s"] = size / 1e6 / r["median_s"]
            r["x_grep"] = r["median_s"] / grep["median_s"] if grep else None
            doc["results"].append(r)

    if args.only_1gb:
        doc["targets"] = check_targets(doc)
        args.out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
        print_report(doc, diag)
        print(f"\nwritten: {args.out}")
        return 0

    # start-up and a small log
    small = files["sglang-small.log"]
    startup = [("sglog --help", sglog_cmd() + ["--help"], {}, "")]
    if diag:
        startup.append(("sglog diagnose (1,000 lines)", sglog_cmd() + ["diagnose", str(small)], {"ok_codes": (0, 1)}, ""))
    else:
        startup.append(("sglog.load (1,000 lines, diagnose fallback)", load_fallback(small), {}, "sglog diagnose missing or failing: timed sglog.load(path) instead"))
    startup.append(("sglog events --stats (1,000 lines)", sglog_cmd() + ["events", "--stats", str(small)], {}, ""))
    doc["startup"] = []
    for name, argv_, kw, note in startup:
        print(f"  {name} ...", file=sys.stderr, flush=True)
        m = measure(argv_, max(args.runs, 3), **kw)
        if name.startswith("sglog diagnose") and not m["ok"]:
            note = f"sglog diagnose failed (exit {m['runs'][-1]['code']}): timed sglog.load(path) instead"
            name = "sglog.load (1,000 lines, diagnose fallback)"
            m = measure(load_fallback(small), max(args.runs, 3))
        m.update(tool=name, note=note)
        doc["startup"].append(m)

    if args.sample_lines:
        print(f"  correctness: fast path vs lark-only on {args.sample_lines:,} lines ...", file=sys.stderr, flush=True)
        doc["correctness"] = correctness(args.sample_lines, files["sglang-1m.log"])

    doc["targets"] = check_targets(doc)
    args.out.write_text(json.dumps(doc, indent=2, default=str) + "\n")
    print_report(doc, diag)
    print(f"\nwritten: {args.out}")
    return 0


def _get(doc: dict, file: str, tool_prefix: str) -> dict | None:
    return next((r for r in doc["results"] if r["file"] == file and r["tool"].startswith(tool_prefix)), None)


def check_targets(doc: dict) -> dict:
    out = {}
    for tool, tag in (("sglog diagnose", "diagnose"), ("sglog events", "events")):
        r1 = _get(doc, "sglang-1m.log", tool)
        r5 = _get(doc, "sglang-5m.log", tool)
        rgz = _get(doc, "sglang-1m.log.gz", tool)
        if r1:
            out[f"{tag}_1m_lines_per_s"] = {"value": round(r1["lines_per_s"]), "target": f">= {TARGETS['lines_per_s_1m']:,}", "ok": r1["lines_per_s"] >= TARGETS["lines_per_s_1m"]}
        if r1 and r5:
            ratio = r5["median_s"] / r1["median_s"]
            out[f"{tag}_5m_over_1m"] = {"value": round(ratio, 2), "target": f"<= {TARGETS['scale_5m_over_1m']}", "ok": ratio <= TARGETS["scale_5m_over_1m"]}
            out[f"{tag}_5m_rss_mb"] = {"value": round(r5["peak_rss_mb"]), "target": f"< {TARGETS['rss_5m_mib']:,.0f} MiB (1.5 GB)", "ok": r5["peak_rss_mb"] < TARGETS["rss_5m_mib"]}
        if r1 and rgz:
            over = rgz["median_s"] / r1["median_s"] - 1
            out[f"{tag}_gz_overhead"] = {"value": round(over, 3), "target": f"<= +{TARGETS['gz_overhead']:.0%}", "ok": over <= TARGETS["gz_overhead"]}
    # "faster than lnav and the Polars pipeline": against the peers timed in the same rounds (the
    # issue's Polars pipeline ran at ~300k lines/s; the field-by-field one stands for it, the one
    # regex a kind is the quickest we wrote: reported beside, not a target of the issue; lnav as
    # people run it is the target, lnav with the benchmark's SGLang format is reported beside)
    d1 = _get(doc, "sglang-1m.log", "sglog diagnose")
    for tool, tag, target in (
        ("polars peer (field by field)", "polars_peer_field_by_field", True),
        ("naive peer", "naive_peer", True),
        ("lnav (", "lnav", True),
        ("lnav + SGLang format", "lnav_sglang_format", False),
        ("polars peer (one regex a kind)", "polars_peer_one_regex_a_kind", False),
    ):
        peer = _get(doc, "sglang-1m.log", tool)
        if d1 and peer:
            x = peer["median_s"] / d1["median_s"]
            item = {"value": f"{x:.2f}x as fast ({peer['lines_per_s']:,.0f} lines/s)", "target": "faster (> 1x)", "ok": x > 1}
            if not target:
                item["target"] += ", reported only"
                item["info"] = True
            out[f"diagnose_1m_vs_{tag}"] = item
    for r in (r for r in doc["results"] if r["file"] == "sglang-1gb.log"):
        key = "1gb_rss_mb_" + r["tool"].removeprefix("sglog ").split(" --")[0].replace(" -f ", "_").replace(" ", "_")
        out[key] = {"value": round(r["peak_rss_mb"]), "target": f"< {TARGETS['rss_5m_mib']:,.0f} MiB (1.5 GB)", "ok": r["ok"] and r["peak_rss_mb"] < TARGETS["rss_5m_mib"]}
    startup = {r["tool"]: r for r in doc.get("startup", [])}
    h = startup.get("sglog --help")
    if h:
        out["help_s"] = {"value": round(h["median_s"], 3), "target": f"< {TARGETS['help_s']}", "ok": h["median_s"] < TARGETS["help_s"]}
    small = startup.get("sglog diagnose (1,000 lines)")
    if small:
        out["diagnose_1k_lines_s"] = {"value": round(small["median_s"], 3), "target": f"< {TARGETS['small_s']}", "ok": small["median_s"] < TARGETS["small_s"]}
    c = doc.get("correctness")
    if c:
        out["fast_equals_lark"] = {
            "value": c["fast_mismatches"] + c["fast_64k_chunks_mismatches"],
            "target": "0 mismatches in events, equal findings",
            "ok": c["fast_mismatches"] == 0 and c["fast_64k_chunks_mismatches"] == 0 and c.get("findings_equal", False),
        }
    return out


def print_report(doc: dict, diag: bool) -> None:
    m = doc["machine"]
    print(f"sglog benchmark  {doc['when']}  {m['cpus']} cpus, python {m['python']}, polars {m.get('polars', '?')}, load avg at start {m['load_avg_at_start']}")
    print(f"median of {doc['runs']} runs; cpu s = user + sys of the process tree; MB/s over uncompressed bytes; x grep = time / time of grep -c\n")
    head = ["file / tool", "median s", "cpu s", "lines/s", "MB/s", "peak RSS MiB", "x grep"]
    widths = [42, 9, 7, 11, 8, 12, 8]
    print(fmt_row(head, widths))
    print(fmt_row(["-" * w for w in widths], widths))
    for name, info in doc["files"].items():
        print(f"{name}  ({info['lines']:,} lines, {info['bytes'] / 1e6:.0f} MB)")
        for r in (r for r in doc["results"] if r["file"] == name):
            xg = f"{r['x_grep']:.1f}" if r["x_grep"] else "-"
            flag = "" if r["ok"] else "  (FAILED)"
            print(fmt_row(["  " + r["tool"] + flag, f"{r['median_s']:.3f}", f"{r['cpu_s']:.2f}", f"{r['lines_per_s']:,.0f}", f"{r['mb_per_s']:.0f}", f"{r['peak_rss_mb']:.0f}", xg], widths))
    print("\nstart-up and a small log")
    for r in doc.get("startup", []):
        print(fmt_row(["  " + r["tool"], f"{r['median_s']:.3f}", f"{r['cpu_s']:.2f}", "", "", f"{r['peak_rss_mb']:.0f}", ""], widths))
    notes = {r["note"] for r in doc["results"] + doc.get("startup", []) if r.get("note")}
    for n in sorted(notes):
        print(f"note: {n}")
    c = doc.get("correctness")
    if c:
        print(
            f"\ncorrectness: {c['sample_lines']:,}-line sample, {c['events']:,} events; fast vs lark-only: {c['fast_mismatches']} mismatches, "
            f"with 64 KiB chunks: {c['fast_64k_chunks_mismatches']}; {c['findings']} findings, "
            f"{'equal' if c.get('findings_equal') else 'DIFFERENT'} (lark-only {c['lark_only_s']} s, fast {c['fast_s']} s)"
        )
        for ex in c["fast_examples"] + c["fast_64k_chunks_examples"]:
            print(f"  line {ex['line']}: fast {ex['fast']} | lark {ex['lark']}")
    print("\ntargets")
    for k, t in doc["targets"].items():
        mark = "info" if t.get("info") else "ok  " if t["ok"] else "MISS"
        print(f"  {mark} {k}: {t['value']} (target {t['target']})")


if __name__ == "__main__":
    sys.exit(main())
