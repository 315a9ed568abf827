"""What the node library's tick-by-tick tests build trees of: leaves whose statuses a test sets tick by tick, the
plan hooks they report to, and a clock the test moves."""
from __future__ import annotations

from py_trees.common import Status

from bt_exec.behaviours.bt_library import NODE_LIBRARY
from bt_exec.behaviours.op_behaviour import OpReports, canceled_detail
from bt_exec.compat.py_trees import LeanBehaviour, PlanTree

RUNNING, SUCCESS, FAILURE, INVALID = Status.RUNNING, Status.SUCCESS, Status.FAILURE, Status.INVALID


class Clock:
    """Seconds a test moves on by hand (``clock.now += 0.5``)."""

    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Hooks:
    """The PlanHooks of a test's tree: every report kept in order, the sources watched, a blackboard, and a pause
    or cancel the test sets."""

    plan_id = "p"

    def __init__(self):
        self.reports: list[tuple[str, str, str | None]] = []
        self.blackboard: dict = {}
        self.watched: set = set()
        self.polled: set = set()
        self.poll_times: dict = {}
        self.paused = False
        self.cancel_requested = False

    @property
    def holding_entries(self) -> bool:
        return self.paused

    def may_enter(self, op_id: str) -> bool:
        return not self.paused

    def op_state(self, op_id, state, result=None, detail=None) -> None:
        self.reports.append((op_id, state, detail))

    def watch(self, source) -> None:
        self.watched.add(source)
        self.polled.add(source)

    def watch_for_news(self, source) -> None:
        self.watched.add(source)

    def news(self, source) -> None:
        pass

    def poll_at(self, source, when: float) -> None:
        self.poll_times[source] = when

    def unwatch(self, source) -> None:
        self.watched.discard(source)
        self.polled.discard(source)
        self.poll_times.pop(source, None)

    def wake(self) -> None:
        pass

    def stop_point_armed(self, op_id, when) -> bool:
        return False

    def pause_point_armed(self, op_id, when) -> bool:
        return False

    def states(self, op_id: str) -> list[str]:
        """The states ``op_id`` reported, in order."""
        return [state for reported, state, _detail in self.reports if reported == op_id]

    def take(self) -> list[tuple[str, str]]:
        """The (op id, state) reports since the last take."""
        taken = [(op_id, state) for op_id, state, _detail in self.reports]
        self.reports.clear()
        return taken


class Leaf(OpReports, LeanBehaviour):
    """A leaf op whose status each tick is ``next`` (set by the test; RUNNING until set), counting its runs
    (``starts``), its ticks and the times it was halted while running (``halts``)."""

    script: list | None = None  # statuses tick after tick (round and round), instead of ``next``

    def __init__(self, op_id: str, status: Status = RUNNING, script: list | None = None):
        super().__init__(None)
        self.op_id = op_id
        self.description = op_id
        self.next = status
        self.script = script
        self.starts = self.ticks = self.halts = 0

    def setup(self, **kwargs) -> None:
        self.hooks = self.report_to = kwargs["plan"]

    def tick(self):
        if self.status != RUNNING or self.held_back:
            if self.held_back_on_entry():
                yield self
                return
            self.starts += 1
            self.report("running")
        self.ticks += 1
        if self.script:
            self.next = self.script[self.ticks % len(self.script)]
        if self.next == RUNNING:
            self.status = RUNNING
        else:
            self.stop(self.next)
        yield self

    def update(self) -> Status:
        return self.next

    def terminate(self, new_status: Status) -> None:
        if new_status in (SUCCESS, FAILURE):
            self.report("succeeded" if new_status == SUCCESS else "failed")
        elif self.status == RUNNING and not self.held_back:
            self.halts += 1
            self.report("canceled", detail=canceled_detail())


def node(name: str, op_id: str, *children, **ports):
    """The library's node ``name`` as op ``op_id`` over ``children``; a port written ``{key}`` reads that key."""
    args = {port: value for port, value in ports.items() if not (value.startswith("{") and value.endswith("}"))}
    reads = {port: value[1:-1] for port, value in ports.items() if port not in args}
    return NODE_LIBRARY[name].build(op_id, f"{name} {op_id}", args, reads, list(children))


class Tree:
    """A tree of library nodes over test leaves, set up with its own hooks and clock."""

    def __init__(self, root):
        self.root = root
        self.hooks = Hooks()
        self.clock = Clock()
        self.tree = PlanTree(root)
        self.tree.setup(plan=self.hooks, clock=self.clock)

    def tick(self) -> Status:
        self.tree.tick()
        return self.root.status

    def halt(self) -> None:
        """The plan's teardown: everything running is stopped."""
        self.root.stop(INVALID)

    def due(self) -> bool:
        """Whether any source the tree waits on asks for a tick now (as the runtime would poll it)."""
        for source in list(self.hooks.watched):
            when = self.hooks.poll_times.get(source)
            if source in self.hooks.polled or (when is not None and when <= self.clock.now):
                if source.poll():
                    return True
        return False
