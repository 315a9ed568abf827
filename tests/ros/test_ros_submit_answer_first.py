"""A plan accepted over ~/submit starts once its answer was sent, or after a bounded hold, and no tick waits for
it: the node in this process, over an Executor of the test's."""
import threading
import time
import uuid

import pytest
import rosutil
from bt_exec_interfaces.srv import Submit
from rclpy.executors import SingleThreadedExecutor
from rosutil import do, plan, seq

import bt_exec
from bt_exec.ros import node as node_module
from bt_exec.ros.node import ExecutorNode

LONG_HOLD_S = 1.0  # the node's hold in these tests (the longest allowed), long enough for the order to show


class Recorder:
    """The executor's events as they come (its last subscriber), and the order of what the test watches."""

    def __init__(self):
        self.events: list[dict] = []
        self.order: list[tuple[str, str]] = []
        self.lock = threading.Lock()

    def __call__(self, event: dict) -> None:
        with self.lock:
            self.events.append(event)
            if event["event"] == "plan_started":
                self.order.append(("started", event["plan_id"]))

    def started(self, plan_id: str) -> bool:
        with self.lock:
            return ("started", plan_id) in self.order

    def note(self, what: str, plan_id: str) -> None:
        with self.lock:
            self.order.append((what, plan_id))


def make_node(ros, executor: bt_exec.Executor) -> ExecutorNode:
    return ExecutorNode(executor, namespace=f"/test_answer_{uuid.uuid4().hex[:10]}", context=ros.context)


def watch_releases(executor: bt_exec.Executor, recorder: Recorder) -> None:
    """Note each ``release_start`` the node calls (the real one still runs)."""
    release = executor.release_start

    def releasing(plan_id: str) -> None:
        recorder.note("released", plan_id)
        release(plan_id)

    executor.release_start = releasing


@pytest.fixture
def long_hold(monkeypatch):
    monkeypatch.setattr(node_module, "ANSWER_FIRST_S", LONG_HOLD_S)


def submit_by_hand(node: ExecutorNode, run_id: str) -> str:
    """The ~/submit callback called directly, as rclpy would, but with no answer sent; the plan id."""
    request = Submit.Request(graph_json=plan(seq(do())), run_id=run_id, dialect="rtdl")
    callback = node._on_submit(request, Submit.Response())
    with pytest.raises(StopIteration) as answered:
        callback.send(None)
    assert answered.value.value.accepted, answered.value.value.message
    return answered.value.value.plan_id


def test_the_plan_starts_after_its_answer_is_sent(ros, long_hold):
    """rclpy sends the answer in the callback's task; the release is a task made in the callback: in the
    process's SingleThreadedExecutor it runs after the send, and the plan's first tick after the release."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    node = make_node(ros, executor)
    recorder = Recorder()
    executor.subscribe(recorder)
    submit_service = next(service for service in node.services if service.srv_name.endswith("/submit"))
    send = submit_service.send_response

    def sending(response, header):  # watches rclpy's send, which still goes out
        recorder.note("sent", response.plan_id)
        send(response, header)

    submit_service.send_response = sending
    watch_releases(executor, recorder)
    spinner = SingleThreadedExecutor(context=ros.context)
    spinner.add_node(node)
    thread = threading.Thread(target=spinner.spin, daemon=True)
    thread.start()
    node.start()  # the tick loop runs: nothing but the hold keeps the plan from starting at once
    try:
        name = f"{node.get_namespace()}/bt_exec"
        plan_ids = []
        for n in range(5):
            answer = ros.call(name, "submit", graph_json=plan(seq(do(), do())), run_id=f"answer-first-{n}")
            assert answer.accepted, answer.message
            plan_ids.append(answer.plan_id)
        for plan_id in plan_ids:
            assert executor.wait_for_plan(plan_id, timeout_s=10)["outcome"] == "succeeded"
        for plan_id in plan_ids:  # released once sent, started once released (not by the hold running out)
            mine = [what for what, of in recorder.order if of == plan_id]
            assert mine == ["sent", "released", "started"], (plan_id, recorder.order)
        again = ros.call(name, "submit", graph_json=plan(seq(do())), run_id="answer-first-0")
        assert again.plan_id == plan_ids[0]  # the same answer, nothing run again
        assert not ros.call(name, "submit", graph_json="{", run_id="broken").accepted
    finally:
        node.close()
        spinner.shutdown()
        thread.join(5)
        node.destroy_node()


def test_no_tick_waits_while_a_submit_is_being_answered(ros, long_hold):
    """Another plan ticks on while an accepted plan waits for its answer to go out (a tick used to wait in the
    node's event subscriber for the answer, up to the hold, holding every plan)."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 0.0}}))
    node = make_node(ros, executor)
    recorder = Recorder()
    executor.subscribe(recorder)
    watch_releases(executor, recorder)
    spinner = SingleThreadedExecutor(context=ros.context)  # spun below, by hand: the release waits for it
    spinner.add_node(node)
    node.start(tick=False)
    try:
        other = executor.submit(plan(seq(do(), do(), do())))["plan_id"]  # another door: starts at once
        answered = submit_by_hand(node, "answer-not-sent-yet")
        executor.tick_once()  # returns at once: the held plan is skipped, not waited for
        assert recorder.started(other) and not recorder.started(answered)
        assert executor.run_until_complete(other, timeout=10)["outcome"] == "succeeded"
        assert not recorder.started(answered)
        began = time.monotonic()
        while not recorder.started(answered) and time.monotonic() - began < 10:
            spinner.spin_once(timeout_sec=0.05)  # what runs after the callback's task: the release
            executor.tick_once()
        assert [what for what, of in recorder.order if of == answered] == ["released", "started"], recorder.order
    finally:
        node.close()
        spinner.shutdown()
        node.destroy_node()


def test_a_plan_whose_answer_is_never_sent_starts_after_the_bound(ros):
    """Not spinning, the node releases nothing: the plan starts once its hold ran out, and no tick waited."""
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(rosutil.SIM_SCRIPT))
    node = make_node(ros, executor)
    recorder = Recorder()
    executor.subscribe(recorder)
    node.start(tick=False)
    try:
        submitted = time.time()
        plan_id = submit_by_hand(node, "unanswered")
        executor.tick_once()
        assert not recorder.started(plan_id)
        assert executor.run_until_complete(plan_id, timeout=5)["outcome"] == "succeeded"
        started = next(event for event in recorder.events if event["event"] == "plan_started")
        assert started["time"] - submitted >= node_module.ANSWER_FIRST_S
    finally:
        node.close()
        node.destroy_node()
