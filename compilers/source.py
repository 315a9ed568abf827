"""Turning what a caller hands in (dict, JSON or XML text, bytes, Path) into a document, within the input size: a
JSON value, or for XML text (BehaviorTree.CPP's format) an ``XmlDocument``."""
from __future__ import annotations

import json
import pathlib
import re
from collections.abc import Callable

from bt_exec.errors import Issue, PlanError

from .btcpp.xml_read import XmlDocument, looks_like_xml, read_xml, xml_in_reply
from .limits import STRICT_JSON, Limits
from .reply import json_in_reply


def parse_document(source, limits: Limits, wanted: Callable[[dict], bool] | None = None) -> tuple[object, list[dict]]:
    """The document held by ``source`` and the warnings met reading it; PlanError if it cannot be read.

    A ``str`` is always plan text, never a file name: only a ``pathlib.Path``
    opens a file, so text arriving over a network can never make us read one.
    Text whose first markup is an element is XML (``read_xml``: no DTD, entity or
    external reference is ever read). Text that is not JSON may be a model's reply
    with prose around the plan: the XML ``<root>`` it holds (``xml_in_reply``), else
    its JSON (``json_in_reply``; ``wanted``: whether an object found there is a plan).
    An ``XmlDocument`` (a repaired one) is taken as it is.
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
            return _parse_text(source, wanted, limits)
        except PlanError:
            if not looks_like_xml(source) and _looks_like_a_file_name(source):
                raise PlanError([_file_name_issue(source)]) from None
            raise
    if isinstance(source, (dict, XmlDocument)):
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


def _parse_text(text: str, wanted: Callable[[dict], bool] | None, limits: Limits) -> tuple[object, list[dict]]:
    if looks_like_xml(text):
        return read_xml(text, limits), []
    try:
        return _parse_json(text), []
    except PlanError as exc:
        if exc.issues[0].code != "json_syntax":
            raise
        malformed = exc.issues[0].message
    embedded = xml_in_reply(text)
    if embedded is not None:
        xml, warnings = embedded
        return read_xml(xml, limits), warnings
    return json_in_reply(text, wanted, malformed, limits.max_json_nesting)


def _parse_json(text: str) -> object:
    try:
        return STRICT_JSON.decode(text)
    except json.JSONDecodeError as exc:
        raise PlanError([Issue("json_syntax", "", f"malformed JSON at line {exc.lineno} column {exc.colno}: "
                                                  f"{exc.msg}")]) from None
    except ValueError as exc:
        raise PlanError([Issue("json_syntax", "", f"malformed JSON: {exc}")]) from None
    except RecursionError:
        # The C decoder counts nesting against the interpreter's limit; far past our depth limit anyway.
        raise PlanError([Issue("too_deep", "", "JSON nesting is too deep to be a plan within the depth limit")]) \
            from None


def _utf8_size(text: str, chunk: int = 1 << 16) -> int:
    """UTF-8 bytes of ``text``, encoded a slice at a time: never a second copy of a huge input."""
    if text.isascii():
        return len(text)
    return sum(len(text[start:start + chunk].encode("utf-8", "surrogatepass")) for start in range(0, len(text), chunk))


def _too_large(size: int, limits: Limits) -> Issue:
    return Issue("too_large", "", f"input is {size} bytes, over the limit of {limits.max_input_bytes} bytes")
