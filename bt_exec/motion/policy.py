"""Motion policy: checks every planned trajectory before it may be executed.

Pure Python, no ROS. A trajectory is a sequence of :class:`TrajectoryPoint` (seven joint angles and
the TCP orientation in the world frame). :meth:`MotionPolicy.check` refuses it, with the index of the
first failing point and a reason, when

* the joint states or the planning scene it was planned on are stale (checked first: never plan on
  stale data; such a failure has ``index None``),
* it is empty,
* a point is malformed (not 7 finite joint angles, or not a finite, roughly unit quaternion),
* joint 7 leaves ``work ± half_range`` (bounds inclusive),
* the TCP tilts more than ``max_tilt_deg`` from straight down (world -z; bound inclusive),
* any joint changes by more than ``max_joint_step_rad`` between two consecutive points (the wrist
  flip through ±180°).

Points are checked in order, and within a point: well-formedness, J7, tilt, then the jump from the
previous point. Every point is checked, not just the end pose: a good end pose does not excuse a bad
intermediate point. Malformed input is reported as a failed check, never raised.

Float noise: every bound is compared with a slack of :data:`EPS` (1e-9, in the bound's own unit:
rad, degrees or seconds), so a value exactly on a bound passes even after rounding, while anything
measurably beyond it (e.g. 90.0001° for J7) fails.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from numbers import Real
from pathlib import Path
from typing import Sequence

from bt_exec.compilers.config_files import read_yaml_file
from bt_exec.errors import ConfigError

#: Slack for float noise on every inclusive bound (in the bound's unit: rad, degrees, seconds).
EPS = 1e-9
#: Joints per point (KUKA iiwa: joint 1..7; positions[6] is J7).
JOINT_COUNT = 7
#: How far a quaternion's norm may be from 1 and still count as normalised.
QUAT_NORM_TOL = 1e-3

VIOLATIONS = (
    "j7_range",
    "tcp_tilt",
    "joint_jump",
    "stale_joint_states",
    "stale_scene",
    "empty",
    "malformed",
)


def _is_number(v) -> bool:
    return isinstance(v, Real) and not isinstance(v, bool)


@dataclass(frozen=True)
class MotionLimits:
    """Limits of the motion policy. Constructing one with unusable values raises :class:`ConfigError`."""

    j7_work_rad: float = 0.0
    j7_half_range_rad: float = math.pi / 2
    max_tilt_deg: float = 10.0
    max_joint_step_rad: float = 2.5
    max_joint_state_age_s: float = 0.5
    max_scene_age_s: float = 1.0

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if not _is_number(v) or not math.isfinite(v):
                raise ConfigError(f"motion limits: {f.name} must be a finite number, got {v!r}")
            object.__setattr__(self, f.name, float(v))
        if not -math.pi <= self.j7_work_rad <= math.pi:
            raise ConfigError(f"motion limits: j7_work_rad must be within ±π, got {self.j7_work_rad}")
        if not 0.0 < self.j7_half_range_rad <= math.pi:
            raise ConfigError(
                f"motion limits: j7_half_range_rad must be in (0, π], got {self.j7_half_range_rad}")
        if not 0.0 <= self.max_tilt_deg <= 180.0:
            raise ConfigError(f"motion limits: max_tilt_deg must be in [0, 180], got {self.max_tilt_deg}")
        for name in ("max_joint_step_rad", "max_joint_state_age_s", "max_scene_age_s"):
            if getattr(self, name) <= 0.0:
                raise ConfigError(f"motion limits: {name} must be > 0, got {getattr(self, name)}")

    @classmethod
    def from_yaml(cls, path) -> "MotionLimits":
        """Read limits from a YAML file (a flat mapping of field names; missing keys keep their defaults).

        Raises :class:`ConfigError` when the file is missing or unreadable, is not YAML, is not a
        mapping, names an unknown key, or gives an unusable value.
        """
        p = Path(path)
        try:
            data = read_yaml_file(p, "motion limits file")
        except ConfigError as exc:
            raise ConfigError(f"motion limits: {exc}") from None
        if not isinstance(data, dict):
            raise ConfigError(f"motion limits: {p} must hold a mapping of limits, got {type(data).__name__}")
        known = {f.name for f in fields(cls)}
        unknown = sorted(str(k) for k in data if k not in known)
        if unknown:
            raise ConfigError(
                f"motion limits: {p}: unknown key(s) {', '.join(unknown)} (known: {', '.join(sorted(known))})")
        try:
            return cls(**data)
        except ConfigError as exc:
            raise ConfigError(f"{exc} (in {p})") from exc


@dataclass(frozen=True)
class TrajectoryPoint:
    positions: tuple[float, ...]  # joint angles in rad, joint 1..7 (index 6 is J7)
    tcp_quat: tuple[float, float, float, float]  # TCP orientation in the world frame, (x, y, z, w)


@dataclass(frozen=True)
class MotionCheck:
    ok: bool
    index: int | None  # first failing point; None when ok or when the failure is freshness
    reason: str  # "" when ok
    violation: str | None  # one of VIOLATIONS, None when ok


OK = MotionCheck(True, None, "", None)


def tcp_tilt_deg(quat) -> float:
    """Angle in degrees between the tool's z axis and straight down (world -z), for an (x, y, z, w) quaternion.

    The quaternion is normalised first; its sign does not matter. Raises ``ValueError`` for a
    quaternion that is not four finite numbers with a non-zero norm.
    """
    try:
        x, y, z, w = (float(c) for c in quat)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"quaternion must be four numbers (x, y, z, w), got {quat!r}") from exc
    n = math.sqrt(x * x + y * y + z * z + w * w)
    if not math.isfinite(n) or n == 0.0:
        raise ValueError(f"quaternion must be finite and non-zero, got {quat!r}")
    x, y, z, w = x / n, y / n, z / n, w / n
    # Tool z axis in the world frame: third column of the rotation matrix.
    zx = 2.0 * (x * z + w * y)
    zy = 2.0 * (y * z - w * x)
    zz = 1.0 - 2.0 * (x * x + y * y)
    # Angle to (0, 0, -1) via atan2 (accurate near 0° and 180°, unlike acos).
    return math.degrees(math.atan2(math.hypot(zx, zy), -zz))


def _malformed(point) -> str | None:
    """Why a point is malformed, or None when it is usable."""
    positions = getattr(point, "positions", None)
    quat = getattr(point, "tcp_quat", None)
    if positions is None or quat is None:
        return f"not a trajectory point (needs positions and tcp_quat), got {type(point).__name__}"
    try:
        positions = list(positions)
        quat = list(quat)
    except TypeError:
        return "positions and tcp_quat must be sequences of numbers"
    if len(positions) != JOINT_COUNT:
        return f"expected {JOINT_COUNT} joint positions, got {len(positions)}"
    for j, v in enumerate(positions, start=1):
        if not _is_number(v) or not math.isfinite(v):
            return f"joint {j} position {v!r} is not a finite number"
    if len(quat) != 4:
        return f"tcp_quat must have 4 components (x, y, z, w), got {len(quat)}"
    for v in quat:
        if not _is_number(v) or not math.isfinite(v):
            return f"tcp_quat component {v!r} is not a finite number"
    norm = math.sqrt(sum(float(v) * float(v) for v in quat))
    if abs(norm - 1.0) > QUAT_NORM_TOL:
        return f"tcp_quat is not normalised (norm {norm:.6f}, allowed 1 ± {QUAT_NORM_TOL:g})"
    return None


class MotionPolicy:
    """Applies :class:`MotionLimits` to planned trajectories; see the module docstring."""

    def __init__(self, limits: MotionLimits | None = None):
        self.limits = limits if limits is not None else MotionLimits()

    def _stale(self, what: str, age, max_age: float, violation: str) -> MotionCheck | None:
        if not _is_number(age) or not math.isfinite(age) or age < 0.0:
            # An unknown or future stamp cannot prove freshness: treat as stale.
            return MotionCheck(False, None, f"{what} age {age!r} is not a finite non-negative number", violation)
        if age > max_age + EPS:
            return MotionCheck(False, None, f"{what} are {age:.2f} s old (max {max_age:.2f} s)", violation)
        return None

    def check(self, points: Sequence[TrajectoryPoint], joint_state_age_s: float, scene_age_s: float) -> MotionCheck:
        lim = self.limits
        stale = self._stale("joint states", joint_state_age_s, lim.max_joint_state_age_s, "stale_joint_states")
        if stale is None:
            stale = self._stale("planning scene", scene_age_s, lim.max_scene_age_s, "stale_scene")
        if stale is not None:
            return stale
        if points is None or isinstance(points, (str, bytes)):
            return MotionCheck(False, None, "trajectory is not a sequence of points", "malformed")
        try:
            points = list(points)
        except TypeError:
            return MotionCheck(False, None, "trajectory is not a sequence of points", "malformed")
        if not points:
            return MotionCheck(False, None, "trajectory is empty", "empty")

        prev: list[float] | None = None
        for i, point in enumerate(points):
            bad = _malformed(point)
            if bad is not None:
                return MotionCheck(False, i, f"point {i}: {bad}", "malformed")
            pos = [float(v) for v in point.positions]

            j7 = pos[6]
            if abs(j7 - lim.j7_work_rad) > lim.j7_half_range_rad + EPS:
                return MotionCheck(
                    False, i,
                    f"point {i}: joint 7 at {j7:.2f} rad is outside work "
                    f"{lim.j7_work_rad:.2f} ± {lim.j7_half_range_rad:.2f} rad",
                    "j7_range")

            tilt = tcp_tilt_deg(point.tcp_quat)
            if tilt > lim.max_tilt_deg + EPS:
                return MotionCheck(
                    False, i, f"point {i}: TCP tilt {tilt:.2f}° from straight down exceeds {lim.max_tilt_deg:.2f}°",
                    "tcp_tilt")

            if prev is not None:
                for j, (a, b) in enumerate(zip(prev, pos), start=1):
                    step = abs(b - a)
                    if step > lim.max_joint_step_rad + EPS:
                        return MotionCheck(
                            False, i,
                            f"point {i}: joint {j} jumps {step:.2f} rad from point {i - 1} "
                            f"(max {lim.max_joint_step_rad:.2f} rad; a wrist flip through ±180°?)",
                            "joint_jump")
            prev = pos
        return OK
