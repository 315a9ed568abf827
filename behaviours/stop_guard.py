"""The stop-guard decorator, placed above an op when a stop point (cancel or pause) is armed on it."""
from __future__ import annotations

import py_trees
from py_trees.common import Status

from bt_exec.compat.py_trees import AcyclicLinks, DerivedFeedback

from .op_behaviour import FINAL_STATUSES, RUNNING


class StopGuard(DerivedFeedback, AcyclicLinks, py_trees.decorators.Decorator):
    """Stops the plan at one op: checks ``on_enter`` when the op is entered and ``on_complete``
    when it completes. A fired stop point asks the runtime to cancel the whole plan; a fired
    pause point pauses it (on_enter: the op is held at its entry; on_complete: the op's
    report passes on and the next op is held) and is disarmed, so resuming lets the op go on.
    While the plan is paused or being cancelled the entry checks wait: an op held at its
    entry is checked again when it is entered for real.

    It sits only above ops with a stop point armed (``place_stop_guard``). The op
    reports its own state; while guarded, its reports pass through the guard,
    which holds the final one until the on_complete check: where that check
    fires, the op is reported ``canceled`` with what it finished as and its result.

    Statuses:
        RUNNING: the op runs, or a stop point fired (the plan's teardown is due).
        SUCCESS / FAILURE: the op finished so and no stop point fired.
        INVALID (from RUNNING): the plan was torn down; where a stop point fired, the op is
            reported ``canceled`` saying which one.
    """

    def __init__(self, op: py_trees.behaviour.Behaviour):
        self.fired: str | None = None
        super().__init__(name=f"stop point at [{op.op_id}]", child=op)
        self.op_id = op.op_id
        self.hooks = op.hooks
        self._held_final: tuple | None = None  # the op's final report, until the on_complete check
        self._checking = False

    def derived_feedback(self) -> str:
        """What tree viewers show beside the guard: the stop points armed on its op, or the one that fired.

        Derived each time it is read, so a stop point armed or disarmed shows at once, before the op is
        reached."""
        if self.fired is not None:
            return f"stop {self.fired} fired"
        if getattr(self, "hooks", None) is None:
            return ""
        hooks = self.hooks
        armed = [f"stop {when}" for when in ("on_enter", "on_complete") if hooks.stop_point_armed(self.op_id, when)]
        armed += [f"pause {when}" for when in ("on_enter", "on_complete") if hooks.pause_point_armed(self.op_id, when)]
        return f"{' and '.join(armed)} armed" if armed else "stop point disarmed"

    def setup(self, **kwargs) -> None:
        """Takes ``plan``: the run's PlanHooks."""
        self.hooks = kwargs["plan"]

    def shutdown(self) -> None:
        """The plan is released: its op reports to the plan again, so the op and this guard hold no cycle."""
        self.decorated.report_to = self.hooks

    def tick(self):
        # Decorator.tick always ticks the child; an on_enter stop must not start it.
        if self.status != RUNNING or self.decorated.held_back:
            if self.status != RUNNING:
                self.initialise()
            hooks = self.hooks
            if not hooks.cancel_requested and not hooks.paused:
                if hooks.stop_point_armed(self.op_id, "on_enter"):
                    self._fire("on_enter")
                    self.status = RUNNING
                    yield self
                    return
                if hooks.pause_point_armed(self.op_id, "on_enter"):
                    hooks.pause_point_fired(self.op_id, "on_enter")  # the op, ticked below, is held
        elif self.fired is not None:
            yield self
            return
        self._checking = True
        try:
            yield from self.decorated.tick()
        finally:
            self._checking = False
        new_status = self.update()
        if new_status != RUNNING:
            self.stop(new_status)
        self.status = new_status
        yield self

    def initialise(self) -> None:
        self.fired = self._held_final = None

    def update(self) -> Status:
        child_status = self.decorated.status
        if child_status not in FINAL_STATUSES:
            return RUNNING
        if self.hooks.stop_point_armed(self.op_id, "on_complete"):
            self._fire("on_complete")
            return RUNNING
        if self.hooks.pause_point_armed(self.op_id, "on_complete"):
            self.hooks.pause_point_fired(self.op_id, "on_complete")  # the next op to enter is held
        self._pass_on_held()
        return child_status

    def terminate(self, new_status: Status) -> None:
        if new_status != Status.INVALID or self.status != RUNNING or self.fired is None:
            return
        if self.fired == "on_enter":
            self.hooks.op_state(self.op_id, "canceled", None, "stop point on_enter fired: the op never started")
        else:
            state, result, _detail = self._held_final or ("finished", None, None)
            self.hooks.op_state(self.op_id, "canceled", result, f"stop point on_complete fired after the op {state}")

    def op_state(self, op_id: str, state: str, result: dict | None = None, detail: str | None = None) -> None:
        """The guarded op's reports: passed on, but a final one made while it is checked is held."""
        if self._checking and state not in ("running", "paused"):
            self._held_final = (state, result, detail)
        else:
            self.hooks.op_state(op_id, state, result, detail)

    def _pass_on_held(self) -> None:
        if self._held_final is not None:
            state, result, detail = self._held_final
            self._held_final = None
            self.hooks.op_state(self.op_id, state, result, detail)

    def _fire(self, when: str) -> None:
        self.fired = when
        self.hooks.stop_point_fired(self.op_id, when)


def place_stop_guard(op: py_trees.behaviour.Behaviour, is_root: bool) -> tuple[StopGuard, bool]:
    """The StopGuard above ``op``, placed there if there was none; and whether it is new.

    The guard takes the op's place in its parent or, for the tree's root (``is_root``),
    becomes the new root for the caller to install, leaving whatever holds the old
    root (a viewer's mirror) untouched. It adopts the op's status, so a running op
    goes on untouched: it is not restarted, cancelled or re-initialised.
    """
    if isinstance(op.parent, StopGuard):
        return op.parent, False
    parent = None if is_root else op.parent
    guard = StopGuard(op)  # sets op.parent to the guard
    op.report_to = guard
    guard.status = op.status
    if parent is not None:
        guard.parent = parent
        children = parent.children
        children[children.index(op)] = guard
        if parent.current_child is op:
            parent.current_child = guard
    return guard, True
