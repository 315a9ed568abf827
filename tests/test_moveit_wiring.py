"""The moveit backend's node wiring (bt_exec.ros.moveit_wiring): runs only where moveit_py imports.

MoveItPy itself is not started: MoveItMotion is replaced by a stand-in that records what the node's
subscriptions feed it, and the node by one that records its subscriptions (see docs/moveit.md).
"""
import importlib.util
import pathlib

import pytest

if importlib.util.find_spec("moveit") is None:
    pytest.skip("moveit_py is not installable on these machines", allow_module_level=True)

from bt_exec import Scene, SkillCatalog
from bt_exec.errors import ConfigError
from bt_exec.ros import moveit_wiring
from bt_exec.motion.backend import MoveItBackend
from bt_exec.motion.policy import MotionLimits

REPO = pathlib.Path(__file__).resolve().parents[1]
SETTINGS = {"cell_poses_file": str(REPO / "config" / "grant_cell_poses.yaml"),
            "motion_limits_file": str(REPO / "config" / "motion_limits.yaml"), "moveit_group": "arm",
            "tcp_link": "tool0"}


class FakeMotion:
    def __init__(self, group, tcp_link):
        self.group, self.tcp_link = group, tcp_link
        self.joint_stamps = self.scene_stamps = 0

    def joint_states_received(self):
        self.joint_stamps += 1

    def scene_received(self):
        self.scene_stamps += 1


class FakeNode:
    def __init__(self):
        self.subscriptions = {}
        self.warnings = []

    def create_subscription(self, msg_type, topic, callback, qos):
        self.subscriptions[topic] = (msg_type, callback)

    def get_logger(self):
        node = self

        class Logger:
            def warning(self, text):
                node.warnings.append(text)

        return Logger()


@pytest.fixture
def wired(monkeypatch):
    monkeypatch.setattr(moveit_wiring, "MoveItMotion", FakeMotion)
    node = FakeNode()
    scene = Scene.from_file(REPO / "examples" / "qwen3" / "scene.json")
    backend = moveit_wiring.make_moveit_backend(node, SETTINGS, SkillCatalog.named("grant"), scene)
    return node, backend


def test_the_backend_is_built_from_the_settings(wired):
    node, backend = wired
    assert isinstance(backend, MoveItBackend)
    motion = backend.skills.motion
    assert (motion.group, motion.tcp_link) == ("arm", "tool0")
    assert backend.skills.policy.limits == MotionLimits.from_yaml(SETTINGS["motion_limits_file"])
    assert {"work", "vacuum_socket", "hole_1"} <= set(backend.skills.poses)
    assert backend.world.locations["cap"] == "cap_storage"
    assert node.warnings == []


def test_joint_states_and_the_planning_scene_feed_the_freshness_stamps(wired):
    node, backend = wired
    from moveit_msgs.msg import PlanningScene
    from sensor_msgs.msg import JointState

    assert node.subscriptions["/joint_states"][0] is JointState
    assert node.subscriptions["/monitored_planning_scene"][0] is PlanningScene
    node.subscriptions["/joint_states"][1](JointState())
    node.subscriptions["/monitored_planning_scene"][1](PlanningScene())
    node.subscriptions["/monitored_planning_scene"][1](PlanningScene())
    motion = backend.skills.motion
    assert (motion.joint_stamps, motion.scene_stamps) == (1, 2)


def test_a_moveitpy_that_cannot_start_is_a_config_error(monkeypatch):
    def broken(group, tcp_link):
        raise RuntimeError("no robot_description")

    monkeypatch.setattr(moveit_wiring, "MoveItMotion", broken)
    scene = Scene.from_file(REPO / "examples" / "qwen3" / "scene.json")
    with pytest.raises(ConfigError, match="cannot start MoveItPy .*no robot_description"):
        moveit_wiring.make_moveit_backend(FakeNode(), SETTINGS, SkillCatalog.named("grant"), scene)


def test_scene_targets_without_a_pose_are_warned_about(monkeypatch, tmp_path):
    monkeypatch.setattr(moveit_wiring, "MoveItMotion", FakeMotion)
    poses = tmp_path / "poses.yaml"
    poses.write_text("work: {position: [0.5, 0, 0.45]}\n")
    node = FakeNode()
    scene = Scene.from_file(REPO / "examples" / "qwen3" / "scene.json")
    moveit_wiring.make_moveit_backend(node, dict(SETTINGS, cell_poses_file=str(poses)), SkillCatalog.named("grant"),
                                   scene)
    assert node.warnings and "cap_storage" in node.warnings[0] and "hole_1" in node.warnings[0]
