"""The py_trees_ros seam: the plans' trees as py-trees-tree-watcher is shown them.

The mirror (frames, linger, stop points, when the tree is ticked) is plain py_trees and is tested on a
py_trees BehaviourTree over a real executor; py_trees_ros publishes whatever that tree holds on each tick
and on each update-handler call. The test with py_trees_ros itself runs where it is installed (a real
Jazzy: apt install ros-jazzy-py-trees-ros); it is not on PyPI.
"""
import json
import signal
import threading
import time

import py_trees
import pytest
import rosutil
from py_trees.common import Status
from rosutil import do, plan, seq

import bt_exec
from bt_exec.ros import tree_watcher

WHY_NOT = tree_watcher.available()
needs_py_trees_ros = pytest.mark.skipif(WHY_NOT is not None, reason=f"{WHY_NOT}: py_trees_ros is not on PyPI; it "
                                                                    "comes with a real Jazzy install")


class Clock:
    def __init__(self):
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def par(*children):
    return {"op": "parallel", "op_id": 0, "description": "together", "children": list(children)}


@pytest.fixture
def mirrored():
    """(executor, host, clock, ticks): a MirrorHost over a real executor ticked by hand; ``ticks`` counts the
    tree's ticks (py_trees_ros publishes its snapshots on them); ``host.tree.updates`` counts calls of its
    update handler (py_trees_ros publishes a snapshot on each, changed or not)."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    tree = py_trees.trees.BehaviourTree(tree_watcher.Mirror("bt_exec"))
    updates = []
    tree.tree_update_handler = lambda: updates.append(1)
    tree.updates = updates
    ticks = []
    tree.add_post_tick_handler(lambda _tree: ticks.append(1))
    clock = Clock()
    host = tree_watcher.MirrorHost(tree, executor, linger_s=3.0, clock=clock)
    yield executor, host, clock, ticks
    executor.close(wait_ms=1000)


def ops_of(executor, plan_id):
    return {op["kind"]: op["op_id"] for op in executor.get_plan_status(plan_id)["ops"]}


def run_until_finished(executor, plan_id, timeout=10.0):
    deadline = time.monotonic() + timeout
    while executor.get_all_plans()["count"] and time.monotonic() < deadline:
        executor.tick_once()
        time.sleep(0.01)
    return executor.get_plan_result(plan_id)


def test_each_plan_is_framed_under_its_plan_id_and_the_parallel_is_a_wait_all_parallel(mirrored):
    executor, host, _clock, _ticks = mirrored
    answer = executor.submit(plan(seq(do("sim.slow"), par(do(), do())), description="fetch\n the  cup"))
    executor.tick_once()
    host.update()
    (frame,) = host.root.children
    assert frame.name == f"plan {answer['plan_id']}: fetch the cup" and frame.status == Status.RUNNING
    assert frame.decorated is executor.behaviour_trees()[answer["plan_id"]]
    (parallel,) = [b for b in frame.iterate() if isinstance(b, py_trees.composites.Parallel)]
    # what py_trees_ros sends: type PARALLEL (an isinstance test) and the policy's class name less "Success"
    assert type(parallel.policy).__name__.replace("Success", "") == "OnAll"
    assert parallel.policy.synchronise is False
    long_title = tree_watcher.plan_title("7", "x" * 200)
    assert long_title.startswith("plan 7: xxx") and long_title.endswith("...") and len(long_title) < 100


def test_armed_stop_points_show_in_their_guards_message_and_a_root_guard_is_followed(mirrored):
    executor, host, _clock, _ticks = mirrored
    answer = executor.submit(plan(seq(do("sim.step"), par(do(), do()))))
    plan_id = answer["plan_id"]
    ids = ops_of(executor, plan_id)
    executor.tick_once()
    executor.stop_plan_at(plan_id, ids["parallel"], "on_enter")
    executor.stop_plan_at(plan_id, ids["sequence"], "on_complete")  # the root op: a guard becomes the root
    executor.tick_once()
    host.update()
    (frame,) = host.root.children
    guards = {b.op_id: b for b in frame.iterate() if type(b).__name__ == "StopGuard"}
    assert frame.decorated is guards[ids["sequence"]]
    assert guards[ids["parallel"]].feedback_message == "stop on_enter armed"
    assert guards[ids["sequence"]].feedback_message == "stop on_complete armed"
    executor.stop_plan_at(plan_id, ids["parallel"], "on_complete")
    assert guards[ids["parallel"]].feedback_message == "stop on_enter and stop on_complete armed"

    record = run_until_finished(executor, plan_id)
    assert record["outcome"] == "cancelled"
    host.update()
    assert frame in host.root.children  # the finished plan lingers, its final states kept
    assert guards[ids["parallel"]].feedback_message == "stop on_enter fired"
    assert (frame.status, frame.feedback_message) == (Status.FAILURE, "finished: cancelled")
    assert frame.decorated.parent is frame


def drawn(host) -> dict:
    """What a viewer draws with a status: the behaviours the mirror's last tick visited, by name."""
    return {b.name: (b.status, b.feedback_message) for b in host.root.tick() if b is not host.root}


def test_arming_disarming_and_firing_a_stop_point_are_published_at_once(mirrored):
    executor, host, _clock, _ticks = mirrored
    answer = executor.submit(plan(seq(do("sim.step"), do(), do())))
    plan_id = answer["plan_id"]
    ids = [op["op_id"] for op in executor.get_plan_status(plan_id)["ops"]]
    executor.tick_once()
    host.update()
    updates = len(host.tree.updates)
    host.update()
    assert len(host.tree.updates) == updates  # nothing changed: nothing published

    executor.stop_plan_at(plan_id, ids[2], "on_enter")  # on an op not reached: no status changes
    host.update()
    assert len(host.tree.updates) == updates + 1
    guard_name = f"stop point at [{ids[2]}]"
    assert drawn(host)[guard_name] == (Status.INVALID, "stop on_enter armed")  # drawn with its message
    executor.stop_plan_at(plan_id, ids[2], "on_complete")
    host.update()
    assert len(host.tree.updates) == updates + 2
    assert drawn(host)[guard_name][1] == "stop on_enter and stop on_complete armed"
    executor.disarm_stop_point(plan_id, ids[2], "on_complete")
    host.update()
    assert len(host.tree.updates) == updates + 3
    assert drawn(host)[guard_name][1] == "stop on_enter armed"

    run_until_finished(executor, plan_id)
    host.update()
    assert len(host.tree.updates) == updates + 4
    assert drawn(host)[guard_name] == (Status.FAILURE, "stop on_enter fired")


def test_a_plan_cancelled_by_a_stop_point_lingers_with_each_ops_final_state(mirrored):
    executor, host, _clock, _ticks = mirrored
    answer = executor.submit(plan(seq(do("sim.step"), do(), do())))
    plan_id = answer["plan_id"]
    root_id, first, second, third = [op["op_id"] for op in executor.get_plan_status(plan_id)["ops"]]
    executor.tick_once()
    host.update()
    executor.stop_plan_at(plan_id, second, "on_enter")
    record = run_until_finished(executor, plan_id)
    assert record["outcome"] == "cancelled"
    host.update()
    shown = drawn(host)
    assert shown[f"[{first}] call sim.step"] == (Status.SUCCESS, "succeeded")
    assert shown[f"[{second}] call sim.act"] == (Status.FAILURE,
                                                  "canceled: stop point on_enter fired: the op never started")
    assert shown[f"stop point at [{second}]"] == (Status.FAILURE, "stop on_enter fired")
    assert shown[f"[{root_id}] in order"][0] == Status.FAILURE
    assert f"[{third}] call sim.act" not in shown  # never reached: drawn without a state
    (frame,) = host.root.children
    assert frame.feedback_message == "finished: cancelled"


def test_a_finished_plan_lingers_then_leaves(mirrored):
    executor, host, clock, _ticks = mirrored
    answer = executor.submit(plan(seq(do())))
    executor.tick_once()
    host.update()
    (frame,) = host.root.children
    root = frame.decorated
    run_until_finished(executor, answer["plan_id"])
    host.update()
    assert (frame.status, frame.feedback_message) == (Status.SUCCESS, "finished: succeeded")
    assert root.status == Status.SUCCESS  # the plan's own final states, as they were
    clock.now += 2.9
    assert host.poll() is True and host.root.children == [frame]  # an idle refresh; still lingering
    clock.now += 0.2
    assert host.poll() is True and host.root.children == []
    assert root.parent is None  # handed back as it was


def test_a_new_stream_gets_the_tree_at_once_and_an_idle_tree_is_ticked_at_a_low_rate(mirrored):
    executor, host, clock, ticks = mirrored
    executor.submit(plan(seq(do("sim.slow"))))
    executor.tick_once()
    host.update()
    assert len(ticks) == 1
    streams = ["/bt_exec/snapshot_streams/_snapshots_0"]
    assert host.poll(streams) is True and len(ticks) == 2  # a watcher opened a stream: ticked at once
    assert host.poll(streams) is False and len(ticks) == 2  # nothing new
    clock.now += tree_watcher.IDLE_REFRESH_S - 0.1
    assert host.poll(streams) is False
    clock.now += 0.1
    assert host.poll(streams) is True and len(ticks) == 3  # idle: once a second
    assert host.poll(streams[:0]) is False  # a stream closed: nothing to send


def test_without_py_trees_ros_the_node_says_so_once_and_serves(ros, start_node):
    if WHY_NOT is None:
        pytest.skip("py_trees_ros is installed here")
    node = start_node()
    response = ros.call(node.name, "submit", graph_json=plan(seq(do())))
    assert response.accepted
    log = node.log()
    assert log.count("py-trees-tree-watcher support is off: py_trees_ros is not importable") == 1, log
    assert "Traceback" not in log


class TreeCollector(rosutil.Collector):
    def __call__(self, msg) -> None:
        with self._cond:
            self.messages.append(msg)
            self._cond.notify_all()


class SnapshotStream:
    """A snapshot stream opened on a node process as py-trees-tree-watcher opens one, its messages collected."""

    def __init__(self, ros, node_name: str):
        from py_trees_ros_interfaces.msg import BehaviourTree
        from py_trees_ros_interfaces.srv import CloseSnapshotStream, OpenSnapshotStream

        self.ros = ros
        self.open = ros.node.create_client(OpenSnapshotStream, f"{node_name}/snapshot_streams/open")
        self.close = ros.node.create_client(CloseSnapshotStream, f"{node_name}/snapshot_streams/close")
        assert self.open.wait_for_service(timeout_sec=20) and self.close.wait_for_service(timeout_sec=20)
        request = OpenSnapshotStream.Request()
        request.parameters.snapshot_period = float("inf")  # as the watcher asks: changes only
        self.topic = self._call(self.open, request).topic_name
        self.trees = TreeCollector()
        self.subscription = ros.node.create_subscription(BehaviourTree, self.topic, self.trees, rosutil.LATCHED,
                                                         callback_group=ros.group)
        self.request_close = CloseSnapshotStream.Request(topic_name=self.topic)

    @staticmethod
    def _call(client, request):
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(15), f"no answer from {client.srv_name}"
        return future.result()

    def wait_for(self, predicate, what: str):
        """The first snapshot for which predicate({name: (status, message, drawn)}) holds (drawn: is_active)."""
        def found(messages):
            for message in messages:
                shown = {b.name: (b.status, b.message, b.is_active) for b in message.behaviours}
                if predicate(shown):
                    return shown
            return None
        try:
            return self.trees.wait_for(found, timeout=20)
        except AssertionError:
            raise AssertionError(f"no snapshot {what}; the last: {self.trees.messages[-1:]}") from None

    def destroy(self):
        self.ros.node.destroy_subscription(self.subscription)
        for client in (self.open, self.close):
            self.ros.node.destroy_client(client)


@needs_py_trees_ros
def test_a_watcher_sees_a_stop_point_at_once_and_the_final_states_and_a_close_logs_no_error(ros, start_node,
                                                                                            sim_script):
    from py_trees_ros_interfaces.msg import Behaviour

    node = start_node(sim_script=str(sim_script))
    stream = SnapshotStream(ros, node.name)
    try:
        answer = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"), do())))
        root_id, slow, after = [op["op_id"] for op in json.loads(
            ros.call(node.name, "get_status", plan_id=answer.plan_id).status_json)["ops"]]
        stream.wait_for(lambda shown: shown.get(f"[{slow}] call sim.slow", (0,))[0] == Behaviour.RUNNING,
                        "with the plan running")
        count = len(stream.trees.messages)
        assert ros.call(node.name, "stop_at", plan_id=answer.plan_id, op_id=after, when="on_enter").success
        guard = f"stop point at [{after}]"
        # The plan's statuses do not change (sim.slow runs for a minute): only the guard's arrival does.
        stream.wait_for(lambda shown: shown.get(guard, (0, "", False))[1:] == ("stop on_enter armed", True),
                        "with the armed guard drawn with its message")
        assert all(message.behaviours for message in stream.trees.messages[count:])

        assert ros.call(node.name, "cancel", plan_id=answer.plan_id, wait_ms=5000).finished
        final = stream.wait_for(lambda shown: any(name.startswith(f"plan {answer.plan_id}") and message ==
                                                  "finished: cancelled" for name, (_s, message, _a) in shown.items()),
                                "with the plan lingering as cancelled")
        assert final[f"[{slow}] call sim.slow"][:2] == (Behaviour.FAILURE, "canceled: plan cancelled while the op ran")
        assert final[guard][2] is True  # still drawn with its message

        # The watcher closes its stream as the node stops (Ctrl-C reaches both): no error either way round.
        closing = stream.close.call_async(stream.request_close)
        code = node.stop(signal.SIGINT, timeout=15)
        log = node.log()
        assert code == 0, log
        assert "ERROR" not in log and "InvalidHandle" not in log and "Traceback" not in log, log
        del closing
    finally:
        stream.destroy()
