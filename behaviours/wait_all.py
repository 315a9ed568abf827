"""The parallel op: every child at once, waiting for all of them."""
from __future__ import annotations

import py_trees
from py_trees.common import ParallelPolicy, Status

from bt_exec.compat.py_trees import LeanBehaviour

from .op_behaviour import FINAL_STATUSES, RUNNING, CompositeOp


class WaitAllParallel(CompositeOp, py_trees.composites.Parallel, LeanBehaviour):
    """Starts every child and waits for all of them; a failed child does not cancel its siblings.

    py_trees' own Parallel stops the remaining children once its policy is decided;
    RTDL's parallel must not, so the tick is this class's own. It is a Parallel (with
    the SuccessOnAll policy, which its result matches) so tree displays draw it as one.

    Statuses:
        RUNNING: at least one child is still running (``current_child`` is the first of them),
            or the op was held back because the plan is being cancelled or is paused.
        SUCCESS: every child succeeded (or there are no children).
        FAILURE: every child finished and at least one failed.
        INVALID (from RUNNING): the plan was torn down; running children first, then the
            parallel, report ``canceled``.
    """

    waits_for_all = True

    def __init__(self, op_id: str, description: str):
        super().__init__(None, policy=ParallelPolicy.SuccessOnAll(synchronise=False))
        self.op_id = op_id
        self.description = description

    def tick(self):
        if self.status != RUNNING or self.held_back:
            if self.held_back_on_entry():
                yield self
                return
            self.enter()
        first_running = None
        failed = False
        for child in self.children:
            if child.status not in FINAL_STATUSES:
                yield from child.tick()
            if child.status == RUNNING:
                if first_running is None:
                    first_running = child
            elif child.status == Status.FAILURE:
                failed = True
        if first_running is not None:
            self.current_child = first_running
            self.status = RUNNING
        else:
            self.stop(Status.FAILURE if failed else Status.SUCCESS)
        yield self
