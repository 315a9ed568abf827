"""Helpers for the ROS 2 tests: an rclpy client (services, subscriptions) and node processes."""
from __future__ import annotations

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid

import rclpy
from bt_exec_interfaces.srv import Cancel, Control, Disarm, GetStatus, ListPlans, PlanControl, StopAt, Submit
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.exceptions import InvalidHandle
from rclpy.executors import MultiThreadedExecutor
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import String

REPO = pathlib.Path(__file__).resolve().parents[2]
SCENE = REPO / "examples" / "qwen3" / "scene.json"
SERVICES = {"submit": Submit, "stop_at": StopAt, "disarm": Disarm, "pause": PlanControl, "resume": PlanControl,
            "step": PlanControl, "cancel": Cancel, "get_status": GetStatus, "list_plans": ListPlans,
            "control": Control}
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
# Requests that change nothing: each service is probed with one before the tests use it.
PROBES = {"submit": {"graph_json": ""}, "stop_at": {}, "disarm": {}, "pause": {}, "resume": {}, "step": {},
          "cancel": {"plan_id": "0"}, "get_status": {}, "list_plans": {}, "control": {}}
REQUESTS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
EVENTS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
SIM_SCRIPT = {
    "default": {"outcome": "success", "duration_s": 0.02},
    "caps": {
        "sim.slow": {"outcome": "success", "duration_s": 60},
        "sim.step": {"outcome": "success", "duration_s": 0.4},
        # runs long enough for a few control calls to arrive while it does, on a loaded machine too
        "sim.hold": {"outcome": "success", "duration_s": 2.5},
        "sim.fail": {"outcome": "failure", "duration_s": 0.02},
    },
}


def write_sim_script(path: pathlib.Path) -> pathlib.Path:
    path.write_text(json.dumps(SIM_SCRIPT))
    return path


# --- plans ----------------------------------------------------------------------

def do(cap="sim.act", description=None, args=None):
    return {"op": "do", "op_id": 0, "description": description or f"call {cap}", "cap": cap, "args": args or {}}


def seq(*children, description="in order"):
    return {"op": "sequence", "op_id": 0, "description": description, "children": list(children)}


def plan(tree, description="a test plan") -> str:
    return json.dumps({"content": None, "rtdl_description": description, "rtdl": tree, "task_update": None})


def qwen3_graph() -> str:
    """The bare graph of examples/qwen3/cap_to_hatch.json (model output text, as a planner sends it)."""
    return json.loads((REPO / "examples" / "qwen3" / "cap_to_hatch.json").read_text())["response"]


# --- the client -----------------------------------------------------------------

class Collector:
    """Messages of one subscription, with waiting helpers."""

    def __init__(self):
        self.messages: list[str] = []
        self._cond = threading.Condition()

    def __call__(self, msg) -> None:
        with self._cond:
            self.messages.append(msg.data)
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 10.0):
        """Wait until predicate(messages) is truthy; return its value (AssertionError on timeout)."""
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate(list(self.messages))
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; {len(self.messages)} messages: {self.messages[-5:]!r}")
                self._cond.wait(min(left, 0.1))

    def events(self) -> list[dict]:
        return [json.loads(m) for m in list(self.messages)]


class RosHelper:
    def __init__(self):
        self.context = Context()
        rclpy.init(context=self.context)
        self.node = rclpy.create_node(f"bt_exec_test_{uuid.uuid4().hex[:8]}", context=self.context)
        self.group = ReentrantCallbackGroup()
        self.executor = MultiThreadedExecutor(num_threads=4, context=self.context)
        self.executor.add_node(self.node)
        self._closing = threading.Event()
        self._thread = threading.Thread(target=self._spin, daemon=True)
        self._thread.start()
        self._clients = {}
        self._lock = threading.Lock()

    def _spin(self) -> None:
        """Spin until closed. A subscription destroyed (``unsubscribe``) while the executor builds its wait set
        raises InvalidHandle there, which would end a plain ``spin`` and leave every later answer unheard; the
        next turn no longer sees it."""
        while not self._closing.is_set() and self.context.ok():
            try:
                self.executor.spin_once(timeout_sec=0.1)
            except InvalidHandle:
                continue

    def close(self):
        self._closing.set()
        self.executor.shutdown()
        self._thread.join(5)
        self.node.destroy_node()
        self.context.try_shutdown()

    def client(self, node_name: str, service: str, wait_s: float = 20.0):
        """A client whose service answered a harmless probe.

        A DDS quirk: a request sent right after ``wait_for_service`` on a fresh client
        can be lost while the server side has not matched the client yet (volatile
        topics). Probing until an answer comes makes the tests' own calls certain.
        """
        key = (node_name, service)
        with self._lock:
            if key in self._clients:
                return self._clients[key]
            client = self.node.create_client(SERVICES[service], f"{node_name}/{service}", qos_profile=REQUESTS,
                                             callback_group=self.group)
            if not client.wait_for_service(timeout_sec=wait_s):
                self.node.destroy_client(client)
                raise AssertionError(f"service {node_name}/{service} not available after {wait_s} s")
            for _attempt in range(40):
                request = SERVICES[service].Request()
                for name, value in PROBES[service].items():
                    setattr(request, name, value)
                done = threading.Event()
                client.call_async(request).add_done_callback(lambda _f, done=done: done.set())
                if done.wait(0.5):
                    break
            else:
                raise AssertionError(f"service {node_name}/{service} never answered a probe")
            self._clients[key] = client
            return client

    def call_async(self, node_name: str, service: str, **fields):
        """A concurrent.futures-like handle: .result(timeout)."""
        client = self.client(node_name, service)
        request = SERVICES[service].Request()
        for name, value in fields.items():
            setattr(request, name, value)
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        return _Pending(future, done)

    def call(self, node_name: str, service: str, timeout: float = 15.0, **fields):
        return self.call_async(node_name, service, **fields).result(timeout)

    def subscribe(self, topic: str, qos: QoSProfile = EVENTS) -> tuple[Collector, object]:
        collector = Collector()
        subscription = self.node.create_subscription(String, topic, collector, qos, callback_group=self.group)
        return collector, subscription

    def wait_matched(self, subscription, timeout: float = 10.0) -> None:
        deadline = time.monotonic() + timeout
        while subscription.get_publisher_count() == 0:
            if time.monotonic() > deadline:
                raise AssertionError(f"no publisher for {subscription.topic_name}")
            time.sleep(0.02)
        time.sleep(0.2)  # matched in the graph; give the reliable reader a moment to be acknowledged

    def unsubscribe(self, subscription) -> None:
        self.node.destroy_subscription(subscription)


class _Pending:
    def __init__(self, future, done: threading.Event):
        self.future, self.done = future, done

    def ready(self) -> bool:
        return self.done.is_set()

    def result(self, timeout: float = 15.0):
        if not self.done.wait(timeout):
            raise AssertionError(f"no answer within {timeout} s")
        return self.future.result()


# --- node processes -------------------------------------------------------------

class CliProcess:
    """``python -m bt_exec.cli ARGS`` in a process of its own, its output in ``log_path``."""

    def __init__(self, log_path: pathlib.Path, args: list[str]):
        self.log_path = log_path
        self._log = open(log_path, "wb")  # noqa: SIM115  (open while the process runs)
        self.process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", *args], stdout=self._log,
                                        stderr=subprocess.STDOUT, cwd=REPO, env=dict(os.environ, PYTHONUNBUFFERED="1"))

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, signum: int = signal.SIGTERM, timeout: float = 10.0) -> int | None:
        """Send ``signum`` and wait; the exit code, or None if it had to be killed."""
        if self.process.poll() is None:
            self.process.send_signal(signum)
            try:
                self.process.wait(timeout)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                self._log.close()
                return None
        self._log.close()
        return self.process.returncode

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")


class NodeProcess(CliProcess):
    """``python -m bt_exec.cli serve --ros-args -r __ns:=/test_<uuid> -p ...`` in a process of its own."""

    def __init__(self, log_path: pathlib.Path, params: dict, extra_ros_args: tuple[str, ...] = ()):
        self.namespace = f"/test_{uuid.uuid4().hex[:12]}"
        self.name = f"{self.namespace}/bt_exec"
        args = ["serve", "--ros-args", "-r", f"__ns:={self.namespace}"]
        for key, value in params.items():
            args += ["-p", f"{key}:={value}"]
        super().__init__(log_path, args + list(extra_ros_args))

    def wait_ready(self, ros: RosHelper, timeout: float = 30.0) -> None:
        client = ros.node.create_client(ListPlans, f"{self.name}/list_plans")
        try:
            deadline = time.monotonic() + timeout
            while not client.wait_for_service(timeout_sec=0.2):
                if self.process.poll() is not None:
                    raise AssertionError(f"node exited with {self.process.returncode}:\n{self.log()}")
                if time.monotonic() > deadline:
                    raise AssertionError(f"node not ready after {timeout} s:\n{self.log()}")
        finally:
            ros.node.destroy_client(client)
        for service in SERVICES:
            ros.client(self.name, service)


def run_cli(*args: str, timeout: float = 60.0) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "bt_exec.cli", *args], capture_output=True, text=True,
                          timeout=timeout, cwd=REPO)
