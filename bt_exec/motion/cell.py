"""The cell's named poses from a YAML file (``cell_poses_file``). Pure Python, no ROS.

The file is a mapping from a place name (a scene target such as ``work`` or ``hole_1``, or an object
worked at a pose of its own) to where the tool tip works there, in the world frame::

    work:
      position: [0.50, 0.00, 0.45]          # m; required
    vacuum_socket:
      position: [0.30, -0.40, 0.12]
      orientation: [1.0, 0.0, 0.0, 0.0]     # quaternion x, y, z, w; default: tool down (skills.TOOL_DOWN)
      approach_height: 0.20                 # m above position; default 0.15

Every bad entry is refused with a :class:`ConfigError` naming the file and the key. A top-level ``objects``
section (part -> [x, y, z]: where parts really are) is the physics cell's (``bt_exec.motion.physics``), not a
place: the poses leave it out.
"""
from __future__ import annotations

import math
from numbers import Real
from pathlib import Path

from bt_exec.compilers.config_files import read_yaml_file
from bt_exec.errors import ConfigError
from bt_exec.motion.policy import QUAT_NORM_TOL, MotionLimits
from bt_exec.motion.skills import TOOL_DOWN, Pose

KEYS = ("position", "orientation", "approach_height")
OBJECTS = "objects"  # the physics cell's section: where parts really are
_DEFAULT_APPROACH = Pose((0.0, 0.0, 0.0)).approach_height


def _number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool) and math.isfinite(v)


def _vector(value, size: int) -> tuple[float, ...] | None:
    if isinstance(value, (list, tuple)) and len(value) == size and all(_number(v) for v in value):
        return tuple(float(v) for v in value)
    return None


def read_cell_poses(path) -> dict[str, Pose]:
    """The poses in YAML file ``path``, by name; ConfigError naming the file and key of the first bad entry."""
    p = Path(path)
    data = read_yaml_file(p, "cell poses file")
    if not isinstance(data, dict) or not data:
        got = "an empty mapping" if data == {} or data is None else type(data).__name__
        raise ConfigError(f"cell poses file {p} must hold a mapping of place names to poses, got {got}")
    return {str(name): _pose(p, name, entry) for name, entry in data.items() if name != OBJECTS}


def _pose(p: Path, name, entry) -> Pose:
    where = f"cell poses file {p}: {name}"
    if not isinstance(name, str) or not name:
        raise ConfigError(f"cell poses file {p}: place names must be non-empty strings, got {name!r}")
    if not isinstance(entry, dict):
        raise ConfigError(f"{where}: must be a mapping with position (and optionally orientation, "
                          f"approach_height), got {type(entry).__name__}")
    unknown = sorted(str(k) for k in entry if k not in KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)} (known: {', '.join(KEYS)})")
    if "position" not in entry:
        raise ConfigError(f"{where}: position [x, y, z] is required")
    position = _vector(entry["position"], 3)
    if position is None:
        raise ConfigError(f"{where}.position must be 3 finite numbers [x, y, z] (m), got {entry['position']!r}")
    orientation = TOOL_DOWN
    if "orientation" in entry:
        orientation = _vector(entry["orientation"], 4)
        if orientation is None:
            raise ConfigError(f"{where}.orientation must be 4 finite numbers [x, y, z, w] (a quaternion), "
                              f"got {entry['orientation']!r}")
        norm = math.sqrt(sum(v * v for v in orientation))
        if abs(norm - 1.0) > QUAT_NORM_TOL:
            raise ConfigError(f"{where}.orientation must be a unit quaternion, its norm is {norm:.6g}")
    approach = entry.get("approach_height", _DEFAULT_APPROACH)
    if not _number(approach) or approach < 0:
        raise ConfigError(f"{where}.approach_height must be a number >= 0 (m), got {approach!r}")
    return Pose(position, orientation, float(approach))


def missing_poses(poses: dict[str, Pose], targets) -> list[str]:
    """The names in ``targets`` (a scene's targets) that have no pose: skills there end ``failed``."""
    return sorted(name for name in targets if name not in poses)


def read_motion_config(settings: dict) -> tuple[dict[str, Pose], MotionLimits]:
    """The poses (``cell_poses_file``, required) and motion limits (``motion_limits_file``; empty: the
    defaults of :class:`MotionLimits`) named by the node's parameters; ConfigError naming the parameter."""
    if not settings.get("cell_poses_file"):
        raise ConfigError("backend moveit needs cell_poses_file: the YAML file of the cell's named poses "
                          "(e.g. config/grant_cell_poses.yaml)")
    poses = read_cell_poses(settings["cell_poses_file"])  # its errors name the file
    limits_file = settings.get("motion_limits_file")
    try:
        limits = MotionLimits.from_yaml(limits_file) if limits_file else MotionLimits()
    except ConfigError as exc:
        raise ConfigError(f"motion_limits_file: {exc}") from None
    return poses, limits
