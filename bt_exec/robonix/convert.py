"""Pure conversions between the Robonix executor's messages and bt_exec's control surface.

Each ``msg_to_x`` reads a Robonix message as what bt_exec's control surface takes, each ``x_to_msg`` writes a
control answer or an executor event as the message robonix-executor answers with, in the words and numbers
its sources (``system/executor/src/service.rs``, ``rtdl_wire.rs``, ``plan_runtime.rs``) use:

- ``msg_to_arena``: a Pilot ``Plan`` as the RTDL wire arena bt_exec's RTDL dialect loads; of that arena,
  ``plan_nodes``: each op id's node (index, kind, call ids), what events and listings need beside bt_exec's own
  words, and ``robonix_refusal``: the reason robonix-executor gives for refusing it, word for word, or None.
- ``event_to_msg``: one bt_exec event (``plan_started``, ``node_state``, ``plan_complete``) as an ``RtdlEvent``.
- ``msg_to_control`` and ``*_to_msg``: a ``ControlPlan`` request as a control call, and the answer back.
- ``active_plan`` and ``plans_json``: ``ListActivePlans``' JSON; ``health_to_msg``: ``GetModuleHealth``'s report.
- ``refusal_message``: a refusal's reason with bt_exec's located issues and fixes, bounded to fit a gRPC status.

Nothing here calls the executor or does I/O.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

from bt_exec.compilers.limits import INT64_MAX
from bt_exec.events.finite_json import dumps
from bt_exec.events.shapes import FINAL_STATES
from bt_exec.robonix.stubs import load_wire

_wire = load_wire()  # raises StubsMissing, saying what to run, before a message is needed

from bt_exec.robonix.wire import executor_pb2, module_health_pb2, pilot_pb2  # noqa: E402  (built: load_wire checked)

SEQUENCE, PARALLEL, DO = 0, 1, 2
KIND_NAMES = {SEQUENCE: "sequence", PARALLEL: "parallel", DO: "do"}
_STATES = pilot_pb2.RtdlNodeState.RtdlNodeStateEnum
_EVENTS = executor_pb2.RtdlEvent.RtdlEventEnum
# bt_exec's op states are Robonix's state names in lower case (CANCELED is canceled in both).
STATE_NUMBERS = {name.lower(): number for name, number in _STATES.items()}

DEFAULT_WAIT_MS = 5000  # what robonix-executor waits for a cancel when wait_ms is 0
HEALTH_SCHEMA_VERSION = 1
HEALTH_OK = 0
HEALTH_TTL_MS = 5000
# A refusal's reason and issues travel in the gRPC status message, a trailer: percent-encoded, and read by clients
# that refuse trailers past 8 KiB (gRPC's default), so the whole message is kept under this many bytes encoded.
MAX_REFUSAL_BYTES = 4096
_MAX_REASON_CHARS = 1000
# A call's output or error beyond this is cut (at most 1 MiB of UTF-8 each), so that its event stays within what a
# client reads of one message (4 MiB) whatever result size the executor keeps (16 KiB by default).
MAX_OUTPUT_CHARS = 256 * 1024
_MAX_ISSUE_MESSAGE_CHARS = 300
_STOP_ON_ENTER = "stop point on_enter"  # how a bt_exec op stopped before it started is detailed


class PlanNode(NamedTuple):
    """One arena node, as events and listings name it: its index, node kind, and a do node's call ids."""

    index: int
    kind: int
    call_id: str
    provider_id: str
    contract_id: str


# --- Execute: the plan in ------------------------------------------------------------------------------------

def msg_to_arena(plan) -> dict:
    """The RTDL wire arena of a Pilot ``Plan``, as bt_exec's RTDL dialect loads it (``plan_nodes`` and
    ``robonix_refusal`` read it too: plain Python values are read faster than protobuf fields). A sequence or
    parallel node's call is left out, as robonix-executor never reads it; a do node without one has no ``call``,
    a fault for the checks to name."""
    nodes = []
    for node in plan.nodes:
        kind = node.node_kind
        entry = {"node_kind": kind, "children": list(node.children), "op_id": node.op_id,
                 "description": node.description}
        if kind != DO:
            entry["call"] = None
        elif node.HasField("call"):
            call = node.call
            entry["call"] = {"call_id": call.call_id, "provider_id": call.provider_id,
                             "contract_id": call.contract_id, "args_json": call.args_json}
        nodes.append(entry)
    return {"plan_id": plan.plan_id, "session_id": plan.session_id, "round": plan.round,
            "root_index": plan.root_index, "nodes": nodes}


BUILTIN_PROVIDER = "executor"  # the provider id bt_exec's RTDL dialect reads as its own builtins


def addressed_to_builtins(arena: dict, executor_id: str) -> dict:
    """``arena`` with the calls to ``executor_id`` addressed to bt_exec's builtins: robonix-executor runs a do node
    in process when its provider is the executor's own id, whatever ``--id`` named it. The arena itself is left
    as it is (events and listings name the provider the plan gave)."""
    if executor_id == BUILTIN_PROVIDER:
        return arena
    nodes = [dict(node, call=dict(node["call"], provider_id=BUILTIN_PROVIDER))
             if node.get("call") and node["call"]["provider_id"] == executor_id else node
             for node in arena["nodes"]]
    return dict(arena, nodes=nodes)


def plan_nodes(arena: dict) -> dict[str, PlanNode]:
    """Op id -> its node (the first node that has it), of ``msg_to_arena``'s arena."""
    nodes: dict[str, PlanNode] = {}
    for index, node in enumerate(arena["nodes"]):
        call = node.get("call") or _NO_CALL
        if node["op_id"] not in nodes:
            nodes[node["op_id"]] = PlanNode(index, node["node_kind"], call["call_id"], call["provider_id"],
                                            call["contract_id"])
    return nodes


_NO_CALL = {"call_id": "", "provider_id": "", "contract_id": ""}


def robonix_refusal(arena: dict) -> str | None:
    """Why robonix-executor refuses the plan of ``msg_to_arena``'s ``arena`` before running it (its Execute answers
    INVALID_ARGUMENT with this reason), in its words; None when it would run it. Its checks, in its order: nodes,
    the root index, then node by node its op id (blank, or a duplicate), description, children in range, a do
    node's call and its ids, and last a cycle among the nodes reachable from the root."""
    nodes, root = arena["nodes"], arena["root_index"]
    if not nodes:
        return "Plan.nodes must not be empty"
    if root >= len(nodes):
        return f"Plan.root_index {root} is out of bounds for {len(nodes)} nodes"
    seen: set[str] = set()
    for index, node in enumerate(nodes):
        op_id = node["op_id"].strip()
        if not op_id:
            return f"node {index} op_id must not be empty"
        if op_id in seen:
            return f"node {index} has duplicate op_id '{op_id}'"
        seen.add(op_id)
        if not node["description"].strip():
            return f"node {index} description must not be empty"
        kind = node["node_kind"]
        if kind in (SEQUENCE, PARALLEL):
            for child in node["children"]:
                if child >= len(nodes):
                    return f"node {index} child index {child} is out of bounds"
        elif kind == DO:
            if node["children"]:
                return f"do node {index} must not have children"
            call = node.get("call")
            if call is None:
                return f"do node {index} must contain a call"
            for name in ("call_id", "provider_id", "contract_id"):
                if not call[name]:
                    return f"do node {index} {name} must not be empty"
        else:
            return f"node {index} has invalid node_kind {kind}"
    return _cycle_from(root, nodes)


def _cycle_from(root: int, nodes: list[dict]) -> str | None:
    """The first node a depth-first walk from ``root`` (children in order) finds on its own path, as robonix-executor
    names it; walked with a stack of our own, so a deep arena cannot exhaust Python's."""
    on_path, done = {root}, set()
    stack = [(root, 0)]
    while stack:
        index, position = stack[-1]
        node = nodes[index]
        children = node["children"] if node["node_kind"] in (SEQUENCE, PARALLEL) else ()
        if position == len(children):
            stack.pop()
            on_path.discard(index)
            done.add(index)
            continue
        stack[-1] = (index, position + 1)
        child = children[position]
        if child in on_path:
            return f"cycle detected at node {child}"
        if child not in done:
            on_path.add(child)
            stack.append((child, 0))
    return None


# --- Execute: the events out ---------------------------------------------------------------------------------

def event_to_msg(event: dict, plan_id: str, nodes: dict[str, PlanNode]):
    """The ``RtdlEvent`` of a bt_exec event of a plan Pilot named ``plan_id`` (``nodes``: ``plan_nodes`` of it), or
    None for an event Robonix has no kind for (stop points armed, pauses: bt_exec's own)."""
    kind = event.get("event")
    if kind == "plan_started":
        return executor_pb2.RtdlEvent(event_kind=_EVENTS.PLAN_STARTED,
                                      plan_started=executor_pb2.RtdlPlanStarted(plan_id=plan_id))
    if kind == "plan_complete":
        failed = bool(event.get("any_failed")) or bool(event.get("cancelled"))
        return executor_pb2.RtdlEvent(event_kind=_EVENTS.PLAN_COMPLETE,
                                      plan_complete=executor_pb2.RtdlPlanComplete(plan_id=plan_id, any_failed=failed))
    if kind != "node_state":
        return None
    node = nodes.get(event.get("op_id"))
    state = event.get("state")
    number = STATE_NUMBERS.get(state)
    if node is None or number is None:
        return None
    detail = utf8(event.get("detail") or "")
    message = pilot_pb2.RtdlNodeState(plan_id=plan_id, node_index=node.index, node_kind=node.kind, state=number,
                                      op_id=event["op_id"], description=event.get("description") or "")
    if state == "canceled" and detail.startswith(_STOP_ON_ENTER):
        message.operator_detail = f"stopped on entering op_id={event['op_id']}: plan cancelled"
    elif node.kind == DO:
        message.operator_detail = detail
        if state in FINAL_STATES:
            message.leaf_result.CopyFrom(leaf_result(node, event.get("result"), detail))
    else:
        message.operator_detail = operator_detail(node.kind, event["op_id"], message.description, state, detail)
    return executor_pb2.RtdlEvent(event_kind=_EVENTS.NODE_STATE, node_state=message)


def operator_detail(kind: int, op_id: str, description: str, state: str, detail: str) -> str:
    """A sequence's or parallel's detail: robonix-executor's sentence for its final state (``RTDL <kind>
    op_id=<id> <what happened>: <description>``), the same for its start, and bt_exec's own summary of its
    children (which failed, how many were skipped) after it in parentheses."""
    happened = {"running": "started", "succeeded": "completed successfully",
                "failed": "failed because one or more child nodes failed", "canceled": "was canceled"}.get(state, state)
    sentence = f"RTDL {KIND_NAMES.get(kind, 'operator')} op_id={op_id} {happened}: {description}"
    return f"{sentence} ({detail})" if detail else sentence


def leaf_result(node: PlanNode, result: object, detail: str):
    """A do node's ``CapabilityCallResult``: the call's ids as the plan gave them, its success, output (text as
    the provider gave it; any other value as JSON; past ``MAX_OUTPUT_CHARS`` cut, saying so) and error. A call that
    ended without a result (torn down while it ran) failed, with the reason as its error."""
    message = pilot_pb2.CapabilityCallResult(call_id=node.call_id, provider_id=node.provider_id,
                                             contract_id=node.contract_id)
    if not isinstance(result, dict):
        message.error = detail or "the call ended without a result"
        return message
    if not message.call_id and isinstance(result.get("call_id"), str):
        message.call_id = result["call_id"]
    message.success = result.get("success") is True
    output = result.get("output")
    text = utf8(output) if isinstance(output, str) else "" if output is None else \
        dumps(output, separators=(",", ":"), default=str)
    message.output = text if len(text) <= MAX_OUTPUT_CHARS else \
        f"{text[:MAX_OUTPUT_CHARS]}… (cut: {len(text)} characters in all)"
    message.error = utf8(str(result.get("error") or ""))[:MAX_OUTPUT_CHARS]
    return message


def utf8(text: str) -> str:
    """``text`` as a protobuf string field takes it: a lone surrogate (which JSON text may carry) becomes ``?``."""
    try:
        text.encode()
    except UnicodeEncodeError:
        return text.encode(errors="replace").decode()
    return text


# --- ControlPlan, CancelAll ----------------------------------------------------------------------------------

@dataclass(frozen=True)
class ControlAsk:
    """A ``ControlPlan`` request as read: ``action`` and what it names (``op_id`` trimmed, ``when`` as bt_exec
    words it, ``wait_ms`` with robonix-executor's default for 0), or ``error``, robonix-executor's answer to a
    request it refuses before looking at any plan."""

    action: str
    plan_id: str
    op_id: str = ""
    when: str = "on_complete"
    wait_ms: int = DEFAULT_WAIT_MS
    error: str = ""


_WHEN = {"on_enter": "on_enter", "before": "on_enter", "on_complete": "on_complete", "after": "on_complete",
         "": "on_complete"}


def msg_to_control(request) -> ControlAsk:
    """A ``ControlPlan_Request`` read as robonix-executor reads it: ``cancel``, ``cancel_all`` or ``stop_at`` (its
    ``when`` takes on_enter or before, on_complete or after, empty for on_complete); anything else is refused."""
    wait_ms = min(request.wait_ms or DEFAULT_WAIT_MS, INT64_MAX)
    if request.action in ("cancel", "cancel_all"):
        return ControlAsk(request.action, request.plan_id, wait_ms=wait_ms)
    if request.action != "stop_at":
        return ControlAsk(request.action, request.plan_id, error=f"unknown plan-control action '{request.action}'")
    op_id = request.op_id.strip()
    if not op_id:
        return ControlAsk("stop_at", request.plan_id, error="stop_plan_at requires non-empty op_id")
    when = _WHEN.get(request.when.strip())
    if when is None:
        return ControlAsk("stop_at", request.plan_id, op_id,
                          error=f"invalid when '{request.when}' (expected on_enter or on_complete)")
    return ControlAsk("stop_at", request.plan_id, op_id, when)


def control_call(ask: ControlAsk, plan_id: str) -> tuple[str, dict]:
    """The control surface's operation and arguments for ``ask``, on bt_exec's plan ``plan_id``."""
    if ask.action == "cancel":
        return "cancel_plan", {"plan_id": plan_id, "wait_ms": ask.wait_ms}
    if ask.action == "cancel_all":
        return "cancel_all", {"wait_ms": ask.wait_ms}
    return "stop_plan_at", {"plan_id": plan_id, "op_id": ask.op_id, "when": ask.when}


def refused_control_to_msg(ask: ControlAsk):
    """robonix-executor's answer to a request it refuses as read (``ask.error``)."""
    return executor_pb2.ControlPlan_Response(success=False, completed=True, error=ask.error)


def failed_control_to_msg(error: str):
    """The answer when bt_exec refused the call for a reason robonix-executor has no answer of its own for."""
    return executor_pb2.ControlPlan_Response(success=False, completed=True, error=error)


def cancel_to_msg(plan_id: str, answer: dict | None):
    """``cancel``'s answer: ``answer`` is ``cancel_plan``'s, None when the plan was not in flight (finished, or
    never known)."""
    if answer is None:
        return executor_pb2.ControlPlan_Response(
            success=True, completed=True,
            message=f"RTDL plan '{plan_id}' is not running (already finished or cancelled); nothing to cancel.")
    finished = bool(answer["finished"])
    return executor_pb2.ControlPlan_Response(
        success=True, completed=finished,
        message=f"Cancellation was requested for RTDL plan '{plan_id}'; cancelled=true, "
                f"completed={str(finished).lower()}. bt_exec: {answer['message']}")


def cancel_all_to_msg(answer: dict):
    """``cancel_all``'s answer from ``cancel_all``'s."""
    finished = bool(answer["finished"])
    return executor_pb2.ControlPlan_Response(
        success=True, completed=finished,
        message=f"Cancellation requested for all RTDL plans; target_count={answer['count']}, "
                f"completed={str(finished).lower()}.")


def stop_at_to_msg(ask: ControlAsk, answer: dict | None, op_missing: bool = False):
    """``stop_at``'s answer: ``answer`` is ``stop_plan_at``'s, None when the plan was not in flight;
    ``op_missing``: the plan has no such op."""
    if op_missing:
        return executor_pb2.ControlPlan_Response(success=False, completed=True,
                                                 error=f"RTDL plan '{ask.plan_id}' has no op_id '{ask.op_id}'")
    if answer is None or not answer.get("armed"):
        return executor_pb2.ControlPlan_Response(
            success=True, completed=True,
            message=f"RTDL plan '{ask.plan_id}' is not running (already finished or cancelled); "
                    "no stop point needed.")
    message = f"Stop point set: RTDL plan '{ask.plan_id}' will be cancelled {ask.when} op_id={ask.op_id}."
    _, note, rest = answer["message"].partition(" Note: ")
    return executor_pb2.ControlPlan_Response(success=True, completed=True,
                                             message=f"{message} Note: {rest}" if note else message)


def cancel_all_plans_to_msg(answer: dict):
    """``CancelAll``'s answer: success once every plan finished within the wait."""
    return executor_pb2.CancelAll_Response(success=bool(answer["finished"]))


# --- ListActivePlans, GetModuleHealth ------------------------------------------------------------------------

def active_plan(listing: dict, status: dict, plan_id: str, nodes: dict[str, PlanNode] | None) -> dict:
    """One plan as ``ListActivePlans`` lists it, from ``get_all_plans``' ``listing`` of it and its
    ``get_plan_status`` (with args, for a plan of another door): ``plan_id`` (Pilot's, for a plan that came over
    Execute), ``description``, ``op_count``, ``cancelled``, ``stop_points`` (how many), bt_exec's ``paused``, and
    ``ops``, each with ``op_id``, ``kind``, ``description``, ``provider_id``, ``contract_id`` and ``state`` in
    ``get_plan_status``' words. ``nodes``: the plan's ``plan_nodes`` when it came over Execute (its ops are
    then in arena order, with their provider); None for another door's plan (its ops in plan order, the
    contract its ``cap``, the provider the status names for it, else none)."""
    ops = []
    for op in status["ops"]:
        node = nodes.get(op["op_id"]) if nodes is not None else None
        ops.append({"op_id": op["op_id"], "kind": op["kind"], "description": op["description"],
                    "provider_id": node.provider_id if node is not None else op.get("provider") or "",
                    "contract_id": node.contract_id if node is not None else op.get("cap") or "",
                    "state": op["state"]})
    if nodes is not None:
        ops.sort(key=lambda op: nodes[op["op_id"]].index if op["op_id"] in nodes else len(nodes))
    return {"plan_id": plan_id, "description": listing["description"], "op_count": listing["op_count"],
            "cancelled": bool(listing["cancelled"]), "stop_points": listing["stop_points"],
            "paused": bool(listing.get("paused")), "ops": ops}


def plans_json(plans: list[dict]) -> str:
    """``ListActivePlans``' ``plans_json``: ``{"count", "plans"}``, plans whose id is a number first, by number
    (robonix-executor's order), the others after them in the order given."""
    def order(plan: dict) -> int:
        plan_id = plan["plan_id"]
        return int(plan_id) if plan_id.isascii() and plan_id.isdigit() and int(plan_id) < 1 << 64 else 1 << 64

    ordered = sorted(plans, key=order)
    return dumps({"count": len(ordered), "plans": ordered}, separators=(",", ":"))


def list_to_msg(plans: str | None, error: str = ""):
    """``ListActivePlans``' answer: the plans' JSON, or ``error`` (success false)."""
    if plans is None:
        return executor_pb2.ListActivePlans_Response(success=False, error=error)
    return executor_pb2.ListActivePlans_Response(success=True, plans_json=plans)


def health_to_msg(executor_id: str):
    """``GetModuleHealth``'s answer: the report robonix-executor gives while it serves."""
    module = module_health_pb2.ModuleHealth(module_id="executor", provider_id=executor_id, health=HEALTH_OK,
                                            state="active", reason_code="OK", detail="executor serving",
                                            ttl_ms=HEALTH_TTL_MS)
    return module_health_pb2.GetModuleHealth_Response(
        report=module_health_pb2.ModuleHealthReport(schema_version=HEALTH_SCHEMA_VERSION, module=module))


# --- refusals ------------------------------------------------------------------------------------------------

def refusal_message(reason: str, issues: list[dict], max_bytes: int = MAX_REFUSAL_BYTES) -> str:
    """A refused plan's gRPC status message: ``reason`` on the first line (robonix-executor's words where it refuses
    the plan too), then the JSON object ``{"issues": [...], "issues_total": N}`` of bt_exec's located issues, each
    with its JSON Patch ``fix`` or ``alternatives`` where it has one. Issues are kept in order while the whole fits
    ``max_bytes`` as gRPC sends it (percent-encoded): one too large for what is left is kept without its fixes
    and with its message cut, or left out; ``issues_total`` says how many there were."""
    reason = reason if len(reason) <= _MAX_REASON_CHARS else reason[:_MAX_REASON_CHARS] + "…"
    kept: list[dict] = []
    used = _sent_bytes(reason) + _sent_bytes("\n" + _issues_json(kept, len(issues)))
    for issue in issues:
        for candidate in (issue, _plain_issue(issue)):
            grown = _sent_bytes(_issues_json(kept + [candidate], len(issues))) - _sent_bytes(
                _issues_json(kept, len(issues)))
            if used + grown <= max_bytes:
                kept.append(candidate)
                used += grown
                break
        else:
            break
    return f"{reason}\n{_issues_json(kept, len(issues))}"


def _plain_issue(issue: dict) -> dict:
    message = str(issue.get("message", ""))
    if len(message) > _MAX_ISSUE_MESSAGE_CHARS:
        message = message[:_MAX_ISSUE_MESSAGE_CHARS] + "…"
    return {"code": issue.get("code"), "path": issue.get("path"), "message": message}


def _issues_json(issues: list[dict], total: int) -> str:
    return dumps({"issues": issues, "issues_total": total}, separators=(",", ":"), default=str)


def _sent_bytes(text: str) -> int:
    """``text``'s size in a gRPC status message: bytes outside printable ASCII, and ``%``, go as three."""
    return sum(1 if 0x20 <= byte <= 0x7E and byte != 0x25 else 3 for byte in text.encode())
