"""The iiwa cell's contract, on real rclpy: node ``iiwa_llm_plan_executor`` in a process of its own, the
cell's scene and scene_ready published, and its services called, from this test process.

The cell's interface packages are stand-ins built from tests/ros/iiwa_interfaces by
scripts/build-iiwa-standins.sh (run here when they are not built yet).
"""
from __future__ import annotations

import ctypes
import importlib
import json
import os
import pathlib
import signal
import subprocess
import sys
import threading
import time
import uuid

import pytest
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

REPO = pathlib.Path(__file__).resolve().parents[2]
STANDINS = REPO / "build" / "ros" / "iiwa-standins"
SITE = STANDINS / "lib" / "python3.11" / "site-packages"
LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
EVENTS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
SCENE = {k: v for k, v in json.loads((REPO / "examples" / "qwen3" / "scene.json").read_text()).items()
         if k != "scene_revision"}  # the cell's scene_json: its revision is the envelope's
REVISION = 12


def scene_envelope(revision: int = REVISION, experiment_id: int = 20) -> str:
    return json.dumps({"experiment_id": experiment_id, "state_version": revision * 10, "scene_revision": revision,
                       "timestamp": 1000.0 + revision, "scene_json": json.dumps(SCENE)})


def submit_value(run_id: str, revision: int = REVISION, skill: str = "grab") -> str:
    """A Qwen3 answer in the cell's submit envelope; ``response`` is the model's text, as a client sends it."""
    graph = {"status": "ok", "entry": "s1", "plan": [{"id": "s1", "skill": skill, "object": "vacuum"}],
             "transitions": {"s1": {"success": "completed", "grasp_failed": "stop", "collision": "stop"}}}
    return json.dumps({"run_id": run_id, "scene_revision": revision, "response": json.dumps(graph)})


# --- the cell's interface packages (stand-ins) ---------------------------------------

@pytest.fixture(scope="module")
def cell():
    """SetString and GetRunStatus from the stand-ins, and the environment a node process finds them in."""
    if not (SITE / "iiwa_msgs").is_dir() or not (SITE / "webots_ros2_msgs").is_dir():
        built = subprocess.run(["bash", str(REPO / "scripts" / "build-iiwa-standins.sh")], capture_output=True,
                               text=True, timeout=600)
        assert built.returncode == 0, built.stdout + built.stderr
    # This process started without the stand-ins on LD_LIBRARY_PATH, which the type support's own dlopen reads
    # once at start: load their libraries by path first, so that the dlopen by name finds them loaded.
    for library in sorted((STANDINS / "lib").glob("*.so")):
        ctypes.CDLL(str(library), mode=ctypes.RTLD_GLOBAL)
    if str(SITE) not in sys.path:
        sys.path.insert(0, str(SITE))
    importlib.invalidate_caches()
    env = dict(os.environ, PYTHONUNBUFFERED="1",
               PYTHONPATH=os.pathsep.join(filter(None, (str(SITE), os.environ.get("PYTHONPATH")))),
               LD_LIBRARY_PATH=os.pathsep.join(filter(None, (str(STANDINS / "lib"),
                                                             os.environ.get("LD_LIBRARY_PATH")))),
               AMENT_PREFIX_PATH=os.pathsep.join(filter(None, (str(STANDINS),
                                                               os.environ.get("AMENT_PREFIX_PATH")))))
    from iiwa_msgs.srv import GetRunStatus
    from webots_ros2_msgs.srv import SetString
    return {"SetString": SetString, "GetRunStatus": GetRunStatus, "env": env}


class Timed:
    """Messages of one subscription with the monotonic time each came at."""

    def __init__(self):
        self.items: list[tuple[float, str]] = []
        self._cond = threading.Condition()

    def __call__(self, msg) -> None:
        with self._cond:
            self.items.append((time.monotonic(), msg.data))
            self._cond.notify_all()

    def texts(self) -> list[str]:
        with self._cond:
            return [text for _, text in self.items]

    def events(self) -> list[dict]:
        return [json.loads(text) for text in self.texts()]

    def wait_for(self, predicate, timeout: float = 15.0):
        deadline = time.monotonic() + timeout
        with self._cond:
            while True:
                value = predicate([json.loads(text) for _, text in self.items])
                if value:
                    return value
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"timed out; last messages: {[t for _, t in self.items[-6:]]!r}")
                self._cond.wait(min(left, 0.1))


class Cell:
    """One node process and what the cell around it does: scene, scene_ready, get_scene, the clients."""

    def __init__(self, ros, cell, tmp_path: pathlib.Path, sim_script: dict, **params):
        self.ros, self.types = ros, cell
        self.ns = f"/test_{uuid.uuid4().hex[:12]}"
        self.name = f"{self.ns}/iiwa_llm_plan_executor"
        self.topics = {"scene_topic": f"{self.ns}/scene_json", "scene_ready_topic": f"{self.ns}/scene_ready",
                       "scene_service": f"{self.ns}/get_scene"}
        script = tmp_path / f"sim-{uuid.uuid4().hex[:6]}.json"
        script.write_text(json.dumps(sim_script))
        args = [sys.executable, "-m", "bt_exec.ros.iiwa.node", "--ros-args", "-r", f"__ns:={self.ns}",
                "-p", f"sim_script:={script}"]
        for key, value in {**self.topics, **params}.items():
            args += ["-p", f"{key}:={value}"]
        self.log_path = tmp_path / f"node-{self.ns[6:]}.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115  (open while the process runs)
        self._closed: int | None = None  # the exit code, once closed
        self.status = Timed()
        self.plans = Timed()
        node = ros.node
        self._subs = [node.create_subscription(String, f"{self.name}/status", self.status, EVENTS,
                                               callback_group=ros.group),
                      node.create_subscription(String, f"{self.name}/plan", self.plans, LATCHED,
                                               callback_group=ros.group)]
        self.scene_pub = node.create_publisher(String, self.topics["scene_topic"], LATCHED)
        self.ready_pub = node.create_publisher(Bool, self.topics["scene_ready_topic"], LATCHED)
        self._clients = {}
        self.process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO,
                                        env=cell["env"])

    def log(self) -> str:
        if not self._log.closed:
            self._log.flush()
        return self.log_path.read_text(errors="replace")

    def wait_ready(self, timeout: float = 40.0) -> None:
        for service in ("get_status", "submit", "cancel"):
            self._client(service, timeout)
        for subscription in self._subs:
            deadline = time.monotonic() + timeout
            while subscription.get_publisher_count() == 0:
                assert time.monotonic() < deadline, f"no publisher on {subscription.topic_name}:\n{self.log()}"
                time.sleep(0.05)
        time.sleep(0.3)  # matched; let the reliable readers be acknowledged

    def _client(self, service: str, timeout: float = 20.0):
        if service in self._clients:
            return self._clients[service]
        srv = self.types["GetRunStatus"] if service == "get_status" else self.types["SetString"]
        client = self.ros.node.create_client(srv, f"{self.name}/{service}", callback_group=self.ros.group)
        deadline = time.monotonic() + timeout
        while not client.wait_for_service(timeout_sec=0.2):
            assert self.process.poll() is None, f"node exited {self.process.returncode}:\n{self.log()}"
            assert time.monotonic() < deadline, f"{service} not served:\n{self.log()}"
        # A request sent just as the service appears can be lost before the server matched the client:
        # a harmless probe (a run id never submitted) is repeated until it is answered.
        for _attempt in range(40):
            request = srv.Request()
            if service == "get_status":
                request.run_id = "probe"
            else:
                request.value = "probe" if service == "cancel" else ""
            done = threading.Event()
            client.call_async(request).add_done_callback(lambda _f, done=done: done.set())
            if done.wait(0.5):
                break
        else:
            raise AssertionError(f"{service} never answered:\n{self.log()}")
        self._clients[service] = client
        return client

    def call(self, service: str, timeout: float = 15.0, **fields):
        client = self._client(service)
        request = client.srv_type.Request()
        for key, value in fields.items():
            setattr(request, key, value)
        done = threading.Event()
        future = client.call_async(request)
        future.add_done_callback(lambda _f: done.set())
        assert done.wait(timeout), f"{service}: no answer within {timeout} s:\n{self.log()}"
        return future.result()

    def submit(self, value: str) -> bool:
        return self.call("submit", value=value).success

    def get_status(self, run_id: str) -> tuple[bool, dict]:
        response = self.call("get_status", run_id=run_id)
        return response.found, json.loads(response.status_json)

    def publish_scene(self, revision: int = REVISION, experiment_id: int = 20) -> None:
        self.scene_pub.publish(String(data=scene_envelope(revision, experiment_id)))

    def set_ready(self, value: bool) -> None:
        self.ready_pub.publish(Bool(data=value))

    def answer(self, run_id: str, after: int = 0) -> dict:
        """The node's ``submit`` status message for ``run_id`` (the ``after``-th and later)."""
        return self.status.wait_for(lambda events: [e for e in events if e["event"] == "submit"
                                                    and e["run_id"] == run_id][after:])[0]

    def completed(self, run_id: str, timeout: float = 20.0) -> dict:
        return self.status.wait_for(lambda events: next((e for e in events if e["event"] == "plan_complete"
                                                         and e["run_id"] == run_id), None), timeout)

    def started(self) -> list[dict]:
        return [e for e in self.status.events() if e["event"] == "plan_started"]

    def close(self, signals=(signal.SIGTERM,)) -> int | None:
        """Stop the node with ``signals`` (sent 0.1 s apart), once: its exit code."""
        if self._closed is not None:
            return self._closed
        for subscription in self._subs:
            self.ros.node.destroy_subscription(subscription)
        for client in self._clients.values():
            self.ros.node.destroy_client(client)
        self.ros.node.destroy_publisher(self.scene_pub)
        self.ros.node.destroy_publisher(self.ready_pub)
        code = None
        if self.process.poll() is None:
            for index, signum in enumerate(signals):
                if index:
                    time.sleep(0.1)
                self.process.send_signal(signum)
            try:
                code = self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        else:
            code = self.process.returncode
        self._log.close()
        self._closed = code
        return code


@pytest.fixture
def make_cell(ros, cell, tmp_path):
    made = []

    def make(grab_s: float = 0.05, **params) -> Cell:
        sim = {"default": {"outcome": "success", "duration_s": 0.02},
               "caps": {"grab": {"outcome": "success", "duration_s": grab_s}}}
        made.append(Cell(ros, cell, tmp_path, sim, **params))
        made[-1].wait_ready()
        return made[-1]

    yield make
    for one in made:
        assert one.close() == 0, f"the node did not stop cleanly on SIGTERM:\n{one.log()}"


# --- the seed's acceptance list --------------------------------------------------------

def test_readiness_one_run_idempotence_plan_topic_and_status(make_cell, ros):
    node = make_cell(grab_s=6.0, ready_delay_s=1.5)  # r1 still runs while r2 is tried, on a loaded CI machine too

    # Before ready: refused, with the reason on ~/status, nothing published.
    assert node.submit(submit_value("r1")) is False
    refusal = node.answer("r1")
    assert refusal["verdict"] == "not_ready" and "scene_ready" in refusal["message"]
    node.publish_scene()
    node.set_ready(True)
    node.status.wait_for(lambda events: any(e["event"] == "scene" and e["scene_revision"] == REVISION
                                            for e in events))
    assert node.submit(submit_value("r1")) is False  # the delay has not passed yet
    assert "ready_delay_s" in node.answer("r1", after=1)["message"]
    assert node.get_status("r1")[0] is False  # a refusal for not being ready is not kept: retry the same id

    # After the delay: accepted.
    node.status.wait_for(lambda events: any(e["event"] == "readiness" and e["ready"] for e in events), 10)
    value = submit_value("r1")
    assert node.submit(value) is True
    # The plan: exactly the submitted envelope, before the first motion.
    node.plans.wait_for(lambda plans: plans)
    first_motion = node.status.wait_for(lambda events: next(
        (i for i, e in enumerate(events) if e["event"] == "node_state" and e.get("state") == "running"), None)
        is not None)
    assert first_motion
    assert node.plans.texts() == [value]
    motion_at = next(at for at, text in node.status.items if json.loads(text)["event"] == "node_state")
    assert node.plans.items[0][0] <= motion_at

    # While r1 runs: the same id again is the same answer and no second motion; a new id is refused.
    assert node.submit(value) is True
    assert node.answer("r1", after=3)["repeated"] is True
    assert node.submit(submit_value("r2")) is False
    assert node.answer("r2")["verdict"] == "busy"
    found, live = node.get_status("r1")
    assert found and live["running"] is True and live["current_step"] == "s1" and live["terminal"] is None

    done = node.completed("r1")
    assert done["terminal"] == "completed"
    found, final = node.get_status("r1")
    assert found and final["running"] is False and final["terminal"] == "completed"
    assert final["path"] == ["s1", "completed"] and final["patron"] == ["vacuum"]
    assert len(node.started()) == 1 and node.plans.texts() == [value]

    # A stale revision and an unknown skill are refused, kept per run id, never published.
    assert node.submit(submit_value("r3", revision=REVISION - 1)) is False
    stale = node.answer("r3")
    assert stale["verdict"] == "invalid" and stale["issues"][0]["code"] == "stale_revision"
    assert node.submit(submit_value("r4", skill="tighten")) is False
    found, refused = node.get_status("r4")
    assert found and refused["accepted"] is False and refused["issues"]
    assert node.submit(submit_value("r4")) is False  # same id: the same answer, even with a valid graph now

    # Unknown run id: not found.
    found, unknown = node.get_status("never-submitted")
    assert found is False and "error" in unknown

    # A late subscriber gets the last accepted graph, once.
    late = Timed()
    subscription = ros.node.create_subscription(String, f"{node.name}/plan", late, LATCHED,
                                                callback_group=ros.group)
    try:
        late.wait_for(lambda plans: plans)
        time.sleep(0.3)
        assert late.texts() == [value]
    finally:
        ros.node.destroy_subscription(subscription)
    assert node.plans.texts() == [value] and len(node.started()) == 1
    assert all("run_id" in event for event in node.status.events())


def test_cancel_by_run_id_and_the_scene_from_get_scene(make_cell, ros):
    answered = []

    def get_scene(_request, response):
        answered.append(True)
        response.success, response.message = True, scene_envelope(REVISION)
        return response

    service = None
    node = None
    try:
        # The node asks get_scene at start while no envelope came on the topic.
        node = make_cell(grab_s=30.0, ready_delay_s=0.0, get_scene_wait_s=30.0)
        service = ros.node.create_service(Trigger, node.topics["scene_service"], get_scene,
                                          callback_group=ros.group)
        node.status.wait_for(lambda events: any(e["event"] == "scene" and e["source"] == "scene_service"
                                                for e in events))
        assert answered
        node.set_ready(True)
        node.status.wait_for(lambda events: any(e["event"] == "readiness" and e["ready"] for e in events))
        assert node.submit(submit_value("c1")) is True
        node.status.wait_for(lambda events: any(e["event"] == "node_state" and e.get("state") == "running"
                                                for e in events))
        assert node.call("cancel", value="c1").success is True
        done = node.completed("c1")
        assert done["terminal"] == "stop" and "~/cancel" in done["terminal_reason"]
        found, final = node.get_status("c1")
        assert found and final["terminal"] == "stop" and "~/cancel" in final["terminal_reason"]
        assert node.call("cancel", value="c1").success is False       # already finished
        assert node.call("cancel", value="nobody").success is False   # never accepted
    finally:
        if service is not None:
            ros.node.destroy_service(service)


def test_scene_ready_false_stops_the_run_and_refuses_until_ready(make_cell):
    node = make_cell(grab_s=30.0, ready_delay_s=0.5)
    node.publish_scene()
    node.set_ready(True)
    node.status.wait_for(lambda events: any(e["event"] == "readiness" and e["ready"] for e in events))
    assert node.submit(submit_value("d1")) is True
    node.status.wait_for(lambda events: any(e["event"] == "node_state" and e.get("state") == "running"
                                            for e in events))
    node.set_ready(False)
    done = node.completed("d1")
    assert done["terminal"] == "stop" and "scene_ready" in done["terminal_reason"]
    assert node.submit(submit_value("d2")) is False
    assert node.answer("d2")["verdict"] == "not_ready"
    node.set_ready(True)
    node.status.wait_for(lambda events: [e for e in events if e["event"] == "readiness" and e["ready"]][1:])
    assert node.submit(submit_value("d2")) is True
    node.status.wait_for(lambda events: any(e["event"] == "plan_started" and e["run_id"] == "d2" for e in events))


def test_a_stale_scene_stops_the_run(make_cell):
    node = make_cell(grab_s=30.0, ready_delay_s=0.0, scene_max_age_s=1.5)
    node.publish_scene()
    node.set_ready(True)
    node.status.wait_for(lambda events: any(e["event"] == "readiness" and e["ready"] for e in events))
    assert node.submit(submit_value("e1")) is True
    done = node.completed("e1", timeout=10)
    assert done["terminal"] == "stop" and "stale" in done["terminal_reason"]
    assert node.submit(submit_value("e2")) is False
    assert "stale" in node.answer("e2")["message"]
    node.publish_scene(REVISION + 1)
    node.status.wait_for(lambda events: [e for e in events if e["event"] == "readiness" and e["ready"]][1:])
    assert node.submit(submit_value("e2", revision=REVISION + 1)) is True


def test_envelopes_of_another_experiment_are_refused(make_cell):
    node = make_cell(experiment_id=20)
    node.publish_scene(experiment_id=7)
    refused = node.status.wait_for(lambda events: next((e for e in events if e["event"] == "scene_refused"), None))
    assert "experiment" in refused["reason"]
    node.set_ready(True)
    assert node.submit(submit_value("f1")) is False
    assert "no scene" in node.answer("f1")["message"]


def test_a_double_sigint_as_ros2_launch_sends_it_is_one_clean_stop(make_cell):
    cell = make_cell()
    code = cell.close(signals=(signal.SIGINT, signal.SIGINT))
    assert code == 0, f"exit {code}:\n{cell.log()}"


def test_a_missing_cell_package_exits_2_naming_it():
    env = {k: v for k, v in os.environ.items()}
    for key in ("PYTHONPATH", "LD_LIBRARY_PATH", "AMENT_PREFIX_PATH"):
        env[key] = os.pathsep.join(p for p in env.get(key, "").split(os.pathsep) if "iiwa-standins" not in p)
    result = subprocess.run([sys.executable, "-m", "bt_exec.ros.iiwa.node", "--ros-args", "-r",
                             f"__ns:=/test_{uuid.uuid4().hex[:8]}"], capture_output=True, text=True, timeout=60,
                            cwd=REPO, env=env)
    assert result.returncode == 2, result.stderr
    assert "webots_ros2_msgs" in result.stderr and "Traceback" not in result.stderr


def require_physics() -> None:
    """Skip without the physics extra or sensor_msgs (fail instead where BT_EXEC_REQUIRE_PHYSICS=1, as in CI)."""
    physics = importlib.import_module("bt_exec.motion.physics")
    try:
        physics.require_physics()
        importlib.import_module("sensor_msgs.msg")
    except (physics.PhysicsUnavailable, ImportError) as missing:
        if os.environ.get("BT_EXEC_REQUIRE_PHYSICS") == "1":  # CI installs the extra in the ROS environment too
            pytest.fail(f"BT_EXEC_REQUIRE_PHYSICS=1, but backend physics: {missing}", pytrace=False)
        pytest.skip(f"backend physics: {missing}")


def test_backend_physics_runs_the_graph_on_the_simulated_arm_and_publishes_its_joints(make_cell, ros):
    require_physics()
    from sensor_msgs.msg import JointState
    heard: list[tuple[list[str], list[float], list[float]]] = []
    moved = threading.Event()

    def on_joints(msg) -> None:
        heard.append((list(msg.name), list(msg.position), list(msg.velocity)))
        if max(map(abs, msg.velocity)) > 0.1:
            moved.set()
    subscription = ros.node.create_subscription(JointState, "/joint_states", on_joints, 50,
                                                callback_group=ros.group)
    try:
        node = make_cell(backend="physics", physics_speed=2.0, ready_delay_s=0.0)
        node.publish_scene()
        node.set_ready(True)
        node.status.wait_for(lambda events: any(e["event"] == "readiness" and e["ready"] for e in events), 20)
        assert node.submit(submit_value("p1")) is True, node.answer("p1")
        done = node.completed("p1", timeout=60)
        assert done["terminal"] == "completed" and done["state"]["patron"] == ["vacuum"], done
        assert moved.wait(5), f"no joint moved faster than 0.1 rad/s in {len(heard)} joint states"
    finally:
        ros.node.destroy_subscription(subscription)
    assert heard[-1][0] == [f"joint_{i}" for i in range(1, 8)]


def test_backend_physics_puts_the_parts_where_a_later_scene_says(make_cell):
    require_physics()
    node = make_cell(backend="physics", physics_speed=0.0, ready_delay_s=0.0)
    node.publish_scene()
    node.set_ready(True)
    node.status.wait_for(lambda events: any(e["event"] == "readiness" and e["ready"] for e in events), 20)

    def publish(revision: int, **state) -> None:
        node.scene_pub.publish(String(data=json.dumps({
            "experiment_id": 20, "state_version": revision * 10, "scene_revision": revision,
            "timestamp": 1000.0 + revision, "scene_json": json.dumps(dict(SCENE, state=state))})))

    # a scene the cell cannot be put in is refused as it comes, naming why
    publish(13, vacuum="vacuum_socket", cap="under_the_table")
    refused = node.status.wait_for(lambda events: next((e for e in events if e["event"] == "scene_refused"), None))
    assert "a place the poses file does not name" in refused["reason"], refused
    # the tool in the patron: picking the cap needs it on the flange, which only this scene put there
    publish(14, vacuum="patron", cap="cap_storage")
    node.status.wait_for(lambda events: any(e["event"] == "scene" and e["scene_revision"] == 14 for e in events))
    pick = {"status": "ok", "entry": "s1", "plan": [{"id": "s1", "skill": "grab", "object": "cap"}],
            "transitions": {"s1": {"success": "completed", "grasp_failed": "stop", "collision": "stop"}}}
    value = json.dumps({"run_id": "pick", "scene_revision": 14, "response": json.dumps(pick)})
    assert node.submit(value) is True, node.answer("pick")
    done = node.completed("pick", timeout=60)
    assert done["terminal"] == "completed" and done["state"]["holding"] == "cap", done
