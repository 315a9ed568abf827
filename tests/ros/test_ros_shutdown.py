"""Stopping the node as ``ros2 launch`` does: real processes, the ROS action backend and the sim robot.

Ctrl-C under launch sends SIGINT twice (the terminal's and launch's own, a moment apart): that is one
request for the clean stop. Only a signal after the grace period, or a stop that outlives its bound,
ends the node at once, and then it says what was left running.
"""
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
import rosutil
from rosutil import do, plan, seq

ROBOT_SCRIPT = {"default": {"duration_s": 0.0}, "caps": {"sim.slow": {"duration_s": 60}}}


class SimRobotProcess:
    """``bt-exec sim-robot`` serving provider ``sim`` to the node of ``namespace``; its stdout JSON lines are
    collected."""

    def __init__(self, folder, namespace: str):
        script = folder / "robot.json"
        script.write_text(json.dumps(ROBOT_SCRIPT))
        self.stderr_path = folder / "robot.stderr"
        self.stderr = open(self.stderr_path, "wb")  # noqa: SIM115  (open while the process runs)
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bt_exec.cli", "sim-robot", "--ros-args", "-p", f"sim_script:={script}",
             "-p", "providers:=[sim]", "-r", f"__ns:={namespace}"], stdout=subprocess.PIPE, stderr=self.stderr,
            text=True, cwd=rosutil.REPO,
            env=dict(os.environ, PYTHONUNBUFFERED="1"))
        self.events: list[dict] = []
        self._cond = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self):
        for line in self.process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._cond:
                self.events.append(event)
                self._cond.notify_all()

    def wait_for(self, kind: str, timeout: float = 20.0, **fields) -> dict:
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                for event in self.events:
                    if event.get("sim_robot") == kind and all(event.get(k) == v for k, v in fields.items()):
                        return event
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"the sim robot never reported {kind} {fields}: {self.events}; exit "
                                         f"status {self.process.poll()}; {self.stderr_path.read_text()[-2000:]}")
                self._cond.wait(min(left, 0.1))

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self._reader.join(5)
        self.stderr.close()


@pytest.fixture
def start_robot(tmp_path):
    """start_robot(namespace) -> a ready SimRobotProcess (stopped after the test)."""
    started = []

    def start(namespace: str) -> SimRobotProcess:
        process = SimRobotProcess(tmp_path, namespace)
        started.append(process)
        ready = process.wait_for("ready", timeout=30)
        assert ready["servers"] == [f"{namespace}/bt_exec/capabilities/sim"], ready
        return process

    yield start
    for process in started:
        process.stop()


def wait_exit(node, timeout: float) -> int:
    try:
        return node.process.wait(timeout)
    except subprocess.TimeoutExpired:
        node.process.kill()
        node.process.wait()
        raise AssertionError(f"the node did not exit within {timeout} s:\n{node.log()}") from None


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_a_double_signal_stops_cleanly_and_cancels_the_robots_goal(ros, start_node, start_robot, signum):
    node = start_node(backend="ros", capability_server_timeout_s=10.0)
    robot = start_robot(node.namespace)  # the node calls the servers of its own namespace
    status, subscription = ros.subscribe(f"{node.name}/status")
    ros.wait_matched(subscription)
    try:
        response = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"), do("sim.after"))))
        assert response.accepted, response
        accepted = robot.wait_for("accepted", plan_id=response.plan_id)

        node.process.send_signal(signum)  # the terminal's
        time.sleep(0.05)
        node.process.send_signal(signum)  # and launch's, a moment later
        code = wait_exit(node, 15)
        log = node.log()
        assert code == 0, f"exit code {code}:\n{log}"
        assert "forced exit" not in log and "Traceback" not in log, log

        canceled = robot.wait_for("canceled", timeout=5, plan_id=response.plan_id)
        assert canceled["goal_id"] == accepted["goal_id"]
        events = status.wait_for(lambda messages: messages if any(json.loads(m)["event"] == "node_shutdown"
                                                                  for m in messages) else None)
        events = [json.loads(message) for message in events]
        kinds = [event["event"] for event in events]
        completes = [event for event in events if event["event"] == "plan_complete"]
        assert [event["plan_id"] for event in completes] == [response.plan_id], kinds
        assert completes[0]["outcome"] == "cancelled"
        assert kinds[-1] == "node_shutdown" and kinds.index("plan_complete") < kinds.index("node_shutdown")
        assert [event for event in robot.events if event.get("cap") == "sim.after"] == []  # nothing ran after
    finally:
        ros.unsubscribe(subscription)


def test_ctrl_c_reaching_the_robot_first_still_ends_the_plan_cancelled(ros, start_node, start_robot):
    """Ctrl-C under ros2 launch signals the robot and the node at once; here the robot is signalled first and
    is known to be stopping before the node hears of it. The robot leaves its clients time to cancel, and
    the node cancels its plans before anything else: the plan ends cancelled, the goal canceled, not aborted."""
    node = start_node(backend="ros", capability_server_timeout_s=10.0)
    robot = start_robot(node.namespace)
    status, subscription = ros.subscribe(f"{node.name}/status")
    ros.wait_matched(subscription)
    try:
        response = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"))))
        assert response.accepted, response
        accepted = robot.wait_for("accepted", plan_id=response.plan_id)
        robot.process.send_signal(signal.SIGINT)
        stopping = robot.wait_for("stopping")
        assert stopping["goals"] == 1 and stopping["grace_s"] > 0
        node.process.send_signal(signal.SIGINT)
        assert wait_exit(node, 15) == 0, node.log()
        canceled = robot.wait_for("canceled", plan_id=response.plan_id)
        assert canceled["goal_id"] == accepted["goal_id"]
        assert [event for event in robot.events if event["sim_robot"] == "aborted"] == []
        completes = status.wait_for(lambda messages: [event for event in map(json.loads, messages)
                                                      if event["event"] == "plan_complete"])
        assert [(event["plan_id"], event["outcome"]) for event in completes] == [(response.plan_id, "cancelled")]
    finally:
        ros.unsubscribe(subscription)


@pytest.fixture
def stuck_node(ros, start_node, tmp_path):
    """stuck_node(shutdown_timeout_s) -> node: a node whose clean stop cannot finish, for its journal is a pipe
    nobody reads, filled by a plan of many ops (closing the journal waits for its writes); a plan runs."""
    fifo = tmp_path / "journal.fifo"
    os.mkfifo(fifo)
    reader = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open, never read: the pipe fills and writes block

    def start(shutdown_timeout_s: float):
        node = start_node(journal_path=str(fifo), shutdown_timeout_s=shutdown_timeout_s)
        many = {"op": "parallel", "op_id": 0, "description": "many at once",
                "children": [do("sim.quick", description=f"step {index} " + "x" * 100) for index in range(600)]}
        filler = ros.call(node.name, "submit", graph_json=plan(many))
        running = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"))))
        assert filler.accepted and running.accepted, (filler, running)
        deadline = time.monotonic() + 20
        while not json.loads(ros.call(node.name, "get_status", plan_id=filler.plan_id).status_json).get("outcome"):
            assert time.monotonic() < deadline, f"the plan of many ops never finished:\n{node.log()}"
            time.sleep(0.1)
        return node

    try:
        yield start
    finally:
        os.close(reader)


def test_a_stop_past_its_bound_is_forced_and_says_what_was_left(stuck_node):
    node = stuck_node(1.5)
    node.process.send_signal(signal.SIGINT)
    node.process.send_signal(signal.SIGINT)  # within the grace: still the same request
    code = wait_exit(node, 10)
    log = node.log()
    assert code == 1, f"exit code {code}:\n{log}"
    assert "forced exit: the clean stop took more than shutdown_timeout_s (1.5 s)" in log, log
    assert "plans in flight: " in log and "action goals not ended on their server: none" in log, log
    assert "Traceback" not in log, log


def test_a_signal_after_the_grace_period_forces_the_exit(stuck_node):
    node = stuck_node(30.0)
    node.process.send_signal(signal.SIGTERM)
    time.sleep(1.0)
    node.process.send_signal(signal.SIGTERM)  # within the grace: the same request, the clean stop goes on
    time.sleep(1.5)
    assert node.alive(), node.log()
    node.process.send_signal(signal.SIGTERM)  # 2.5 s after the first: go now
    code = wait_exit(node, 5)
    log = node.log()
    assert code == 128 + signal.SIGTERM, f"exit code {code}:\n{log}"
    assert "forced exit: SIGTERM 2.5 s after the first stop signal" in log, log
    assert "plans in flight: " in log and "action goals not ended on their server: none" in log, log
    assert "Traceback" not in log, log
