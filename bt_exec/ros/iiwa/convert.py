"""Pure conversions of the iiwa cell's contract: its JSON texts and messages to bt_exec's API, and back.

No node, no I/O, no clock, no ROS import: each ``msg_to_x`` / ``text_to_x`` reads what came in
(raising the project's own errors, naming where it is wrong), each ``x_to_msg`` fills the response
or message it is given and returns it. JSON put in messages is ASCII, so text from a graph can
never make a message unencodable. The shapes are in docs/iiwa.md.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from ...compilers import Scene
from ...errors import BadArgument, ConfigError, Issue, PlanError
from ...events import finite_json

MAX_RUN_ID_CHARS = 256  # run ids are remembered per node: each stays small
RUNNING_STATES = ("running", "paused")


def to_json(value: object) -> str:
    return finite_json.dumps(value, default=str, ensure_ascii=True)


def _json_object(text: str, max_bytes: int, what: str) -> dict:
    """``text`` as a JSON object; ValueError saying what is wrong."""
    if len(text) > max_bytes or len(text.encode("utf-8", "surrogatepass")) > max_bytes:
        raise ValueError(f"{what} is larger than {max_bytes} bytes (max_input_bytes)")
    try:
        doc = json.loads(text)
    except RecursionError:
        raise ValueError(f"{what} is nested too deeply") from None
    except ValueError as exc:
        raise ValueError(f"{what} is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ValueError(f"{what} must be a JSON object, got {type(doc).__name__}")
    return doc


def _run_id_problem(run_id: object) -> str | None:
    if not isinstance(run_id, str) or not run_id.strip():
        return f"run_id must be a non-empty string, got {json.dumps(run_id, default=str)[:80]}"
    if len(run_id) > MAX_RUN_ID_CHARS:
        return f"run_id must be at most {MAX_RUN_ID_CHARS} characters, got {len(run_id)}"
    return None


# --- ~/submit and ~/cancel (webots_ros2_msgs/srv/SetString) ---------------------------

@dataclass(frozen=True)
class SubmitValue:
    """A ``~/submit`` value: ``text`` is the envelope exactly as submitted (what ``~/plan`` publishes)."""

    run_id: str
    scene_revision: int
    text: str


def msg_to_submit(request, max_input_bytes: int) -> SubmitValue:
    """The envelope ``{run_id, scene_revision, response}`` of a submit request; PlanError naming the field.

    Only what the node needs before the executor is checked here (the run id it answers for, the revision);
    the graph itself is the executor's to check.
    """
    text = request.value
    try:
        doc = _json_object(text, max_input_bytes, "the submit value")
    except ValueError as exc:
        raise PlanError([Issue("bad_envelope", "", str(exc))]) from None
    issues = []
    if problem := _run_id_problem(doc.get("run_id")):
        issues.append(Issue("bad_run_id", "/run_id", problem))
    revision = doc.get("scene_revision")
    if type(revision) is not int or revision < 0:
        issues.append(Issue("revision_missing" if revision is None else "type", "/scene_revision",
                            "scene_revision must be the integer revision (>= 0) of the scene the graph was planned "
                            f"on, got {json.dumps(revision, default=str)[:80]}"))
    if "response" not in doc:
        issues.append(Issue("missing", "/response", "response (the model's graph, an object or its JSON text) "
                                                    "is missing"))
    if issues:
        raise PlanError(issues)
    return SubmitValue(doc["run_id"], revision, text)


def msg_to_run_id(request) -> str:
    """A ``~/cancel`` request's run id; BadArgument when it is not one."""
    run_id = request.value.strip()
    if problem := _run_id_problem(run_id):
        raise BadArgument(f"cancel: value: {problem}")
    return run_id


def success_to_msg(success: bool, response):
    response.success = bool(success)
    return response


# --- the scene (/iiwa_scene_context/scene_json, get_scene) -----------------------------

@dataclass(frozen=True)
class SceneEnvelope:
    experiment_id: object
    state_version: object
    timestamp: object
    scene: Scene

    @property
    def revision(self) -> int:
        return self.scene.revision


def text_to_scene_envelope(text: str, max_input_bytes: int, experiment_id: int = 0) -> SceneEnvelope:
    """The envelope ``{experiment_id, state_version, scene_revision, timestamp, scene_json}``; ConfigError
    saying what is wrong. ``scene_json`` is the scene (an object, or JSON text of one); its revision is the
    envelope's. ``experiment_id`` > 0: an envelope of another experiment is refused."""
    try:
        doc = _json_object(text, max_input_bytes, "the scene envelope")
        revision = doc.get("scene_revision")
        if type(revision) is not int or revision < 0:
            raise ValueError(f"scene_revision must be an integer >= 0, got {json.dumps(revision, default=str)[:80]}")
        if experiment_id and doc.get("experiment_id") != experiment_id:
            raise ValueError(f"experiment_id is {json.dumps(doc.get('experiment_id'), default=str)[:80]}, this "
                             f"node takes experiment {experiment_id}")
        scene = doc.get("scene_json")
        if isinstance(scene, str):
            scene = _json_object(scene, max_input_bytes, "scene_json")
        if not isinstance(scene, dict):
            raise ValueError("scene_json must be the scene, an object or JSON text of one, got "
                             f"{type(scene).__name__}")
        inner = scene.get("scene_revision", revision)
        if inner != revision:
            raise ValueError(f"scene_json says scene_revision {json.dumps(inner, default=str)[:40]}, its envelope "
                             f"{revision}")
    except ValueError as exc:
        raise ConfigError(f"scene envelope: {exc}") from None
    try:
        taken = Scene.from_dict({**scene, "scene_revision": revision}, source="scene_json")
    except ConfigError as exc:
        raise ConfigError(f"scene envelope: {exc}") from None
    return SceneEnvelope(doc.get("experiment_id"), doc.get("state_version"), doc.get("timestamp"), taken)


def trigger_to_scene_text(response) -> str | None:
    """The envelope text of a ``get_scene`` answer, or None when the cell said it has no scene now."""
    return response.message if response.success else None


# --- ~/get_status (iiwa_msgs/srv/GetRunStatus) ---------------------------------------

def run_status(run_id: str, answer: dict, live: dict | None = None, result: dict | None = None) -> dict:
    """A run's status: its submit answer, then its live status (``get_plan_status``) or final record
    (``get_plan_result``) when it was accepted."""
    status = {"run_id": run_id, "accepted": bool(answer.get("accepted")), "verdict": answer.get("verdict"),
              "message": answer.get("message"), "plan_id": answer.get("plan_id")}
    if not status["accepted"]:
        status["issues"] = answer.get("issues", [])
        return status
    source = live if live is not None else (result or {})
    state = source.get("state") or {}
    current = next((op["op_id"] for op in source.get("ops", []) if op.get("state") in RUNNING_STATES), None)
    status.update({"running": live is not None, "current_step": current, "path": source.get("path", []),
                   "terminal": source.get("terminal"), "terminal_reason": source.get("terminal_reason"),
                   "outcome": source.get("outcome"), "holding": state.get("holding"),
                   "patron": state.get("patron", []), "state": state})
    return status


def run_status_to_msg(status: dict | None, response):
    """``found`` and ``status_json``; for an unknown run id, ``found=false`` and ``{"error"}``."""
    response.found = status is not None and "error" not in status
    response.status_json = to_json(status if status is not None else {"error": "unknown run_id"})
    return response


def msg_to_status_run_id(request) -> str:
    return request.run_id.strip()


# --- ~/plan and ~/status (std_msgs/String) -------------------------------------------

def text_to_msg(text: str, msg):
    msg.data = text
    return msg


def status_to_msg(message: dict, msg):
    msg.data = to_json(message)
    return msg


def event_with_run_id(event: dict, run_id: str | None) -> dict:
    """An executor event as a ``~/status`` message: the event with the run id of its plan."""
    return {**event, "run_id": event.get("run_id") or run_id}
