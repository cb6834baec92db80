"""Column names of every polars frame sglog builds, in one place."""

from __future__ import annotations

# envelope columns shared by every event frame
ENVELOPE_COLUMNS = ("line", "kind", "ts", "ts_has_date", "rank", "text", "file", "run")

# batch frame (prefill + decode lines): the typed fields of events.PrefillBatch/DecodeBatch
BATCH_CORE = (
    "running_req",
    "queue_req",
    "token_usage",
    "token",
    "new_seq",
    "new_token",
    "cached_token",
    "gen_throughput",
    "input_throughput",
    "accept_len",
    "accept_rate",
    "cuda_graph",
)

# timeline windows (sglog/timeline.py)
WINDOW_COLUMNS = (
    "window_start",
    "n_decode",
    "n_prefill",
    "decode_tps_p10",
    "decode_tps_p50",
    "decode_tps_p90",
    "prefill_tps_p50",
    "running_max",
    "queue_max",
    "token_usage_mean",
    "token_usage_max",
    "cuda_graph_share",
    "accept_len_mean",
    "retractions",
    "retractions_per_min",
    "steady",
)
