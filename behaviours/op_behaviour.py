"""What every op behaviour shares: its op id, the plan it reports to, and where its reports go."""
from __future__ import annotations

from py_trees.common import Status

from .plan_hooks import PlanHooks

RUNNING = Status.RUNNING
FINAL_STATUSES = (Status.SUCCESS, Status.FAILURE)


class OpReports:
    """Mixin of every behaviour that stands for one plan op (an action, a sequence, a parallel).

    The op reports its own state: ``running`` when entered, its final state when
    it ends, ``canceled`` when torn down while running. Reports go to
    ``report_to``: the plan's hooks, or the StopGuard placed above the op, which
    holds the final report until its on_complete check.

    An op entered after the plan's cancel was requested (a stop point fired
    earlier in the same tick) is held back: it starts nothing, reports nothing
    (it stays ``pending``) and stays RUNNING until the teardown that follows.
    """

    op_id: str
    hooks: PlanHooks | None
    report_to: object | None
    held_back: bool

    def _take_hooks(self, kwargs: dict) -> None:
        self.hooks = self.report_to = kwargs["plan"]

    def report(self, state: str, result: dict | None = None, detail: str | None = None) -> None:
        self.report_to.op_state(self.op_id, state, result, detail)
