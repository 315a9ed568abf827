"""One submitted plan while it runs: its tree, the parts it is made of, what it waits on, its events."""
from __future__ import annotations

import threading
import time
from typing import Callable

from py_trees.common import Status

from bt_exec.behaviours import place_stop_guard
from bt_exec.compat.py_trees import PlanTree
from bt_exec.compilers import CompiledPlan, Plan
from bt_exec.events import EventBus
from bt_exec.events.shapes import PLAN_KEY

from .op_records import OpRecords
from .pausing import Pausing
from .plan_views import plan_shape
from .stop_points import StopPoints

# Who arms or disarms a stop point: the Python API, a door, or a plan (a builtin call or a meta op).
STOP_POINT_SOURCES = ("api", "http", "mcp", "ros", "robonix", "builtin")


class PlanRun:
    """Implements the behaviours' PlanHooks for one plan, out of its parts: ``records`` (each op's state and the
    byte budget of their results), ``stop_points``, ``pausing``, its tree, and its events. The read operations
    answer from it through ``plan_views``.

    ``tick_lock`` is held by whoever ticks the tree, tears it down or places a stop
    guard in it, so events of one plan come in order and the tree never changes under
    a tick. Readers (status, listing) never take it: op records have a fixed key set
    and stop points are tables changed under their own lock.

    Events are built only while someone listens on ``bus``, collected during a tick
    and published in one batch by the tree's post-tick handler (and after a teardown).
    """

    def __init__(self, plan_id: str, plan: Plan, compiled: CompiledPlan, run_id: str | None, control_only: bool,
                 world, bus: EventBus, wake_runner: Callable[[PlanRun], None], *, max_result_bytes: int,
                 max_plan_result_bytes: int, text_chars: int | None = None, pause_timeout_s: float | None = None):
        """``max_result_bytes``, ``max_plan_result_bytes``, ``text_chars``: the records' budget (``OpRecords``).
        ``pause_timeout_s``: a pause lasting longer cancels the plan (None: a pause lasts until resumed)."""
        self.plan_id = plan_id
        self.plan = plan
        self.description, self.dialect, self.root = plan.description, plan.dialect, plan.root
        # A step graph's transitions (its world moves as it runs), which views show; None for a tree.
        self.transitions = ({step: dict(edges) for step, edges in plan.steps.transitions.items()}
                            if world is not None else None)
        self.ops = compiled.ops
        self.tree = PlanTree(compiled.root)
        self.run_id = run_id
        self.control_only = control_only
        self.world = world          # a dialect's symbolic world the run moves on, or None
        self.state: dict | None = world.snapshot() if world is not None else None  # safe to read anywhere
        self.trace: list[dict] = []
        self.records = OpRecords(plan, max_result_bytes, max_plan_result_bytes, text_chars)
        self.stop_points = StopPoints()
        self.pausing = Pausing(pause_timeout_s)
        self.blackboard: dict = {}  # the ops' blackboard (PlanHooks): its keys are named by the plan
        self.watched: set = set()  # every source the tree waits on
        self.polled: set = set()   # those of them polled every period (the others are told of their news)
        self.wake_armed_at: float | None = None  # the runner's timer for this run (its own bookkeeping)
        self.tick_order = 0  # the runner ticks runs in the order they were added
        self.cancel_reason: str | None = None
        self.ready = False     # its tree is set up
        self.started = False
        self.finished = False
        self.needs_tick = True
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.error: str | None = None
        self.terminal: str | None = None
        self.terminal_reason: str | None = None
        self.tick_lock = threading.RLock()  # re-entrant: a builtin in this plan's tick may arm a stop point on it
        self.done = threading.Event()
        self._control_lock = threading.Lock()  # the cancel reason, the guards to place, the sources with news
        self._guards_to_place: list[str] = []
        self._told: set = set()  # sources watched for news that were told they have some, since the last poll
        self._poll_times: dict = {}  # source -> monotonic time it is to be polled at (``poll_at``)
        self._events: list[dict] = []
        self._bus = bus
        self._wake_runner = wake_runner
        self.tree.add_post_tick_handler(lambda _tree: self.flush_events())

    # --- PlanHooks -----------------------------------------------------------

    @property
    def paused(self) -> bool:
        return self.pausing.paused

    @property
    def holding_entries(self) -> bool:
        return self.pausing.holding_entries

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_reason is not None

    def stop_point_armed(self, op_id: str, when: str) -> bool:
        return (op_id, when) in self.stop_points.cancel

    def stop_point_fired(self, op_id: str, when: str) -> None:
        self._stop_point_event(op_id, when, "fired", self.stop_points.cancel.get((op_id, when), "api"), "cancel")
        self.request_cancel(f"stop point {when} at op {op_id}")

    def pause_point_armed(self, op_id: str, when: str) -> bool:
        return (op_id, when) in self.stop_points.pause

    def pause_point_fired(self, op_id: str, when: str) -> None:
        source = self.stop_points.take_pause(op_id, when)
        if source is None:  # disarmed from another thread since the guard looked
            return
        self._stop_point_event(op_id, when, "fired", source, "pause")
        self.emit({"event": "pause_point", "plan_id": self.plan_id, "op_id": op_id, "when": when, "source": source,
                   "time": time.time()})
        self.pause(source, op_id, when)

    def may_enter(self, op_id: str) -> bool:
        enters, step_source = self.pausing.enter(op_id)
        if step_source is not None:  # the step's op goes in; the plan pauses behind it
            self._pause(step_source, None, None, pause_calls=False)
        return enters

    def op_state(self, op_id: str, state: str, result: dict | None = None, detail: str | None = None) -> None:
        now = time.time()
        result, detail = self.records.set_state(op_id, state, result, detail, now)
        if self._bus.listened:
            op = self.records[op_id].op
            event = {"event": "node_state", "plan_id": self.plan_id, "op_id": op_id, "kind": op.kind,
                     "description": op.description, "state": state, "time": now}
            if result is not None:
                event["result"] = result
            if detail is not None:
                event["detail"] = detail
            self._events.append(event)

    def watch(self, source) -> None:
        self.watched.add(source)
        self.polled.add(source)

    def watch_for_news(self, source) -> None:
        self.watched.add(source)
        self.news(source)  # polled at the next tick: what changed before the source's backend could tell

    def poll_at(self, source, when: float) -> None:
        self._poll_times[source] = when

    def unwatch(self, source) -> None:
        self.watched.discard(source)
        self.polled.discard(source)
        self._poll_times.pop(source, None)

    def wake(self) -> None:
        self.needs_tick = True
        self._wake_runner(self)

    def news(self, source) -> None:
        with self._control_lock:
            if self.finished:
                return
            first = not self._told
            self._told.add(source)
        if first:  # otherwise the runner was told already and has not polled them yet
            self._wake_runner(self)

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
        """Publish the events queued since the last batch, in one batch."""
        if self._events:
            events, self._events = self._events, []
            self._bus.publish(events)

    def _stop_point_event(self, op_id: str, when: str, state: str, source: str, action: str) -> None:
        self.emit({"event": "stop_point", "plan_id": self.plan_id, "op_id": op_id, "when": when, "state": state,
                   "source": source, "action": action, "time": time.time()})

    # --- control (any thread; what reaches the tree waits for its tick) ------------

    def request_cancel(self, reason: str) -> None:
        """Cancel the plan at its next tick, saying ``reason`` (the first reason given stands)."""
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
        self.stop_points.arm(op_id, when, source, action)
        with self._control_lock:
            self._guards_to_place.append(op_id)
        self._stop_point_event(op_id, when, "armed", source, action)
        if self.ready and self.tick_lock.acquire(blocking=not in_tick):
            try:
                self._place_guards()
            finally:
                self.tick_lock.release()
        self.wake()

    def disarm(self, op_id: str, when: str, source: str = "api") -> bool:
        """Disarm the stop and pause points there; False when none was armed. Its guard stays in place,
        checking nothing."""
        disarmed = self.stop_points.disarm(op_id, when)
        for action in disarmed:
            self._stop_point_event(op_id, when, "disarmed", source, action)
        if disarmed:
            self.wake()
        return bool(disarmed)

    def pause(self, source: str, op_id: str | None = None, when: str | None = None) -> bool:
        """Hold every op not yet entered, and pause the calls in progress whose backend can; False when
        already paused. ``op_id``/``when``: the pause point that paused it."""
        return self._pause(source, op_id, when, pause_calls=True)

    def _pause(self, source: str, op_id: str | None, when: str | None, pause_calls: bool) -> bool:
        if not self.pausing.pause(pause_calls):
            return False
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
        ended = self.pausing.resume(source, step)
        if (ended == "pause" or ended == "step" and not step) and self._bus.listened:
            self._events.append({"event": "resumed", "plan_id": self.plan_id, "source": source, "time": time.time()})
        self.wake()
        return ended

    def running_calls(self) -> list[tuple[str, bool]]:
        """The calls in progress, in op order: (op id, whether its backend can pause it). They are the watched
        sources that make calls (a copy taken at once: the tick thread changes the set; a node waiting on a timer
        is watched too), so this costs no walk of the plan."""
        calls = []
        for source in list(self.watched):
            if not hasattr(source, "pause_call"):
                continue
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

    def mark_done(self) -> None:
        """The run finished: wake its waiters."""
        self.done.set()

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
                                    PLAN_KEY: plan_shape(self)})

    def before_tick(self) -> None:
        """Apply what control asked since the last tick: place the guards armed, cancel a pause that outlasted
        the pause timeout (saying why), pause or resume the calls in progress."""
        self._place_guards()
        if self.pausing.deadline is not None and self.pausing.expired():
            self.request_cancel(f"paused for longer than the pause timeout of {self.pausing.timeout_s:g} s; "
                                "cancelled (resume_plan within the timeout to go on)")
        self.pausing.sync_calls(self.watched)

    def _place_guards(self) -> None:
        """Place the StopGuards armed since the last call."""
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

    def poll_watched(self) -> bool:
        """Poll the sources polled every period, those told they have news and those whose ``poll_at`` time
        has come, once each; True when any has news for the tree."""
        news = False
        for source in self.polled:  # only a tick (this thread, later) adds or removes sources
            if source.poll():
                news = True
        if self._told:
            with self._control_lock:
                due, self._told = self._told, set()
        else:
            due = set()
        if self._poll_times:
            now = time.monotonic()
            for source, when in list(self._poll_times.items()):
                if when <= now:
                    del self._poll_times[source]
                    due.add(source)
        for source in due:
            if source in self.watched and source.poll():
                news = True
        return news

    def wake_at(self) -> float | None:
        """The earliest time this run must be ticked though nothing told it (a ``poll_at``, the pause timeout)."""
        times = self._poll_times
        when = min(times.values()) if times else None
        deadline = self.pausing.deadline
        if deadline is not None and (when is None or deadline < when):
            when = deadline
        return when

    def tear_down(self) -> None:
        """Stop every running op (they end canceled); ops never reached stay pending."""
        self.tree.root.stop(Status.INVALID)
        self.flush_events()

    @property
    def complete(self) -> bool:
        """Whether the tree ended, succeeded or failed."""
        return self.tree.root.status in (Status.SUCCESS, Status.FAILURE)

    @property
    def tree_failed(self) -> bool:
        """Whether the tree ended failed."""
        return self.tree.root.status == Status.FAILURE

    def stalled_behaviour(self) -> str | None:
        """The behaviour a RUNNING tree waits in when nothing can wake it, else None (a paused plan waits
        for its resume)."""
        if self.watched or self.needs_tick or self.cancel_requested or self.pausing.holding_entries \
                or self.tree.root.status != Status.RUNNING:
            return None
        tip = self.tree.tip()
        return tip.name if tip is not None else self.tree.root.name

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
        self.polled.clear()
        self._poll_times.clear()
        with self._control_lock:
            self._told.clear()
        self.pausing.release()
