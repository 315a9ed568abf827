"""Robonix's wire arena: the nodes in one flat list, children by index, each do node's call with its args as
JSON text. Most arenas are proven sound in one walk (``load_arena_within_limits``); the others are checked
node by node, and every problem is named."""
from __future__ import annotations

import dataclasses
import re

from bt_exec.errors import Issue, Issues, PlanError

from ..ir import Op, Plan
from ..limit_walk import check_document, encodable, has_digit_run
from ..limits import INT64_MAX, INT64_MIN, STRICT_JSON, Limits, number_shown
from ..report import PartlyRead
from .arena_tree import check_arena_graph, cycles_among_faults, walk_arena_tree
from .ops import (ARENA_KINDS, BUILTIN_CAP_PREFIXES, NON_BLANK, builtin_ids_as_text, has_id_not_text, is_int,
                  names_builtin, partial_plan, type_name, unknown_keys)

_ARENA_NODE_FIELDS = frozenset(("node_kind", "children", "op_id", "description", "call"))
_ARENA_DOC_FIELDS = frozenset(("plan_id", "session_id", "round", "root_index", "nodes"))
_CALL_FIELDS = frozenset(("call_id", "provider_id", "contract_id", "args_json"))
_NO_WHITESPACE = re.compile(r"\S+")
# The decoder's scanner, called as JSONDecoder.raw_decode calls it, without its frame (StopIteration: no value).
_SCAN_JSON = STRICT_JSON.scan_once


def load_arena(doc: dict, limits: Limits) -> Plan:
    """The plan of a wire arena; PlanError (PartlyRead when its sound nodes could be read) with every issue."""
    issues = Issues()
    nodes = doc.get("nodes")
    root_index = doc.get("root_index")
    if "nodes" not in doc:
        issues.append(Issue("required", "nodes", "arena has no 'nodes'", missing="nodes"))
    elif not isinstance(nodes, list):
        issues.append(Issue("type", "nodes", f"nodes must be an array, got {type_name(nodes)}", expected="array"))
    elif not nodes:
        issues.append(Issue("bad_value", "nodes", "nodes must not be empty"))
    elif len(nodes) > limits.max_ops:
        issues.append(Issue("too_many_ops", "nodes", f"{len(nodes)} nodes, over the limit of {limits.max_ops} ops"))
    if "root_index" not in doc:
        issues.append(Issue("required", "root_index", "arena has no 'root_index'", missing="root_index"))
    elif not is_int(root_index) or root_index < 0:
        issues.append(Issue("type", "root_index", f"root_index must be a non-negative integer, got {root_index!r}",
                            expected="non-negative integer"))
    for key in ("plan_id", "session_id"):
        if key in doc and not isinstance(doc[key], str):
            issues.append(Issue("type", key, f"{key} must be a string, got {type_name(doc[key])}", expected="string"))
    if "round" in doc and not is_int(doc["round"]):
        issues.append(Issue("type", "round", f"round must be an integer, got {type_name(doc['round'])}",
                            expected="integer"))
    elif "round" in doc and not INT64_MIN <= doc["round"] <= INT64_MAX:
        issues.append(Issue("bad_value", "round", f"round must be a 64-bit signed integer, got "
                                                  f"{number_shown(doc['round'])}"))
    if issues:
        raise PlanError(issues)
    if root_index >= len(nodes):
        issues.append(Issue("index_out_of_range", "root_index",
                            f"root_index {root_index} is out of range (nodes has {len(nodes)} entries)"))

    ops: list[Op | None] = []
    count = len(nodes)
    max_chars, max_brackets = limits.max_string_chars, limits.max_json_nesting - 4
    contracts: dict[str, str] = {}
    providers: dict[str, str] = {}
    for index, node in enumerate(nodes):
        ops.append(_well_formed_arena_op(node, index, count, max_chars, max_brackets, contracts, providers)
                   or _check_arena_node(node, index, count, limits, issues))
        if issues.dropped:
            raise PlanError(issues)
    return _arena_plan(doc, nodes, root_index, ops, limits, issues)


def load_arena_within_limits(doc: dict, limits: Limits) -> Plan | None:
    """The plan of a wire arena whose every value this one walk proves within what ``check_document``
    enforces on decoded JSON text: known keys only, strings within ``max_string_chars`` and with a UTF-8
    form, small integers, plain ``args_json`` (see ``_well_formed_arena_op``). None when it cannot: the
    document then takes ``check_document`` and ``load_rtdl``, which say what is wrong. Most arenas
    pass, and skip a second walk over every value."""
    nodes, root_index = doc.get("nodes"), doc.get("root_index")
    if not doc.keys() <= _ARENA_DOC_FIELDS or type(nodes) is not list or not nodes \
            or len(nodes) > limits.max_ops or type(root_index) is not int or not 0 <= root_index < len(nodes):
        return None
    max_chars = limits.max_string_chars
    for key in ("plan_id", "session_id"):
        if key in doc and not _plain_text(doc[key], max_chars):
            return None
    if "round" in doc and (type(doc["round"]) is not int or not INT64_MIN <= doc["round"] <= INT64_MAX):
        return None
    ops: list[Op | None] = []
    count, max_brackets = len(nodes), limits.max_json_nesting - 4
    contracts: dict[str, str] = {}
    providers: dict[str, str] = {}
    for index, node in enumerate(nodes):
        op = _well_formed_arena_op(node, index, count, max_chars, max_brackets, contracts, providers)
        if op is None:
            return None
        ops.append(op)
    try:
        return _arena_plan(doc, nodes, root_index, ops, limits, Issues())
    except PlanError:
        return None


def _plain_text(text: object, max_chars: int) -> bool:
    return type(text) is str and len(text) <= max_chars and (text.isascii() or encodable(text))


def _arena_plan(doc: dict, nodes: list, root_index: int, ops: list, limits: Limits, issues: Issues) -> Plan:
    """The plan once every node is read: op ids unique, the arena one tree; PlanError with the issues found."""
    walked = None if issues else walk_arena_tree(nodes, ops, root_index, limits.max_depth)
    if walked is not None:
        return _arena_plan_of(doc, ops[root_index], *walked)
    op_ids = [op.op_id for op in ops if op is not None]
    if len(set(op_ids)) != len(op_ids):  # name each duplicate only when there is one
        seen_ids: dict[str, int] = {}
        for index, op in enumerate(ops):
            if op is None:
                continue
            first = seen_ids.setdefault(op.op_id, index)
            if first != index:
                issues.append(Issue("duplicate_op_id", f"nodes[{index}].op_id",
                                    f"op_id {op.op_id!r} is already used by nodes[{first}]"))
    if issues:
        if not issues.dropped:
            issues.extend(cycles_among_faults(nodes))
        meta = {key: doc[key] for key in ("plan_id", "session_id", "round") if key in doc}
        raise PartlyRead(issues, partial_plan({str(index): op for index, op in enumerate(ops) if op is not None},
                                          "arena", meta))

    order, depth = check_arena_graph(nodes, root_index, limits, issues)
    if issues:
        raise PlanError(issues)
    by_index = {}
    for index in order:
        op = ops[index]
        children = nodes[index]["children"]
        if children:  # a do node's op keeps the empty list it was made with
            op.children = [ops[child].op_id for child in children]
        by_index[op.op_id] = op
    return _arena_plan_of(doc, ops[root_index], by_index, depth)


def _arena_plan_of(doc: dict, root: Op, ops: dict[str, Op], depth: int) -> Plan:
    meta = {key: doc[key] for key in ("plan_id", "session_id", "round") if key in doc}
    return Plan(dialect="rtdl", shape="arena", root=root.op_id, ops=ops, description=root.description,
                depth=depth, numbered_by_loader=False, meta=meta)


def _well_formed_arena_op(node: object, index: int, count: int, max_chars: int, max_brackets: int,
                          contracts: dict[str, str], providers: dict[str, str]) -> Op | None:
    """The op of an arena node that passes every check of ``_check_arena_node`` at a glance, with its strings
    plain (within ``max_chars``, with a UTF-8 form) and its ``args_json`` plain JSON text: ASCII, no escape
    and no integer long enough to hide a bad value once decoded, few enough brackets (``max_brackets``: the
    nesting left below the call's own four levels). None sends it to those checks, which say what is wrong.
    ``contracts`` and ``providers``: those already found plain in this arena, each kept once for all its
    calls (most arenas call few contracts many times)."""
    if type(node) is not dict or not node.keys() <= _ARENA_NODE_FIELDS:
        return None
    kind_code, children = node.get("node_kind"), node.get("children")
    op_id, description = node.get("op_id"), node.get("description")
    if type(kind_code) is not int or type(children) is not list or type(op_id) is not str \
            or type(description) is not str or not op_id or op_id.isspace() or not description \
            or description.isspace() or len(op_id) > max_chars or len(description) > max_chars \
            or not (op_id.isascii() or encodable(op_id)) or not (description.isascii() or encodable(description)):
        return None
    kind = ARENA_KINDS.get(kind_code)
    if kind is None:
        return None
    if kind != "do":  # Robonix writes an absent call as null
        for child in children:
            if type(child) is not int or not 0 <= child < count:
                return None
        return None if node.get("call") is not None else Op(op_id, kind, description, [], None, None, None, None,
                                                            f"nodes[{index}]")
    call = node.get("call")
    if children or type(call) is not dict or not call.keys() <= _CALL_FIELDS:
        return None
    contract, provider, call_id = call.get("contract_id"), call.get("provider_id", ""), call.get("call_id", "")
    args_json = call.get("args_json", "{}")
    if type(contract) is not str or type(provider) is not str or type(call_id) is not str \
            or type(args_json) is not str or len(call_id) > max_chars or not call_id.isascii() \
            or len(args_json) > max_chars or not args_json.isascii() \
            or "\\u" in args_json or len(args_json) >= 308 and has_digit_run(args_json) \
            or len(args_json) > max_brackets and args_json.count("[") + args_json.count("{") > max_brackets:
        return None
    known = contracts.get(contract)
    if known is None:
        # An ASCII contract id that is printable and has no space has no whitespace at all.
        if len(contract) > max_chars or not contract.isascii() or not contract or not contract.isprintable() \
                or " " in contract:
            return None
        contracts[contract] = known = contract
    shared = providers.get(provider)
    if shared is None:
        if len(provider) > max_chars or not provider.isascii():
            return None
        providers[provider] = shared = provider
    try:
        if args_json[:1] == "{" and args_json[-1:] == "}":  # no whitespace around it to skip
            args, end = _SCAN_JSON(args_json, 0)
            if end != len(args_json):
                return None
        else:
            args = STRICT_JSON.decode(args_json or "{}")
    except (StopIteration, ValueError, RecursionError):
        return None
    # '_id"' ends each id arg's key (no escapes here): most args_json have none, and skip the rest of the test
    if type(args) is not dict or '_id"' in args_json and contract.startswith(BUILTIN_CAP_PREFIXES) \
            and has_id_not_text(args):
        return None
    return Op(op_id, kind, description, [], known, args, shared if "provider_id" in call else None,
              call.get("call_id"), f"nodes[{index}]")


def _check_arena_node(node: object, index: int, count: int, limits: Limits, issues: list[Issue]) -> Op | None:
    path = f"nodes[{index}]"
    if not isinstance(node, dict):
        issues.append(Issue("type", path, f"a node must be an object, got {type_name(node)}", expected="object"))
        return None
    before = len(issues)
    for key in unknown_keys(node, _ARENA_NODE_FIELDS):
        issues.append(Issue("unknown_field", f"{path}.{key}",
                            f"field {key!r} is not allowed in an arena node "
                            f"(allowed: {', '.join(sorted(_ARENA_NODE_FIELDS))})",
                            allowed=tuple(sorted(_ARENA_NODE_FIELDS))))
        if issues.dropped:
            break
    kind_code = node.get("node_kind")
    kind = ARENA_KINDS.get(kind_code) if is_int(kind_code) else None
    if "node_kind" not in node:
        issues.append(Issue("required", path, "node has no 'node_kind' (0 sequence, 1 parallel, 2 do)",
                            missing="node_kind"))
    elif kind is None:
        issues.append(Issue("bad_value", f"{path}.node_kind",
                            f"node_kind must be 0 (sequence), 1 (parallel) or 2 (do), got {kind_code!r}"))
    children = node.get("children")
    if "children" not in node:
        issues.append(Issue("required", path, "node has no 'children'", missing="children"))
    elif not isinstance(children, list):
        issues.append(Issue("type", f"{path}.children", f"children must be an array, got {type_name(children)}",
                            expected="array"))
    else:
        for position, child in enumerate(children):
            if not is_int(child):
                issues.append(Issue("type", f"{path}.children[{position}]",
                                    f"a child must be a node index, got {child!r}", expected="node index"))
            elif not 0 <= child < count:
                issues.append(Issue("index_out_of_range", f"{path}.children[{position}]",
                                    f"index {child} is out of range (nodes has {count} entries)"))
            if issues.dropped:
                break
        if kind == "do" and children:
            issues.append(Issue("bad_value", f"{path}.children", "a do node (node_kind 2) has no children"))
    op_id = node.get("op_id")
    if "op_id" not in node:
        issues.append(Issue("required", path, "node has no 'op_id'", missing="op_id"))
    elif not isinstance(op_id, str) or not op_id.strip():
        issues.append(Issue("bad_value", f"{path}.op_id", f"op_id must be a non-empty string, got {op_id!r}"))
    description = node.get("description")
    if "description" not in node:
        issues.append(Issue("required", path, "node has no 'description'", missing="description"))
    elif not isinstance(description, str) or not NON_BLANK.search(description):
        issues.append(Issue("empty_description", f"{path}.description",
                            f"description must be a non-empty string, got {description!r}"))
    call = node.get("call")
    cap = provider = call_id = None
    args: dict | None = None
    if kind == "do":
        if "call" not in node:
            issues.append(Issue("required", path, "do node (node_kind 2) has no 'call'", missing="call"))
        else:
            cap, provider, call_id, args = _check_call(call, f"{path}.call", limits, issues)
            if args is not None and len(issues) == before and names_builtin(cap, provider):
                args = builtin_ids_as_text(args, f"{path}.call.args_json at ", issues)
    elif call is not None and kind is not None:  # null is how Robonix writes an absent call
        issues.append(Issue("unknown_field", f"{path}.call", f"only do nodes (node_kind 2) carry a call, not {kind}"))
    if len(issues) > before:
        return None
    return Op(op_id, kind, description, cap=cap, args=args, provider=provider, call_id=call_id, path=path)


def _check_call(call: object, path: str, limits: Limits, issues: list[Issue]) -> tuple:
    if not isinstance(call, dict):
        issues.append(Issue("type", path, f"call must be an object, got {type_name(call)}", expected="object"))
        return None, None, None, None
    for key in unknown_keys(call, _CALL_FIELDS):
        issues.append(Issue("unknown_field", f"{path}.{key}",
                            f"field {key!r} is not allowed in a call (allowed: {', '.join(sorted(_CALL_FIELDS))})",
                            allowed=tuple(sorted(_CALL_FIELDS))))
        if issues.dropped:
            break
    for key in ("call_id", "provider_id"):
        if key in call and not isinstance(call[key], str):
            issues.append(Issue("type", f"{path}.{key}", f"{key} must be a string, got {type_name(call[key])}",
                                expected="string"))
    contract = call.get("contract_id")
    if "contract_id" not in call:
        issues.append(Issue("required", path, "call has no 'contract_id'", missing="contract_id"))
    elif not isinstance(contract, str) or not _NO_WHITESPACE.fullmatch(contract):
        issues.append(Issue("bad_cap", f"{path}.contract_id",
                            f"contract_id must be a non-empty name without spaces, got {contract!r}"))
    args_json = call.get("args_json", "{}")
    args = None
    if not isinstance(args_json, str):
        issues.append(Issue("type", f"{path}.args_json",
                            f"args_json must be JSON text (a string), got {type_name(args_json)}",
                            expected="JSON text"))
    else:
        try:
            args = STRICT_JSON.decode(args_json or "{}")
        except (ValueError, RecursionError) as exc:
            issues.append(Issue("json_syntax", f"{path}.args_json", f"args_json is not valid JSON: {exc}"))
        else:
            if not isinstance(args, dict):
                issues.append(Issue("type", f"{path}.args_json",
                                    f"args_json must hold an object, got {type_name(args)}"))
                args = None
            elif len(args_json) > limits.max_string_chars or \
                    args_json.count("[") + args_json.count("{") > limits.max_json_nesting - 4:
                # the args' strings and nesting, as if written in the node (its nesting: nodes, node, call, args);
                # a short text holds no long string and nests no deeper than its brackets
                for issue in check_document(args, limits, depth=4):
                    issues.append(dataclasses.replace(issue, path=f"{path}.args_json at {issue.path}" if issue.path
                                                      else f"{path}.args_json"))
                    args = None
    return contract, call.get("provider_id"), call.get("call_id"), args
