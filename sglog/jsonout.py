"""The one JSON writer of sglog's outputs: strict JSON, never ``Infinity`` or ``NaN``.

Python's ``json.dumps`` writes a float that is not finite as ``Infinity``/``NaN``, which no JSON
reader accepts (#28: ``diff --format json`` of a run whose throughput was 0 printed a ratio of
``Infinity``).  ``dumps`` writes such a value as ``null``.

>>> dumps({"ratio": float("inf"), "x": [1.5, float("nan")]})
'{"ratio": null, "x": [1.5, null]}'
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(value: Any) -> Any:
    """``value`` with every non-finite float (in dicts, lists, tuples) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite(v) for v in value]
    return value


def dumps(doc: Any, **kw: Any) -> str:
    """``json.dumps(doc, **kw)`` with non-finite floats as null (``allow_nan`` is always False)."""
    kw.pop("allow_nan", None)
    try:
        return json.dumps(doc, allow_nan=False, **kw)
    except ValueError:  # (a float out of range: cleaned, then written; rare, so not checked first)
        return json.dumps(finite(doc), allow_nan=False, **kw)
