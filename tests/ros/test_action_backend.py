"""Capabilities over ROS 2 actions: RosActionBackend against the sim robot in separate processes.

Real rclpy on Fast DDS: the sim robot runs as its own process (``run_sim_robot``)
on a ROS domain picked at random for this module; the client node spins in a
MultiThreadedExecutor thread while ``bt_exec.Executor`` ticks in its own.
Skipped when rclpy or bt_exec_interfaces are missing, unless BT_EXEC_REQUIRE_ROS=1.
"""
from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest

try:
    import rclpy
    from rclpy.action import ActionServer, GoalResponse
    from rclpy.context import Context
    from rclpy.executors import MultiThreadedExecutor
    from rclpy.signals import SignalHandlerOptions

    from bt_exec_interfaces.action import RunCapability  # built into build/ros/install
except ImportError as exc:  # pragma: no cover - depends on the machine
    if os.environ.get("BT_EXEC_REQUIRE_ROS") == "1":
        raise
    pytest.skip(f"ROS 2 is not available ({exc}); source build/ros/env.sh, or set BT_EXEC_REQUIRE_ROS=1 to fail",
                allow_module_level=True)

import bt_exec
from bt_exec import CapabilityCall
from bt_exec.ros.action_backend import RosActionBackend, default_server_name, name_token, provider_of

# A domain of this module's own, the one tests/ros/conftest.py keeps free after the session's: its robots and
# client hear nobody else.
DOMAIN_ID = int(os.environ["ROS_DOMAIN_ID"]) + 1
SCRIPT = {
    "default": {"duration_s": 0.2},
    "caps": {
        "sim.instant": {"duration_s": 0},
        "sim.fail": {"outcome": "failure", "error": "broken gripper", "duration_s": 0.1},
        "sim.timeout": {"outcome": "timeout", "duration_s": 0.1},
        "sim.event": {"outcome": "grasp_failed", "duration_s": 0.1},
        "sim.slow": {"duration_s": 60},
        "sim.feedback": {"duration_s": 1.0, "output": {"image": "sim://snapshot/1.jpg"}},
        "steady.feedback": {"duration_s": 1.0},
        "fragile.slow": {"duration_s": 60},
        "stopper.slow": {"duration_s": 60},
    },
}
# Short leases so that a killed robot leaves the graph in ~2 s (Fast DDS defaults: 20 s).
FAST_DDS_PROFILE = """<?xml version="1.0" encoding="UTF-8" ?>
<profiles xmlns="http://www.eprosima.com/XMLSchemas/fastRTPS_Profiles">
  <participant profile_name="bt_exec_sim_robot_tests" is_default_profile="true">
    <rtps><builtin><discovery_config>
      <leaseDuration><sec>2</sec></leaseDuration>
      <leaseAnnouncement><sec>0</sec><nanosec>500000000</nanosec></leaseAnnouncement>
      <initialAnnouncements><count>10</count><period><sec>0</sec><nanosec>100000000</nanosec></period></initialAnnouncements>
    </discovery_config></builtin></rtps>
  </participant>
</profiles>
"""
ROBOT_MAIN = "import sys; from bt_exec.ros.sim_robot import run_sim_robot; sys.exit(run_sim_robot(sys.argv[1:]))"


def do(description, cap, args=None):
    return {"op": "do", "op_id": 0, "description": description, "cap": cap, "args": args or {}}


def seq(*children):
    return {"op": "sequence", "op_id": 0, "description": "in order", "children": list(children)}


def par(*children):
    return {"op": "parallel", "op_id": 0, "description": "together", "children": list(children)}


def wait_until(predicate, timeout, what):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


STARTED: list = []  # every SimRobot started, so that none outlives this module (see robots_cleaned_up)


def _die_with_parent():
    """In the child: SIGKILL when the test process dies, so a crashed run leaves no robot behind (Linux)."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass


@pytest.fixture(scope="module", autouse=True)
def robots_cleaned_up():
    yield
    for robot in STARTED:
        if robot.process.poll() is None:
            robot.process.kill()
            robot.process.wait(10)


class SimRobot:
    """A sim robot process; its stdout JSON lines are collected as ``events``."""

    def __init__(self, tmp_path, providers, name="robot", pause_service=True):
        self.script = tmp_path / f"{name}-script.json"
        self.script.write_text(json.dumps(SCRIPT), encoding="utf-8")
        profile = tmp_path / "fastdds.xml"
        profile.write_text(FAST_DDS_PROFILE, encoding="utf-8")
        self.env = {**os.environ, "ROS_DOMAIN_ID": str(DOMAIN_ID), "FASTRTPS_DEFAULT_PROFILES_FILE": str(profile),
                    "FASTDDS_DEFAULT_PROFILES_FILE": str(profile), "PYTHONUNBUFFERED": "1"}
        self.argv = [sys.executable, "-c", ROBOT_MAIN, "--ros-args", "-p", f"sim_script:={self.script}",
                     "-p", f"providers:=[{','.join(providers)}]", "-p", "feedback_period_s:=0.1",
                     "-p", f"pause_service:={str(pause_service).lower()}"]
        self.stderr_path = tmp_path / f"{name}.stderr"
        self.events: list[dict] = []
        self.process = None
        self._lock = threading.Lock()

    def start(self):
        self.events = []
        self._stderr = open(self.stderr_path, "ab")
        self.process = subprocess.Popen(self.argv, env=self.env, stdout=subprocess.PIPE, stderr=self._stderr,
                                        text=True, preexec_fn=_die_with_parent)
        STARTED.append(self)
        self._reader = threading.Thread(target=self._read, args=(self.process,), daemon=True)
        self._reader.start()
        self.wait_for(lambda e: e["sim_robot"] == "ready", timeout=30)
        return self

    def _read(self, process):
        for line in process.stdout:
            try:
                event = json.loads(line)
            except ValueError:
                continue
            with self._lock:
                self.events.append(event)

    def mark(self):
        """Where the events are now: pass it as ``since`` to look only at what happens later."""
        with self._lock:
            return len(self.events)

    def of(self, kind=None, since=0, **fields):
        with self._lock:
            return [e for e in self.events[since:] if (kind is None or e["sim_robot"] == kind)
                    and all(e.get(k) == v for k, v in fields.items())]

    def wait_for(self, match, timeout=10, since=0):
        def found():
            with self._lock:
                return [e for e in self.events[since:] if match(e)]
        if self.process.poll() is not None and not found():
            raise AssertionError(f"sim robot exited {self.process.returncode}: {self.stderr_path.read_text()}")
        try:
            return wait_until(found, timeout, "a sim robot event")
        except AssertionError as exc:
            with self._lock:
                seen = self.events[since:]
            exited = self.process.poll()
            raise AssertionError(f"{exc}; the sim robot (exit status {exited}) reported {seen}; stderr: "
                                 f"{self.stderr_path.read_text()[-2000:]}") from None

    def stop(self, sig=signal.SIGTERM, timeout=10):
        if self.process is None or self.process.poll() is not None:
            return self.process and self.process.returncode
        self.process.send_signal(sig)
        try:
            return self.process.wait(timeout)
        finally:
            self._reader.join(timeout=5)
            self._stderr.close()


@pytest.fixture(scope="module")
def robot(tmp_path_factory):
    sim_robot = SimRobot(tmp_path_factory.mktemp("sim_robot"), ["sim", "tiago_camera", "robot"]).start()
    yield sim_robot
    assert sim_robot.stop() == 0


@pytest.fixture(scope="module")
def client_node():
    """A client node of our own context (domain DOMAIN_ID), spinning in a MultiThreadedExecutor thread."""
    context = Context()
    rclpy.init(context=context, domain_id=DOMAIN_ID, signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node("bt_exec_test_action_client", context=context)
    executor = MultiThreadedExecutor(num_threads=4, context=context)
    executor.add_node(node)
    spinner = threading.Thread(target=executor.spin, daemon=True)
    spinner.start()
    yield node
    alive = spinner.is_alive()  # a callback that raised (or a client destroyed under it) ends the spin
    executor.shutdown()
    spinner.join(timeout=5)
    node.destroy_node()
    context.try_shutdown()
    assert alive, "the client node's executor stopped spinning during the tests"


@pytest.fixture
def backend(client_node):
    made = []

    def make(**options):
        options.setdefault("server_timeout_s", 15.0)  # a robot process needs a few seconds to be discovered
        made.append(RosActionBackend(client_node, **options))
        return made[-1]

    yield make
    for one in made:
        one.close()


@pytest.fixture
def executor(backend):
    made = []

    def make(ros_backend=None):
        ex = bt_exec.Executor(backend=ros_backend or backend())
        ex.start()
        made.append(ex)
        return ex

    yield make
    for ex in made:
        ex.close(wait_ms=5000)


def submit(ex, tree):
    answer = ex.submit({"content": "", "rtdl_description": "over ROS actions", "rtdl": tree, "task_update": None})
    assert answer["accepted"], answer
    return answer["plan_id"]


def op_of(record, cap):
    """The op of ``record`` that runs ``cap`` (op ids go on counting across an executor's plans)."""
    found = [op for op in record["ops"] if op.get("cap") == cap]
    assert len(found) == 1, record["ops"]
    return found[0]


def call(cap, op_id="1", plan_id="900", args=None, provider=None):
    return CapabilityCall(plan_id, op_id, cap, args or {}, provider, f"{plan_id}:{op_id}")


def poll(ros_backend, run_id, timeout=20):
    seen = []

    def terminal():
        status = ros_backend.status(run_id)
        if not seen or seen[-1] != status:
            seen.append(status)
        return status.terminal

    wait_until(terminal, timeout, f"run {run_id} to end")
    return seen


# --- routing (no processes) -------------------------------------------------------------


class TestRouting:
    def test_provider_is_the_field_else_the_cap_prefix_else_robot(self):
        assert provider_of(call("tiago_camera.camera_snapshot")) == "tiago_camera"
        assert provider_of(call("tiago_camera.camera_snapshot", provider="cam2")) == "cam2"
        assert provider_of(call("grab")) == "robot"
        assert provider_of(call(".odd")) == "robot"

    def test_names_are_sanitised_into_valid_ros_names(self):
        assert default_server_name("tiago_camera") == "/bt_exec/capabilities/tiago_camera"
        assert name_token("my-cam v2") == "my_cam_v2"
        assert name_token("3d__lidar") == "p3d_lidar"
        assert name_token("__") == "unnamed"
        assert name_token("robonix/x/run") == "robonix_x_run"

    def test_server_map_routes_and_is_validated(self, client_node):
        ros_backend = RosActionBackend(client_node, {"cam": "/robot1/camera", "arm": "arm_server", "*": "/fallback"})
        try:
            assert ros_backend.server_for(call("cam.snap")) == "/robot1/camera"
            assert ros_backend.server_for(call("arm.lift")) == "/arm_server"  # relative: the node's namespace
            assert ros_backend.server_for(call("other.thing")) == "/fallback"
        finally:
            ros_backend.close()
        assert RosActionBackend(client_node).server_for(call("x-y.go")) == "/bt_exec/capabilities/x_y"
        with pytest.raises(ValueError, match="not a valid ROS action name"):
            RosActionBackend(client_node, {"cam": "/bad name"})
        with pytest.raises(ValueError, match="positive"):
            RosActionBackend(client_node, server_timeout_s=0)



class TestGuardJudgesTheRoutedName:
    """Spellings that reach one action server (``arm_.move``, ``arm-.move``, ``arm.move`` all reach
    ``bt_exec/capabilities/arm``) get the call guard's one verdict: it judges the name a call is routed by."""

    SPELLINGS = ("arm.move", "arm_.move", "arm-.move", "arm__.move")

    def test_every_spelling_of_a_provider_is_routed_as_its_server_names_it(self, client_node):
        ros_backend = RosActionBackend(client_node)
        try:
            for cap in self.SPELLINGS:
                assert ros_backend.server_for(call(cap)) == "/bt_exec/capabilities/arm"
                assert ros_backend.routed_provider(cap, None) == "arm"
            assert ros_backend.routed_provider("grab", None) == "robot"  # a skill: the default provider
            assert ros_backend.routed_provider("move", "arm-") == "arm"
        finally:
            ros_backend.close()

    @pytest.mark.parametrize("rule", [{"cap": "arm.*"}, {"cap": "arm_.move"}, {"cap": "*", "provider": "arm-"}],
                             ids=["routed-cap", "other-spelling", "provider"])
    def test_a_rule_on_one_spelling_refuses_every_spelling(self, client_node, rule):
        ros_backend = RosActionBackend(client_node)
        guard = {"rules": [{"name": "arm-off", "effect": "deny", **rule}]}
        with contextlib.closing(bt_exec.Executor(backend=ros_backend, call_guard=guard)) as ex:
            for cap in self.SPELLINGS:
                answer = ex.submit(do("move", cap))
                assert [issue["code"] for issue in answer.get("issues", [])] == ["call_denied"], (cap, answer)
            if "provider" in rule:  # a cap naming no provider reaches the arm server by the call's provider
                answer = ex.submit({"plan_id": "7", "session_id": "s", "round": 1, "root_index": 0, "nodes": [
                    {"node_kind": 2, "children": [], "op_id": "1", "description": "move",
                     "call": {"contract_id": "move", "provider_id": "arm_"}}]})
                assert [issue["code"] for issue in answer["issues"]] == ["call_denied"], answer
        ros_backend.close()

    def test_a_provider_the_server_map_names_is_its_own_server(self, client_node):
        ros_backend = RosActionBackend(client_node, {"arm_": "/special_arm"})
        guard = {"rules": [{"name": "arm-off", "effect": "deny", "cap": "arm.*"}]}
        with contextlib.closing(bt_exec.Executor(backend=ros_backend, call_guard=guard)) as ex:
            assert ex.submit(do("move", "arm_.move"))["accepted"]
            assert not ex.submit(do("move", "arm-.move"))["accepted"]
        ros_backend.close()

    def test_an_allowed_spelling_reaches_the_server_its_rule_names(self, robot, backend):
        guard = {"default": "deny", "rules": [{"name": "sim-ok", "effect": "allow", "cap": "sim.instant"}]}
        since = robot.mark()
        with contextlib.closing(bt_exec.Executor(backend=backend(), call_guard=guard)) as ex:
            ex.start()
            record = ex.run_until_complete(submit(ex, do("instant", "sim_.instant")), timeout=30)
            refused = ex.submit(do("act", "sim_.act"))
        assert record["outcome"] == "succeeded", record
        robot.wait_for(lambda e: e["sim_robot"] == "succeeded" and e["cap"] == "sim_.instant", since=since)
        assert robot.of("accepted", since=since, cap="sim_.instant")[0]["server"] == "/bt_exec/capabilities/sim"
        assert [issue["code"] for issue in refused["issues"]] == ["call_denied"]


# --- over the sim robot ------------------------------------------------------------------


class TestOverActions:
    def test_plan_of_do_ops_succeeds_over_actions(self, robot, executor):
        ex = executor()
        mark = robot.mark()
        plan_id = submit(ex, seq(do("act", "sim.act", {"speed": 2}),
                                 par(do("snapshot", "tiago_camera.camera_snapshot"), do("skill", "robot.wave"))))
        record = ex.run_until_complete(plan_id, timeout=30)
        assert record["outcome"] == "succeeded", [(o["op_id"], o["state"], o["result"]) for o in record["ops"]]
        assert op_of(record, "sim.act")["result"]["output"] == {"sim": True, "cap": "sim.act"}
        assert op_of(record, "tiago_camera.camera_snapshot")["result"]["event"] == "success"
        done = robot.wait_for(lambda e: e["sim_robot"] == "succeeded" and e["plan_id"] == plan_id, since=mark)
        assert {(e["server"], e["cap"]) for e in done} >= {("/bt_exec/capabilities/sim", "sim.act"),
                                                            ("/bt_exec/capabilities/tiago_camera",
                                                             "tiago_camera.camera_snapshot")}
        wait_until(lambda: len(robot.of("succeeded", since=mark, plan_id=plan_id)) == 3, 5, "three goals to succeed")
        assert robot.of("succeeded", since=mark, cap="robot.wave")[0]["server"] == "/bt_exec/capabilities/robot"

    def test_failing_op_fails_with_the_servers_error(self, robot, executor):
        ex = executor()
        plan_id = submit(ex, seq(do("fails", "sim.fail"), do("never", "sim.act")))
        record = ex.run_until_complete(plan_id, timeout=30)
        failed = op_of(record, "sim.fail")
        assert record["outcome"] == "failed"
        assert failed["state"] == "failed" and op_of(record, "sim.act")["state"] == "pending"
        assert failed["result"]["error"] == "broken gripper"
        assert failed["result"]["event"] == "failure"
        plan_id = submit(ex, seq(do("times out", "sim.timeout")))
        record = ex.run_until_complete(plan_id, timeout=30)
        timed_out = op_of(record, "sim.timeout")
        assert timed_out["state"] == "timeout" and timed_out["result"]["event"] == "timeout"

    def test_status_pending_then_running_from_feedback_then_the_result(self, robot, backend):
        ros_backend = backend()
        run_id = ros_backend.start(call("sim.feedback", op_id="fb"))
        assert isinstance(run_id, str)
        seen = poll(ros_backend, run_id)
        states = [s.state for s in seen]
        assert states[0] == "PENDING" and states[-1] == "SUCCEEDED"
        assert "RUNNING" in states
        assert any(s.detail == "sim: sim.feedback" for s in seen if s.state == "RUNNING")
        assert seen[-1].output == {"image": "sim://snapshot/1.jpg"} and seen[-1].event == "success"
        assert ros_backend.status(run_id) == seen[-1]  # asking again gives the same answer
        assert ros_backend.in_flight() == []

    def test_the_tick_loop_wakes_for_the_goals_news_not_every_period(self, robot, client_node, executor):
        """``news_due_at``: while a goal runs the loop wakes for its feedback and liveness checks, not 100 times a
        second; with no call in flight it sleeps until woken."""
        class CountedBackend(RosActionBackend):
            looks = 0

            def send_due_news(self):
                self.looks += 1
                super().send_due_news()

        ros_backend = CountedBackend(client_node, server_timeout_s=15.0)
        try:
            ex = executor(ros_backend)  # 100 periods a second
            plan_id = submit(ex, seq(do("feeds back for a second", "sim.feedback")))
            began = time.monotonic()
            record = ex.run_until_complete(plan_id, timeout=30)
            took = time.monotonic() - began
            assert record["outcome"] == "succeeded", record["ops"]
            assert ros_backend.looks <= 30 * took, f"the loop woke {ros_backend.looks} times in {took:.2f} s"
            # the liveness check that was due last finds no goal: from then on the loop sleeps until woken
            wait_until(lambda: ros_backend.news_due_at() is None, 5, "nothing to be due with no call in flight")
        finally:
            ros_backend.close()

    def test_event_names_pass_through(self, robot, backend):
        ros_backend = backend()
        final = poll(ros_backend, ros_backend.start(call("sim.event")))[-1]
        assert (final.state, final.event, final.error) == ("FAILED", "grasp_failed", "sim outcome 'grasp_failed'")

    def test_cancel_while_a_goal_runs_reaches_the_server(self, robot, executor):
        ex = executor()
        mark = robot.mark()
        plan_id = submit(ex, seq(do("takes a minute", "sim.slow")))
        accepted = robot.wait_for(lambda e: e["sim_robot"] == "accepted" and e["plan_id"] == plan_id, timeout=20,
                                  since=mark)
        answer = ex.cancel_plan(plan_id, wait_ms=5000)
        assert answer["finished"], answer
        assert op_of(ex.get_plan_result(plan_id), "sim.slow")["state"] == "canceled"
        canceled = robot.wait_for(lambda e: e["sim_robot"] == "canceled" and e["plan_id"] == plan_id, timeout=5,
                                  since=mark)
        assert canceled[0]["goal_id"] == accepted[0]["goal_id"]
        wait_until(lambda: ex.backend.in_flight() == [], 5, "the backend to forget the cancelled goal")

    def test_a_pause_holds_a_running_goal_and_resume_lets_it_finish(self, robot, executor):
        ex = executor()
        mark = robot.mark()
        plan_id = submit(ex, seq(do("feeds back for a second", "sim.feedback"), do("after it", "sim.instant")))
        (accepted,) = robot.wait_for(lambda e: e["sim_robot"] == "accepted" and e["plan_id"] == plan_id,
                                     timeout=20, since=mark)
        (run,) = ex.backend.in_flight()
        wait_until(lambda: ex.backend.can_pause(run["run_id"]), 10, "the pause service to be discovered")
        answer = ex.pause_plan(plan_id)
        assert answer["paused"] and "(paused too)" in answer["message"], answer
        (paused,) = robot.wait_for(lambda e: e["sim_robot"] == "paused" and e["plan_id"] == plan_id, since=mark)
        assert paused["goal_id"] == accepted["goal_id"]
        wait_until(lambda: op_of(ex.get_plan_status(plan_id), "sim.feedback")["state"] == "paused", 5,
                   "the op to show paused")
        time.sleep(1.5)  # past the goal's one second: its clock stopped
        status = ex.get_plan_status(plan_id)
        assert [op["state"] for op in status["ops"]][1:] == ["paused", "pending"], status
        assert robot.of("succeeded", since=mark, plan_id=plan_id) == []
        assert ex.resume_plan(plan_id)["resumed"]
        robot.wait_for(lambda e: e["sim_robot"] == "resumed" and e["plan_id"] == plan_id, since=mark)
        record = ex.run_until_complete(plan_id, timeout=30)
        assert record["outcome"] == "succeeded", record
        assert op_of(record, "sim.feedback")["result"]["output"] == {"image": "sim://snapshot/1.jpg"}
        (succeeded,) = robot.of("succeeded", since=mark, plan_id=plan_id, cap="sim.feedback")
        assert succeeded["goal_id"] == accepted["goal_id"]

    def test_a_goal_on_a_server_without_pause_service_goes_on_to_its_end(self, tmp_path, executor):
        # ROS 2 actions have no pause of their own: without the pause service the goal runs to its end.
        steady = SimRobot(tmp_path, ["steady"], name="steady", pause_service=False).start()
        try:
            ex = executor()
            plan_id = submit(ex, seq(do("cannot be paused", "steady.feedback"), do("after it", "sim.instant")))
            steady.wait_for(lambda e: e["sim_robot"] == "accepted" and e["plan_id"] == plan_id, timeout=20)
            (run,) = ex.backend.in_flight()
            assert not ex.backend.can_pause(run["run_id"])
            answer = ex.pause_plan(plan_id)
            assert answer["paused"] and "goes on to its end" in answer["message"], answer
            steady.wait_for(lambda e: e["sim_robot"] == "succeeded" and e["plan_id"] == plan_id, timeout=10)
            wait_until(lambda: op_of(ex.get_plan_status(plan_id), "steady.feedback")["state"] == "succeeded", 5,
                       "the goal's end to reach its op while the plan is paused")
            status = ex.get_plan_status(plan_id)
            assert status["paused"] and [op["state"] for op in status["ops"]][1:] == ["succeeded", "pending"], status
            assert steady.of("paused") == []
            assert ex.resume_plan(plan_id)["resumed"]
            assert ex.run_until_complete(plan_id, timeout=30)["outcome"] == "succeeded"
        finally:
            assert steady.stop() == 0

    def test_cancel_right_after_start_leaves_no_orphan_goal(self, robot, backend):
        ros_backend = backend()
        poll(ros_backend, ros_backend.start(call("sim.instant", op_id="warm-up")))  # the server is known now
        raced = 0
        for attempt in range(5):
            op_id = f"race-{attempt}"
            run_id = ros_backend.start(call("sim.slow", op_id=op_id))
            phase = ros_backend.in_flight()[0]["phase"]
            ros_backend.cancel(run_id)
            raced += phase == "sent"  # sent, not yet accepted: the cancel must wait for the acceptance
            accepted = robot.wait_for(lambda e, o=op_id: e["sim_robot"] == "accepted" and e["op_id"] == o)
            ended = robot.wait_for(lambda e, o=op_id: e["sim_robot"] in ("canceled", "succeeded") and e["op_id"] == o)
            assert ended[0]["sim_robot"] == "canceled" and ended[0]["goal_id"] == accepted[0]["goal_id"]
            ros_backend.cancel(run_id)  # again, after the end: nothing happens
        assert raced >= 1, "no cancel was issued before the acceptance"
        wait_until(lambda: ros_backend.in_flight() == [], 5, "no goal left in flight")

    def test_cancel_while_waiting_for_the_server_sends_nothing(self, robot, backend):
        ros_backend = backend(server_timeout_s=5.0)
        run_id = ros_backend.start(call("absent.act"))
        ros_backend.cancel(run_id)
        assert ros_backend.in_flight() == []
        assert ros_backend.status(run_id).state == "CANCELED"

    def test_close_cancels_goals_in_flight_and_the_node_keeps_spinning(self, robot, client_node):
        ros_backend = RosActionBackend(client_node, server_timeout_s=15.0)
        mark = robot.mark()
        run_id = ros_backend.start(call("sim.slow", op_id="closing"))
        wait_until(lambda: ros_backend.status(run_id).state == "RUNNING", 20, "the goal to run")
        ros_backend.close()
        robot.wait_for(lambda e: e["sim_robot"] == "canceled" and e["op_id"] == "closing", since=mark, timeout=5)
        assert ros_backend.start(call("sim.act")).error.endswith("the ROS action backend is closed")
        ros_backend.close()  # again: nothing

    def test_unreachable_server_fails_the_op_after_the_timeout(self, robot, backend, executor):
        ros_backend = backend(server_timeout_s=1.0)
        began = time.monotonic()
        run_id = ros_backend.start(call("nobody.act"))
        patient = backend(server_timeout_s=600.0)
        waiting = patient.start(call("nobody.act"))
        assert patient.status(waiting).state == "PENDING"  # start returned: had it waited, it would have failed
        patient.cancel(waiting)
        ex = executor(ros_backend)
        plan_id = submit(ex, seq(do("nobody serves this", "nobody.act")))
        record = ex.run_until_complete(plan_id, timeout=10)
        took = time.monotonic() - began
        op = op_of(record, "nobody.act")
        assert op["state"] == "failed"
        assert op["result"]["error"] == "no action server /bt_exec/capabilities/nobody after 1.0 s"
        assert took >= 1.0  # the call waited server_timeout_s for its server
        assert ros_backend.status(run_id).error == "no action server /bt_exec/capabilities/nobody after 1.0 s"

    def test_rejected_goal_fails_with_a_clear_error(self, client_node, backend):
        server = ActionServer(client_node, RunCapability, "/bt_exec/capabilities/grumpy",
                              execute_callback=lambda handle: RunCapability.Result(),
                              goal_callback=lambda request: GoalResponse.REJECT)
        try:
            ros_backend = backend()
            final = poll(ros_backend, ros_backend.start(call("grumpy.act", op_id="7")))[-1]
            assert final.state == "FAILED"
            assert final.error == "action server /bt_exec/capabilities/grumpy rejected the goal (op 7, grumpy.act)"
        finally:
            server.destroy()


class TestSimRobot:
    def test_in_process_node_rejects_args_that_are_not_an_object_and_counts(self, client_node, backend):
        from rclpy.parameter import Parameter

        from bt_exec.compat.rclpy import LockedActionClient
        from bt_exec.ros.sim_robot import SimRobotNode

        sim = SimRobotNode(context=client_node.context, echo=False, parameter_overrides=[
            Parameter("providers", value=["inproc"]),
            Parameter("sim_script", value='{"caps": {"inproc.odd": {"outcome": "not_found"}}}')])
        client_node.executor.add_node(sim)
        raw = LockedActionClient(client_node, RunCapability, "/bt_exec/capabilities/inproc")
        try:
            assert sim.servers == {"inproc": "/bt_exec/capabilities/inproc"}
            ros_backend = backend()
            final = poll(ros_backend, ros_backend.start(call("inproc.odd", args={"x": [1, 2]})))[-1]
            assert (final.state, final.event) == ("FAILED", "not_found")
            assert sim.sim.calls[-1].args == {"x": [1, 2]} and sim.sim.calls[-1].provider == "inproc"
            wait_until(raw.server_is_ready, 10, "the in-process server")
            answer = raw.send_goal_async(RunCapability.Goal(plan_id="1", op_id="2", cap="inproc.x", args_json="[1]"))
            wait_until(answer.done, 10, "the goal response")
            assert not answer.result().accepted
            assert sim.counts["rejected"] == 1 and sim.counts["failed"] == 1
        finally:
            raw.destroy()
            client_node.executor.remove_node(sim)
            sim.destroy_node()

    def test_bad_configuration_exits_2_with_a_message(self, tmp_path, capsys):
        from bt_exec.ros.sim_robot import run_sim_robot

        assert run_sim_robot(["--ros-args", "-p", f"sim_script:={tmp_path / 'missing.json'}"]) == 2
        assert "cannot read sim script" in capsys.readouterr().err
        (tmp_path / "bad.json").write_text('{"default": {"outcome": 3}}', encoding="utf-8")
        assert run_sim_robot(["--ros-args", "-p", f"sim_script:={tmp_path / 'bad.json'}"]) == 2
        assert "sim script is invalid" in capsys.readouterr().err
        assert run_sim_robot(["--ros-args", "-p", "providers:=7"]) == 2
        assert "providers" in capsys.readouterr().err


class TestServerGoesAway:
    def test_killed_server_fails_the_op_and_the_executor_keeps_serving(self, tmp_path, robot, executor):
        fragile = SimRobot(tmp_path, ["fragile"], name="fragile").start()
        try:
            ex = executor()
            plan_id = submit(ex, seq(do("takes a minute", "fragile.slow")))
            fragile.wait_for(lambda e: e["sim_robot"] == "accepted" and e["plan_id"] == plan_id, timeout=20)
            fragile.stop(signal.SIGKILL)
            record = ex.run_until_complete(plan_id, timeout=15)
            op = op_of(record, "fragile.slow")
            assert op["state"] == "failed"
            assert op["result"]["error"] == ("action server /bt_exec/capabilities/fragile went away while the goal "
                                             f"ran (op {op['op_id']}, fragile.slow)")
            fragile.start()  # the same name, a new server
            plan_id = submit(ex, seq(do("quick", "fragile.act"), do("and elsewhere", "sim.act")))
            record = ex.run_until_complete(plan_id, timeout=30)
            assert record["outcome"] == "succeeded", [(o["op_id"], o["state"], o["result"]) for o in record["ops"]]
        finally:
            fragile.stop(signal.SIGKILL)

    def test_sigterm_stops_the_robot_promptly_and_its_goals_fail_clearly(self, tmp_path, robot, backend):
        stopper = SimRobot(tmp_path, ["stopper"], name="stopper").start()
        try:
            self._stop_while_a_goal_runs(stopper, backend())
        finally:
            stopper.stop(signal.SIGKILL)

    @staticmethod
    def _stop_while_a_goal_runs(stopper, ros_backend):
        run_id = ros_backend.start(call("stopper.slow", op_id="st"))
        seen = []  # status() drives a call (the executor polls every tick): poll it the while
        poller = threading.Thread(target=lambda: seen.extend(poll(ros_backend, run_id, timeout=40)), daemon=True)
        poller.start()
        stopper.wait_for(lambda e: e["sim_robot"] == "accepted" and e["op_id"] == "st", timeout=20)
        assert stopper.stop(signal.SIGTERM) == 0  # it ended itself (a robot still alive after 10 s is killed: None)
        assert stopper.of("aborted", op_id="st") and stopper.of("stopped")
        poller.join(timeout=20)
        final = seen[-1]
        assert final.state == "FAILED"
        assert final.error in ("sim robot shutting down",
                               "action server /bt_exec/capabilities/stopper went away while the goal ran "
                               "(op st, stopper.slow)")


class MuteServer:
    """A server that accepts and runs goals, while the client never hears the acceptance.

    Fast DDS drops a server's reply when the server has not yet discovered the client's reply reader; the
    goal then runs on the server and the client waits on. The drop is made where the network would make
    it: goal responses to this server's clients are discarded as the client takes them. The server spins
    on a node and executor of its own, stopped before it is destroyed: an action server destroyed while an
    executor still serves it ends that executor's spin.
    """

    NAME = "/bt_exec/capabilities/mute"

    def __init__(self, context, monkeypatch):
        from rclpy.action import CancelResponse

        from bt_exec.ros.action_backend import LockedActionClient

        self.started, self.canceled, self.stopping, self.goal_ids = (threading.Event(), threading.Event(),
                                                                     threading.Event(), [])
        take_data = LockedActionClient.take_data

        def take_data_losing_acceptances(client):
            data = take_data(client)
            if client._action_name == self.NAME:
                data.pop("goal", None)
            return data

        monkeypatch.setattr(LockedActionClient, "take_data", take_data_losing_acceptances)
        self.node = rclpy.create_node("bt_exec_test_mute_server", context=context)
        self.server = ActionServer(self.node, RunCapability, self.NAME, execute_callback=self._execute,
                                   goal_callback=lambda request: GoalResponse.ACCEPT,
                                   cancel_callback=lambda handle: CancelResponse.ACCEPT)
        self.executor = MultiThreadedExecutor(num_threads=2, context=context)
        self.executor.add_node(self.node)
        self.spinner = threading.Thread(target=self.executor.spin, daemon=True)
        self.spinner.start()

    def _execute(self, handle):
        self.goal_ids.append(bytes(handle.goal_id.uuid).hex())
        self.started.set()
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not self.stopping.is_set():
            if handle.is_cancel_requested:
                handle.canceled()
                self.canceled.set()
                return RunCapability.Result(success=False, error="canceled on request")
            time.sleep(0.02)
        handle.abort()
        return RunCapability.Result(success=False, error="nobody cancelled the goal")

    def destroy(self):
        self.stopping.set()
        self.executor.shutdown(timeout_sec=5)
        self.spinner.join(timeout=5)
        self.server.destroy()
        self.node.destroy_node()


@pytest.fixture
def mute_server(client_node, monkeypatch):
    server = MuteServer(client_node.context, monkeypatch)
    yield server
    server.destroy()


class TestLostAcceptance:
    """A goal the server runs while its acceptance never reached the client is cancelled by the goal's id."""

    def test_given_up_goal_is_cancelled_on_the_server(self, mute_server, backend):
        ros_backend = backend(server_timeout_s=2.0)
        run_id = ros_backend.start(call("mute.act", op_id="m1"))
        assert mute_server.started.wait(15), "the server never ran the goal"
        final = poll(ros_backend, run_id)[-1]
        assert final.state == "FAILED"
        assert final.error == ("action server /bt_exec/capabilities/mute did not accept or reject the goal within "
                               "2.0 s (is the client node spinning?)")
        assert mute_server.canceled.wait(10), "the goal ran on after the call was given up"

    def test_cancelled_call_is_cancelled_on_the_server(self, mute_server, backend):
        ros_backend = backend()
        run_id = ros_backend.start(call("mute.act", op_id="m2"))
        assert mute_server.started.wait(15), "the server never ran the goal"
        [in_flight] = ros_backend.in_flight()
        assert in_flight["phase"] == "sent" and in_flight["goal_id"] == mute_server.goal_ids[0]
        ros_backend.cancel(run_id)
        assert mute_server.canceled.wait(10), "the goal ran on after its call was cancelled"

    def test_closing_cancels_the_goal_on_the_server(self, mute_server, backend):
        ros_backend = backend()
        ros_backend.start(call("mute.act", op_id="m3"))
        assert mute_server.started.wait(15), "the server never ran the goal"
        ros_backend.close()
        assert mute_server.canceled.wait(10), "the goal ran on after the backend closed"
