"""What every node of the library shares: its entry and reports, halting its children, its ports, its waking."""
from __future__ import annotations

import time

import py_trees
from py_trees.common import Status

from bt_exec.compat.py_trees import LeanBehaviour

from .bt_ports import PortSpec, PortValueError, blackboard_key
from .op_behaviour import RUNNING, CompositeOp, canceled_detail, halting
from .stop_guard import StopGuard

SUCCESS, FAILURE, INVALID = Status.SUCCESS, Status.FAILURE, Status.INVALID
EVERY_PERIOD = "every period"  # a node's wait: be ticked at every period of the runtime (else: a monotonic time)
_ENDED = {SUCCESS: "succeeded", FAILURE: "failed"}


def was_skipped(child) -> bool:
    """Whether a child that ended SUCCESS was skipped (BehaviorTree.CPP's SKIPPED: it did not run at all)."""
    if isinstance(child, StopGuard):
        child = child.decorated
    return child.status == SUCCESS and getattr(child, "skipped", False)


def was_held(child) -> bool:
    """Whether a RUNNING child is only held at its entry (its plan paused or being cancelled): it started nothing."""
    if isinstance(child, StopGuard):
        child = child.decorated
    return child.held_back


class BtNode(CompositeOp):
    """Mixin of the library's nodes: one op of a plan with BehaviorTree.CPP's semantics for ``NODE``.

    Each run of the op (its first tick, or a tick after it ended or was reset) reports ``running``, resets what
    its children kept of an earlier run, reads its ports (``start``: a port it cannot read fails the run, naming
    the port and key) and ticks on in ``step``, a generator over its children's ticks that returns the node's
    new status. A run ends ``succeeded`` or ``failed`` with a detail saying why; running children the node no
    longer needs are halted as BehaviorTree.CPP halts them: they end ``canceled``, the detail naming this node.
    An op entered while its plan is being cancelled or is paused is held back, as every op is.

    Waking: a node that waits for time (a timeout, a delay, a rate) or re-checks children on every tick
    (reactive nodes) asks for it in ``step`` (``want``): a time is a watched source polled at that time, a wait
    ``EVERY_PERIOD`` a source polled every period; either ends when the node ends or is halted. Time is read
    from ``clock`` (``time.monotonic`` unless the tree is set up with ``clock=``).

    BehaviorTree.CPP's SKIPPED (a child that did not run, e.g. a RunOnce after its run) is SUCCESS here with
    ``skipped`` set: a sequence goes past it, a fallback too, and a node whose children were all skipped is
    skipped itself.
    """

    NODE = ""
    PORTS: dict[str, PortSpec] = {}
    args: dict = {}
    reads: dict = {}
    clock = staticmethod(time.monotonic)
    current_child = None
    skipped = False
    _wait: object = None  # what the node waits on now: None, EVERY_PERIOD or a time
    _wanted: object = None  # what this tick's step asked for
    _detail: str | None = None  # the final report's detail, set by the step that ends the run

    def _take(self, op_id: str, description: str, args: dict | None, reads: dict | None) -> None:
        self.op_id = op_id
        self.description = description
        if args:
            self.args = args
        if reads:
            self.reads = reads

    @classmethod
    def build(cls, op_id: str, description: str, args: dict, reads: dict, children: list):
        """The node for one op: ``args`` its literal ports, ``reads`` its ports written ``{key}``."""
        return cls(op_id, description, children, args, reads)

    def setup(self, **kwargs) -> None:
        """Takes ``plan`` (the run's PlanHooks) and, optionally, ``clock`` (the seconds its timers count in)."""
        super().setup(**kwargs)
        clock = kwargs.get("clock")
        if clock is not None:
            self.clock = clock

    # --- the lifecycle -------------------------------------------------------------

    def tick(self):
        if self.status != RUNNING or self.held_back:
            fresh = self.status == INVALID or self.held_back
            if self.held_back_on_entry():
                yield self
                return
            self.skipped = False
            self.enter()
            try:
                problem = self.start(fresh)
            except PortValueError as exc:
                problem = str(exc)
            if problem is not None:
                self.end(FAILURE, problem)
                yield self
                return
        self._wanted = None
        status = yield from self.step()
        if status == RUNNING:
            self.status = RUNNING
            self._set_wait(self._wanted)
        else:
            self.end(status)
        yield self

    def update(self) -> Status:
        """py_trees' hook, unused: ``tick`` steps the node itself."""
        return self.status

    def start(self, fresh: bool) -> str | None:
        """A run begins (``fresh``: the node was reset since it last ran, as BehaviorTree.CPP's IDLE): read the
        ports and set up. A text ends the run failed with that detail."""
        return None

    def step(self):
        """Tick the children this tick ticks (``yield from child.tick()``); return the node's status."""
        raise NotImplementedError
        yield

    def end(self, status: Status, detail: str | None = None) -> None:
        """End the run ``status``: children still running are halted first."""
        if detail is not None:
            self._detail = detail
        running = [child for child in self.children if child.status == RUNNING]
        if running:
            with halting(f"halted by {self.NODE} [{self.op_id}], which {_ENDED[status]}"):
                for child in running:
                    child.stop(INVALID)
        self.stop(status)

    def stop(self, new_status: Status = INVALID) -> None:
        if new_status == INVALID:
            self.current_child = None
            for child in self.children:
                if child.status != INVALID:
                    child.stop(INVALID)
        self.terminate(new_status)
        self.status = new_status

    def terminate(self, new_status: Status) -> None:
        self._set_wait(None)
        if new_status != INVALID:
            detail, self._detail = self._detail, None
            self.report(_ENDED[new_status], detail=detail or self.summary(new_status))
            return
        self.skipped = False
        if self.status == RUNNING:
            if not self.held_back:
                self.report("canceled", detail=canceled_detail())
            self.halted()

    def halted(self) -> None:
        """The node was halted while it ran: forget what BehaviorTree.CPP's ``halt`` makes it forget."""

    def summary(self, status: Status) -> str:
        """The final report's detail when the step gave none."""
        done = [child for child in self.children if child.status in _ENDED]
        failed = [child.op_id for child in done if child.status == FAILURE]
        text = f"{len(done) - len(failed)} of {len(self.children)} children succeeded"
        return f"{text}; failed: {', '.join(failed[:5])}{' ...' if len(failed) > 5 else ''}" if failed else text

    # --- what steps use -----------------------------------------------------------------

    def reset(self, child, reason: str) -> None:
        """BehaviorTree.CPP's haltChild: a running child is halted (``canceled``, for ``reason``), a finished one
        forgets its run (it starts afresh when ticked again)."""
        if child.status == RUNNING:
            with halting(f"halted by {self.NODE} [{self.op_id}]: {reason}"):
                child.stop(INVALID)
        elif child.status != INVALID:
            child.stop(INVALID)

    def reset_others(self, keep: int, reason: str) -> None:
        """Reset every child but the one at ``keep``."""
        for index, child in enumerate(self.children):
            if index != keep:
                self.reset(child, reason)

    def tick_child(self, child):
        """Tick ``child`` as the current one; return its status."""
        self.current_child = child
        yield from child.tick()
        return child.status

    def want(self, wait: object) -> None:
        """This tick's step asks to be ticked again: at every period (``EVERY_PERIOD``) or at a time."""
        self._wanted = wait

    def port(self, name: str) -> object:
        """Port ``name``'s value for this run: its literal text, the blackboard's value of the key it reads, or its
        default, read as its type. PortValueError names the port (and the key) when it has none or a bad one."""
        spec = self.PORTS[name]
        key = self.reads.get(name)
        if key is None:
            text = self.args.get(name, spec.default)
            if text is None:
                raise PortValueError(f"{self.NODE} [{self.op_id}]: port {name!r} is required and was not given")
            key = blackboard_key(text)
            value = text
        if key is not None:
            blackboard = self.hooks.blackboard
            if key not in blackboard:
                raise PortValueError(f"{self.NODE} [{self.op_id}]: input port {name!r} reads blackboard key {key!r}, "
                                     "which is not set")
            value = blackboard[key]
        try:
            return spec.parse(value)
        except PortValueError as exc:
            where = f"port {name!r}" + (f" (blackboard key {key!r})" if key is not None else "")
            raise PortValueError(f"{self.NODE} [{self.op_id}]: {where}: {exc}") from None

    # --- waking ---------------------------------------------------------------------------

    def poll(self) -> bool:
        """A watched source of its plan: True when the node must be ticked (its time came, or at every period)."""
        wait = self._wait
        if wait is EVERY_PERIOD:
            return True
        if wait is None:
            return False
        if self.clock() >= wait:
            return True
        self.hooks.poll_at(self, wait)  # polled early (told of news): look again at that time
        return False

    def _set_wait(self, wait: object) -> None:
        old = self._wait
        if wait == old:
            return
        hooks = self.hooks
        self._wait = wait
        if old is not None and (old is EVERY_PERIOD or wait is None or wait is EVERY_PERIOD):
            hooks.unwatch(self)
            old = None
        if wait is EVERY_PERIOD:
            hooks.watch(self)
        elif wait is not None:
            if old is None:
                hooks.watch_for_news(self)
            hooks.poll_at(self, wait)


class ControlNode(BtNode, py_trees.composites.Composite, LeanBehaviour):
    """A control node: children in order, ``current_child`` the one ticked last (the running one)."""

    def __init__(self, op_id: str, description: str, children: list, args: dict | None = None,
                 reads: dict | None = None):
        super().__init__(None)
        self._take(op_id, description, args, reads)
        for child in children:
            child.parent = self
        self.children = list(children)  # add_child reads each child's id: a cost per op for nothing


class DecoratorNode(BtNode, py_trees.decorators.Decorator, LeanBehaviour):
    """A decorator: one child, ``self.children[0]`` (a stop guard placed above the child takes its place)."""

    def __init__(self, op_id: str, description: str, children: list, args: dict | None = None,
                 reads: dict | None = None):
        super().__init__(None, children[0])
        self._take(op_id, description, args, reads)

    @property
    def decorated(self):
        return self.children[0]

    @decorated.setter
    def decorated(self, _child) -> None:
        """py_trees sets it as the decorator is made; it is read from ``children`` instead."""

    def summary(self, status: Status) -> str:
        return f"child {self.children[0].op_id} {_ENDED.get(self.children[0].status, 'was reset')}"

    def tick_child(self, child=None):
        """Tick the child; return its status."""
        return (yield from super().tick_child(self.children[0] if child is None else child))


class LeafNode(BtNode, LeanBehaviour):
    """A node without children that calls nothing (AlwaysSuccess, a script)."""

    def __init__(self, op_id: str, description: str, children: list, args: dict | None = None,
                 reads: dict | None = None):
        super().__init__(None)
        self._take(op_id, description, args, reads)

    def summary(self, status: Status) -> str:
        return self.NODE
