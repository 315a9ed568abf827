"""A cancel that waits holds no executor thread: the node in this process, its plans never ticked until we say."""
import json
import threading
import time
import uuid

import pytest
import rosutil
from rclpy.executors import MultiThreadedExecutor
from rosutil import do, plan, seq

import bt_exec
from bt_exec.ros.node import ExecutorNode


@pytest.fixture
def held(ros):
    """A node with two executor threads over an Executor whose tick loop is not running (we tick by hand)."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    namespace = f"/test_inproc_{uuid.uuid4().hex[:10]}"
    node = ExecutorNode(executor, namespace=namespace, context=ros.context)
    spinner = MultiThreadedExecutor(num_threads=2, context=ros.context)
    spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    node.start(tick=False)
    yield node, executor
    node.close()
    spinner.shutdown()
    thread.join(5)
    node.destroy_node()


def test_waiting_cancels_never_starve_the_other_services(ros, held):
    node, executor = held
    name = f"{node.get_namespace()}/bt_exec"
    plan_ids = [ros.call(name, "submit", graph_json=plan(seq(do("sim.slow")))).plan_id for _ in range(10)]
    executor.tick_once()  # they start
    cancels = [ros.call_async(name, "cancel", plan_id=plan_id, wait_ms=20000) for plan_id in plan_ids]
    cancels.append(ros.call_async(name, "cancel", plan_id="", wait_ms=20000))
    time.sleep(0.5)
    assert not any(pending.ready() for pending in cancels)  # all waiting, on 2 executor threads
    # Each call below is answered while every cancel still waits (they wait 20 s, longer than a call's timeout):
    # the services were not starved. How fast they answer is the benchmarks' business.
    assert json.loads(ros.call(name, "list_plans").plans_json)["count"] == 10
    status = ros.call(name, "get_status", plan_id=plan_ids[1])
    assert status.found and json.loads(status.status_json)["cancelled"], status.status_json
    call_op = json.loads(status.status_json)["ops"][-1]["op_id"]
    assert ros.call(name, "submit", graph_json=plan(seq(do()))).accepted
    stop = ros.call(name, "stop_at", plan_id=plan_ids[1], op_id=call_op)
    assert stop.success, stop.message
    armed = json.loads(ros.call(name, "get_status", plan_id=plan_ids[1]).status_json)["ops"][-1]
    assert armed["op_id"] == call_op and armed["stop_point"] == "on_complete", armed
    assert not any(pending.ready() for pending in cancels)
    executor.tick_once()  # the cancelled plans are torn down: plan_complete answers every waiting cancel
    for pending in cancels:
        response = pending.result(3)
        assert response.success and response.finished, response.message


def test_a_cancel_that_times_out_says_so(ros, held):
    node, executor = held
    name = f"{node.get_namespace()}/bt_exec"
    plan_id = ros.call(name, "submit", graph_json=plan(seq(do("sim.slow")))).plan_id
    executor.tick_once()
    began = time.monotonic()
    response = ros.call(name, "cancel", plan_id=plan_id, wait_ms=300)
    assert time.monotonic() - began > 0.25  # it waited for the plan (the wait's end is the answer's message)
    assert response.success and not response.finished
    assert response.message == f"plan {plan_id!r} still tearing down after 300 ms"
    not_waiting = ros.call(name, "cancel", plan_id=plan_id, wait_ms=0)
    assert not_waiting.success and not not_waiting.finished
    assert not_waiting.message == f"plan {plan_id!r} still tearing down after 0 ms"
    executor.tick_once()
    done = ros.call(name, "cancel", plan_id=plan_id, wait_ms=300)
    assert done.success and done.finished and done.message == f"plan {plan_id!r} already finished; nothing to cancel"


def test_the_plan_text_is_published_before_the_first_tick(ros, held):
    node, executor = held
    name = f"{node.get_namespace()}/bt_exec"
    collector, subscription = ros.subscribe(f"{name}/plan", rosutil.LATCHED)
    try:
        ros.wait_matched(subscription)
        text = plan(seq(do()), description="first tick")
        heard_at_first_tick = []
        executor.subscribe(lambda event: event["event"] == "plan_started" and heard_at_first_tick.append(
            list(collector.messages)))
        response = ros.call(name, "submit", graph_json=text, run_id="tick-order")
        time.sleep(0.3)
        assert collector.messages == []  # accepted, not started: not published yet
        executor.tick_once()
        collector.wait_for(lambda messages: messages == [text])
        assert response.accepted and heard_at_first_tick  # published from plan_started, before the tick
    finally:
        ros.unsubscribe(subscription)
