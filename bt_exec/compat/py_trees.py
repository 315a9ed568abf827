"""Overrides of py_trees' internals: links between behaviours that form no reference cycle, and a tree whose tick
costs what the ticked path costs."""
from __future__ import annotations

import uuid
from functools import cached_property
from weakref import ref

import py_trees

WRITTEN_FOR = "2.6.0"
OVERRIDES = {
    "AcyclicLinks": "py_trees.behaviour.Behaviour's parent and iterator attributes",
    "LeanBehaviour": "py_trees.behaviour.Behaviour.__init__ (every attribute it sets)",
    "PlanTree": "py_trees.trees.BehaviourTree.setup, shutdown and tick (its visitors, handlers and count)",
    "DerivedFeedback": "py_trees.behaviour.Behaviour's feedback_message attribute",
    "ViewOnlyComposite": "py_trees.composites.Composite.stop and remove_child, which stop the children",
    "ViewOnlyDecorator": "py_trees.decorators.Decorator.stop, which stops the child",
}


class AcyclicLinks:
    """Mixin of every behaviour bt_exec builds: a tree of them holds its nodes only downwards.

    py_trees links a child to its parent (``parent``) and keeps in each behaviour a
    generator of its own ``tick`` (``iterator``, made anew on every ``stop`` and never
    read): both are reference cycles, so a released plan's tree would wait for a full
    run of the cyclic garbage collector, which a long-lived executor may not see for
    hundreds of plans. Here ``parent`` is held weakly (a tree viewer holding the root
    still walks it both ways) and ``iterator`` is not kept, so a tree nobody holds is
    freed at once by reference counting.
    """

    _parent_link: ref | None = None

    @property
    def parent(self):
        link = self._parent_link
        return None if link is None else link()

    @parent.setter
    def parent(self, node) -> None:
        self._parent_link = None if node is None else ref(node)

    @property
    def iterator(self) -> None:
        return None

    @iterator.setter
    def iterator(self, _generator) -> None:
        """py_trees sets it as a behaviour is made and stopped; dropped here, it holds no cycle."""


class LeanBehaviour(py_trees.behaviour.Behaviour):
    """The last base of the behaviours a plan has one of per op: py_trees' ``Behaviour.__init__`` without what
    each of them would pay for and few ever read.

    py_trees makes, for every behaviour, a uuid4 (``id``), a ``Logger``, its qualified name, an empty list of
    blackboard clients and a generator of its tick (``iterator``): on a 10,000-op plan that is most of the cost
    of building the tree. Here ``id``, ``logger``, ``qualified_name`` and ``blackboards`` are made when first
    read and then kept (a tree viewer reads the same id each time), ``status``, ``parent``, ``feedback_message``
    and ``blackbox_level`` are class-level defaults until set, and no iterator is made (py_trees never reads
    it). Being the last base, it is what py_trees' composites reach when their ``__init__`` calls
    ``Behaviour.__init__``. A subclass that works its ``name`` out when read passes None for it.
    """

    status = py_trees.common.Status.INVALID
    parent = None
    iterator = None
    feedback_message = ""
    blackbox_level = py_trees.common.BlackBoxLevel.NOT_A_BLACKBOX

    def __init__(self, name: str | None):
        if name is not None:
            if not isinstance(name, str):
                raise TypeError(f"a behaviour name should be a string, but you passed in {type(name)}")
            self.name = name
        self.children = []

    @cached_property
    def id(self) -> uuid.UUID:
        return uuid.uuid4()

    @cached_property
    def logger(self) -> py_trees.logging.Logger:
        return py_trees.logging.Logger(self.name)

    @cached_property
    def qualified_name(self) -> str:
        return f"{self.__class__.__qualname__}/{self.name}"

    @cached_property
    def blackboards(self) -> list:
        return []


class DerivedFeedback:
    """Mixin of a behaviour whose feedback message is worked out each time it is read (``derived_feedback()``).

    py_trees stores ``feedback_message`` as a plain attribute, set as a behaviour is made; here it is a property,
    and py_trees' writes to it are dropped, so the message can never go stale."""

    @property
    def feedback_message(self) -> str:
        return self.derived_feedback()

    @feedback_message.setter
    def feedback_message(self, _text: str) -> None:
        """py_trees sets it as the behaviour is made; the message is derived instead."""

    def derived_feedback(self) -> str:
        raise NotImplementedError


class ViewOnlyComposite(py_trees.composites.Composite):
    """A composite over behaviours it shows but does not own: stopping it, or removing a child, never stops a
    child (py_trees' ``Composite.stop`` and ``remove_child`` do)."""

    def stop(self, new_status: py_trees.common.Status = py_trees.common.Status.INVALID) -> None:
        self.status = new_status

    def remove_child(self, child) -> int:
        index = self.children.index(child)
        self.children.remove(child)
        child.parent = None
        return index


class ViewOnlyDecorator(py_trees.decorators.Decorator):
    """A decorator over a behaviour it shows but does not own: stopping it never stops the child (py_trees'
    ``Decorator.stop`` does), and it is never ticked, so its status is whatever was set."""

    def update(self) -> py_trees.common.Status:
        return self.status

    def stop(self, new_status: py_trees.common.Status = py_trees.common.Status.INVALID) -> None:
        self.status = new_status


_NOTHING_TO_SHUT_DOWN = py_trees.behaviour.Behaviour.shutdown


class PlanTree(py_trees.trees.BehaviourTree):
    """One plan's behaviour tree: set up once, ticked by the runner, shut down on release.

    py_trees' ``BehaviourTree.tick`` walks the whole tree after every tick for
    "full" visitors, even when none is attached: on a 1,000-op plan that walk costs
    far more than the tick itself. This tree walks only when a full visitor is
    attached; otherwise a tick runs the handlers and visitors exactly as py_trees
    does, over the nodes the tick visited.

    ``setup`` and ``shutdown`` visit every behaviour as py_trees' do (parents after
    their children), with one loop instead of a generator per tree level; ``shutdown``
    calls only the behaviours that override py_trees' own, which does nothing.
    """

    def setup(self, timeout=py_trees.common.Duration.INFINITE, visitor=None, **kwargs) -> None:
        if visitor is not None or timeout != py_trees.common.Duration.INFINITE:
            super().setup(timeout, visitor, **kwargs)  # what only py_trees' setup does: visitors, a timeout
            return
        for node in self._bottom_up():
            node.setup(**kwargs)

    def shutdown(self) -> None:
        for node in self._bottom_up():
            if type(node).shutdown is not _NOTHING_TO_SHUT_DOWN:
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
