"""RTDL's meta ops (cancel_plan, cancel_all, stop_plan_at): a whole rtdl value that controls other plans,
loaded as a ControlRequest, never nested in a tree."""
from __future__ import annotations

from jsonpointer import escape

from bt_exec.errors import Issue, Issues, PlanError

from ..control_values import id_text
from ..ir import STOP_WHENS, ControlRequest
from ..limits import Limits, number_shown
from .ops import is_int, unknown_keys

_META_FIELDS = {
    "cancel_plan": frozenset(("op", "op_id", "description", "plan_id", "wait_ms")),
    "cancel_all": frozenset(("op", "op_id", "description", "wait_ms")),
    "stop_plan_at": frozenset(("op", "op_id", "description", "plan_id", "target_op_id", "when")),
}


def load_meta(node: dict, path: str, limits: Limits) -> ControlRequest:
    """The control request of a meta op at ``path`` (its wait capped at ``limits.max_wait_ms``); PlanError with
    every issue."""
    issues = Issues()
    kind = node["op"]
    allowed = _META_FIELDS[kind]
    for key in unknown_keys(node, allowed):
        issues.append(Issue("unknown_field", f"{path}/{escape(key)}",
                            f"field {key!r} is not allowed in a {kind} meta op "
                            f"(allowed: {', '.join(sorted(allowed))})", allowed=tuple(sorted(allowed))))
        if issues.dropped:
            break
    plan_id = target = when = None
    if kind in ("cancel_plan", "stop_plan_at"):
        plan_id = _required_id(node, "plan_id", path, issues)
    if kind == "stop_plan_at":
        target = _required_id(node, "target_op_id", path, issues)
        when = node.get("when", "on_complete")
        if when not in STOP_WHENS:
            issues.append(Issue("bad_value", f"{path}/when", f"when must be on_enter or on_complete, got {when!r}",
                                allowed=STOP_WHENS))
    wait_ms = node.get("wait_ms", 5000)
    if kind != "stop_plan_at" and not (is_int(wait_ms) and wait_ms >= 0):
        issues.append(Issue("bad_value", f"{path}/wait_ms", f"wait_ms must be a non-negative integer (milliseconds, "
                                                            f"at most {limits.max_wait_ms} are waited), got "
                                                            f"{number_shown(wait_ms)}",
                            expected="non-negative integer"))
    if issues:
        raise PlanError(issues)
    return ControlRequest(op=kind, dialect="rtdl", plan_id=plan_id, target_op_id=target, when=when,
                          wait_ms=min(wait_ms, limits.max_wait_ms) if kind != "stop_plan_at" else 0)


def capped_wait_warnings(doc: dict, request: ControlRequest) -> list[dict]:
    """A warning when the meta op of ``doc`` (alone or an envelope's rtdl) asked to wait longer than
    ``request``, the control it loaded as, waits."""
    meta = doc.get("rtdl", doc)
    asked = meta.get("wait_ms") if type(meta) is dict else None
    if not is_int(asked) or asked <= request.wait_ms or request.op == "stop_plan_at":
        return []
    return [{"code": "wait_capped", "message": f"wait_ms {number_shown(asked)} capped at {request.wait_ms} "
                                               "(the longest a cancel waits)"}]


def _required_id(node: dict, key: str, path: str, issues: list[Issue]) -> str | None:
    if key not in node:
        issues.append(Issue("required", path, f"{node['op']} needs '{key}'", missing=key))
        return None
    return id_text(node[key], key, f"{path}/{key}", issues)
