"""The MoveItPy seam (bt_exec.ros.moveit_seam): runs only where moveit_py imports (a Jazzy machine with MoveIt).

The parts that need no running MoveIt (constraints, the execute guard, the attached-geometry message) are
checked on a seam built without MoveItPy; planning against a live robot needs BT_EXEC_MOVEIT_LIVE=1 and a
running move_group for the iiwa (see docs/moveit.md).
"""
import math
import os

import pytest

try:
    import moveit.planning  # noqa: F401  (moveit_py)
except ImportError:
    pytest.skip("moveit_py is not installable on these machines", allow_module_level=True)

from moveit_msgs.msg import CollisionObject

from bt_exec.ros.moveit_seam import MoveItMotion
from bt_exec.motion.policy import TrajectoryPoint
from bt_exec.motion.skills import Goal, MotionError, PathConstraints


def offline_seam():
    """A MoveItMotion whose MoveItPy is never started: only the message-building parts are used."""
    seam = MoveItMotion.__new__(MoveItMotion)
    seam.group, seam.tcp_link, seam.flange_link = "arm", "tool0", "iiwa_link_ee"
    seam.frame, seam.joint7 = "world", "joint_7"
    seam.geometry = {"cap": (0.02, 0.08)}
    seam.actuator = None
    import threading
    seam._lock, seam._last, seam._attached = threading.Lock(), None, None
    seam._joint_stamp = seam._scene_stamp = None
    seam.clock = lambda: 0.0
    return seam


def test_path_constraints_hold_joint_7_and_the_tilt():
    constraints = offline_seam()._constraints(PathConstraints(0.0, math.pi / 2, 10.0))
    (j7,), (tilt,) = constraints.joint_constraints, constraints.orientation_constraints
    assert (j7.joint_name, j7.position, j7.tolerance_above, j7.tolerance_below) == ("joint_7", 0.0, math.pi / 2,
                                                                                    math.pi / 2)
    assert tilt.absolute_x_axis_tolerance == pytest.approx(math.radians(10.0))
    assert (tilt.orientation.x, tilt.orientation.w) == (1.0, 0.0)


def test_only_the_last_planned_trajectory_is_executed():
    seam = offline_seam()
    with pytest.raises(MotionError):
        seam.execute([TrajectoryPoint((0.0,) * 7, (1.0, 0.0, 0.0, 0.0))])


def test_without_fresh_stamps_everything_is_stale():
    seam = offline_seam()
    assert seam.joint_state_age_s() == math.inf and seam.scene_age_s() == math.inf


def test_attached_geometry_message():
    msg = offline_seam()._attached_msg("cap", CollisionObject.ADD)
    assert (msg.link_name, msg.object.id, list(msg.object.primitives[0].dimensions)) == ("iiwa_link_ee", "cap",
                                                                                         [0.02, 0.08])


@pytest.mark.skipif(os.environ.get("BT_EXEC_MOVEIT_LIVE") != "1",
                    reason="needs a running move_group (BT_EXEC_MOVEIT_LIVE=1)")
def test_live_plan_from_the_current_state():
    seam = MoveItMotion()
    seam.joint_states_received()
    seam.scene_received()
    start = seam.current_joints()
    points = seam.plan(Goal("work", "work", (0.5, 0.0, 0.5)), PathConstraints(0.0, math.pi / 2, 10.0), None)
    assert points and len(points[0].positions) == len(start) == 7
