"""RTDL (Robonix) loading: envelope, bare tree and wire arena shapes, plus root meta ops.

Nodes are checked by hand rather than by jsonschema, for speed on 10k-op plans;
tests/test_schema_agreement.py proves the schemas in ``schemas/`` and this module
agree. Every problem is collected, not just the first.
"""
from __future__ import annotations

import re

import networkx as nx
from jsonpointer import escape

from bt_exec.errors import Issue, Issues, PlanError

from .control_values import id_text
from .ir import STOP_WHENS, ControlRequest, Op, Plan
from .report import PartlyRead
from .source import (INT64_MAX, INT64_MIN, MAX_INT_BITS, STRICT_JSON as _DECODER, Limits,
                     check_document, encodable, has_digit_run, number_shown as _number_shown)

META_OPS = ("cancel_plan", "cancel_all", "stop_plan_at")
TREE_OPS = ("sequence", "parallel", "do")
ARENA_KINDS = {0: "sequence", 1: "parallel", 2: "do"}
TASK_STATUSES = ("in_progress", "done", "succeeded", "failed")

_COMPOSITE_FIELDS = frozenset(("op", "op_id", "description", "children"))
_DO_FIELDS = frozenset(("op", "op_id", "description", "cap", "args"))
_META_FIELDS = {
    "cancel_plan": frozenset(("op", "op_id", "description", "plan_id", "wait_ms")),
    "cancel_all": frozenset(("op", "op_id", "description", "wait_ms")),
    "stop_plan_at": frozenset(("op", "op_id", "description", "plan_id", "target_op_id", "when")),
}
_ARENA_NODE_FIELDS = frozenset(("node_kind", "children", "op_id", "description", "call"))
_ARENA_DOC_FIELDS = frozenset(("plan_id", "session_id", "round", "root_index", "nodes"))
_CALL_FIELDS = frozenset(("call_id", "provider_id", "contract_id", "args_json"))
# How the caps of the executor's builtins begin (compilers.catalog names them): their args name plans and
# ops by id. The arena's form is a builtin only from the executor's own provider.
_BUILTIN_CAP_PREFIX, _ARENA_BUILTIN_CAP_PREFIX = "executor.builtin_", "robonix/system/executor/builtin/"
_BUILTIN_CAP_PREFIXES = (_BUILTIN_CAP_PREFIX, _ARENA_BUILTIN_CAP_PREFIX)
_ID_ARGS = ("plan_id", "op_id", "target_op_id")

CAP_PATTERN = re.compile(r"[^\s.]+(\.[^\s.]+)+")
_NON_BLANK = re.compile(r"\S")
_NO_WHITESPACE = re.compile(r"\S+")
# The decoder's scanner, called as JSONDecoder.raw_decode calls it, without its frame (StopIteration: no value).
_SCAN_JSON = _DECODER.scan_once


def detect_shape(doc: dict) -> str | None:
    """Which RTDL shape ``doc`` is: envelope, arena or tree; None if none fits."""
    if "rtdl" in doc:
        return "envelope"
    if "nodes" in doc or "root_index" in doc:
        return "arena"
    if "op" in doc:
        return "tree"
    return None


def load_rtdl(doc: object, limits: Limits) -> Plan | ControlRequest:
    """Load an RTDL document of any shape; raise PlanError with every issue found."""
    if not isinstance(doc, dict):
        raise PlanError([Issue("type", "", f"an RTDL document must be a JSON object, got {_type_name(doc)}")])
    shape = detect_shape(doc)
    if shape == "envelope":
        return _load_envelope(doc, limits)
    if shape == "arena":
        return _load_arena(doc, limits)
    if shape == "tree":
        return _load_tree_root(doc, "", limits, description=None, meta={})
    raise PlanError([Issue("unknown_shape", "", "not an RTDL document: expected an envelope (key 'rtdl'), "
                                               "a tree (key 'op') or a wire arena (keys 'nodes', 'root_index')")])


# --- envelope -------------------------------------------------------------

def load_envelope_within_limits(doc: dict, limits: Limits) -> Plan | None:
    """The plan of an envelope whose every value this load proves within what ``check_document`` enforces
    on decoded JSON text, as ``load_arena_within_limits`` does for an arena: the envelope's own fields
    checked by ``check_document`` (they are few), each node's values as the tree walk reads the node
    (ASCII strings within ``max_string_chars``, integers within ``MAX_INT_BITS``, args one level deep;
    the nesting then follows from the depth limit). None when it cannot: the document then takes
    ``check_document`` and ``load_rtdl``, which say what is wrong."""
    rtdl = doc.get("rtdl")
    if type(rtdl) is not dict or rtdl.get("op") not in TREE_OPS \
            or check_document({key: value for key, value in doc.items() if key != "rtdl"}, limits):
        return None
    try:
        return _load_envelope(doc, limits, proving=True)
    except (PlanError, _NotProven):
        return None


class _NotProven(Exception):
    """A node whose values the tree walk cannot prove within limits at a glance."""


def _load_envelope(doc: dict, limits: Limits, proving: bool = False) -> Plan | ControlRequest:
    issues = Issues()
    rtdl = doc["rtdl"]
    content = doc.get("content")
    if content is not None and not isinstance(content, str):
        issues.append(Issue("type", "/content", f"content must be a string, got {_type_name(content)}"))
    task_update = doc.get("task_update")
    _check_task_update(task_update, issues)
    description = doc.get("rtdl_description")
    if description is not None and not isinstance(description, str):
        issues.append(Issue("type", "/rtdl_description", f"rtdl_description must be a string, got {_type_name(description)}"))
        description = None
    if not isinstance(rtdl, dict):
        hint = " (an RTDL tree object, not JSON text inside a string)" if isinstance(rtdl, str) else ""
        issues.append(Issue("type", "/rtdl", f"rtdl must be an object{hint}, got {_type_name(rtdl)}"))
        raise PlanError(issues)
    is_empty_sequence = rtdl.get("op") == "sequence" and rtdl.get("children") == []
    if description is not None and not _NON_BLANK.search(description) and not is_empty_sequence \
            and rtdl.get("op") not in META_OPS:
        issues.append(Issue("empty_description", "/rtdl_description",
                            "rtdl_description may be empty only when rtdl is an empty sequence"))
    meta = {"content": content, "task_update": task_update}
    try:
        loaded = _load_tree_root(rtdl, "/rtdl", limits, description=description, meta=meta, proving=proving)
    except PartlyRead as exc:
        raise PartlyRead(issues + exc.issues, exc.partial) from None
    except PlanError as exc:
        raise PlanError(issues + exc.issues) from None
    if issues:
        raise PartlyRead(issues, loaded) if isinstance(loaded, Plan) else PlanError(issues)
    if isinstance(loaded, Plan):
        loaded.shape = "envelope"
    return loaded


def _check_task_update(task_update: object, issues: list[Issue]) -> None:
    if task_update is None:
        return
    if not isinstance(task_update, dict):
        issues.append(Issue("type", "/task_update", f"task_update must be null or an object, got {_type_name(task_update)}"))
        return
    for key in ("goal", "success_criterion"):
        if key in task_update and not isinstance(task_update[key], str):
            issues.append(Issue("type", f"/task_update/{key}", f"{key} must be a string"))
    status = task_update.get("status")
    if "status" in task_update and status not in TASK_STATUSES:
        issues.append(Issue("bad_value", "/task_update/status",
                            f"status must be one of {', '.join(TASK_STATUSES)}, got {status!r}"))


# --- tree -----------------------------------------------------------------

def _load_tree_root(root: dict, path: str, limits: Limits, description: str | None, meta: dict,
                    proving: bool = False) -> Plan | ControlRequest:
    if root.get("op") in META_OPS:
        return _load_meta(root, path, limits)
    issues = Issues()
    ops: dict[str, Op] = {}
    depth = _walk_tree(root, path, limits, ops, issues, proving)
    if issues:
        raise PartlyRead(issues, _partial(ops, "tree", meta))
    root_op = ops["1"]
    plan_description = description if description and _NON_BLANK.search(description) else root_op.description
    return Plan(dialect="rtdl", shape="tree", root="1", ops=ops, description=plan_description,
                depth=depth, numbered_by_loader=True, meta=meta)


def _walk_tree(root: dict, root_path: str, limits: Limits, ops: dict[str, Op], issues: list[Issue],
               proving: bool = False) -> int:
    """Walk the nested tree in pre-order with an explicit stack (no recursion), filling ``ops``.
    ``proving``: raise _NotProven at the first node not proven within limits (``_plain_node``)."""
    max_depth_seen = 0
    max_chars = limits.max_string_chars
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
        op = _well_formed_op(node, path, str(count), caps)
        if proving and (op is None or not _plain_node(node, max_chars)):
            raise _NotProven
        if op is None:
            op = _check_tree_node(node, path, str(count), issues)
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


def _check_tree_node(node: object, path: str, op_id: str, issues: list[Issue]) -> Op | None:
    if not isinstance(node, dict):
        issues.append(Issue("type", path, f"a node must be an object, got {_type_name(node)}"))
        return None
    before = len(issues)
    kind = node.get("op")
    if kind not in TREE_OPS:
        if kind in META_OPS:
            issues.append(Issue("nested_meta_op", f"{path}/op",
                                f"meta op '{kind}' must be the whole rtdl value, never nested inside a tree"))
        elif "op" not in node:
            issues.append(Issue("required", path, "node has no 'op' (expected sequence, parallel or do)"))
        else:
            issues.append(Issue("bad_op", f"{path}/op", f"unknown op {kind!r} (expected sequence, parallel or do)"))
        return None
    allowed = _DO_FIELDS if kind == "do" else _COMPOSITE_FIELDS
    for key in _unknown_keys(node, allowed):
        issues.append(Issue("unknown_field", f"{path}/{escape(key)}",
                            f"field {key!r} is not allowed in a {kind} node (allowed: {', '.join(sorted(allowed))})"))
        if issues.dropped:
            break
    description = _check_description(node, path, issues)
    if kind == "do":
        cap = node.get("cap")
        if "cap" not in node:
            issues.append(Issue("required", path, "do node has no 'cap'"))
        elif not isinstance(cap, str) or not CAP_PATTERN.fullmatch(cap):
            issues.append(Issue("bad_cap", f"{path}/cap",
                                f"cap must be provider-qualified like 'provider.name' (a dot, no spaces), got {cap!r}"))
        args = node.get("args", {})
        if not isinstance(args, dict):
            issues.append(Issue("type", f"{path}/args", f"args must be an object, got {_type_name(args)}"))
        elif len(issues) == before and cap.startswith(_BUILTIN_CAP_PREFIX):
            args = _builtin_ids_as_text(args, f"{path}/args", issues)
        if len(issues) > before:
            return None
        return Op(op_id, "do", description, cap=cap, args=args, provider=cap.split(".", 1)[0], path=path)
    children = node.get("children")
    if "children" not in node:
        issues.append(Issue("required", path, f"{kind} node has no 'children'"))
    elif not isinstance(children, list):
        issues.append(Issue("type", f"{path}/children", f"children must be an array, got {_type_name(children)}"))
    if len(issues) > before:
        return None
    return Op(op_id, kind, description, path=path)


def _well_formed_op(node: object, path: str, op_id: str, caps: dict[str, tuple[str, str]]) -> Op | None:
    """The op of a node that passes every check below at a glance; None sends it to the checks, which
    say what is wrong (most nodes are well formed: this is the cost a valid plan pays). ``caps``:
    cap -> (that cap, its provider) for the caps already found well formed in this plan: most plans
    call few caps many times, and each is matched once and kept once (not once per op)."""
    if type(node) is not dict:
        return None
    kind = node.get("op")
    description = node.get("description")
    if type(description) is not str or not description or description.isspace():
        return None
    if kind == "do":
        cap, args = node.get("cap"), node.get("args", _NO_ARGS)
        if type(args) is not dict or not node.keys() <= _DO_FIELDS:
            return None
        known = caps.get(cap) if type(cap) is str else None
        if known is None:
            if type(cap) is not str or CAP_PATTERN.fullmatch(cap) is None \
                    or args and cap.startswith(_BUILTIN_CAP_PREFIX) and _has_id_not_text(args):
                return None
            known = (cap, cap.split(".", 1)[0])
            if not cap.startswith(_BUILTIN_CAP_PREFIX):  # a builtin's args are looked at each time
                caps[cap] = known
        return Op(op_id, "do", description, [], known[0], {} if args is _NO_ARGS else args, known[1], None, path)
    if (kind == "sequence" or kind == "parallel") and type(node.get("children")) is list \
            and node.keys() <= _COMPOSITE_FIELDS:
        return Op(op_id, kind, description, [], None, None, None, None, path)
    return None


_NO_ARGS: dict = {}


def _plain_node(node: dict, max_chars: int) -> bool:
    """Whether a well-formed node's values are what ``check_document`` passes in decoded text: ASCII strings
    within ``max_chars``, integers within ``MAX_INT_BITS``, and args holding such values and no container.
    (Its keys are known fields; its children are nodes, each proven in turn.)"""
    for key, value in node.items():
        kind = type(value)
        if kind is str:
            if len(value) > max_chars or not value.isascii():
                return False
        elif kind is dict:  # the args, or an op_id (ignored, but a value of the document all the same)
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
        elif kind is int:
            if value.bit_length() > MAX_INT_BITS:
                return False
        elif kind is list:
            if key != "children":
                return False
        elif kind is not float and kind is not bool and value is not None:
            return False
    return True


def _check_description(node: dict, path: str, issues: list[Issue]) -> str:
    description = node.get("description")
    if "description" not in node:
        issues.append(Issue("required", path, "node has no 'description'"))
    elif not isinstance(description, str):
        issues.append(Issue("type", f"{path}/description", f"description must be a string, got {_type_name(description)}"))
    elif not description or description.isspace():
        issues.append(Issue("empty_description", f"{path}/description", "description must not be empty"))
    else:
        return description
    return ""


def _load_meta(node: dict, path: str, limits: Limits) -> ControlRequest:
    issues = Issues()
    kind = node["op"]
    allowed = _META_FIELDS[kind]
    for key in _unknown_keys(node, allowed):
        issues.append(Issue("unknown_field", f"{path}/{escape(key)}",
                            f"field {key!r} is not allowed in a {kind} meta op (allowed: {', '.join(sorted(allowed))})"))
        if issues.dropped:
            break
    plan_id = target = when = None
    if kind in ("cancel_plan", "stop_plan_at"):
        plan_id = _required_id(node, "plan_id", path, issues)
    if kind == "stop_plan_at":
        target = _required_id(node, "target_op_id", path, issues)
        when = node.get("when", "on_complete")
        if when not in STOP_WHENS:
            issues.append(Issue("bad_value", f"{path}/when", f"when must be on_enter or on_complete, got {when!r}"))
    wait_ms = node.get("wait_ms", 5000)
    if kind != "stop_plan_at" and not (_is_int(wait_ms) and wait_ms >= 0):
        issues.append(Issue("bad_value", f"{path}/wait_ms", f"wait_ms must be a non-negative integer (milliseconds, "
                                                            f"at most {limits.max_wait_ms} are waited), got "
                                                            f"{_number_shown(wait_ms)}"))
    if issues:
        raise PlanError(issues)
    return ControlRequest(op=kind, dialect="rtdl", plan_id=plan_id, target_op_id=target, when=when,
                          wait_ms=min(wait_ms, limits.max_wait_ms) if kind != "stop_plan_at" else 0)


def capped_wait_warnings(doc: dict, request: ControlRequest) -> list[dict]:
    """A warning when the meta op of ``doc`` (alone or an envelope's rtdl) asked to wait longer than
    ``request``, the control it loaded as, waits."""
    meta = doc.get("rtdl", doc)
    asked = meta.get("wait_ms") if type(meta) is dict else None
    if not _is_int(asked) or asked <= request.wait_ms or request.op == "stop_plan_at":
        return []
    return [{"code": "wait_capped", "message": f"wait_ms {_number_shown(asked)} capped at {request.wait_ms} "
                                               "(the longest a cancel waits)"}]


def _required_id(node: dict, key: str, path: str, issues: list[Issue]) -> str | None:
    if key not in node:
        issues.append(Issue("required", path, f"{node['op']} needs '{key}'"))
        return None
    return id_text(node[key], key, f"{path}/{key}", issues)


def _builtin_ids_as_text(args: dict, path: str, issues: list[Issue]) -> dict:
    """The args of a builtin call with their integer ids as decimal strings (a copy when one changes);
    a negative, fractional or boolean id is an issue at its arg."""
    if not _has_id_not_text(args):
        return args
    args = dict(args)
    for key in _ID_ARGS:
        if key in args and type(args[key]) is not str:
            text = id_text(args[key], key, f"{path}/{key}", issues)
            if text is not None:
                args[key] = text
    return args


def _names_builtin(cap: str, provider: str | None) -> bool:
    return cap.startswith(_BUILTIN_CAP_PREFIX) or cap.startswith(_ARENA_BUILTIN_CAP_PREFIX) and \
        provider in (None, "executor")


def _has_id_not_text(args: dict) -> bool:
    return any(key in args and type(args[key]) is not str for key in _ID_ARGS)


# --- wire arena -----------------------------------------------------------

def _load_arena(doc: dict, limits: Limits) -> Plan:
    issues = Issues()
    nodes = doc.get("nodes")
    root_index = doc.get("root_index")
    if "nodes" not in doc:
        issues.append(Issue("required", "nodes", "arena has no 'nodes'"))
    elif not isinstance(nodes, list):
        issues.append(Issue("type", "nodes", f"nodes must be an array, got {_type_name(nodes)}"))
    elif not nodes:
        issues.append(Issue("bad_value", "nodes", "nodes must not be empty"))
    elif len(nodes) > limits.max_ops:
        issues.append(Issue("too_many_ops", "nodes", f"{len(nodes)} nodes, over the limit of {limits.max_ops} ops"))
    if "root_index" not in doc:
        issues.append(Issue("required", "root_index", "arena has no 'root_index'"))
    elif not _is_int(root_index) or root_index < 0:
        issues.append(Issue("type", "root_index", f"root_index must be a non-negative integer, got {root_index!r}"))
    for key in ("plan_id", "session_id"):
        if key in doc and not isinstance(doc[key], str):
            issues.append(Issue("type", key, f"{key} must be a string, got {_type_name(doc[key])}"))
    if "round" in doc and not _is_int(doc["round"]):
        issues.append(Issue("type", "round", f"round must be an integer, got {_type_name(doc['round'])}"))
    elif "round" in doc and not INT64_MIN <= doc["round"] <= INT64_MAX:
        issues.append(Issue("bad_value", "round", f"round must be a 64-bit signed integer, got "
                                                  f"{_number_shown(doc['round'])}"))
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
    walked = None if issues else _walk_arena_tree(nodes, ops, root_index, limits.max_depth)
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
            issues.extend(_cycles_among_faults(nodes))
        meta = {key: doc[key] for key in ("plan_id", "session_id", "round") if key in doc}
        raise PartlyRead(issues, _partial({str(index): op for index, op in enumerate(ops) if op is not None},
                                          "arena", meta))

    order, depth = _check_arena_graph(nodes, root_index, limits, issues)
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


def _partial(ops: dict[str, Op], shape: str, meta: dict) -> Plan:
    """The sound ops of a plan refused for its shape, each where it is in the input: what the checks of its
    calls (catalog, builtins, guard) still run on, so that a fault of one node hides none of another's."""
    return Plan(dialect="rtdl", shape=shape, root="", ops=ops, description="a plan read in part", depth=0,
                numbered_by_loader=False, meta=meta)


def _arena_plan_of(doc: dict, root: Op, ops: dict[str, Op], depth: int) -> Plan:
    meta = {key: doc[key] for key in ("plan_id", "session_id", "round") if key in doc}
    return Plan(dialect="rtdl", shape="arena", root=root.op_id, ops=ops, description=root.description,
                depth=depth, numbered_by_loader=False, meta=meta)


def _walk_arena_tree(nodes: list, ops: list[Op], root_index: int, max_depth: int) -> tuple[dict[str, Op], int] | None:
    """The ops of a sound arena by id in pre-order, each given its children's ids, and its depth: one walk
    from the root that meets every node once, with unique op ids, within ``max_depth``. None when it is not
    so: the checks of ``_arena_plan`` then say what is wrong (and set every op's children again)."""
    seen = bytearray(len(nodes))
    seen[root_index] = 1
    by_id: dict[str, Op] = {}
    visited = depth = 0
    stack = [(root_index, 1)]
    push, pop = stack.append, stack.pop
    while stack:
        index, level = pop()
        op = ops[index]
        by_id[op.op_id] = op
        visited += 1
        if level > depth:
            depth = level
        children = nodes[index]["children"]
        if children:  # a do node's op keeps the empty list it was made with
            for child in children:
                if seen[child]:
                    return None
                seen[child] = 1
            op.children = [ops[child].op_id for child in children]
            level += 1
            for child in reversed(children):
                push((child, level))
    if visited < len(nodes) or len(by_id) < visited or depth > max_depth:
        return None
    return by_id, depth


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
            args = _DECODER.decode(args_json or "{}")
    except (StopIteration, ValueError, RecursionError):
        return None
    # '_id"' ends each id arg's key (no escapes here): most args_json have none, and skip the rest of the test
    if type(args) is not dict or '_id"' in args_json and contract.startswith(_BUILTIN_CAP_PREFIXES) \
            and _has_id_not_text(args):
        return None
    return Op(op_id, kind, description, [], known, args, shared if "provider_id" in call else None,
              call.get("call_id"), f"nodes[{index}]")


def _check_arena_node(node: object, index: int, count: int, limits: Limits, issues: list[Issue]) -> Op | None:
    path = f"nodes[{index}]"
    if not isinstance(node, dict):
        issues.append(Issue("type", path, f"a node must be an object, got {_type_name(node)}"))
        return None
    before = len(issues)
    for key in _unknown_keys(node, _ARENA_NODE_FIELDS):
        issues.append(Issue("unknown_field", f"{path}.{key}",
                            f"field {key!r} is not allowed in an arena node (allowed: {', '.join(sorted(_ARENA_NODE_FIELDS))})"))
        if issues.dropped:
            break
    kind_code = node.get("node_kind")
    kind = ARENA_KINDS.get(kind_code) if _is_int(kind_code) else None
    if "node_kind" not in node:
        issues.append(Issue("required", path, "node has no 'node_kind' (0 sequence, 1 parallel, 2 do)"))
    elif kind is None:
        issues.append(Issue("bad_value", f"{path}.node_kind", f"node_kind must be 0 (sequence), 1 (parallel) or 2 (do), got {kind_code!r}"))
    children = node.get("children")
    if "children" not in node:
        issues.append(Issue("required", path, "node has no 'children'"))
    elif not isinstance(children, list):
        issues.append(Issue("type", f"{path}.children", f"children must be an array, got {_type_name(children)}"))
    else:
        for position, child in enumerate(children):
            if not _is_int(child):
                issues.append(Issue("type", f"{path}.children[{position}]", f"a child must be a node index, got {child!r}"))
            elif not 0 <= child < count:
                issues.append(Issue("index_out_of_range", f"{path}.children[{position}]",
                                    f"index {child} is out of range (nodes has {count} entries)"))
            if issues.dropped:
                break
        if kind == "do" and children:
            issues.append(Issue("bad_value", f"{path}.children", "a do node (node_kind 2) has no children"))
    op_id = node.get("op_id")
    if "op_id" not in node:
        issues.append(Issue("required", path, "node has no 'op_id'"))
    elif not isinstance(op_id, str) or not op_id.strip():
        issues.append(Issue("bad_value", f"{path}.op_id", f"op_id must be a non-empty string, got {op_id!r}"))
    description = node.get("description")
    if "description" not in node:
        issues.append(Issue("required", path, "node has no 'description'"))
    elif not isinstance(description, str) or not _NON_BLANK.search(description):
        issues.append(Issue("empty_description", f"{path}.description", f"description must be a non-empty string, got {description!r}"))
    call = node.get("call")
    cap = provider = call_id = None
    args: dict | None = None
    if kind == "do":
        if "call" not in node:
            issues.append(Issue("required", path, "do node (node_kind 2) has no 'call'"))
        else:
            cap, provider, call_id, args = _check_call(call, f"{path}.call", limits, issues)
            if args is not None and len(issues) == before and _names_builtin(cap, provider):
                args = _builtin_ids_as_text(args, f"{path}.call.args_json at ", issues)
    elif call is not None and kind is not None:  # null is how Robonix writes an absent call
        issues.append(Issue("unknown_field", f"{path}.call", f"only do nodes (node_kind 2) carry a call, not {kind}"))
    if len(issues) > before:
        return None
    return Op(op_id, kind, description, cap=cap, args=args, provider=provider, call_id=call_id, path=path)


def _check_call(call: object, path: str, limits: Limits, issues: list[Issue]) -> tuple:
    if not isinstance(call, dict):
        issues.append(Issue("type", path, f"call must be an object, got {_type_name(call)}"))
        return None, None, None, None
    for key in _unknown_keys(call, _CALL_FIELDS):
        issues.append(Issue("unknown_field", f"{path}.{key}",
                            f"field {key!r} is not allowed in a call (allowed: {', '.join(sorted(_CALL_FIELDS))})"))
        if issues.dropped:
            break
    for key in ("call_id", "provider_id"):
        if key in call and not isinstance(call[key], str):
            issues.append(Issue("type", f"{path}.{key}", f"{key} must be a string, got {_type_name(call[key])}"))
    contract = call.get("contract_id")
    if "contract_id" not in call:
        issues.append(Issue("required", path, "call has no 'contract_id'"))
    elif not isinstance(contract, str) or not _NO_WHITESPACE.fullmatch(contract):
        issues.append(Issue("bad_cap", f"{path}.contract_id", f"contract_id must be a non-empty name without spaces, got {contract!r}"))
    args_json = call.get("args_json", "{}")
    args = None
    if not isinstance(args_json, str):
        issues.append(Issue("type", f"{path}.args_json", f"args_json must be JSON text (a string), got {_type_name(args_json)}"))
    else:
        try:
            args = _DECODER.decode(args_json or "{}")
        except (ValueError, RecursionError) as exc:
            issues.append(Issue("json_syntax", f"{path}.args_json", f"args_json is not valid JSON: {exc}"))
        else:
            if not isinstance(args, dict):
                issues.append(Issue("type", f"{path}.args_json", f"args_json must hold an object, got {_type_name(args)}"))
                args = None
            elif len(args_json) > limits.max_string_chars or \
                    args_json.count("[") + args_json.count("{") > limits.max_json_nesting - 4:
                # the args' strings and nesting, as if written in the node (its nesting: nodes, node, call, args);
                # a short text holds no long string and nests no deeper than its brackets
                for issue in check_document(args, limits, depth=4):
                    issues.append(Issue(issue.code, f"{path}.args_json at {issue.path}" if issue.path else
                                        f"{path}.args_json", issue.message))
                    args = None
    return contract, call.get("provider_id"), call.get("call_id"), args


def _check_arena_graph(nodes: list, root_index: int, limits: Limits, issues: list[Issue]) -> tuple[list[int], int]:
    """Check the arena is one tree rooted at root_index; return its pre-order and depth.

    Linear time: one pass over the edges for nodes listed twice, one pre-order walk
    from the root. With no node listed twice and the root listed nowhere, that walk
    visits each reachable node once and a tree is exactly an arena it visits whole.
    Only when it is not a tree is the networkx DiGraph built, once, to name what is
    wrong: strongly connected components for cycles, then the nodes left unreached.
    """
    if _listed_once(nodes, root_index):
        return _tree_order(nodes, root_index, limits, issues)
    first_listed: dict[int, tuple[int, int] | None] = {root_index: None}  # child -> (parent, position); root: None
    for index, node in enumerate(nodes):
        for position, child in enumerate(node["children"]):
            if child == index:
                issues.append(Issue("cycle", f"nodes[{index}].children[{position}]",
                                    f"node {index} lists itself as a child"))
            elif child in first_listed:
                first = first_listed[child]
                also = "root_index" if first is None else f"nodes[{first[0]}].children[{first[1]}]"
                issues.append(Issue("reached_twice", f"nodes[{index}].children[{position}]",
                                    f"node {child} is reached more than once (also from {also})"))
            else:
                first_listed[child] = (index, position)
            if issues.dropped:
                return [], 0
    if issues:  # already no tree: name the cycles too, the cost no longer matters
        issues.extend(_cycle_issues(_digraph(nodes), set()))
        return [], 0
    return _tree_order(nodes, root_index, limits, issues)


def _cycles_among_faults(nodes: list) -> list[Issue]:
    """The cycles of an arena whose nodes have faults of their own, over the child indices that are sound: a
    cycle is named as one whatever else is wrong. (A node reached twice or not at all may follow from a
    faulty node; those are told once the nodes are sound.)"""
    count = len(nodes)
    issues = Issues()
    sound = []
    for index, node in enumerate(nodes):
        children = node.get("children") if type(node) is dict else None
        kept = []
        for position, child in enumerate(children if type(children) is list else ()):
            if not _is_int(child) or not 0 <= child < count:
                continue
            if child == index:
                issues.append(Issue("cycle", f"nodes[{index}].children[{position}]",
                                    f"node {index} lists itself as a child"))
            else:
                kept.append(child)
        sound.append({"children": kept})
    issues.extend(_cycle_issues(_digraph(sound), set()))
    return issues


def _listed_once(nodes: list, root_index: int) -> bool:
    """Whether no node lists itself, none is listed twice and the root is listed nowhere."""
    listed = [False] * len(nodes)
    listed[root_index] = True
    for index, node in enumerate(nodes):
        for child in node["children"]:
            if listed[child] or child == index:
                return False
            listed[child] = True
    return True


def _tree_order(nodes: list, root_index: int, limits: Limits, issues: list[Issue]) -> tuple[list[int], int]:
    """Pre-order and depth of an arena whose nodes are each listed once at most; issues when it is no tree."""
    order: list[int] = []
    depth = deepest = 0
    stack = [(root_index, 1)]
    while stack:
        index, level = stack.pop()
        order.append(index)
        if level > depth:
            depth, deepest = level, index
        for child in reversed(nodes[index]["children"]):
            stack.append((child, level + 1))
    if len(order) < len(nodes):
        reached = set(order)
        unreached = _digraph(nodes).subgraph(index for index in range(len(nodes)) if index not in reached)
        on_cycles: set[int] = set()
        issues.extend(_cycle_issues(unreached, on_cycles))
        for index in sorted(set(unreached) - on_cycles):
            issues.append(Issue("unreachable", f"nodes[{index}]", f"node {index} is not reachable from root_index {root_index}"))
        return [], 0
    if depth > limits.max_depth:
        issues.append(Issue("too_deep", f"nodes[{deepest}]",
                            f"node {deepest} is {depth} levels deep, over the limit of {limits.max_depth}"))
        return [], depth
    return order, depth


def _digraph(nodes: list) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(nodes)))
    graph.add_edges_from((index, child) for index, node in enumerate(nodes) for child in node["children"])
    return graph


def _cycle_issues(graph: nx.DiGraph, on_cycles: set[int]) -> list[Issue]:
    """One issue per cycle of two or more nodes (strongly connected components, linear time).

    Adds the nodes found on cycles to ``on_cycles``.
    """
    issues = Issues()
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            on_cycles.update(component)
            members = sorted(component)
            shown = ", ".join(str(m) for m in members[:8]) + (" ..." if len(members) > 8 else "")
            issues.append(Issue("cycle", f"nodes[{members[0]}]", f"nodes {shown} form a cycle"))
    return issues


def _unknown_keys(node: dict, allowed: frozenset) -> list:
    """The keys of ``node`` not in ``allowed``, in input order (a set difference would follow string hashes,
    which change from one process to the next)."""
    return [key for key in node if key not in allowed]


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _type_name(value: object) -> str:
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
