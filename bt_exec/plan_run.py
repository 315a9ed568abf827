"""One submitted plan while it runs: its tree, op states, stop points and cancel request."""
from __future__ import annotations

import threading
import time
from typing import Callable

from py_trees.common import Status

from .compilers import CompiledPlan, Plan

FINAL_STATES = frozenset(("succeeded", "failed", "canceled", "timeout"))


class OpRecord:
    """The live and final state of one op."""

    __slots__ = ("op", "state", "result", "detail", "started_at", "ended_at")

    def __init__(self, op):
        self.op = op
        self.state = "pending"
        self.result: dict | None = None
        self.detail: str | None = None
        self.started_at: float | None = None
        self.ended_at: float | None = None

    def as_dict(self) -> dict:
        out = {"op_id": self.op.op_id, "kind": self.op.kind, "description": self.op.description, "state": self.state,
               "children": list(self.op.children)}
        if self.op.cap is not None:
            out["cap"] = self.op.cap
        out.update(result=self.result, detail=self.detail, started_at=self.started_at, ended_at=self.ended_at)
        return out


class PlanRun:
    """Implements the behaviours' PlanHooks for one plan and keeps what the API reports about it.

    ``tick_lock`` is held by whoever ticks or tears the tree down, so events of
    one plan come in order. Readers (status, listing) never take it: op records
    have a fixed key set and stop points are a set mutated under ``_control_lock``.
    """

    def __init__(self, plan_id: str, plan: Plan, compiled: CompiledPlan, run_id: str | None,
                 control_only: bool, emit: Callable[[dict], None]):
        self.plan_id = plan_id
        self.plan = plan
        self.root = compiled.root
        self.guards = compiled.guards
        self.run_id = run_id
        self.control_only = control_only
        self.records = {op_id: OpRecord(op) for op_id, op in plan.ops.items()}
        self.stop_points: set[tuple[str, str]] = set()
        self.running_calls: set = set()
        self.cancel_reason: str | None = None
        self.started = False
        self.finished = False
        self.needs_tick = True
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.error: str | None = None
        self.world = None          # step graphs: the run's symbolic World
        self.state: dict | None = None  # its last snapshot (what the robot holds), safe to read anywhere
        self.trace: list[dict] = []
        self.terminal: str | None = None
        self.terminal_reason: str | None = None
        self.tick_lock = threading.Lock()
        self.done = threading.Event()
        self._control_lock = threading.Lock()
        self._emit = emit

    # --- PlanHooks -----------------------------------------------------------

    def stop_point_armed(self, op_id: str, when: str) -> bool:
        return (op_id, when) in self.stop_points

    def stop_point_fired(self, op_id: str, when: str) -> None:
        self.request_cancel(f"stop point {when} at op {op_id}")

    def op_state(self, op_id: str, state: str, result: dict | None = None, detail: str | None = None) -> None:
        record = self.records[op_id]
        now = time.time()
        record.state = state
        if state == "running" and record.started_at is None:
            record.started_at = now
        record.detail = detail
        if state in FINAL_STATES:
            record.ended_at = now
            record.result = result
        op = record.op
        event = {"event": "node_state", "plan_id": self.plan_id, "op_id": op_id, "kind": op.kind,
                 "description": op.description, "state": state, "time": now}
        if result is not None:
            event["result"] = result
        if detail is not None:
            event["detail"] = detail
        self._emit(event)

    def call_started(self, action) -> None:
        self.running_calls.add(action)

    def call_ended(self, action) -> None:
        self.running_calls.discard(action)

    def step_taken(self, step_id: str, skill: str, event: str, following: str, state: dict) -> None:
        self.state = state
        now = time.time()
        self.trace.append({"step": step_id, "skill": skill, "outcome": event, "next": following, "state": state,
                           "time": now})
        self._emit({"event": "step_transition", "plan_id": self.plan_id, "run_id": self.run_id, "step": step_id,
                    "skill": skill, "outcome": event, "next": following, "state": state, "time": now})

    def graph_ended(self, terminal: str, reason: str | None) -> None:
        self.terminal, self.terminal_reason = terminal, reason

    # --- control ---------------------------------------------------------------

    @property
    def cancel_requested(self) -> bool:
        return self.cancel_reason is not None

    def request_cancel(self, reason: str) -> None:
        with self._control_lock:
            if self.cancel_reason is None:
                self.cancel_reason = reason

    def arm(self, op_id: str, when: str) -> None:
        with self._control_lock:
            self.stop_points.add((op_id, when))

    def stop_point_of(self, op_id: str) -> str | None:
        points = self.stop_points
        for when in ("on_enter", "on_complete"):
            if (op_id, when) in points:
                return when
        return None

    # --- lifecycle (caller holds tick_lock) ---------------------------------

    def begin(self) -> None:
        self.started = True
        self.started_at = time.time()
        self._emit({"event": "plan_started", "plan_id": self.plan_id, "run_id": self.run_id,
                    "description": self.plan.description, "op_count": self.plan.op_count,
                    "dialect": self.plan.dialect, "time": self.started_at})

    def tick(self) -> None:
        """Tick the tree if anything can have changed: cost follows the running calls, not tree size."""
        if not self.needs_tick and not any(call.poll() for call in self.running_calls):
            return
        self.needs_tick = False
        self.root.tick_once()

    def tear_down(self) -> None:
        """Stop every running op (they end canceled); ops never reached stay pending."""
        self.root.stop(Status.INVALID)

    @property
    def complete(self) -> bool:
        return self.root.status in (Status.SUCCESS, Status.FAILURE)

    def final_record(self) -> dict:
        cancelled = self.cancel_requested
        failed = self.error is not None or cancelled or self.root.status == Status.FAILURE
        outcome = "cancelled" if cancelled else ("failed" if failed else "succeeded")
        record = {"plan_id": self.plan_id, "run_id": self.run_id, "description": self.plan.description,
                  "dialect": self.plan.dialect, "shape": self.plan.shape, "outcome": outcome,
                  "any_failed": failed, "cancelled": cancelled, "cancel_reason": self.cancel_reason,
                  "error": self.error, "control_only": self.control_only,
                  "started_at": self.started_at, "ended_at": self.ended_at,
                  "duration_s": (self.ended_at - self.started_at) if self.started_at and self.ended_at else 0.0,
                  "input": dict(self.plan.meta), "root": self.plan.root,
                  "ops": [record.as_dict() for record in self.records.values()]}
        if self.world is not None:
            record["transitions"] = self.transitions()
            terminal = self.terminal or ("stop" if cancelled or self.error else None)
            reason = self.terminal_reason or self.cancel_reason or self.error
            record.update(terminal=terminal, terminal_reason=reason, trace=list(self.trace), state=self.state,
                          path=[entry["step"] for entry in self.trace] + ([terminal] if terminal else []))
        return record

    def tree(self) -> dict:
        """The plan's structure with every op's live state and armed stop point, for tree viewers."""
        view = {"plan_id": self.plan_id, "run_id": self.run_id, "description": self.plan.description,
                "dialect": self.plan.dialect, "root": self.plan.root, "running": not self.finished,
                "cancelled": self.cancel_requested, "cancel_reason": self.cancel_reason, "outcome": None,
                "ops": [{**record.as_dict(), "stop_point": self.stop_point_of(op_id)}
                        for op_id, record in self.records.items()]}
        if self.world is not None:
            view.update(transitions=self.transitions(), path=[entry["step"] for entry in self.trace], state=self.state)
        return view

    def transitions(self) -> dict:
        """Step graphs: step id -> {outcome: next step or terminal}."""
        return {step: dict(edges) for step, edges in self.plan.steps.transitions.items()}

    def release_tree(self) -> None:
        """Drop the behaviour tree once finished; the records keep everything reported."""
        self.root = None
        self.guards = {}
        self.running_calls.clear()
