"""A model's reply: the JSON object it carries among text (a fenced code block, or a balanced ``{...}``), as
Robonix's Pilot reads it, and where in the text a position is."""
from __future__ import annotations

import json
import re
from collections.abc import Callable

from bt_exec.errors import Issue, PlanError

from .limits import STRICT_JSON

# One fenced code block: a line opening with ``` (and perhaps a language), up to a line opening with ```.
_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
# Inside braces: a JSON string (to its end, or to the end of the text when it never closes), or a brace.
_BRACE_OR_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"?|[{}]', re.DOTALL)
# Most balanced {...} a reply may hold: each is decoded, and a reply is a plan with a few words around it.
MAX_REPLY_OBJECTS = 256


def json_in_reply(text: str, wanted: Callable[[dict], bool] | None, malformed: str,
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
            raise PlanError([Issue("too_deep", "", "JSON nesting is too deep to be a plan within the depth limit")]) \
                from None
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
