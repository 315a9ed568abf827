"""Checking a do op's args against its JSON Schema (Draft 2020-12): a fast pass, then the wording.

jsonschema checks every keyword of Draft 2020-12 and words each problem, at
about 10 µs an instance: a 10,000-op plan would spend a tenth of a second in it.
fastjsonschema compiles a schema to Python code that checks an instance in about
1 µs, but it speaks Draft 7. Where a schema uses only keywords the two drafts
mean the same way (``_SHARED``), the compiled check runs first; jsonschema then
runs only on what it refuses, to say what is wrong (and has the last word: an
instance it finds valid is valid). Any other schema goes to jsonschema alone.
"""
from __future__ import annotations

from typing import Callable

import fastjsonschema
import jsonschema
from jsonpointer import escape

# Keywords with one meaning in Draft 7 and Draft 2020-12, and where their subschemas sit.
_SUBSCHEMA = frozenset(("additionalProperties", "items", "contains", "propertyNames", "not", "if", "then", "else"))
_SUBSCHEMA_LISTS = frozenset(("allOf", "anyOf", "oneOf"))
_SUBSCHEMA_MAPS = frozenset(("properties", "patternProperties"))
_PLAIN = frozenset(("type", "required", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
                    "minLength", "maxLength", "pattern", "minItems", "maxItems", "uniqueItems", "minProperties",
                    "maxProperties", "title", "description", "default", "examples", "$comment", "deprecated",
                    "readOnly", "writeOnly"))
_SHARED = _SUBSCHEMA | _SUBSCHEMA_LISTS | _SUBSCHEMA_MAPS | _PLAIN | {"enum", "const"}


class ArgsSchema:
    """One args schema: ``problems(args)`` lists ``(pointer inside args, message)`` for every violation."""

    def __init__(self, schema: dict | bool):
        self.validator = jsonschema.Draft202012Validator(schema)
        self._fast_valid = _compiled(schema) if _shared_only(schema) else None

    def problems(self, instance: object) -> list[tuple[str, str]]:
        if self._fast_valid is not None and self._fast_valid(instance):
            return []
        out = []
        for error in sorted(self.validator.iter_errors(instance), key=lambda e: list(e.absolute_path)):
            pointer = "".join("/" + escape(str(p)) for p in error.absolute_path)
            out.append((pointer, error.message))
        return out


def _compiled(schema) -> Callable[[object], bool] | None:
    try:
        check = fastjsonschema.compile(schema)
    except Exception:  # anything it cannot compile is left to jsonschema
        return None

    def fast_valid(instance: object) -> bool:
        try:
            check(instance)
        except Exception:  # refused, or the generated code met a value it was not written for
            return False
        return True

    return fast_valid


def _shared_only(schema) -> bool:
    """Whether every keyword of ``schema`` and its subschemas means the same in Draft 7 and 2020-12."""
    stack = [schema]
    while stack:
        node = stack.pop()
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict) or not node.keys() <= _SHARED:
            return False
        for key, value in node.items():
            if key in _SUBSCHEMA:
                stack.append(value)
            elif key in _SUBSCHEMA_LISTS:
                if not isinstance(value, list):
                    return False
                stack.extend(value)
            elif key in _SUBSCHEMA_MAPS:
                if not isinstance(value, dict):
                    return False
                stack.extend(value.values())
            elif key in ("enum", "const") and not _strings_only(value if key == "enum" else [value]):
                return False  # Python's 1 == True would make the compiled check take true for 1
    return True


def _strings_only(values) -> bool:
    return isinstance(values, list) and all(value is None or isinstance(value, str) for value in values)
