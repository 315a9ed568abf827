"""RTDL's repairs, beyond those every document shares (``Rtdl.fixes``): what a missing field of a node is given, a
node kind written by name, a call on a node that takes none, a duplicate or empty op id, a misspelt cap."""
from __future__ import annotations

from bt_exec.errors import Issue

from ..fixes import (ABSENT, DOCUMENT_FIXERS, PLACEHOLDER_DESCRIPTION, DialectFixes, NameSearch, PlanFacts, Several,
                     fix_bad_value, fix_unknown_field, holds_field, parent_of, replaced_by, required_fixer, value_at)
from .ops import ARENA_KINDS


def _fix_unknown_field(doc, pointer: str, issue: Issue, names: NameSearch):
    if issue.allowed is None and holds_field(doc, pointer):
        # a call on a composite arena node: Robonix writes an absent call as null
        return [{"op": "replace", "path": pointer, "value": None}]
    return fix_unknown_field(doc, pointer, issue, names)


def _placeholders(doc, pointer: str, node: dict, field: str) -> list:
    """The values a missing field of a node may take, most likely first; several when none is clearly it."""
    if field == "description":
        return [PLACEHOLDER_DESCRIPTION]
    if field == "children":
        return [[]]
    if field == "op":  # a tree node: what its other fields say it is
        if "cap" in node or "args" in node:
            return ["do"]
        return ["sequence", "parallel"] if "children" in node else []
    if field == "node_kind":
        if node.get("call") is not None:
            return [2]
        return [0, 1] if node.get("children") else []
    if field == "op_id":
        return [_free_op_id(doc, pointer)]
    return []


def _free_op_id(doc, pointer: str) -> str:
    """An op id no arena node uses: ``n`` and the node's index, primed until free."""
    nodes = doc.get("nodes") if isinstance(doc, dict) else None
    used = {node.get("op_id") for node in nodes if isinstance(node, dict) and isinstance(node.get("op_id"), str)} \
        if isinstance(nodes, list) else set()
    candidate = f"n{pointer.rsplit('/', 1)[-1]}"
    while candidate in used:
        candidate += "'"
    return candidate


def _fix_bad_value(doc, pointer: str, issue: Issue, names: NameSearch):
    head, key = parent_of(pointer)
    value = value_at(doc, pointer)
    if value is ABSENT:
        return None
    if key == "node_kind":
        return _node_kind(value_at(doc, head), value, pointer, names)
    if key == "op_id" and isinstance(value_at(doc, head), dict) and head.startswith("/nodes/"):
        return [{"op": "replace", "path": pointer, "value": _free_op_id(doc, head)}]
    return fix_bad_value(doc, pointer, issue, names)


def _node_kind(node: object, value: object, pointer: str, names: NameSearch):
    """An arena node's kind written by name (the code of the name, or of the names it is nearest to), or a node
    that holds a call (a do node)."""
    by_name = {name: code for code, name in ARENA_KINDS.items()}
    if isinstance(value, str):
        return Several([[{"op": "replace", "path": pointer, "value": by_name[name]}]
                        for name in ([value] if value in by_name else names.nearest(value, by_name))]) or None
    if isinstance(node, dict) and node.get("call") is not None:
        return [{"op": "replace", "path": pointer, "value": 2}]
    return None


def _fix_duplicate_op_id(doc, pointer: str, issue: Issue, names: NameSearch):
    head, _ = parent_of(pointer)
    return [{"op": "replace", "path": pointer, "value": _free_op_id(doc, head)}]


def _fix_unknown_cap(facts: PlanFacts, pointer: str, issue: Issue):
    op = facts.op_at(issue, ("/cap", ".call.contract_id"))
    catalog = facts.context.capability_catalog
    if op is None or catalog is None:
        return None
    return replaced_by(pointer, facts.names.nearest(op.cap, catalog.entries))


RTDL_FIXES = DialectFixes(
    document={**DOCUMENT_FIXERS, "unknown_field": _fix_unknown_field, "required": required_fixer(_placeholders),
              "bad_value": _fix_bad_value, "duplicate_op_id": _fix_duplicate_op_id},
    plan={"unknown_cap": _fix_unknown_cap},
)
