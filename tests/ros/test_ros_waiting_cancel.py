"""A cancel that waits holds no executor thread: the node in this process, its tick thread held by the test while
the cancels wait (its plans cannot end until the test lets the tick go on)."""
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


class TickGate:
    """Holds the executor's tick thread while shut: a plan of its own blocks, in an event subscriber, as it starts,
    so no plan is torn down (and no cancel's wait ends) until ``open()``."""

    def __init__(self, executor: bt_exec.Executor):
        self.executor = executor
        self.run_id = None
        self.opened = threading.Event()
        self.holding = threading.Event()
        executor.subscribe(self._on_event)

    def _on_event(self, event: dict) -> None:
        if event["event"] == "plan_started" and event["run_id"] == self.run_id:
            self.holding.set()
            self.opened.wait(30)

    def shut(self) -> None:
        self.run_id = f"gate-{uuid.uuid4().hex}"
        self.opened.clear()
        self.holding.clear()
        assert self.executor.submit(plan(seq(do())), run_id=self.run_id)["accepted"]
        assert self.holding.wait(10), "the tick thread never reached the gate"

    def open(self) -> None:
        self.opened.set()


def wait_until(predicate, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.01)


@pytest.fixture
def held(ros):
    """A node with two executor threads over an Executor whose tick loop runs, and a gate to hold that loop."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    namespace = f"/test_inproc_{uuid.uuid4().hex[:10]}"
    node = ExecutorNode(executor, namespace=namespace, context=ros.context)
    gate = TickGate(executor)
    spinner = MultiThreadedExecutor(num_threads=2, context=ros.context)
    spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    node.start()
    yield node, executor, gate
    gate.open()
    node.close()
    spinner.shutdown()
    thread.join(5)
    node.destroy_node()


def start_slow_plans(ros, name: str, executor: bt_exec.Executor, count: int) -> list[str]:
    plan_ids = [ros.call(name, "submit", graph_json=plan(seq(do("sim.slow")))).plan_id for _ in range(count)]
    wait_until(lambda: all(executor.get_plan_status(plan_id)["ops"][1]["state"] == "running" for plan_id in plan_ids))
    return plan_ids


def test_waiting_cancels_never_starve_the_other_services(ros, held):
    node, executor, gate = held
    name = f"{node.get_namespace()}/bt_exec"
    plan_ids = start_slow_plans(ros, name, executor, 10)
    gate.shut()
    cancels = [ros.call_async(name, "cancel", plan_id=plan_id, wait_ms=20000) for plan_id in plan_ids]
    cancels.append(ros.call_async(name, "cancel", plan_id="", wait_ms=20000))
    wait_until(lambda: all(plan["cancelled"] for plan in executor.get_all_plans()["plans"]))  # the cancels came
    # Each call below is answered while every cancel still waits (they wait 20 s, longer than a call's timeout):
    # the services were not starved. How fast they answer is the benchmarks' business.
    assert json.loads(ros.call(name, "list_plans").plans_json)["count"] == 11  # the gate's plan too
    status = ros.call(name, "get_status", plan_id=plan_ids[1])
    assert status.found and json.loads(status.status_json)["cancelled"], status.status_json
    call_op = json.loads(status.status_json)["ops"][-1]["op_id"]
    assert ros.call(name, "submit", graph_json=plan(seq(do()))).accepted
    stop = ros.call(name, "stop_at", plan_id=plan_ids[1], op_id=call_op)
    assert stop.success, stop.message
    armed = json.loads(ros.call(name, "get_status", plan_id=plan_ids[1]).status_json)["ops"][-1]
    assert armed["op_id"] == call_op and armed["stop_point"] == "on_complete", armed
    assert not any(pending.ready() for pending in cancels)  # all waiting, none on the 2 executor threads
    gate.open()  # the cancelled plans are torn down: plan_complete answers every waiting cancel
    for pending in cancels:
        response = pending.result(5)
        assert response.success and response.finished, response.message


def test_a_cancel_that_times_out_says_so(ros, held):
    node, executor, gate = held
    name = f"{node.get_namespace()}/bt_exec"
    [plan_id] = start_slow_plans(ros, name, executor, 1)
    gate.shut()
    began = time.monotonic()
    response = ros.call(name, "cancel", plan_id=plan_id, wait_ms=300)
    assert time.monotonic() - began > 0.25  # it waited for the plan (the wait's end is the answer's message)
    assert response.success and not response.finished
    assert response.message == f"plan {plan_id!r} still tearing down after 300 ms"
    not_waiting = ros.call(name, "cancel", plan_id=plan_id, wait_ms=0)
    assert not_waiting.success and not not_waiting.finished
    assert not_waiting.message == f"plan {plan_id!r} still tearing down after 0 ms"
    gate.open()
    assert executor.wait_for_plan(plan_id, timeout_s=10)["outcome"] == "cancelled"
    done = ros.call(name, "cancel", plan_id=plan_id, wait_ms=300)
    assert done.success and done.finished and done.message == f"plan {plan_id!r} already finished; nothing to cancel"


def test_the_plan_text_is_published_before_the_first_tick(ros, held):
    node, executor, gate = held
    name = f"{node.get_namespace()}/bt_exec"
    collector, subscription = ros.subscribe(f"{name}/plan", rosutil.LATCHED)
    try:
        ros.wait_matched(subscription)
        text = plan(seq(do()), description="first tick")
        heard_at_first_tick = []
        executor.subscribe(lambda event: event["event"] == "plan_started" and event["run_id"] == "tick-order"
                           and heard_at_first_tick.append(list(collector.messages)))
        gate.shut()
        response = ros.call(name, "submit", graph_json=text, run_id="tick-order")
        time.sleep(0.3)
        assert collector.messages == []  # accepted, not started: not published yet
        gate.open()
        collector.wait_for(lambda messages: messages == [text])
        assert response.accepted and heard_at_first_tick  # published from plan_started, before the tick
    finally:
        ros.unsubscribe(subscription)
