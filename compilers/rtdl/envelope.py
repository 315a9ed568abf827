"""RTDL's envelope: a tree (or a meta op) under ``rtdl``, with the planner's description of it, its content and
its task update beside it."""
from __future__ import annotations

from bt_exec.errors import Issue, Issues, PlanError

from ..ir import ControlRequest, Plan
from ..limit_walk import check_document
from ..limits import Limits
from ..report import PartlyRead
from .ops import META_OPS, NON_BLANK, TREE_OPS, type_name
from .tree import NotProven, load_tree_root

TASK_STATUSES = ("in_progress", "done", "succeeded", "failed")


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
        return load_envelope(doc, limits, proving=True)
    except (PlanError, NotProven):
        return None


def load_envelope(doc: dict, limits: Limits, proving: bool = False) -> Plan | ControlRequest:
    """The plan or meta op of an envelope; PlanError (PartlyRead when its tree could be read in part) with every
    issue. ``proving``: as ``load_tree_root`` takes it."""
    issues = Issues()
    rtdl = doc["rtdl"]
    content = doc.get("content")
    if content is not None and not isinstance(content, str):
        issues.append(Issue("type", "/content", f"content must be a string, got {type_name(content)}",
                            expected="string"))
    task_update = doc.get("task_update")
    _check_task_update(task_update, issues)
    description = doc.get("rtdl_description")
    if description is not None and not isinstance(description, str):
        issues.append(Issue("type", "/rtdl_description",
                            f"rtdl_description must be a string, got {type_name(description)}", expected="string"))
        description = None
    if not isinstance(rtdl, dict):
        hint = " (an RTDL tree object, not JSON text inside a string)" if isinstance(rtdl, str) else ""
        issues.append(Issue("type", "/rtdl", f"rtdl must be an object{hint}, got {type_name(rtdl)}",
                            expected="object"))
        raise PlanError(issues)
    is_empty_sequence = rtdl.get("op") == "sequence" and rtdl.get("children") == []
    if description is not None and not NON_BLANK.search(description) and not is_empty_sequence \
            and rtdl.get("op") not in META_OPS:
        issues.append(Issue("empty_description", "/rtdl_description",
                            "rtdl_description may be empty only when rtdl is an empty sequence"))
    meta = {"content": content, "task_update": task_update}
    try:
        loaded = load_tree_root(rtdl, "/rtdl", limits, description=description, meta=meta, proving=proving)
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
        issues.append(Issue("type", "/task_update",
                            f"task_update must be null or an object, got {type_name(task_update)}", expected="object"))
        return
    for key in ("goal", "success_criterion"):
        if key in task_update and not isinstance(task_update[key], str):
            issues.append(Issue("type", f"/task_update/{key}", f"{key} must be a string", expected="string"))
    status = task_update.get("status")
    if "status" in task_update and status not in TASK_STATUSES:
        issues.append(Issue("bad_value", "/task_update/status",
                            f"status must be one of {', '.join(TASK_STATUSES)}, got {status!r}",
                            allowed=TASK_STATUSES))
