"""What a replay takes from a journal, checked as it is read: every field the replay, its views and its printed
lines read, by type and range; the ids that must exist; and the limits a live executor keeps.

A journal is a file anyone may have written, so a replay is a door: a value the executor never writes (an op's
``children`` that is a number, a time 1e12 s ahead, a plan of 500,000 ops) is refused by its line, before it
reaches the rebuilt plans, a clock's arithmetic or a printed line. Fields a replay does not read are not
checked; event kinds it does not know are passed on as they are.
"""
from __future__ import annotations

import math

from ..compilers.ir import STOP_WHENS
from ..compilers.limits import DEFAULT_LIMITS, INT64_MAX
from .shapes import OP_STATES, STOP_ACTIONS

# The latest time a journal may record: the end of year 9999 UTC, the last a calendar shows. Later ones are no
# time.time() a run could have written.
MAX_TIME_S = 253_402_300_799.0
# A plan's shape in a journal: its input's text, escaped as the journal writes it (ASCII: up to twice the
# input's bytes), and each op's id, kind and children beside it.
_OP_SHAPE_BYTES = 128
MAX_EVENT_LINE_BYTES = 2 * DEFAULT_LIMITS.max_input_bytes + DEFAULT_LIMITS.max_ops * _OP_SHAPE_BYTES
# Plans in flight at once, as an executor's default max_plans admits them.
MAX_PLANS_IN_FLIGHT = 64
# Journal text the plans in flight may hold in all (their shapes, each op's latest state and result, a step
# graph's steps), as an executor's default keep_finished_bytes bounds the records it keeps.
MAX_KEPT_BYTES = 64 * 1024 * 1024
# Text as a live plan may hold it (ids included: a step graph's step ids are its input's text).
MAX_TEXT_CHARS = DEFAULT_LIMITS.max_string_chars
STOP_POINT_STATES = ("armed", "disarmed", "fired")
# Events only a door sends its listeners, never an executor: streamed from a journal they would tell the console
# that events were lost, that the server closed, or where the replay is.
DOOR_EVENTS = frozenset(("dropped", "server_closing", "replay_clock", "replay_seek"))


class JournalValueError(ValueError):
    """A value of a journal's event that a replay cannot take: the message says which and why."""


def _shown(value: object) -> str:
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:40] + "…")
    if isinstance(value, (dict, list)):
        return f"a JSON {'object' if isinstance(value, dict) else 'array'}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    text = repr(value)
    return text if len(text) <= 40 else text[:40] + "…"


def _text(value: object) -> str | None:
    if isinstance(value, str) and len(value) <= MAX_TEXT_CHARS:
        return None
    return f"text of at most {MAX_TEXT_CHARS} characters (the executor's max_string_chars)"


def _text_or_null(value: object) -> str | None:
    return None if value is None else _text(value)


def _ident(value: object) -> str | None:
    if isinstance(value, str):
        return None if 1 <= len(value) <= MAX_TEXT_CHARS else f"an id of 1 to {MAX_TEXT_CHARS} characters"
    if type(value) is int and 0 <= value <= INT64_MAX:
        return None
    return "an id (text, or a whole number >= 0)"


def _ident_or_null(value: object) -> str | None:
    return None if value is None else _ident(value)


def _failed_op(value: object) -> str | None:
    """A plan_complete's ``failed_op``: null, or the op that failed as the executor records it."""
    if value is None or isinstance(value, dict) and _ident(value.get("op_id")) is None \
            and _text_or_null(value.get("description")) is None and _text_or_null(value.get("error")) is None:
        return None
    return "null or the op that failed, {op_id, description, error}"


def _flag(value: object) -> str | None:
    return None if isinstance(value, bool) else "true or false"


def _object(value: object) -> str | None:
    return None if isinstance(value, dict) else "a JSON object"


def _anything(value: object) -> str | None:
    return None


def _one_of(*choices: str, nullable: bool = False):
    def check(value: object) -> str | None:
        if value in choices and isinstance(value, str) or (nullable and value is None):
            return None
        return "one of " + ", ".join(choices) + (" or null" if nullable else "")
    return check


def _count(value: object) -> str | None:
    if type(value) is int and 0 <= value <= DEFAULT_LIMITS.max_ops:
        return None
    return f"a whole number from 0 to {DEFAULT_LIMITS.max_ops} (the most ops a plan may have)"


def _time(value: object) -> str | None:
    if type(value) in (int, float) and math.isfinite(value) and 0 <= value <= MAX_TIME_S:
        return None
    return f"a time in seconds since 1970, from 0 to {MAX_TIME_S:.0f} (the end of year 9999)"


def is_recorded_time(value: object) -> bool:
    """Whether ``value`` is a time a journal may record (seconds since 1970, up to MAX_TIME_S)."""
    return _time(value) is None


def _seq(value: object) -> str | None:
    return None if type(value) is int and 0 <= value <= INT64_MAX else "a whole number >= 0"


REQUIRED, OPTIONAL = True, False
_COMMON = {"seq": (_seq, OPTIONAL), "time": (_time, OPTIONAL)}
# Per event kind: field -> (check, required). What a replay reads of each, and of nothing else.
FIELDS: dict[str, dict] = {
    "plan_started": {"plan_id": (_ident, REQUIRED), "description": (_text, REQUIRED), "op_count": (_count, REQUIRED),
                     "dialect": (_text_or_null, OPTIONAL), "run_id": (_text_or_null, OPTIONAL),
                     "plan": (_object, REQUIRED)},
    "node_state": {"plan_id": (_ident, REQUIRED), "op_id": (_ident, REQUIRED), "kind": (_text, REQUIRED),
                   "description": (_text, REQUIRED), "state": (_one_of(*OP_STATES), REQUIRED),
                   "detail": (_text_or_null, OPTIONAL), "result": (_anything, OPTIONAL)},
    "stop_point": {"plan_id": (_ident, REQUIRED), "op_id": (_ident, REQUIRED), "when": (_one_of(*STOP_WHENS), REQUIRED),
                   "state": (_one_of(*STOP_POINT_STATES), REQUIRED), "source": (_text, REQUIRED),
                   "action": (_one_of(*STOP_ACTIONS), OPTIONAL)},
    "pause_point": {"plan_id": (_ident, REQUIRED), "op_id": (_ident, REQUIRED),
                    "when": (_one_of(*STOP_WHENS), REQUIRED),
                    "source": (_text, REQUIRED)},
    "paused": {"plan_id": (_ident, REQUIRED), "source": (_text, REQUIRED), "op_id": (_ident_or_null, OPTIONAL),
               "when": (_one_of(*STOP_WHENS, nullable=True), OPTIONAL)},
    "resumed": {"plan_id": (_ident, REQUIRED), "source": (_text, REQUIRED)},
    "step_transition": {"plan_id": (_ident, REQUIRED), "run_id": (_text_or_null, OPTIONAL), "step": (_text, REQUIRED),
                        "skill": (_text, REQUIRED), "outcome": (_text, REQUIRED), "next": (_text, REQUIRED),
                        "state": (_object, REQUIRED)},
    "plan_complete": {"plan_id": (_ident, REQUIRED), "outcome": (_text_or_null, REQUIRED),
                      "any_failed": (_flag, OPTIONAL), "cancelled": (_flag, OPTIONAL),
                      "cancel_reason": (_text_or_null, OPTIONAL), "error": (_text_or_null, OPTIONAL),
                      "failed_op": (_failed_op, OPTIONAL), "terminal": (_text_or_null, OPTIONAL),
                      "terminal_reason": (_text_or_null, OPTIONAL), "state": (_object, OPTIONAL),
                      "description": (_text, OPTIONAL)},
}
_OP_FIELDS = {"op_id": (_ident, REQUIRED), "kind": (_text, REQUIRED), "description": (_text, OPTIONAL),
              "children": (lambda value: None if isinstance(value, list) else "a JSON array of op ids", OPTIONAL),
              "cap": (_text, OPTIONAL), "args": (_anything, OPTIONAL)}


def _check_fields(fields: dict, found: dict, where: str) -> None:
    for name, (check, required) in fields.items():
        if name not in found:
            if required:
                raise JournalValueError(f"{where} has no {name!r}")
            continue
        expected = check(found[name])
        if expected is not None:
            raise JournalValueError(f"{where}'s {name!r} is {_shown(found[name])}, expected {expected}")


def check_unparsed(line: bytes) -> None:
    """Refuse a plan_started line holding more ops than a plan may have before it is parsed, which would cost
    many times its bytes: in JSON text, the key ``"op_id"`` (with its quotes) occurs once per op and never
    inside a string, where quotes are escaped."""
    if b'"plan_started"' in line and line.count(b'"op_id"') > DEFAULT_LIMITS.max_ops:
        raise JournalValueError(f"this plan_started event records more than {DEFAULT_LIMITS.max_ops} ops, more than "
                                "a plan may have (the executor's max_ops)")


class _PlanSeen:
    """What the check keeps of a plan in flight: its op ids, whether it is a step graph, the bytes it holds."""

    __slots__ = ("op_ids", "steps", "bytes", "op_bytes")

    def __init__(self, op_ids: set, steps: frozenset | None, size: int):
        self.op_ids = op_ids
        self.steps = steps
        self.bytes = size
        self.op_bytes: dict[str, int] = {}


class RunCheck:
    """Checks the events of one run in order (``check(event, size)``, ``size`` its line's bytes): raises
    JournalValueError for the first value a replay cannot take, or past the limits of a live executor."""

    def __init__(self):
        self._in_flight: dict[str, _PlanSeen] = {}
        self._kept_bytes = 0

    def check(self, event: dict, size: int) -> None:
        kind = event["event"]
        if not isinstance(kind, str):
            raise JournalValueError(f"the event's 'event' is {_shown(kind)}, expected text")
        where = f"this {kind} event" if len(kind) <= 40 else "this event"
        _check_fields(_COMMON, event, where)
        if kind in DOOR_EVENTS:
            raise JournalValueError(f"a {kind} event is one only a door sends its listeners, never a journal")
        fields = FIELDS.get(kind)
        if fields is None:
            return  # a kind a replay does not read: passed on as it is
        _check_fields(fields, event, where)
        plan_id = str(event["plan_id"])
        if kind == "plan_started":
            self._started(plan_id, event, size)
            return
        plan = self._in_flight.get(plan_id)
        if plan is None:  # a plan whose start the journal does not hold (subscribed late): not replayed
            return
        if kind == "plan_complete":
            if plan.steps is not None and "state" not in event:
                raise JournalValueError(f"step graph {_shown(plan_id)}'s plan_complete has no 'state'")
            self._check_world(plan, event.get("state"), "plan_complete")
            self._kept_bytes -= plan.bytes
            del self._in_flight[plan_id]
            return
        op_id = event.get("op_id")
        if op_id is not None and str(op_id) not in plan.op_ids:
            raise JournalValueError(f"plan {_shown(plan_id)} has no op {_shown(str(op_id))} (its plan_started "
                                    "records the plan's ops)")
        grown = 0
        if kind == "node_state":
            grown = size - plan.op_bytes.get(str(op_id), 0)  # an op keeps its latest state and result only
            plan.op_bytes[str(op_id)] = size
        elif kind == "step_transition":
            if plan.steps is None:
                raise JournalValueError(f"plan {_shown(plan_id)} is no step graph: it has no step transitions")
            if event["step"] not in plan.steps:
                raise JournalValueError(f"step graph {_shown(plan_id)} has no step {_shown(event['step'])}")
            self._check_world(plan, event["state"], "step_transition")
            grown = size
        self._hold(plan, grown)

    def _started(self, plan_id: str, event: dict, size: int) -> None:
        if plan_id in self._in_flight:
            raise JournalValueError(f"plan {_shown(plan_id)} starts again while it is in flight")
        if len(self._in_flight) >= MAX_PLANS_IN_FLIGHT:
            raise JournalValueError(f"more than {MAX_PLANS_IN_FLIGHT} plans in flight at once (an executor's "
                                    "default max_plans)")
        op_ids, steps = _checked_shape(event["plan"], f"plan {_shown(plan_id)}'s shape")
        plan = _PlanSeen(op_ids, steps, 0)
        self._in_flight[plan_id] = plan
        self._hold(plan, size)

    def _hold(self, plan: _PlanSeen, grown: int) -> None:
        plan.bytes += grown
        self._kept_bytes += grown
        if self._kept_bytes > MAX_KEPT_BYTES:
            raise JournalValueError(f"the plans in flight hold more than {MAX_KEPT_BYTES // (1024 * 1024)} MiB of "
                                    "journal text (shapes, states, results): more than a replay keeps")

    @staticmethod
    def _check_world(plan: _PlanSeen, state: object, kind: str) -> None:
        """A step graph's world state, as its summary shows it: what it holds and who holds the tool."""
        if plan.steps is None or state is None:
            return
        patron = state.get("patron")
        if "holding" not in state or not isinstance(patron, list) or not all(isinstance(p, str) for p in patron):
            raise JournalValueError(f"this {kind}'s 'state' is no step graph's world state (expected 'holding' "
                                    "and 'patron', a list of text)")


def _checked_shape(shape: dict, where: str) -> tuple[set, frozenset | None]:
    """The op ids of a plan's recorded shape, and its steps when it is a step graph; JournalValueError when the
    shape is no plan a live executor ran: ops over max_ops, an op's fields, ids repeated or missing, children
    that are not a tree under the root."""
    ops = shape.get("ops")
    if not isinstance(ops, list):
        raise JournalValueError(f"{where} records no ops (a journal of a bt_exec that did not record plans)")
    if len(ops) > DEFAULT_LIMITS.max_ops:
        raise JournalValueError(f"{where} has {len(ops)} ops, more than a plan may have ({DEFAULT_LIMITS.max_ops}, "
                                "the executor's max_ops)")
    op_ids: set[str] = set()
    for index, op in enumerate(ops):
        if not isinstance(op, dict):
            raise JournalValueError(f"{where}: op {index} is {_shown(op)}, expected a JSON object")
        _check_fields(_OP_FIELDS, op, f"{where}: op {index}")
        op_id = str(op["op_id"])
        if op_id in op_ids:
            raise JournalValueError(f"{where}: op id {_shown(op_id)} appears twice")
        op_ids.add(op_id)
    parents: dict[str, str] = {}
    for op in ops:
        for child in op.get("children") or ():
            if _ident(child) is not None or str(child) not in op_ids:
                raise JournalValueError(f"{where}: op {_shown(str(op['op_id']))} has a child {_shown(child)} that "
                                        "is no op of the plan")
            if str(child) in parents:
                raise JournalValueError(f"{where}: op {_shown(str(child))} is a child of two ops")
            parents[str(child)] = str(op["op_id"])
    root = shape.get("root")
    if _ident_or_null(root) is not None:
        raise JournalValueError(f"{where}'s 'root' is {_shown(root)}, expected an op id")
    if ops and (root is None or str(root) not in op_ids or str(root) in parents):
        raise JournalValueError(f"{where}'s root {_shown(root)} is no op at the top of the plan")
    if _object(shape.get("state", {})) is not None:  # a step graph's world as it started
        raise JournalValueError(f"{where}'s 'state' is {_shown(shape['state'])}, expected a JSON object")
    transitions = shape.get("transitions")
    if transitions is None:
        return op_ids, None
    if not isinstance(transitions, dict) or len(transitions) > DEFAULT_LIMITS.max_graph_steps:
        raise JournalValueError(f"{where}'s 'transitions' must be a JSON object of at most "
                                f"{DEFAULT_LIMITS.max_graph_steps} steps (the executor's max_graph_steps)")
    for step, edges in transitions.items():
        if not isinstance(edges, dict) or not all(isinstance(target, str) for target in edges.values()):
            raise JournalValueError(f"{where}: step {_shown(step)}'s transitions must map outcomes to step ids")
    return op_ids, frozenset(transitions)
