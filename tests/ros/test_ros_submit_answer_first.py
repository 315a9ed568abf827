"""A plan accepted over ~/submit starts once its answer was sent, or after a bounded wait: the node in this process,
its plans ticked by the test."""
import threading
import time
import uuid

import pytest
import rosutil
from bt_exec_interfaces.srv import Submit
from rclpy.executors import MultiThreadedExecutor
from rosutil import do, plan, seq

import bt_exec
from bt_exec.ros import node as node_module
from bt_exec.ros.node import ExecutorNode


@pytest.fixture
def held(ros):
    """A node over an Executor whose tick loop is not running (the test ticks), with every event recorded."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    node = ExecutorNode(executor, namespace=f"/test_answer_{uuid.uuid4().hex[:10]}", context=ros.context)
    events: list[dict] = []
    executor.subscribe(events.append)  # after the node's own subscriber: sees each event once the node let it go
    spinner = MultiThreadedExecutor(num_threads=2, context=ros.context)
    spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    node.start(tick=False)
    yield node, executor, events
    node.close()
    spinner.shutdown()
    thread.join(5)
    node.destroy_node()


def test_answered_submits_leave_nothing_to_wait_for(ros, held):
    node, executor, events = held
    name = f"{node.get_namespace()}/bt_exec"
    accepted = ros.call(name, "submit", graph_json=plan(seq(do(), do())), run_id="first")
    assert accepted.accepted, accepted.message
    assert ros.call(name, "submit", graph_json=plan(seq(do())), run_id="first").plan_id == accepted.plan_id
    assert not ros.call(name, "submit", graph_json="{", run_id="broken").accepted
    assert node._answers_due == {}  # each answer was sent: the plan's start waits for nothing
    executor.tick_once()
    kinds = [event["event"] for event in events if event.get("plan_id") == accepted.plan_id]
    assert kinds[0] == "plan_started" and "node_state" in kinds, kinds


def test_a_plan_whose_answer_is_never_sent_starts_after_the_bound(ros, held):
    node, executor, events = held
    request = Submit.Request(graph_json=plan(seq(do())), run_id="unanswered", dialect="rtdl")
    callback = node._on_submit(request, Submit.Response())  # the service callback, not through rclpy: no send
    with pytest.raises(StopIteration) as answered:
        callback.send(None)
    plan_id = answered.value.value.plan_id
    assert answered.value.value.accepted and node._answers_due.keys() == {"unanswered"}
    began = time.monotonic()
    executor.tick_once()
    waited = time.monotonic() - began
    assert node_module.ANSWER_FIRST_S * 0.9 <= waited < 2.0, waited
    kinds = [event["event"] for event in events if event.get("plan_id") == plan_id]
    assert kinds[0] == "plan_started" and "node_state" in kinds, kinds
    assert node._answers_due == {}  # forgotten once waited for: memory stays bounded
