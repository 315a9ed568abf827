"""The py_trees_ros seam: the plans' trees as py-trees-tree-watcher is shown them.

The mirror (frames, linger, stop points, when the tree is ticked) is plain py_trees and is tested on a
py_trees BehaviourTree over a real executor; py_trees_ros publishes whatever that tree holds on each tick
and on each update-handler call. The test with py_trees_ros itself runs where it is installed (a real
Jazzy: apt install ros-jazzy-py-trees-ros); it is not on PyPI.
"""
import threading
import time
import uuid

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
    tree's ticks (py_trees_ros publishes its snapshots on them)."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    tree = py_trees.trees.BehaviourTree(tree_watcher.Mirror("bt_exec"))
    updates = []
    tree.tree_update_handler = lambda: updates.append(1)
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


@needs_py_trees_ros
def test_running_plans_are_hosted_and_dropped(ros):
    from rclpy.executors import MultiThreadedExecutor

    from bt_exec.ros.node import ExecutorNode

    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    node = ExecutorNode(executor, namespace=f"/test_watch_{uuid.uuid4().hex[:8]}", context=ros.context)
    spinner = MultiThreadedExecutor(num_threads=2, context=ros.context)
    spinner.add_node(node)
    assert node.watcher is not None
    if node.watcher.own_node is not None:
        spinner.add_node(node.watcher.own_node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    try:
        node.watcher.host.linger_s = 0.0
        answer = executor.submit(plan(seq(do("sim.slow"))))
        executor.tick_once()
        node.watcher.update()
        (frame,) = node.watcher.root.children
        assert frame.name.startswith(f"plan {answer['plan_id']}")
        executor.cancel_plan(answer["plan_id"], wait_ms=1000)
        node.watcher.update()
        assert node.watcher.root.children == []
    finally:
        node.close()
        spinner.shutdown()
        thread.join(5)
        node.destroy_node()
