"""Where the cell's things are at start: from the named poses, the scene and the poses file's ``objects``.

The scene says where each part is by place (``state``: part -> place, ``patron``, ``hand``), as the planner
sees it; ``objects`` (part -> [x, y, z], its worked point in the world frame) says where a part really is
when that differs, as a real cell differs from its scene (a perception error to rehearse). A start that
contradicts the cell is refused with a :class:`CellRefused` naming what: a part at a place without a pose, a
part held with no tool to hold it, a part both held and lying somewhere, an ``objects`` entry for a part
the cell does not have or that cannot lie free (a part put inside something is found once the model is
built: ``MujocoMotion``).
"""
from __future__ import annotations

import math
from numbers import Real
from pathlib import Path

from bt_exec.compilers.config_files import read_yaml_file
from bt_exec.compilers.scene import Scene
from bt_exec.compilers.skill_catalog import SkillCatalog
from bt_exec.motion.physics.errors import CellRefused
from bt_exec.motion.cell import OBJECTS
from bt_exec.motion.physics.model import CAP, CAP_THICKNESS, FIXTURE_CLEARANCE, TOOL, CellLayout
from bt_exec.motion.skills import Pose


PATRON, HAND = "patron", "hand"
# Where parts that are not in the cell (handed over, unknown, not in the scene) lie: on the table, out of reach.
# The lowest a named place of each kind can be (its TCP height, m): its fixture stands on the table under it.
_LOWEST = {"seat": CAP_THICKNESS + 0.002, "storage": CAP_THICKNESS + 0.002, "socket": FIXTURE_CLEARANCE + 0.002,
           "hole": 0.002}
_ASIDE = {TOOL: (-0.35, 0.55, 0.0), CAP: (-0.35, -0.55, CAP_THICKNESS)}


def read_objects(path) -> dict[str, tuple[float, float, float]]:
    """The ``objects`` section of a poses file (part -> [x, y, z]), {} without one; CellRefused naming the entry."""
    data = read_yaml_file(Path(path), "cell poses file")
    section = data.get(OBJECTS) if isinstance(data, dict) else None
    if section is None:
        return {}
    if not isinstance(section, dict):
        raise CellRefused(f"cell poses file {path}: {OBJECTS} must map parts to [x, y, z], "
                          f"got {type(section).__name__}")
    out = {}
    for part, value in section.items():
        if not (isinstance(value, (list, tuple)) and len(value) == 3
                and all(isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v) for v in value)):
            raise CellRefused(f"cell poses file {path}: {OBJECTS}.{part} must be 3 finite numbers [x, y, z] (m), "
                              f"got {value!r}")
        out[str(part)] = tuple(float(v) for v in value)
    return out


def cell_layout(poses: dict[str, Pose], scene: Scene, catalog: SkillCatalog,
                objects: dict[str, tuple[float, float, float]], poses_file) -> tuple[CellLayout, bool, bool]:
    """The layout the model is written from, whether the tool starts on the flange and the cap on its cup;
    ``poses_file`` is named where a place is wrong."""
    kinds = {name: catalog.target_type(name) for name in poses}
    places = {name: pose.position for name, pose in poses.items()}
    for name, (_x, _y, z) in sorted(places.items()):
        lowest = _LOWEST.get(kinds[name], 0.0)
        if z < lowest:
            what = f"its fixture needs z >= {lowest} m" if kinds[name] in _LOWEST else "the table top is z = 0"
            raise CellRefused(f"cell poses file {poses_file}: {name} at z = {z:g} m is below where it can be: {what}")
    socket = catalog.socket_of(TOOL)
    for part, where in sorted(scene.state.items()):
        if where not in (PATRON, HAND, "handed_over", "unknown") and where not in places:
            raise CellRefused(f"the scene puts {part} at {where!r}, a place the poses file does not name "
                              f"(its places: {', '.join(sorted(places))})")
    tool_where = scene.state.get(TOOL, socket)
    cap_where = HAND if scene.holding == CAP else scene.state.get(CAP)
    tool_on_flange = tool_where == PATRON or scene.holding == TOOL
    cap_on_cup = cap_where == HAND
    if cap_on_cup and not tool_on_flange:
        raise CellRefused(f"the scene has {CAP} in hand, but the {TOOL} tool that holds it is not in the patron")
    if scene.holding not in (None, CAP, TOOL):
        raise CellRefused(f"the scene has {scene.holding!r} in hand: the cell holds only the {CAP}")
    if not tool_on_flange and tool_where != socket:
        raise CellRefused(f"the scene puts the {TOOL} tool at {tool_where!r}: it stands only in its socket "
                          f"{socket!r} or on the flange (patron)")
    if not tool_on_flange and socket not in places:
        raise CellRefused(f"the {TOOL} tool stands in {socket!r}, which the poses file does not name")
    for part, position in sorted(objects.items()):
        if part != CAP:
            raise CellRefused(f"objects names {part!r}: only the {CAP} lies free in the cell and can be placed there")
        if cap_on_cup:
            raise CellRefused(f"objects puts {part} at {list(position)}, but the scene has it in hand: "
                              "a part in two places")
        if position[2] < CAP_THICKNESS - 1e-9:
            raise CellRefused(f"objects puts {part} at {list(position)}: its top would be below the table's "
                              f"(z >= {CAP_THICKNESS} m)")
    parts = {TOOL: places[socket] if socket in places else _ASIDE[TOOL],
             CAP: objects.get(CAP) or (places[cap_where] if cap_where in places else _ASIDE[CAP])}
    return CellLayout(places, kinds, parts, docked=not tool_on_flange), tool_on_flange, cap_on_cup
