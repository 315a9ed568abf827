"""Inverse kinematics of the TCP with mink: seeded from the current joints, a posture task keeps the elbow up.

The posture task pulls A3 and A5 towards 0 (the arm stays in its plane through A1) and the others weakly
towards the seed, so the solution stays on the seed's side of every joint and a joint-space line between two
solutions keeps the tool pointing down (see :mod:`trajectory`).
"""
from __future__ import annotations

from dataclasses import dataclass

import mink
import mujoco
import numpy as np

from bt_exec.motion.physics.model import arm_xml

#: A goal is reached when the TCP is this close (m) and turned this little (rad) from it.
REACHED_M = 1e-3
REACHED_RAD = 0.01
_CONVERGED_M, _CONVERGED_RAD = 1e-4, 1e-3
_ITERATIONS = 40
# Posture costs per joint: A3 and A5 held near 0 (the arm in the plane of A1), the rest barely pulled to the seed.
_POSTURE_COST = (1e-4, 1e-4, 1e-2, 1e-4, 1e-2, 1e-4, 1e-3)
_DAMPING = 1e-4


@dataclass(frozen=True)
class IkSolution:
    """Joint angles (rad) for a goal, and how far the TCP stays from it there (m and rad): the residual."""

    joints: tuple[float, ...]
    position_error_m: float
    rotation_error_rad: float

    @property
    def reached(self) -> bool:
        return self.position_error_m <= REACHED_M and self.rotation_error_rad <= REACHED_RAD

    def describe(self) -> str:
        return f"IK residual {self.position_error_m * 1000:.1f} mm, {np.degrees(self.rotation_error_rad):.1f}°"


def quat_wxyz(xyzw) -> np.ndarray:
    """A ROS-ordered (x, y, z, w) quaternion as MuJoCo's (w, x, y, z)."""
    x, y, z, w = xyzw
    return np.array([w, x, y, z], dtype=float)


class TcpIk:
    """IK of the arm's ``tcp`` site on the arm-only model (one per thread: it keeps a mink configuration)."""

    def __init__(self):
        self.model = mujoco.MjModel.from_xml_string(arm_xml())
        self._configuration = mink.Configuration(self.model)
        self._tcp = mink.FrameTask("tcp", "site", position_cost=1.0, orientation_cost=1.0)
        self._posture = mink.PostureTask(self.model, cost=np.array(_POSTURE_COST))
        self._limits = [mink.ConfigurationLimit(self.model)]

    def solve(self, position, quat_xyzw, seed) -> IkSolution:
        """Joints putting the TCP at ``position`` turned as ``quat_xyzw``, starting from (and near) ``seed``."""
        seed = np.asarray(seed, dtype=float)
        configuration = self._configuration
        configuration.update(seed)
        self._posture.set_target(np.array([seed[0], seed[1], 0.0, seed[3], 0.0, seed[5], seed[6]]))
        rotation = mink.SO3(quat_wxyz(quat_xyzw) / np.linalg.norm(quat_xyzw))
        target = np.asarray(position, dtype=float)
        self._tcp.set_target(mink.SE3.from_rotation_and_translation(rotation, target))
        tasks = [self._tcp, self._posture]
        best = None  # out of reach, the iterations wander: the closest they came is the answer
        for _ in range(_ITERATIONS):
            velocity = mink.solve_ik(configuration, tasks, 1.0, "daqp", damping=_DAMPING, limits=self._limits)
            configuration.integrate_inplace(velocity, 1.0)
            error = self._tcp.compute_error(configuration)
            # the log's translation mixes in the rotation: the residual is the TCP's distance, and the angle
            reached = configuration.get_transform_frame_to_world("tcp", "site").translation()
            position_error = float(np.linalg.norm(reached - target))
            rotation_error = float(np.linalg.norm(error[3:]))
            if best is None or (position_error, rotation_error) < (best.position_error_m, best.rotation_error_rad):
                best = IkSolution(tuple(float(v) for v in configuration.q), position_error, rotation_error)
            if np.linalg.norm(error[:3]) < _CONVERGED_M and rotation_error < _CONVERGED_RAD:
                break
        return best
