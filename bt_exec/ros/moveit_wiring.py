"""The moveit backend in the bt_exec node (``backend:=moveit``): MoveItMotion and its freshness feeds.

Imported by ``bt_exec.ros.node`` only when the backend is ``moveit``: it needs MoveItPy
(``ros-jazzy-moveit-py``), ``moveit_msgs`` and ``sensor_msgs``, which the node reports as one
ConfigError when they cannot be imported. NOT RUN HERE (see docs/moveit.md).

The node subscribes ``/joint_states`` and ``/monitored_planning_scene`` (absolute names; remap them with
``-r``): each message only stamps the seam's receipt time, which the motion policy's freshness check
reads. Until both arrive every trajectory is refused as stale (fail safe).
"""
from __future__ import annotations

from moveit_msgs.msg import PlanningScene
from rclpy.qos import QoSProfile, qos_profile_sensor_data
from sensor_msgs.msg import JointState

from bt_exec.compilers.symbolic import World
from bt_exec.errors import ConfigError
from bt_exec.motion.backend import MoveItBackend
from bt_exec.motion.cell import missing_poses, read_motion_config
from bt_exec.motion.policy import MotionPolicy
from bt_exec.motion.skills import GrantMotionSkills
from bt_exec.ros.moveit_seam import MoveItMotion

JOINT_STATES = "/joint_states"
PLANNING_SCENE = "/monitored_planning_scene"
SCENE_QOS = QoSProfile(depth=1)  # reliable, volatile: as move_group publishes it (its messages can be large)


def make_moveit_backend(node, settings: dict, skill_catalog, scene, *, poses=None, limits=None) -> MoveItBackend:
    """A MoveItBackend for ``node`` from its parameters (``cell_poses_file``, ``motion_limits_file``,
    ``moveit_group``, ``tcp_link``); ``poses``/``limits`` when the caller read them already."""
    if poses is None or limits is None:
        poses, limits = read_motion_config(settings)
    missing = missing_poses(poses, scene.targets)
    if missing:
        node.get_logger().warning(f"cell_poses_file has no pose for {', '.join(missing)}: "
                                  "skills there end failed")
    try:
        motion = MoveItMotion(group=settings["moveit_group"], tcp_link=settings["tcp_link"])
    except Exception as exc:  # MoveItPy without a robot description, an unknown group, ...
        raise ConfigError(f"backend moveit: cannot start MoveItPy (moveit_group {settings['moveit_group']!r}, "
                          f"tcp_link {settings['tcp_link']!r}): {type(exc).__name__}: {exc}") from None
    node.create_subscription(JointState, JOINT_STATES, lambda _msg: motion.joint_states_received(),
                             qos_profile_sensor_data)
    node.create_subscription(PlanningScene, PLANNING_SCENE, lambda _msg: motion.scene_received(), SCENE_QOS)
    skills = GrantMotionSkills(motion, MotionPolicy(limits), poses)
    return MoveItBackend(skills, World.from_scene(skill_catalog, scene))
