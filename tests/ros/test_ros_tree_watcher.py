"""The py_trees_ros seam: the running plans' trees in a py_trees_ros BehaviourTree (py-trees-tree-watcher)."""
import threading
import uuid

import pytest

from bt_exec.ros import tree_watcher

WHY_NOT = tree_watcher.available()
pytestmark = pytest.mark.skipif(WHY_NOT is not None, reason=f"{WHY_NOT}: py_trees_ros is not on PyPI; it comes "
                                                            "with a real Jazzy install (apt install "
                                                            "ros-jazzy-py-trees-ros)")


def test_running_plans_are_hosted_and_dropped(ros):
    import rosutil
    from rclpy.executors import MultiThreadedExecutor

    import bt_exec
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
        answer = executor.submit(rosutil.plan(rosutil.seq(rosutil.do("sim.slow"))))
        executor.tick_once()
        node.watcher.update()
        assert len(node.watcher.root.children) == 1
        executor.cancel_plan(answer["plan_id"], wait_ms=1000)
        node.watcher.update()
        assert node.watcher.root.children == []
    finally:
        node.close()
        spinner.shutdown()
        thread.join(5)
        node.destroy_node()
