"""MoveItMotion: the Motion seam on MoveItPy 2.12 (ROS 2 Jazzy). The only module that imports ``moveit``.

NOT RUN HERE: moveit_py cannot be installed on the machines this package is developed and tested on;
the calls below are written from MoveItPy's documented API and are exercised by
``tests/test_moveit_seam.py`` only where ``moveit`` imports. See docs/moveit.md.

Every plan starts at the current state (``set_start_state_to_current_state``), seeds IK with the
current joints, carries path constraints on joint 7 and the tool tilt, and is planned with the held
object's geometry attached to the flange. A trajectory is executed only if it is the one this seam
planned last (so only what the policy checked can move the arm).
"""
from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable, Sequence

from geometry_msgs.msg import Pose as PoseMsg
from geometry_msgs.msg import PoseStamped
from moveit.core.robot_state import RobotState
from moveit.planning import MoveItPy, PlanRequestParameters
from moveit_msgs.msg import (
    AttachedCollisionObject,
    CollisionObject,
    Constraints,
    JointConstraint,
    MoveItErrorCodes,
    OrientationConstraint,
)
from shape_msgs.msg import SolidPrimitive

from bt_exec.motion.policy import TrajectoryPoint
from bt_exec.motion.skills import Goal, MotionCollision, MotionError, PathConstraints

_COLLISION_CODES = {MoveItErrorCodes.START_STATE_IN_COLLISION, MoveItErrorCodes.GOAL_IN_COLLISION}
# Held things as cylinders (height, radius) at the flange, for planning with attached geometry.
DEFAULT_GEOMETRY = {"vacuum": (0.12, 0.03), "cap": (0.02, 0.08)}


class MoveItMotion:
    """The Motion protocol (bt_exec.motion.skills.Motion) on MoveItPy."""

    def __init__(self, moveit: MoveItPy | None = None, *, group: str = "arm", tcp_link: str = "tool0",
                 flange_link: str = "iiwa_link_ee", frame: str = "world", joint7: str = "joint_7",
                 actuator: Callable[[str], bool] | None = None, geometry: dict | None = None,
                 clock: Callable[[], float] = time.monotonic, planning_time_s: float = 5.0):
        self.moveit = moveit if moveit is not None else MoveItPy(node_name="bt_exec_moveit")
        self.arm = self.moveit.get_planning_component(group)
        self.group, self.tcp_link, self.flange_link = group, tcp_link, flange_link
        self.frame, self.joint7 = frame, joint7
        self.actuator = actuator  # gripper / vacuum / tool coupling (the cell's supervisor); None refuses every act
        self.geometry = dict(DEFAULT_GEOMETRY if geometry is None else geometry)
        self.clock = clock
        self.planning_time_s = planning_time_s
        self._lock = threading.Lock()
        self._last: tuple[list[TrajectoryPoint], object] | None = None  # (checked points, RobotTrajectory)
        self._attached: str | None = None
        self._joint_stamp: float | None = None
        self._scene_stamp: float | None = None

    # --- freshness: fed by the node's /joint_states and /monitored_planning_scene subscriptions -----

    def joint_states_received(self) -> None:
        self._joint_stamp = self.clock()

    def scene_received(self) -> None:
        self._scene_stamp = self.clock()

    def joint_state_age_s(self) -> float:
        return math.inf if self._joint_stamp is None else self.clock() - self._joint_stamp

    def scene_age_s(self) -> float:
        return math.inf if self._scene_stamp is None else self.clock() - self._scene_stamp

    def current_joints(self) -> tuple[float, ...]:
        with self.moveit.get_planning_scene_monitor().read_only() as scene:
            return tuple(float(v) for v in scene.current_state.get_joint_group_positions(self.group))

    # --- planning ------------------------------------------------------------------------------------

    def plan(self, goal: Goal, constraints: PathConstraints, attached: str | None) -> list[TrajectoryPoint] | None:
        self._attach(attached)
        self.arm.set_start_state_to_current_state()
        pose = PoseStamped()
        pose.header.frame_id = self.frame
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = goal.position
        (pose.pose.orientation.x, pose.pose.orientation.y, pose.pose.orientation.z,
         pose.pose.orientation.w) = goal.orientation
        seeded = None if goal.axial else self._ik_from_current(pose.pose)
        if seeded is not None:
            self.arm.set_goal_state(robot_state=seeded)  # IK seeded by the current joints: no J7 branch flip
        else:
            self.arm.set_goal_state(pose_stamped_msg=pose, pose_link=self.tcp_link)
        self.arm.set_path_constraints(self._constraints(constraints))
        params = PlanRequestParameters(self.moveit)
        if goal.axial:  # straight along the tool axis
            params.planning_pipeline, params.planner_id = "pilz_industrial_motion_planner", "LIN"
        else:
            params.planning_pipeline, params.planner_id = "ompl", "RRTConnectkConfigDefault"
        params.planning_time = self.planning_time_s
        result = self.arm.plan(single_plan_parameters=params)
        code = getattr(getattr(result, "error_code", None), "val", None)
        if code in _COLLISION_CODES:
            raise MotionCollision(f"planner: error code {code} ({goal.phase} to {goal.name})")
        if not result or result.trajectory is None:
            return None
        robot_trajectory = result.trajectory
        points = self._points(robot_trajectory)
        with self._lock:
            self._last = (points, robot_trajectory)
        return points

    def execute(self, points: Sequence[TrajectoryPoint]) -> bool:
        with self._lock:
            last, self._last = self._last, None
        if last is None or last[0] is not points:
            raise MotionError("execute: only the trajectory planned (and checked) last may be executed")
        status = self.moveit.execute(last[1], controllers=[])
        if isinstance(status, bool):
            return status
        state = str(getattr(status, "status", status))
        return state.upper() in ("SUCCEEDED", "SUCCESS")

    def act(self, name: str) -> bool:
        if self.actuator is None:
            return False
        done = bool(self.actuator(name))
        if done and name in ("detach_tool", "suction_off"):
            self._attach(None)
        return done

    def stop(self) -> None:
        manager = (getattr(self.moveit, "get_trajectory_execution_manager", None)
                   or getattr(self.moveit, "get_trajactory_execution_manager", None))  # spelled so in 2.x bindings
        if manager is not None:
            manager().stop_execution()
        with self._lock:
            self._last = None

    # --- helpers -------------------------------------------------------------------------------------

    def _ik_from_current(self, pose: PoseMsg):
        state = RobotState(self.moveit.get_robot_model())
        state.set_joint_group_positions(self.group, list(self.current_joints()))
        if not state.set_from_ik(self.group, pose, self.tcp_link, 0.1):
            return None
        state.update()
        return state

    def _constraints(self, limits: PathConstraints) -> Constraints:
        j7 = JointConstraint()
        j7.joint_name = self.joint7
        j7.position = limits.j7_center_rad
        j7.tolerance_above = j7.tolerance_below = limits.j7_tolerance_rad
        j7.weight = 1.0
        tilt = OrientationConstraint()
        tilt.header.frame_id = self.frame
        tilt.link_name = self.tcp_link
        tilt.orientation.x, tilt.orientation.y, tilt.orientation.z, tilt.orientation.w = 1.0, 0.0, 0.0, 0.0
        tilt.absolute_x_axis_tolerance = tilt.absolute_y_axis_tolerance = math.radians(limits.max_tilt_deg)
        tilt.absolute_z_axis_tolerance = math.pi  # rotation about the tool axis is J7's business
        tilt.weight = 1.0
        constraints = Constraints()
        constraints.name = "grant_work"
        constraints.joint_constraints = [j7]
        constraints.orientation_constraints = [tilt]
        return constraints

    def _points(self, robot_trajectory) -> list[TrajectoryPoint]:
        """Joint positions of every waypoint and the TCP orientation from forward kinematics."""
        msg = robot_trajectory.get_robot_trajectory_msg().joint_trajectory
        state = RobotState(self.moveit.get_robot_model())
        names = list(msg.joint_names)
        points = []
        for waypoint in msg.points:
            state.joint_positions = dict(zip(names, waypoint.positions))
            state.update()
            o = state.get_pose(self.tcp_link).orientation
            points.append(TrajectoryPoint(tuple(float(v) for v in waypoint.positions), (o.x, o.y, o.z, o.w)))
        return points

    def _attach(self, name: str | None) -> None:
        """Keep the planning scene's attached object in step with what the arm holds."""
        if name == self._attached:
            return
        with self.moveit.get_planning_scene_monitor().read_write() as scene:
            if self._attached is not None:
                scene.process_attached_collision_object(self._attached_msg(self._attached, CollisionObject.REMOVE))
            if name is not None and name in self.geometry:
                scene.process_attached_collision_object(self._attached_msg(name, CollisionObject.ADD))
            scene.current_state.update()
        self._attached = name

    def _attached_msg(self, name: str, operation) -> AttachedCollisionObject:
        height, radius = self.geometry.get(name, (0.05, 0.05))
        shape = SolidPrimitive(type=SolidPrimitive.CYLINDER, dimensions=[height, radius])
        where = PoseMsg()
        where.position.z = height / 2
        where.orientation.w = 1.0
        obj = CollisionObject(id=name, operation=operation)
        obj.header.frame_id = self.flange_link
        obj.primitives, obj.primitive_poses = [shape], [where]
        return AttachedCollisionObject(link_name=self.flange_link, object=obj, touch_links=[self.flange_link])
