"""The Polars peer: the regex pipeline an analyst writes with polars for an SGLang log.

The issue that asked for the benchmark names "a Polars regex pipeline" (~300k lines/s) among
the tools people use today; this is one, written with care: the whole file read at once (the
CSV reader as a line splitter), the envelope taken apart by one regex (timestamps parsed),
lines told apart by the start of their message, and the fields of the batch, access and
retraction lines extracted by one regex per kind (capture groups, the fields in the order the
log prints them: anchored, so a batch line's fields are checked as far as they go) and cast,
in polars' lazy engine on every core; or, with ``--field-by-field``, each field by a regex of
its own (what one writes when the order may vary or a field may be missing: ~1.5x the time on
the decode lines).  No folding of multi-line records (a traceback is counted line by line), no
grammar, and the lines of other kinds are not read.  (A line holding the byte 0x1f, the CSV
reader's separator here, stops it: such logs are not among the benchmark's.)

    python benchmarks/polars_peer.py [--field-by-field] server.log [more.log ...]   (.gz too)

Prints a JSON summary to stdout: lines, records per kind, and per kind the count of each
field's values and the time span (so that every column is computed: the query planner drops
what no output needs).
"""

from __future__ import annotations

import json
import sys

import polars as pl

ENV = r"^\[(?P<ts>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)(?P<ranks>(?: [A-Z_]+\d+)*)\] (?P<msg>.*)$"

# kind -> (start of its message, one regex with a named group per field, {field: dtype}): the
# fields in the order the log prints them (one regex per kind: 8 regexes of one field each cost
# ~1.5x as much on the decode lines)
_I, _F = r"-?\d+", r"-?\d+(?:\.\d+)?"
KINDS = {
    "decode_batch": (
        "Decode batch",
        rf"^Decode batch, #running-req: (?P<running_req>{_I}), #token: (?P<token>{_I}), token usage: (?P<token_usage>{_F}), "
        rf"accept len: (?P<accept_len>{_F}), accept rate: (?P<accept_rate>{_F}), cuda graph: (?P<cuda_graph>True|False), "
        rf"gen throughput \(token/s\): (?P<gen_throughput>{_F}), #queue-req: (?P<queue_req>{_I})",
        {
            "running_req": pl.Int64,
            "token": pl.Int64,
            "token_usage": pl.Float64,
            "accept_len": pl.Float64,
            "accept_rate": pl.Float64,
            "cuda_graph": pl.Boolean,
            "gen_throughput": pl.Float64,
            "queue_req": pl.Int64,
        },
    ),
    "prefill_batch": (
        "Prefill batch",
        rf"^Prefill batch, #new-seq: (?P<new_seq>{_I}), #new-token: (?P<new_token>{_I}), #cached-token: (?P<cached_token>{_I}), "
        rf"token usage: (?P<token_usage>{_F}), #running-req: (?P<running_req>{_I}), #queue-req: (?P<queue_req>{_I}), "
        rf"input throughput \(token/s\): (?P<input_throughput>{_F}), cuda graph: (?P<cuda_graph>True|False)",
        {
            "new_seq": pl.Int64,
            "new_token": pl.Int64,
            "cached_token": pl.Int64,
            "token_usage": pl.Float64,
            "running_req": pl.Int64,
            "queue_req": pl.Int64,
            "input_throughput": pl.Float64,
            "cuda_graph": pl.Boolean,
        },
    ),
    "http_access": (
        "INFO:",
        r'^INFO:\s+(?P<client>\S+) - "(?P<method>[A-Z]+) (?P<path>\S+) HTTP/(?P<http_version>[\d.]+)" (?P<status>\d{3})',
        {"client": pl.String, "method": pl.String, "path": pl.String, "http_version": pl.String, "status": pl.Int64},
    ),
    "retraction": (
        "KV cache pool is full",
        rf"#retracted_reqs: (?P<retracted_reqs>{_I}), #new_tokens_gained: (?P<new_tokens_gained>{_I}), #new_token_ratio: (?P<new_token_ratio>{_F})",
        {"retracted_reqs": pl.Int64, "new_tokens_gained": pl.Int64, "new_token_ratio": pl.Float64},
    ),
}


# the same fields, one regex each (robust to their order and to missing ones; ``--field-by-field``)
FIELD_REGEXES = {
    "decode_batch": {
        "running_req": rf"#running-req: ({_I})",
        "token": rf"#token: ({_I})",
        "token_usage": rf"token usage: ({_F})",
        "accept_len": rf"accept len: ({_F})",
        "accept_rate": rf"accept rate: ({_F})",
        "cuda_graph": r"cuda graph: (True|False)",
        "gen_throughput": rf"gen throughput \(token/s\): ({_F})",
        "queue_req": rf"#queue-req: ({_I})",
    },
    "prefill_batch": {
        "new_seq": rf"#new-seq: ({_I})",
        "new_token": rf"#new-token: ({_I})",
        "cached_token": rf"#cached-token: ({_I})",
        "token_usage": rf"token usage: ({_F})",
        "running_req": rf"#running-req: ({_I})",
        "queue_req": rf"#queue-req: ({_I})",
        "input_throughput": rf"input throughput \(token/s\): ({_F})",
        "cuda_graph": r"cuda graph: (True|False)",
    },
    "http_access": {
        "client": r'^INFO:\s+(\S+) - "',
        "method": r'"([A-Z]+) ',
        "path": r'"[A-Z]+ (\S+) HTTP/',
        "http_version": r" HTTP/([\d.]+)\"",
        "status": r'" (\d{3})',
    },
    "retraction": {
        "retracted_reqs": rf"#retracted_reqs: ({_I})",
        "new_tokens_gained": rf"#new_tokens_gained: ({_I})",
        "new_token_ratio": rf"#new_token_ratio: ({_F})",
    },
}


def read(path: str, field_by_field: bool = False) -> dict:
    lines = pl.read_csv(path, has_header=False, separator="\x1f", quote_char=None, new_columns=["raw"], schema={"raw": pl.String}, raise_if_empty=False)
    lf = lines.lazy().with_columns(pl.col("raw").fill_null("").str.extract_groups(ENV).alias("e")).unnest("e")
    msg = pl.col("msg")
    kind = pl.lit("other")
    for name, (start, _rx, _fields) in reversed(KINDS.items()):
        test = msg.str.starts_with(start)
        if name == "http_access":  # (uvicorn's other INFO lines have no request)
            test = test & msg.str.contains(" HTTP/", literal=True)
        kind = pl.when(test).then(pl.lit(name)).otherwise(kind)
    lf = lf.with_columns(kind.alias("kind"), pl.col("ts").str.strptime(pl.Datetime("ms"), "%Y-%m-%d %H:%M:%S", strict=False))
    queries = [lf.group_by("kind").len()]
    for name, (_start, rx, fields) in KINDS.items():
        rows = lf.filter(pl.col("kind") == name)
        if field_by_field:
            rows = rows.select("ts", "ranks", *[msg.str.extract(FIELD_REGEXES[name][f], 1).alias(f) for f in fields])
        else:
            rows = rows.select("ts", "ranks", msg.str.extract_groups(rx).alias("f")).unnest("f")
        rows = rows.with_columns((pl.col(f) == "True") if dt == pl.Boolean else pl.col(f).cast(dt, strict=False) for f, dt in fields.items())
        span = [pl.col("ts").min().cast(pl.String).alias("first_ts"), pl.col("ts").max().cast(pl.String).alias("last_ts"), pl.col("ranks").drop_nulls().len().alias("ranks")]
        queries.append(rows.select(pl.len().alias("rows"), *[pl.col(f).drop_nulls().len().alias(f) for f in fields], *span))
    counts, *per_kind = pl.collect_all(queries)
    return {
        "path": path,
        "lines": lines.height,
        "kinds": dict(sorted(counts.iter_rows())),
        "values": {name: frame.row(0, named=True) for name, frame in zip(KINDS, per_kind)},
    }


def main(argv: list[str]) -> int:
    by_field = "--field-by-field" in argv
    print(json.dumps([read(p, by_field) for p in argv if p != "--field-by-field"]))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
