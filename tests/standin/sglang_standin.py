"""A stand-in for ``python -m sglang.launch_server``: replays a log and behaves like the server.

Used by tests/test_repro*.py as ``--launcher "python tests/standin/sglang_standin.py"``.
Standard library only; no GPU, no SGLang.

Which log it replays depends on its argv (the fix changes the argv):

    SGLOG_STANDIN_MAP = JSON list of rules, first match wins:
        [{"when": ["--mem-fraction-static", "0.88"], "log": "ok.log", "decode_tok_s": 91.2},
         {"log": "oom.log", "exit": 1}]
    "when" is a run of consecutive argv words (absent: always matches).

Behaviour:
- replays the log's lines to stdout with the log's own pacing compressed so the
  whole replay takes at most SGLOG_STANDIN_SECONDS (default 1.0) seconds;
- starts a helper child in its process group (like SGLang's scheduler
  processes) and writes both pids to SGLOG_STANDIN_PIDS (if set);
- writes its argv as JSON to SGLOG_STANDIN_ARGV (if set);
- at the uvicorn "running" line or the ready line, serves /health and
  /generate on 127.0.0.1:<--port> (default 30000); each /generate prints
  prefill and decode batch lines (gen throughput around "decode_tok_s");
- a log that never reaches ready ends the process with the rule's "exit"
  code (default 1), leaving the helper child behind (sglog must clean up);
- SIGINT / SIGTERM: prints uvicorn's shutdown lines, stops the helper, exits 0.

SGLOG_STANDIN_MODE: "hang" stops the replay before the first CUDA graph capture
(or half-way) and hangs; "ignore-term" ignores SIGINT and SIGTERM (only SIGKILL
ends it, helper child included).
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

TS = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)")
READY = "The server is fired up and ready to roll!"
UVICORN = "Uvicorn running on"
LOCK = threading.RLock()  # the signal handler prints too (same thread)
STATE = {"last_ts": None, "t_last": time.monotonic(), "port": 30000, "tps": 90.0, "served": 0}


def out(line: str) -> None:
    with LOCK:
        sys.stdout.write(line + "\n")
        sys.stdout.flush()


def now_ts() -> str:
    """A timestamp continuing the replayed log's clock (so the new log reads as one story)."""
    base = STATE["last_ts"] or datetime(2026, 1, 1)
    return (base + timedelta(seconds=time.monotonic() - STATE["t_last"])).strftime("%Y-%m-%d %H:%M:%S")


def choose(argv: list[str]) -> dict:
    rules = json.loads(os.environ.get("SGLOG_STANDIN_MAP", "[]"))
    for rule in rules:
        when = rule.get("when") or []
        if not when or any(argv[i : i + len(when)] == when for i in range(len(argv))):
            return rule
    sys.stderr.write("standin: no rule in SGLOG_STANDIN_MAP matches the argv\n")
    sys.exit(3)


def flag(argv: list[str], name: str, default: str | None = None) -> str | None:
    for i, w in enumerate(argv):
        if w == name and i + 1 < len(argv):
            return argv[i + 1]
        if w.startswith(name + "="):
            return w.split("=", 1)[1]
    return default


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):  # uvicorn-style access lines instead
        pass

    def _send(self, code: int, body: bytes, ctype: str = "application/json") -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _access(self, code: int) -> None:
        out(f'[{now_ts()}] INFO:     127.0.0.1:{self.client_address[1]} - "{self.command} {self.path} HTTP/1.1" {code} OK')

    def do_GET(self):
        if self.path == "/health":
            self._send(200, b"")
            return
        self._send(404, b"{}")

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(n) if n else b"{}"
        if self.path != "/generate":
            self._send(404, b"{}")
            return
        try:
            req = json.loads(raw)
        except ValueError:
            self._send(400, b'{"error": "bad json"}')
            return
        max_new = int((req.get("sampling_params") or {}).get("max_new_tokens", 16))
        text = str(req.get("text", ""))
        STATE["served"] += 1
        tps = STATE["tps"]
        out(f"[{now_ts()}] Prefill batch, #new-seq: 1, #new-token: {max(len(text.split()), 1)}, #cached-token: 0, token usage: 0.00, #running-req: 0, #queue-req: 0")
        for i in range(max(max_new // 40, 1)):
            out(f"[{now_ts()}] Decode batch, #running-req: 1, #token: {40 * (i + 1)}, token usage: 0.01, cuda graph: True, gen throughput (token/s): {tps + (i % 3 - 1) * 0.4:.2f}, #queue-req: 0")
        self._access(200)
        body = json.dumps({"text": " Paris." * 3, "meta_info": {"prompt_tokens": 6, "completion_tokens": max_new, "id": str(STATE["served"])}}).encode()
        self._send(200, body)


def serve(port: int) -> None:
    httpd = ThreadingHTTPServer(("127.0.0.1", port), Handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()


def main() -> None:
    argv = sys.argv[1:]
    mode = os.environ.get("SGLOG_STANDIN_MODE", "normal")
    if os.environ.get("SGLOG_STANDIN_ARGV"):
        with open(os.environ["SGLOG_STANDIN_ARGV"], "w", encoding="utf-8") as f:
            json.dump(argv, f)
    rule = choose(argv)
    STATE["port"] = int(flag(argv, "--port", "30000"))
    STATE["tps"] = float(rule.get("decode_tok_s", 90.0))

    child_code = "import time; time.sleep(600)"
    if mode == "ignore-term":
        child_code = "import signal, time; signal.signal(signal.SIGINT, signal.SIG_IGN); signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(600)"
    child = subprocess.Popen([sys.executable, "-c", child_code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if os.environ.get("SGLOG_STANDIN_PIDS"):
        with open(os.environ["SGLOG_STANDIN_PIDS"], "w") as f:
            json.dump([os.getpid(), child.pid], f)

    def shutdown(signum, frame):
        for line in ("Shutting down", "Waiting for application shutdown.", "Application shutdown complete.", f"Finished server process [{os.getpid()}]"):
            out(f"[{now_ts()}] INFO:     {line}")
        child.kill()
        child.wait()
        os._exit(0)

    if mode == "ignore-term":
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
    else:
        signal.signal(signal.SIGINT, shutdown)
        signal.signal(signal.SIGTERM, shutdown)

    with open(rule["log"], encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    stamps = []
    for line in lines:
        m = TS.match(line)
        stamps.append(datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S") if m else None)
    known = [s for s in stamps if s]
    span = (known[-1] - known[0]).total_seconds() if len(known) > 1 else 0.0
    budget = float(os.environ.get("SGLOG_STANDIN_SECONDS", "1.0"))
    scale = min(1 / 50, budget / span) if span > 0 else 0.0
    stop_at = len(lines)
    if mode == "hang":
        stop_at = next((i for i, line in enumerate(lines) if "Capture cuda graph begin" in line or "Capture draft cuda graph begin" in line), len(lines) // 2)

    prev = None
    ready = False
    for i, line in enumerate(lines[:stop_at]):
        ts = stamps[i]
        if ts is not None:
            if prev is not None and ts > prev:
                time.sleep((ts - prev).total_seconds() * scale)
            prev = ts
            STATE["last_ts"], STATE["t_last"] = ts, time.monotonic()
        if not ready and (UVICORN in line or READY in line):
            serve(STATE["port"])
            ready = True
        out(line)
    if mode == "hang" or ready:
        while True:
            time.sleep(3600)
    # crashed: exit without stopping the helper child (sglog must clean the group)
    sys.exit(int(rule.get("exit", 1)))


if __name__ == "__main__":
    main()
