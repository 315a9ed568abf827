"""The plans a replayed run describes, rebuilt event by event out of the parts a live run is made of, answering the
read operations an executor answers with the executor's own read side (``runtime.plan_reads``).

The events come from ``bt_exec.events.replay`` (a journal's run, checked as it is read and played at its pace);
``web/replay_api.py`` serves the plans to the console, ``watch`` and MCP, and ``bt-exec replay`` prints them. A
replay knows what the journal recorded: not the ops held at their entry while paused, not a pending step, not a
cancel asked for until the plan ends (a stop point's is recorded when it fires).
"""
from __future__ import annotations

import threading
import time

from .compilers.ir import Op
from .events.replay import ReplayError
from .events.replay_checks import MAX_KEPT_BYTES
from .events.shapes import PLAN_KEY
from .runtime.budgets import BoundedTable, json_size, quote
from .runtime.op_records import OpRecord
from .runtime.pausing import Pausing
from .runtime.plan_reads import PlanReads, checked_id, checked_timeout, checked_view, still_running
from .runtime.stop_points import StopPoints

# Finished plans a replay keeps for its views, newest first, within MAX_KEPT_BYTES of their records (an executor
# keeps its newest too).
FINISHED_KEPT = 200
# What a plan_complete event says of how the plan ended, taken as it is.
_ENDING_KEYS = ("outcome", "cancelled", "cancel_reason", "error", "any_failed", "failed_op", "terminal",
                "terminal_reason")


class ReplayedPlan:
    """One plan as its events rebuild it: the records, stop points and pause of a live run, and its ending.

    Built from its ``plan_started`` event and the plan's ``shape`` it records; ``apply`` takes each later event
    of the plan. It has what the read views read of a live run (``runtime.plan_views``)."""

    control_only = False  # a journal records no plan of pure control

    def __init__(self, event: dict, shape: dict):
        self.plan_id = str(event.get("plan_id"))
        self.run_id = event.get("run_id")
        self.description = event.get("description", "")
        self.dialect = event.get("dialect")
        self.root = shape.get("root")
        self.transitions = shape.get("transitions")
        self.records: dict[str, OpRecord] = {}
        for entry in shape["ops"]:
            if not isinstance(entry, dict) or "op_id" not in entry:
                continue
            op = Op(str(entry["op_id"]), entry.get("kind"), entry.get("description", ""),
                    [str(child) for child in entry.get("children") or ()])
            if isinstance(entry.get("node"), str):
                op.node = entry["node"]
            if "cap" in entry:
                op.cap, op.args = entry["cap"], entry.get("args")
                if isinstance(entry.get("provider"), str):  # journals before providers were shown have none
                    op.provider = entry["provider"]
            self.records[op.op_id] = OpRecord(op)
        self.stop_points = StopPoints()
        self.pausing = Pausing()
        self.finished = False
        self.cancel_reason: str | None = None
        self.error: str | None = None
        self.trace: list[dict] = []
        self.state: dict | None = shape.get("state")  # a step graph's world as it started, where recorded
        self.started_at = event.get("time")
        self.ended_at = None
        self.ending = {"outcome": None, "cancelled": False, "any_failed": False, "failed_op": None, "terminal": None,
                       "terminal_reason": None}

    @property
    def paused(self) -> bool:
        return self.pausing.paused

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_reason is not None

    def apply(self, event: dict) -> None:
        """Take one event of this plan in, as the live run changed when it sent it."""
        kind = event.get("event")
        if kind == "node_state":
            record = self.records.get(str(event.get("op_id")))
            if record is not None:
                record.move_to(event.get("state"), event.get("time"), event.get("result"), event.get("detail"))
        elif kind == "stop_point":
            op_id, when, state, action = str(event.get("op_id")), event.get("when"), event.get("state"), \
                event.get("action", "cancel")
            if state == "armed":
                self.stop_points.arm(op_id, when, event.get("source"), action)
            elif state == "disarmed":
                self.stop_points.disarm(op_id, when)
            elif action == "pause":  # fired: a pause point fires once
                self.stop_points.take_pause(op_id, when)
            elif self.cancel_reason is None:  # fired: the plan is cancelled, the first reason standing
                self.cancel_reason = f"stop point {when} at op {op_id}"
        elif kind == "paused":
            self.pausing.pause(pause_calls=False)
        elif kind == "resumed":
            self.pausing.resume(event.get("source"))
        elif kind == "step_transition":
            self.trace.append({key: event.get(key) for key in ("step", "skill", "outcome", "next", "state", "time")})
            self.state = event.get("state")
        elif kind == "plan_complete":
            for key in _ENDING_KEYS:
                if key in event:
                    if key in ("cancel_reason", "error"):
                        setattr(self, key, event[key])
                    else:
                        self.ending[key] = event[key]
            if "state" in event:
                self.state = event["state"]
            self.ended_at = event.get("time")
            self.finished = True

    def record(self) -> dict:
        """The plan's final record as the executor words it (``get_plan_result``), of what the journal holds; for
        a plan still running, what it holds so far, with outcome None."""
        started, ended = self.started_at, self.ended_at
        duration = ended - started if isinstance(started, (int, float)) and isinstance(ended, (int, float)) else 0.0
        ending = self.ending
        record = {"plan_id": self.plan_id, "run_id": self.run_id, "description": self.description,
                  "dialect": self.dialect, "outcome": ending["outcome"], "any_failed": ending["any_failed"],
                  "cancelled": ending["cancelled"], "cancel_reason": self.cancel_reason, "error": self.error,
                  "started_at": started, "ended_at": ended, "duration_s": max(duration, 0.0), "root": self.root,
                  "ops": [record.as_dict() for record in self.records.values()], "failed_op": ending["failed_op"]}
        if self.transitions is not None:
            terminal = ending["terminal"]
            record.update(transitions=self.transitions, terminal=terminal, terminal_reason=ending["terminal_reason"],
                          trace=list(self.trace), state=self.state or {},
                          path=[entry["step"] for entry in self.trace] + ([terminal] if terminal else []))
        return record


class ReplayedPlans:
    """The plans a replay's events describe, rebuilt event by event, answering the executor's read operations
    (``get_all_plans``, ``get_plans_snapshot``, ``get_plan_tree``, ``get_finished_plans``, ``get_plan_status``,
    ``get_plan_result``, ``get_plan_feedback``, ``get_op``, ``wait_for_plan``) as the executor answers them.
    Thread-safe: one thread applies events while others read."""

    def __init__(self, finished_kept: int = FINISHED_KEPT):
        self.finished_kept = finished_kept
        self._active: dict[str, ReplayedPlan] = {}
        self._finished = BoundedTable(finished_kept, MAX_KEPT_BYTES)  # final records, oldest first
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._reads = PlanReads(self, self._ever_seen)

    def apply(self, events: list[dict]) -> list[dict]:
        """Take a batch of events in; answer the final records of the plans it completed."""
        completed = []
        with self._lock:
            for event in events:
                record = self._apply(event)
                if record is not None:
                    completed.append(record)
            self._changed.notify_all()
        return completed

    def reset(self) -> None:
        """Forget every plan: the replay starts again from its run's first event."""
        with self._lock:
            self._active.clear()
            self._finished = BoundedTable(self.finished_kept, MAX_KEPT_BYTES)
            self._changed.notify_all()

    def unfinished(self) -> list[dict]:
        """Records of the plans that started but never completed in the journal (the run ended first)."""
        with self._lock:
            return [plan.record() for plan in self._active.values()]

    def _apply(self, event: dict) -> dict | None:
        kind = event.get("event")
        plan_id = event.get("plan_id")
        if kind == "plan_started":
            shape = event.get(PLAN_KEY)
            if not isinstance(shape, dict) or not isinstance(shape.get("ops"), list):
                raise ReplayError(f"plan {quote(plan_id)}'s plan_started event records no plan (a journal of a bt_exec "
                                  "that did not record plans): cannot replay it")
            self._active[str(plan_id)] = ReplayedPlan(event, shape)
            return None
        plan = self._active.get(str(plan_id))
        if plan is None:
            return None
        plan.apply(event)
        if not plan.finished:
            return None
        del self._active[plan.plan_id]
        record = plan.record()
        self._finished.put(plan.plan_id, record, json_size(record["ops"]) or MAX_KEPT_BYTES)
        return record

    # --- the table the read operations read (under the lock) ------------------------------------------

    def active(self, plan_id: str) -> ReplayedPlan | None:
        """The plan in flight at this point of the replay."""
        return self._active.get(plan_id)

    live = active  # a replayed plan's end is taken in one step: none is finishing

    def active_runs(self) -> list[ReplayedPlan]:
        """Every plan in flight at this point of the replay."""
        return list(self._active.values())

    def finished_record(self, plan_id: str) -> dict | None:
        """The final record of a plan finished by this point of the replay, while kept."""
        return self._finished.get(plan_id)

    def finished_records(self, limit: int) -> list[dict]:
        """The newest ``limit`` final records kept, oldest first."""
        return self._finished.values()[-limit:] if limit else []

    def _ever_seen(self, plan_id: str) -> bool:
        return plan_id in self._active or self._finished.get(plan_id) is not None

    # --- the executor's read operations -------------------------------------------------------------------

    def get_all_plans(self) -> dict:
        """As ``Executor.get_all_plans``."""
        with self._lock:
            return self._reads.get_all_plans()

    def get_plans_snapshot(self) -> dict:
        """As ``Executor.get_plans_snapshot``."""
        with self._lock:
            return self._reads.get_plans_snapshot()

    def get_finished_plans(self, limit: int = 50) -> dict:
        """As ``Executor.get_finished_plans``."""
        with self._lock:
            return self._reads.get_finished_plans(limit)

    def get_plan_tree(self, plan_id) -> dict:
        """As ``Executor.get_plan_tree``."""
        with self._lock:
            return self._reads.get_plan_tree(plan_id)

    def get_plan_status(self, plan_id, **view) -> dict:
        """As ``Executor.get_plan_status``."""
        with self._lock:
            return self._reads.get_plan_status(plan_id, **view)

    def get_plan_result(self, plan_id, **view) -> dict:
        """As ``Executor.get_plan_result``."""
        with self._lock:
            return self._reads.get_plan_result(plan_id, **view)

    def get_plan_feedback(self, plan_id, **options) -> dict:
        """As ``Executor.get_plan_feedback``."""
        with self._lock:
            return self._reads.get_plan_feedback(plan_id, **options)

    def get_op(self, plan_id, op_id) -> dict:
        """As ``Executor.get_op``."""
        with self._lock:
            return self._reads.get_op(plan_id, op_id)

    def wait_for_plan(self, plan_id, timeout_s: float = 30.0, *, states=None, op_ids=None, summary: bool = False,
                      max_chars: int | None = None) -> dict:
        """As ``Executor.wait_for_plan``: the plan's record once it completed in the replay, or ``{plan_id,
        finished: false, message}`` when ``timeout_s`` (0 to 60; longer is waited 60 s) passed first."""
        caller = "wait_for_plan"
        plan_id = checked_id(plan_id, "plan_id", caller)
        waited = checked_timeout(timeout_s, caller)
        view = checked_view(caller, states, op_ids, summary, max_chars)
        deadline = time.monotonic() + waited
        with self._changed:
            self._reads.known(plan_id, caller)
            while plan_id in self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return still_running(plan_id, waited, timeout_s, caller)
                self._changed.wait(left)
            return self._reads.plan_result(plan_id, view)
