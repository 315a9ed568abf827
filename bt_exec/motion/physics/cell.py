"""MujocoMotion: the Motion protocol (bt_exec.motion.skills.Motion) on a MuJoCo simulation of the Grant cell.

``plan`` solves IK from the current joints (:mod:`ik`), times the move with ruckig (:mod:`trajectory`) and
checks a pose every 10 ms of it for collisions, held parts included (:mod:`collisions`): an unreachable goal
raises MotionError naming the goal and the IK residual, a colliding path MotionCollision naming the pair and
the point. ``execute`` runs only the trajectory planned last (what the policy checked), stepping the physics
with the servos' position references following it (and its speed as feed-forward), arm links gravity
compensated, in simulated time: at ``speed`` times real time, or as fast as the machine goes (``"max"``).
``stop`` replaces the reference with a jerk-limited stop from the next control period on. ``act`` switches
the welds of suction and of the tool coupling (:mod:`suction`). Joint states and the scene are the
simulation's own: their age is 0.
"""
from __future__ import annotations

import logging
import math
import threading
import time
from collections.abc import Sequence

import mujoco
import numpy as np

from bt_exec.motion.physics import suction
from bt_exec.motion.physics.collisions import PENETRATION_M, CollisionChecker, HeldPart
from bt_exec.motion.physics.errors import CellRefused
from bt_exec.motion.physics.ik import TcpIk
from bt_exec.motion.physics.model import (CAP, JOINTS, LINKS, SERVO_KP, SERVO_KV, TIMESTEP_S, TOOL, TOOL_LENGTH,
                                          WELD_CAP_CUP, WELD_TOOL_FLANGE, WELD_TOOL_SOCKET, CellLayout, cell_xml)
from bt_exec.motion.physics.rendering import CellRenderer
from bt_exec.motion.physics.trajectory import (WAYPOINT_SPACING_M, Trajectory, TrajectoryError, braking,
                                               joint_move, path_move)
from bt_exec.motion.policy import TrajectoryPoint, tcp_tilt_deg
from bt_exec.motion.skills import Goal, MotionCollision, MotionError, PathConstraints

#: At rest: every joint slower than this (rad/s) and the TCP slower than STILL_TCP_M_S.
STILL_JOINT_RAD_S, STILL_TCP_M_S = 1e-3, 1e-3
#: How long the arm may take to come to rest once a stop is asked for (s of simulated time).
STOP_WITHIN_S = 0.25
#: After a trajectory's end, the servos settle at most this long (simulated s) before the move counts done.
SETTLE_S = 0.3
SETTLED_RAD = 2e-3
_FEED_FORWARD = np.array(SERVO_KV) / np.array(SERVO_KP)
# Steps taken under one hold of the lock (10 ms simulated): then whether the simulation blew up, and the pacing
_BATCH_STEPS = 5
# MuJoCo's warnings of a simulation that blew up (it resets its state when one is raised)
_DIVERGED = (mujoco.mjtWarning.mjWARN_BADQACC, mujoco.mjtWarning.mjWARN_BADQVEL, mujoco.mjtWarning.mjWARN_BADQPOS)


_log = logging.getLogger("bt_exec.physics")


def _mujoco_warning(text: str) -> None:
    _log.warning("MuJoCo: %s", text.strip())


# MuJoCo's own warnings (a simulation that blew up, a contact buffer full) go to the log, not to the file
# MUJOCO_LOG.TXT it would otherwise write in the current folder.
mujoco.set_mju_user_warning(_mujoco_warning)


class MujocoMotion:
    """The Motion protocol on MuJoCo; see the module docstring. Thread-safe: one skill worker moves the arm
    while other threads read it (``current_joints``, ``tool_position``...)."""

    def __init__(self, layout: CellLayout, start_joints: Sequence[float], speed: float | str = 1.0,
                 *, tool_on_flange: bool = False, cap_on_cup: bool = False):
        try:
            self.model = mujoco.MjModel.from_xml_string(cell_xml(layout))
        except ValueError as exc:  # a layout the checks let through but MuJoCo cannot build
            raise CellRefused(f"the cell's model cannot be built from its poses: {exc}") from None
        self.data = mujoco.MjData(self.model)
        self.speed = speed
        model = self.model
        self._joint_qpos = np.array([model.jnt_qposadr[model.joint(name).id] for name in JOINTS])
        self._joint_dof = np.array([model.jnt_dofadr[model.joint(name).id] for name in JOINTS])
        # the arm's dofs are the first seven (its chain comes first in the model): a slice is cheaper to index
        self._arm_dofs = (slice(int(self._joint_dof[0]), int(self._joint_dof[0]) + 7)
                          if np.array_equal(self._joint_dof, np.arange(self._joint_dof[0], self._joint_dof[0] + 7))
                          else self._joint_dof)
        self._flange = model.body("link_7").id
        self._flange_site = model.site("flange").id
        self._tcp = model.site("tcp").id
        self._tool, self._cap = model.body(TOOL).id, model.body(CAP).id
        self._tool_tip, self._cap_top = model.site("vacuum_tip").id, model.site("cap_top").id
        self._welds = {name: model.equality(name).id for name in (WELD_TOOL_FLANGE, WELD_CAP_CUP, WELD_TOOL_SOCKET)
                       if mujoco.mj_name2id(model, mujoco.mjtObj.mjOBJ_EQUALITY, name) >= 0}
        self._socket = model.body("vacuum_socket").id if WELD_TOOL_SOCKET in self._welds else None
        self._link_bodies = [model.body(name).id for name in LINKS]
        self._lock = threading.RLock()
        self._stop = threading.Event()
        self._ik = TcpIk()
        self._checker = CollisionChecker(model, self._joint_qpos, self._flange, set(self._link_bodies[1:]))
        self._planned: tuple[list[TrajectoryPoint], Trajectory] | None = None
        self._target: tuple[float, float, float] | None = None
        self.last_stop_s: float | None = None  # simulated time the last stop took to come to rest
        self._acceleration, self._inertial = np.zeros(model.nv), np.zeros(model.nv)  # inertial feed-forward
        self._renderer = CellRenderer(model, self.data, self._lock, _overview_camera())
        self._place_arm(np.asarray(start_joints, dtype=float), tool_on_flange, cap_on_cup)
        self._refuse_overlaps()

    # --- the Motion protocol -------------------------------------------------------------------------------

    def current_joints(self) -> tuple[float, ...]:
        with self._lock:
            return tuple(float(v) for v in self.data.qpos[self._joint_qpos])

    def joint_state_age_s(self) -> float:
        return 0.0

    def scene_age_s(self) -> float:
        return 0.0

    def plan(self, goal: Goal, constraints: PathConstraints, attached: str | None) -> list[TrajectoryPoint]:
        """A checked trajectory to ``goal``; MotionError (unreachable) or MotionCollision (see the module).
        What the arm holds is the simulation's own (the welds switched on), so ``attached`` is not needed."""
        self._stop.clear()
        with self._lock:
            seed = self.data.qpos[self._joint_qpos].copy()
            live = self.data.qpos.copy()
            tcp_now = self.data.site_xpos[self._tcp].copy()
            held, held_bodies = self._held_parts()
        self._target = tuple(goal.position)
        where = f"{goal.phase} to {goal.name} at ({', '.join(f'{v:.3f}' for v in goal.position)})"
        solution = self._ik.solve(goal.position, goal.orientation, seed)
        if not solution.reached:
            raise MotionError(f"{where}: unreachable, {solution.describe()}")
        self._checker.start(live, held, held_bodies)
        try:
            blocked = None
            if not goal.axial:
                trajectory = joint_move(seed, solution.joints)
                try:
                    points = self._checked_points(trajectory, where)
                except MotionCollision as collision:
                    blocked = collision  # the TCP's straight line may pass where the joint-space line does not
                else:
                    if max(tcp_tilt_deg(point.tcp_quat) for point in points) <= constraints.max_tilt_deg / 2:
                        return self._keep(points, trajectory)
                    # the joint-space line tilts the tool: follow the TCP line instead
            try:
                trajectory = path_move(self._waypoints(tcp_now, goal, seed, where))
                points = self._checked_points(trajectory, where)
            except MotionError:
                if blocked is not None:
                    raise blocked from None
                raise
        except TrajectoryError as exc:
            raise MotionError(f"{where}: {exc}") from None
        return self._keep(points, trajectory)

    def _keep(self, points: list[TrajectoryPoint], trajectory: Trajectory) -> list[TrajectoryPoint]:
        """``points`` as the trajectory planned last: the one ``execute`` may run."""
        with self._lock:
            self._planned = (points, trajectory)
        return points

    def execute(self, points: Sequence[TrajectoryPoint]) -> bool:
        """Follow the trajectory planned last; False when stopped. MotionError when ``points`` is not that
        trajectory, or when the physics diverged (the cell is then put back as it was before the move)."""
        with self._lock:
            planned, self._planned = self._planned, None
        if planned is None or planned[0] is not points:
            raise MotionError("execute: only the trajectory planned (and checked) last may be executed")
        return self._follow(planned[1])

    def act(self, name: str) -> bool:
        """``attach_tool``/``detach_tool`` (the coupling), ``suction_on``/``suction_off`` (the cup),
        ``dispense`` and ``handoff`` (not simulated: they succeed); False when it did not take."""
        with self._lock:
            handler = {"attach_tool": self._attach_tool, "detach_tool": self._detach_tool,
                       "suction_on": self._suction_on, "suction_off": self._suction_off}.get(name)
            if handler is not None:
                done = handler()
                mujoco.mj_forward(self.model, self.data)
                return done
        return name in ("dispense", "handoff")

    def stop(self) -> None:
        """Stop the arm: the motion in progress brakes from the next control period on."""
        self._stop.set()

    # --- reading the simulation ----------------------------------------------------------------------------

    def tool_position(self) -> tuple[float, float, float]:
        with self._lock:
            return tuple(float(v) for v in self.data.site_xpos[self._tcp])

    def joint_speeds(self) -> tuple[float, ...]:
        with self._lock:
            return tuple(float(v) for v in self.data.qvel[self._joint_dof])

    def tool_speed(self) -> float:
        """How fast the TCP moves, m/s."""
        with self._lock:
            return float(np.linalg.norm(self._tcp_velocity()))

    def link_positions(self) -> list[tuple[str, tuple[float, float, float]]]:
        with self._lock:
            links = [(name, tuple(float(v) for v in self.data.xpos[body]))
                     for name, body in zip(LINKS, self._link_bodies)]
            links.append(("flange", tuple(float(v) for v in self.data.site_xpos[self._flange_site])))
            links.append(("tcp", tuple(float(v) for v in self.data.site_xpos[self._tcp])))
            return links

    def target(self) -> tuple[float, float, float] | None:
        return self._target

    def part_position(self, part: str) -> tuple[float, float, float]:
        """Where a part's worked point is (``vacuum``: its cup tip; ``cap``: its top face's centre)."""
        site = {TOOL: self._tool_tip, CAP: self._cap_top}[part]
        with self._lock:
            return tuple(float(v) for v in self.data.site_xpos[site])

    def sim_time(self) -> float:
        with self._lock:
            return float(self.data.time)

    def render(self, width: int, height: int) -> bytes | None:
        """A PNG of the cell, up to 1280x960, from MuJoCo's offscreen renderer (``MUJOCO_GL=egl`` or ``osmesa``
        where there is no display), or None where no GL context can be made (or the size is beyond it). Rendered
        in the renderer's own thread, whichever thread asks (:mod:`rendering`)."""
        return self._renderer.render(width, height)

    def close(self) -> None:
        """Free the offscreen renderer, in its thread; frames asked for afterwards are None."""
        self._renderer.close()

    # --- planning --------------------------------------------------------------------------------------------

    def _held_parts(self) -> tuple[list[HeldPart], set[int]]:
        held, bodies = [], set()
        for weld, body in ((WELD_TOOL_FLANGE, self._tool), (WELD_CAP_CUP, self._cap)):
            if self.data.eq_active[self._welds[weld]]:
                held.append(self._relative_to_flange(body))
                bodies.add(body)
        return held, bodies

    def _relative_to_flange(self, body: int) -> HeldPart:
        data = self.data
        rotation = data.xmat[self._flange].reshape(3, 3)
        inverse = np.empty(4)
        mujoco.mju_negQuat(inverse, data.xquat[self._flange])
        quat = np.empty(4)
        mujoco.mju_mulQuat(quat, inverse, data.xquat[body])
        address = self.model.jnt_qposadr[self.model.body_jntadr[body]]
        return HeldPart(address, rotation.T @ (data.xpos[body] - data.xpos[self._flange]), quat)

    def _checked_points(self, trajectory: Trajectory, where: str) -> list[TrajectoryPoint]:
        points = []
        checker, data = self._checker, self._checker.data
        quat = np.empty(4)
        for i, joints in enumerate(trajectory.positions):
            collision = checker.check(joints)
            if collision is not None:
                raise MotionCollision(f"{where}: {collision.describe()} at point {i} "
                                      f"(t = {trajectory.times[i]:.2f} s)")
            mujoco.mju_mat2Quat(quat, data.site_xmat[self._tcp])
            points.append(TrajectoryPoint(tuple(float(v) for v in joints),
                                          (float(quat[1]), float(quat[2]), float(quat[3]), float(quat[0]))))
        return points

    def _waypoints(self, start, goal: Goal, seed, where: str) -> np.ndarray:
        """IK solutions every WAYPOINT_SPACING_M along the straight TCP line to the goal, each seeded by the last."""
        end = np.asarray(goal.position, dtype=float)
        count = max(int(math.ceil(np.linalg.norm(end - start) / WAYPOINT_SPACING_M)), 1)
        waypoints, joints = [np.asarray(seed)], seed
        for k in range(1, count + 1):
            solution = self._ik.solve(start + (end - start) * k / count, goal.orientation, joints)
            if not solution.reached:
                raise MotionError(f"{where}: the straight path leaves the arm's reach at waypoint {k} of {count}, "
                                  f"{solution.describe()}")
            joints = np.asarray(solution.joints)
            waypoints.append(joints)
        return np.array(waypoints)

    # --- execution -------------------------------------------------------------------------------------------

    def _follow(self, trajectory: Trajectory) -> bool:
        """Step the physics along ``trajectory`` until the arm settled at its end (True), or braked to rest
        once a stop was asked for (False). Readers wait for a batch of steps (10 ms simulated), never longer."""
        with self._lock:
            saved = self._state()
        wall_start, steps = time.perf_counter(), 0
        braking_started = None
        positions, speeds, accelerations = trajectory.dense(TIMESTEP_S)
        servo = positions + _FEED_FORWARD * speeds  # the reference's speed fed forward
        last, k = len(positions) - 1, 0
        try:
            while True:
                with self._lock:
                    for _ in range(_BATCH_STEPS):
                        if braking_started is None and self._stop.is_set():
                            at = min(k, last)
                            stop = braking(positions[at], speeds[at], accelerations[at], TIMESTEP_S)
                            positions, speeds, accelerations = stop.dense(TIMESTEP_S)
                            servo = positions + _FEED_FORWARD * speeds
                            last, k, braking_started = len(positions) - 1, 0, self.data.time
                        at = min(k, last)
                        self._step(servo[at], accelerations[at])
                        k += 1
                        if k <= last:
                            continue
                        if braking_started is not None:
                            if self._still() or (k - last) * TIMESTEP_S >= STOP_WITHIN_S:
                                self._check_finite(saved)
                                self.last_stop_s = float(self.data.time - braking_started)
                                return False
                        elif self._settled(positions[-1]) or (k - last) * TIMESTEP_S >= SETTLE_S:
                            self._check_finite(saved)
                            return True
                    self._check_finite(saved)
                steps += _BATCH_STEPS
                if self.speed != "max":
                    ahead = steps * TIMESTEP_S / float(self.speed) - (time.perf_counter() - wall_start)
                    if ahead > 0:
                        time.sleep(ahead)
        finally:
            with self._lock:
                self.data.qfrc_applied[self._arm_dofs] = 0.0

    def _step(self, servo: np.ndarray, acceleration: np.ndarray) -> None:
        """One control period: the servos' references set, the inertial torque fed forward, the physics stepped."""
        model, data, dofs = self.model, self.data, self._arm_dofs
        data.ctrl[:] = servo
        self._acceleration[dofs] = acceleration
        mujoco.mj_mulM(model, data, self._inertial, self._acceleration)
        data.qfrc_applied[dofs] = self._inertial[dofs]
        mujoco.mj_step(model, data)

    def _check_finite(self, saved: tuple) -> None:
        """MotionError, the cell put back as ``saved``, if the simulation blew up."""
        data = self.data
        if np.isfinite(data.qacc).all() and not any(data.warning[warning].number for warning in _DIVERGED):
            return
        when = data.time
        self._restore(saved)
        raise MotionError(f"the physics diverged at t = {when:.3f} s (simulated); the cell was put back as it "
                          "was before this move")

    def _still(self) -> bool:
        data = self.data
        if np.max(np.abs(data.qvel[self._joint_dof])) >= STILL_JOINT_RAD_S:
            return False
        return float(np.linalg.norm(self._tcp_velocity())) < STILL_TCP_M_S

    def _settled(self, end: np.ndarray) -> bool:
        error = np.max(np.abs(self.data.qpos[self._joint_qpos] - end))
        return error < SETTLED_RAD and np.max(np.abs(self.data.qvel[self._joint_dof])) < 10 * STILL_JOINT_RAD_S

    def _tcp_velocity(self) -> np.ndarray:
        jacobian = np.empty((3, self.model.nv))
        mujoco.mj_jacSite(self.model, self.data, jacobian, None, self._tcp)
        return jacobian @ self.data.qvel

    def _state(self) -> tuple:
        data = self.data
        return (data.qpos.copy(), data.qvel.copy(), data.ctrl.copy(), data.eq_active.copy(), data.time)

    def _restore(self, saved: tuple) -> None:
        data = self.data
        qpos, qvel, ctrl, active, _time = saved
        data.qpos[:], data.qvel[:], data.ctrl[:], data.eq_active[:] = qpos, qvel, ctrl, active
        data.qacc_warmstart[:] = 0.0
        data.warning.number[:] = 0
        mujoco.mj_forward(self.model, data)

    def place_parts(self, moves: dict[str, tuple[float, float, float] | None]) -> None:
        """Put parts where a new scene says, the arm left where it is (it must be at rest): ``moves`` maps
        ``vacuum`` / ``cap`` to its worked point in the world frame (the tool standing in its socket, the cap lying
        flat), or to None for held (the tool coupled to the flange, the cap on the cup). Parts not named stay as
        the physics left them. CellRefused naming the pair, the cell put back as it was, when a part would be
        where something else is."""
        with self._lock:
            model, data = self.model, self.data
            saved = (self._state(), model.eq_data.copy(), model.body_gravcomp.copy())
            for part, weld in ((CAP, WELD_CAP_CUP), (TOOL, WELD_TOOL_FLANGE)):  # the cap lets go of the cup first
                if part in moves and self._on(weld):
                    suction.release(data, self._welds[weld])
                    suction.carried(model, self._cap if part == CAP else self._tool, False)
            if TOOL in moves:
                if self._on(WELD_TOOL_SOCKET):
                    suction.release(data, self._welds[WELD_TOOL_SOCKET])
                self._put_tool(moves[TOOL])
            if CAP in moves:
                self._put_cap(moves[CAP])
            mujoco.mj_forward(model, data)
            try:
                self._refuse_overlaps("in the new scene")
            except CellRefused:
                state, eq_data, gravcomp = saved
                model.eq_data[:], model.body_gravcomp[:] = eq_data, gravcomp
                self._restore(state)
                raise

    def _put_tool(self, tip) -> None:
        model, data = self.model, self.data
        if tip is None:
            self._set_free_pose(self._tool, data.site_xpos[self._flange_site], data.xquat[self._flange])
        else:  # standing upright, the cup's tip at ``tip``, as the model places it at start
            self._set_free_pose(self._tool, (tip[0], tip[1], tip[2] + TOOL_LENGTH), (0.0, 1.0, 0.0, 0.0))
        self._at_rest(self._tool)
        mujoco.mj_forward(model, data)
        if tip is None:
            suction.weld_now(model, data, self._welds[WELD_TOOL_FLANGE])
            suction.carried(model, self._tool, True)
        elif self._socket is not None and suction.within_grip(data.site_xpos[self._tool_tip], data.xpos[self._socket]):
            suction.weld_now(model, data, self._welds[WELD_TOOL_SOCKET])

    def _put_cap(self, top) -> None:
        model, data = self.model, self.data
        self._set_free_pose(self._cap, data.site_xpos[self._tcp] if top is None else top, (1.0, 0.0, 0.0, 0.0))
        self._at_rest(self._cap)
        mujoco.mj_forward(model, data)
        if top is None:
            suction.weld_now(model, data, self._welds[WELD_CAP_CUP])
            suction.carried(model, self._cap, True)

    def _at_rest(self, body: int) -> None:
        address = self.model.jnt_dofadr[self.model.body_jntadr[body]]
        self.data.qvel[address:address + 6] = 0.0

    # --- start and the welds ---------------------------------------------------------------------------------

    def _place_arm(self, joints: np.ndarray, tool_on_flange: bool, cap_on_cup: bool) -> None:
        model, data = self.model, self.data
        data.qpos[self._joint_qpos] = joints
        data.ctrl[:] = joints
        mujoco.mj_forward(model, data)
        if tool_on_flange:
            self._set_free_pose(self._tool, data.site_xpos[self._flange_site], data.xquat[self._flange])
            if self._socket is not None:
                suction.release(data, self._welds[WELD_TOOL_SOCKET])
            mujoco.mj_forward(model, data)
            suction.weld_now(model, data, self._welds[WELD_TOOL_FLANGE])
            suction.carried(model, self._tool, True)
            if cap_on_cup:
                self._set_free_pose(self._cap, data.site_xpos[self._tcp], np.array([1.0, 0.0, 0.0, 0.0]))
                mujoco.mj_forward(model, data)
                suction.weld_now(model, data, self._welds[WELD_CAP_CUP])
                suction.carried(model, self._cap, True)
        elif self._socket is not None and data.eq_active[self._welds[WELD_TOOL_SOCKET]]:
            suction.weld_now(model, data, self._welds[WELD_TOOL_SOCKET])
        mujoco.mj_forward(model, data)

    def _refuse_overlaps(self, when: str = "at start") -> None:
        """CellRefused naming the pair when two things are inside each other (a part put into a fixture or
        onto the arm): MuJoCo would throw them apart at the next step."""
        data = self.data
        deep = np.flatnonzero(data.contact.dist < -PENETRATION_M) if data.ncon else ()
        if len(deep):
            worst = min(deep, key=lambda i: data.contact.dist[i])
            first, second = sorted(mujoco.mj_id2name(self.model, mujoco.mjtObj.mjOBJ_GEOM, geom)
                                   for geom in (data.contact.geom1[worst], data.contact.geom2[worst]))
            raise CellRefused(f"{when} {first} and {second} overlap by {-data.contact.dist[worst] * 1000:.0f} mm: "
                              "a part where something else is")

    def _set_free_pose(self, body: int, position, quat) -> None:
        address = self.model.jnt_qposadr[self.model.body_jntadr[body]]
        self.data.qpos[address:address + 3] = position
        self.data.qpos[address + 3:address + 7] = quat

    def _on(self, weld: str) -> bool:
        return weld in self._welds and bool(self.data.eq_active[self._welds[weld]])

    def _attach_tool(self) -> bool:
        if self._on(WELD_TOOL_FLANGE):
            return True
        # the flange meets the tool's coupling face (the tool body's origin)
        if not suction.within_grip(self.data.site_xpos[self._flange_site], self.data.xpos[self._tool]):
            return False
        if self._on(WELD_TOOL_SOCKET):
            suction.release(self.data, self._welds[WELD_TOOL_SOCKET])
        suction.weld_now(self.model, self.data, self._welds[WELD_TOOL_FLANGE])
        suction.carried(self.model, self._tool, True)
        return True

    def _detach_tool(self) -> bool:
        if not self._on(WELD_TOOL_FLANGE):
            return False
        if self._socket is None or not suction.within_grip(self.data.site_xpos[self._tool_tip],
                                                           self.data.xpos[self._socket]):
            return False  # not in its socket: letting go would drop it
        if self._on(WELD_CAP_CUP):
            return False
        suction.release(self.data, self._welds[WELD_TOOL_FLANGE])
        suction.weld_now(self.model, self.data, self._welds[WELD_TOOL_SOCKET])
        suction.carried(self.model, self._tool, False)
        return True

    def _suction_on(self) -> bool:
        if not self._on(WELD_TOOL_FLANGE):
            return False  # no cup on the flange
        if self._on(WELD_CAP_CUP):
            return True
        if not suction.within_grip(self.data.site_xpos[self._tool_tip], self.data.site_xpos[self._cap_top]):
            return False
        suction.weld_now(self.model, self.data, self._welds[WELD_CAP_CUP])
        suction.carried(self.model, self._cap, True)
        return True

    def _suction_off(self) -> bool:
        if self._on(WELD_CAP_CUP):
            suction.release(self.data, self._welds[WELD_CAP_CUP])
            suction.carried(self.model, self._cap, False)
        return True


def _overview_camera() -> mujoco.MjvCamera:
    """A free camera looking at the table from the front left, the whole arm in view."""
    camera = mujoco.MjvCamera()
    camera.lookat[:] = (0.35, 0.0, 0.35)
    camera.distance, camera.azimuth, camera.elevation = 2.2, 210.0, -25.0
    return camera

