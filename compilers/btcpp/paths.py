"""Element paths: where an issue of a BT.CPP document is, and what its fixes change.

A path names elements from ``/root`` down, XPath's way: ``/root/BehaviorTree[@ID='Main']/Sequence[1]/MoveTo[2]``
is the second ``MoveTo`` child of the first ``Sequence`` child of the tree ``Main``. A tree (and a catalog entry) is
named by its ID, any other element by its tag and its position among its siblings of that tag (from 1). After the
element, ``/@port`` names one of its attributes, ``/text()`` the text written inside it and ``/name()`` its tag.
"""
from __future__ import annotations

import re

from .xml_read import Element

_STEP = re.compile(r"/([^/\[@()]+)(?:\[(\d+)\]|\[@ID=(?:'([^']*)'|\"([^\"]*)\")\])?")
_TAIL = re.compile(r"/(?:@([^/]+)|(text)\(\)|(name)\(\))$")
ROOT_PATH = "/root"


def by_id(tag: str, node_id: str) -> str:
    """The step naming the element ``tag`` by its ID (by position when the ID holds both quotes)."""
    if "'" not in node_id:
        return f"{tag}[@ID='{node_id}']"
    return f'{tag}[@ID="{node_id}"]' if '"' not in node_id else tag


def child_paths(path: str, children: list[Element]) -> list[str]:
    """The paths of ``children`` of the element at ``path``, each by tag and position."""
    seen: dict[str, int] = {}
    out = []
    for child in children:
        seen[child.tag] = seen.get(child.tag, 0) + 1
        out.append(f"{path}/{child.tag}[{seen[child.tag]}]")
    return out


def attribute(path: str, name: str) -> str:
    return f"{path}/@{name}"


def resolve(root: Element, path: str) -> tuple[Element | None, tuple[str, str] | None]:
    """The element a path names and what it names of it: None (the element), ``("attr", name)``, ``("text", "")``
    or ``("name", "")``; (None, None) when it names nothing in the document."""
    tail = None
    found = _TAIL.search(path)
    if found is not None:
        name, text, tag_name = found.groups()
        tail = ("attr", name) if name is not None else ("text", "") if text else ("name", "")
        path = path[:found.start()]
    position = 0
    element: Element | None = None
    for step in _STEP.finditer(path):
        if step.start() != position:
            return None, None
        position = step.end()
        tag, index, single, double = step.groups()
        if element is None:
            if tag != root.tag or index not in (None, "1"):
                return None, None
            element = root
            continue
        same = [child for child in element.children if child.tag == tag]
        if index is not None:
            number = int(index)
            element = same[number - 1] if 0 < number <= len(same) else None
        elif single is not None or double is not None:
            wanted = single if single is not None else double
            element = next((child for child in same if child.attrs.get("ID") == wanted), None)
        else:
            element = same[0] if len(same) == 1 else None
        if element is None:
            return None, None
    if position != len(path) or element is None:
        return None, None
    return element, tail
