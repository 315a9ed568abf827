"""A parallel that waits for every child and never cancels siblings."""
from __future__ import annotations

import py_trees
from py_trees.common import Status

from .restart import restart

_FINISHED = (Status.SUCCESS, Status.FAILURE)


class WaitAllParallel(py_trees.composites.Composite):
    """Starts every child and waits for all of them; a failed child does not cancel its siblings.

    (py_trees' own Parallel stops the remaining children once its policy is
    decided; RTDL's parallel must not.)

    Statuses:
        RUNNING: at least one child is still running.
        SUCCESS: every child succeeded (or there are no children).
        FAILURE: every child finished and at least one failed.
    """

    waits_for_all = True

    def tick(self):
        if self.status != Status.RUNNING:
            restart(self)
        running = failed = False
        for child in self.children:
            if child.status not in _FINISHED:
                yield from child.tick()
            if child.status == Status.RUNNING:
                running = True
            elif child.status == Status.FAILURE:
                failed = True
        if running:
            self.status = Status.RUNNING
        else:
            self.stop(Status.FAILURE if failed else Status.SUCCESS)
        yield self
