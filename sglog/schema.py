"""Column names of every polars frame sglog builds, in one place."""

from __future__ import annotations

# envelope columns shared by every event frame
SCHEMA_VERSION = 1  # of the JSON documents sglog writes (diagnose, diff): a key's meaning changes only with it

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

# the phase an error event happened in, as its frames tell (the ``phase`` field of the block
# kinds; the frame -> phase table is sglog/read/frames.py).  The first eight are contexts (the
# innermost frame naming one wins); prefill/decode/forward name a forward pass (forward: one whose
# mode the frames do not tell).  None when the frames do not tell.
# line kinds whose message the reader classifies (``signatures`` / ``causes``, sglog/read/signatures.py):
# the lines no SGLang grammar rule types -- an unparsed line, a catalogue match without a kind of
# its own, a third-party library's log line -- where a failure's words can be; a typed SGLang event
# says what it is by its kind, and access logs, progress bars and prompts carry no failure's words
DESCRIBED_KINDS = frozenset({"unparsed", "sglang_message", "glog", "gloo", "library_log", "nccl_log", "rocm_log", "torch_log", "ucx_log", "vllm_log", "logging_error"})

ERROR_PHASES = (
    "distributed_init",
    "weight_load",
    "kv_pool",
    "attention_backend_init",
    "cuda_graph_capture",
    "warmup",
    "pd_transfer",
    "shutdown",
    "prefill",
    "decode",
    "forward",
)
FORWARD_PHASES = ("prefill", "decode", "forward")

# how a phase reads in a sentence ("crashed during KV-pool allocation"); the names above stay the data
PHASE_WORDS = {
    "startup": "startup",
    "launch": "launch",
    "distributed_init": "distributed initialisation",
    "weight_load": "weight loading",
    "kv_pool": "KV-pool allocation",
    "cuda_graph_capture": "CUDA-graph capture",
    "draft_weight_load": "draft-model weight loading",
    "draft_kv_pool": "draft KV-pool allocation",
    "draft_cuda_graph_capture": "draft CUDA-graph capture",
    "warmup": "warm-up",
    "serving": "serving",
    # phases only an error's frames tell (sglog/read/frames.py)
    "attention_backend_init": "attention-backend initialisation",
    "pd_transfer": "PD disaggregation's KV-transfer set-up or transfer",
    "shutdown": "shutdown",
    "prefill": "a prefill forward pass",
    "decode": "a decode forward pass",
    "forward": "a forward pass",
}

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

# series windows (sglog/timeline.py ``series_windows``: the findings in time, SGL6xx): one row
# per window of a metric's rows along the run's time, or along its lines in a log without dates;
# the metric's own aggregates follow these columns
SERIES_COLUMNS = (
    "window",  # the window's number along the axis (0 = the one holding the first row)
    "n",  # rows (samples) in the window
    "t_start",  # first and last timestamps of its rows (null when the axis is lines)
    "t_end",
    "line_start",  # first and last lines of its rows
    "line_end",
)

# their aggregates (``n_<name>``: the rows that have the metric); decode_windows: steady decode rows
DECODE_WINDOW_COLUMNS = ("accept_len", "n_accept_len", "accept_rate", "n_accept_rate", "gen_throughput", "n_gen_throughput", "running", "graph", "usage", "tokens_per_req")
# batch_windows: decode and prefill lines (the prefill lines' cached and new tokens summed)
BATCH_WINDOW_COLUMNS = ("queue", "n_queue", "usage", "running", "running_max", "n_prefill", "cached_tokens", "new_tokens", "new_per_prefill", "prefill_usage")
# retraction_windows: on the batch windows' grid
RETRACTION_WINDOW_COLUMNS = ("served", "retracted", "retracted_events", "retracted_counter")
# request_windows: finished requests
REQUEST_WINDOW_COLUMNS = ("ttft",)


# the step after each startup phase (what a log that ends after one's end line is waiting for)
NEXT_PHASE = {
    "distributed_init": "weight_load",
    "weight_load": "kv_pool",
    "kv_pool": "cuda_graph_capture",
    "cuda_graph_capture": "warmup",
    "draft_weight_load": "draft_kv_pool",
    "draft_kv_pool": "draft_cuda_graph_capture",
    "draft_cuda_graph_capture": "warmup",
}

# the startup lines, in the order a launch logs them (`Capture cuda graph bs/num tokens [...]`
# opens a capture stage: the piecewise prefill graphs after the decode graphs' end line)
STARTUP_EVENT_KINDS = (
    "init_dist_begin",
    "init_dist_end",
    "weight_load_begin",
    "weight_load_end",
    "kv_cache_allocated",
    "memory_pool_end",
    "cuda_graph_capture_begin",
    "cuda_graph_bs",
    "cuda_graph_capture_end",
    "memory_summary",
)


def coverage(unparsed: int, nonblank: int) -> float:
    """The share of non-blank lines something names: ``1 - unparsed / nonblank`` (1.0 for none)."""
    return 1.0 if nonblank <= 0 else round(1.0 - unparsed / nonblank, 4)


def gb(x: float | None, missing: str = "?") -> str:
    """Memory as sglog writes it: GB with two decimals (GiB, as SGLang prints), ``missing`` for none."""
    return missing if x is None else f"{x:.2f} GB"
