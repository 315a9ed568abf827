"""Starting a composite afresh: what every composite of ours does when it is ticked while not RUNNING."""
from __future__ import annotations

import py_trees
from py_trees.common import Status


def restart(composite: py_trees.composites.Composite) -> None:
    """Reset children left finished by an earlier run, then ``initialise`` (as py_trees' Sequence does)."""
    for child in composite.children:
        if child.status != Status.INVALID:
            child.stop(Status.INVALID)
    composite.initialise()
