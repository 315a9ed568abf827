"""What a plan in flight reports of itself: its tree view, its shape for a journal, and its final record."""
from __future__ import annotations

from ..events.shapes import trace_view


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


def transitions(plan) -> dict:
    """Step graphs: step id -> {outcome: next step or terminal}."""
    return {step: dict(edges) for step, edges in plan.steps.transitions.items()}


def plan_shape(run) -> dict:
    """What ran, as a journal records it for a replay: ``{root, ops: [{op_id, kind, description, children,
    cap?, args?}], transitions?}`` (step graphs: their transitions)."""
    ops = [{"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children)}
           if op.cap is None else
           {"op_id": op.op_id, "kind": op.kind, "description": op.description, "children": list(op.children),
            "cap": op.cap, "args": op.args}
           for op in run.plan.ops.values()]
    shape = {"root": run.plan.root, "ops": ops}
    if run.world is not None:
        shape["transitions"] = transitions(run.plan)
    return shape


def tree_view(run) -> dict:
    """The plan's structure with every op's live state and armed stop point, for tree viewers."""
    stop_points = run.stop_points
    marked = run.pausing.held or stop_points.pause
    view = {"plan_id": run.plan_id, "run_id": run.run_id, "description": run.plan.description,
            "dialect": run.plan.dialect, "root": run.plan.root, "running": not run.finished,
            "paused": run.paused, "stepping": run.pausing.stepping, "cancelled": run.cancel_requested,
            "cancel_reason": run.cancel_reason, "outcome": None,
            "ops": [{**record.as_dict(whole_args=False), "stop_point": stop_points.stop_point_of(op_id),
                     **(pause_marks(run, op_id) if marked else {})}
                    for op_id, record in run.records.items()]}
    if run.world is not None:
        view.update(transitions=transitions(run.plan), path=[entry["step"] for entry in run.trace], state=run.state,
                    trace=trace_view(run.trace))
    return view


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
    """The plan's final record, once it finished: its outcome, every op's record, and for step graphs the path
    it took (what ``get_plan_result`` answers and ``plan_complete`` sums up)."""
    cancelled = run.cancel_requested
    failed = run.error is not None or cancelled or run.tree_failed
    outcome = "cancelled" if cancelled else ("failed" if failed else "succeeded")
    plan = run.plan
    record = {"plan_id": run.plan_id, "run_id": run.run_id, "description": plan.description,
              "dialect": plan.dialect, "shape": plan.shape, "outcome": outcome,
              "any_failed": failed, "cancelled": cancelled, "cancel_reason": run.cancel_reason,
              "error": run.error, "control_only": run.control_only,
              "started_at": run.started_at, "ended_at": run.ended_at,
              "duration_s": (run.ended_at - run.started_at) if run.started_at and run.ended_at else 0.0,
              "input": dict(plan.meta), "root": plan.root,
              "ops": [record.as_dict() for record in run.records.values()],
              "failed_op": failed_op(run.records) if failed else None}
    if run.world is not None:
        record["transitions"] = transitions(plan)
        terminal = run.terminal or ("stop" if cancelled or run.error else None)
        reason = run.terminal_reason or run.cancel_reason or run.error
        record.update(terminal=terminal, terminal_reason=reason, trace=list(run.trace), state=run.state,
                      path=[entry["step"] for entry in run.trace] + ([terminal] if terminal else []))
    return record
