"""A plan's py_trees BehaviourTree, whose tick costs what the ticked path costs."""
from __future__ import annotations

import py_trees


class PlanTree(py_trees.trees.BehaviourTree):
    """One plan's behaviour tree: set up once, ticked by the runner, shut down on release.

    py_trees' ``BehaviourTree.tick`` walks the whole tree after every tick for
    "full" visitors, even when none is attached: on a 1,000-op plan that walk costs
    far more than the tick itself. This tree walks only when a full visitor is
    attached; otherwise a tick runs the handlers and visitors exactly as py_trees
    does, over the nodes the tick visited.

    ``setup`` and ``shutdown`` visit every behaviour as py_trees' do (parents after
    their children), with one loop instead of a generator per tree level.
    """

    def setup(self, timeout=py_trees.common.Duration.INFINITE, visitor=None, **kwargs) -> None:
        if visitor is not None or timeout != py_trees.common.Duration.INFINITE:
            super().setup(timeout, visitor, **kwargs)  # what only py_trees' setup does: visitors, a timeout
            return
        for node in self._bottom_up():
            node.setup(**kwargs)

    def shutdown(self) -> None:
        for node in self._bottom_up():
            node.shutdown()

    def _bottom_up(self) -> list:
        """Every behaviour, each after its children (the order of ``root.iterate()``)."""
        order, stack = [], [self.root]
        while stack:
            node = stack.pop()
            order.append(node)
            stack.extend(node.children)
        order.reverse()
        return order

    def tick(self, pre_tick_handler=None, post_tick_handler=None) -> None:
        visitors = self.visitors
        if any(visitor.full for visitor in visitors):
            super().tick(pre_tick_handler, post_tick_handler)
            return
        if pre_tick_handler is not None:
            pre_tick_handler(self)
        for handler in self.pre_tick_handlers:
            handler(self)
        if visitors:
            for visitor in visitors:
                visitor.initialise()
            for node in self.root.tick():
                for visitor in visitors:
                    node.visit(visitor)
            for visitor in visitors:
                visitor.finalise()
        else:
            for _node in self.root.tick():
                pass
        for handler in self.post_tick_handlers:
            handler(self)
        if post_tick_handler is not None:
            post_tick_handler(self)
        self.count += 1
