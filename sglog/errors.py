"""Exit codes and the errors a user may see.  One table, used by every command."""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0  # nothing at or above --fail-on
    FINDINGS = 1  # findings at or above --fail-on
    INPUT = 2  # bad input or usage: one line on stderr
    INTERNAL = 70  # a bug in sglog (EX_SOFTWARE)


class SglogError(Exception):
    """An error meant for the user: printed as one line, never as a traceback."""

    exit_code: ExitCode = ExitCode.INPUT


class InputError(SglogError):
    """A file cannot be read as a log (missing, directory, binary, corrupt...)."""


class UsageError(SglogError):
    """Options that do not make sense together."""


class OutputError(SglogError):
    """An output file cannot be written (exit 2)."""


class NotSGLangLog(SglogError):
    """The input parsed, but does not look like an SGLang server log."""


class InternalError(SglogError):
    """sglog itself is broken (say, a data file it ships is missing or corrupt): one line, exit 70."""

    exit_code = ExitCode.INTERNAL
