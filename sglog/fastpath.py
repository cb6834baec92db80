"""The vectorised path for the hot line kinds (prefill/decode batch, http access).

Per chunk of a file: split into a polars column of physical lines, route the
hot kinds by a literal needle, and read them with regexes *derived from the
grammar*:

* the envelope and the batch heads come from grammar terminals;
* a batch line's key/value body is generic, so lines are grouped by their
  *shape* (the body with its values removed); one exemplar per shape is parsed
  by lark, and its key sequence becomes an anchored regex (keys literal, values
  the grammar's ``COLON_VALUE``), applied to every line of that shape with
  ``str.extract_groups``, then typed with the event class's table;
* ``http_access`` is a flat grammar rule compiled whole.

Lines the fast path is not sure about (ANSI codes, ``\\r``, no shape match) go
to the record layer and lark, so the result is the same as a lark-only parse.
"""

from __future__ import annotations

import functools
from typing import Any

import polars as pl

from sglog import grammar, messages, schema
from sglog.events import KIND_CLASSES, RANK_AXES, Rank, normalise_key

# Python-side converters of the FIELDS tables -> polars casts
_INT, _FLOAT, _BOOL = "int", "float", "bool"


def _conv_kind(conv) -> str:
    name = getattr(conv, "__name__", "")
    return {"to_int": _INT, "to_float": _FLOAT, "to_bool": _BOOL}.get(name, "guess")


@functools.cache
def _patterns() -> dict[str, str]:
    env = grammar.envelope_regex()
    value = grammar.terminal_pattern("COLON_VALUE")
    return {
        "batch": env + f"(?P<head>{grammar.terminal_pattern('PREFILL_HEAD')}|{grammar.terminal_pattern('DECODE_HEAD')})(?P<body>.*)$",
        "access": f"^(?:\\[(?P<ts>{grammar.terminal_pattern('ENV_TS')})\\] )?" + grammar.flat_rule_regex("http_access") + "$",
        "value": value,
        "end": grammar.terminal_pattern("END"),
        "sep": ", ",
    }


_SHAPE_STRIP = r": (?:\[[^\]]*\]|[^,]*)"  # remove every value (mirrors COLON_VALUE)


def split_lines(text: str, first_line: int) -> pl.DataFrame:
    """A chunk of text (ending on a line boundary) -> frame(line, raw)."""
    if text.endswith("\n"):
        text = text[:-1]
    s = pl.Series("raw", [text]).str.split("\n").explode()
    return pl.DataFrame({"raw": s}).with_row_index("line", offset=first_line).with_columns(pl.col("line").cast(pl.Int64))


def hot_mask(df: pl.DataFrame) -> pl.DataFrame:
    """Add ``route``: 'batch', 'access' or None (slow path)."""
    raw = pl.col("raw")
    clean = ~raw.str.contains("\x1b", literal=True) & ~raw.str.contains("\r", literal=True)
    batch = raw.str.contains("] Decode batch", literal=True) | raw.str.contains("] Prefill batch", literal=True)
    access = raw.str.contains('" ', literal=True) & raw.str.contains(":     ", literal=True) & raw.str.contains(' HTTP/', literal=True)
    return df.with_columns(
        pl.when(clean & batch).then(pl.lit("batch")).when(clean & access).then(pl.lit("access")).otherwise(None).alias("route")
    )


# -- envelope --------------------------------------------------------------------


def _with_envelope(df: pl.DataFrame) -> pl.DataFrame:
    """Typed ts / ts_has_date / rank columns from the ``ts`` and ``ranks`` strings."""
    ts = pl.col("ts")
    has_date = ts.str.len_chars() > 12
    full = (
        pl.when(has_date)
        .then(ts.str.replace(",", ".", literal=True))
        .otherwise(pl.lit("1900-01-01 ") + ts.str.replace(",", ".", literal=True))
    )
    df = df.with_columns(
        full.str.to_datetime("%Y-%m-%d %H:%M:%S%.f", strict=False, time_unit="ms").alias("ts"),
        has_date.alias("ts_has_date"),
    )
    if "ranks" in df.columns:
        uniq = [r for r in df.get_column("ranks").unique().to_list() if r]
        rows = []
        for r in uniq:
            rank = Rank.parse(r)
            rows.append({"ranks": r, "rank": rank.label if rank else None, **{a: getattr(rank, a) if rank else None for a in RANK_AXES}})
        rdf = pl.DataFrame(rows, schema={"ranks": pl.String, "rank": pl.String, **{a: pl.Int64 for a in RANK_AXES}})
        df = df.join(rdf, on="ranks", how="left").drop("ranks")
    return df


# -- batch lines -------------------------------------------------------------------


@functools.cache
def _shape_regex(kind: str, exemplar_body: str, head: str) -> tuple[str, tuple[str, ...]] | None:
    """Derive the extraction regex of one batch-line shape from its lark parse."""
    parsed = messages.parse_message(head + exemplar_body)
    if parsed is None or parsed[0] != kind:
        return None
    from lark import Tree

    tree = grammar.parser().parse(head + exemplar_body)
    keys = [str(t.children[0]) for t in tree.iter_subtrees_topdown() if isinstance(t, Tree) and t.data == "colon_kv"]
    pats = _patterns()
    parts = []
    names = []
    for i, key in enumerate(keys):
        names.append(key)
        parts.append(grammar.escape(key) + ": " + f"(?P<v{i}>{pats['value']})")
    regex = "^" + pats["sep"].join(parts) + f"(?:{pats['end']})?$"
    return regex, tuple(names)


def read_batches(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """rows(line, raw, ...) routed 'batch' -> (typed batch frame, rows left for the slow path)."""
    pats = _patterns()
    ext = rows.with_columns(pl.col("raw").str.extract_groups(pats["batch"]).alias("_m")).unnest("_m")
    ok = ext.filter(pl.col("head").is_not_null() & pl.col("ray").is_null())
    rest = rows.join(ok.select("line"), on="line", how="anti")
    if ok.height == 0:
        return pl.DataFrame(), rest
    ok = ok.with_columns(
        pl.when(pl.col("head").str.starts_with("Decode")).then(pl.lit("decode_batch")).otherwise(pl.lit("prefill_batch")).alias("kind"),
        pl.col("body").str.replace_all(_SHAPE_STRIP, ":").alias("_shape"),
        pl.col("head").str.replace(r"\[\d+\]", "[0]").alias("_headshape"),
    )
    frames = []
    leftovers = []
    groups = ok.group_by(["kind", "_headshape", "_shape"], maintain_order=True)
    for (kind, _hs, _shape), group in groups:
        head = group.get_column("head")[0]
        body = group.get_column("body")[0]
        derived = _shape_regex(kind, body, head)
        if derived is None:
            leftovers.append(group.select("line"))
            continue
        regex, keys = derived
        vals = group.with_columns(pl.col("body").str.extract_groups(regex).alias("_v")).unnest("_v")
        matched = vals.filter(pl.col("v0").is_not_null()) if keys else vals
        missed = vals.filter(pl.col("v0").is_null()) if keys else vals.clear()
        if missed.height:
            leftovers.append(missed.select("line"))
        frames.append(_type_batch(matched, kind, keys))
    if leftovers:
        rest = pl.concat([rest, rows.join(pl.concat(leftovers), on="line", how="semi")])
    out = pl.concat(frames, how="diagonal_relaxed") if frames else pl.DataFrame()
    return out, rest


def _type_batch(df: pl.DataFrame, kind: str, keys: tuple[str, ...]) -> pl.DataFrame:
    table = KIND_CLASSES[kind].FIELDS
    exprs: list[pl.Expr] = []
    for i, key in enumerate(keys):
        name = normalise_key(key)
        col = pl.col(f"v{i}").str.strip_chars().str.strip_chars_end(".")
        conv = _conv_kind(table.get(name))
        if name == "new_token_ratio":
            continue
        if conv == _INT:
            exprs.append(col.cast(pl.Int64, strict=False).alias(name))
        elif conv == _FLOAT:
            if key.endswith("rate") and name == "cache_hit_rate":
                exprs.append((col.str.strip_chars_end("%").cast(pl.Float64, strict=False) / 100.0).alias(name))
            else:
                exprs.append(col.str.strip_chars_end("%").cast(pl.Float64, strict=False).alias(name))
        elif conv == _BOOL:
            exprs.append((col == "True").alias(name))
        else:
            # unknown key: typed by its look, like events.guess does
            num = col.cast(pl.Float64, strict=False)
            exprs.append(pl.when(col.str.ends_with("%")).then(col.str.strip_chars_end("%").cast(pl.Float64, strict=False) / 100).otherwise(num).alias(name))
    base = [pl.col("line"), pl.col("kind"), pl.col("ts"), pl.col("ranks")]
    if "text" in df.columns:
        base.append(pl.col("text"))
    extra = []
    if "head" in df.columns:
        extra.append(pl.col("head").str.extract(r"\[(\d+)\]").cast(pl.Int64, strict=False).alias("forward_iter"))
        extra.append(pl.col("head").str.extract(r"mixed #running-req: (\d+)").cast(pl.Int64, strict=False).alias("mixed_running_req"))
    graph = [k for k in keys if k.endswith(" graph") and k != "cuda graph"]
    if graph:
        extra.append(pl.lit(graph[0].split()[0]).alias("graph_backend"))
    out = df.select(base + exprs + extra)
    # drop head columns that are all null
    drop = [c for c in ("forward_iter", "mixed_running_req") if c in out.columns and out.get_column(c).null_count() == out.height]
    return out.drop(drop)


def read_access(rows: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    pats = _patterns()
    ext = rows.with_columns(pl.col("raw").str.extract_groups(pats["access"]).alias("_m")).unnest("_m")
    ok = ext.filter(pl.col("http_status").is_not_null())
    rest = rows.join(ok.select("line"), on="line", how="anti")
    if ok.height == 0:
        return pl.DataFrame(), rest
    cols = [
        pl.col("line"),
        pl.lit("http_access").alias("kind"),
        pl.col("ts"),
        pl.lit(None, dtype=pl.String).alias("ranks"),
        pl.col("client_sep").str.strip_suffix(' - "').alias("client"),
        pl.col("http_method").alias("method"),
        pl.col("http_path").alias("path"),
        pl.col("http_version"),
        pl.col("http_status").cast(pl.Int64).alias("status"),
        pl.col("http_phrase").fill_null("").str.strip_chars().alias("phrase"),
    ]
    if "text" in ok.columns:
        cols.append(pl.col("text"))
    return ok.select(cols), rest


def read_chunk(df: pl.DataFrame, keep_text: bool) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame]:
    """frame(line, raw) -> (batch frame, access frame, slow rows(line, raw))."""
    df = hot_mask(df)
    slow = df.filter(pl.col("route").is_null()).select("line", "raw")
    batch_rows = df.filter(pl.col("route") == "batch").select("line", "raw")
    access_rows = df.filter(pl.col("route") == "access").select("line", "raw")
    if keep_text:
        batch_rows = batch_rows.with_columns(pl.col("raw").alias("text"))
        access_rows = access_rows.with_columns(pl.col("raw").alias("text"))
    batches, rest_b = read_batches(batch_rows) if batch_rows.height else (pl.DataFrame(), batch_rows)
    access, rest_a = read_access(access_rows) if access_rows.height else (pl.DataFrame(), access_rows)
    if batches.height:
        batches = _with_envelope(batches)
    if access.height:
        access = _with_envelope(access.with_columns(pl.col("ts").fill_null("00:00:00"))).with_columns(
            pl.when(pl.col("ts").dt.year() == 1900).then(None).otherwise(pl.col("ts")).alias("ts")
        )
    leftovers = [x.select("line", "raw") for x in (rest_b, rest_a) if x.height]
    if leftovers:
        slow = pl.concat([slow] + leftovers).sort("line")
    return batches, access, slow


def rows_to_dicts(frame: pl.DataFrame, file: str) -> list[dict[str, Any]]:
    """Batch/access rows as event dicts (the same shape as Event.to_dict)."""
    out = []
    if frame.height == 0:
        return out
    for row in frame.iter_rows(named=True):
        rank = {a: row[a] for a in RANK_AXES if row.get(a) is not None}
        d = {
            "kind": row["kind"],
            "file": file,
            "line": row["line"],
            "end_line": row["line"],
            "ts": row["ts"].isoformat(sep=" ") if row.get("ts") else None,
            "ts_has_date": row.get("ts_has_date", True) if row.get("ts") else True,
            "rank": rank or None,
        }
        for k, v in row.items():
            if k in schema.ENVELOPE_COLUMNS or k in RANK_AXES or v is None:
                continue
            d[k] = v
        d["text"] = row.get("text", "")
        out.append(d)
    return out
