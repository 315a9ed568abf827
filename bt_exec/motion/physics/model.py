"""The MJCF of the Grant cell: a KUKA LBR iiwa 14 R820 on the table, its tool, the parts and their fixtures.

Written from the arm's published figures (KUKA's data sheet of the LBR iiwa 14 R820), not from any vendor
model: the axis distances 0.36 m (base to A2), 0.42 m (A2 to A4), 0.40 m (A4 to A6) and 0.126 m (A6 to the
flange); joint axes z, y, z, -y, z, y, z with the arm upright at zero; the joint ranges and rated speeds below;
link masses of 22.5 kg in all, lighter than the data sheet's 29.5 kg (their split is an estimate). Collision
shapes are capsules around each link. The world frame has the arm's base at the origin and the table top at z = 0.

The cell is built around the named poses (``bt_exec.motion.cell``): a named pose is where the tool tip (TCP)
works. Fixtures put each part's worked point there: the vacuum tool stands in its socket with its cup tip at
``vacuum_socket``; the hatch cap (its worked point the centre of its top face) lies on ``cap_storage``'s
fixture, and the hatch seat holds it with its top at ``hatch_seat``; holes are bores in a plate whose top is at
each hole's pose. ``objects`` (part -> worked point) moves a part away from its named place.

Two texts are built: the whole cell (:func:`cell_xml`) and the arm alone (:func:`arm_xml`), which inverse
kinematics solves on (the parts' free joints would only widen its problem).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

# --- the arm's published figures ------------------------------------------------------------------------------

JOINTS = tuple(f"joint_{i}" for i in range(1, 8))
LINKS = ("link_0",) + tuple(f"link_{i}" for i in range(1, 8))
#: Joint ranges (rad): A1, A3, A5 ±170°, A2, A4, A6 ±120°, A7 ±175°.
JOINT_RANGE = tuple(math.radians(d) for d in (170, 120, 170, 120, 170, 120, 175))
#: Rated joint speeds of the iiwa 14 R820 (rad/s): 85, 85, 100, 75, 130, 135, 135 °/s.
JOINT_SPEED = tuple(math.radians(d) for d in (85, 85, 100, 75, 130, 135, 135))
#: Rated joint torques (N m): 320, 320, 176, 176, 110, 40, 40.
JOINT_TORQUE = (320.0, 320.0, 176.0, 176.0, 110.0, 40.0, 40.0)
BASE_TO_A2, A2_TO_A4, A4_TO_A6, A6_TO_FLANGE = 0.36, 0.42, 0.40, 0.126
#: The vacuum tool's length along the flange's z axis: the TCP is this far beyond the flange, tool or not.
TOOL_LENGTH = 0.12

CAP_RADIUS, CAP_THICKNESS = 0.08, 0.02
FIXTURE_CLEARANCE = 0.005  # the socket's post stops this far below the docked tool's cup tip

#: The arm's chain, the one table the MJCF and the URDF (:mod:`urdf`) are both written from: (link, its origin's
#: offset along its parent's z, joint axis, mass kg, capsule length, capsule radius); joint i is at link i's origin.
ARM_CHAIN = (
    ("link_1", 0.1575, "0 0 1", 4.0, 0.2025, 0.075),
    ("link_2", BASE_TO_A2 - 0.1575, "0 1 0", 4.0, 0.2045, 0.075),
    ("link_3", 0.2045, "0 0 1", 3.0, A2_TO_A4 - 0.2045, 0.07),
    ("link_4", A2_TO_A4 - 0.2045, "0 -1 0", 2.7, 0.1845, 0.07),
    ("link_5", 0.1845, "0 0 1", 1.7, 0.14, 0.06),  # ends short of A6: the wrist bends 120° without touching
    ("link_6", A4_TO_A6 - 0.1845, "0 1 0", 1.8, 0.06, 0.06),
    ("link_7", 0.081, "0 0 1", 0.3, A6_TO_FLANGE - 0.081, 0.045),
)
BASE_MASS = 5.0
BASE_COM_Z, BASE_INERTIA = 0.07, (0.05, 0.06, 0.03)
BASE_RADIUS, BASE_HEIGHT = 0.1, 0.155  # link_0's cylinder, standing on the table
#: The flange face in link_7's frame, along its z (link_7's origin is 0.081 m past A6).
FLANGE_IN_LINK_7 = A6_TO_FLANGE - ARM_CHAIN[-1][1]
JOINT_DAMPING = 0.5  # N m s/rad
# Reflected rotor inertia (kg m^2): the gear trains make it dominate the small links' own.
_ARMATURE = (0.5, 0.5, 0.3, 0.3, 0.1, 0.05, 0.05)
# Position servo gains (N m/rad, N m s/rad), about critically damped on the armature and link inertia.
SERVO_KP = (10000.0, 10000.0, 5000.0, 5000.0, 1500.0, 800.0, 400.0)
SERVO_KV = (280.0, 280.0, 140.0, 120.0, 30.0, 14.0, 8.0)

TIMESTEP_S = 0.002  # physics step and control period

# The tool and the cap: (name, mass kg).
TOOL, CAP = "vacuum", "cap"
TOOL_MASS, CAP_MASS = 0.9, 0.3
# Welds switched at run time (suction and the tool coupling).
WELD_TOOL_FLANGE, WELD_TOOL_SOCKET, WELD_CAP_CUP = "tool_on_flange", "tool_in_socket", "cap_on_cup"


@dataclass(frozen=True)
class CellLayout:
    """Where the cell's things are (world frame, m): what the MJCF is written from.

    ``places``: named place -> TCP position there; ``kinds``: named place -> its kind in the skill catalog
    (seat, socket, storage, hole, pose); ``parts``: ``vacuum`` and ``cap`` -> their worked point at start (the
    cell moves one that starts on the arm there before the first step); ``docked``: the tool starts in its socket.
    """

    places: dict
    kinds: dict
    parts: dict
    docked: bool


def _name(text: str) -> str:
    """A place's name as an XML attribute value, quotes included."""
    return quoteattr(text)


def _v(values) -> str:
    return " ".join(f"{v:.6g}" for v in values)


def _arm(tool_site: bool) -> str:
    lines = [f'<body name="link_0"><inertial pos="0 0 {BASE_COM_Z}" mass="{BASE_MASS}" '
             f'diaginertia="{_v(BASE_INERTIA)}"/>',
             f'<geom name="link_0" type="cylinder" size="{BASE_RADIUS} {BASE_HEIGHT / 2:.6g}" '
             f'pos="0 0 {BASE_HEIGHT / 2:.6g}" class="arm"/>']
    for (name, offset, axis, mass, length, radius), armature, joint, span in zip(ARM_CHAIN, _ARMATURE, JOINTS,
                                                                                 JOINT_RANGE):
        lines.append(f'<body name="{name}" pos="0 0 {offset:.6g}" gravcomp="1">')
        lines.append(f'<inertial pos="0 0 {length / 2:.6g}" mass="{mass}" '
                     f'diaginertia="{_v(rod_inertia(mass, length, radius))}"/>')
        lines.append(f'<joint name="{joint}" axis="{axis}" range="{-span:.6g} {span:.6g}" armature="{armature}" '
                     f'damping="{JOINT_DAMPING}"/>')
        if name == LINKS[-1]:  # the flange's disc: flat, so nothing of the arm reaches past the flange face
            lines.append(f'<geom name="{name}" type="cylinder" size="{radius} {length / 2:.6g}" '
                         f'pos="0 0 {length / 2:.6g}" class="arm"/>')
        else:
            lines.append(f'<geom name="{name}" type="capsule" fromto="0 0 0 0 0 {length:.6g}" size="{radius}" '
                         f'class="arm"/>')
    lines.append(f'<site name="flange" pos="0 0 {FLANGE_IN_LINK_7:.6g}"/>')
    if tool_site:
        # the TCP frame is the flange's turned half a turn about z: tool down (TOOL_DOWN) with A7 near 0
        lines.append(f'<site name="tcp" pos="0 0 {FLANGE_IN_LINK_7 + TOOL_LENGTH:.6g}" quat="0 0 0 1"/>')
    lines.append("</body>" * (len(ARM_CHAIN) + 1))
    return "\n".join(lines)


def rod_inertia(mass: float, length: float, radius: float) -> tuple[float, float, float]:
    """The principal inertia (kg m^2) about its centre of a link taken as a rod of ``length`` and ``radius``."""
    side = mass * (3 * radius * radius + length * length) / 12
    return (side, side, mass * radius * radius / 2)


_DEFAULTS = """
<compiler angle="radian" autolimits="true"/>
<option timestep="{timestep}" integrator="implicitfast"/>
<default>
  <geom contype="1" conaffinity="1" condim="3" friction="0.9 0.005 0.0001" solref="0.005 1"/>
  <default class="arm"><geom rgba="0.93 0.5 0.1 1"/></default>
  <default class="fixture"><geom rgba="0.45 0.47 0.5 1"/></default>
  <default class="mark"><geom contype="0" conaffinity="0" rgba="0.1 0.1 0.1 1"/></default>
</default>
<visual><global offwidth="1280" offheight="960"/></visual>
"""


def arm_xml() -> str:
    """The arm alone, fixed on the world, with the ``tcp`` site: the model inverse kinematics works on."""
    return (f'<mujoco model="iiwa14">{_DEFAULTS.format(timestep=TIMESTEP_S)}<worldbody>{_arm(True)}'
            "</worldbody></mujoco>")


def cell_xml(layout: CellLayout) -> str:
    """The whole cell: table, arm with position servos, fixtures at the named places, tool and parts."""
    world = ['<light pos="0.4 0 2.5" dir="0 0 -1" diffuse="0.8 0.8 0.8"/>',
             '<geom name="table" type="box" pos="0.35 0 -0.03" size="0.75 0.85 0.03" class="fixture" '
             'rgba="0.75 0.72 0.66 1"/>',
             _arm(True)]
    world += _fixtures(layout)
    world += _parts(layout)
    actuators = "".join(
        f'<position name="servo_{i}" joint="{joint}" kp="{kp}" kv="{kv}" forcerange="{-torque} {torque}" '
        f'ctrlrange="{-span:.6g} {span:.6g}"/>'
        for i, (joint, kp, kv, torque, span) in enumerate(
            zip(JOINTS, SERVO_KP, SERVO_KV, JOINT_TORQUE, JOINT_RANGE), start=1))
    socket = layout.places.get("vacuum_socket")
    docked = layout.docked
    equality = [f'<weld name="{WELD_TOOL_FLANGE}" body1="link_7" body2="{TOOL}" active="false"/>',
                f'<weld name="{WELD_CAP_CUP}" body1="{TOOL}" body2="{CAP}" active="false"/>']
    if socket is not None:
        equality.append(f'<weld name="{WELD_TOOL_SOCKET}" body1="vacuum_socket" body2="{TOOL}" '
                        f'active="{"true" if docked else "false"}"/>')
    # the base is welded to the world, which MuJoCo's parent-child filter does not cover; the tool changer locks
    # the tool's coupling face onto the flange's
    excludes = ['<exclude body1="link_0" body2="link_1"/>', '<exclude body1="link_7" body2="vacuum"/>']
    return (f'<mujoco model="grant_cell">{_DEFAULTS.format(timestep=TIMESTEP_S)}'
            f'<worldbody>{"".join(world)}</worldbody>'
            f'<contact>{"".join(excludes)}</contact>'
            f'<equality>{"".join(equality)}</equality>'
            f"<actuator>{actuators}</actuator></mujoco>")


def _fixtures(layout: CellLayout) -> list[str]:
    out = []
    for place, (x, y, z) in sorted(layout.places.items()):
        kind = layout.kinds.get(place)
        if kind == "socket":
            # a post under the docked tool; its body is the socket weld's anchor
            top = z - FIXTURE_CLEARANCE
            out.append(f'<body name={_name(place)} pos="{_v((x, y, z))}">'
                       f'<geom name={_name(place)} type="cylinder" size="0.05 {top / 2:.6g}" '
                       f'pos="0 0 {-z + top / 2:.6g}" class="fixture"/></body>')
        elif kind in ("seat", "storage"):
            top = z - CAP_THICKNESS  # the cap lies on it, its top face (worked point) at the named pose
            out.append(f'<geom name={_name(place)} type="cylinder" size="{CAP_RADIUS + 0.015} {top / 2:.6g}" '
                       f'pos="{_v((x, y, top / 2))}" class="fixture"/>')
        elif kind == "hole":
            # a bored plate: the hole's mouth at the named pose, its bore drawn dark
            out.append(f'<geom name={_name(place)} type="box" size="0.025 0.025 {z / 2:.6g}" pos="{_v((x, y, z / 2))}" '
                       f'class="fixture"/>')
            out.append(f'<geom name={_name(place + "_bore")} type="cylinder" size="0.006 0.0005" '
                       f'pos="{_v((x, y, z + 0.0005))}" class="mark"/>')
    return out


def _parts(layout: CellLayout) -> list[str]:
    out = []
    tool_pos = layout.parts[TOOL]
    # The tool's frame is the flange's when coupled: origin at the coupling face, z along the tool to the cup.
    out.append(f'<body name="{TOOL}" pos="{_v((tool_pos[0], tool_pos[1], tool_pos[2] + TOOL_LENGTH))}" '
               f'quat="0 1 0 0"><freejoint name="{TOOL}"/>'
               f'<inertial pos="0 0 0.05" mass="{TOOL_MASS}" diaginertia="0.002 0.002 0.0005"/>'
               '<geom name="vacuum_coupling" type="cylinder" size="0.04 0.01" pos="0 0 0.01" rgba="0.2 0.2 0.25 1"/>'
               '<geom name="vacuum_body" type="capsule" fromto="0 0 0.03 0 0 0.085" size="0.022" '
               'rgba="0.3 0.5 0.8 1"/>'
               f'<geom name="vacuum_cup" type="cylinder" size="0.02 0.0075" pos="0 0 {TOOL_LENGTH - 0.0075:.6g}" '
               'rgba="0.1 0.1 0.1 1"/>'
               f'<site name="vacuum_tip" pos="0 0 {TOOL_LENGTH:.6g}"/></body>')
    cap_at = layout.parts[CAP]
    out.append(f'<body name="{CAP}" pos="{_v(cap_at)}"><freejoint name="{CAP}"/>'
               f'<geom name="{CAP}" type="cylinder" size="{CAP_RADIUS} {CAP_THICKNESS / 2}" '
               f'pos="0 0 {-CAP_THICKNESS / 2}" mass="{CAP_MASS}" rgba="0.85 0.85 0.2 1"/>'
               f'<site name="cap_top"/></body>')
    return out
