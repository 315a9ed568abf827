"""The simulated iiwa 14 as a URDF, for robot_state_publisher and RViz: the same figures as the MJCF.

Written from :data:`model.ARM_CHAIN` and the joint tables of :mod:`model` (offsets, axes, ranges, rated speeds and
torques, masses and inertias), so the arm RViz draws from ``/joint_states`` is the one the physics moves. Links
``link_0`` .. ``link_7`` with the MJCF's shapes (a capsule is a cylinder with a sphere at each end), joints
``joint_1`` .. ``joint_7`` (revolute), and fixed frames: ``world`` (the table top, the base at its origin),
``flange`` (the flange face) and ``tcp`` (the vacuum cup's tip, turned half a turn about the flange's z as the
MJCF's ``tcp`` site is). Imports no MuJoCo: ``python -m bt_exec.motion.physics.urdf [FILE]`` writes it.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

from bt_exec.motion.physics.model import (ARM_CHAIN, BASE_COM_Z, BASE_HEIGHT, BASE_INERTIA, BASE_MASS, BASE_RADIUS,
                                          FLANGE_IN_LINK_7, JOINT_DAMPING, JOINT_RANGE, JOINT_SPEED, JOINT_TORQUE,
                                          JOINTS, TOOL_LENGTH, rod_inertia)

ROBOT_NAME = "iiwa14"
ROOT, FLANGE, TCP = "world", "flange", "tcp"
_ORANGE = "0.93 0.5 0.1 1"


def _v(values) -> str:
    return " ".join(f"{v:.12g}" for v in values)


def _inertial(mass: float, com_z: float, inertia) -> str:
    ixx, iyy, izz = inertia
    return (f'<inertial><origin xyz="0 0 {com_z:.6g}"/><mass value="{mass:.6g}"/>'
            f'<inertia ixx="{ixx:.6g}" ixy="0" ixz="0" iyy="{iyy:.6g}" iyz="0" izz="{izz:.6g}"/></inertial>')


def _shapes(length: float, radius: float, capsule: bool) -> list[tuple[float, str]]:
    """(centre along z, geometry) of a link's shape from its origin up: a cylinder, and a capsule's two caps."""
    shapes = [(length / 2, f'<cylinder radius="{radius:.6g}" length="{length:.6g}"/>')]
    if capsule:
        shapes += [(0.0, f'<sphere radius="{radius:.6g}"/>'), (length, f'<sphere radius="{radius:.6g}"/>')]
    return shapes


def _link(name: str, mass: float, com_z: float, inertia, shapes) -> str:
    parts = [f'<link name="{name}">', _inertial(mass, com_z, inertia)]
    for z, geometry in shapes:
        origin = f'<origin xyz="0 0 {z:.6g}"/>'
        parts.append(f'<visual>{origin}<geometry>{geometry}</geometry><material name="orange"/></visual>')
        parts.append(f'<collision>{origin}<geometry>{geometry}</geometry></collision>')
    parts.append("</link>")
    return "".join(parts)


def _fixed(name: str, parent: str, child: str, xyz, rpy=(0.0, 0.0, 0.0)) -> str:
    return (f'<joint name="{name}" type="fixed"><parent link="{parent}"/><child link="{child}"/>'
            f'<origin xyz="{_v(xyz)}" rpy="{_v(rpy)}"/></joint>')


def iiwa_urdf() -> str:
    """The URDF text of the simulated KUKA LBR iiwa 14 R820; see the module docstring."""
    out = ['<?xml version="1.0"?>', f'<robot name="{ROBOT_NAME}">',
           f'<material name="orange"><color rgba="{_ORANGE}"/></material>',
           f'<link name="{ROOT}"/>', _fixed("world_to_link_0", ROOT, "link_0", (0, 0, 0)),
           _link("link_0", BASE_MASS, BASE_COM_Z, BASE_INERTIA,
                 [(BASE_HEIGHT / 2, f'<cylinder radius="{BASE_RADIUS}" length="{BASE_HEIGHT}"/>')])]
    parent = "link_0"
    for (name, offset, axis, mass, length, radius), joint, span, speed, torque in zip(
            ARM_CHAIN, JOINTS, JOINT_RANGE, JOINT_SPEED, JOINT_TORQUE):
        out.append(f'<joint name="{joint}" type="revolute"><parent link="{parent}"/><child link="{name}"/>'
                   f'<origin xyz="0 0 {offset:.6g}" rpy="0 0 0"/><axis xyz="{axis}"/>'
                   f'<limit lower="{-span:.12g}" upper="{span:.12g}" effort="{torque:.6g}" velocity="{speed:.12g}"/>'
                   f'<dynamics damping="{JOINT_DAMPING}"/></joint>')
        # link_7 ends in the flange's flat disc, every other link is a capsule (as in the MJCF)
        out.append(_link(name, mass, length / 2, rod_inertia(mass, length, radius),
                         _shapes(length, radius, capsule=name != ARM_CHAIN[-1][0])))
        parent = name
    out.append(f'<link name="{FLANGE}"/>')
    out.append(_fixed("link_7_to_flange", parent, FLANGE, (0, 0, FLANGE_IN_LINK_7)))
    out.append(f'<link name="{TCP}"/>')
    out.append(_fixed("flange_to_tcp", FLANGE, TCP, (0, 0, TOOL_LENGTH), (0, 0, math.pi)))
    out.append("</robot>")
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write the URDF to the file named, or to stdout without one."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) > 1 or (argv and argv[0].startswith("-")):
        print("usage: python -m bt_exec.motion.physics.urdf [FILE]  (the simulated iiwa 14's URDF; stdout without "
              "FILE)", file=sys.stderr)
        return 2
    if not argv:
        sys.stdout.write(iiwa_urdf())
        return 0
    try:
        Path(argv[0]).write_text(iiwa_urdf(), encoding="utf-8")
    except OSError as exc:
        print(f"cannot write {argv[0]}: {exc.strerror or exc}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
