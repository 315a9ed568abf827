"""BehaviorTree.CPP XML read safely: no DTD, no entity, no external reference is ever read, and the depth, the
element count and every attribute's length are held to the limits while the text is parsed (a 10,000-deep
nesting stops at the first element past the depth limit, never after building it)."""
from __future__ import annotations

import re
import xml.etree.ElementTree as ElementTree
from dataclasses import dataclass, field

import defusedxml.common
import defusedxml.ElementTree

from bt_exec.errors import Issue, PlanError

from ..limits import Limits

# A BT.CPP document: after an XML declaration, comments and processing instructions, its <root> element.
_XML_START = re.compile(r"\s*(?:<\?[^>]*\?>\s*|<!--.*?-->\s*)*<", re.DOTALL)
_ROOT_TAG = re.compile(r"<root[\s>/]")
_ROOT_END = re.compile(r"</root\s*>")
# One fenced code block: a line opening with ``` (and perhaps a language), up to a line opening with ```.
_FENCE = re.compile(r"^[ \t]*```[^\n`]*\n(.*?)^[ \t]*```", re.MULTILINE | re.DOTALL)
# The wrapping levels above a tree's first node: <root> and <BehaviorTree>.
WRAPPING_LEVELS = 2


class Element:
    """One XML element: its tag, attributes in document order, child elements (a list; the empty tuple while it
    has none, so that a tree's leaves make no list each), the line it starts on and the text written inside it
    (its pieces stripped; empty when only blanks). The comments written just before it (``comments``) and inside
    it after its children (``end_comments``) are set only where there are some: read them with ``getattr``."""

    __slots__ = ("tag", "attrs", "children", "line", "text", "comments", "end_comments")

    def __init__(self, tag: str, attrs: dict[str, str], children: list[Element] | tuple, line: int,
                 text: str = ""):
        self.tag = tag
        self.attrs = attrs
        self.children = children
        self.line = line
        self.text = text

    def __deepcopy__(self, memo: dict) -> Element:
        # a tree (a patch's copy) copied without recursion, however deep it nests
        copy = self._alike()
        stack = [(self, copy)]
        while stack:
            original, made = stack.pop()
            if original.children:
                made.children = [child._alike() for child in original.children]
                stack.extend(zip(original.children, made.children))
        return copy

    def _alike(self) -> Element:
        """This element without its children, its attributes a dict of its own."""
        made = Element(self.tag, dict(self.attrs), (), self.line, self.text)
        for name in ("comments", "end_comments"):
            comments = getattr(self, name, None)
            if comments is not None:
                setattr(made, name, comments)
        return made


@dataclass(eq=False, slots=True)
class XmlDocument:
    """A BT.CPP XML document as read: its ``<root>`` element (or whatever the document's element is), and the tags
    it holds (a loader skips looking for what none of its elements is)."""

    root: Element
    tags: frozenset[str] = frozenset()
    after_root: tuple[str, ...] = ()  # the comments written after the document's element


def looks_like_xml(text: str) -> bool:
    """Whether ``text`` is an XML document: its first markup, after blanks, an XML declaration and comments, is
    an element."""
    return _XML_START.match(text) is not None


def xml_in_reply(text: str) -> tuple[str, list[dict]] | None:
    """The XML document a model's reply carries among prose, with a warning saying what was skipped: the one
    fenced code block that holds a ``<root`` element, else the text from the first ``<root`` to the last
    ``</root>``; None when the text holds no ``<root`` element."""
    fences = [fence for fence in _FENCE.finditer(text) if _ROOT_TAG.search(fence.group(1))]
    if len(fences) == 1:
        start, end = fences[0].span(1)
        return text[start:end], [_skipped_warning("the XML in the fenced code block", start, end, len(text))]
    found = _ROOT_TAG.search(text)
    if found is None:
        return None
    start = found.start()
    closings = list(_ROOT_END.finditer(text, start))
    end = closings[-1].end() if closings else text.find(">", start) + 1 or len(text)
    return text[start:end], [_skipped_warning("the <root> element", start, end, len(text))]


def read_xml(text: str, limits: Limits) -> XmlDocument:
    """The document ``text`` holds; PlanError, located by line and column, for text that is not well-formed XML,
    that declares a DTD (where entities, entity bombs and external references live: refused, never read), or
    that goes past the limits (nesting deeper than ``max_depth`` tree levels, more elements than four per op
    of ``max_ops``, an attribute longer than ``max_string_chars``)."""
    parser = defusedxml.ElementTree.DefusedXMLParser(target=_NoTarget(), forbid_dtd=True)
    # The elements straight from expat (ElementTree's own handlers only rename what BT XML never holds); the
    # handlers defusedxml set on the same parser, which refuse DTDs, entities and external references, stay.
    expat = parser.parser
    expat.ordered_attributes = False  # a dict, in the document's order
    built = _Built()
    (expat.StartElementHandler, expat.EndElementHandler, expat.CharacterDataHandler,
     expat.CommentHandler) = _handlers(expat, limits, built)
    try:
        parser.feed(text)
        parser.close()
        if built.last is not None:
            _held_to_lengths(built.last, limits.max_string_chars)
    except _Refused as exc:
        raise PlanError([exc.issue]) from None
    except defusedxml.common.DefusedXmlException as exc:
        raise PlanError([Issue("xml_forbidden", "", f"line {expat.CurrentLineNumber}: {_forbidden(exc)}: "
                                                    "BT.CPP XML has no DTD, and entities and external references "
                                                    "are never read")]) from None
    except ElementTree.ParseError as exc:
        line, column = exc.position
        raise PlanError([Issue("xml_syntax", "", f"malformed XML at line {line} column {column + 1}: "
                                                 f"{_reason(exc)}")]) from None
    return XmlDocument(built.root, frozenset(built.tags), tuple(built.comments))


class _Refused(Exception):
    def __init__(self, issue: Issue):
        self.issue = issue


class _NoTarget:
    """ElementTree's parser calls its target's ``close`` only: the elements are built by ``_handlers``."""

    def close(self) -> None:
        return None


@dataclass(eq=False, slots=True)
class _Built:
    """What the handlers built: the document's element, the tags met, the element started last and the comments
    no element has taken yet (once the document is read: those after its element)."""

    root: Element | None = None
    tags: set[str] = field(default_factory=set)
    last: Element | None = None
    comments: list[str] = field(default_factory=list)


def _handlers(expat, limits: Limits, built: _Built):
    """expat's start, end, text and comment handlers: they build ``Element``s into ``built``, holding the document
    to the limits as it goes. Closures over locals, as expat calls them once per element of a large tree. A comment
    goes with the element that starts next (``comments``), else with the one that ends next (``end_comments``);
    there may be as many as elements.

    A tag, an attribute's name and its value are held to ``max_string_chars`` without measuring each: they lie
    between an element's start and the next element's, so only an element that starts more than that many bytes
    (UTF-8: at least one a character) before the next is measured, as the next starts (the last one once the
    document is read)."""
    max_nesting = limits.max_depth + WRAPPING_LEVELS
    max_elements = 4 * limits.max_ops
    max_chars = limits.max_string_chars
    stack: list[Element] = []
    push, pop, add_tag = stack.append, stack.pop, built.tags.add
    pending = built.comments
    count = 0
    last_at = 0
    comments = 0

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal count, last_at
        count += 1
        at = expat.CurrentByteIndex
        line = expat.CurrentLineNumber
        if count > max_elements or len(stack) >= max_nesting or at - last_at > max_chars:
            _held_to_limits(count, len(stack), line, limits)
            if built.last is not None:
                _held_to_lengths(built.last, max_chars)
        add_tag(tag)
        element = Element(tag, attrs, (), line)
        if pending:
            element.comments = tuple(pending)
            pending.clear()
        if stack:
            parent = stack[-1]
            if parent.children:
                parent.children.append(element)
            else:
                parent.children = [element]
        else:
            built.root = element
        push(element)
        built.last, last_at = element, at

    def end(tag: str) -> None:
        if pending:
            stack[-1].end_comments = tuple(pending)
            pending.clear()
        pop()

    def comment(text: str) -> None:
        nonlocal comments
        comments += 1
        if comments > max_elements:
            raise _Refused(Issue("too_large", "", f"line {expat.CurrentLineNumber}: more than {max_elements} "
                                                  "comments"))
        pending.append(text)

    def data(text: str) -> None:
        if stack and not text.isspace():
            element = stack[-1]
            element.text = f"{element.text} {text.strip()}" if element.text else text.strip()

    return start, end, data, comment


def _held_to_limits(count: int, nesting: int, line: int, limits: Limits) -> None:
    """_Refused when the element that starts at ``line`` goes past the count of elements or the nesting."""
    max_elements = 4 * limits.max_ops
    if count > max_elements:
        raise _Refused(Issue("too_many_ops", "", f"line {line}: more than {max_elements} elements (the "
                                                 f"limit is {limits.max_ops} nodes)"))
    if nesting >= limits.max_depth + WRAPPING_LEVELS:
        raise _Refused(Issue("too_deep", "", f"line {line}: elements nested deeper than the limit of "
                                             f"{limits.max_depth} tree levels"))


def _held_to_lengths(element: Element, limit: int) -> None:
    """_Refused when the element's tag or one of its attributes' names or values is longer than ``limit``."""
    if len(element.tag) > limit:
        _too_long("a tag", element.tag, element.line, limit)
    for name, value in element.attrs.items():
        if len(value) > limit or len(name) > limit:
            _too_long(f"attribute {name[:40]!r}" + ("..." if len(name) > 40 else ""),
                      value if len(value) > limit else name, element.line, limit)


def _too_long(what: str, text: str, line: int, limit: int) -> None:
    raise _Refused(Issue("string_too_long", "", f"line {line}: {what} of {len(text)} characters, over the limit "
                                                f"of {limit}"))


def _forbidden(exc: Exception) -> str:
    if isinstance(exc, defusedxml.common.DTDForbidden):
        return "a DOCTYPE declaration is refused"
    if isinstance(exc, defusedxml.common.EntitiesForbidden):
        return "an entity declaration is refused"
    return "an external reference is refused"


def _reason(exc: ElementTree.ParseError) -> str:
    """expat's words for a syntax error, without the position it appends (the message gives it first)."""
    return re.sub(r": line \d+, column \d+$", "", str(exc))


def _skipped_warning(what: str, start: int, end: int, length: int) -> dict:
    return {"code": "text_skipped", "message": f"read {what} at characters {start} to {end} of the input and "
                                              f"skipped the text around it ({start} characters before, "
                                              f"{length - end} after)"}
