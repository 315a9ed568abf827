"""The decorators of BehaviorTree.CPP 4 and Nav2, with their semantics (loops, timers, rates)."""
from __future__ import annotations

import math

from .bt_node import EVERY_PERIOD, FAILURE, RUNNING, SUCCESS, DecoratorNode, was_skipped
from .bt_ports import PortSpec, PortValueError


class Inverter(DecoratorNode):
    """BehaviorTree.CPP's Inverter: the child's SUCCESS is FAILURE and its FAILURE SUCCESS; RUNNING and skipped
    pass through."""

    NODE = "Inverter"

    def step(self):
        status = yield from self.tick_child()
        if status == RUNNING or was_skipped(self.children[0]):
            self.skipped = status == SUCCESS
            return status
        return FAILURE if status == SUCCESS else SUCCESS


class ForceSuccess(DecoratorNode):
    """BehaviorTree.CPP's ForceSuccess: SUCCESS once the child ended, however it ended."""

    NODE = "ForceSuccess"
    forced = SUCCESS

    def step(self):
        status = yield from self.tick_child()
        if status == RUNNING or was_skipped(self.children[0]):
            self.skipped = status == SUCCESS
            return status
        return self.forced


class ForceFailure(ForceSuccess):
    """BehaviorTree.CPP's ForceFailure: FAILURE once the child ended, however it ended."""

    NODE = "ForceFailure"
    forced = FAILURE


class _Loop(DecoratorNode):
    """What Repeat and RetryUntilSuccessful share: the child runs again while ``again`` is its status, up to the
    count port (-1: without end). A child that ended in the tick it started in runs again at the next period
    (BehaviorTree.CPP ticks again at once), so a loop over calls that end at once costs one call per period; a
    child that ran across ticks runs again in the tick it ended in."""

    count_port = ""
    again = SUCCESS
    _limit = _done = 0

    def start(self, fresh: bool) -> None:
        self._limit = self.port(self.count_port)
        self._done = 0

    def step(self):
        child = self.children[0]
        started = False
        while self._limit == -1 or self._done < self._limit:
            if started and child.status != RUNNING:
                self.want(EVERY_PERIOD)
                return RUNNING
            started = started or child.status != RUNNING
            status = yield from self.tick_child()
            if status == RUNNING:
                return RUNNING
            if was_skipped(child):
                self.skipped = True
                self.reset(child, "skipped")
                return SUCCESS
            if status != self.again:
                return self.ended_early(status)
            self._done += 1
            self.reset(child, "its run ended")
        return self.ended_by_count()

    def halted(self) -> None:
        self._done = 0


class Repeat(_Loop):
    """BehaviorTree.CPP's Repeat: runs the child ``num_cycles`` times (-1: until it fails) while it succeeds;
    SUCCESS after the last cycle, FAILURE as soon as a cycle fails."""

    NODE = "Repeat"
    PORTS = {"num_cycles": PortSpec("in", None, "int")}
    count_port = "num_cycles"
    again = SUCCESS

    def ended_early(self, status):
        self._detail = f"cycle {self._done + 1} failed"
        return FAILURE

    def ended_by_count(self):
        self._detail = f"{self._done} cycles succeeded"
        return SUCCESS


class RetryUntilSuccessful(_Loop):
    """BehaviorTree.CPP's RetryUntilSuccessful: runs the child again after each failure, at most ``num_attempts``
    times in all (-1: until it succeeds); SUCCESS as soon as it succeeds, FAILURE when the attempts are spent."""

    NODE = "RetryUntilSuccessful"
    PORTS = {"num_attempts": PortSpec("in", None, "int")}
    count_port = "num_attempts"
    again = FAILURE

    def ended_early(self, status):
        self._detail = f"succeeded at attempt {self._done + 1}"
        return SUCCESS

    def ended_by_count(self):
        self._detail = f"all {self._done} attempts failed"
        return FAILURE


class KeepRunningUntilFailure(DecoratorNode):
    """BehaviorTree.CPP's KeepRunningUntilFailure: RUNNING while the child succeeds (it runs again at the next
    period), FAILURE when it fails."""

    NODE = "KeepRunningUntilFailure"
    _runs = 0

    def start(self, fresh: bool) -> None:
        self._runs = 0

    def step(self):
        status = yield from self.tick_child()
        if status == SUCCESS:
            self._runs += 1
            self.reset(self.children[0], "its run ended")
            self.want(EVERY_PERIOD)
            return RUNNING
        if status == FAILURE:
            self._detail = f"child {self.children[0].op_id} failed after {self._runs} successful runs"
        return status


class Timeout(DecoratorNode):
    """BehaviorTree.CPP's Timeout: the child's status, but a child still running ``msec`` milliseconds after the
    node started is halted and the node fails (0: no timeout). Woken at that time, never ticked to look."""

    NODE = "Timeout"
    PORTS = {"msec": PortSpec("in", None, "unsigned")}
    _deadline: float | None = None
    _msec = 0

    def start(self, fresh: bool) -> None:
        self._msec = self.port("msec")
        self._deadline = self.clock() + self._msec / 1000.0 if self._msec > 0 else None

    def step(self):
        child = self.children[0]
        if self._deadline is not None and child.status == RUNNING and self.clock() >= self._deadline:
            self.reset(child, f"its timeout of {self._msec} ms passed")
            self._detail = f"child {child.op_id} ran past the timeout of {self._msec} ms and was halted"
            return FAILURE
        status = yield from self.tick_child()
        if status == RUNNING and self._deadline is not None:
            self.want(self._deadline)
        self.skipped = was_skipped(child)
        return status


class Delay(DecoratorNode):
    """BehaviorTree.CPP's Delay: RUNNING for ``delay_msec`` milliseconds after the node started, then the child
    runs and its status is the node's. Woken at that time, never ticked to look."""

    NODE = "Delay"
    PORTS = {"delay_msec": PortSpec("in", None, "unsigned")}
    _due = 0.0

    def start(self, fresh: bool) -> None:
        self._due = self.clock() + self.port("delay_msec") / 1000.0

    def step(self):
        child = self.children[0]
        if child.status != RUNNING and self.clock() < self._due:
            self.want(self._due)
            return RUNNING
        status = yield from self.tick_child()
        self.skipped = was_skipped(child)
        return status


class RunOnce(DecoratorNode):
    """BehaviorTree.CPP's RunOnce: the child runs (to its end) the first time only; after that the node is skipped
    (``then_skip``, the default) or ends at once with the status the child ended with, without running it or
    reporting anything."""

    NODE = "RunOnce"
    PORTS = {"then_skip": PortSpec("in", "true", "bool")}
    _ran = False
    _then_skip = True
    _returned = SUCCESS

    def tick(self):
        if self._ran and self.status != RUNNING:
            self.skipped = self._then_skip
            self.status = SUCCESS if self._then_skip else self._returned
            yield self
            return
        yield from super().tick()

    def start(self, fresh: bool) -> None:
        self._then_skip = self.port("then_skip")

    def step(self):
        status = yield from self.tick_child()
        if status != RUNNING:
            self._ran = True
            self._returned = status
        return status


class RateController(DecoratorNode):
    """Nav2's RateController: runs the child at most ``hz`` times a second. A fresh start runs it at once; while it
    runs it is ticked; once it succeeded the node returns SUCCESS, and a tick before a period passed since then
    returns RUNNING without running it (woken when the period has passed). Reset by its parent, it starts afresh."""

    NODE = "RateController"
    PORTS = {"hz": PortSpec("in", "10.0", "double")}
    _period = 0.1
    _since = 0.0
    _first = True

    def start(self, fresh: bool) -> str | None:
        if fresh:
            hz = self.port("hz")
            if hz <= 0:
                return f"RateController [{self.op_id}]: hz must be above 0, got {hz:g}"
            self._period = 1.0 / hz
            self._since = self.clock()
            self._first = True
        return None

    def step(self):
        child = self.children[0]
        if self._first or child.status == RUNNING or self.clock() - self._since >= self._period:
            self._first = False
            status = yield from self.tick_child()
            if status == SUCCESS:
                self._since = self.clock()
            self.skipped = was_skipped(child)
            return status
        self.want(self._since + self._period)
        return RUNNING


class DistanceController(DecoratorNode):
    """Nav2's DistanceController: runs the child again each time the robot has moved ``distance`` (straight-line,
    from where it was when the child last succeeded). The robot's pose is read from the blackboard (port
    ``robot_pose``, by default the key ``robot_pose``: ``{"x", "y"[, "z"]}`` or ``[x, y[, z]]``), which a leaf
    writes through an output port (a capability reporting the pose); without one the node fails, as Nav2's does
    without a transform. While it waits for the distance it looks again every period."""

    NODE = "DistanceController"
    PORTS = {"distance": PortSpec("in", "1.0", "double"), "global_frame": PortSpec("in", "map", "std::string"),
             "robot_base_frame": PortSpec("in", "base_link", "std::string"),
             "robot_pose": PortSpec("in", "{robot_pose}", "std::string")}
    _distance = 1.0
    _from: tuple = ()
    _first = True

    def start(self, fresh: bool) -> str | None:
        self._distance = self.port("distance")
        if fresh:
            self._from = self._pose()
            self._first = True
        return None

    def step(self):
        child = self.children[0]
        try:
            here = self._pose()
        except PortValueError as exc:
            self._detail = str(exc)
            return FAILURE
        if self._first or child.status == RUNNING or math.dist(self._from, here) >= self._distance:
            self._first = False
            status = yield from self.tick_child()
            if status == SUCCESS:
                self._from = here
            self.skipped = was_skipped(child)
            return status
        self.want(EVERY_PERIOD)
        return RUNNING

    def _pose(self) -> tuple:
        value = self.port("robot_pose")
        if isinstance(value, dict):
            value = [value.get(axis, 0.0 if axis == "z" else None) for axis in ("x", "y", "z")]
        if isinstance(value, (list, tuple)) and len(value) in (2, 3) and all(
                type(number) in (int, float) and math.isfinite(number) for number in value):
            return tuple(float(number) for number in value) + (0.0,) * (3 - len(value))
        raise PortValueError(f"DistanceController [{self.op_id}]: the robot's pose (port 'robot_pose') is "
                             f"{value!r:.60}, expected {{'x', 'y'[, 'z']}} or [x, y[, z]] numbers")
