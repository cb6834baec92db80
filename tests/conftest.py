"""Paths the test modules share: the repository and its fixtures.

pytest puts tests/ on sys.path, so a module says `from conftest import ROOT, STORY`.
"""

import io
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = ROOT / "fixtures"
LOGS = FIXTURES / "logs"
STORY = LOGS / "story"
REAL = LOGS / "real"
FOREIGN = LOGS / "foreign"
FRAGMENTS = LOGS / "fragments"
CONSTRUCTED = LOGS / "constructed"
ERRORS = LOGS / "errors"
LINES = FIXTURES / "lines"
STANDIN = ROOT / "tests" / "standin"
CASES = ROOT / "tests" / "rules"


def run_sglog(capsys, monkeypatch, *args: str, stdin: str | None = None) -> tuple[int, str, str]:
    """``sglog ARGS`` in this process, as the console script runs it: (exit code, stdout, stderr)."""
    from sglog import cli

    monkeypatch.setattr(sys, "argv", ["sglog", *args])
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin.encode())))
    code = 0
    try:
        cli.main()
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    out, err = capsys.readouterr()
    return code, out, err
