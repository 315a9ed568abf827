"""What every op behaviour shares: its op id, the plan it reports to, and where its reports go."""
from __future__ import annotations

from contextlib import contextmanager
from contextvars import ContextVar
from functools import cached_property

from py_trees.common import Status

from bt_exec.compat.py_trees import AcyclicLinks

from .plan_hooks import PlanHooks
from .summary import children_summary

RUNNING = Status.RUNNING
FINAL_STATUSES = (Status.SUCCESS, Status.FAILURE)
NAME_DESCRIPTION_CHARS = 60
PLAN_CANCELLED = "plan cancelled while the op ran"
_HALT_REASON: ContextVar[str | None] = ContextVar("halt_reason", default=None)


def canceled_detail() -> str:
    """Why an op torn down while running ends ``canceled``: the reason of the node halting it, if one does (a
    BehaviorTree.CPP node halts children it no longer needs), else its plan's cancel."""
    return _HALT_REASON.get() or PLAN_CANCELLED


@contextmanager
def halting(reason: str):
    """Ops torn down inside this block were halted by a node of their plan, for ``reason``, not by its cancel."""
    token = _HALT_REASON.set(reason)
    try:
        yield
    finally:
        _HALT_REASON.reset(token)


def short_name(text: str) -> str:
    """A description fit for a node name: printable (names reach terminals), whitespace folded, cut short."""
    if not text.isprintable():
        text = "".join(ch if ch.isprintable() else " " for ch in text)
    if "  " in text or text[:1] == " " or text[-1:] == " ":
        text = " ".join(text.split())
    return text if len(text) <= NAME_DESCRIPTION_CHARS else text[:NAME_DESCRIPTION_CHARS - 1] + "…"


class OpReports(AcyclicLinks):
    """Mixin of every behaviour that stands for one plan op (an action, a sequence, a parallel).

    The op reports its own state: ``running`` when entered, its final state when
    it ends, ``canceled`` when torn down while running. Reports go to
    ``report_to``: the plan's hooks, or the StopGuard placed above the op, which
    holds the final report until its on_complete check.

    An op entered after the plan's cancel was requested (a stop point fired
    earlier in the same tick) is held back: it starts nothing, reports nothing
    (it stays ``pending``) and stays RUNNING until the teardown that follows.
    An op entered while its plan is paused is held back the same way, and is
    entered afresh on a later tick once the plan resumed (``held_back`` makes
    its tick check the entry again).

    Its py_trees ``name`` is ``[op id] description`` (the description made fit by ``short_name``), worked
    out when first read: a plan's many ops are built for running, and few names are ever shown.
    """

    op_id: str
    description: str
    hooks: PlanHooks | None = None
    report_to: object | None = None
    held_back = False

    @cached_property
    def name(self) -> str:
        return f"[{self.op_id}] {short_name(self.description)}"

    def report(self, state: str, result: dict | None = None, detail: str | None = None) -> None:
        self.report_to.op_state(self.op_id, state, result, detail)

    def held_back_on_entry(self) -> bool:
        """Called when the op is entered: whether it is held back (it is then RUNNING, doing nothing)."""
        hooks = self.hooks
        held = hooks.cancel_requested or (hooks.holding_entries and not hooks.may_enter(self.op_id))
        self.held_back = held
        if held:
            self.status = RUNNING
        return held


class CompositeOp(OpReports):
    """Mixin of the composite ops (sequence, parallel): setup, entry, and final reports with a summary."""

    def setup(self, **kwargs) -> None:
        """Takes ``plan``: the run's PlanHooks."""
        self.hooks = self.report_to = kwargs["plan"]

    def enter(self) -> None:
        """Start afresh: reset children an earlier run left finished, then ``initialise``."""
        for child in self.children:
            if child.status != Status.INVALID:
                child.stop(Status.INVALID)
        self.initialise()

    def initialise(self) -> None:
        self.report("running")

    def terminate(self, new_status: Status) -> None:
        if new_status != Status.INVALID:
            self.report("succeeded" if new_status == Status.SUCCESS else "failed", detail=children_summary(self))
        elif self.status == RUNNING and not self.held_back:
            self.report("canceled", detail=canceled_detail())
