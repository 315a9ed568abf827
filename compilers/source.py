"""Turning what a caller hands in (dict, JSON text, bytes, Path) into a JSON document, within limits."""
from __future__ import annotations

import json
import math
import pathlib
import re
from collections.abc import Callable
from dataclasses import dataclass

from jsonpointer import escape

from bt_exec.errors import Issue, Issues, PlanError


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
_INT_BOUND = 1 << MAX_INT_BITS  # an integer of more bits is at least this far from 0

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


def parse_document(source, limits: Limits, wanted: Callable[[dict], bool] | None = None) -> tuple[object, list[dict]]:
    """The JSON document held by ``source`` and the warnings met reading it; PlanError if it cannot be read.

    A ``str`` is always JSON text, never a file name: only a ``pathlib.Path``
    opens a file, so text arriving over a network can never make us read one.
    Text that is not JSON may be a model's reply with prose around the JSON: see
    ``_json_in_reply`` (``wanted``: whether an object found there is a plan).
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
        # Characters are at most 4 UTF-8 bytes: count the bytes only when the cheap bound is unclear.
        if len(source) > limits.max_input_bytes or (
            len(source) * 4 > limits.max_input_bytes and _utf8_size(source) > limits.max_input_bytes
        ):
            raise PlanError([_too_large(_utf8_size(source), limits)])
        try:
            return _parse_text(source, wanted, limits.max_json_nesting)
        except PlanError as exc:
            if _looks_like_a_file_name(source):
                raise PlanError([_file_name_issue(source)]) from None
            raise
    if isinstance(source, dict):
        return source, []
    raise PlanError([Issue("type", "", f"expected a dict, JSON text or pathlib.Path, got {type(source).__name__}")])


# A str on one line, with no brace or quote, that ends in a file extension or holds a path separator, and is
# not JSON: most likely a file name.
_FILE_NAME = re.compile(r"[^\n{}\[\]\"]{0,4096}(?:\.[A-Za-z0-9]{1,10}|[/\\][^\n{}\[\]\"]*)")


def _looks_like_a_file_name(text: str) -> bool:
    return _FILE_NAME.fullmatch(text.strip()) is not None


def _file_name_issue(text: str) -> Issue:
    """Text that is no JSON and reads like a file name: text is never opened (text from a network could name
    any file), so say so, and how a file is read."""
    name = text.strip()
    shown = repr(name) if len(name) <= 200 else f"{name[:200]!r}..."
    return Issue("json_syntax", "", f"no JSON in this text: {shown}. Plan text is read as JSON, never as a file "
                                    f"name: send the plan's JSON (in Python, pathlib.Path({shown}) reads the file)")


def _parse_text(text: str, wanted: Callable[[dict], bool] | None, max_nesting: int) -> tuple[object, list[dict]]:
    try:
        return _parse_json(text), []
    except PlanError as exc:
        if exc.issues[0].code != "json_syntax":
            raise
        malformed = exc.issues[0].message
    return _json_in_reply(text, wanted, malformed, max_nesting)


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


# --- a model's reply: JSON with text around it -----------------------------------------------------------

# One fenced code block: a line opening with ``` (and perhaps a language), up to a line opening with ```.
_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
# Inside braces: a JSON string (to its end, or to the end of the text when it never closes), or a brace.
_BRACE_OR_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}]', re.DOTALL)
# Most balanced {...} a reply may hold: each is decoded, and a reply is a plan with a few words around it.
MAX_REPLY_OBJECTS = 256


def _json_in_reply(text: str, wanted: Callable[[dict], bool] | None, malformed: str,
                   max_nesting: int) -> tuple[dict, list[dict]]:
    """The JSON object a reply carries among text, as Robonix's Pilot reads it, with a warning saying
    what was skipped; PlanError when there is none, or several that differ.

    The one fenced code block, when its content is a JSON object; otherwise the first balanced
    top-level ``{...}`` that parses as JSON, of those a dialect recognises (``wanted``) when there
    are any. Another such object that differs makes the reply ambiguous. Linear time: every
    character is scanned once, and the spans decoded do not overlap; at most ``MAX_REPLY_OBJECTS``,
    none nested deeper than ``max_nesting``.
    """
    fences = _FENCE.finditer(text)
    fence = next(fences, None)
    if fence is not None and next(fences, None) is None:
        try:
            doc = STRICT_JSON.decode(fence.group(1))
        except json.JSONDecodeError as exc:
            if fence.group(1).lstrip()[:1] == "{":  # the plan, broken: say where, in the reply's own lines
                raise PlanError([Issue("json_syntax", "", f"malformed JSON in the fenced code block, at "
                                                          f"{located(text, fence.start(1) + exc.pos)}: {exc.msg}")]) \
                    from None
            doc = None
        except (ValueError, RecursionError):
            doc = None
        if type(doc) is dict:
            return doc, [_skipped_warning("the fenced code block", fence.start(1), fence.end(1), len(text))]
    first = chosen = None  # (doc, start, end): the first object, the first that is wanted
    for count, (start, end) in enumerate(_balanced_objects(text, max_nesting)):
        if count == MAX_REPLY_OBJECTS:
            raise PlanError([Issue("ambiguous_reply", "", f"the text holds more than {MAX_REPLY_OBJECTS} {{...}} "
                                                          "blocks: send the plan alone, or with a few words around "
                                                          "it")])
        try:
            doc = STRICT_JSON.decode(text[start:end])
        except ValueError:
            continue
        except RecursionError:
            raise PlanError([Issue("too_deep", "", "JSON nesting is too deep to be a plan within the depth limit")]) from None
        if first is None:
            first = (doc, start, end)
        if wanted is not None and not wanted(doc):
            continue
        if chosen is None:
            chosen = (doc, start, end)
        elif doc != chosen[0]:
            raise PlanError([Issue("ambiguous_reply", "", f"the text holds two different JSON objects that could be "
                                                          f"the plan (at characters {chosen[1]} and {start}): send "
                                                          "one, alone or with text around it")])
    found = chosen or first
    if found is None:
        if text.lstrip()[:1] in ("{", "["):  # a document that breaks: malformed JSON, said as such
            raise PlanError([Issue("json_syntax", "", malformed)])
        raise PlanError([Issue("json_syntax", "", f"no JSON object in this text ({malformed}); a plan may come "
                                                  "with text around it: the first balanced {...}, or the one fenced "
                                                  "code block, is read")])
    doc, start, end = found
    return doc, [_skipped_warning("the JSON object", start, end, len(text))]


def located(text: str, position: int) -> str:
    """``line L column C`` of character ``position`` of ``text``, both counted from 1."""
    line_start = text.rfind("\n", 0, position) + 1
    return f"line {text.count(chr(10), 0, position) + 1} column {position - line_start + 1}"


def _balanced_objects(text: str, max_nesting: int):
    """(start, end) of each top-level balanced ``{...}`` of ``text``, in order; braces inside JSON strings
    do not count. Outside braces quotes are prose (an apostrophe, a quotation) and are not read. PlanError
    for braces nested deeper than ``max_nesting``: no plan within the limits, however it ends."""
    position = 0
    while (start := text.find("{", position)) >= 0:
        depth = 0
        for token in _BRACE_OR_STRING.finditer(text, start):
            mark = token.group()
            if mark == "{":
                depth += 1
                if depth > max_nesting:
                    raise PlanError([Issue("too_deep", "", f"the text nests braces deeper than the limit of "
                                                           f"{max_nesting} levels (at character {token.start()})")])
            elif mark == "}":
                depth -= 1
                if depth == 0:
                    yield start, token.end()
                    position = token.end()
                    break
        else:
            return  # open to the end of the text


def _skipped_warning(what: str, start: int, end: int, length: int) -> dict:
    return {"code": "text_skipped", "message": f"read {what} at characters {start} to {end} of the input and "
                                              f"skipped the text around it ({start} characters before, "
                                              f"{length - end} after)"}


def _utf8_size(text: str, chunk: int = 1 << 16) -> int:
    """UTF-8 bytes of ``text``, encoded a slice at a time: never a second copy of a huge input."""
    if text.isascii():
        return len(text)
    return sum(len(text[start:start + chunk].encode("utf-8", "surrogatepass")) for start in range(0, len(text), chunk))


def _too_large(size: int, limits: Limits) -> Issue:
    return Issue("too_large", "", f"input is {size} bytes, over the limit of {limits.max_input_bytes} bytes")


# --- every value of a document --------------------------------------------------------------------------

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
                                                f"an object key of {len(key)} characters, over the limit of {max_chars}"))
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
