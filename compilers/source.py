"""Turning what a caller hands in (dict, JSON text, bytes, Path) into a JSON document, within limits."""
from __future__ import annotations

import json
import math
import pathlib
from dataclasses import dataclass

from bt_exec.errors import Issue, PlanError


@dataclass(frozen=True)
class Limits:
    """Input limits. Anything within them loads, compiles and runs; anything beyond is refused."""

    max_input_bytes: int = 16 * 1024 * 1024
    max_ops: int = 10_000
    max_depth: int = 128
    max_graph_steps: int = 256

    def __post_init__(self):
        for name in ("max_input_bytes", "max_ops", "max_depth", "max_graph_steps"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise ValueError(f"limit {name} must be a positive integer, got {value!r}")


DEFAULT_LIMITS = Limits()


def _reject_constant(name: str):
    raise ValueError(f"{name} is not valid JSON")


def _finite_float(text: str) -> float:
    value = float(text)
    if math.isinf(value):
        raise ValueError(f"number {text[:20]} is too large")
    return value


# One decoder for every parse: json.loads with keyword arguments builds a new one each call.
STRICT_JSON = json.JSONDecoder(parse_constant=_reject_constant, parse_float=_finite_float)


def parse_document(source, limits: Limits) -> object:
    """Return the JSON document held by ``source``; raise PlanError if it cannot be read.

    A ``str`` is always JSON text, never a file name: only a ``pathlib.Path``
    opens a file, so text arriving over a network can never make us read one.
    """
    if isinstance(source, pathlib.Path):
        try:
            size = source.stat().st_size
            if size > limits.max_input_bytes:
                raise PlanError([_too_large(size, limits)])
            source = source.read_bytes()
        except OSError as exc:
            raise PlanError([Issue("unreadable", "", f"cannot read {source}: {exc.strerror or exc}")]) from None
    if isinstance(source, (bytes, bytearray, memoryview)):
        if len(source) > limits.max_input_bytes:
            raise PlanError([_too_large(len(source), limits)])
        try:
            source = bytes(source).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise PlanError([Issue("encoding", "", f"input is not UTF-8 (byte {exc.start})")]) from None
    if isinstance(source, str):
        # Characters are at most 4 UTF-8 bytes: encode only when the cheap bound is unclear.
        if len(source) > limits.max_input_bytes or (
            len(source) * 4 > limits.max_input_bytes and len(source.encode("utf-8", "surrogatepass")) > limits.max_input_bytes
        ):
            raise PlanError([_too_large(len(source.encode("utf-8", "surrogatepass")), limits)])
        return _parse_json(source)
    if isinstance(source, dict):
        return source
    raise PlanError([Issue("type", "", f"expected a dict, JSON text or pathlib.Path, got {type(source).__name__}")])


def _parse_json(text: str) -> object:
    try:
        return STRICT_JSON.decode(text)
    except json.JSONDecodeError as exc:
        raise PlanError([Issue("json_syntax", "", f"malformed JSON at line {exc.lineno} column {exc.colno}: {exc.msg}")]) from None
    except ValueError as exc:
        raise PlanError([Issue("json_syntax", "", f"malformed JSON: {exc}")]) from None
    except RecursionError:
        # The C decoder counts nesting against the interpreter's limit; far past our depth limit anyway.
        raise PlanError([Issue("too_deep", "", "JSON nesting is too deep to be a plan within the depth limit")]) from None


def _too_large(size: int, limits: Limits) -> Issue:
    return Issue("too_large", "", f"input is {size} bytes, over the limit of {limits.max_input_bytes} bytes")
