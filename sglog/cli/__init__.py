"""The ``sglog`` command line: thin commands that call the stages and map errors to exit codes.

Each command lives in sglog/cli/<name>.py and registers itself on ``app``; heavy modules
(polars, lark, altair, rich) are imported inside the functions that need them, so ``sglog
--help`` loads typer and the command modules only.  The help screens are click's plain ones
(``rich_markup_mode=None``), with usage lines written by ``Command`` below.
"""

from __future__ import annotations

import os
import sys
from enum import Enum
from typing import Annotated, Any

import typer
from typer.core import TyperCommand

from sglog.errors import ExitCode, SglogError

HELP_OPTIONS = ("-h", "--help")


class Command(TyperCommand):
    """A command whose usage line reads as POSIX tools write it: ``sglog diff [OPTIONS] RUN_A RUN_B``.

    (typer's own writes a required argument in braces, ``{RUN_A}``, and a list as ``{logs}...``.)
    """

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces = [self.options_metavar] if self.options_metavar else []
        for param in self.get_params(ctx):
            if param.param_type_name != "argument":
                continue
            word = param.metavar or (param.name or "").upper()
            if param.nargs != 1 and not word.endswith("..."):
                word += "..."
            pieces.append(word if param.required else f"[{word}]")
        return pieces


class App(typer.Typer):
    """sglog's app: every command is a ``Command`` and has an example at the foot of its help."""

    def command(self, name: str | None = None, *, cls: Any = None, example: str | None = None, **kwargs: Any) -> Any:
        if example is not None:  # (\b: click keeps the lines as they are written)
            kwargs["epilog"] = "Examples:\n\n\b\n" + "\n".join(f"  {line}" for line in example.strip().splitlines())
        return super().command(name, cls=cls or Command, **kwargs)


app = App(
    name="sglog",
    help="Log forensics and post-mortems for SGLang inference servers.",
    add_completion=True,  # --install-completion / --show-completion (bash, zsh, fish, PowerShell)
    pretty_exceptions_enable=False,  # never print tracebacks with locals (logs may hold prompts or keys)
    rich_markup_mode=None,  # click's plain help: no rich import for a help screen
    context_settings={"help_option_names": list(HELP_OPTIONS), "max_content_width": 100},
    invoke_without_command=True,
    epilog="Run 'sglog COMMAND --help' for a command's options and examples.\n\n\b\nExit codes:\n  0   clean\n  1   findings at or above --fail-on\n  2   usage or input error\n  70  internal error",
)


class Color(str, Enum):
    auto = "auto"
    always = "always"
    never = "never"


def _version(value: bool) -> None:
    if value:
        from sglog import __version__

        sys.stdout.write(f"sglog {__version__}\n")
        raise typer.Exit(0)


@app.callback()
def _root(
    ctx: typer.Context,
    version: Annotated[bool | None, typer.Option("--version", "-V", help="Print the version and exit.", callback=_version, is_eager=True)] = None,
    color: Annotated[Color, typer.Option("--color", metavar="WHEN", help="Colour: auto (a terminal, FORCE_COLOR and NO_COLOR honoured), always or never.")] = Color.auto,
) -> None:
    """Log forensics and post-mortems for SGLang inference servers."""
    from sglog.cli._common import COLOR

    COLOR["when"] = color.value
    if ctx.invoked_subcommand is None:  # `sglog` alone: the help, exit 0
        sys.stdout.write(ctx.get_help() + "\n")
        raise typer.Exit(0)


# command modules register themselves on `app` (import order = help order)
# isort: off
from sglog.cli import diagnose as _diagnose  # noqa: E402,F401
from sglog.cli import diff as _diff  # noqa: E402,F401
from sglog.cli import report as _report  # noqa: E402,F401
from sglog.cli import repro as _repro  # noqa: E402,F401
from sglog.cli import events as _events  # noqa: E402,F401
from sglog.cli import runs as _runs  # noqa: E402,F401
from sglog.cli import rules as _rules  # noqa: E402,F401
# isort: on


def error_line(message: str) -> None:
    """``sglog: error: MESSAGE`` on stderr, as one clean line (sglog/textsafe.py: a newline or an
    escape sequence in a file name or log text can neither forge a line nor reach the terminal)."""
    from sglog.textsafe import one_line

    sys.stderr.write(f"sglog: error: {one_line(message)}\n")


def _usage_message(e: typer.TyperException) -> str:
    """A usage error as one line, with where to look (click's own is a usage block and a hint)."""
    lines = (e.format_message() or "usage error").strip().splitlines()
    ctx = getattr(e, "ctx", None)
    path = getattr(ctx, "command_path", None)
    first = lines[0][:-1] if lines[0].endswith(".") and not lines[0].endswith("...") else lines[0]
    return first + (f" (see '{path} --help')" if path else "")


def main(argv: list[str] | None = None) -> None:
    """Entry point: run the app; user errors are one line, bugs a distinct exit code."""
    from sglog.textsafe import guard_streams

    guard_streams()  # (what leaves for a terminal is cleaned where it is written, #28)
    try:
        _main(argv)
    finally:
        from sglog.read.inputs import remove_spooled

        remove_spooled()  # the temporary copy of stdin, if any


def _main(argv: list[str] | None) -> None:
    try:
        rc = app(argv, prog_name="sglog", standalone_mode=False)  # typer.Exit(n) comes back as the return value here
        if isinstance(rc, int) and not isinstance(rc, bool) and rc:
            sys.exit(rc)
    except SglogError as e:
        error_line(str(e))
        sys.exit(int(e.exit_code))
    except typer.Exit as e:
        sys.exit(e.exit_code)
    except typer.Abort:
        error_line("aborted")
        sys.exit(int(ExitCode.INPUT))
    except KeyboardInterrupt:
        error_line("interrupted")
        sys.exit(130)
    except typer.TyperException as e:  # click's usage errors (bad option, missing argument ...)
        error_line(_usage_message(e))
        sys.exit(int(ExitCode.INPUT))
    except Exception as e:  # a bug in sglog
        if os.environ.get("SGLOG_DEBUG"):
            raise
        error_line(f"internal error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''} (set SGLOG_DEBUG=1 for details)")
        sys.exit(int(ExitCode.INTERNAL))


def run() -> None:
    """The ``sglog`` console script: ``main``; a closed pipe on stdout is exit 2, not a traceback."""
    import gc

    # without the cyclic garbage collector: a command is a short batch job (repro, which may watch
    # a server for long, turns it back on); the data are trees, and cycles are freed at exit
    gc.disable()
    code: int = 0
    try:
        main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, (int, type(None))):
            error_line(str(e.code))
    try:
        sys.stdout.flush()
    except (OSError, ValueError):  # e.g. a closed pipe: the output did not get out
        code = code or int(ExitCode.INPUT)
        try:  # (so that the interpreter's own flush at exit does not fail again)
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, sys.stdout.fileno())
        except (OSError, ValueError):
            pass
    sys.exit(code)


if __name__ == "__main__":  # pragma: no cover
    run()
