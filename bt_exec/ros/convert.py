"""Pure conversions between the interface messages and the control operations they ask for.

No node, no I/O, no clock, no ROS import: each ``msg_to_x`` reads a request as a call of the control surface,
``(operation name, args)`` for ``bt_exec.control``'s dispatcher; each ``x_to_msg`` fills the response or message
it is given from the dispatcher's ``(status, answer)`` and returns it. ``status`` is 200 with the operation's
answer, or the status ``control.error_answer`` gives the refusal's type with ``{"error": {code, message}}``:
``success``, ``found`` and ``accepted`` follow from it, the words are the refusal's own. A field left empty asks
for the operation's default. JSON text put in messages is ASCII (``ensure_ascii``), so a lone surrogate from plan
text can never make a message unencodable.
"""
from __future__ import annotations

import json
import uuid
from dataclasses import dataclass

from ..control import STATUS_OF_TYPE
from ..errors import BadArgument, Busy, Issue, TooLarge
from ..events import finite_json

DIALECT_OF_REQUEST = {"": "auto", "auto": "auto", "rtdl": "rtdl", "qwen3": "qwen3", "btcpp": "btcpp"}
OK = 200  # the dispatcher's status of an answer; any other is a refusal's
# The statuses of refusals that may pass if asked again later (Busy and its kinds): a submit is refused as busy.
RETRY_LATER = frozenset(status for kind, status in STATUS_OF_TYPE if issubclass(kind, Busy))


def to_json(value: object) -> str:
    return finite_json.dumps(value, default=str)


def one_line(text: object) -> str:
    return " ".join(str(text).split())


def message_of(status: int, answer: dict) -> str:
    """The message of an answer, or of a refusal ``{"error": {code, message}}``, on one line."""
    said = answer.get("message") if status == OK else answer["error"]["message"]
    return one_line(said or "")


# --- Submit ---------------------------------------------------------------------

@dataclass(frozen=True)
class Submission:
    """What a Submit request asks for: ``submit_plan`` with ``args``.

    ``text`` is the request's ``graph_json`` unchanged (what ``~/plan`` publishes);
    ``source`` is what is submitted (the text itself, or a Qwen3 submit envelope
    around it when a scene revision was given); ``run_id_made`` says the node made
    ``run_id`` because the request had none. ``blackboard`` is ``blackboard_json`` read (None when empty);
    ``refusal`` says why it could not be read, and the submission is then answered with it, unsubmitted.
    """

    text: str
    source: str
    run_id: str
    dialect: str
    run_id_made: bool
    blackboard: object = None
    refusal: BadArgument | None = None

    @property
    def args(self) -> dict:
        """The arguments of its ``submit_plan`` call."""
        args = {"graph": self.source, "run_id": self.run_id, "dialect": self.dialect}
        if self.blackboard is not None:
            args["blackboard"] = self.blackboard
        return args


def msg_to_submission(request, max_input_bytes: int) -> Submission:
    """A Submit request as a submission. Never raises for bad content: the dispatcher or the executor refuses it.

    * ``dialect``: empty means auto-detection; an unknown name is passed on (and refused).
    * ``run_id``: empty means the node makes one: the ``run_id`` of a Qwen3 submit envelope in
      ``graph_json`` when there is one, else a fresh ``uuid4().hex``.
    * Qwen3 with ``scene_revision >= 0``: ``graph_json`` (a bare graph, or model output text holding
      one) is wrapped as ``{"run_id", "scene_revision", "response": graph_json}``.
    * ``blackboard_json``: empty means no seeds; text that is not JSON, nests too deeply to read or is over
      ``max_input_bytes`` is the submission's ``refusal``; JSON that is not seeds is refused by the dispatcher
      (not an object) or the executor (each bad entry at ``/blackboard/<key>``).
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
    blackboard, refusal = _seeds_of(request.blackboard_json, max_input_bytes)
    return Submission(text=text, source=source, run_id=run_id, dialect=dialect, run_id_made=made,
                      blackboard=blackboard, refusal=refusal)


def _seeds_of(text: str, max_input_bytes: int) -> tuple[object, BadArgument | None]:
    """``blackboard_json`` read: ``(value, None)``, ``(None, None)`` when empty, or ``(None, why not)``."""
    if not text.strip():
        return None, None
    if len(text) > max_input_bytes:
        return None, TooLarge(f"blackboard_json is {len(text)} characters; at most {max_input_bytes} are read")
    try:
        return json.loads(text), None
    except RecursionError:
        return None, BadArgument("blackboard_json nests too deeply to read", code="bad_json")
    except ValueError as exc:
        return None, BadArgument(f"blackboard_json is not JSON: {exc}", code="bad_json")


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


def answer_to_submit_msg(status: int, answer: dict, response, run_id: str):
    """Fill a Submit response from ``submit_plan``'s answer (``run_id``: what was submitted). A refusal of the
    call itself (a bad argument, the node stopping) is not accepted, verdict ``busy`` when it may pass later,
    else ``invalid``, with the refusal as its one issue."""
    if status != OK:
        error = answer["error"]
        verdict = "busy" if status in RETRY_LATER else "invalid"
        answer = {"accepted": False, "verdict": verdict, "message": f"refused ({verdict}): {error['message']}",
                  "issues": [Issue(error["code"], "", error["message"]).as_dict()]}
    response.accepted = bool(answer.get("accepted"))
    response.run_id = answer.get("run_id") or run_id or ""
    response.plan_id = answer.get("plan_id") or ""
    response.verdict = str(answer.get("verdict") or "")
    response.message = one_line(answer.get("message") or "")
    response.issues_json = to_json(answer.get("issues") or [])
    response.warnings_json = to_json(answer.get("warnings") or [])
    response.scene_json = to_json(answer["scene"]) if answer.get("scene") else ""
    return response


# --- StopAt, Disarm, PlanControl, Cancel, GetStatus, ListPlans ------------------

def _given(**fields: str) -> dict:
    """The text fields that were filled in (stripped): an empty one asks for the operation's default."""
    return {name: value.strip() for name, value in fields.items() if value.strip()}


def msg_to_stop_at(request) -> tuple[str, dict]:
    """``stop_plan_at`` with the request's plan_id, op_id, when and action.

    The ids are passed as they came: the fields are text, and the executor takes an id given as text
    unchanged (an integer id is written as its decimal string), so ``"3"`` is op 3 on every door."""
    return "stop_plan_at", {"plan_id": request.plan_id, "op_id": request.op_id,
                            **_given(when=request.when, action=request.action)}


def stop_at_to_msg(status: int, answer: dict, response):
    response.success = status == OK
    response.message = message_of(status, answer)
    return response


def msg_to_disarm(request) -> tuple[str, dict]:
    """``disarm_stop_point`` with the request's plan_id, op_id and when."""
    return "disarm_stop_point", {"plan_id": request.plan_id, "op_id": request.op_id, **_given(when=request.when)}


def disarm_to_msg(status: int, answer: dict, response):
    """A Disarm response: ``disarmed`` is the answer's flag (false when nothing was armed there)."""
    response.success = status == OK
    response.disarmed = status == OK and bool(answer.get("disarmed"))
    response.message = message_of(status, answer)
    return response


PLAN_CONTROL_CHANGED = {"pause_plan": "paused", "resume_plan": "resumed"}  # the answer's flag of each; a step has none


def msg_to_plan_control(operation: str, request) -> tuple[str, dict]:
    """``operation`` (``pause_plan``, ``resume_plan`` or ``step_plan``: ``~/pause``, ``~/resume``, ``~/step``) of
    the request's plan."""
    return operation, {"plan_id": request.plan_id}


def plan_control_to_msg(operation: str, status: int, answer: dict, response):
    """A PlanControl response: ``changed`` is the answer's ``paused`` / ``resumed`` flag, always false for a step."""
    response.success = status == OK
    response.changed = status == OK and bool(answer.get(PLAN_CONTROL_CHANGED.get(operation, ""), False))
    response.message = message_of(status, answer)
    return response


def msg_to_cancel(request) -> tuple[str, dict]:
    """``cancel_plan`` of the request's plan, or ``cancel_all`` when plan_id is empty, waiting ``wait_ms``."""
    if request.plan_id:
        return "cancel_plan", {"plan_id": request.plan_id, "wait_ms": request.wait_ms}
    return "cancel_all", {"wait_ms": request.wait_ms}


def cancel_to_msg(status: int, answer: dict, response):
    response.success = status == OK
    response.finished = status == OK and bool(answer.get("finished"))
    response.message = message_of(status, answer)
    return response


def msg_to_status_request(request) -> tuple[str, dict]:
    """``get_plan_status`` of the request's plan, or with ``feedback`` ``get_plan_feedback`` (its outputs cut at
    ``feedback_chars``; 0 asks for the default)."""
    if not request.feedback:
        return "get_plan_status", {"plan_id": request.plan_id}
    chars = request.feedback_chars
    return "get_plan_feedback", {"plan_id": request.plan_id, **({"max_output_chars": chars} if chars else {})}


def status_to_msg(status: int, answer: dict, response):
    """A GetStatus response: the plan's live status, final record or feedback, or ``{"error", "code"}`` when
    refused (``found`` false)."""
    response.found = status == OK
    response.status_json = to_json(answer if status == OK else {"error": message_of(status, answer),
                                                                "code": answer["error"]["code"]})
    return response


def msg_to_plans_request(request) -> tuple[str, dict]:
    """``get_plans_snapshot`` (the plans with their ops, for the planner's next prompt) when ``ops``, else
    ``get_all_plans``."""
    return ("get_plans_snapshot" if request.ops else "get_all_plans"), {}


def plans_to_msg(status: int, answer: dict, response):
    """A ListPlans response: the answer, or no plans with ``error`` and ``code`` when refused."""
    response.plans_json = to_json(answer if status == OK else {"count": 0, "plans": [],
                                                               "error": message_of(status, answer),
                                                               "code": answer["error"]["code"]})
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
    response.success = status == OK
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
