"""Pure conversions between bt_exec's API (dicts) and bt_exec_interfaces / std_msgs messages.

No node, no I/O, no clock, no ROS import: each ``msg_to_x`` reads a request,
each ``x_to_msg`` fills the response or message it is given and returns it.
JSON text put in messages is ASCII (``ensure_ascii``), so a lone surrogate
from plan text can never make a message unencodable.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from ..compilers.control_values import MAX_WAIT_MS
from ..control import OUTPUT_CHARS
from ..errors import Issue
from ..events import finite_json

DIALECT_OF_REQUEST = {"": "auto", "auto": "auto", "rtdl": "rtdl", "qwen3": "qwen3"}


def to_json(value: object) -> str:
    return finite_json.dumps(value, default=str)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


# --- Submit ---------------------------------------------------------------------

@dataclass(frozen=True)
class Submission:
    """What a Submit request asks the executor: ``Executor.submit(source, run_id=run_id, dialect=dialect)``.

    ``text`` is the request's ``graph_json`` unchanged (what ``~/plan`` publishes);
    ``source`` is what is submitted (the text itself, or a Qwen3 submit envelope
    around it when a scene revision was given); ``run_id_made`` says the node made
    ``run_id`` because the request had none.
    """

    text: str
    source: str
    run_id: str
    dialect: str
    run_id_made: bool


def msg_to_submission(request, max_input_bytes: int) -> Submission:
    """A Submit request as a submission. Never raises for bad content: the executor refuses it with issues.

    * ``dialect``: empty means auto-detection; an unknown name is passed on (and refused: unknown_dialect).
    * ``run_id``: empty means the node makes one: the ``run_id`` of a Qwen3 submit envelope in
      ``graph_json`` when there is one, else a fresh ``uuid4().hex``.
    * Qwen3 with ``scene_revision >= 0``: ``graph_json`` (a bare graph, or model output text holding
      one) is wrapped as ``{"run_id", "scene_revision", "response": graph_json}``.
    """
    text = request.graph_json
    dialect = DIALECT_OF_REQUEST.get(request.dialect.strip().lower(), request.dialect)
    run_id = request.run_id
    made = not run_id
    if made:
        run_id = envelope_run_id(text, max_input_bytes) if dialect in ("auto", "qwen3") else None
        run_id = run_id or uuid.uuid4().hex
    source = text
    if dialect == "qwen3" and request.scene_revision >= 0:
        source = json.dumps({"run_id": run_id, "scene_revision": request.scene_revision, "response": text})
    return Submission(text=text, source=source, run_id=run_id, dialect=dialect, run_id_made=made)


def envelope_run_id(text: str, max_input_bytes: int) -> str | None:
    """The ``run_id`` of a Qwen3 submit envelope held by ``text``, if it is one (cheap test first)."""
    if '"run_id"' not in text or '"response"' not in text or len(text) > max_input_bytes:
        return None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):
        return None
    run_id = doc.get("run_id") if isinstance(doc, dict) and "response" in doc else None
    return run_id if isinstance(run_id, str) and run_id.strip() else None


def answer_to_submit_msg(answer: dict, response, run_id: str):
    """Fill a Submit response from ``Executor.submit``'s answer (``run_id``: what was submitted)."""
    response.accepted = bool(answer.get("accepted"))
    response.run_id = answer.get("run_id") or run_id or ""
    response.plan_id = answer.get("plan_id") or ""
    response.verdict = str(answer.get("verdict") or "")
    response.message = one_line(answer.get("message") or "")
    response.issues_json = to_json(answer.get("issues") or [])
    response.warnings_json = to_json(answer.get("warnings") or [])
    response.scene_json = to_json(answer["scene"]) if answer.get("scene") else ""
    return response


def refusal_to_submit_msg(response, run_id: str, code: str, message: str, verdict: str = "invalid"):
    """A Submit response refusing without the executor (e.g. an internal error in the node)."""
    return answer_to_submit_msg({"accepted": False, "verdict": verdict, "message": f"refused ({verdict}): {message}",
                                 "issues": [Issue(code, "", message).as_dict()]}, response, run_id)


# --- StopAt, Disarm, PlanControl, Cancel, GetStatus, ListPlans ------------------

def msg_to_stop_at(request) -> tuple[str, str, str, str]:
    """(plan_id, op_id, when, action); an empty ``when`` means on_complete, an empty ``action`` cancel.

    The ids are passed as they came: the fields are text, and the executor takes an id given as text
    unchanged (an integer id is written as its decimal string), so ``"3"`` is op 3 on every door."""
    return request.plan_id, request.op_id, request.when.strip() or "on_complete", request.action.strip() or "cancel"


def stop_at_to_msg(success: bool, message: str, response):
    response.success = bool(success)
    response.message = one_line(message)
    return response


def msg_to_disarm(request) -> tuple[str, str, str]:
    """(plan_id, op_id, when); an empty ``when`` means on_complete."""
    return request.plan_id, request.op_id, request.when.strip() or "on_complete"


def disarm_to_msg(answer: dict, response):
    """A Disarm response from ``Executor.disarm_stop_point``'s answer (or a refusal: ``{success: False, message}``)."""
    response.success = bool(answer.get("success"))
    response.disarmed = bool(answer.get("disarmed"))
    response.message = one_line(answer.get("message") or "")
    return response


PLAN_CONTROL_CHANGED = {"pause": "paused", "resume": "resumed"}  # the answer's flag of each; step has none


def plan_control_to_msg(service: str, answer: dict, response):
    """A PlanControl response (``~/pause``, ``~/resume``, ``~/step``) from the executor's answer:
    ``changed`` is its ``paused`` / ``resumed`` flag, always false for a step."""
    response.success = bool(answer.get("success"))
    response.changed = bool(answer.get(PLAN_CONTROL_CHANGED.get(service, ""), False))
    response.message = one_line(answer.get("message") or "")
    return response


def msg_to_cancel(request) -> tuple[str | None, int, bool]:
    """(plan_id or None for every plan, wait_ms capped at MAX_WAIT_MS, whether it was capped).

    MAX_WAIT_MS is the most a cancel meta op may ask for: the same wait, whichever door asks for it."""
    wait_ms = int(request.wait_ms)
    return (request.plan_id or None), min(wait_ms, MAX_WAIT_MS), wait_ms > MAX_WAIT_MS


def cancel_to_msg(success: bool, finished: bool, message: str, response):
    response.success = bool(success)
    response.finished = bool(finished)
    response.message = one_line(message)
    return response


def msg_to_status_request(request) -> tuple[str, int | None]:
    """(plan_id, feedback_chars): ``feedback_chars`` is None for the status, else the feedback's output limit
    (``request.feedback_chars``, its default when 0)."""
    if not request.feedback:
        return request.plan_id, None
    return request.plan_id, int(request.feedback_chars) or OUTPUT_CHARS


def status_to_msg(status: dict | None, error: str | None, response):
    """A GetStatus response: the plan's live status or final record, or ``{"error": ...}`` when not found."""
    response.found = status is not None
    response.status_json = to_json(status if status is not None else {"error": one_line(error or "not found")})
    return response


def msg_to_plans_request(request) -> bool:
    """Whether the plans are listed with their ops (the snapshot for the planner's next prompt)."""
    return bool(request.ops)


def plans_to_msg(plans: dict, response):
    response.plans_json = to_json(plans)
    return response


# --- topics ---------------------------------------------------------------------

def text_to_msg(text: str, msg):
    """A ``~/plan`` message (``std_msgs/String``): the graph text unchanged."""
    msg.data = text
    return msg


def event_to_msg(event: dict, msg):
    """One executor event as one ``~/status`` message (``std_msgs/String``)."""
    msg.data = to_json(event)
    return msg


def snapshot_to_msg(snapshot: dict, msg):
    """A ``~/tree`` message (``std_msgs/String``): ``{"time", "plans": [get_plan_status of each running plan]}``."""
    msg.data = to_json(snapshot)
    return msg


# --- Control (any operation of the control API) ------------------------------------

def control_call_to_msg(operation: str, args: dict, door: str, request):
    request.operation = operation
    request.args_json = json.dumps(args, ensure_ascii=True)
    request.door = door
    return request


def msg_to_control_call(request) -> tuple[str, str, str]:
    """``(operation, args_text, door)``: ``args_text`` is ``{}`` when empty; ``door`` is "ros" when empty."""
    return request.operation, request.args_json.strip() or "{}", request.door or "ros"


def control_answer_to_msg(status: int, answer: dict, response):
    """``status`` 200: ``answer`` is the operation's; else it is ``{"error": {"code", "message"}}``."""
    response.success = status == 200
    response.status = status
    response.answer_json = finite_json.dumps(answer, default=str, ensure_ascii=True)
    return response


def msg_to_control_answer(response) -> tuple[bool, int, object]:
    """``(success, status, answer)``; an answer that is not JSON is a failure (status 502) saying so."""
    try:
        answer = json.loads(response.answer_json)
    except (ValueError, RecursionError):
        return False, 502, {"error": {"code": "bad_answer", "message": "the robot's answer is not JSON"}}
    return bool(response.success), int(response.status), answer
