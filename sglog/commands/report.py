"""`sglog report` (to be written)."""

from sglog.cli import app  # noqa: F401
