"""The control nodes of BehaviorTree.CPP 4 and Nav2, with their semantics (which child runs when, what halts)."""
from __future__ import annotations

from .bt_node import EVERY_PERIOD, FAILURE, RUNNING, SUCCESS, ControlNode, was_held, was_skipped
from .bt_ports import PortSpec


class Sequence(ControlNode):
    """BehaviorTree.CPP's Sequence: children in order, each until it ends; a running child is ticked again on the
    next tick without the earlier ones (they are not re-checked). A child that fails fails the sequence, and its
    next run starts again at the first child. All succeeded (or skipped): SUCCESS."""

    NODE = "Sequence"
    keeps_place_after_failure = False  # SequenceWithMemory: the next run starts at the child that failed
    _index = 0
    _skips = 0

    def start(self, fresh: bool) -> None:
        if not self.keeps_place_after_failure:
            self._index = 0
        if self._index == 0:
            self._skips = 0

    def step(self):
        children = self.children
        while self._index < len(children):
            child = children[self._index]
            status = yield from self.tick_child(child)
            if status == RUNNING:
                return RUNNING
            if status == FAILURE:
                if not self.keeps_place_after_failure:
                    self._index = 0
                self._detail = f"child {child.op_id} failed"
                return FAILURE
            if was_skipped(child):
                self._skips += 1
            self._index += 1
        self._index = 0
        self.skipped = self._skips == len(children)
        return SUCCESS

    def halted(self) -> None:
        if not self.keeps_place_after_failure:
            self._index = 0


class SequenceWithMemory(Sequence):
    """BehaviorTree.CPP's SequenceWithMemory: a Sequence whose next run, after a child failed or the node was
    halted, starts at that child (the children before it are not run again)."""

    NODE = "SequenceWithMemory"
    keeps_place_after_failure = True


class PassThrough(Sequence):
    """A custom control node or decorator a catalog declares but the library does not know: it runs its children
    as a Sequence does (one child: its child's status)."""

    NODE = "PassThrough"


class Fallback(ControlNode):
    """BehaviorTree.CPP's Fallback: children in order until one succeeds (SUCCESS); a failed or skipped child
    passes on to the next; all failed: FAILURE. A running child is ticked again without re-checking the earlier
    ones."""

    NODE = "Fallback"
    _index = 0
    _skips = 0

    def start(self, fresh: bool) -> None:
        self._index = self._skips = 0

    def step(self):
        children = self.children
        while self._index < len(children):
            child = children[self._index]
            status = yield from self.tick_child(child)
            if status == RUNNING:
                return RUNNING
            if status == SUCCESS and not was_skipped(child):
                self._index = 0
                self._detail = f"child {child.op_id} succeeded"
                return SUCCESS
            if status == SUCCESS:
                self._skips += 1
            self._index += 1
        self._index = 0
        if self._skips == len(children):
            self.skipped = True
            return SUCCESS
        return FAILURE

    def halted(self) -> None:
        self._index = 0


class _Reactive(ControlNode):
    """What ReactiveSequence and ReactiveFallback share: every tick runs the children from the first again (each
    earlier child's check is a new run, a running child goes on untouched), so the node asks to be ticked every
    period while it runs. When a child runs, every other child is reset (a running one halted). While the plan is
    paused or being cancelled no check runs again: the running child alone is ticked."""

    ends_on = SUCCESS  # the child status that ends the node with that status
    _running: int | None = None

    def start(self, fresh: bool) -> None:
        self._running = None

    def step(self):
        self.want(EVERY_PERIOD)
        children = self.children
        hooks = self.hooks
        first = self._running if self._running is not None and (hooks.paused or hooks.cancel_requested) else 0
        skips = 0
        for index in range(first, len(children)):
            child = children[index]
            status = yield from self.tick_child(child)
            if status == RUNNING:
                if self._running is not None and self._running != index and (
                        was_held(child) or self.hooks.cancel_requested):
                    return RUNNING  # a check held at its entry (a pause point on it): the running child goes on
                self.reset_others(index, f"child {child.op_id} runs")
                self._running = index
                return RUNNING
            if was_skipped(child):
                skips += 1
                self.reset(child, "skipped")
                continue
            if status == self.ends_on:
                self._detail = f"child {child.op_id} {'succeeded' if status == SUCCESS else 'failed'}"
                return status
        if skips == len(children):
            self.skipped = True
            return SUCCESS
        return FAILURE if self.ends_on == SUCCESS else SUCCESS

    def halted(self) -> None:
        self._running = None


class ReactiveSequence(_Reactive):
    """BehaviorTree.CPP's ReactiveSequence: every tick ticks the children from the first; a child that fails
    (an earlier condition no longer holding) fails the node and halts the running child."""

    NODE = "ReactiveSequence"
    ends_on = FAILURE


class ReactiveFallback(_Reactive):
    """BehaviorTree.CPP's ReactiveFallback: every tick ticks the children from the first; a child that succeeds
    ends the node SUCCESS and halts the running child."""

    NODE = "ReactiveFallback"
    ends_on = SUCCESS


def _threshold(value: int, children: int) -> int:
    """A count port as BehaviorTree.CPP reads it: a negative one counts from the number of children (-1: all)."""
    return value if value >= 0 else max(children + value + 1, 0)


class Parallel(ControlNode):
    """BehaviorTree.CPP's Parallel: every child ticked each tick until it ends; SUCCESS once ``success_count``
    succeeded (-1: all), FAILURE once ``failure_count`` failed or success is out of reach; either way the children
    still running are halted."""

    NODE = "Parallel"
    PORTS = {"success_count": PortSpec("in", "-1", "int"), "failure_count": PortSpec("in", "1", "int")}
    _completed: set = frozenset()
    _successes = _failures = _need_success = _need_failure = 0
    _counts_skips = False

    def start(self, fresh: bool) -> str | None:
        success_count, failure_count = self.port("success_count"), self.port("failure_count")
        count = len(self.children)
        self._need_success = _threshold(success_count, count)
        self._need_failure = _threshold(failure_count, count)
        self._counts_skips = success_count < 0
        self._completed, self._successes, self._failures = set(), 0, 0
        return parallel_problem(count, success_count, failure_count)

    def step(self):
        children = self.children
        count = len(children)
        skips = 0
        first_running = None
        for index, child in enumerate(children):
            if index not in self._completed:
                yield from child.tick()
                status = child.status
                if status == RUNNING:
                    if first_running is None:
                        first_running = child
                elif status == FAILURE:
                    self._completed.add(index)
                    self._failures += 1
                elif was_skipped(child):
                    skips += 1
                else:
                    self._completed.add(index)
                    self._successes += 1
            if self._successes >= self._need_success or (
                    self._counts_skips and self._successes + skips >= self._need_success):
                self._detail = f"{self._successes} of {count} children succeeded (success_count {self._need_success})"
                return SUCCESS
            if count - self._failures < self._need_success or self._failures == self._need_failure:
                self._detail = f"{self._failures} of {count} children failed (failure_count {self._need_failure})"
                return FAILURE
        if skips == count:
            self.skipped = True
            return SUCCESS
        self.current_child = first_running
        return RUNNING


def parallel_problem(children: int, success_count: int, failure_count: int) -> str | None:
    """Why a Parallel with these ports and children can never decide (BehaviorTree.CPP refuses it), else None."""
    if children < _threshold(success_count, children):
        return f"success_count {success_count} is more than its {children} children: it could never succeed"
    if children < _threshold(failure_count, children):
        return f"failure_count {failure_count} is more than its {children} children: it could never fail"
    return None


class ParallelAll(ControlNode):
    """BehaviorTree.CPP's ParallelAll: every child runs to its end (none is halted early); then FAILURE if at least
    ``max_failures`` failed (-1: all), else SUCCESS."""

    NODE = "ParallelAll"
    PORTS = {"max_failures": PortSpec("in", "1", "int")}
    _completed: set = frozenset()
    _failures = _max_failures = 0

    def start(self, fresh: bool) -> str | None:
        max_failures = self.port("max_failures")
        self._max_failures = _threshold(max_failures, len(self.children))
        self._completed, self._failures = set(), 0
        return parallel_all_problem(len(self.children), max_failures)

    def step(self):
        children = self.children
        skips = 0
        first_running = None
        for index, child in enumerate(children):
            if index in self._completed:
                continue
            yield from child.tick()
            status = child.status
            if status == RUNNING:
                if first_running is None:
                    first_running = child
            elif was_skipped(child):
                skips += 1
            else:
                self._completed.add(index)
                self._failures += status == FAILURE
        if skips == len(children):
            self.skipped = True
            return SUCCESS
        if skips + len(self._completed) >= len(children):
            self._detail = (f"{self._failures} of {len(children)} children failed "
                            f"(max_failures {self._max_failures})")
            return FAILURE if self._failures >= self._max_failures else SUCCESS
        self.current_child = first_running
        return RUNNING


def parallel_all_problem(children: int, max_failures: int) -> str | None:
    """Why a ParallelAll with this port and children is refused (BehaviorTree.CPP's check), else None."""
    if children < _threshold(max_failures, children):
        return f"max_failures {max_failures} is more than its {children} children: it could never fail"
    return None


class IfThenElse(ControlNode):
    """BehaviorTree.CPP's IfThenElse: the first child (the condition) runs once per run; SUCCESS runs the second
    child, FAILURE the third (with two children: the node fails); the branch's status is the node's."""

    NODE = "IfThenElse"
    _branch = 0

    def start(self, fresh: bool) -> None:
        self._branch = 0

    def step(self):
        children = self.children
        if self._branch == 0:
            condition = children[0]
            status = yield from self.tick_child(condition)
            if status == RUNNING:
                return RUNNING
            if status == SUCCESS:
                self._branch = 1
            elif len(children) == 3:
                self._branch = 2
            else:
                self._detail = f"condition {condition.op_id} failed and there is no else branch"
                return FAILURE
        branch = children[self._branch]
        status = yield from self.tick_child(branch)
        if status == RUNNING:
            return RUNNING
        self._detail = f"{'then' if self._branch == 1 else 'else'} branch {branch.op_id} " \
                       f"{'succeeded' if status == SUCCESS else 'failed'}"
        self._branch = 0
        return status

    def halted(self) -> None:
        self._branch = 0


class WhileDoElse(ControlNode):
    """BehaviorTree.CPP's WhileDoElse: every tick runs the condition (the first child) again; SUCCESS ticks the
    second child (halting the third), FAILURE the third (halting the second; with two children the node fails).
    Reactive: ticked every period while it runs; while the plan is paused the running branch alone is ticked."""

    NODE = "WhileDoElse"
    _branch: int | None = None

    def start(self, fresh: bool) -> None:
        self._branch = None

    def step(self):
        self.want(EVERY_PERIOD)
        children = self.children
        hooks = self.hooks
        if self._branch is None or not (hooks.paused or hooks.cancel_requested):
            condition = children[0]
            status = yield from self.tick_child(condition)
            if status == RUNNING:
                return RUNNING
            if status == SUCCESS:
                if len(children) == 3:
                    self.reset(children[2], f"condition {condition.op_id} holds")
                self._branch = 1
            elif len(children) == 3:
                self.reset(children[1], f"condition {condition.op_id} no longer holds")
                self._branch = 2
            else:
                self._detail = f"condition {condition.op_id} failed and there is no else branch"
                return FAILURE
        branch = children[self._branch]
        status = yield from self.tick_child(branch)
        if status == RUNNING:
            return RUNNING
        self._detail = f"{'do' if self._branch == 1 else 'else'} branch {branch.op_id} " \
                       f"{'succeeded' if status == SUCCESS else 'failed'}"
        return status

    def halted(self) -> None:
        self._branch = None


class PipelineSequence(ControlNode):
    """Nav2's PipelineSequence: every tick ticks the children from the first; an earlier child still running goes
    on while a later one runs (a finished one runs again), the furthest child reached returns RUNNING; a failure
    fails the node and halts the rest; all succeeded: SUCCESS. Ticked every period while it runs; while the plan
    is paused the finished children before the furthest one do not run again."""

    NODE = "PipelineSequence"
    _last = 0

    def start(self, fresh: bool) -> None:
        self._last = 0

    def step(self):
        self.want(EVERY_PERIOD)
        hooks = self.hooks
        holding = hooks.paused or hooks.cancel_requested
        children = self.children
        skips = 0
        for index, child in enumerate(children):
            if holding and index < self._last and child.status != RUNNING:
                continue
            status = yield from self.tick_child(child)
            if status == FAILURE:
                self._last = 0
                self._detail = f"child {child.op_id} failed"
                return FAILURE
            if status == RUNNING:
                if index >= self._last:
                    self._last = index
                    return RUNNING
            elif was_skipped(child):
                skips += 1
        self._last = 0
        self.skipped = skips == len(children)
        return SUCCESS

    def halted(self) -> None:
        self._last = 0


class RecoveryNode(ControlNode):
    """Nav2's RecoveryNode (two children): the first child's SUCCESS is the node's; when it fails the second
    (the recovery) runs, and after its SUCCESS the first runs again, at most ``number_of_retries`` times; the
    recovery failing, or the retries spent, fails the node. A child that ended in this tick is run again at the
    next period, never twice in one tick."""

    NODE = "RecoveryNode"
    PORTS = {"number_of_retries": PortSpec("in", "1", "int")}
    _index = _retries = _retry_count = 0

    def start(self, fresh: bool) -> None:
        self._retries = self.port("number_of_retries")
        self._index = self._retry_count = 0

    def step(self):
        children = self.children
        ran: set[int] = set()
        while self._retry_count <= self._retries:
            child = children[self._index]
            if self._index in ran and child.status != RUNNING:
                self.want(EVERY_PERIOD)
                return RUNNING
            if child.status != RUNNING:
                ran.add(self._index)
            status = yield from self.tick_child(child)
            if status == RUNNING:
                return RUNNING
            if self._index == 0:
                if status == SUCCESS:
                    self.skipped = was_skipped(child)
                    self.reset(children[1], f"child {child.op_id} succeeded")
                    self._detail = f"child {child.op_id} succeeded after {self._retry_count} recoveries"
                    return SUCCESS
                if self._retry_count >= self._retries:
                    break
                self.reset(child, "it failed; recovery runs")
                self._index = 1
            elif status == FAILURE or was_skipped(child):
                self._detail = f"recovery {child.op_id} {'failed' if status == FAILURE else 'was skipped'}"
                return FAILURE
            else:
                self.reset(child, "it succeeded")
                self._retry_count += 1
                self._index = 0
        self._detail = f"child {children[0].op_id} failed after {self._retry_count} of {self._retries} retries"
        return FAILURE

    def halted(self) -> None:
        self._index = self._retry_count = 0


class RoundRobin(ControlNode):
    """Nav2's RoundRobin: ticks one child at a time, starting where the last run left off; a failed child passes
    on to the next (past the last: back to the first only with ``wrap_around``), a success ends the node SUCCESS
    (the next run starts at the child after it), all failed: FAILURE."""

    NODE = "RoundRobin"
    PORTS = {"wrap_around": PortSpec("in", "false", "bool")}
    _index = _failures = 0
    _wrap = False

    def start(self, fresh: bool) -> None:
        self._wrap = self.port("wrap_around")

    def step(self):
        children = self.children
        count = len(children)
        skips = 0
        while self._failures + skips < count:
            child = children[self._index]
            status = yield from self.tick_child(child)
            if status == RUNNING:
                return RUNNING
            skipped = was_skipped(child)
            self._index += 1
            if status == SUCCESS and not skipped:
                if self._index == count:
                    self._index = 0
                self._failures = 0
                self._detail = f"child {child.op_id} succeeded"
                for other in children:
                    self.reset(other, f"child {child.op_id} succeeded")
                return SUCCESS
            if skipped:
                skips += 1
            else:
                self._failures += 1
            if self._index == count:
                if not self._wrap:
                    break
                self._index = 0
        self._index = self._failures = 0
        if skips == count:
            self.skipped = True
            return SUCCESS
        return FAILURE

    def halted(self) -> None:
        self._index = self._failures = 0
