"""The py_trees_ros seam: host the running plans' trees in a ``py_trees_ros.trees.BehaviourTree``.

Then ``py-trees-tree-watcher`` (and py_trees_ros_viewer) show them. The plans
are still ticked by the executor, never by this tree: its root is a
``Mirror`` whose tick only reports the plans' behaviours as they are, so the
BehaviourTree's snapshot visitor sees their statuses change and publishes.
Each plan hangs under a ``PlanFrame`` named after its plan id, whose message
says ``paused`` (and which ops are held at their entry) while the plan is
paused; a finished plan stays there for ``linger_s``, each op drawn with its
final state from the plan's record (the executor's teardown resets the
behaviours themselves to INVALID) and a fired stop guard marked.

Threading: py_trees_ros serves the snapshot-stream services (open, close) in
the default callback group of the node it was given, and publishes on the
streams from whatever thread ticks the tree. So the seam ticks and publishes
only from a timer in that same group: a stream closed by a watcher can never
be destroyed under a publish (rclpy's InvalidHandle), nor the streams change
while they are walked.
Used only when py_trees_ros imports (a real Jazzy install:
``apt install ros-jazzy-py-trees-ros``); ``available()`` says whether it does.
"""
from __future__ import annotations

import logging
import time

import threading

from py_trees.common import Status

from ..behaviours.stop_guard import StopGuard
from ..compat.py_trees import ViewOnlyComposite, ViewOnlyDecorator
from ..errors import ControlError
from .convert import one_line

log = logging.getLogger(__name__)

IDLE_REFRESH_S = 1.0   # while nothing changes, the tree is still ticked this often (streams with a snapshot period)
TITLE_CHARS = 80       # of a plan's description in its frame's name
HELD_NAMED = 3         # held ops named in a paused plan's frame message; the rest are counted
DETAIL_CHARS = 80      # of a finished op's detail in its message
SERVE_PERIOD_S = 0.05  # the seam's timer: a change is published within this long (and at most this often)
# A finished op's state (the plan's record) as a status a viewer draws; a pending op never ran: left INVALID.
FINAL_STATUS = {"succeeded": Status.SUCCESS, "failed": Status.FAILURE, "timeout": Status.FAILURE,
                "canceled": Status.FAILURE, "running": Status.RUNNING, "paused": Status.RUNNING}


def available() -> str | None:
    """None when py_trees_ros imports, else why not."""
    try:
        import py_trees_ros.trees  # noqa: F401
    except Exception as exc:  # ImportError, or a broken install
        return f"py_trees_ros is not importable ({type(exc).__name__}: {exc})"
    return None


def plan_title(plan_id: str, description: str) -> str:
    text = one_line(description)
    if len(text) > TITLE_CHARS:
        text = text[:TITLE_CHARS - 3] + "..."
    return f"plan {plan_id}: {text}" if text else f"plan {plan_id}"


class Mirror(ViewOnlyComposite):
    """A root over the plans' frames that never ticks them: it yields their behaviours as they stand.

    What it yields is what a viewer draws with its status and message: every behaviour that is not
    INVALID, and every stop guard (one armed above an op not reached yet is INVALID, and its message
    says what is armed)."""

    def tick(self):
        self.status = Status.RUNNING
        for child in list(self.children):
            for behaviour in child.iterate():
                if behaviour.status != Status.INVALID or isinstance(behaviour, StopGuard):
                    yield behaviour
        yield self


class PlanFrame(ViewOnlyDecorator):
    """One plan in the mirror, named ``plan <id>: <description>``, over the plan's root op (or the stop guard
    the executor put above it). RUNNING while the plan runs, with a message while it is paused (``paused``,
    ``paused; held at entry: [3]``); once it finished, its outcome (SUCCESS for ``succeeded``, else FAILURE)
    with the outcome as its message."""

    def __init__(self, plan_id: str, description: str, root):
        super().__init__(name=plan_title(plan_id, description), child=root)
        self.plan_id = plan_id
        self.outcome: str | None = None
        self.finished_at: float | None = None
        self.status = Status.RUNNING

    def host(self, root) -> None:
        """Show ``root`` from now on: a stop guard armed on the plan's root op took its place."""
        self.release()
        self.children = [root]
        self.decorated = root
        root.parent = self

    def release(self) -> None:
        """Hand the plan's root back as it was: with no parent (a root op under a guard keeps the guard)."""
        if self.decorated.parent is self:
            self.decorated.parent = None

    def show_pause(self, message: str) -> None:
        """Show ``message`` (empty: the plan is not paused)."""
        if self.finished_at is None:
            self.feedback_message = message

    def finish(self, outcome: str, ops: list[dict], now: float) -> None:
        """The plan ended as ``outcome``; ``ops``: its record's ops, whose final states are drawn."""
        self.outcome = outcome
        self.finished_at = now
        self.status = Status.SUCCESS if outcome == "succeeded" else Status.FAILURE
        self.feedback_message = f"finished: {outcome}"
        show_final_states(self.decorated, ops)


def show_final_states(root, ops: list[dict]) -> None:
    """Set each op behaviour under ``root`` to its op's final state (status, and the state with its detail as
    the message); a stop guard to FAILURE where it fired (it ended the plan), else to its op's status."""
    finals = {op["op_id"]: op for op in ops}
    guards = []
    for behaviour in root.iterate():
        if isinstance(behaviour, StopGuard):
            guards.append(behaviour)
            continue
        op = finals.get(getattr(behaviour, "op_id", None))
        if op is None:
            continue
        behaviour.status = FINAL_STATUS.get(op["state"], Status.INVALID)
        if behaviour.status == Status.INVALID:
            behaviour.feedback_message = ""
            continue
        detail = one_line(op.get("detail") or "")
        if len(detail) > DETAIL_CHARS:
            detail = detail[:DETAIL_CHARS - 3] + "..."
        behaviour.feedback_message = f"{op['state']}: {detail}" if detail else op["state"]
    for guard in guards:
        guard.status = Status.FAILURE if guard.fired is not None else guard.decorated.status


class MirrorHost:
    """Keeps a ``Mirror`` root's frames equal to the executor's plans, and a finished one for ``linger_s``.

    ``tree``: a py_trees BehaviourTree whose root is a Mirror. Frames come and
    go through the mirror's ``add_child`` and ``remove_child``. ``update()``
    ticks the tree, which only reports; when anything drawn changed (a frame, a
    status, a message: a stop point armed, disarmed or fired, a pause message)
    that py_trees_ros's snapshot visitor did not see on that tick (it compares
    only the statuses of the behaviours ticked) it calls the tree's update
    handler (py_trees_ros: publish a snapshot to every stream), so each change
    is published once, at once. ``poll()``, called often, ticks it when a watcher opened a new snapshot
    stream (it gets the tree at once), when a finished plan is due to leave,
    and every ``IDLE_REFRESH_S`` while nothing changes.
    """

    def __init__(self, tree, executor, linger_s: float = 0.0, clock=time.monotonic):
        self.tree = tree
        self.root = tree.root
        self.executor = executor
        self.linger_s = linger_s
        self.clock = clock
        self.frames: dict[str, PlanFrame] = {}
        self.ticked_at = float("-inf")
        self._streams: frozenset = frozenset()
        self._drawn: tuple = ()  # what the last update showed (see ``_drawing``)

    def update(self) -> None:
        now = self.clock()
        roots = self.executor.behaviour_trees()
        plans = {plan["plan_id"]: plan for plan in self.executor.get_all_plans()["plans"]} if roots else {}
        for plan_id, root in roots.items():
            frame = self.frames.get(plan_id)
            shown = plans.get(plan_id, {})
            if frame is None:
                frame = self.frames[plan_id] = PlanFrame(plan_id, shown.get("description", ""), root)
                frame.show_pause(self._pause_message(plan_id, shown))
                self.root.add_child(frame)  # published below, once its behaviours were ticked
                continue
            if frame.decorated is not root:
                frame.host(root)
            frame.show_pause(self._pause_message(plan_id, shown))
        for plan_id, frame in list(self.frames.items()):
            if plan_id in roots:
                continue
            if frame.finished_at is None:
                frame.finish(*self._final(plan_id), now)
            if now - frame.finished_at >= self.linger_s:
                self._drop(plan_id)
        self.tree.tick()
        self.ticked_at = now
        drawn = self._drawing()
        if drawn != self._drawn:
            self._drawn = drawn
            visitor = getattr(self.tree, "snapshot_visitor", None)
            # py_trees_ros published on the tick when its visitor saw a change; else it is published here.
            if not getattr(visitor, "changed", False) and self.tree.tree_update_handler is not None:
                self.tree.tree_update_handler()

    def _drawing(self) -> tuple:
        """What a viewer draws of the frames: each behaviour's place, status and message."""
        return tuple((behaviour.id, behaviour.parent.id if behaviour.parent is not None else None,
                      behaviour.status, behaviour.feedback_message)
                     for frame in self.frames.values() for behaviour in frame.iterate())

    def poll(self, streams=frozenset()) -> bool:
        """Update when one is due (see the class); ``streams``: the names of the open snapshot streams.
        Whether it updated."""
        now = self.clock()
        streams = frozenset(streams)
        opened = bool(streams - self._streams)
        self._streams = streams
        leaving = any(frame.finished_at is not None and now - frame.finished_at >= self.linger_s
                      for frame in self.frames.values())
        if opened or leaving or now - self.ticked_at >= IDLE_REFRESH_S:
            self.update()
            return True
        return False

    def clear(self) -> None:
        for plan_id in list(self.frames):
            self._drop(plan_id)
        if self.tree.tree_update_handler is not None:
            self.tree.tree_update_handler()

    def _drop(self, plan_id: str) -> None:
        frame = self.frames.pop(plan_id)
        if frame.parent is self.root:
            self.root.remove_child(frame)
        frame.release()

    def _pause_message(self, plan_id: str, shown: dict) -> str:
        """``paused``, with the ops held at their entry (their behaviours are ticked while they wait, so a
        viewer draws them running), or empty for a plan not paused."""
        if not shown.get("paused"):
            return ""
        try:  # only while paused: the ops are walked for the held ones
            ops = self.executor.get_plan_status(plan_id, with_args=False)["ops"]
        except ControlError:  # it finished meanwhile: its frame says how on the next update
            return "paused"
        held = [f"[{op['op_id']}]" for op in ops if op.get("held")]
        if not held:
            return "paused"
        more = f" and {len(held) - HELD_NAMED} more" if len(held) > HELD_NAMED else ""
        return f"paused; held at entry: {', '.join(held[:HELD_NAMED])}{more}"

    def _final(self, plan_id: str) -> tuple[str, list[dict]]:
        """(outcome, the ops of its record) of a plan that ended."""
        try:
            record = self.executor.get_plan_result(plan_id)
        except ControlError:  # no longer kept: the plan ended, how is not known here
            return "finished", []
        return record["outcome"], record["ops"]


class TreeWatcherSeam:
    """A py_trees_ros BehaviourTree over a ``Mirror`` of the plans, served by a timer of its own.

    ``mark_changed()`` (any thread) has the next timer call update the tree; between changes the timer
    polls it (``MirrorHost.poll``). The timer runs in the default callback group of the node serving the
    snapshot-stream services, so ticks and stream opens and closes never overlap (module docstring).
    ``close()`` (any thread) has that timer clear the tree once more and stop; the node must still spin."""

    def __init__(self, node, executor, name: str = "bt_exec", linger_s: float = 3.0):
        import py_trees_ros.trees

        self.node = node
        self.tree = py_trees_ros.trees.BehaviourTree(Mirror(name), unicode_tree_debug=False)
        try:  # py_trees_ros that can share our node; older ones make their own ("tree", default context)
            self.tree.setup(node=node, timeout=5.0)
        except TypeError:
            self.tree.setup(timeout=5.0)
        self.host = MirrorHost(self.tree, executor, linger_s)
        self._changed = threading.Event()
        self._closing = threading.Event()
        self._closed = threading.Event()
        serving = self.tree.node
        self._timer = serving.create_timer(SERVE_PERIOD_S, self._serve,
                                           callback_group=serving.default_callback_group)

    @property
    def root(self):
        return self.tree.root

    @property
    def own_node(self):
        """The node py_trees_ros made for itself (to spin and destroy), or None when it uses ours."""
        return self.tree.node if self.tree.node is not self.node else None

    def mark_changed(self) -> None:
        self._changed.set()

    def _serve(self) -> None:
        if self._closed.is_set():
            return
        if self._closing.is_set():
            self._timer.cancel()
            try:
                self.host.clear()
            finally:
                self._closed.set()
            return
        if self._changed.is_set():
            self._changed.clear()
            self.host.update()
        else:
            self.host.poll(list(self.tree.snapshot_streams))

    def close(self, timeout_s: float = 1.0) -> bool:
        """Clear the tree (its last snapshot shows no plans) and stop serving; whether that was done within
        ``timeout_s`` (not when the node no longer spins). Then destroys the node py_trees_ros made, if any."""
        self._closing.set()
        cleared = self._closed.wait(timeout_s)
        self._closed.set()  # a late timer call does nothing
        own = self.own_node
        if own is not None:
            own.destroy_node()
        return cleared
