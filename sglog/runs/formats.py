"""Which SGLang release's line formats sglog read a log with.

A log of a release newer than the newest sglog knows is read all the same, with the formats of
the newest known release, and the summary says so (#28: an unknown future version was accepted
silently).

>>> assumed_release("0.5.9") is None
True
>>> assumed_release("99.0.0") == newest_release()
True
"""

from __future__ import annotations

import functools


@functools.cache
def _catalogue():
    from sglog.read.catalog import load

    return load()


@functools.cache
def newest_release() -> str | None:
    try:
        cat = _catalogue()
        keys = cat._release_keys
        return cat.releases[keys[-1][1]] if keys else None
    except Exception:  # (no catalogue shipped: nothing to say)
        return None


def assumed_release(version: str | None) -> str | None:
    """The newest known release when ``version`` is newer than every release sglog knows, else None."""
    if not version:
        return None
    from sglog.read.catalog import version_key

    key, newest = version_key(str(version)), newest_release()
    newest_key = version_key(newest) if newest is not None else None
    if key is None or newest is None or newest_key is None:
        return None
    return newest if key > newest_key else None


def assumed_note(runs) -> str:
    """'; SGLang 0.9.0 is newer than sglog knows: read with the formats of 0.5.23' for the runs
    of such versions (empty when there are none)."""
    notes = []
    for version in dict.fromkeys(str(r.version) for r in runs if getattr(r, "version", None)):
        newest = assumed_release(version)
        if newest:
            notes.append(f"; SGLang {version} is newer than sglog knows: read with the formats of {newest}")
    return "".join(notes)
