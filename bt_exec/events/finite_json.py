"""JSON text that every reader can parse: no door sends ``NaN`` or ``Infinity``.

Python's ``json`` writes non-finite floats as the bare words ``NaN``, ``Infinity`` and ``-Infinity``, which
are not JSON: a browser's ``JSON.parse`` and most other parsers refuse the whole text. A backend's output or a
journal may hold such numbers, so every door encodes through here. Each non-finite float is carried as the
string ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``, as protobuf's JSON mapping writes them
(docs/security.md, "Non-finite numbers").
"""
from __future__ import annotations

import json
import math

NAN_MARKER, INFINITY_MARKER, NEGATIVE_INFINITY_MARKER = "NaN", "Infinity", "-Infinity"


def _marker(number: float) -> str:
    # Decided by value, not by repr: a float subclass (numpy's float64) may print otherwise.
    if number != number:
        return NAN_MARKER
    return INFINITY_MARKER if number > 0 else NEGATIVE_INFINITY_MARKER


def finite(value):
    """``value`` with every non-finite float (in dicts, lists and tuples, any depth) replaced by its marker.

    Containers are copied (tuples become lists), the input is left as it was. Walked without recursion, so a
    deep value cannot exhaust the stack.
    """
    if isinstance(value, float):
        return value if math.isfinite(value) else _marker(value)
    if not isinstance(value, (dict, list, tuple)):
        return value
    root = [value]
    pending = [(root, 0, value)]
    while pending:
        parent, key, item = pending.pop()
        if isinstance(item, float) and not math.isfinite(item):
            parent[key] = _marker(item)
        elif isinstance(item, dict):
            copy = dict(item)
            parent[key] = copy
            pending.extend((copy, child_key, child) for child_key, child in item.items()
                           if isinstance(child, (dict, list, tuple, float)))
        elif isinstance(item, (list, tuple)):
            copy = list(item)
            parent[key] = copy
            pending.extend((copy, index, child) for index, child in enumerate(item)
                           if isinstance(child, (dict, list, tuple, float)))
    return root[0]


def dumps(value, **options) -> str:
    """``json.dumps(value, **options)`` with non-finite floats as their markers.

    The common case (nothing non-finite) costs one strict encode; only a value that holds such a number is
    walked and encoded again.
    """
    try:
        return json.dumps(value, allow_nan=False, **options)
    except ValueError as exc:
        if "Out of range float" not in str(exc):
            raise
        return json.dumps(finite(value), allow_nan=False, **options)
