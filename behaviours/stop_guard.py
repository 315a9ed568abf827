"""The stop-guard decorator that wraps every op and reports its state."""
from __future__ import annotations

import py_trees
from py_trees.common import Status

from .action import CapabilityAction
from .plan_hooks import PlanHooks


class StopGuard(py_trees.decorators.Decorator):
    """Wraps one op: checks its stop points and reports its state changes.

    On tick enter (the op is about to start, its child not yet initialised) it
    checks ``on_enter``; when the child returns SUCCESS or FAILURE it checks
    ``on_complete``. A fired stop point asks the runtime to cancel the plan.

    Statuses:
        RUNNING: the op runs, or a stop point fired (or the plan is being cancelled and the
            op was held back unstarted) and the plan's teardown is due.
        SUCCESS / FAILURE: the op finished so and no stop point fired.
        INVALID (from RUNNING): the plan was torn down; the op is reported canceled.
    """

    def __init__(self, name: str, child: py_trees.behaviour.Behaviour, op_id: str):
        super().__init__(name=name, child=child)
        self.op_id = op_id
        self.hooks: PlanHooks | None = None
        self.fired: str | None = None
        self._finished_as: str | None = None
        self._held_back = False
        self._held_result: dict | None = None

    def setup(self, **kwargs) -> None:
        """Takes ``plan``: the run's PlanHooks."""
        self.hooks = kwargs["plan"]

    def tick(self):
        # Decorator.tick would always tick the child; an on_enter stop must not.
        if self.status != Status.RUNNING:
            self.fired = self._held_result = None
            self._held_back = self.hooks.cancel_requested
            if self._held_back:  # e.g. a sibling branch's stop point fired earlier in this tick
                self.status = Status.RUNNING
                yield self
                return
            if self.hooks.stop_point_armed(self.op_id, "on_enter"):
                yield from self._fire("on_enter")
                return
            self.hooks.op_state(self.op_id, "running")
        elif self.fired is not None or self._held_back:
            yield self
            return
        child = self.decorated
        yield from child.tick()
        if child.status == Status.RUNNING:
            self.status = Status.RUNNING
            yield self
            return
        result, detail = self._outcome()
        if self.hooks.stop_point_armed(self.op_id, "on_complete"):
            self._held_result = result
            yield from self._fire("on_complete", finished_as=_op_state(child))
            return
        self.hooks.op_state(self.op_id, _op_state(child), result=result, detail=detail)
        self.status = child.status
        yield self

    def update(self) -> Status:
        # Unused by tick() above; kept meaningful for code that calls it directly.
        return self.decorated.status

    def stop(self, new_status: Status) -> None:
        # Children first, so a teardown reports ops bottom-up.
        if new_status == Status.INVALID and self.decorated.status != Status.INVALID:
            self.decorated.stop(Status.INVALID)
        self.terminate(new_status)
        self.status = new_status

    def terminate(self, new_status: Status) -> None:
        if new_status == Status.INVALID and self.status == Status.RUNNING and not self._held_back:
            if self.fired == "on_enter":
                detail = "stop point on_enter fired: the op never started"
            elif self.fired == "on_complete":
                detail = f"stop point on_complete fired after the op {self._finished_as}"
            else:
                detail = "plan cancelled while the op ran"
            self.hooks.op_state(self.op_id, "canceled", result=self._held_result, detail=detail)

    def _fire(self, when: str, finished_as: str | None = None):
        self.fired = when
        self._finished_as = finished_as
        self.hooks.stop_point_fired(self.op_id, when)
        self.status = Status.RUNNING
        yield self

    def _outcome(self) -> tuple[dict | None, str | None]:
        child = self.decorated
        if isinstance(child, CapabilityAction):
            return child.result, None
        return None, operator_summary(child)


def _op_state(child: py_trees.behaviour.Behaviour) -> str:
    if isinstance(child, CapabilityAction):
        return child.final_state
    return "succeeded" if child.status == Status.SUCCESS else "failed"


def operator_summary(composite: py_trees.behaviour.Behaviour) -> str:
    """One English line on how a finished sequence or parallel's children ended."""
    children = composite.children
    total = len(children)
    succeeded = sum(1 for c in children if c.status == Status.SUCCESS)
    failed = [c.op_id for c in children if c.status == Status.FAILURE]
    noun = "branches" if getattr(composite, "waits_for_all", False) else "children"
    if not failed:
        return f"all {total} {noun} succeeded" if total else "no children: nothing to do"
    if noun == "branches":
        return f"{succeeded} of {total} branches succeeded; failed: {', '.join(failed)}"
    skipped = total - succeeded - len(failed)
    return f"child {failed[0]} failed after {succeeded} of {total} succeeded; {skipped} skipped"
