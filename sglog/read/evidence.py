"""Is this SGLang's log?  Decided from evidence in the events, never from coverage.

Evidence that SGLang wrote a file is any one of (``sglang_evidence``):

* ``envelope``: SGLang's own prefix -- rank tags (``[... TP0]``) or a dated ``[YYYY-MM-DD hh:mm:ss] ``;
* ``event``: an event kind only SGLang writes (the event class says so: ``SGLANG_ONLY``);
* ``catalogue``: a catalogued message that only SGLang prints (not shared with vLLM; a ``raise``
  or ``__str__`` text is too weak alone);
* ``traceback``: SGLang's code (``sglang/`` paths, ``sglang.`` modules, ``sgl_kernel``) in a traceback,
  thread dump or C++ block;
* ``module``: an SGLang module named in a ``LEVEL file.py:N`` prefix (a catalogue source file);
* ``launch``: a launch command (``python -m sglang.launch_server``, ``sglang serve``).

Only a file with none of these is looked at for another server's signature
(``other_server``: the table ``OTHER_SERVERS``, each product's own words), so an SGLang log
pays nothing for it.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

# each product's own words: names, module paths, logger names, line heads it alone prints
OTHER_SERVERS: tuple[tuple[str, str], ...] = (
    (
        "vLLM",
        r"\bvLLM\b|\bvllm[./](?:entrypoints|engine|v1|worker|executor|model_executor)\b|\bvllm serve\b"
        r"|\((?:RayWorkerWrapper|EngineCore(?:_\d+)?|APIServer|VllmWorker(?:Process)?|Worker_TP\d+) pid=\d+\)"
        r"|\bSpecDecoding metrics:|Avg prompt throughput: [\d.]+ tokens/s, Avg generation throughput",
    ),
    ("TGI (text-generation-inference)", r"\btext[_-]generation[_-](?:launcher|router|server)\b"),
    ("LMDeploy", r"\blmdeploy\b"),
    ("llama.cpp", r"\bllama_model_loader: |\bllm_load_(?:tensors|print_meta): |\bllama_new_context_with_model: |\bllama-server\b|\bllama_init_from_model: "),
    ("Ollama", r"\[GIN\] \d{4}/\d\d/\d\d|\bollama\b"),
    ("Triton / TensorRT-LLM", r"\[TensorRT-LLM\]|\btritonserver\b|\bTRITONBACKEND_|\bmodel_repository_manager\.cc"),
    ("TabbyAPI / ExLlama", r"\bTabbyAPI\b|\btabbyAPI\b|\bexllamav\d\b"),
)

# basenames too common to tell SGLang's module from another program's
_GENERIC_MODULES = frozenset(
    {"__init__.py", "utils.py", "config.py", "main.py", "server.py", "worker.py", "api.py", "base.py", "common.py", "logger.py", "log.py", "cli.py", "app.py", "core.py", "model.py", "engine.py"}
)
# SGLang's own code in a block's frames: its package's paths or modules, its kernel library
_SGLANG_CODE = re.compile(r"\bsglang[/.]|\bsgl[_-]kernel\b")
_LAUNCH = re.compile(r"\bsglang[._]launch_server\b|\bsglang serve\b|\bsglang\.srt\.")


@functools.cache
def _other_server_patterns() -> tuple[tuple[str, re.Pattern], ...]:
    return tuple((name, re.compile(rx)) for name, rx in OTHER_SERVERS)


@functools.cache
def _sglang_only_kinds() -> frozenset[str]:
    from sglog.events import KIND_CLASSES

    return frozenset(k for k, cls in KIND_CLASSES.items() if cls.SGLANG_ONLY)


@functools.cache
def _block_kinds() -> frozenset[str]:
    from sglog.events import BLOCK_KINDS, KIND_CLASSES

    return frozenset(BLOCK_KINDS) | {k for k, cls in KIND_CLASSES.items() if cls.SOURCE == "block"}


@functools.cache
def _sglang_modules() -> frozenset[str]:
    """Basenames of the files SGLang's catalogued messages come from (none without a catalogue)."""
    try:
        from sglog.read import catalog

        sources = catalog.load().sources()
    except Exception:  # no catalogue: this one piece of evidence is not available
        return frozenset()
    return frozenset(s.rsplit("/", 1)[-1].partition(":")[0] for s in sources) - _GENERIC_MODULES


def event_evidence(e) -> str | None:
    """The kind of SGLang evidence one event is, or None."""
    if e.rank is not None:
        return "envelope"
    kind = e.kind
    if kind in _sglang_only_kinds():
        return "launch" if kind == "launch_command" else "event"
    if e.SOURCE == "catalogue":  # (sglang_message and the kinds sglog/read/named.py gives templates)
        f = e.fields
        if not f.get("shared") and f.get("origin") not in ("raise", "str"):
            return "catalogue"
    if kind in _block_kinds() and _SGLANG_CODE.search(e.text):
        return "traceback"
    if e.ts is not None and e.ts_has_date:  # (only SGLang's `[date time] ` prefix sets an event's time)
        return "envelope"
    src = e.fields.get("log_source")
    if isinstance(src, str) and src.partition(":")[0] in _sglang_modules():
        return "module"
    if kind == "pip_package" and e.fields.get("package") == "sglang":
        return "event"
    if kind in ("unparsed", "comment", "shell_prompt", "annotation") and _LAUNCH.search(e.text):
        return "launch"
    return None


def other_server(texts: Iterable[str]) -> str | None:
    """The other inference server whose own words appear in these lines, if any."""
    pats = _other_server_patterns()
    for t in texts:
        for name, rx in pats:
            if rx.search(t):
                return name
    return None
