"""The configuration file: ``sglog.toml``, or ``[tool.sglog]`` in ``pyproject.toml``.

Found from the current directory upwards (in one directory ``sglog.toml`` wins); the first
found is the one used.  What it may set, and what a command-line option overrides::

    select = ["SGL1", "speculative"]     # rules, as --select
    ignore = ["SGL503"]                  # as --ignore
    fail-on = "warning"                  # diagnose's --fail-on
    format = "json"                      # diagnose's --format

    [rules.cuda-graph-bs-oversized]      # a rule (name or code) -> its options (sglog explain NAME)
    ratio = 2.0

In ``pyproject.toml`` the same keys go under ``[tool.sglog]`` and ``[tool.sglog.rules.NAME]``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from sglog.errors import UsageError

KEYS = ("select", "ignore", "fail-on", "format", "rules")
FAIL_ON = ("error", "warning", "info")
FORMATS = ("rich", "json", "sarif", "github")


@dataclass(frozen=True)
class Config:
    path: Path | None = None  # the file it came from (None: no file)
    select: tuple[str, ...] = ()
    ignore: tuple[str, ...] = ()
    fail_on: str | None = None
    format: str | None = None
    options: dict[str, dict[str, Any]] = field(default_factory=dict)  # rule name or code -> option values

    @property
    def source(self) -> str:
        return str(self.path) if self.path else "no configuration file"


def find(start: Path | None = None) -> tuple[Path, dict[str, Any]] | None:
    """The configuration file at or above ``start`` and its table, or None."""
    here = (start or Path.cwd()).resolve()
    for folder in (here, *here.parents):
        own = folder / "sglog.toml"
        if own.is_file():
            return own, _read(own)
        project = folder / "pyproject.toml"
        if project.is_file():
            table = _read(project).get("tool", {}).get("sglog")
            if table is not None:
                return project, table
    return None


def _read(path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as e:
        raise UsageError(f"{path}: not a readable TOML file ({e})") from None


def load(start: Path | None = None) -> Config:
    """The configuration in effect (an empty one when there is no file); a wrong key is a usage error."""
    found = find(start)
    if found is None:
        return Config()
    path, table = found
    where = f"{path}{' [tool.sglog]' if path.name == 'pyproject.toml' else ''}"
    unknown = sorted(set(table) - set(KEYS))
    if unknown:
        raise UsageError(f"{where}: unknown key {', '.join(unknown)} (keys: {', '.join(KEYS)})")

    def names(key: str) -> tuple[str, ...]:
        v = table.get(key, [])
        if isinstance(v, str):
            v = [v]
        if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
            raise UsageError(f"{where}: {key} is a list of rule codes, names or prefixes")
        return tuple(v)

    def choice(key: str, allowed: tuple[str, ...]) -> str | None:
        v = table.get(key)
        if v is not None and v not in allowed:
            raise UsageError(f"{where}: {key} = {v!r}: one of {', '.join(allowed)}")
        return v

    rules = table.get("rules", {})
    if not isinstance(rules, dict) or not all(isinstance(v, dict) for v in rules.values()):
        raise UsageError(f"{where}: [rules.NAME] tables give a rule's options")
    return Config(path, names("select"), names("ignore"), choice("fail-on", FAIL_ON), choice("format", FORMATS), {k: dict(v) for k, v in rules.items()})


class _Named(Protocol):
    """What ``rule_options`` reads of a rule (sglog.rules.base.Rule: a later stage, not imported)."""

    @property
    def code(self) -> str: ...
    @property
    def name(self) -> str: ...


def rule_options(config: Config, rule: _Named) -> dict[str, Any]:
    """The options the file sets for ``rule`` (by its name or its code)."""
    return {**config.options.get(rule.code, {}), **config.options.get(rule.name, {})}
