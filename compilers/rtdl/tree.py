"""RTDL's nested tree: its nodes checked by hand (for speed on 10k-op plans), in one pre-order walk with an
explicit stack, and numbered "1", "2", ... as the walk meets them. A root meta op is handed to ``meta``."""
from __future__ import annotations

import re

from jsonpointer import escape

from bt_exec.errors import Issue, Issues

from ..ir import NO_CHILDREN, ControlRequest, Op, Plan
from ..report import PartlyRead
from ..limits import MAX_INT_BITS, Limits
from .meta import load_meta
from .ops import (BUILTIN_CAP_PREFIX, META_OPS, NON_BLANK, TREE_OPS, builtin_ids_as_text, has_id_not_text,
                  partial_plan, type_name, unknown_keys)

_COMPOSITE_FIELDS = frozenset(("op", "op_id", "description", "children"))
_DO_FIELDS = frozenset(("op", "op_id", "description", "cap", "args"))
CAP_PATTERN = re.compile(r"[^\s.]+(\.[^\s.]+)+")


class NotProven(Exception):
    """A node whose values the tree walk cannot prove within limits at a glance."""


def load_tree_root(root: dict, path: str, limits: Limits, description: str | None, meta: dict,
                   proving: bool = False) -> Plan | ControlRequest:
    """The plan of the tree at ``path`` (the meta op, when its root is one), described by ``description`` when it
    has words, else by its root's; PartlyRead with every issue and the ops read. ``proving``: NotProven at the
    first node not proven within limits at a glance."""
    if root.get("op") in META_OPS:
        return load_meta(root, path, limits)
    issues = Issues()
    ops: dict[str, Op] = {}
    depth = _walk_tree(root, path, limits, ops, issues, proving)
    if issues:
        raise PartlyRead(issues, partial_plan(ops, "tree", meta))
    root_op = ops["1"]
    plan_description = description if description and NON_BLANK.search(description) else root_op.description
    return Plan(dialect="rtdl", shape="tree", root="1", ops=ops, description=plan_description,
                depth=depth, numbered_by_loader=True, meta=meta)


def _walk_tree(root: dict, root_path: str, limits: Limits, ops: dict[str, Op], issues: list[Issue],
               proving: bool = False) -> int:
    """Walk the nested tree in pre-order with an explicit stack (no recursion), filling ``ops``.
    ``proving``: raise NotProven at the first node not proven within limits (``_well_formed_op``'s
    ``plain_within``)."""
    max_depth_seen = 0
    plain_within = limits.max_string_chars if proving else None
    too_deep_reported = False
    count = 0
    max_ops, max_depth = limits.max_ops, limits.max_depth
    # (node, path, depth, parent Op or None)
    stack: list[tuple[object, str, int, Op | None]] = [(root, root_path, 1, None)]
    push, pop = stack.append, stack.pop
    caps: dict[str, tuple[str, str]] = {}
    while stack:
        node, path, depth, parent = pop()
        count += 1
        if count > max_ops:
            issues.append(Issue("too_many_ops", path, f"more than the limit of {max_ops} ops"))
            return max_depth_seen
        if depth > max_depth_seen:
            max_depth_seen = depth
        op = _well_formed_op(node, path, str(count), caps, plain_within)
        if op is None:
            if proving:
                raise NotProven
            op = _check_tree_node(node, path, str(count), issues, at_root=parent is None)
        if issues and issues.dropped:  # more faults than are listed: enough said
            return max_depth_seen
        if op is not None:
            ops[op.op_id] = op
            if parent is not None:
                parent.children.append(op.op_id)
        children = node.get("children") if type(node) is dict else None
        if type(children) is not list or not children:
            continue
        if depth == max_depth:
            if not too_deep_reported:
                too_deep_reported = True
                issues.append(Issue("too_deep", f"{path}/children/0",
                                    f"nesting deeper than the limit of {max_depth} levels"))
            continue
        below = depth + 1
        for index in range(len(children) - 1, -1, -1):
            push((children[index], f"{path}/children/{index}", below, op))
    return max_depth_seen


def _check_tree_node(node: object, path: str, op_id: str, issues: list[Issue], at_root: bool) -> Op | None:
    if not isinstance(node, dict):
        issues.append(Issue("type", path, f"a node must be an object, got {type_name(node)}", expected="object"))
        return None
    before = len(issues)
    kind = node.get("op")
    if kind not in TREE_OPS:
        if kind in META_OPS:
            issues.append(Issue("nested_meta_op", f"{path}/op",
                                f"meta op '{kind}' must be the whole rtdl value, never nested inside a tree"))
        elif "op" not in node:
            issues.append(Issue("required", path, "node has no 'op' (expected sequence, parallel or do)",
                                missing="op"))
        else:  # a meta op is the whole tree, so at its root one is allowed too
            issues.append(Issue("bad_op", f"{path}/op", f"unknown op {kind!r} (expected sequence, parallel or do)",
                                allowed=TREE_OPS + META_OPS if at_root else TREE_OPS))
        return None
    allowed = _DO_FIELDS if kind == "do" else _COMPOSITE_FIELDS
    for key in unknown_keys(node, allowed):
        issues.append(Issue("unknown_field", f"{path}/{escape(key)}",
                            f"field {key!r} is not allowed in a {kind} node (allowed: {', '.join(sorted(allowed))})",
                            allowed=tuple(sorted(allowed))))
        if issues.dropped:
            break
    description = _check_description(node, path, issues)
    if kind == "do":
        cap = node.get("cap")
        if "cap" not in node:
            issues.append(Issue("required", path, "do node has no 'cap'", missing="cap"))
        elif not isinstance(cap, str) or not CAP_PATTERN.fullmatch(cap):
            issues.append(Issue("bad_cap", f"{path}/cap",
                                f"cap must be provider-qualified like 'provider.name' (a dot, no spaces), got {cap!r}"))
        args = node.get("args", {})
        if not isinstance(args, dict):
            issues.append(Issue("type", f"{path}/args", f"args must be an object, got {type_name(args)}",
                                expected="object"))
        elif len(issues) == before and cap.startswith(BUILTIN_CAP_PREFIX):
            args = builtin_ids_as_text(args, f"{path}/args", issues)
        if len(issues) > before:
            return None
        return Op(op_id, "do", description, cap=cap, args=args, provider=cap.split(".", 1)[0], path=path)
    children = node.get("children")
    if "children" not in node:
        issues.append(Issue("required", path, f"{kind} node has no 'children'", missing="children"))
    elif not isinstance(children, list):
        issues.append(Issue("type", f"{path}/children", f"children must be an array, got {type_name(children)}",
                            expected="array"))
    if len(issues) > before:
        return None
    return Op(op_id, kind, description, path=path)


def _well_formed_op(node: object, path: str, op_id: str, caps: dict[str, tuple[str, str]],
                    plain_within: int | None = None) -> Op | None:
    """The op of a node that passes every check below at a glance; None sends it to the checks, which
    say what is wrong (most nodes are well formed: this is the cost a valid plan pays). ``caps``:
    cap -> (that cap, its provider) for the caps already found well formed in this plan: most plans
    call few caps many times, and each is matched once and kept once (not once per op).
    ``plain_within``: also None unless the node's values are what ``check_document`` passes in decoded
    text: ASCII strings within that many characters, integers within ``MAX_INT_BITS``, and args (or an
    ignored op_id object) holding such values and no container. (Its children are nodes, each proven in turn.)"""
    if type(node) is not dict:
        return None
    kind = node.get("op")
    description = node.get("description")
    if type(description) is not str or not description or description.isspace():
        return None
    if plain_within is not None and (len(description) > plain_within or not description.isascii()
                                     or "op_id" in node and not _plain_value(node["op_id"], plain_within)):
        return None
    if kind == "do":
        cap, args = node.get("cap"), node.get("args", _NO_ARGS)
        if type(args) is not dict or not node.keys() <= _DO_FIELDS:
            return None
        known = caps.get(cap) if type(cap) is str else None
        if known is None:
            if type(cap) is not str or CAP_PATTERN.fullmatch(cap) is None \
                    or args and cap.startswith(BUILTIN_CAP_PREFIX) and has_id_not_text(args):
                return None
            known = (cap, cap.split(".", 1)[0])
            if not cap.startswith(BUILTIN_CAP_PREFIX):  # a builtin's args are looked at each time
                caps[cap] = known
        if plain_within is not None and (len(cap) > plain_within or not cap.isascii()
                                         or args and not _plain_object(args, plain_within)):
            return None
        return Op(op_id, "do", description, NO_CHILDREN, known[0], {} if args is _NO_ARGS else args, known[1], None,
                  path)
    if (kind == "sequence" or kind == "parallel") and type(node.get("children")) is list \
            and node.keys() <= _COMPOSITE_FIELDS:
        return Op(op_id, kind, description, [], None, None, None, None, path)
    return None


_NO_ARGS: dict = {}


def _plain_value(value: object, max_chars: int) -> bool:
    """An ASCII string within ``max_chars``, an integer within ``MAX_INT_BITS``, a float, a bool, null, or an
    object of those."""
    kind = type(value)
    if kind is str:
        return len(value) <= max_chars and value.isascii()
    if kind is int:
        return value.bit_length() <= MAX_INT_BITS
    if kind is dict:
        return _plain_object(value, max_chars)
    return kind is float or kind is bool or value is None


def _plain_object(value: dict, max_chars: int) -> bool:
    """Every key an ASCII string within ``max_chars``, every value a plain scalar (``_plain_value``, no container)."""
    for name, item in value.items():
        if len(name) > max_chars or not name.isascii():
            return False
        kind = type(item)
        if kind is str:
            if len(item) > max_chars or not item.isascii():
                return False
        elif kind is int:
            if item.bit_length() > MAX_INT_BITS:
                return False
        elif kind is not float and kind is not bool and item is not None:
            return False
    return True


def _check_description(node: dict, path: str, issues: list[Issue]) -> str:
    description = node.get("description")
    if "description" not in node:
        issues.append(Issue("required", path, "node has no 'description'", missing="description"))
    elif not isinstance(description, str):
        issues.append(Issue("type", f"{path}/description",
                            f"description must be a string, got {type_name(description)}", expected="string"))
    elif not description or description.isspace():
        issues.append(Issue("empty_description", f"{path}/description", "description must not be empty"))
    else:
        return description
    return ""
