"""Collision checks of planned arm poses in MuJoCo, held parts carried along.

A checker works on its own MjData of the cell model: the parts that lie free are where the live simulation
has them when the check starts; the parts the arm holds (the tool on the flange, the cap on the cup) are moved
with the flange, keeping their pose relative to it. A pose collides when a geom of the arm or of a held part
sinks more than :data:`PENETRATION_M` into anything (touching is not colliding: lowering a cup onto a part
ends in contact). Adjacent links never collide (MuJoCo's parent-child filter), nor do the flange and the
tool (the model's excluded pair).
"""
from __future__ import annotations

from dataclasses import dataclass

import mujoco
import numpy as np

PENETRATION_M = 0.001


@dataclass(frozen=True)
class Collision:
    """Two geoms in contact deeper than allowed, and where (world frame, m)."""

    first: str
    second: str
    point: tuple[float, float, float]
    depth_m: float

    def describe(self) -> str:
        x, y, z = self.point
        return (f"{self.first} collides with {self.second} at ({x:.3f}, {y:.3f}, {z:.3f}) m, "
                f"{self.depth_m * 1000:.1f} mm deep")


@dataclass(frozen=True)
class HeldPart:
    """A part moving with the flange: its free joint's qpos address and its pose in the flange's frame."""

    qpos_address: int
    position: np.ndarray  # (3,) in the flange body's frame
    quat: np.ndarray      # (4,) w, x, y, z, relative to the flange body


class CollisionChecker:
    """Checks arm poses against the cell; see the module docstring."""

    def __init__(self, model: mujoco.MjModel, arm_qpos: np.ndarray, flange_body: int, moving_bodies: set[int]):
        self.model = model
        self.data = mujoco.MjData(model)
        self._arm_qpos = arm_qpos          # qpos addresses of the 7 arm joints
        self._flange = flange_body
        self._moving = moving_bodies       # the arm's bodies
        self._held_bodies: set[int] = set()
        self._held: list[HeldPart] = []
        self._quat = np.empty(4)

    def start(self, live_qpos: np.ndarray, held: list[HeldPart], held_bodies: set[int]) -> None:
        """Check the poses to come against the parts as they lie in ``live_qpos``, ``held`` moving with the flange."""
        self.data.qpos[:] = live_qpos
        self._held, self._held_bodies = held, held_bodies

    def check(self, joints) -> Collision | None:
        """The deepest collision of the arm (and held parts) at ``joints``, or None."""
        model, data = self.model, self.data
        data.qpos[self._arm_qpos] = joints
        if self._held:
            mujoco.mj_kinematics(model, data)
            rotation, origin = data.xmat[self._flange].reshape(3, 3), data.xpos[self._flange]
            for part in self._held:
                address = part.qpos_address
                data.qpos[address:address + 3] = origin + rotation @ part.position
                mujoco.mju_mulQuat(self._quat, data.xquat[self._flange], part.quat)
                data.qpos[address + 3:address + 7] = self._quat
        mujoco.mj_kinematics(model, data)
        mujoco.mj_collision(model, data)
        if data.ncon == 0:
            return None
        contacts = data.contact
        deep = np.flatnonzero(contacts.dist < -PENETRATION_M)
        worst = None
        for i in deep:
            bodies = (model.geom_bodyid[contacts.geom1[i]], model.geom_bodyid[contacts.geom2[i]])
            if not any(body in self._moving or body in self._held_bodies for body in bodies):
                continue  # parts resting on fixtures are not the arm's business
            if worst is None or contacts.dist[i] < contacts.dist[worst]:
                worst = i
        if worst is None:
            return None
        names = sorted((_geom_name(model, contacts.geom1[worst]), _geom_name(model, contacts.geom2[worst])))
        return Collision(names[0], names[1], tuple(float(v) for v in contacts.pos[worst]), float(-contacts.dist[worst]))


def _geom_name(model: mujoco.MjModel, geom: int) -> str:
    return mujoco.mj_id2name(model, mujoco.mjtObj.mjOBJ_GEOM, geom) or f"geom {geom}"
