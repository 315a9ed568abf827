"""PhysicsCell: Qwen3 Grant skill calls served on a MuJoCo simulation of the cell.

The same stack as the MoveItPy path (``bt_exec.ros.moveit_wiring``): ``MoveItBackend`` (the Backend protocol:
preconditions on the symbolic World, one skill at a time in a worker thread, cancel stops the arm) over
``GrantMotionSkills`` (phases, the policy gate) over a Motion seam, here :class:`MujocoMotion` instead of
MoveItPy. Use it as ``Executor(backend=PhysicsCell(...))``: the executor takes the cell's scene when it is given
none, so both work on one scene.

At start every named pose and the pose above it (its approach height) are checked for reach from the arm's
home (the ``work`` pose): an unreachable one is refused (:class:`CellRefused`) naming the place and the IK
residual, as is a scene or ``objects`` section that contradicts the cell (:mod:`layout`).
"""
from __future__ import annotations

import sys
from pathlib import Path

from bt_exec.compilers.scene import Scene
from bt_exec.compilers.symbolic import World
from bt_exec.errors import ConfigError, Conflict
from bt_exec.motion.backend import MoveItBackend
from bt_exec.motion.cell import read_cell_poses
from bt_exec.motion.physics.cell import MujocoMotion
from bt_exec.motion.physics.errors import CellRefused
from bt_exec.motion.physics.ik import TcpIk
from bt_exec.motion.physics.layout import cell_layout, read_objects
from bt_exec.motion.physics.model import CAP, JOINTS, TOOL
from bt_exec.motion.policy import MotionLimits, MotionPolicy
from bt_exec.motion.skills import WORK, GrantMotionSkills, Pose

POSES_FILE = "grant_cell_poses.yaml"
# The elbow-up posture IK starts from at home: the arm leaning forward in its plane, the tool down.
_NOMINAL = (0.0, 0.45, 0.0, -1.45, 0.0, 1.2, 0.0)


def default_poses_file() -> Path:
    """config/grant_cell_poses.yaml of this checkout, or of the installed package's share folder."""
    here = Path(__file__).resolve()
    for candidate in (here.parents[3] / "config" / POSES_FILE, Path(sys.prefix) / "share" / "bt_exec" / "config" /
                      POSES_FILE):
        if candidate.is_file():
            return candidate
    raise ConfigError(f"the default cell poses file {POSES_FILE} is not installed: give poses=PATH")


def default_scene(poses: dict[str, Pose], catalog) -> Scene:
    """The cell as it is left between runs: the vacuum tool in its socket, the cap in its storage."""
    targets = sorted(name for name in poses if catalog.target_type(name) is not None)
    return Scene.from_dict({"scene_revision": 1, "objects": ["cap", "vacuum"], "targets": targets,
                            "state": {"vacuum": catalog.socket_of("vacuum"), "cap": catalog.storage.get("cap")},
                            "holding": None})


class PhysicsCell(MoveItBackend):
    """The Backend of the simulated Grant cell; see the module docstring.

    ``poses``: the named poses file (None: config/grant_cell_poses.yaml), which may add ``objects``;
    ``scene``: the scene (a Scene or its dict; None: :func:`default_scene`); ``speed``: simulated time per
    real time (1.0: real time) or ``"max"``; ``limits``: the motion policy's (default :class:`MotionLimits`).
    ConfigError (CellRefused, PhysicsUnavailable) when the cell cannot start as asked.
    """

    #: The joints' names, in the order ``current_joints`` and ``joint_speeds`` give them (A1 .. A7).
    joint_names = JOINTS

    def __init__(self, poses: str | Path | None = None, scene: Scene | dict | None = None,
                 speed: float | str = 1.0, *, skill_catalog=None, limits: MotionLimits | None = None):
        from bt_exec.compilers.dialects import skill_catalog_of

        if not (speed == "max" or (isinstance(speed, (int, float)) and not isinstance(speed, bool) and speed > 0)):
            raise ConfigError(f"physics speed must be a number > 0 (times real time) or 'max', got {speed!r}")
        catalog = skill_catalog_of(skill_catalog)
        path = Path(poses) if poses is not None else default_poses_file()
        named = read_cell_poses(path)
        objects = read_objects(path)
        if scene is None:
            scene = default_scene(named, catalog)
        elif isinstance(scene, dict):
            scene = Scene.from_dict(scene)
        self.scene = scene
        self.poses_file = path
        layout, tool_on_flange, cap_on_cup = cell_layout(named, scene, catalog, objects, path)
        home = _reach_checked(named, path)
        self.motion = MujocoMotion(layout, home, speed, tool_on_flange=tool_on_flange, cap_on_cup=cap_on_cup)
        skills = GrantMotionSkills(self.motion, MotionPolicy(limits), named)
        super().__init__(skills, World.from_scene(catalog, scene), label="physics")

    # --- for tests and tools (stable) ------------------------------------------------------------------------

    def tool_position(self) -> tuple[float, float, float]:
        """The TCP (the vacuum cup's tip, tool coupled or not) in the world frame, m."""
        return self.motion.tool_position()

    def joint_speeds(self) -> tuple[float, ...]:
        """The seven joint speeds, rad/s."""
        return self.motion.joint_speeds()

    def tool_speed(self) -> float:
        """How fast the TCP moves, m/s."""
        return self.motion.tool_speed()

    def current_joints(self) -> tuple[float, ...]:
        """The seven joint angles, rad."""
        return self.motion.current_joints()

    def sim_time(self) -> float:
        """Simulated seconds since the cell started (it advances only while the arm moves)."""
        return self.motion.sim_time()

    def link_positions(self) -> list[tuple[str, tuple[float, float, float]]]:
        """(name, (x, y, z)) of each link's origin (link_0 .. link_7), then the flange and the TCP: for drawing."""
        return self.motion.link_positions()

    def target(self) -> tuple[float, float, float] | None:
        """The position the current (or last) motion goes to, or None before the first."""
        return self.motion.target()

    def render(self, width: int, height: int) -> bytes | None:
        """A PNG of the cell (MuJoCo offscreen rendering), or None where no GL context can be made."""
        return self.motion.render(width, height)

    # --- a new scene and the end ---------------------------------------------------------------------------------

    def check_scene(self, scene: Scene | dict) -> Scene:
        """``scene`` (a Scene or its dict) as a Scene, once found one this cell can be put in; CellRefused naming
        what contradicts the cell (a place the poses file does not name, a part held with no tool to hold it)."""
        if isinstance(scene, dict):
            scene = Scene.from_dict(scene)
        cell_layout(self.skills.poses, scene, self.world.catalog, {}, self.poses_file)
        return scene

    def set_scene(self, scene: Scene | dict) -> None:
        """Move the simulated parts to where ``scene`` says and work on it from now on, the arm staying where it
        is. Only parts whose place the scene changes move (from where this cell's world has them): a part the
        physics or the poses file's ``objects`` put off its named place stays there while the scene keeps its
        place. Conflict while a skill moves the arm; CellRefused naming what, the cell unchanged, for a scene it
        cannot be put in (:meth:`check_scene`, or a part put where something else is)."""
        scene = self.check_scene(scene)
        layout, tool_on_flange, cap_on_cup = cell_layout(self.skills.poses, scene, self.world.catalog, {},
                                                         self.poses_file)
        world = World.from_scene(self.world.catalog, scene)
        wanted = {TOOL: None if tool_on_flange else layout.parts[TOOL], CAP: None if cap_on_cup else layout.parts[CAP]}
        with self._lock:
            busy = [run_id for run_id, run in self._runs.items() if run.result is None and run.thread.is_alive()]
            if busy or any(thread.is_alive() for thread in self._draining):
                raise Conflict(f"set_scene: the arm is busy with {busy[0] if busy else 'a cancelled call'}; "
                               "the parts move once it is at rest")
            moves = {part: where for part, where in wanted.items()
                     if world.locations.get(part) != self.world.locations.get(part)}
            self.motion.place_parts(moves)
            self.scene, self.world = scene, world

    def close(self, wait_s: float = 1.0) -> None:
        """Stop the arm, wait up to ``wait_s`` for the skill in progress to end, and free the offscreen renderer
        (in its own thread)."""
        self.motion.stop()
        self.wait_idle(wait_s)
        self.motion.close()


def _reach_checked(poses: dict[str, Pose], path: Path) -> tuple[float, ...]:
    """The home joints (at ``work``), once every named pose and its approach pose was found within reach."""
    if WORK not in poses:
        raise CellRefused(f"cell poses file {path}: the arm's home, {WORK!r}, is not named")
    ik = TcpIk()
    home = ik.solve(poses[WORK].position, poses[WORK].orientation, _NOMINAL)
    if not home.reached:
        raise CellRefused(f"cell poses file {path}: {WORK} at {list(poses[WORK].position)} is out of the arm's "
                          f"reach ({home.describe()})")
    for name, pose in sorted(poses.items()):
        for what, position in (("", pose.position), (" (its approach pose)", pose.above())):
            solution = ik.solve(position, pose.orientation, home.joints)
            if not solution.reached:
                raise CellRefused(f"cell poses file {path}: {name}{what} at "
                                  f"[{', '.join(f'{v:.3f}' for v in position)}] is out of the arm's reach "
                                  f"({solution.describe()})")
    return home.joints
