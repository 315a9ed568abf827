"""Byte budgets: how much of what clients and backends send the runtime keeps.

Sizes are the length of the compact JSON text a door would send, strings counted by
their characters, measured once when a thing is stored (never per tick). What is over
its budget is replaced by a marker, ``{"truncated": true, "bytes": N, "preview": TEXT}``,
or, in a table, evicts the oldest entries.
"""
from __future__ import annotations

import collections
import json

QUOTE_CHARS = 200      # a client's value quoted in a message
MESSAGE_CHARS = 1000   # one message (an issue, an op's error or detail)
PREVIEW_CHARS = 300    # the start of an output kept in its place once it is cut
MARKER_CHARS = PREVIEW_CHARS + 64  # a marker's own size, at most: what is no larger is never cut
ARGS_SHOWN_CHARS = 4096  # an op's args as views show them (the whole op is one get_op away)
_MAX_DEPTH = 128       # deeper (or cyclic) values are not measured: they are cut
_PREVIEW_NODES = 32    # values looked at to write a preview, whatever the output's size

_ENCODER = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False, default=str)


class _Unmeasurable(Exception):
    """A value too deep (or cyclic) to walk."""


def json_size(value: object) -> int | None:
    """The length of ``value``'s compact JSON text (strings by characters); None when it is too deep
    or cyclic to measure. One walk over the value's containers: a long string costs no more than a
    short one."""
    try:
        return _size(value, 0)
    except _Unmeasurable:
        return None


def _size(value: object, depth: int) -> int:
    kind = type(value)
    if kind is str:
        return len(value) + 2
    if kind is dict:
        if depth >= _MAX_DEPTH:
            raise _Unmeasurable
        size = 2 * len(value) + 1 if value else 2  # braces, a colon per item and the commas between
        for key, item in value.items():
            item_kind = type(item)
            size += (len(key) + 2 if type(key) is str else _scalar_size(key) + 2)
            if item_kind is str:
                size += len(item) + 2
            elif item_kind is bool or item is None:
                size += 5
            else:
                size += _size(item, depth + 1)
        return size
    if kind is list or kind is tuple:
        if depth >= _MAX_DEPTH:
            raise _Unmeasurable
        size = 1 + max(len(value), 1)
        for item in value:
            size += _size(item, depth + 1)
        return size
    return _scalar_size(value)


def _scalar_size(value: object) -> int:
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    if type(value) is int:
        return value.bit_length() * 3 // 10 + 2  # digits and sign, without converting a huge int to text
    if type(value) is float:
        return len(repr(value))
    try:
        return len(str(value)) + 2  # what the doors send for it (default=str)
    except Exception:  # an object whose str() fails is sent as nothing useful: count it as large
        raise _Unmeasurable from None


def shown(value: object, max_chars: int = ARGS_SHOWN_CHARS) -> object:
    """``value`` as a view shows it: whole up to ``max_chars`` of compact JSON, else its marker."""
    size = json_size(value)
    return value if size is not None and size <= max_chars else cut_marker(value, size)


def cut_marker(value: object, size: int | None) -> dict:
    """What is kept in place of a value over its budget: its size and the start of its JSON text."""
    return {"truncated": True, "bytes": size, "preview": json_preview(value)}


def json_preview(value: object, chars: int = PREVIEW_CHARS) -> str:
    """The start of ``value``'s compact JSON text, at most ``chars`` characters, built from a few of
    its parts only."""
    room = [_PREVIEW_NODES]
    text = _ENCODER.encode(_clipped(value, chars, room, 0))
    return text if len(text) <= chars else text[:chars - 1] + "\u2026"


def _clipped(value: object, chars: int, room: list[int], depth: int) -> object:
    """A small copy of ``value``: strings cut to ``chars``, containers to what ``room`` allows."""
    room[0] -= 1
    if type(value) is str:
        return value[:chars]
    if isinstance(value, dict):
        if depth >= 8:
            return {}
        out = {}
        for key, item in value.items():
            if room[0] <= 0:
                break
            out[str(key)[:chars]] = _clipped(item, chars, room, depth + 1)
        return out
    if isinstance(value, (list, tuple)):
        if depth >= 8:
            return []
        out = []
        for item in value:
            if room[0] <= 0:
                break
            out.append(_clipped(item, chars, room, depth + 1))
        return out
    if value is None or type(value) in (bool, float) or (type(value) is int and value.bit_length() < 64):
        return value
    try:
        return cut_text(str(value), chars)
    except Exception:
        return f"<{type(value).__name__}>"


def cut_text(text: str, chars: int = MESSAGE_CHARS) -> str:
    """``text`` whole when short; else its start and its end around a note of how much was left out."""
    if len(text) <= chars:
        return text
    tail = chars // 4
    head = chars - tail
    return f"{text[:head]}\u2026({len(text) - head - tail} chars cut)\u2026{text[-tail:]}"


def quote(value: object, chars: int = QUOTE_CHARS) -> str:
    """``repr(value)`` for a message, at most about ``chars`` characters of it."""
    if type(value) is str and len(value) > chars:
        return repr(value[:chars]) + f"\u2026({len(value)} chars)"
    if isinstance(value, (dict, list, tuple)):
        return json_preview(value, chars)
    huge = type(value) is int and value.bit_length() > 64  # its repr is slow, and refused past 4,300 digits
    text = f"<int of {value.bit_length()} bits>" if huge else repr(value)
    return cut_text(text, chars)


class BoundedTable:
    """Key -> value, oldest first; past ``max_count`` entries or ``max_bytes`` in all (each entry's size
    given when it is put) the oldest are evicted. The newest entry is kept even when it alone is over
    ``max_bytes`` (a caller asks for what it just stored), unless ``max_count`` is 0."""

    def __init__(self, max_count: int, max_bytes: int):
        self.max_count = max_count
        self.max_bytes = max_bytes
        self.bytes = 0
        self._entries: collections.OrderedDict[object, tuple[object, int]] = collections.OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: object) -> object | None:
        entry = self._entries.get(key)
        return None if entry is None else entry[0]

    def values(self) -> list:
        return [value for value, _size in self._entries.values()]

    def put(self, key: object, value: object, size: int) -> None:
        old = self._entries.pop(key, None)
        if old is not None:
            self.bytes -= old[1]
        self._entries[key] = (value, size)
        self.bytes += size
        entries = self._entries
        while len(entries) > self.max_count or (self.bytes > self.max_bytes and len(entries) > 1):
            _key, (_value, evicted) = entries.popitem(last=False)
            self.bytes -= evicted
