"""The sequence op: its children one after another, each once."""
from __future__ import annotations

import py_trees
from py_trees.common import Status

from bt_exec.compat.py_trees import LeanBehaviour

from .op_behaviour import RUNNING, CompositeOp


class OpSequence(CompositeOp, py_trees.composites.Sequence, LeanBehaviour):
    """Ticks its children in order, each until it finishes (a py_trees Sequence with memory).

    Statuses:
        RUNNING: the current child runs (``current_child``), or the op was held back because
            the plan is being cancelled or is paused.
        SUCCESS: every child succeeded (or there are none).
        FAILURE: a child failed; the children after it never start.
        INVALID (from RUNNING): the plan was torn down; running children first, then the
            sequence, report ``canceled``.
    """

    def __init__(self, op_id: str, description: str):
        super().__init__(None, memory=True)
        self.op_id = op_id
        self.description = description
        self._index = 0

    def tick(self):
        # Sequence.tick's lifecycle, keeping the current child's index instead of finding it in
        # the children list on every tick (a cost that grows with the sequence's length).
        if self.status != RUNNING or self.held_back:
            if self.held_back_on_entry():
                yield self
                return
            self._index = 0
            self.enter()
        children = self.children
        index = self._index
        while index < len(children):
            child = children[index]
            self.current_child = child
            yield from child.tick()
            if child.status == RUNNING:
                self._index = index
                self.status = RUNNING
                yield self
                return
            if child.status != Status.SUCCESS:
                self.stop(child.status)
                yield self
                return
            index += 1
        self.stop(Status.SUCCESS)
        yield self
