"""Paths the test modules share: the repository and its fixtures.

pytest puts tests/ on sys.path, so a module says `from conftest import ROOT, STORY`.
"""

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
