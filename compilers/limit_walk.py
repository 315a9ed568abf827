"""The limit walk: every value of a JSON document checked against the limits, in one pass, before anything
reads its fields (strings and keys, nesting, text with no UTF-8 form, numbers, and the size of a dict a
Python caller hands in)."""
from __future__ import annotations

import math
import re
from collections.abc import Callable

from jsonpointer import escape

from bt_exec.errors import Issue, Issues

from .limits import MAX_INT_BITS, Limits

_INT_BOUND = 1 << MAX_INT_BITS  # an integer of more bits is at least this far from 0
_CLOSE = object()  # stack marker: the container below is finished (it left the current path)
_SCALAR_SIZES = {type(None): 4, bool: 4, int: 1, float: 1}  # lower bounds of a scalar's JSON text


def check_document(doc: object, limits: Limits, *, arena: bool = False, depth: int = 0, measured: bool = True,
                   embedded: Callable[[str], bool] | None = None, at: str | None = None) -> list[Issue]:
    """Issues with the values of a JSON document, checked before anything reads its fields.

    One walk with an explicit stack (no recursion), in document order: a string or an
    object key over ``max_string_chars`` (``string_too_long``); nesting over
    ``limits.max_json_nesting`` (``too_deep``); text with no UTF-8 form (``bad_text``): a lone
    surrogate in a string or key, or escaped in a string of embedded JSON text, refused here so
    that no answer quoting it can fail to encode. A ``dict`` handed in by a Python caller
    may hold what JSON text cannot, and is also refused for it: a key that is not a
    string, a value of no JSON type, NaN or infinity, a value that contains itself (``type``);
    anywhere, an integer of more than ``MAX_INT_BITS`` bits (``bad_value``); and, unless ``measured`` (text
    was measured when read), a size over ``max_input_bytes`` written as compact JSON
    (``too_large``), which also bounds the walk over a dict that shares its parts.

    ``arena``: paths in arena notation (``nodes[1].call``), else JSON pointers.
    ``depth``: the nesting the document sits at, and ``at`` the key it sits under (a
    document decoded from a text field).
    ``embedded(path)``: whether the string at ``path`` is JSON text checked on its own
    once decoded, so that its length is not held against it.
    """
    if _clean(doc, limits, depth, measured, embedded is not None):
        return []
    issues = Issues()
    max_chars, max_nesting = limits.max_string_chars, limits.max_json_nesting
    size, budget = 0, limits.max_input_bytes
    nested_too_deep = False
    open_ids: set[int] = set()
    # (value, where, level): ``where`` is (parent's where, key) or None, turned into a path only for an issue
    stack: list = [(doc, None if at is None else (None, at), depth)]
    while stack:
        value, where, level = stack.pop()
        if value is _CLOSE:
            open_ids.discard(where)
            continue
        kind = type(value)
        if kind is str or isinstance(value, str):
            size += len(value) + 2
            if len(value) > max_chars:
                path = _path(where, arena)
                if embedded is None or not embedded(path):
                    issues.append(Issue("string_too_long", path, f"a string of {len(value)} characters, over the "
                                                                 f"limit of {max_chars}"))
            if not value.isascii() and (at_char := _surrogate_at(value)) is not None:
                issues.append(Issue("bad_text", _path(where, arena), _surrogate_message("a string", value, at_char)))
            elif embedded is not None and _may_hide_bad_values(value) and embedded(path := _path(where, arena)):
                issues.extend(_embedded_issues(value, path))
        elif kind is dict or kind is list or isinstance(value, (dict, list)):
            if level + 1 > max_nesting:
                if not nested_too_deep:
                    nested_too_deep = True
                    issues.append(Issue("too_deep", _path(where, arena), f"objects and arrays nested deeper than the "
                                                                         f"limit of {max_nesting} levels"))
                continue
            if id(value) in open_ids:
                issues.append(Issue("type", _path(where, arena), "this value contains itself: not a JSON document"))
                continue
            open_ids.add(id(value))
            stack.append((_CLOSE, id(value), 0))
            size += 1 + max(1, len(value))
            if isinstance(value, dict):
                items = list(value.items())
                unwalked = set()  # keys that are no text: named at their object (no path may hold them), not walked
                for key, _ in items:
                    if isinstance(key, str):
                        size += len(key) + 3
                        if not key.isascii() and (at_char := _surrogate_at(key)) is not None:
                            unwalked.add(key)
                            shown = f"{ascii(key[:40])}{'...' if len(key) > 40 else ''}"
                            issues.append(Issue("bad_text", _path(where, arena),
                                                _surrogate_message(f"an object key ({shown})", key, at_char)))
                        elif len(key) > max_chars:
                            issues.append(Issue("string_too_long", _path((where, key), arena),
                                                f"an object key of {len(key)} characters, over the limit of "
                                                f"{max_chars}"))
                    else:
                        issues.append(Issue("type", _path(where, arena),
                                            f"an object key must be a string, got a key of type {type(key).__name__}"))
                if unwalked:
                    items = [(key, child) for key, child in items if key not in unwalked]
                stack.extend((child, (where, key), level + 1) for key, child in reversed(items))
            else:
                stack.extend((value[index], (where, index), level + 1) for index in range(len(value) - 1, -1, -1))
        elif kind in _SCALAR_SIZES or isinstance(value, (int, float)):
            size += _SCALAR_SIZES.get(kind, 1)
            if isinstance(value, float) and not math.isfinite(value):
                issues.append(Issue("type", _path(where, arena), f"{value} is not a JSON number"))
            elif kind is int and value.bit_length() > MAX_INT_BITS:
                issues.append(Issue("bad_value", _path(where, arena), f"an integer of {value.bit_length()} bits, "
                                                                      f"over the {MAX_INT_BITS} bits a double holds"))
        else:
            issues.append(Issue("type", _path(where, arena), f"a {type(value).__name__} is not a JSON value"))
        if not measured and size > budget:
            issues.append(Issue("too_large", "", f"the document is over the limit of {budget} bytes (counted as "
                                                 "compact JSON text)"))
            return issues
        if issues.dropped:
            return issues
    return issues


def _clean(doc: object, limits: Limits, depth: int, measured: bool, escapes: bool) -> bool:
    """Whether ``check_document`` would find nothing: the fast pass it makes first (no paths, no
    order; breadth first, one level of nesting at a time).

    A ``measured`` document was decoded from text, so only its strings, integers and nesting
    can be wrong. In a dict from a caller, anything this pass is unsure of (a container met twice:
    shared, or containing itself) sends the document to the thorough pass. ``escapes``: some
    strings may be JSON text, so one that may hide a bad value once decoded is sent there too.
    """
    max_chars, max_nesting = limits.max_string_chars, limits.max_json_nesting
    size, budget = -2, limits.max_input_bytes  # -2: the list around the top value below is not in the document
    low, high = -_INT_BOUND, _INT_BOUND
    seen: set[int] = set()
    keys_ok: set = set()  # keys already checked: most keys repeat
    level, containers = depth, [[doc]]  # the top value, as if in a list one level up
    while containers:
        if level > max_nesting:
            return False
        level += 1
        below = []
        for container in containers:
            if not measured:
                if id(container) in seen:
                    return False
                seen.add(id(container))
                size += len(container) + 1
            if type(container) is dict:
                if not keys_ok.issuperset(container):
                    for key in container:
                        if type(key) is not str or len(key) > max_chars or not (key.isascii() or encodable(key)):
                            return False
                        keys_ok.add(key)
                if not measured:
                    size += sum(map(len, container))
                values = container.values()
            else:
                values = container
            # Strings are nearly always ASCII: only the others are encoded to find a lone surrogate.
            if measured:
                for item in values:
                    kind = type(item)
                    if kind is str:
                        if len(item) > max_chars or not (item.isascii() or encodable(item)) or escapes and (
                                "\\u" in item or len(item) >= 308 and _DIGIT_RUN.search(item) is not None):
                            return False
                    elif kind is dict or kind is list:
                        below.append(item)
                    elif kind is int and not low < item < high:
                        return False
                continue
            for item in values:
                kind = type(item)
                if kind is str:
                    if len(item) > max_chars or not (item.isascii() or encodable(item)) or escapes and (
                            "\\u" in item or len(item) >= 308 and _DIGIT_RUN.search(item) is not None):
                        return False
                    size += len(item)
                elif kind is dict or kind is list:
                    below.append(item)
                elif kind is int:
                    if item.bit_length() > MAX_INT_BITS:
                        return False
                elif kind is float:
                    if not math.isfinite(item):
                        return False
                elif item is not None and kind is not bool:
                    return False  # another type, or a subclass: the thorough pass says what it is
        if size > budget:
            return False
        containers = below
    return True


def encodable(text: str) -> bool:
    """Whether ``text`` has a UTF-8 form (no lone surrogate)."""
    return _surrogate_at(text) is None


def has_digit_run(json_text: str) -> bool:
    """Whether JSON text has a run of 308 digits, the length of the smallest integer over MAX_INT_BITS."""
    return _DIGIT_RUN.search(json_text) is not None


def _surrogate_at(text: str) -> int | None:
    """Where ``text`` has a surrogate code point, the one kind of Python text with no UTF-8 form (JSON
    text writes a lone one as an escape, "\\ud800"); None if it has none. A search: no encoded copy."""
    found = _SURROGATE.search(text)
    return None if found is None else found.start()


# The JSON decoder joins an escaped pair into one character: a surrogate left in decoded text is a lone one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def _surrogate_message(what: str, text: str, at_char: int) -> str:
    return (f"{what} with a lone surrogate (U+{ord(text[at_char]):04X} at character {at_char}): not text "
            "(UTF-8 has no form for it), so no answer could carry it")


def _may_hide_bad_values(json_text: str) -> bool:
    """Whether JSON text held in a string may decode to a lone surrogate or an integer over MAX_INT_BITS:
    it has a ``\\u`` escape or a run of 308 digits (2 ** MAX_INT_BITS has 308). A cheap test first
    (written out in ``_clean``'s loops)."""
    return "\\u" in json_text or len(json_text) >= 308 and _DIGIT_RUN.search(json_text) is not None


_DIGIT_RUN = re.compile(r"\d{308}")
# In JSON text, from the left: an escaped backslash, an escaped surrogate pair, or an escaped lone surrogate.
_SURROGATE_ESCAPES = re.compile(r"\\\\|\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2}|"
                                r"(\\u[dD][89a-fA-F][0-9a-fA-F]{2})")
# In JSON text, from the left: a string, or an integer of 308 digits or more (not a float's digits).
_LONG_INTEGERS = re.compile(r'"(?:[^"\\]|\\.)*"|(?<![\d.eE+-])(-?\d{308,})(?![\d.eE])')


def _embedded_issues(json_text: str, path: str) -> list[Issue]:
    """What JSON text held in a string at ``path`` hides: an escaped lone surrogate, an integer over
    MAX_INT_BITS. Found in the text, so that no door ever meets them decoded."""
    issues = []
    for match in _SURROGATE_ESCAPES.finditer(json_text):
        if match.group(1):
            issues.append(Issue("bad_text", path, f"JSON text with a lone surrogate in a string ({match.group(1)} "
                                                  f"at character {match.start()}): decoded, not text, so no answer "
                                                  "could carry it"))
            break
    for match in _LONG_INTEGERS.finditer(json_text):
        digits = match.group(1)
        # 400 digits are past MAX_INT_BITS for sure, and past them int() may refuse to read them
        if digits and (len(digits.lstrip("-")) > 400 or int(digits).bit_length() > MAX_INT_BITS):
            issues.append(Issue("bad_value", path, f"JSON text with an integer of {len(digits.lstrip('-'))} digits "
                                                   f"(at character {match.start()}), over the {MAX_INT_BITS} bits "
                                                   "a double holds"))
            break
    return issues


def _path(where, arena: bool) -> str:
    keys = []
    while where is not None:
        where, key = where
        keys.append(key)
    keys.reverse()
    if not arena:
        return "".join("/" + (str(key) if isinstance(key, int) else escape(str(key))) for key in keys)
    out = ""
    for key in keys:
        if isinstance(key, int):
            out += f"[{key}]"
        else:
            out += f".{key}" if out else str(key)
    return out
