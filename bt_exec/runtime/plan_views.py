"""What the read operations answer of one plan: views of a plan in flight, read from its parts, and views of a
finished plan, read from its final record.

A plan in flight is anything with the attributes a ``PlanRun`` has for them: ``plan_id``, ``run_id``,
``description``, ``dialect``, ``root``, ``transitions`` (a step graph's, else None), ``records`` (op id ->
``OpRecord``), ``stop_points`` (``StopPoints``), ``pausing`` (``Pausing``), ``finished``, ``paused``,
``cancel_requested``, ``cancel_reason``, ``error``, ``trace`` and ``state``. The live executor's runs and a
replay's rebuilt plans are both read here, so a replay answers as the executor answered.
"""
from __future__ import annotations

import itertools

from ..events.shapes import FINAL_STATES, trace_view
from .budgets import cut_marker, json_size, shown
from .feedback import call_entries, snapshot_op

_PREVIEW_OPS = 4  # the ops a status too large to keep is previewed by
_FINISHED_KEYS = ("plan_id", "run_id", "description", "dialect", "root", "cancelled", "cancel_reason", "outcome",
                  "error", "duration_s")
_FINISHED_LISTED = ("plan_id", "run_id", "description", "dialect", "outcome", "cancel_reason", "error", "failed_op",
                    "started_at", "ended_at", "duration_s")


# --- a plan in flight ----------------------------------------------------------------------------------------

def pause_marks(run, op_id: str) -> dict:
    """What views add to an op beside its state: ``held`` (held at its entry while paused) and ``pause_point``
    (where one is armed); empty for most ops."""
    marks = {}
    if op_id in run.pausing.held:
        marks["held"] = True
    when = run.stop_points.pause_point_of(op_id)
    if when is not None:
        marks["pause_point"] = when
    return marks


def _marked(run) -> bool:
    """Whether any op may have pause marks (most plans have none, and their views skip the lookup)."""
    return bool(run.pausing.held or run.stop_points.pause)


def transitions_of(run) -> dict:
    """A step graph's transitions, step id -> {outcome: next step or terminal}, as a new dict (callers may keep
    it)."""
    return {step: dict(edges) for step, edges in run.transitions.items()}


def path_of(run) -> list:
    """The steps a step graph took so far, in order."""
    return [entry["step"] for entry in run.trace]


def listing(run) -> dict:
    """The plan as ``get_all_plans`` lists it."""
    return {"plan_id": run.plan_id, "description": run.description, "op_count": len(run.records),
            "cancelled": run.cancel_requested, "paused": run.paused, "stop_points": len(run.stop_points)}


def snapshot(run) -> dict:
    """The plan as ``get_plans_snapshot`` shows it: its listing with every op's ``{op_id, kind, cap?, state,
    stop_point?}``."""
    stop_point_of = run.stop_points.stop_point_of
    ops = [snapshot_op(op_id, record.op.kind, record.op.cap, record.state, stop_point_of(op_id))
           for op_id, record in run.records.items()]
    if _marked(run):
        for op in ops:
            op.update(pause_marks(run, op["op_id"]))
    return {**listing(run), "ops": ops}


def status(run, with_args: bool, max_bytes: int | None = None) -> dict:
    """``get_plan_status``'s answer: every op's id, kind, description, state and stop point (and each call's
    ``cap``, shown ``args`` and the ``provider`` the plan names for it ``with_args``). A status whose ops alone
    are over ``max_bytes`` is answered by its marker, built from its first ops only."""
    records = run.records.items()
    too_large = max_bytes is not None and run.records.status_size() > max_bytes
    if too_large:
        records = list(itertools.islice(records, _PREVIEW_OPS))
    stop_point_of = run.stop_points.stop_point_of
    ops = [{"op_id": op_id, "kind": record.op.kind, "description": record.op.description,
            "state": record.state, "stop_point": stop_point_of(op_id)}
           for op_id, record in records]
    if _marked(run):
        for op in ops:
            op.update(pause_marks(run, op["op_id"]))
    if with_args:
        for op, record in zip(ops, run.records.values()):
            if record.op.cap is not None:
                op.update(cap=record.op.cap, args=record.shown_args())
                if record.op.provider:
                    op["provider"] = record.op.provider
    answer = {"plan_id": run.plan_id, "running": not run.finished, "paused": run.paused,
              "cancelled": run.cancel_requested, "description": run.description, "ops": ops}
    if run.transitions is not None:  # what the robot holds, always
        answer.update(run_id=run.run_id, state=run.state, path=path_of(run))
    if too_large:
        return cut_marker(answer, run.records.status_size() + json_size(answer) - json_size(ops))
    return answer


def tree(run) -> dict:
    """``get_plan_tree``'s answer: the plan's structure with every op's live state and armed stop point."""
    stop_point_of = run.stop_points.stop_point_of
    marked = _marked(run)
    view = {"plan_id": run.plan_id, "run_id": run.run_id, "description": run.description,
            "dialect": run.dialect, "root": run.root, "running": not run.finished,
            "paused": run.paused, "stepping": run.pausing.stepping, "cancelled": run.cancel_requested,
            "cancel_reason": run.cancel_reason, "outcome": None,
            "ops": [{**record.as_dict(whole_args=False), "stop_point": stop_point_of(op_id),
                     **(pause_marks(run, op_id) if marked else {})}
                    for op_id, record in run.records.items()]}
    if run.transitions is not None:
        view.update(transitions=transitions_of(run), path=path_of(run), state=run.state, trace=trace_view(run.trace))
    return view


def op(run, op_id: str) -> dict | None:
    """One op whole, as ``get_op`` answers it (args never cut), with its stop point and pause marks; None when
    the plan has no such op."""
    record = run.records.get(op_id)
    if record is None:
        return None
    found = record.as_dict()
    found.update(pause_marks(run, op_id))
    found["stop_point"] = run.stop_points.stop_point_of(op_id)
    return found


def feedback(run, max_output_chars: int) -> dict:
    """``get_plan_feedback``'s answer while the plan runs: each call that finished so far."""
    calls = []
    for op_id, record in run.records.items():
        state, ended_at = record.state, record.ended_at  # read once: the ticking thread moves them on
        if state in FINAL_STATES and record.op.cap is not None and ended_at is not None \
                and record.started_at is not None:
            calls.append((op_id, record.op.cap, state, record.result, record.detail, ended_at))
    answer = {"plan_id": run.plan_id, "running": not run.finished, "outcome": None, "error": run.error,
              "cancel_reason": run.cancel_reason, "ops": call_entries(calls, max_output_chars)}
    if run.transitions is not None:
        answer["path"] = path_of(run)
    return answer


# --- a finished plan, from its final record -------------------------------------------------------------------

def finished_listing(record: dict) -> dict:
    """The record as ``get_finished_plans`` lists it."""
    return {key: record.get(key) for key in _FINISHED_LISTED} | {"op_count": len(record["ops"])}


def finished_tree(record: dict) -> dict:
    """``get_plan_tree``'s answer for a finished plan: no stop point armed any more, args shown as views show
    them."""
    view = {key: record.get(key) for key in _FINISHED_KEYS}
    view.update(running=False, paused=False, stepping=False, failed_op=record["failed_op"],
                ops=[{**op, "stop_point": None, "args": shown(op["args"])} if "args" in op else
                     {**op, "stop_point": None} for op in record["ops"]])
    if "transitions" in record:
        view.update(transitions=record["transitions"], path=record["path"], state=record["state"],
                    trace=trace_view(record["trace"]))
    return view


def finished_op(record: dict, op_id: str) -> dict | None:
    """One op of a finished plan whole, as ``get_op`` answers it; None when the plan has no such op."""
    found = next((dict(op) for op in record["ops"] if op["op_id"] == op_id), None)
    if found is not None:
        found["stop_point"] = None
    return found


def finished_feedback(record: dict, max_output_chars: int) -> dict:
    """``get_plan_feedback``'s answer for a finished plan: each call that started and finished."""
    calls = [(op["op_id"], op["cap"], op["state"], op["result"], op["detail"], op["ended_at"])
             for op in record["ops"] if op["state"] in FINAL_STATES and op.get("cap") is not None
             and op["started_at"] is not None and op["ended_at"] is not None]
    answer = {"plan_id": record["plan_id"], "running": False, "outcome": record["outcome"], "error": record["error"],
              "cancel_reason": record["cancel_reason"], "ops": call_entries(calls, max_output_chars)}
    if "path" in record:
        answer["path"] = record["path"]
    return answer


# --- what a live run reports of itself ------------------------------------------------------------------------

def plan_shape(run) -> dict:
    """What ran, as a journal records it for a replay: ``{root, ops: [{op_id, kind, description, children,
    node?, cap?, args?, provider?}], transitions?, state?}`` (``node``: the BehaviorTree.CPP node a control op
    runs as; step graphs: their transitions and the world they start from)."""
    ops = [({"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children)}
            if op.node is None else {"op_id": op.op_id, "kind": op.kind, "description": op.description,
                                     "children": list(op.children), "node": op.node})
           if op.cap is None else
           {"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children),
            "cap": op.cap, "args": op.args, "provider": op.provider} if op.provider else
           {"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children),
            "cap": op.cap, "args": op.args}
           for op in run.plan.ops.values()]
    shape = {"root": run.root, "ops": ops}
    if run.transitions is not None:
        shape.update(transitions=transitions_of(run), state=run.state)
    return shape


def failed_op(records) -> dict | None:
    """The first op, in plan order, that ended failed or timed out without children to blame:
    ``{op_id, description, error}`` (its call's error, else its detail)."""
    for record in records.values():
        if record.state in ("failed", "timeout") and not record.op.children:
            result = record.result
            error = result.get("error") if type(result) is dict else None
            return {"op_id": record.op.op_id, "description": record.op.description, "error": error or record.detail}
    return None


def final_record(run) -> dict:
    """A live run's final record, once it finished: its outcome, every op's record, and for step graphs the
    path it took (what ``get_plan_result`` answers and ``plan_complete`` sums up)."""
    cancelled = run.cancel_requested
    failed = run.error is not None or cancelled or run.tree_failed
    outcome = "cancelled" if cancelled else ("failed" if failed else "succeeded")
    plan = run.plan
    record = {"plan_id": run.plan_id, "run_id": run.run_id, "description": run.description,
              "dialect": run.dialect, "shape": plan.shape, "outcome": outcome,
              "any_failed": failed, "cancelled": cancelled, "cancel_reason": run.cancel_reason,
              "error": run.error, "control_only": run.control_only,
              "started_at": run.started_at, "ended_at": run.ended_at,
              "duration_s": (run.ended_at - run.started_at) if run.started_at and run.ended_at else 0.0,
              "input": dict(plan.meta), "root": run.root,
              "ops": [record.as_dict() for record in run.records.values()],
              "failed_op": failed_op(run.records) if failed else None}
    if run.transitions is not None:
        record["transitions"] = transitions_of(run)
        terminal = run.terminal or ("stop" if cancelled or run.error else None)
        reason = run.terminal_reason or run.cancel_reason or run.error
        record.update(terminal=terminal, terminal_reason=reason, trace=list(run.trace), state=run.state,
                      path=path_of(run) + ([terminal] if terminal else []))
    return record
