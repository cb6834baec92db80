"""The Polars peer: the regex pipeline an analyst writes with polars for an SGLang log.

The issue that asked for the benchmark names "a Polars regex pipeline" (~300k lines/s) among
the tools people use today; this is one, written the way the polars documentation suggests:
the whole file read at once (the CSV reader as a line splitter), the envelope taken apart by
one regex, lines told apart by the start of their message, and each field of the batch,
access and retraction lines extracted by a regex of its own and cast, per kind, in polars'
lazy engine on every core.  No folding of multi-line records (a traceback is counted line by
line), no grammar, no check that a line has exactly the shape its fields were taken from.

    python benchmarks/polars_peer.py server.log [more.log ...]   (.gz too)

Prints a JSON summary (lines, records per kind, a few totals that make every column be
computed) to stdout.
"""

from __future__ import annotations

import json
import sys

import polars as pl

ENV = r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$"

# kind -> (start of its message, {field: (regex with one group, dtype)})
_INT, _FLOAT = r"(-?\d+)", r"(-?\d+(?:\.\d+)?)"
KINDS = {
    "decode_batch": (
        "Decode batch",
        {
            "running_req": (r"#running-req: " + _INT, pl.Int64),
            "token": (r"#token: " + _INT, pl.Int64),
            "token_usage": (r"token usage: " + _FLOAT, pl.Float64),
            "accept_len": (r"accept len: " + _FLOAT, pl.Float64),
            "accept_rate": (r"accept rate: " + _FLOAT, pl.Float64),
            "cuda_graph": (r"cuda graph: (True|False)", pl.String),
            "gen_throughput": (r"gen throughput \(token/s\): " + _FLOAT, pl.Float64),
            "queue_req": (r"#queue-req: " + _INT, pl.Int64),
        },
    ),
    "prefill_batch": (
        "Prefill batch",
        {
            "new_seq": (r"#new-seq: " + _INT, pl.Int64),
            "new_token": (r"#new-token: " + _INT, pl.Int64),
            "cached_token": (r"#cached-token: " + _INT, pl.Int64),
            "token_usage": (r"token usage: " + _FLOAT, pl.Float64),
            "running_req": (r"#running-req: " + _INT, pl.Int64),
            "queue_req": (r"#queue-req: " + _INT, pl.Int64),
            "input_throughput": (r"input throughput \(token/s\): " + _FLOAT, pl.Float64),
            "cuda_graph": (r"cuda graph: (True|False)", pl.String),
        },
    ),
    "http_access": (
        "INFO:",
        {
            "client": (r"^INFO:\s+(\S+) - \"", pl.String),
            "method": (r"\"([A-Z]+) ", pl.String),
            "path": (r"\"[A-Z]+ (\S+) HTTP/", pl.String),
            "status": (r"\" (\d{3})", pl.Int64),
        },
    ),
    "retraction": (
        "KV cache pool is full",
        {
            "retracted_reqs": (r"#retracted_reqs: " + _INT, pl.Int64),
            "new_tokens_gained": (r"#new_tokens_gained: " + _INT, pl.Int64),
            "new_token_ratio": (r"#new_token_ratio: " + _FLOAT, pl.Float64),
        },
    ),
}


def read(path: str) -> dict:
    lines = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None, new_columns=["raw"], schema={"raw": pl.String}, raise_if_empty=False)
    lf = lines.lazy().with_columns(pl.col("raw").fill_null("").str.extract_groups(ENV).alias("e")).unnest("e")
    msg = pl.col("msg")
    kind = pl.lit("other")
    for name, (start, _fields) in reversed(KINDS.items()):
        test = msg.str.starts_with(start)
        if name == "http_access":  # (uvicorn's other INFO lines have no request)
            test = test & msg.str.contains(" HTTP/", literal=True)
        kind = pl.when(test).then(pl.lit(name)).otherwise(kind)
    lf = lf.with_columns(kind.alias("kind"), pl.col("ts").str.strptime(pl.Datetime("ms"), "%Y-%m-%d %H:%M:%S", strict=False))
    queries = [lf.group_by("kind").len()]
    for name, (_start, fields) in KINDS.items():
        cols = [msg.str.extract(rx, 1).cast(dt, strict=False).alias(f) for f, (rx, dt) in fields.items()]
        queries.append(lf.filter(pl.col("kind") == name).select("ts", "ranks", *cols).select(pl.len().alias("rows"), *[pl.col(f).drop_nulls().len().alias(f) for f in fields]))
    counts, *per_kind = pl.collect_all(queries)
    return {
        "path": path,
        "lines": lines.height,
        "kinds": dict(sorted(counts.iter_rows())),
        "values": {name: frame.row(0, named=True) for name, frame in zip(KINDS, per_kind)},
    }


def main(argv: list[str]) -> int:
    print(json.dumps([read(p) for p in argv]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
