"""``backend:=physics``: a Qwen3 graph moves the simulated KUKA iiwa 14 inside a bt_exec node process, and a
subscriber of another process hears the arm's joints on /joint_states. Real MuJoCo (the physics extra); skipped,
with the reason, where it cannot be imported."""
import json
import os
import statistics
import threading
import time

import pytest
import rosutil

from bt_exec.motion.physics import PhysicsUnavailable, require_physics

try:
    require_physics()
    from sensor_msgs.msg import JointState
except (PhysicsUnavailable, ImportError) as missing:
    if os.environ.get("BT_EXEC_REQUIRE_PHYSICS") == "1":  # CI installs the extra in the ROS environment too
        pytest.fail(f"BT_EXEC_REQUIRE_PHYSICS=1, but backend physics: {missing}", pytrace=False)
    pytest.skip(f"backend physics: {missing}", allow_module_level=True)

JOINTS = [f"joint_{i}" for i in range(1, 8)]


class JointStates:
    """The JointState messages of one subscription: (receipt time, stamp, names, positions, velocities)."""

    def __init__(self):
        self.messages = []
        self._cond = threading.Condition()

    def __call__(self, msg) -> None:
        with self._cond:
            self.messages.append((time.monotonic(), msg.header.stamp.sec + msg.header.stamp.nanosec * 1e-9,
                                  list(msg.name), list(msg.position), list(msg.velocity)))
            self._cond.notify_all()

    def wait_for(self, predicate, timeout: float = 15.0):
        with self._cond:
            if not self._cond.wait_for(lambda: predicate(self.messages), timeout):
                raise AssertionError(f"timed out; {len(self.messages)} joint states, the last {self.messages[-1:]}")
            return list(self.messages)


def test_a_graph_runs_to_its_terminal_on_the_simulated_arm_whose_joints_go_out_on_joint_states(ros, start_node):
    node = start_node(backend="physics", scene_file=str(rosutil.SCENE), physics_speed=4.0, joint_states_hz=30.0)
    joints = JointStates()
    subscription = ros.node.create_subscription(JointState, "/joint_states", joints, 50, callback_group=ros.group)
    try:
        at_home = joints.wait_for(lambda messages: messages)[-1]  # published before any plan: the arm at rest
        assert at_home[2] == JOINTS and max(map(abs, at_home[4])) < 1e-2
        status, status_subscription = ros.subscribe(f"{node.name}/status")
        ros.wait_matched(status_subscription)
        response = ros.call(node.name, "submit", graph_json=rosutil.qwen3_graph(), dialect="qwen3",
                            scene_revision=12, run_id="hatch-physics")
        assert response.accepted, (response.message, response.issues_json)

        def complete(messages):
            return [event for event in map(json.loads, messages)
                    if event["event"] == "plan_complete" and event["plan_id"] == response.plan_id]
        (done,) = status.wait_for(complete, timeout=60)
        assert done["outcome"] == "succeeded" and done["terminal"] == "completed", done
        assert done["state"]["locations"]["cap"] == "hatch_seat"
        # the same cell as every door sees it: ~/control's get_cell_view, the arm at rest where /joint_states says
        view = ros.call(node.name, "control", operation="get_cell_view", args_json="{}")
        asked = time.monotonic()
        assert view.success, view.answer_json
        view = json.loads(view.answer_json)
        assert view["tool"] == pytest.approx([0.60, 0.25, 0.27], abs=0.01)  # above the hatch seat
        heard = joints.wait_for(lambda messages: messages[-1][0] > asked)
        assert view["joints"] == pytest.approx(heard[-1][3], abs=1e-4)
    finally:
        ros.node.destroy_subscription(subscription)
    assert all(message[2] == JOINTS and len(message[3]) == len(message[4]) == 7 for message in heard)
    # the arm moved: a joint went faster than 0.1 rad/s, and it ended elsewhere than home
    assert max(max(map(abs, message[4])) for message in heard) > 0.1
    assert max(abs(a - b) for a, b in zip(heard[-1][3], at_home[3])) > 0.1
    # about 30 a second, by the node's clock (a loaded machine may bunch a few)
    gaps = [b[1] - a[1] for a, b in zip(heard, heard[1:])]
    assert 0.02 < statistics.median(gaps) < 0.05, statistics.median(gaps)
