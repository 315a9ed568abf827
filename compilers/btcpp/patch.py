"""Fixes applied to a BT.CPP document, and the repaired document written as XML text.

A fix is JSON Patch (RFC 6902) whose paths are element paths (``paths``): ``replace``, ``add`` and ``remove`` of
an attribute (``.../@port``), ``move`` of an attribute to another name on the same element (a port renamed),
``replace`` of an element's tag (``.../name()``) and ``remove`` of the text inside it (``.../text()``). Every
path of one batch names the document as it was before the batch (the fixes of one report are found against the
same document), so a tag renamed does not move the paths below it.
"""
from __future__ import annotations

import copy
from xml.sax.saxutils import escape, quoteattr

import jsonpatch

from .paths import resolve
from .xml_read import Element, XmlDocument

INDENT = "  "


class XmlPatchError(jsonpatch.JsonPatchException):
    """A fix that does not fit the document: a path naming nothing, or an operation elements do not take."""


def patch_xml(doc: XmlDocument, issues) -> XmlDocument:
    """A copy of ``doc`` with the ``fix`` of every issue (dicts or Issues) applied in order; XmlPatchError if one
    does not fit."""
    if not isinstance(doc, XmlDocument):
        raise XmlPatchError("element-path fixes apply to a BT.CPP XML document")
    root = copy.deepcopy(doc.root)
    resolved = []
    for issue in issues:
        fix = issue.get("fix") if isinstance(issue, dict) else issue.fix
        for operation in fix or ():
            resolved.append(_resolved(root, operation))
    for operation, element, tail, source_name in resolved:
        _apply(operation, element, tail, source_name)
    renamed = {operation["value"] for operation, _, tail, _ in resolved if tail == ("name", "")}
    return XmlDocument(root, doc.tags | renamed, doc.after_root)


def _resolved(root: Element, operation: dict) -> tuple:
    if not isinstance(operation, dict) or not isinstance(operation.get("path"), str):
        raise XmlPatchError(f"not a patch operation: {operation!r}")
    element, tail = resolve(root, operation["path"])
    if element is None:
        raise XmlPatchError(f"{operation['path']} names nothing in the document")
    source_name = None
    if operation.get("op") == "move":
        origin, origin_tail = resolve(root, operation.get("from", ""))
        if origin is not element or origin_tail is None or origin_tail[0] != "attr" or tail is None \
                or tail[0] != "attr":
            raise XmlPatchError("a move renames an attribute of one element")
        source_name = origin_tail[1]
    return operation, element, tail, source_name


def _apply(operation: dict, element: Element, tail, source_name: str | None) -> None:
    kind = operation.get("op")
    value = operation.get("value")
    if tail is not None and tail[0] == "attr":
        name = tail[1]
        if kind in ("add", "replace") and isinstance(value, str):
            if kind == "replace" and name not in element.attrs:
                raise XmlPatchError(f"no attribute {name!r} to replace")
            element.attrs[name] = value
            return
        if kind == "remove" and name in element.attrs:
            del element.attrs[name]
            return
        if kind == "move" and source_name in element.attrs and name not in element.attrs:
            element.attrs = {name if key == source_name else key: item for key, item in element.attrs.items()}
            return
    elif tail == ("name", "") and kind == "replace" and isinstance(value, str) and value:
        element.tag = value
        return
    elif tail == ("text", "") and kind == "remove":
        element.text = ""
        return
    raise XmlPatchError(f"operation {kind!r} does not apply to {operation['path']}")


def xml_text(doc: XmlDocument) -> str:
    """The document as XML text: a declaration, then its elements indented, attributes in their order, and its
    comments each where it was, on a line of its own (blank text is not kept)."""
    lines = ['<?xml version="1.0" encoding="UTF-8"?>']
    stack: list[tuple[Element, int, bool]] = [(doc.root, 0, False)]
    while stack:
        element, depth, closing = stack.pop()
        indent = INDENT * depth
        if closing:
            _comment_lines(lines, getattr(element, "end_comments", ()), indent + INDENT)
            lines.append(f"{indent}</{element.tag}>")
            continue
        _comment_lines(lines, getattr(element, "comments", ()), indent)
        attrs = "".join(f" {name}={quoteattr(value)}" for name, value in element.attrs.items())
        inside = getattr(element, "end_comments", ())
        if not element.children and not element.text and not inside:
            lines.append(f"{indent}<{element.tag}{attrs}/>")
            continue
        if not element.children and not inside:
            lines.append(f"{indent}<{element.tag}{attrs}>{escape(element.text)}</{element.tag}>")
            continue
        lines.append(f"{indent}<{element.tag}{attrs}>")
        if element.text:
            lines.append(f"{indent}{INDENT}{escape(element.text)}")
        stack.append((element, depth, True))
        stack.extend((child, depth + 1, False) for child in reversed(element.children))
    _comment_lines(lines, doc.after_root, "")
    return "\n".join(lines) + "\n"


def _comment_lines(lines: list[str], comments, indent: str) -> None:
    # a comment as read: expat gave only text a comment may hold (no "--", no "-" at its end)
    lines.extend(f"{indent}<!--{text}-->" for text in comments)
