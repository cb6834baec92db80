"""A stand-in for ``python -m sglang.bench_serving``: a few /generate requests to 127.0.0.1:<--port>, then a summary."""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.request


def main() -> None:
    argv = sys.argv[1:]
    if os.environ.get("SGLOG_STANDIN_BENCH_ARGV"):
        with open(os.environ["SGLOG_STANDIN_BENCH_ARGV"], "w", encoding="utf-8") as f:
            json.dump(argv, f)
    port = int(argv[argv.index("--port") + 1])
    n = int(argv[argv.index("--num-prompts") + 1]) if "--num-prompts" in argv else 4
    t0 = time.monotonic()
    tokens = 0
    for i in range(min(n, 4)):
        body = json.dumps({"text": f"prompt {i}", "sampling_params": {"max_new_tokens": 80}}).encode()
        req = urllib.request.Request(f"http://127.0.0.1:{port}/generate", data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=30) as r:
            tokens += json.loads(r.read())["meta_info"]["completion_tokens"]
    dt = max(time.monotonic() - t0, 1e-6)
    print("============ Serving Benchmark Result ============")
    print(f"Successful requests:                     {min(n, 4)}")
    print(f"Output token throughput (tok/s):         {tokens / dt:.2f}")
    print("==================================================")


if __name__ == "__main__":
    main()
