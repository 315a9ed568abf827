"""Input limits: how large, deep and long a plan may be, and the numbers its JSON may carry (what a double
holds, what every door's wire types hold), with the one strict decoder that holds decoded text to them."""
from __future__ import annotations

import json
import math
from dataclasses import dataclass


@dataclass(frozen=True)
class Limits:
    """Input limits. Anything within them loads, compiles and runs; anything beyond is refused.

    ``max_string_chars`` bounds every string value and every object key of the
    input, in characters (descriptions, ids, args, ...). JSON text held in a
    field (a submit envelope's ``response``, an arena's ``args_json``) counts as
    part of the document: the strings inside it are checked instead.

    ``max_wait_ms`` is not a refusal but a cap: a cancel meta op asking to wait
    longer waits this long (Robonix's Pilot caps it the same way).
    """

    max_input_bytes: int = 16 * 1024 * 1024
    max_ops: int = 10_000
    max_depth: int = 128
    max_graph_steps: int = 256
    max_string_chars: int = 65_536
    max_wait_ms: int = 30_000

    def __post_init__(self):
        for name in ("max_input_bytes", "max_ops", "max_depth", "max_graph_steps", "max_string_chars",
                     "max_wait_ms"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"limit {name} must be a positive integer, got {value!r}")

    @property
    def max_json_nesting(self) -> int:
        """Deepest nesting of objects and arrays anywhere in a document: room for a tree of
        ``max_depth`` levels (two per level: the node and its children), an envelope and args."""
        return 2 * self.max_depth + 64


DEFAULT_LIMITS = Limits()

# Integers beyond a double's range (JSON readers hold numbers as doubles) are refused anywhere in a
# document: mixed with a float (an args schema's multipleOf, a division) they overflow, and printed they
# could pass Python's digit limit.
MAX_INT_BITS = 1023

# The range of every integer field of a plan that is not a count or an index: what every door's wire
# types carry (ROS int64), and more than any clock or counter reaches.
INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


def number_shown(value: object) -> str:
    """A value given where a number is due, as a message quotes it: short whatever its size."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int):
        return repr(value) if value.bit_length() <= 64 else f"an integer of {value.bit_length()} bits"
    if isinstance(value, float):
        return repr(value)
    if isinstance(value, str):
        return repr(value) if len(value) <= 40 else f"{value[:40]!r}... ({len(value)} characters)"
    return {dict: "an object", list: "an array"}.get(type(value), type(value).__name__)


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:20]} is too large")
    return value


# One decoder for every parse: json.loads with keyword arguments builds a new one each call.
STRICT_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)
