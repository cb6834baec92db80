"""The naive peer: what a careful one-off script does with an SGLang log.

Read lines, dispatch by a literal prefix, one Python regex per line kind, one
dict per record, typed values.  No folding of multi-line records (tracebacks
are counted line by line), no grammar: the baseline sglog is compared with.

    python benchmarks/naive_peer.py server.log [more.log ...]

Prints a JSON summary (lines, records per kind) to stdout.
"""

from __future__ import annotations

import gzip
import json
import re
import sys
from collections import Counter
from datetime import datetime

ENV = re.compile(r"^\[(?P<ts>(?:\d{4}-\d\d-\d\d )?\d\d:\d\d:\d\d(?:[.,]\d{3})?)(?P<ranks>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$")
KV = re.compile(r"([#A-Za-z][\w\- ().\/]*?): ([^,]+)")
ACCESS = re.compile(r'^INFO:\s+(?P<client>\S*) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/(?P<ver>[\d.]+)" (?P<status>\d{3})(?: (?P<phrase>.*))?$')
RETRACT = re.compile(r"^KV cache pool is full\. Retract requests\. (?P<kvs>.*)$")


def _num(v: str):
    v = v.strip()
    if v in ("True", "False"):
        return v == "True"
    try:
        return int(v)
    except ValueError:
        try:
            return float(v)
        except ValueError:
            return v


def _kvs(text: str) -> dict:
    return {k.strip("# ").replace(" ", "_").replace("-", "_"): _num(v) for k, v in KV.findall(text)}


def parse_line(line: str) -> dict:
    m = ENV.match(line)
    if not m:
        a = ACCESS.match(line)
        if a:
            return {"kind": "http_access", **a.groupdict()}
        return {"kind": "other", "text": line}
    msg = m.group("msg")
    rec = {"ts": datetime.strptime(m.group("ts")[:19], "%Y-%m-%d %H:%M:%S") if len(m.group("ts")) >= 19 else None, "ranks": m.group("ranks").strip()}
    if msg.startswith("Decode batch"):
        rec.update(kind="decode_batch", **_kvs(msg.split(", ", 1)[1] if ", " in msg else msg))
    elif msg.startswith("Prefill batch"):
        rec.update(kind="prefill_batch", **_kvs(msg.split(", ", 1)[1] if ", " in msg else msg))
    elif msg.startswith("INFO:"):
        a = ACCESS.match(msg)
        if a:
            rec.update(kind="http_access", **a.groupdict())
            rec["status"] = int(rec["status"])
        else:
            rec.update(kind="uvicorn", text=msg)
    elif msg.startswith("KV cache pool is full"):
        r = RETRACT.match(msg)
        rec.update(kind="retraction", **(_kvs(r.group("kvs")) if r else {}))
    else:
        rec.update(kind="other", text=msg)
    return rec


def read(path: str) -> tuple[int, list[dict]]:
    opener = gzip.open if path.endswith(".gz") else open
    records = []
    n = 0
    with opener(path, "rt", encoding="utf-8", errors="replace", newline="\n") as f:
        for line in f:
            n += 1
            records.append(parse_line(line.rstrip("\n")))
    return n, records


def main(argv: list[str]) -> int:
    out = []
    for path in argv:
        n, records = read(path)
        out.append({"path": path, "lines": n, "kinds": dict(Counter(r["kind"] for r in records))})
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
