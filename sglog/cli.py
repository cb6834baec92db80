"""The ``sglog`` command line: thin commands that call the stages and map errors to exit codes.

Each command lives in sglog/commands/<name>.py and registers itself on ``app``;
heavy modules (polars, lark, altair) are imported inside the commands, so
``sglog --help`` stays instant.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import sys
import types
from collections.abc import Iterator

# polars' allocator (jemalloc): hand freed pages back from a background thread after 1 s instead
# of keeping them for 10 s; long logs allocate and free hundreds of MB per stage, and kept pages
# count in peak memory (diagnose on 5M lines: -80 MB, no time cost; #7).  Set before polars
# loads; a user's own setting wins.
os.environ.setdefault("_RJEM_MALLOC_CONF", "background_thread:true,dirty_decay_ms:1000,muzzy_decay_ms:0")


class _LazyMetadata(types.ModuleType):
    """``importlib.metadata``, loaded when something first uses it.

    polars imports it at its top (``polars.io.iceberg._plugin``) for one function, the iceberg
    plugin's version check, which sglog never calls; loading it (email, zipfile, csv ...) is
    20-35 ms of every command's start (#7).  This stand-in has no attributes but its name: any
    other (``version``, ``PackageNotFoundError``, ``__path__`` for a submodule) imports the real
    module, which then replaces it in ``sys.modules`` and in the ``importlib`` package, and is
    returned.  (``__spec__`` is None so that an ``import importlib.metadata`` does not load it:
    the import system reads the ``__spec__`` of a module it finds in ``sys.modules``.)
    """

    def __init__(self) -> None:
        super().__init__("importlib.metadata")
        self.__spec__ = None

    def __getattr__(self, name: str):
        # (pops, not deletes: two threads' first uses at once would import it twice, not fail)
        if sys.modules.get(self.__name__) is self:
            sys.modules.pop(self.__name__, None)
        if importlib.__dict__.get("metadata") is self:
            importlib.__dict__.pop("metadata", None)
        return getattr(importlib.import_module(self.__name__), name)

    @staticmethod
    def install() -> None:
        """In place of ``importlib.metadata`` when it is not loaded yet (the CLI's process only)."""
        if "importlib.metadata" not in sys.modules:
            sys.modules["importlib.metadata"] = importlib.metadata = _LazyMetadata()


_LazyMetadata.install()

import typer  # noqa: E402

from sglog.errors import ExitCode, SglogError

_HELP_OPTIONS = ("-h", "--help")

app = typer.Typer(
    name="sglog",
    help="Log forensics and post-mortems for SGLang inference servers.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,  # never print tracebacks with locals (logs may hold prompts or keys)
    rich_markup_mode="rich",
    context_settings={"help_option_names": list(_HELP_OPTIONS)},
)



@app.callback()
def _root() -> None:
    """Log forensics and post-mortems for SGLang inference servers."""


# command modules register themselves on `app` (import order = help order)
from sglog.commands import diagnose as _diagnose  # noqa: E402,F401
from sglog.commands import diff as _diff  # noqa: E402,F401
from sglog.commands import report as _report  # noqa: E402,F401
from sglog.commands import repro as _repro  # noqa: E402,F401
from sglog.commands import events as _events  # noqa: E402,F401
from sglog.commands import runs as _runs  # noqa: E402,F401
from sglog.commands import rules as _rules  # noqa: E402,F401


_USAGE_ERRORS = {"UsageError", "BadParameter", "MissingParameter", "NoSuchOption", "BadOptionUsage", "BadArgumentUsage", "ClickException", "FileError", "TyperException", "NoArgsIsHelpError"}


def error_line(message: str) -> None:
    sys.stderr.write(f"sglog: error: {message}\n")


def main() -> None:
    """Entry point: run the app; user errors are one line, bugs a distinct exit code."""
    try:
        _main()
    finally:
        from sglog.inputs import remove_spooled

        remove_spooled()  # the temporary copy of stdin, if any


# what typer's help formatter imports from rich and sglog's help never uses: Markdown (help text in
# markdown, rich_markup_mode="markdown") and Traceback (pretty exceptions, disabled above)
_UNUSED_BY_HELP = (("rich.markdown", "Markdown"), ("rich.traceback", "Traceback"))


def _light_help_formatter() -> None:
    """Import typer's rich help formatter (``typer.rich_utils``) without ``rich.markdown`` and
    ``rich.traceback``, before a help screen is formatted (#7: ``sglog --help`` under 0.3 s).

    The formatter imports both at its top; they are ~0.1 s of a ~0.3 s ``sglog --help``
    (markdown_it ~55 ms, rich.pretty ~30 ms).  While it loads, each of the two modules is a
    stand-in whose class builds the real object if it is ever called; the stand-ins are then
    removed, so a later ``import rich.markdown`` loads the real module.  The help screens are the
    same (tests/test_startup.py).  Only when the formatter is not loaded yet and neither module is.
    """
    if "typer.rich_utils" in sys.modules or any(mod in sys.modules for mod, _ in _UNUSED_BY_HELP):
        return

    def stand_in(mod: str, name: str) -> type:
        def __new__(cls, *args, **kwargs):  # (never called for sglog's help; kept correct anyway)
            return getattr(importlib.import_module(mod), name)(*args, **kwargs)

        return type(name, (), {"__new__": __new__, "__module__": mod, "__doc__": f"Stands in for {mod}.{name} (sglog.cli)."})

    stubs = {}
    for mod, name in _UNUSED_BY_HELP:
        stub = types.ModuleType(mod)
        setattr(stub, name, stand_in(mod, name))
        stubs[mod] = stub
    sys.modules.update(stubs)
    try:
        importlib.import_module("typer.rich_utils")
    finally:
        for mod, stub in stubs.items():
            if sys.modules.get(mod) is stub:
                del sys.modules[mod]


@contextlib.contextmanager
def _only_the_command(name: str | None) -> Iterator[None]:
    """While ``sglog NAME ...`` runs, the app has NAME's command only (#7).

    typer builds every command's options from its function's signature each time the app runs
    (~20-30 ms for the nine); a command line that names one needs only that one.  Any other
    command line (``sglog --help``, a misspelt name, whose error suggests the close ones) gets them all."""
    from typer.main import get_command_name

    every = app.registered_commands
    mine = [c for c in every if (c.name or (c.callback and get_command_name(c.callback.__name__))) == name]
    if len(mine) != 1:
        yield
        return
    app.registered_commands = mine
    try:
        yield
    finally:
        app.registered_commands = every


def _main() -> None:
    if len(sys.argv) < 2 or not set(_HELP_OPTIONS).isdisjoint(sys.argv[1:]):
        _light_help_formatter()
    try:
        with _only_the_command(sys.argv[1] if len(sys.argv) > 1 else None):
            rc = app(standalone_mode=False)  # typer.Exit(n) comes back as the return value here
        if isinstance(rc, int) and not isinstance(rc, bool) and rc:
            sys.exit(rc)
    except SglogError as e:
        error_line(str(e))
        sys.exit(int(e.exit_code))
    except (typer.Exit, SystemExit) as e:
        code = getattr(e, "exit_code", None)
        if code is None:
            code = e.code if isinstance(e, SystemExit) else 0
        sys.exit(code if isinstance(code, int) else 0)
    except typer.Abort:
        error_line("aborted")
        sys.exit(int(ExitCode.INPUT))
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(130)
    except Exception as e:  # usage errors (typer's click) and real bugs
        if type(e).__name__ == "NoArgsIsHelpError":  # `sglog` alone: help was printed
            sys.exit(0)
        if hasattr(e, "format_message") and type(e).__name__ in _USAGE_ERRORS:
            msg = e.format_message() or "usage error"
            error_line(msg.strip().splitlines()[0])
            sys.exit(int(ExitCode.INPUT))
        if os.environ.get("SGLOG_DEBUG"):
            raise
        error_line(f"internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} (set SGLOG_DEBUG=1 for details)")
        sys.exit(int(ExitCode.INTERNAL))


def run() -> None:
    """The ``sglog`` console script: ``main``, then exit without tearing the interpreter down.

    Finalising an interpreter that loaded polars, lark and rich (module teardown, allocator and
    thread-pool shutdown) costs ~0.1 s, a sixth of a small log's diagnosis (#7).  Output is
    flushed first (``main`` has removed the spooled stdin copy); nothing else needs the teardown.
    The cyclic garbage collector is off (see below).
    """
    import gc

    # without the cyclic garbage collector: a command is a short batch job (repro, which may watch
    # a server for long, turns it back on); its passes over the modules and events it keeps cost
    # ~30-45 ms a run, a tenth of a small log's diagnosis (#7).  Unreachable cycles (rare: the
    # data are trees) are freed at exit.
    gc.disable()
    code = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            error_line(str(e.code))
    finally:
        try:
            sys.stdout.flush()
        except (OSError, ValueError):
            code = code or int(ExitCode.INPUT)  # e.g. a closed pipe: the output did not get out
        try:
            sys.stderr.flush()
        except (OSError, ValueError):
            pass
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
