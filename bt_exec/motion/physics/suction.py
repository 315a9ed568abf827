"""Suction and the tool coupling as welds switched on and off while the simulation runs.

A weld switched on at run time must hold the two bodies as they are now: its relative pose and anchor are
set from their current poses first (left at the model's, the weld would pull the part to where it was in
the model's reference pose, and the coupled tool sags or jumps). A grip holds only when the two worked
points are within :data:`GRIP_DISTANCE_M` (the cup on the part's top, the flange on the tool's coupling face):
otherwise nothing is welded and the grasp fails, from where the bodies really are.

A held part's gravity is compensated as the arm controller is told its load (KUKA's load data): its body's
``gravcomp`` is set while it is held, so the servos do not sag under it.
"""
from __future__ import annotations

import mujoco
import numpy as np

GRIP_DISTANCE_M = 0.005


def weld_now(model: mujoco.MjModel, data: mujoco.MjData, weld: int) -> None:
    """Switch ``weld`` on, holding its two bodies in their current relative pose."""
    body1, body2 = model.eq_obj1id[weld], model.eq_obj2id[weld]
    rotation1 = data.xmat[body1].reshape(3, 3)
    relative_position = rotation1.T @ (data.xpos[body2] - data.xpos[body1])
    inverse1 = np.empty(4)
    mujoco.mju_negQuat(inverse1, data.xquat[body1])
    relative_quat = np.empty(4)
    mujoco.mju_mulQuat(relative_quat, inverse1, data.xquat[body2])
    eq = model.eq_data[weld]
    eq[0:3] = 0.0                       # anchor: body2's origin
    eq[3:6] = relative_position         # body2's origin in body1's frame
    eq[6:10] = relative_quat            # body2's orientation in body1's frame
    eq[10] = 1.0                        # torque scale
    data.eq_active[weld] = 1


def release(data: mujoco.MjData, weld: int) -> None:
    data.eq_active[weld] = 0


def carried(model: mujoco.MjModel, body: int, held: bool) -> None:
    """Compensate ``body``'s gravity while held (the controller knows its load), not once it lies free."""
    model.body_gravcomp[body] = 1.0 if held else 0.0


def within_grip(a, b) -> bool:
    return float(np.linalg.norm(np.asarray(a) - np.asarray(b))) <= GRIP_DISTANCE_M
