"""The physics backend in a node (``backend:=physics``): the Grant cell simulated in MuJoCo, its arm's joints published.

Imported by the bt_exec node and the iiwa profile only when the backend is ``physics``: it needs the physics extra
(mujoco, mink, ruckig) and ``sensor_msgs``, each missing one reported as one ConfigError naming what to install.
The arm's joints go out on ``/joint_states`` (absolute, as MoveIt and robot_state_publisher read it; remap with
``-r``) as sensor_msgs/JointState, the model's joint names (``joint_1`` .. ``joint_7``) with positions (rad) and
velocities (rad/s), at ``joint_states_hz`` from a timer of the node: the tick thread never publishes.
"""
from __future__ import annotations

from bt_exec.errors import ConfigError

JOINT_STATES = "/joint_states"
JOINT_STATES_DEPTH = 10


def motion_limits(settings: dict):
    """The motion policy's limits from ``motion_limits_file`` (None, the defaults, where it is empty); ConfigError
    naming the parameter."""
    from bt_exec.motion.policy import MotionLimits

    limits_file = settings.get("motion_limits_file")
    try:
        return MotionLimits.from_yaml(limits_file) if limits_file else None
    except ConfigError as exc:
        raise ConfigError(f"motion_limits_file: {exc}") from None


def make_physics_cell(settings: dict, skill_catalog, scene, limits):
    """A PhysicsCell from the node's parameters: ``cell_poses_file`` (empty: the shipped poses), ``physics_speed``
    (0.0: as fast as the machine goes); ``limits``: :func:`motion_limits`'; ``scene`` None: the cell's own (the
    tool in its socket, the cap stored)."""
    from bt_exec.motion.physics import PhysicsCell

    return PhysicsCell(poses=settings["cell_poses_file"] or None, scene=scene, speed=settings["physics_speed"] or "max",
                       skill_catalog=skill_catalog, limits=limits)


class JointStatePublisher:
    """Publishes a simulated cell's joints on ``/joint_states`` from a timer of ``node``, ``rate_hz`` times a
    second. ``cell`` may be set later (``cell = ...``): until then nothing is published."""

    def __init__(self, node, rate_hz: float, cell=None, callback_group=None):
        try:
            from sensor_msgs.msg import JointState
        except ImportError as exc:
            raise ConfigError(f"backend physics publishes {JOINT_STATES} as sensor_msgs/JointState, which cannot be "
                              f"imported ({exc}); install ros-jazzy-sensor-msgs") from None
        from bt_exec.motion.physics.model import JOINTS

        self.cell = cell
        self._node = node
        self._message = JointState
        self._names = list(JOINTS)
        self._publisher = node.create_publisher(JointState, JOINT_STATES, JOINT_STATES_DEPTH)
        node.create_timer(1.0 / rate_hz, self._publish, callback_group=callback_group)

    def _publish(self) -> None:
        cell = self.cell
        if cell is None:
            return
        message = self._message()
        message.header.stamp = self._node.get_clock().now().to_msg()
        message.name = self._names
        message.position = [float(value) for value in cell.current_joints()]
        message.velocity = [float(value) for value in cell.joint_speeds()]
        self._publisher.publish(message)
