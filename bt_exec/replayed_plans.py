"""The plans a replayed run describes, rebuilt event by event, answering the read operations an executor answers.

The events come from ``bt_exec.events.replay`` (a journal's run, checked as it is read and played at its pace);
``web/replay_api.py`` serves the plans to the console, ``watch`` and MCP, and ``bt-exec replay`` prints them.
"""
from __future__ import annotations

import math
import threading
import time

from .errors import BadArgument, Conflict, NotFound
from .events.replay import ReplayError
from .events.replay_checks import MAX_KEPT_BYTES
from .events.shapes import FINAL_STATES, PLAN_KEY, trace_view
from .runtime.budgets import BoundedTable, json_size, quote, shown
from .runtime.op_views import MAX_WAIT_FOR_PLAN_S, op_view

# Finished plans a replay keeps for its views, newest first, within MAX_KEPT_BYTES of their records (an executor
# keeps its newest too).
FINISHED_KEPT = 200


class ReplayedPlans:
    """The plans a replay's events describe, rebuilt event by event, answering as the executor's read
    operations answer (``get_all_plans``, ``get_plan_tree``, ``get_finished_plans``, ``get_plan_status``,
    ``get_plan_result``, ``get_op``). Thread-safe: one thread applies events while others read."""

    def __init__(self, finished_kept: int = FINISHED_KEPT):
        self.finished_kept = finished_kept
        self._active: dict[str, dict] = {}
        self._finished = BoundedTable(finished_kept, MAX_KEPT_BYTES)  # oldest first
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

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
            return [_record(plan) for plan in self._active.values()]

    def _apply(self, event: dict) -> dict | None:
        kind = event.get("event")
        plan_id = event.get("plan_id")
        if kind == "plan_started":
            shape = event.get(PLAN_KEY)
            if not isinstance(shape, dict) or not isinstance(shape.get("ops"), list):
                raise ReplayError(f"plan {quote(plan_id)}'s plan_started event records no plan (a journal of a bt_exec "
                                  "that did not record plans): cannot replay it")
            self._active[str(plan_id)] = _new_plan(event, shape)
            return None
        plan = self._active.get(str(plan_id))
        if plan is None:
            return None
        if kind == "node_state":
            op = plan["ops"].get(str(event.get("op_id")))
            if op is not None:
                state = event.get("state")
                op["state"] = state
                if state == "running" and op["started_at"] is None:
                    op["started_at"] = event.get("time")
                if state in FINAL_STATES:
                    op["ended_at"] = event.get("time")
                if "result" in event:
                    op["result"] = event["result"]
                op["detail"] = event.get("detail")
        elif kind == "stop_point":
            op_id, when, state = str(event.get("op_id")), event.get("when"), event.get("state")
            pausing = event.get("action") == "pause"
            points = plan["pause_points"] if pausing else plan["stop_points"]
            if state == "armed":
                points[op_id] = when
            elif points.get(op_id) == when:
                points.pop(op_id)
            if state == "fired" and not pausing:
                plan["cancel_reason"] = f"stop point {when} at op {op_id}"
        elif kind in ("paused", "resumed"):
            plan["paused"] = kind == "paused"
        elif kind == "step_transition":
            plan["trace"].append({key: event.get(key) for key in ("step", "skill", "outcome", "next", "state", "time")})
            plan["state"] = event.get("state")
        elif kind == "plan_complete":
            for key in ("outcome", "cancelled", "cancel_reason", "error", "any_failed", "failed_op", "terminal",
                        "terminal_reason"):
                if key in event:
                    plan[key] = event[key]
            if "state" in event:
                plan["state"] = event["state"]
            plan["ended_at"] = event.get("time")
            plan["running"] = plan["paused"] = False
            del self._active[plan["plan_id"]]
            record = _record(plan)
            self._finished.put(plan["plan_id"], plan, json_size(record["ops"]) or MAX_KEPT_BYTES)
            return record
        return None

    # --- the executor's read operations ---------------------------------------------------------------

    def get_all_plans(self) -> dict:
        with self._lock:
            plans = [{"plan_id": plan["plan_id"], "description": plan["description"], "op_count": len(plan["ops"]),
                      "cancelled": plan["cancelled"], "paused": plan["paused"],
                      "stop_points": len(plan["stop_points"]) + len(plan["pause_points"])}
                     for plan in self._active.values()]
        return {"count": len(plans), "plans": plans}

    def get_finished_plans(self, limit: int = 50) -> dict:
        with self._lock:
            records = [_record(plan) for plan in self._finished.values()[::-1][:limit]]
        plans = [{key: record.get(key) for key in ("plan_id", "run_id", "description", "dialect", "outcome",
                                                   "cancel_reason", "error", "failed_op", "started_at", "ended_at",
                                                   "duration_s")} | {"op_count": len(record["ops"])}
                 for record in records]
        return {"count": len(plans), "plans": plans}

    def get_plan_tree(self, plan_id: str) -> dict:
        with self._lock:
            plan = self._plan(plan_id, "get_plan_tree")
            view = {key: plan[key] for key in ("plan_id", "run_id", "description", "dialect", "root", "running",
                                               "paused", "cancelled", "cancel_reason", "outcome")}
            view["ops"] = [{**op, "args": shown(op["args"]), **_points(plan, op)} if "args" in op
                           else {**op, **_points(plan, op)} for op in plan["ops"].values()]
            if not plan["running"]:
                record = _record(plan)
                view.update(error=None, duration_s=record["duration_s"], failed_op=plan["failed_op"])
            if plan["transitions"] is not None:
                view.update(transitions=plan["transitions"], path=_path(plan), state=plan["state"],
                            trace=trace_view(plan["trace"]))
        return view

    def get_plan_status(self, plan_id: str, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None, with_args: bool = True) -> dict:
        view = op_view("get_plan_status", states, op_ids, summary, max_chars, _text_id)
        with self._lock:
            plan = self._active.get(str(plan_id))
            if plan is None:
                refusal = Conflict if self._finished.get(str(plan_id)) is not None else NotFound
                raise refusal(f"get_plan_status: no active plan {quote(plan_id)} in the replay (it already "
                              "finished, or has not started yet); get_plan_result has a finished plan's record")
            ops = []
            for op in plan["ops"].values():
                entry = {key: op[key] for key in ("op_id", "kind", "description", "state")}
                entry.update(_points(plan, op))
                if with_args and "cap" in op:
                    entry.update(cap=op["cap"], args=shown(op["args"]))
                ops.append(entry)
            status = {"plan_id": plan["plan_id"], "running": True, "paused": plan["paused"],
                      "cancelled": plan["cancelled"], "description": plan["description"], "ops": ops}
            if plan["transitions"] is not None:
                status.update(run_id=plan["run_id"], state=plan["state"],
                              path=[entry["step"] for entry in plan["trace"]])
        return view.apply(status)

    def get_plan_result(self, plan_id: str, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None) -> dict:
        view = op_view("get_plan_result", states, op_ids, summary, max_chars, _text_id)
        with self._lock:
            plan = self._finished.get(str(plan_id))
            if plan is None:
                if str(plan_id) in self._active:
                    raise Conflict(f"get_plan_result: plan {quote(plan_id)} is still running in the replay; use "
                                   "get_plan_status")
                raise NotFound(f"get_plan_result: no record of plan {quote(plan_id)} in the replay (not started "
                               "yet, or too old to be kept)")
            record = _record(plan)
        return view.apply(record)

    def get_op(self, plan_id: str, op_id: str) -> dict:
        with self._lock:
            plan = self._plan(plan_id, "get_op")
            op = plan["ops"].get(str(op_id))
            if op is None:
                raise NotFound(f"get_op: plan {quote(plan_id)} has no op {quote(op_id)}; call get_plan_status "
                               "to see its op ids")
            found = {**op, **_points(plan, op)}
            return {"plan_id": plan["plan_id"], "running": plan["running"], "op": found}

    def wait_for_plan(self, plan_id: str, timeout_s: float = 30.0, **view) -> dict:
        """The plan's record once it completed in the replay, or ``{plan_id, finished: false, message}``.
        ``timeout_s`` from 0 to 60, as the executor takes it (longer is waited 60 s)."""
        if type(timeout_s) not in (int, float) or not 0 <= timeout_s < math.inf:
            raise BadArgument(f"wait_for_plan: timeout_s must be a non-negative number of seconds, got "
                              f"{quote(timeout_s)}")
        waited = min(timeout_s, MAX_WAIT_FOR_PLAN_S)
        deadline = time.monotonic() + waited
        with self._changed:
            while str(plan_id) in self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"plan_id": str(plan_id), "finished": False,
                            "message": f"plan {quote(plan_id)} still running in the replay after {waited:g} s; "
                                       "call wait_for_plan again"}
                self._changed.wait(left)
        return self.get_plan_result(plan_id, **view)

    def _plan(self, plan_id: str, caller: str) -> dict:
        plan = self._active.get(str(plan_id)) or self._finished.get(str(plan_id))
        if plan is None:
            raise NotFound(f"{caller}: no plan {quote(plan_id)} in the replay (not started yet, or too old to be "
                           "kept); call get_all_plans or get_finished_plans to list plans")
        return plan


def _points(plan: dict, op: dict) -> dict:
    """An op's armed stop point, and its pause point where one is armed, as the executor's views name them."""
    points = {"stop_point": plan["stop_points"].get(op["op_id"])}
    pause_point = plan["pause_points"].get(op["op_id"])
    if pause_point is not None:
        points["pause_point"] = pause_point
    return points


def _text_id(value: object, name: str) -> str:
    return str(value)


def _new_plan(event: dict, shape: dict) -> dict:
    ops = {}
    for entry in shape["ops"]:
        if not isinstance(entry, dict) or "op_id" not in entry:
            continue
        op = {"op_id": str(entry["op_id"]), "kind": entry.get("kind"), "description": entry.get("description", ""),
              "state": "pending", "children": [str(child) for child in entry.get("children") or ()]}
        if "cap" in entry:
            op.update(cap=entry["cap"], args=entry.get("args"))
        op.update(result=None, detail=None, started_at=None, ended_at=None)
        ops[op["op_id"]] = op
    return {"plan_id": str(event.get("plan_id")), "run_id": event.get("run_id"),
            "description": event.get("description", ""), "dialect": event.get("dialect"),
            "root": shape.get("root"), "ops": ops, "transitions": shape.get("transitions"),
            "running": True, "cancelled": False, "any_failed": False, "cancel_reason": None, "outcome": None,
            "failed_op": None, "started_at": event.get("time"), "ended_at": None, "stop_points": {}, "pause_points": {},
            "paused": False, "trace": [], "state": None, "terminal": None, "terminal_reason": None}


def _path(plan: dict) -> list:
    return [entry["step"] for entry in plan["trace"]] + ([plan["terminal"]] if plan["terminal"] else [])


def _record(plan: dict) -> dict:
    """A plan's final record as the executor words it (``get_plan_result``); for a plan still running, what the
    journal holds of it, with outcome None."""
    started, ended = plan["started_at"], plan["ended_at"]
    duration = ended - started if isinstance(started, (int, float)) and isinstance(ended, (int, float)) else 0.0
    record = {"plan_id": plan["plan_id"], "run_id": plan["run_id"], "description": plan["description"],
              "dialect": plan["dialect"], "outcome": plan["outcome"], "any_failed": plan["any_failed"],
              "cancelled": plan["cancelled"], "cancel_reason": plan["cancel_reason"], "error": plan.get("error"),
              "started_at": started, "ended_at": ended, "duration_s": max(duration, 0.0), "root": plan["root"],
              "ops": [dict(op) for op in plan["ops"].values()], "failed_op": plan["failed_op"]}
    if plan["transitions"] is not None:
        record.update(transitions=plan["transitions"], terminal=plan["terminal"],
                      terminal_reason=plan["terminal_reason"], trace=list(plan["trace"]),
                      state=plan["state"] or {}, path=_path(plan))
    return record
