"""The one sanitiser of text that leaves for a terminal (#28: terminal injection).

A log is written by a program sglog does not trust: its text may hold escape sequences that set
the terminal's title, clear the screen, reset it, move the cursor or, with C1 controls such as
``\\x9b`` (CSI), do the same in one character.  ``clean`` removes every escape sequence and every
C0/C1 control but tab and newline; ``keep_sgr`` keeps colour and style sequences (``ESC [ ... m``,
what rich writes when it colours), which can change how text looks but not the terminal's state.
``one_line`` makes a message one line (a newline in a file name cannot forge a second
``sglog: error:`` line), and ``quote`` shows a file name ``repr``-like when it is not plain.

The CLI applies it where it writes (``guard_streams``: stderr always, stdout on a terminal), so
no renderer has to remember it.

>>> clean("ok \\x1b]0;pwned\\x07\\x1b[2J\\x1bc\\x9b31mred\\x1b[0m\\ttab\\r\\n")
'ok red\\ttab\\n'
>>> clean("\\x1b[1;31mbold red\\x1b[0m \\x1b[2J", keep_sgr=True)
'\\x1b[1;31mbold red\\x1b[0m '
>>> one_line("x.log\\nsglog: error: forged")
'x.log\\\\nsglog: error: forged'
>>> quote("a b.log"), quote("plain.log")
("'a b.log'", 'plain.log')
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

# ESC then: CSI (params, intermediates, final), OSC/DCS/SOS/PM/APC strings (to BEL or ST, or the
# end of the text when unterminated), or a two-character sequence; the C1 forms (\x9b CSI, \x9d
# OSC, \x90 DCS ...); then any other C0/C1 control but tab and newline, and DEL
_SEQUENCE = re.compile(
    r"(?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]?"
    r"|(?:\x1b[\]PX^_]|[\x90\x98\x9d\x9e\x9f])[^\x07\x1b\x9c]*(?:\x07|\x1b\\|\x9c)?"
    r"|\x1b[ -/]*[0-~]?"
    r"|[\x00-\x08\x0b-\x1f\x7f-\x9f]"
)
_SGR = re.compile(r"\x1b\[[0-9;:]*m")


def _strip(m: re.Match[str]) -> str:
    return ""


def clean(text: str, keep_sgr: bool = False) -> str:
    """``text`` without escape sequences and C0/C1 controls (tab and newline kept)."""
    if text.isprintable() or not text:
        return text
    if not keep_sgr:
        return _SEQUENCE.sub("", text)
    return _SEQUENCE.sub(lambda m: m.group(0) if _SGR.fullmatch(m.group(0)) else "", text)


def one_line(text: str) -> str:
    """A message as one clean line: newlines shown as ``\\n``, controls removed."""
    return clean(text.replace("\r\n", "\n").replace("\r", "\n").replace("\n", "\\n"))


def quote(name: str) -> str:
    """A file name as messages show it: as typed when plain, else quoted like ``repr``."""
    if name and name.isascii() and name.isprintable() and not any(c in name for c in " '\"\\"):
        return name
    return repr(name)


class TerminalStream:
    """A text stream that cleans what is written to it (``clean``); everything else is the
    wrapped stream's (``isatty``, ``fileno``, ``encoding``, ``buffer`` ...), so rich and typer
    see the real terminal."""

    def __init__(self, stream: Any, keep_sgr: bool) -> None:
        self._stream = stream
        self._keep_sgr = keep_sgr

    def write(self, text: str) -> int:
        self._stream.write(clean(text, self._keep_sgr))
        return len(text)

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def _isatty(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def guard_streams() -> None:
    """Clean what sglog writes to stderr (always: messages for a person) and to stdout when it is
    a terminal (data written to a file or a pipe stay as they are: JSON escapes controls itself).
    Colour (SGR) sequences stay where the stream is a terminal."""
    import sys

    if sys.stdout is None:  # (started with stdout closed, >&-)
        sys.stdout = ClosedStream()
    if sys.stderr is None:  # (2>&-: messages have nowhere to go)
        import os

        sys.stderr = open(os.devnull, "w")
    for name, always in (("stdout", False), ("stderr", True)):
        stream = getattr(sys, name)
        if isinstance(stream, (TerminalStream, ClosedStream)):
            continue
        tty = _isatty(stream)
        if always or tty:
            setattr(sys, name, TerminalStream(stream, keep_sgr=tty))


class ClosedStream:
    """stdout when sglog started with it closed (``>&-``): writing to it is a one-line error
    (exit 2), not a traceback; a command writing to ``-o FILE`` runs as usual."""

    encoding = "utf-8"
    errors = "strict"

    def write(self, text: str) -> int:
        from sglog.errors import OutputError

        if not text:
            return 0
        raise OutputError("stdout is closed: nowhere to write the output (use -o FILE)")

    def writelines(self, lines: Iterable[str]) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        pass

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        import io

        raise io.UnsupportedOperation("stdout is closed")

    @property
    def closed(self) -> bool:
        return True
