"""The py_trees_ros seam: host the running plans' trees in a ``py_trees_ros.trees.BehaviourTree``.

Then ``py-trees-tree-watcher`` (and py_trees_ros_viewer) show them. The plans
are still ticked by the executor, never by this tree: its root is a
``Mirror`` whose tick only reports the plans' behaviours as they are, so the
BehaviourTree's snapshot visitor sees their statuses change and publishes.
Used only when py_trees_ros imports (a real Jazzy install:
``apt install ros-jazzy-py-trees-ros``); ``available()`` says whether it does.
"""
from __future__ import annotations

import logging

import py_trees
from py_trees.common import Status

log = logging.getLogger(__name__)


def available() -> str | None:
    """None when py_trees_ros imports, else why not."""
    try:
        import py_trees_ros.trees  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"py_trees_ros is not importable ({type(exc).__name__}: {exc})"
    return None


class Mirror(py_trees.composites.Composite):
    """A root over the running plans' roots that never ticks them: it yields them as they stand."""

    def tick(self):
        self.status = Status.RUNNING
        for child in list(self.children):
            for behaviour in child.iterate():
                if behaviour.status != Status.INVALID:
                    yield behaviour
        yield self

    def stop(self, new_status: Status = Status.INVALID) -> None:
        self.status = new_status  # the plans are the executor's to stop, never this root's

    def remove_child(self, child) -> int:
        index = self.children.index(child)  # unlike Composite's, never stops the child: it is the executor's
        self.children.remove(child)
        if child.parent is self:  # a plan root that became a guard's child keeps that parent
            child.parent = None
        return index


class MirrorHost:
    """Keeps a ``Mirror`` root's children equal to the executor's running plan roots.

    ``tree``: a py_trees BehaviourTree whose root is a Mirror. Plans come and go
    through ``insert_subtree`` / ``prune_subtree``, so the tree's update handler
    (py_trees_ros: publish a snapshot) hears of it; ``update()`` then ticks the
    tree, which only reports. The Mirror's children are compared with the plan
    roots by identity, not by plan id: a stop point armed on a plan's root op
    puts a guard in that op's place, and the guard is the plan's root from then on.
    """

    def __init__(self, tree, executor):
        self.tree = tree
        self.root = tree.root
        self.executor = executor

    def update(self) -> None:
        roots = list(self.executor.behaviour_trees().values())
        running = {id(root) for root in roots}
        stale = [child for child in self.root.children if id(child) not in running]
        for child in stale:
            # Not prune_subtree: it finds the parent through child.parent, and a root op the executor
            # put a guard above has that guard as its parent now.
            self.root.remove_child(child)
        if stale and self.tree.tree_update_handler is not None:
            self.tree.tree_update_handler()
        hosted = {id(child) for child in self.root.children}
        for root in roots:
            if id(root) not in hosted:
                self.tree.insert_subtree(root, self.root.id, len(self.root.children))
        self.tree.tick()

    def clear(self) -> None:
        for child in list(self.root.children):
            self.root.remove_child(child)
        if self.tree.tree_update_handler is not None:
            self.tree.tree_update_handler()


class TreeWatcherSeam:
    """A py_trees_ros BehaviourTree over a ``Mirror`` of the running plans; ``update()`` republishes on change."""

    def __init__(self, node, executor, name: str = "bt_exec"):
        import py_trees_ros.trees

        self.node = node
        self.tree = py_trees_ros.trees.BehaviourTree(Mirror(name), unicode_tree_debug=False)
        try:  # py_trees_ros that can share our node; older ones make their own ("tree", default context)
            self.tree.setup(node=node, timeout=5.0)
        except TypeError:
            self.tree.setup(timeout=5.0)
        self.host = MirrorHost(self.tree, executor)

    @property
    def root(self):
        return self.tree.root

    @property
    def own_node(self):
        """The node py_trees_ros made for itself (to spin and destroy), or None when it uses ours."""
        return self.tree.node if self.tree.node is not self.node else None

    def update(self) -> None:
        self.host.update()

    def close(self) -> None:
        self.host.clear()
        own = self.own_node
        if own is not None:
            own.destroy_node()
