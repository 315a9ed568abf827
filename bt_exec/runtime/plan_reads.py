"""The read operations of a control surface (get_all_plans, get_plan_status, get_plan_tree, get_op,
get_plan_result, get_plan_feedback, get_plans_snapshot, get_finished_plans), answered from a table of plans: the
live executor's, or a replay's rebuilt plans. Both read ids, refuse and word their refusals here, and shape their
answers with ``plan_views``, so a replay answers as the executor did.
"""
from __future__ import annotations

from typing import Callable, Protocol

from ..compilers.control_values import id_text
from ..errors import BadArgument, Conflict, Issue, NotFound
from . import plan_views
from .budgets import quote
from .feedback import OUTPUT_CHARS, check_output_chars
from .op_views import MAX_WAIT_FOR_PLAN_S, OpView, op_view


def checked_id(value: object, name: str, caller: str) -> str:
    """A plan or op id as text, as plans write them: a non-empty string as it is, a non-negative integer (up to
    int64, as Robonix's Pilot writes ids) as its decimal string; BadArgument naming ``caller`` otherwise."""
    issues: list[Issue] = []
    text = id_text(value, name, "", issues)
    if text is None:
        raise BadArgument(f"{caller}: {issues[0].message}")
    return text


def checked_view(caller: str, states=None, op_ids=None, summary: bool = False, max_chars: int | None = None) -> OpView:
    """The narrower view of a status or record these arguments ask for; BadArgument naming what is wrong."""
    return op_view(caller, states, op_ids, summary, max_chars,
                   id_of=lambda value, name: checked_id(value, name, caller))


def checked_timeout(timeout_s: object, caller: str) -> float:
    """How long a ``wait_for_plan`` waits: ``timeout_s`` up to ``MAX_WAIT_FOR_PLAN_S``; BadArgument for anything
    but a non-negative number of seconds."""
    if type(timeout_s) not in (int, float) or not 0 <= timeout_s < float("inf"):
        raise BadArgument(f"{caller}: timeout_s must be a non-negative number of seconds, got {quote(timeout_s)}")
    return min(timeout_s, MAX_WAIT_FOR_PLAN_S)


def still_running(plan_id: str, waited: float, asked: float, caller: str = "wait_for_plan") -> dict:
    """``wait_for_plan``'s answer when the plan did not finish within ``waited`` seconds (``asked``: the wait
    asked for, which a longer one was capped from)."""
    capped = f" (timeout_s capped at {MAX_WAIT_FOR_PLAN_S:g})" if waited < asked else ""
    return {"plan_id": plan_id, "finished": False,
            "message": f"plan {quote(plan_id)} still running after {waited:g} s{capped}; call {caller} again, or "
                       "get_plan_status to see its ops"}


class PlanTable(Protocol):
    """Where the read operations find plans (the executor's runner, a replay's rebuilt plans)."""

    def active(self, plan_id: str):
        """The plan in flight (None once it finished)."""

    def live(self, plan_id: str):
        """The plan in flight or finishing (its end not yet published)."""

    def active_runs(self) -> list:
        """Every plan in flight."""

    def finished_record(self, plan_id: str) -> dict | None:
        """The final record of a finished plan still kept."""

    def finished_records(self, limit: int) -> list[dict]:
        """The newest ``limit`` final records kept, oldest first."""


class PlanReads:
    """The read operations over ``plans``; ``ever_submitted(plan_id)``: whether that plan was ever seen (a plan
    that was is no longer running, where one that never was is not found). Plans of pure control
    (``control_only``) are not listed."""

    def __init__(self, plans: PlanTable, ever_submitted: Callable[[str], bool]):
        self._plans = plans
        self._ever_submitted = ever_submitted

    def get_all_plans(self) -> dict:
        """The plans in flight: ``{count, plans: [{plan_id, description, op_count, cancelled, paused,
        stop_points}]}``."""
        plans = [plan_views.listing(run) for run in self._plans.active_runs() if not run.control_only]
        return {"count": len(plans), "plans": plans}

    def get_plans_snapshot(self) -> dict:
        """The plans in flight as the next prompt shows them: ``get_all_plans``' entries, each with its ``ops``."""
        plans = [plan_views.snapshot(run) for run in self._plans.active_runs() if not run.control_only]
        return {"count": len(plans), "plans": plans}

    def get_finished_plans(self, limit: int = 50) -> dict:
        """The newest ``limit`` finished plans still kept, newest first."""
        if not isinstance(limit, int) or isinstance(limit, bool) or limit < 0:
            raise BadArgument(f"get_finished_plans: limit must be a non-negative integer, got {quote(limit)}")
        plans = [plan_views.finished_listing(record) for record in reversed(self._plans.finished_records(limit))]
        return {"count": len(plans), "plans": plans}

    def get_plan_status(self, plan_id: object, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None, with_args: bool = True) -> dict:
        """A plan in flight's ops and their states, narrowed as asked; NotFound for a plan never seen, Conflict
        for one that finished."""
        view = checked_view("get_plan_status", states, op_ids, summary, max_chars)
        if type(with_args) is not bool:
            raise BadArgument(f"get_plan_status: with_args must be true or false, got {quote(with_args)}")
        return view.apply(self.plan_status(plan_id, None, with_args))

    def plan_status(self, plan_id: object, max_bytes: int | None, with_args: bool = False) -> dict:
        """``get_plan_status`` of every op; a status whose ops alone are over ``max_bytes`` is answered by its
        marker (``plan_views.status``)."""
        caller = "get_plan_status"
        plan_id = checked_id(plan_id, "plan_id", caller)
        run = self._plans.active(plan_id)
        if run is None:
            if not self._ever_submitted(plan_id):
                raise NotFound(f"{caller}: no plan {quote(plan_id)} was ever submitted to this executor; "
                               "call get_all_plans to list running plans")
            raise Conflict(f"{caller}: no active plan {quote(plan_id)} (it already finished or was "
                           "cancelled); call get_all_plans to list running plans, or get_plan_result for "
                           "a finished plan's record")
        return plan_views.status(run, with_args, max_bytes)

    def get_plan_tree(self, plan_id: object) -> dict:
        """A plan's ops with their children, states, stop points and results: in flight or finished."""
        plan_id = checked_id(plan_id, "plan_id", "get_plan_tree")
        run = self._plans.live(plan_id)
        record = self._plans.finished_record(plan_id)
        if record is not None:
            return plan_views.finished_tree(record)
        if run is None:
            raise _not_kept("get_plan_tree", plan_id)
        return plan_views.tree(run)

    def get_op(self, plan_id: object, op_id: object) -> dict:
        """One op of a plan in flight or kept, whole: ``{plan_id, running, op}``."""
        plan_id = checked_id(plan_id, "plan_id", "get_op")
        op_id = checked_id(op_id, "op_id", "get_op")
        run = self._plans.live(plan_id)
        record = self._plans.finished_record(plan_id)
        if record is not None:
            found, running = plan_views.finished_op(record, op_id), False
        elif run is not None:
            found, running = plan_views.op(run, op_id), True
        else:
            raise _not_kept("get_op", plan_id)
        if found is None:
            raise NotFound(f"get_op: plan {quote(plan_id)} has no op {quote(op_id)}; call get_plan_status "
                           "to see its op ids")
        return {"plan_id": plan_id, "running": running, "op": found}

    def get_plan_result(self, plan_id: object, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None) -> dict:
        """The final record of a finished plan, its ops narrowed as ``get_plan_status`` narrows them."""
        view = checked_view("get_plan_result", states, op_ids, summary, max_chars)
        return self.plan_result(checked_id(plan_id, "plan_id", "get_plan_result"), view)

    def plan_result(self, plan_id: str, view: OpView) -> dict:
        """``get_plan_result`` of an id already checked, through ``view``."""
        record = self._plans.finished_record(plan_id)
        if record is not None:
            # Two levels deep is what callers edit; a deepcopy of 10k op results costs more than the run. An op's
            # copy() clones its table, in about half dict(op)'s time.
            return view.apply({**record, "ops": [op.copy() for op in record["ops"]]})
        if self._plans.active(plan_id) is not None:
            raise Conflict(f"get_plan_result: plan {quote(plan_id)} is still running; use get_plan_status")
        raise NotFound(f"get_plan_result: no record of plan {quote(plan_id)} (never submitted, or too old to be kept)")

    def get_plan_feedback(self, plan_id: object, max_output_chars: int = OUTPUT_CHARS) -> dict:
        """What a planner reads back about a plan, finished or in flight (``plan_views.feedback``)."""
        plan_id = checked_id(plan_id, "plan_id", "get_plan_feedback")
        check_output_chars(max_output_chars, "get_plan_feedback")
        run = self._plans.live(plan_id)
        record = self._plans.finished_record(plan_id)
        if record is not None:
            return plan_views.finished_feedback(record, max_output_chars)
        if run is None:
            raise _not_kept("get_plan_feedback", plan_id)
        return plan_views.feedback(run, max_output_chars)

    def known(self, plan_id: str, caller: str) -> None:
        """NotFound, as the reads word it, when ``plan_id`` is neither live nor kept."""
        if self._plans.live(plan_id) is None and self._plans.finished_record(plan_id) is None:
            raise _not_kept(caller, plan_id)


def _not_kept(caller: str, plan_id: str) -> NotFound:
    return NotFound(f"{caller}: no plan {quote(plan_id)} is running or kept (never submitted, or too old); call "
                    "get_all_plans or get_finished_plans to list plans")
