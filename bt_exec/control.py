"""The one control surface: the operations every door offers, the dispatcher that runs them, and how a refusal
reads on every door.

Each ``Route`` of ``ROUTES`` names an executor operation, its HTTP method and path and the JSON Schema of its
arguments. ``ControlCalls.call(name, args, door)`` checks the arguments against that schema and calls the
executor; HTTP (``web/server.py``), MCP (``web/mcp_server.py``), ROS ``~/control`` (``ros/control_service.py``),
the fleet and the replay only translate their requests into such calls, so every door answers alike.

Refusals are the typed errors of ``bt_exec.errors`` (``NotFound``, ``BadArgument``, ``Conflict``, ``Busy``) and
this module's ``TooLarge``, ``Unreachable`` and ``InternalError``; ``error_answer`` is the one mapping from an
exception to a door's answer (status and ``{"error": {code, message}}``), ``error_from_answer`` its inverse for
clients that relay an answer. ``expected_wait_s`` is how long an operation may hold its answer on purpose: every
client adds it to its own timeout. ``ControlSurface`` is what a door serves: the live executor's ``ControlApi``, a
replay's and a fleet's.

This module imports no web server, no ROS and no command line (an import contract keeps it so).
"""
from __future__ import annotations

import collections
import contextlib
import functools
import json
import logging
import threading
from dataclasses import dataclass, field
from typing import Callable, Protocol

import jsonschema

from .compilers.limits import DEFAULT_LIMITS, INT64_MAX, Limits
from .errors import BadArgument, Busy, ControlError, InternalError, NotFound, TooLarge, Unreachable
from .events.shapes import PLAN_KEY
from .motion.cell_view import MAX_FRAME_SIDE, MIN_FRAME_SIDE
from .runtime.feedback import MAX_OUTPUT_CHARS, MIN_OUTPUT_CHARS, OUTPUT_CHARS
from .runtime.op_views import MAX_VIEW_CHARS, MAX_WAIT_FOR_PLAN_S, MIN_VIEW_CHARS, OP_STATES, OpView

log = logging.getLogger(__name__)

_GRAPH = {"description": "the plan: an RTDL envelope or tree, a Qwen3 step graph or submit envelope (a JSON object "
                         "or its JSON text), or BehaviorTree.CPP XML text",
          "type": ["object", "string"]}
_DIALECT = {"description": "input dialect (default: auto-detected)", "enum": ["auto", "rtdl", "qwen3", "btcpp"],
            "default": "auto"}
_BLACKBOARD = {"description": "entries the plan's run starts its blackboard with, key -> JSON value, which a "
                              "BehaviorTree.CPP plan's {key} ports read; each key a main-tree entry's name (no "
                              "braces, no @), the whole at most 1 MiB as JSON",
               "type": "object"}
# Ids are text; a non-negative integer is taken as its decimal string, as plans' meta ops take it.
_PLAN_ID = {"description": "plan id, as submit_plan or get_all_plans gave it (text, or a non-negative integer)",
            "type": ["string", "integer"], "minLength": 1, "maxLength": 64, "minimum": 0, "maximum": INT64_MAX}
_OP_ID = {"description": "an op id, as get_plan_status lists it (text, or a non-negative integer)",
          "type": ["string", "integer"], "minLength": 1, "maxLength": 256, "minimum": 0, "maximum": INT64_MAX}
# How long a cancel waits for the plans to end, and wait_for_plan for its plan, when the call does not say.
DEFAULT_WAIT_MS = 5000
DEFAULT_TIMEOUT_S = 30
_WAIT_MS = {"description": "how long to wait for the plan(s) to finish tearing down, in milliseconds (longer than "
                           f"{DEFAULT_LIMITS.max_wait_ms} is waited {DEFAULT_LIMITS.max_wait_ms}, and the answer's "
                           "message says so)",
            "type": "integer", "minimum": 0, "maximum": INT64_MAX, "default": DEFAULT_WAIT_MS}
_WHEN = {"description": "on_enter (before the op starts) or on_complete (when it ends)",
         "enum": ["on_enter", "on_complete"], "default": "on_complete"}
_ACTION = {"description": "what reaching the stop point does: cancel the plan, or pause it (a pause point)",
           "enum": ["cancel", "pause"], "default": "cancel"}
MAX_FILTER_OP_IDS = 1000
# Options narrowing the ops a status or a record lists (Executor.get_plan_status): an agent pays for each character.
_OP_VIEW = {
    "states": {"description": "list only the ops in these states", "type": "array", "uniqueItems": True,
               "items": {"enum": list(OP_STATES)}, "maxItems": len(OP_STATES)},
    "op_ids": {"description": f"list only these ops (at most {MAX_FILTER_OP_IDS})", "type": "array",
               "items": _OP_ID, "maxItems": MAX_FILTER_OP_IDS},
    "summary": {"description": "counts of ops by state, and only the running and failed ops listed",
                "type": "boolean", "default": False},
    "max_chars": {"description": "longest answer, in characters of compact JSON: the ops list is cut to fit, and a "
                                 "'truncated' entry says what to ask for next", "type": "integer",
                  "minimum": MIN_VIEW_CHARS, "maximum": MAX_VIEW_CHARS},
}
_FRAME_SIDE = {"description": f"a rendered frame's side in pixels ({MIN_FRAME_SIDE} to {MAX_FRAME_SIDE}); with "
                              "both sides given the answer carries a frame where frames are available",
               "type": "integer", "minimum": MIN_FRAME_SIDE, "maximum": MAX_FRAME_SIDE}
_TIMEOUT_S = {"description": f"longest wait, in seconds (longer than {MAX_WAIT_FOR_PLAN_S:g} is waited "
                             f"{MAX_WAIT_FOR_PLAN_S:g})", "type": "number", "minimum": 0, "maximum": 1e9,
              "default": DEFAULT_TIMEOUT_S}


# The status each type of refusal is answered with, most specific first: HTTP's, and ROS ``~/control``'s ``status``.
# MCP answers every one as a tool error, ROS ``success`` is false for all.
STATUS_OF_TYPE: tuple[tuple[type[ControlError], int], ...] = (
    (TooLarge, 413), (BadArgument, 400), (NotFound, 404), (Unreachable, 504), (Busy, 503), (InternalError, 500),
    (ControlError, 409))
_TYPE_OF_STATUS = {status: kind for kind, status in reversed(STATUS_OF_TYPE)}


def internal_message(exc: BaseException) -> str:
    """What a client is told of a failure that is a bug: its type only (the log has the rest)."""
    return f"internal error: {type(exc).__name__}"


def error_answer(exc: BaseException, where: str = "control") -> tuple[int, dict]:
    """``(status, {"error": {"code", "message"}})``, what every door answers for ``exc``: a ControlError's status
    follows from its type (``STATUS_OF_TYPE``), with its own code and message; any other exception is a bug,
    logged with its traceback (``where``: what failed, for the log) and answered 500 ``internal``."""
    if isinstance(exc, ControlError):
        status = next(status for kind, status in STATUS_OF_TYPE if isinstance(exc, kind))
        return status, {"error": {"code": exc.code, "message": exc.message}}
    log.error("%s failed", where, exc_info=exc)
    return 500, {"error": {"code": InternalError.code, "message": internal_message(exc)}}


def error_from_answer(status: int, answer: object, fallback: str) -> ControlError:
    """The typed error a refusal stands for, as ``error_answer`` made it (``status`` and ``{"error": {code,
    message}}``), for a client that relays it: then it reads the same on every door. A status no type is answered
    with is the caller's fault below 500 (BadArgument), else an InternalError; ``fallback`` is the message when the
    answer has none."""
    error = answer.get("error") if isinstance(answer, dict) else None
    error = error if isinstance(error, dict) else {}
    kind = _TYPE_OF_STATUS.get(status) or (BadArgument if 400 <= status < 500 else InternalError)
    code = error.get("code")
    return kind(str(error.get("message", fallback)), code=str(code) if code is not None else None)


def expected_wait_s(name: str, args: object, limits: Limits = DEFAULT_LIMITS) -> float:
    """How long operation ``name`` called with ``args`` may hold its answer on purpose, in seconds, as the executor
    caps the wait it is asked for (``limits.max_wait_ms`` for a cancel, ``MAX_WAIT_FOR_PLAN_S`` for
    ``wait_for_plan``); 0 for every other operation, and for a wait the executor refuses. What a client adds to
    its own timeout (``limits``: the executor's; a remote one's are taken to be the defaults)."""
    args = args if isinstance(args, dict) else {}
    if name == "wait_for_plan":
        asked = args.get("timeout_s", DEFAULT_TIMEOUT_S)
        return min(float(asked), MAX_WAIT_FOR_PLAN_S) if type(asked) in (int, float) and asked > 0 else 0.0
    if name in ("cancel_plan", "cancel_all"):
        asked = args.get("wait_ms", DEFAULT_WAIT_MS)
        return min(asked, limits.max_wait_ms) / 1000.0 if type(asked) is int and asked > 0 else 0.0
    return 0.0


@dataclass(frozen=True)
class Route:
    """One operation. ``path`` may hold ``{plan_id}``; the other arguments come from the JSON body
    (POST) or the query string (GET). ``tool``: also offered as an MCP tool. ``says_door``: the call is told the
    door it came over (``source``); ``holds_start``: the call takes ``ControlCalls.hold_start_s``."""

    name: str
    method: str
    path: str
    summary: str
    call: Callable[..., dict]
    properties: dict = field(default_factory=dict)
    required: tuple[str, ...] = ()
    tool: bool = True
    says_door: bool = False
    holds_start: bool = False

    @property
    def schema(self) -> dict:
        """The JSON Schema of the arguments: an object of ``properties``, ``required`` ones, nothing else."""
        return {"type": "object", "properties": self.properties, "required": list(self.required),
                "additionalProperties": False}

    @property
    def path_params(self) -> tuple[str, ...]:
        """The arguments ``path`` holds (``{plan_id}``), in the order of ``properties``."""
        return tuple(name for name in self.properties if "{" + name + "}" in self.path)

    @functools.cached_property
    def validator(self) -> jsonschema.Draft202012Validator:
        """The checker of ``schema``, made on first use."""
        return jsonschema.Draft202012Validator(self.schema)

    def checked(self, args: object) -> dict:
        """``args`` once they are a JSON object this route's schema takes; else BadArgument naming what is wrong
        (at most five problems)."""
        return checked_args(self, args)


ROUTES: tuple[Route, ...] = (
    Route("get_all_plans", "GET", "/api/plans",
          "List the plans in flight: id, description, op count, whether cancelling or paused, armed stop points.",
          lambda ex: ex.get_all_plans()),
    Route("get_plan_status", "GET", "/api/plans/{plan_id}/status",
          "Live state of every op of an in-flight plan (op ids, kinds, descriptions, states, stop points, each "
          "call's cap, args and the provider its plan names). For a "
          "large plan ask for summary=true (counts by state, running and failed ops), states or op_ids, and "
          "bound the answer with max_chars.",
          lambda ex, plan_id, **view: ex.get_plan_status(plan_id, **view),
          {"plan_id": _PLAN_ID, **_OP_VIEW,
           "with_args": {"description": "list each call's cap, provider and args (args past 4 KiB as a marker; "
                                        "get_op has them whole)", "type": "boolean", "default": True}},
          ("plan_id",)),
    Route("get_op", "GET", "/api/plans/{plan_id}/ops/{op_id}",
          "One op of a plan in flight or finished, whole: its state, cap, args (never cut, where status and tree "
          "views cut args past 4 KiB), result, detail and times.",
          lambda ex, plan_id, op_id: ex.get_op(plan_id, op_id), {"plan_id": _PLAN_ID, "op_id": _OP_ID},
          ("plan_id", "op_id")),
    Route("get_plan_result", "GET", "/api/plans/{plan_id}/result",
          "The final record of a finished plan: outcome, each op's state, result and timings. Narrow it as "
          "get_plan_status (summary, states, op_ids, max_chars).",
          lambda ex, plan_id, **view: ex.get_plan_result(plan_id, **view), {"plan_id": _PLAN_ID, **_OP_VIEW},
          ("plan_id",)),
    Route("wait_for_plan", "GET", "/api/plans/{plan_id}/wait",
          f"Wait until a plan finished (at most timeout_s, up to {MAX_WAIT_FOR_PLAN_S:g} s) and answer its final "
          "record, narrowed as get_plan_result; or {plan_id, finished: false} when it is still running at the "
          "timeout (call again). Use it instead of polling.",
          lambda ex, plan_id, timeout_s=DEFAULT_TIMEOUT_S, **view: ex.wait_for_plan(plan_id, timeout_s, **view),
          {"plan_id": _PLAN_ID, "timeout_s": _TIMEOUT_S, **_OP_VIEW}, ("plan_id",)),
    Route("get_plan_feedback", "GET", "/api/plans/{plan_id}/feedback",
          "After a run (or during one), what to tell the planner: each finished call's {op_id, cap, success, output, "
          "error} in the order they finished, outputs over max_output_chars cut to a marker {truncated, bytes, "
          "preview}, plus the plan's outcome. Use it instead of get_plan_result to feed a run back to a model.",
          lambda ex, plan_id, max_output_chars=OUTPUT_CHARS: ex.get_plan_feedback(plan_id, max_output_chars),
          {"plan_id": _PLAN_ID,
           "max_output_chars": {"description": "longest one output's JSON is kept whole, in characters",
                                "type": "integer", "minimum": MIN_OUTPUT_CHARS, "maximum": MAX_OUTPUT_CHARS,
                                "default": OUTPUT_CHARS}},
          ("plan_id",)),
    Route("get_plans_snapshot", "GET", "/api/snapshot",
          "The plans in flight with every op's id, kind, cap and state (and armed stop points), compact: put it in "
          "the next prompt before planning again, to stop or cancel by op id.",
          lambda ex: ex.get_plans_snapshot()),
    Route("get_plan_tree", "GET", "/api/plans/{plan_id}/tree",
          "A plan's ops with their children, states, stop points and results, in flight or finished.",
          lambda ex, plan_id: ex.get_plan_tree(plan_id), {"plan_id": _PLAN_ID}, ("plan_id",), tool=False),
    Route("get_finished_plans", "GET", "/api/finished",
          "The newest finished plans still kept, newest first: id, description, outcome, times.",
          lambda ex, limit=50: ex.get_finished_plans(limit),
          {"limit": {"description": "most plans to list", "type": "integer", "minimum": 0, "maximum": 1000,
                     "default": 50}}, tool=False),
    Route("get_cell_view", "GET", "/api/cell",
          "The simulated cell the plans move (--backend physics): each link's position (link_0 to link_7, the "
          "flange, the TCP), the current skill's target, joints and joint speeds, the named places, and whether "
          "rendered frames are available; with frame_width and frame_height, one frame (PNG, base64). On a "
          "backend that simulates none: cell false and the reason.",
          lambda ex, frame_width=None, frame_height=None: ex.get_cell_view(frame_width, frame_height),
          {"frame_width": _FRAME_SIDE, "frame_height": _FRAME_SIDE}, tool=False),
    Route("validate_plan", "POST", "/api/validate",
          "Check a plan as submit_plan would, running nothing; every issue names where it is wrong "
          "(a JSON pointer, node index or BT XML element path in path, step ids in steps).",
          lambda ex, graph, dialect="auto": ex.validate_plan(graph, dialect=dialect),
          {"graph": _GRAPH, "dialect": _DIALECT}, ("graph",)),
    Route("submit_plan", "POST", "/api/plans",
          "Validate and start a plan. Refused plans run nothing and come back with their issues. The same "
          "run_id again returns the first answer and runs nothing again.",
          lambda ex, graph, dialect="auto", run_id=None, blackboard=None, **held:
              ex.submit(graph, run_id=run_id, dialect=dialect, blackboard=blackboard, **held),
          {"graph": _GRAPH, "dialect": _DIALECT,
           "run_id": {"description": "idempotency key for this submission", "type": "string", "minLength": 1,
                      "maxLength": 256},
           "blackboard": _BLACKBOARD},
          ("graph",), holds_start=True),
    Route("stop_plan_at", "POST", "/api/plans/{plan_id}/stop_at",
          "Arm a stop point: when execution reaches op_id (on_enter: before it starts; on_complete: when it "
          "ends) the whole plan is cancelled, or, with action pause, paused (a pause point: it fires once, and "
          "resume_plan or step_plan goes on from there). The ticking never blocks.",
          lambda ex, plan_id, op_id, when="on_complete", action="cancel", source="http":
              ex.stop_plan_at(plan_id, op_id, when, source, action),
          {"plan_id": _PLAN_ID, "op_id": _OP_ID, "when": _WHEN, "action": _ACTION}, ("plan_id", "op_id"),
          says_door=True),
    Route("disarm_stop_point", "POST", "/api/plans/{plan_id}/disarm",
          "Disarm a stop point or pause point armed with stop_plan_at (same op_id and when): the plan goes on "
          "through that op. Answers disarmed: false when none was armed there.",
          lambda ex, plan_id, op_id, when="on_complete", source="http":
              ex.disarm_stop_point(plan_id, op_id, when, source),
          {"plan_id": _PLAN_ID, "op_id": _OP_ID, "when": _WHEN}, ("plan_id", "op_id"), says_door=True),
    Route("pause_plan", "POST", "/api/plans/{plan_id}/pause",
          "Pause a plan to look before it goes on: no op starts until resume_plan (the next op waits, pending "
          "with held: true); ops already running go on, or are paused too where the robot supports it (the "
          "message names them). Use it to hold a plan before a risky op; cancel_plan still ends it.",
          lambda ex, plan_id, source="http": ex.pause_plan(plan_id, source),
          {"plan_id": _PLAN_ID}, ("plan_id",), says_door=True),
    Route("resume_plan", "POST", "/api/plans/{plan_id}/resume",
          "Resume a paused plan from exactly where it held (after pause_plan or a pause point); after step_plan, "
          "drop the pending step so the plan runs on freely. Answers resumed: false when it was neither paused "
          "nor stepping (nothing changed).",
          lambda ex, plan_id, source="http": ex.resume_plan(plan_id, source),
          {"plan_id": _PLAN_ID}, ("plan_id",), says_door=True),
    Route("step_plan", "POST", "/api/plans/{plan_id}/step",
          "Single step: resume a paused plan until its next op starts, then pause again, to walk a plan op by op "
          "and check each before the next (on a running plan: pause behind the next op it starts).",
          lambda ex, plan_id, source="http": ex.step_plan(plan_id, source),
          {"plan_id": _PLAN_ID}, ("plan_id",), says_door=True),
    Route("cancel_plan", "POST", "/api/plans/{plan_id}/cancel",
          "Cancel one plan; answers once it finished tearing down or wait_ms passed, saying which.",
          lambda ex, plan_id, wait_ms=DEFAULT_WAIT_MS: ex.cancel_plan(plan_id, wait_ms=wait_ms),
          {"plan_id": _PLAN_ID, "wait_ms": _WAIT_MS}, ("plan_id",)),
    Route("cancel_all", "POST", "/api/cancel_all",
          "Cancel every plan in flight.",
          lambda ex, wait_ms=DEFAULT_WAIT_MS: ex.cancel_all(wait_ms=wait_ms), {"wait_ms": _WAIT_MS}),
)

ROUTES_BY_NAME = {route.name: route for route in ROUTES}
DOORS = ("http", "mcp", "ros", "robonix")


def route_named(routes: dict[str, Route], name: str) -> Route:
    """The route of operation ``name`` among ``routes``; NotFound (``unknown_operation``) naming the known ones."""
    route = routes.get(name)
    if route is None:
        raise NotFound(f"no operation {name!r}; known: {', '.join(routes)}", code="unknown_operation")
    return route


def parsed_json(text: str | bytes, where: str) -> object:
    """The arguments a door received as JSON text (``where`` names them in a refusal: "the request body",
    "cancel_plan: args_json"), parsed; BadArgument ``bad_json`` when they are not JSON or nest too deeply to
    read. Whether they are an object the route takes is ``checked_args``'s to say."""
    try:
        return json.loads(text)
    except RecursionError:
        raise BadArgument(f"{where} nests too deeply to read; send the plan as JSON text (graph as a string)",
                          code="bad_json") from None
    except (UnicodeDecodeError, ValueError) as exc:
        raise BadArgument(f"{where} is not JSON: {exc}", code="bad_json") from None


def cut_to_fit(answer: dict, max_chars: int) -> dict:
    """A status or a record (``ops`` each with ``op_id`` and ``state``) with as many of its first ops as fit in
    ``max_chars`` of compact JSON, and a ``truncated`` entry saying what to ask for next, as ``max_chars`` cuts
    an answer on every door."""
    return OpView(max_chars=max_chars).apply(answer)


class ControlSurface(Protocol):
    """What a door serves: the live executor's ``ControlApi``, a replay's ``ReplayApi``, a fleet's ``FleetApi``.

    ``routes``: the operations offered (HTTP paths, MCP tools); ``call``: one operation, its answer or a typed
    ControlError; ``listen``: a new bounded stream of events (Busy past the streams allowed);
    ``recent_events``: the latest events, for a listener to start from; ``close``: end every stream.
    """

    routes: tuple[Route, ...]

    def call(self, name: str, args: dict | None = None, door: str = "http") -> dict:
        """Run operation ``name`` with ``args`` for ``door``."""

    def listen(self) -> EventStream:
        """A new listener's stream of events."""

    def recent_events(self) -> list[dict]:
        """The latest events, oldest first."""

    def close(self) -> None:
        """End every open stream."""


class EventStream:
    """One listener's queue of executor events, bounded: when it is full, events are dropped and counted.

    ``get`` returns the next event, ``{"event": "dropped", "count": N}`` once
    after a loss (the listener should then re-read the state), or None on timeout.
    """

    def __init__(self, capacity: int, detach: Callable[["EventStream"], None]):
        self._events: collections.deque[dict] = collections.deque()
        self._capacity = capacity
        self._ready = threading.Condition()
        self._dropped = 0
        self._detach = detach
        self._wake: Callable[[], None] | None = None
        self.closed = False

    def on_ready(self, wake: Callable[[], None]) -> None:
        """Call ``wake`` (from the ticking thread: it must not block) whenever events arrive or the stream closes."""
        self._wake = wake

    def put_all(self, events: list[dict]) -> None:
        """Queue a tick's events; those past ``capacity`` are dropped and counted."""
        with self._ready:
            room = max(self._capacity - len(self._events), 0)
            if len(events) > room:
                self._dropped += len(events) - room
                events = events[:room]
            if events:
                self._events.extend(events)
                self._ready.notify()
            wake = self._wake if events or self._dropped else None
        if wake is not None:
            wake()

    def get(self, timeout: float) -> dict | None:
        """The next event, the ``dropped`` marker after a loss, or None when ``timeout`` passed first."""
        with self._ready:
            if not self._events and not self._dropped and not self.closed:
                self._ready.wait(timeout)
            if self._dropped and not self._events:
                dropped, self._dropped = self._dropped, 0
                return {"event": "dropped", "count": dropped}
            return self._events.popleft() if self._events else None

    def close(self) -> None:
        """End the stream (what is queued can still be read) and free its place among the fanout's."""
        with self._ready:
            self.closed = True
            self._ready.notify_all()
            wake = self._wake
        if wake is not None:
            wake()
        self._detach(self)


MAX_WAITS = 8  # wait_for_plan calls waiting at once, by default: the door's other requests keep its workers


class WaitSlots:
    """How many ``wait_for_plan`` calls may wait at once (each holds a worker thread of the door): one more is
    refused at once (Busy ``too_many_waits``), so waits never take every worker from the door's other requests."""

    def __init__(self, max_waits: int = MAX_WAITS):
        self.max_waits = max_waits
        self._slots = threading.BoundedSemaphore(max_waits)

    @contextlib.contextmanager
    def held(self):
        """Hold a slot for the block; Busy (``too_many_waits``) at once when none is free."""
        if not self._slots.acquire(blocking=False):
            raise Busy(f"{self.max_waits} wait_for_plan calls are waiting already; try again shortly, or poll "
                       "get_plan_status with summary=true", code="too_many_waits")
        try:
            yield
        finally:
            self._slots.release()


class ControlCalls:
    """The routes bound to one executor: ``call(name, args, door)``, the one way every door runs an operation.

    ``max_waits``: how many ``wait_for_plan`` calls may wait at once (``WaitSlots``). ``hold_start_s``: a plan
    submitted through these calls is admitted with its start held that long (``Executor.submit``'s
    ``hold_start_s``, 0 to 1 s), until the door calls ``Executor.release_start`` once it has answered: for a door
    whose answer or first event must go out before the plan's first tick.
    """

    routes = ROUTES

    def __init__(self, executor, max_waits: int = MAX_WAITS, *, hold_start_s: float = 0.0):
        self.executor = executor
        self.max_waits = max_waits
        self.hold_start_s = hold_start_s
        self._waits = WaitSlots(max_waits)

    def call(self, name: str, args: dict | None = None, door: str = "http") -> dict:
        """Run operation ``name`` with ``args``: its answer, or the typed ControlError that refuses it (NotFound
        for an unknown name, BadArgument for bad arguments, whatever the executor raises).
        ``door``: "http", "mcp", "ros" or "robonix", what the executor's events say a stop point was armed or disarmed
        over."""
        route = route_named(ROUTES_BY_NAME, name)
        args = route.checked(args)
        if route.says_door:
            args = {**args, "source": door if door in DOORS else "http"}
        if route.holds_start and self.hold_start_s:
            args = {**args, "hold_start_s": self.hold_start_s}
        with self._waits.held() if name == "wait_for_plan" else contextlib.nullcontext():
            return route.call(self.executor, **args)


class ControlApi(ControlCalls):
    """The routes bound to one executor, and its events fanned out to listeners: the live ``ControlSurface``.

    ``recent``, ``stream_capacity``, ``max_streams``: the ``EventFanout``'s (``events``); ``max_waits``: as
    ``ControlCalls``.
    """

    def __init__(self, executor, recent: int = 500, stream_capacity: int = 10_000, max_streams: int = 32,
                 max_waits: int = MAX_WAITS):
        super().__init__(executor, max_waits)
        self.events = EventFanout(recent, stream_capacity, max_streams)
        self._unsubscribe = executor.subscribe_batches(self._on_events)

    @property
    def max_streams(self) -> int:
        """How many event streams may be open at once."""
        return self.events.max_streams

    def recent_events(self) -> list[dict]:
        """The executor's latest events (the last ``recent``), oldest first."""
        return self.events.recent_events()

    def listen(self) -> EventStream:
        """A new listener's stream of the executor's events (Busy past ``max_streams``)."""
        return self.events.listen()

    def close(self) -> None:
        """Stop listening to the executor and end every open stream."""
        self._unsubscribe()
        self.events.close()

    def _on_events(self, events: list[dict]) -> None:  # in the ticking thread, once a tick: never blocks
        events = [without_plan_shape(event) if event["event"] == "plan_started" else event for event in events]
        self.events.remember(events)
        self.events.send(events)


class EventFanout:
    """Events handed to each listener's bounded stream, the last ``recent`` kept for new listeners to read.

    ``stream_capacity``: how many events one slow listener may fall behind before losing some;
    ``max_streams``: how many listeners at once (each holds a connection and a thread).
    """

    def __init__(self, recent: int = 500, stream_capacity: int = 10_000, max_streams: int = 32):
        self.max_streams = max_streams
        self._recent: collections.deque[dict] = collections.deque(maxlen=recent)
        self._streams: tuple[EventStream, ...] = ()
        self._stream_capacity = stream_capacity
        self._lock = threading.Lock()

    @property
    def stream_count(self) -> int:
        """How many streams are open."""
        return len(self._streams)

    def recent_events(self) -> list[dict]:
        """The events kept for new listeners, oldest first."""
        with self._lock:
            return list(self._recent)

    def listen(self) -> EventStream:
        """A new listener's stream; Busy (``too_many_streams``) when ``max_streams`` are open already."""
        stream = EventStream(self._stream_capacity, self._detach)
        with self._lock:
            if len(self._streams) >= self.max_streams:
                raise Busy(f"{self.max_streams} event streams are open already; close one, or poll /api/plans",
                           code="too_many_streams")
            self._streams = self._streams + (stream,)
        return stream

    def remember(self, events: list[dict]) -> None:
        """Keep ``events`` for listeners still to come (the newest ``recent``)."""
        with self._lock:
            self._recent.extend(events)

    def forget(self) -> None:
        """Drop the events kept for new listeners (a replay seeking back)."""
        with self._lock:
            self._recent.clear()

    def send(self, events: list[dict]) -> None:
        """Hand ``events`` to every open stream; never blocks (a full stream drops and counts)."""
        for stream in self._streams:
            stream.put_all(events)

    def close(self) -> None:
        """End every open stream."""
        for stream in self._streams:
            stream.close()

    def _detach(self, stream: EventStream) -> None:
        with self._lock:
            self._streams = tuple(s for s in self._streams if s is not stream)


def checked_args(route: Route, args: object) -> dict:
    """``args`` of a call of ``route`` once they are a JSON object its schema takes; else BadArgument naming what
    is wrong (at most five problems)."""
    name = route.name
    args = {} if args is None else args
    if not isinstance(args, dict):
        raise BadArgument(f"{name}: arguments must be a JSON object, got {type(args).__name__}")
    _refuse_fractions(name, route, args)
    problems = sorted(route.validator.iter_errors(args), key=lambda e: list(e.absolute_path))
    if problems:
        raise BadArgument(f"{name}: " + "; ".join(_describe(p) for p in problems[:5]))
    return args


def without_plan_shape(event: dict) -> dict:
    """A plan_started event as streams send it: without the plan's shape, which the tree view serves."""
    return {key: value for key, value in event.items() if key != PLAN_KEY}


def _refuse_fractions(name: str, route: Route, args: dict) -> None:
    """JSON Schema counts 1.0 as an integer; an integer field given a float is refused all the same, by its name,
    so no float (nor an infinity) reaches the executor's arithmetic."""
    for field_name, schema in route.properties.items():
        value = args.get(field_name)
        if "integer" in _types(schema) and isinstance(value, float):
            whole = f"a whole number ({schema.get('minimum', 0)} to {schema.get('maximum')})"
            raise BadArgument(f"{name}: {field_name}: must be "
                              f"{'text or ' + whole if 'string' in _types(schema) else whole}, not the float {value!r}")
        if _types(schema.get("items", {})) == ["string", "integer"] and isinstance(value, list) \
                and any(isinstance(item, float) for item in value):
            raise BadArgument(f"{name}: {field_name}: ids are text or whole numbers, not floats")


def _types(schema: dict) -> list[str]:
    kind = schema.get("type", [])
    return [kind] if isinstance(kind, str) else kind


def _describe(error: jsonschema.ValidationError) -> str:
    where = "/".join(str(part) for part in error.absolute_path)
    if error.validator == "additionalProperties":
        message = error.message.replace("Additional properties are not allowed", "unknown argument(s)")
    elif error.validator == "type":  # in JSON's words (true, null), not Python's
        shown = json.dumps(error.instance, default=str)
        shown = shown if len(shown) <= 80 else shown[:80] + "…"
        message = f"{where or 'arguments'}: must be {' or '.join(_types(error.schema))}, got {shown}"
    else:
        message = f"{where or 'arguments'}: {error.message}"
    # Messages quote the value, which may be a whole plan.
    return message if len(message) <= 300 else message[:300] + "…"
