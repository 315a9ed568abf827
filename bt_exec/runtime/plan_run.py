"""One submitted plan while it runs: its tree, op states, stop points, what it waits on, its events."""
from __future__ import annotations

import threading
import time
from operator import attrgetter
from typing import Callable

from py_trees.common import Status

from bt_exec.behaviours import place_stop_guard
from bt_exec.compilers import CompiledPlan, Plan
from bt_exec.compilers.ir import STOP_WHENS
from bt_exec.events import EventBus
from bt_exec.events.shapes import FINAL_STATES, PLAN_KEY, trace_view

from .budgets import MARKER_CHARS, MESSAGE_CHARS, cut_marker, cut_text, json_size, shown
from .plan_tree import PlanTree

# Who arms or disarms a stop point: the Python API, a door, or a plan (a builtin call or a meta op).
STOP_POINT_SOURCES = ("api", "http", "mcp", "ros", "builtin")
_DESCRIPTION = attrgetter("description")
_KIND = attrgetter("kind")
_CAP = attrgetter("cap")
_ARGS = attrgetter("args")
# Compact JSON of one op's entry beyond its own texts: keys, quotes, state, stop point, times.
_STATUS_ENTRY_CHARS = 90
_RECORD_ENTRY_CHARS = 180
_RESULT_FIELDS_CHARS = 90  # a result's keys and flags beyond its output and texts


class OpRecord:
    """The live and final state of one op."""

    __slots__ = ("op", "state", "result", "detail", "started_at", "ended_at", "_shown_args")

    def __init__(self, op):
        self.op = op
        self.state = "pending"
        self.result: dict | None = None
        self.detail: str | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None

    def as_dict(self, whole_args: bool = True) -> dict:
        """The op and its state; a call's ``cap`` and ``args`` (whole, or as views show them: cut past
        ``ARGS_SHOWN_CHARS`` to a marker)."""
        op = self.op
        if op.cap is None:
            return {"op_id": op.op_id, "kind": op.kind, "description": op.description, "state": self.state,
                    "children": list(op.children), "result": self.result, "detail": self.detail,
                    "started_at": self.started_at, "ended_at": self.ended_at}
        return {"op_id": op.op_id, "kind": op.kind, "description": op.description, "state": self.state,
                "children": list(op.children), "cap": op.cap, "args": op.args if whole_args else self.shown_args(),
                "result": self.result, "detail": self.detail, "started_at": self.started_at,
                "ended_at": self.ended_at}

    def shown_args(self) -> object:
        """The call's args as views show them, measured once."""
        try:
            return self._shown_args
        except AttributeError:
            self._shown_args = shown(self.op.args)
            return self._shown_args


class PlanRun:
    """Implements the behaviours' PlanHooks for one plan and keeps what the API reports about it.

    ``tick_lock`` is held by whoever ticks the tree, tears it down or places a stop
    guard in it, so events of one plan come in order and the tree never changes under
    a tick. Readers (status, listing) never take it: op records have a fixed key set
    and stop points are a set mutated under ``_control_lock``.

    Events are built only while someone listens on ``bus``, collected during a tick
    and published in one batch by the tree's post-tick handler (and after a teardown).
    """

    def __init__(self, plan_id: str, plan: Plan, compiled: CompiledPlan, run_id: str | None, control_only: bool,
                 world, bus: EventBus, wake_runner: Callable[[], None], *, max_result_bytes: int,
                 max_plan_result_bytes: int, text_chars: int | None = None, pause_timeout_s: float | None = None):
        """``max_result_bytes``: the largest op output kept whole; ``max_plan_result_bytes``: all the
        outputs one plan keeps whole (past it, each output larger than its marker is cut).
        ``pause_timeout_s``: a pause lasting longer cancels the plan (None: a pause lasts until resumed).
        ``text_chars``: the length of the text the plan was loaded from, if it came as text (it
        holds every description and cap, so it stands for them when the final record is measured)."""
        self.plan_id = plan_id
        self.plan = plan
        self.ops = compiled.ops
        self.tree = PlanTree(compiled.root)
        self.run_id = run_id
        self.control_only = control_only
        self.world = world          # a dialect's symbolic world the run moves on, or None
        self.state: dict | None = world.snapshot() if world is not None else None  # safe to read anywhere
        self.records = {op_id: OpRecord(op) for op_id, op in plan.ops.items()}
        self.stop_points: dict[tuple[str, str], str] = {}  # (op id, when) -> the door that armed it
        self.pause_points: dict[tuple[str, str], str] = {}  # the same, for stop points whose action is pause
        self.paused = False
        self.holding_entries = False  # paused, or a step is pending: entries ask may_enter
        self.held: set[str] = set()   # ops held at their entry while paused
        self.pause_deadline: float | None = None  # monotonic time a pause turns into a cancel
        self.pause_timeout_s = pause_timeout_s
        self._stepping: str | None = None  # the door whose step is pending (the next entry pauses the plan)
        self._calls_to_sync = False  # a pause or resume not yet applied to the calls in progress
        self._paused_calls: list = []  # the call behaviours paused on their backend
        self.watched: set = set()
        self.cancel_reason: str | None = None
        self.ready = False     # its tree is set up
        self.started = False
        self.finished = False
        self.needs_tick = True
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.error: str | None = None
        self.trace: list[dict] = []
        self.max_result_bytes = max_result_bytes
        self.max_plan_result_bytes = max_plan_result_bytes
        self.result_bytes = 0  # what the results kept so far measure
        self._op_text_chars: int | None = None
        self._text_chars = text_chars
        self._last_output: object = None  # the output measured last, its size, and the plan's kept bytes
        self._last_output_size: int | None = 4  # below which that output is kept whole again
        self._whole_below = -1
        self.terminal: str | None = None
        self.terminal_reason: str | None = None
        self.tick_lock = threading.RLock()  # re-entrant: a builtin in this plan's tick may arm a stop point on it
        self.done = threading.Event()
        self._control_lock = threading.Lock()
        self._guards_to_place: list[str] = []
        self._done_callbacks: list[Callable[[], None]] = []
        self._events: list[dict] = []
        self._bus = bus
        self._wake_runner = wake_runner
        self.tree.add_post_tick_handler(lambda _tree: self.flush_events())

    # --- PlanHooks -----------------------------------------------------------

    def stop_point_armed(self, op_id: str, when: str) -> bool:
        return (op_id, when) in self.stop_points

    def stop_point_fired(self, op_id: str, when: str) -> None:
        self._stop_point_event(op_id, when, "fired", self.stop_points.get((op_id, when), "api"), "cancel")
        self.request_cancel(f"stop point {when} at op {op_id}")

    def pause_point_armed(self, op_id: str, when: str) -> bool:
        return (op_id, when) in self.pause_points

    def pause_point_fired(self, op_id: str, when: str) -> None:
        with self._control_lock:
            source = self.pause_points.pop((op_id, when), None)
        if source is None:  # disarmed from another thread since the guard looked
            return
        self._stop_point_event(op_id, when, "fired", source, "pause")
        self.emit({"event": "pause_point", "plan_id": self.plan_id, "op_id": op_id, "when": when, "source": source,
                   "time": time.time()})
        self.pause(source, op_id, when)

    def may_enter(self, op_id: str) -> bool:
        with self._control_lock:
            if self.paused:
                self.held.add(op_id)
                return False
            source, self._stepping = self._stepping, None
            self.holding_entries = False
            self.held.discard(op_id)
        if source is not None:  # the step's op goes in; the plan pauses behind it
            self._pause(source, None, None, pause_calls=False)
        return True

    def op_state(self, op_id: str, state: str, result: dict | None = None, detail: str | None = None) -> None:
        record = self.records[op_id]
        now = time.time()
        record.state = state
        if state == "running" and record.started_at is None:
            record.started_at = now
        if detail is not None and len(detail) > MESSAGE_CHARS:
            detail = cut_text(detail)
        record.detail = detail
        if state in FINAL_STATES:
            record.ended_at = now
            if result is not None:
                if type(result) is dict and result.get("output") is self._last_output and not result.get("error") \
                        and self.result_bytes < self._whole_below:
                    self.result_bytes += self._last_output_size + _RESULT_FIELDS_CHARS  # the common case, inline
                else:
                    result = self._kept(result)
            record.result = result
        if self._bus.listened:
            op = record.op
            event = {"event": "node_state", "plan_id": self.plan_id, "op_id": op_id, "kind": op.kind,
                     "description": op.description, "state": state, "time": now}
            if result is not None:
                event["result"] = result
            if detail is not None:
                event["detail"] = detail
            self._events.append(event)

    def _kept(self, result: dict) -> dict:
        """The result as records and events keep it: an output over the budgets replaced by its marker,
        a long error cut. Measured here, once; the behaviour's own result is left as it is."""
        if type(result) is not dict:
            size = json_size(result)
            if size is not None and size <= self.max_result_bytes:
                self.result_bytes += size
                return result
            self.result_bytes += MARKER_CHARS
            return cut_marker(result, size)
        output = result.get("output")
        if output is self._last_output:  # a backend answering many calls with one object: measured once
            size = self._last_output_size
        else:
            size = json_size(output)
            self._last_output, self._last_output_size = output, size
            # Below this, the same output again is kept whole (op_state checks it inline).
            self._whole_below = (self.max_plan_result_bytes - size if size is not None and size <= self.max_result_bytes
                                 else -1)
        if size is None or size > self.max_result_bytes or (
                self.result_bytes + size > self.max_plan_result_bytes and size > MARKER_CHARS):
            result = {**result, "output": cut_marker(output, size)}
            size = MARKER_CHARS
        error = result.get("error")
        if error:
            if type(error) is not str:
                error = ""
            elif len(error) > MESSAGE_CHARS:
                error = cut_text(error)
                result = {**result, "error": error}
            size += len(error)
        self.result_bytes += size + _RESULT_FIELDS_CHARS
        return result

    def status_size(self) -> int:
        """About the compact JSON size of ``get_plan_status``'s op list (at most), without building it."""
        return self.op_text_chars() + _STATUS_ENTRY_CHARS * len(self.records)

    def record_size(self, record: dict) -> int:
        """About the compact JSON size of this run's final ``record``, from what was measured as it ran."""
        ops = self.plan.ops
        if self._text_chars is None:  # the record keeps each call's args too (in a text, they are counted)
            texts = self.op_text_chars() + sum(json_size(args) or 0 for args in filter(None, map(_ARGS, ops.values())))
        else:  # the ids: in the text once (arena) or renumbered by the executor; twice in the record
            texts = self._text_chars + (2 * len(ops) * len(next(reversed(ops), "")) if self.plan.numbered_by_loader
                                        else sum(map(len, ops)))
        size = (texts + _RECORD_ENTRY_CHARS * len(ops) + self.result_bytes + len(self.plan.description)
                + (json_size(record["input"]) or 0) + 400)
        for key in ("transitions", "trace", "state", "scene", "error", "cancel_reason", "terminal_reason"):
            if record.get(key) is not None:
                size += json_size(record[key]) or 0
        return size

    def op_text_chars(self) -> int:
        """The characters of every op's id, kind, description and cap: counted once, when first asked."""
        if self._op_text_chars is None:
            ops = self.plan.ops
            self._op_text_chars = (2 * sum(map(len, ops)) + sum(map(len, map(_DESCRIPTION, ops.values())))
                                   + sum(map(len, map(_KIND, ops.values())))
                                   + sum(map(len, filter(None, map(_CAP, ops.values())))))
        return self._op_text_chars

    def watch(self, source) -> None:
        self.watched.add(source)

    def unwatch(self, source) -> None:
        self.watched.discard(source)

    def wake(self) -> None:
        self.needs_tick = True
        self._wake_runner()

    def step_taken(self, step_id: str, skill: str, event: str, following: str, state: dict) -> None:
        self.state = state
        now = time.time()
        self.trace.append({"step": step_id, "skill": skill, "outcome": event, "next": following, "state": state,
                           "time": now})
        self.emit({"event": "step_transition", "plan_id": self.plan_id, "run_id": self.run_id, "step": step_id,
                   "skill": skill, "outcome": event, "next": following, "state": state, "time": now})

    def graph_ended(self, terminal: str, reason: str | None) -> None:
        self.terminal, self.terminal_reason = terminal, reason

    # --- events ------------------------------------------------------------------

    def emit(self, event: dict) -> None:
        """Queue an event for the next batch (dropped at once when nobody listens)."""
        if self._bus.listened:
            self._events.append(event)

    def flush_events(self) -> None:
        if self._events:
            events, self._events = self._events, []
            self._bus.publish(events)

    # --- control ---------------------------------------------------------------

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_reason is not None

    def request_cancel(self, reason: str) -> None:
        with self._control_lock:
            if self.cancel_reason is None:
                self.cancel_reason = reason
        self.wake()

    def arm(self, op_id: str, when: str, in_tick: bool, source: str = "api", action: str = "cancel") -> None:
        """Arm a stop point (``action`` cancel) or pause point (``action`` pause) and place its guard above
        the op, under the tick lock; ``source`` names the door that asked (api, http, mcp, ros, builtin),
        for the ``stop_point`` events.

        From inside a tick (a builtin or an event subscriber) while another thread holds
        that lock, the guard is placed before this plan's next tick instead.
        """
        points = self.stop_points if action == "cancel" else self.pause_points
        with self._control_lock:
            points[(op_id, when)] = source
            self._guards_to_place.append(op_id)
        self._stop_point_event(op_id, when, "armed", source, action)
        if self.ready and self.tick_lock.acquire(blocking=not in_tick):
            try:
                self.place_guards()
            finally:
                self.tick_lock.release()
        self.wake()

    def disarm(self, op_id: str, when: str, source: str = "api") -> bool:
        """Disarm the stop and pause points there; False when none was armed. Its guard stays in place,
        checking nothing."""
        with self._control_lock:
            disarmed = [action for action, points in (("cancel", self.stop_points), ("pause", self.pause_points))
                        if points.pop((op_id, when), None) is not None]
        for action in disarmed:
            self._stop_point_event(op_id, when, "disarmed", source, action)
        if disarmed:
            self.wake()
        return bool(disarmed)

    def _stop_point_event(self, op_id: str, when: str, state: str, source: str, action: str) -> None:
        self.emit({"event": "stop_point", "plan_id": self.plan_id, "op_id": op_id, "when": when, "state": state,
                   "source": source, "action": action, "time": time.time()})

    # --- pause and resume (any thread; what reaches the tree waits for its tick) ----------

    def pause(self, source: str, op_id: str | None = None, when: str | None = None) -> bool:
        """Hold every op not yet entered, and pause the calls in progress whose backend can; False when
        already paused. ``op_id``/``when``: the pause point that paused it."""
        return self._pause(source, op_id, when, pause_calls=True)

    def _pause(self, source: str, op_id: str | None, when: str | None, pause_calls: bool) -> bool:
        with self._control_lock:
            if self.paused:
                return False
            self.paused = self.holding_entries = True
            self._stepping = None
            if self.pause_timeout_s is not None:
                self.pause_deadline = time.monotonic() + self.pause_timeout_s
            if pause_calls:
                self._calls_to_sync = True
        if self._bus.listened:
            event = {"event": "paused", "plan_id": self.plan_id, "source": source, "time": time.time()}
            if op_id is not None:
                event.update(op_id=op_id, when=when)
            self._events.append(event)
        self.wake()
        return True

    def resume(self, source: str, step: bool = False) -> str | None:
        """Let held ops enter and paused calls go on; with ``step``, only until the next op is entered,
        after which the plan pauses again (a plan not paused then pauses behind the next op entered).
        Without ``step`` the plan runs on freely: a pending step is dropped too.

        What it ended: ``"pause"`` (the plan was paused), ``"step"`` (it ran with a step pending), or None
        (it ran freely). A resume that ended either is a ``resumed`` event."""
        with self._control_lock:
            ended = "pause" if self.paused else "step" if self._stepping is not None else None
            self.paused = False
            self.pause_deadline = None
            self.held.clear()  # held ops are entered afresh on the next tick, or held again
            self._stepping = source if step else None
            self.holding_entries = step
            if ended == "pause":
                self._calls_to_sync = True
        if (ended == "pause" or ended == "step" and not step) and self._bus.listened:
            self._events.append({"event": "resumed", "plan_id": self.plan_id, "source": source, "time": time.time()})
        self.wake()
        return ended

    @property
    def stepping(self) -> bool:
        return self._stepping is not None

    def running_calls(self) -> list[tuple[str, bool]]:
        """The calls in progress, in op order: (op id, whether its backend can pause it). They are the watched
        sources (a copy taken at once: the tick thread changes the set), so this costs no walk of the plan."""
        calls = []
        for source in list(self.watched):
            backend = getattr(source, "backend", None)
            pausable = hasattr(backend, "pause") and hasattr(backend, "resume")
            can_pause = getattr(backend, "can_pause", None)  # a backend whose pausing depends on the call
            run_id = getattr(source, "_run_id", None)
            if pausable and can_pause is not None and run_id is not None:
                pausable = can_pause(run_id)
            calls.append((source.op_id, pausable))
        if len(calls) > 1:
            position = {op_id: index for index, op_id in enumerate(self.records)}
            calls.sort(key=lambda call: position[call[0]])
        return calls

    def sync_call_pauses(self) -> None:
        """Pause (or resume) the calls in progress as the plan was paused (or resumed) since the last tick
        (caller holds ``tick_lock``)."""
        if not self._calls_to_sync:
            return
        with self._control_lock:
            self._calls_to_sync = False
            pausing = self.paused
        if pausing:
            for source in list(self.watched):
                pause_call = getattr(source, "pause_call", None)
                if pause_call is not None and source not in self._paused_calls and pause_call():
                    self._paused_calls.append(source)
        else:
            calls, self._paused_calls = self._paused_calls, []
            for call in calls:
                call.resume_call()

    def pause_expired(self) -> bool:
        """Whether a pause outlasted the pause timeout; if so the plan is cancelled, saying why."""
        deadline = self.pause_deadline
        if deadline is None or time.monotonic() < deadline:
            return False
        self.request_cancel(f"paused for longer than the pause timeout of {self.pause_timeout_s:g} s; "
                            "cancelled (resume_plan within the timeout to go on)")
        return True

    def place_guards(self) -> None:
        """Place the StopGuards armed since the last call (caller holds ``tick_lock``)."""
        if not self._guards_to_place:
            return
        with self._control_lock:
            op_ids, self._guards_to_place = self._guards_to_place, []
        for op_id in op_ids:
            op = self.ops.get(op_id)
            if op is None or self.finished:
                continue
            is_root = op is self.tree.root
            guard, _new = place_stop_guard(op, is_root)
            if is_root:
                self.tree.root = guard

    def stop_point_of(self, op_id: str) -> str | None:
        points = self.stop_points
        for when in STOP_WHENS:
            if (op_id, when) in points:
                return when
        return None

    def pause_point_of(self, op_id: str) -> str | None:
        points = self.pause_points
        if points:
            for when in STOP_WHENS:
                if (op_id, when) in points:
                    return when
        return None

    def pause_marks(self, op_id: str) -> dict:
        """What views add to an op beside its state: ``held`` (held at its entry while paused) and
        ``pause_point`` (where one is armed); empty for most ops."""
        marks = {}
        if op_id in self.held:
            marks["held"] = True
        when = self.pause_point_of(op_id)
        if when is not None:
            marks["pause_point"] = when
        return marks

    def when_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback()`` once the run finished (now, if it has)."""
        with self._control_lock:
            if not self.done.is_set():
                self._done_callbacks.append(callback)
                return
        callback()

    def mark_done(self) -> None:
        with self._control_lock:
            self.done.set()
            callbacks, self._done_callbacks = self._done_callbacks, []
        for callback in callbacks:
            callback()

    # --- lifecycle (caller holds tick_lock) ---------------------------------

    def set_up(self, setup_kwargs: dict) -> None:
        """Set the tree up, once, with one set of keyword arguments (before the runner sees the run)."""
        self.tree.setup(plan=self, world=self.world, **setup_kwargs)
        self.ready = True

    def begin(self) -> None:
        """The first tick is due: report the plan started."""
        self.started = True
        self.started_at = time.time()
        if self._bus.listened:  # first in its plan's stream, before stop points armed while it was queued
            self._events.insert(0, {"event": "plan_started", "plan_id": self.plan_id, "run_id": self.run_id,
                                    "description": self.plan.description, "op_count": self.plan.op_count,
                                    "dialect": self.plan.dialect, "time": self.started_at,
                                    PLAN_KEY: self.plan_shape()})

    def poll_watched(self) -> bool:
        """Poll every watched source once; True when any has news for the tree."""
        news = False
        for source in self.watched:  # only a tick (this thread, later) adds or removes sources
            if source.poll():
                news = True
        return news

    def tear_down(self) -> None:
        """Stop every running op (they end canceled); ops never reached stay pending."""
        self.tree.root.stop(Status.INVALID)
        self.flush_events()

    @property
    def root_status(self) -> Status:
        return self.tree.root.status

    @property
    def complete(self) -> bool:
        return self.tree.root.status in (Status.SUCCESS, Status.FAILURE)

    def stalled_behaviour(self) -> str | None:
        """The behaviour a RUNNING tree waits in when nothing can wake it, else None (a paused plan waits
        for its resume)."""
        if self.watched or self.needs_tick or self.cancel_requested or self.holding_entries \
                or self.tree.root.status != Status.RUNNING:
            return None
        tip = self.tree.tip()
        return tip.name if tip is not None else self.tree.root.name

    def final_record(self) -> dict:
        cancelled = self.cancel_requested
        failed = self.error is not None or cancelled or self.tree.root.status == Status.FAILURE
        outcome = "cancelled" if cancelled else ("failed" if failed else "succeeded")
        record = {"plan_id": self.plan_id, "run_id": self.run_id, "description": self.plan.description,
                  "dialect": self.plan.dialect, "shape": self.plan.shape, "outcome": outcome,
                  "any_failed": failed, "cancelled": cancelled, "cancel_reason": self.cancel_reason,
                  "error": self.error, "control_only": self.control_only,
                  "started_at": self.started_at, "ended_at": self.ended_at,
                  "duration_s": (self.ended_at - self.started_at) if self.started_at and self.ended_at else 0.0,
                  "input": dict(self.plan.meta), "root": self.plan.root,
                  "ops": [record.as_dict() for record in self.records.values()],
                  "failed_op": self.failed_op() if failed else None}
        if self.world is not None:
            record["transitions"] = self.transitions()
            terminal = self.terminal or ("stop" if cancelled or self.error else None)
            reason = self.terminal_reason or self.cancel_reason or self.error
            record.update(terminal=terminal, terminal_reason=reason, trace=list(self.trace), state=self.state,
                          path=[entry["step"] for entry in self.trace] + ([terminal] if terminal else []))
        return record

    def plan_shape(self) -> dict:
        """What ran, as a journal records it for a replay: ``{root, ops: [{op_id, kind, description, children,
        cap?, args?}], transitions?}`` (step graphs: their transitions)."""
        ops = [{"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children)}
               if op.cap is None else
               {"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children),
                "cap": op.cap, "args": op.args}
               for op in self.plan.ops.values()]
        shape = {"root": self.plan.root, "ops": ops}
        if self.world is not None:
            shape["transitions"] = self.transitions()
        return shape

    def tree_view(self) -> dict:
        """The plan's structure with every op's live state and armed stop point, for tree viewers."""
        marked = self.held or self.pause_points
        view = {"plan_id": self.plan_id, "run_id": self.run_id, "description": self.plan.description,
                "dialect": self.plan.dialect, "root": self.plan.root, "running": not self.finished,
                "paused": self.paused, "stepping": self.stepping, "cancelled": self.cancel_requested,
                "cancel_reason": self.cancel_reason, "outcome": None,
                "ops": [{**record.as_dict(whole_args=False), "stop_point": self.stop_point_of(op_id),
                         **(self.pause_marks(op_id) if marked else {})}
                        for op_id, record in self.records.items()]}
        if self.world is not None:
            view.update(transitions=self.transitions(), path=[entry["step"] for entry in self.trace], state=self.state,
                        trace=trace_view(self.trace))
        return view

    def failed_op(self) -> dict | None:
        """The first op, in plan order, that ended failed or timed out without children to blame:
        ``{op_id, description, error}`` (its call's error, else its detail)."""
        for record in self.records.values():
            if record.state in ("failed", "timeout") and not record.op.children:
                result = record.result
                error = result.get("error") if type(result) is dict else None
                return {"op_id": record.op.op_id, "description": record.op.description,
                        "error": error or record.detail}
        return None

    def transitions(self) -> dict:
        """Step graphs: step id -> {outcome: next step or terminal}."""
        return {step: dict(edges) for step, edges in self.plan.steps.transitions.items()}

    def release_tree(self) -> None:
        """Shut the behaviour tree down and drop it once finished; the records keep everything reported.

        Behaviours hold this run (their hooks) and their links within the tree are acyclic
        (``AcyclicLinks``; a guard hands its op back to the run as it shuts down): once this run
        holds none of them, nothing here is a reference cycle, and the tree is freed as soon as
        nobody else (a tree viewer) holds it, without waiting for the cyclic garbage collector."""
        self.tree.shutdown()
        self.tree = None
        self.ops = {}
        self.watched.clear()
        self._paused_calls = []
