"""The Grant skills as arm motions: phases inside a skill, the policy gate, one catalog event per call.

Pure Python. The arm is reached only through the :class:`Motion` seam
(``bt_exec.ros.moveit_seam.MoveItMotion`` on a robot, ``bt_exec.motion.physics``'s ``MujocoMotion`` in the
simulated cell, a small fake in the unit tests). Every planned
trajectory passes :meth:`MotionPolicy.check` before it is executed; a trajectory that fails it is never
executed, and the skill ends ``failed`` with the index of the first failing point.

Phases inside one skill, as the Grant cell runs them: approach above the target at its safe height,
axial lowering, the action (``Motion.act``), axial lift back to the saved approach height. A small
:class:`SkillContext` remembers which target the arm is above and whether it is in contact there, so
explicit ``approach``/``lower``/``lift`` steps are not repeated by the skill that follows them, and any
horizontal move or wrist turn (another target, ``work``) is preceded by an axial lift out of contact.
"""
from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from bt_exec.compilers.symbolic import World
from bt_exec.motion.policy import MotionPolicy, TrajectoryPoint

TOOL_DOWN = (1.0, 0.0, 0.0, 0.0)  # (x, y, z, w): the tool's z axis points straight down
WORK = "work"

# Phase names reported in SkillOutcome.phases.
APPROACH, LOWER, ACT, LIFT, TO_WORK, ALIGN = "approach", "lower", "act", "lift", "work", "align"


@dataclass(frozen=True)
class Pose:
    """Where the tool tip works at a named place (world frame), and the safe height above it."""

    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = TOOL_DOWN
    approach_height: float = 0.15  # m above ``position``: the safe approach height

    def above(self) -> tuple[float, float, float]:
        x, y, z = self.position
        return (x, y, z + self.approach_height)


@dataclass(frozen=True)
class Goal:
    """One motion: the TCP to ``position``/``orientation``; ``axial`` moves go straight along the tool axis."""

    name: str           # the place (target or object) the goal belongs to
    phase: str          # approach, lower, lift, work, align
    position: tuple[float, float, float]
    orientation: tuple[float, float, float, float] = TOOL_DOWN
    axial: bool = False


@dataclass(frozen=True)
class PathConstraints:
    """Path constraints given to the planner (the policy re-checks every point anyway)."""

    j7_center_rad: float
    j7_tolerance_rad: float
    max_tilt_deg: float


class MotionError(Exception):
    """A motion the seam could not do; ``event`` is the catalog event it maps to."""

    event = "failed"


class MotionCollision(MotionError):
    """The planner or controller reported a collision."""

    event = "collision"


class Motion(Protocol):
    """The seam to the arm. ``plan`` and ``execute`` may raise :class:`MotionError` (or MotionCollision)."""

    def current_joints(self) -> tuple[float, ...]: ...

    def joint_state_age_s(self) -> float: ...

    def scene_age_s(self) -> float: ...

    def plan(self, goal: Goal, constraints: PathConstraints, attached: str | None) -> list[TrajectoryPoint] | None: ...

    def execute(self, points: Sequence[TrajectoryPoint]) -> bool: ...

    def act(self, name: str) -> bool: ...

    def stop(self) -> None: ...


@dataclass
class SkillOutcome:
    event: str
    detail: str = ""
    failing_point: int | None = None
    phases: list[str] = field(default_factory=list)


@dataclass
class SkillContext:
    """What the skills remember between calls: the place the arm is above, contact, the saved approach height."""

    above: str | None = None          # the target/object the TCP was last approached above (None: unknown)
    approach_goal: Goal | None = None  # the saved approach pose (lift returns to it)
    contact: bool = False             # lowered at ``above`` (in or near contact)


class _Abort(Exception):
    def __init__(self, outcome: SkillOutcome):
        super().__init__(outcome.detail)
        self.outcome = outcome


# Gripper / vacuum / coupling commands sent through Motion.act.
ACT_GRAB = {"tool": "attach_tool", "part": "suction_on"}
ACT_RELEASE = {"tool": "detach_tool", "part": "suction_off"}


class GrantMotionSkills:
    """Runs one Grant skill call on the arm; see the module docstring."""

    def __init__(self, motion: Motion, policy: MotionPolicy, poses: dict[str, Pose]):
        self.motion = motion
        self.policy = policy
        self.poses = dict(poses)
        self.context = SkillContext()
        limits = policy.limits
        self.constraints = PathConstraints(limits.j7_work_rad, limits.j7_half_range_rad, limits.max_tilt_deg)
        self._stopped = threading.Event()
        self._phases: list[str] = []
        self._holding: str | None = None

    # --- entry points ------------------------------------------------------------------------------

    def run(self, skill: str, params: dict, world: World) -> SkillOutcome:
        """Run ``skill`` (a catalog name or alias) with ``params``; the world is read, never changed here."""
        self._stopped.clear()
        self._phases = []
        patron = world.in_patron()
        self._holding = world.holding or (patron[0] if patron else None)  # planned with its geometry attached
        name = world.catalog.resolve(skill) or skill
        handler = getattr(self, f"_{name}", None)
        if handler is None or name.startswith("_"):
            return SkillOutcome("failed", f"skill {skill!r} has no motion implementation")
        try:
            outcome = handler(dict(params), world)
        except _Abort as abort:
            outcome = abort.outcome
        except MotionError as exc:
            outcome = SkillOutcome(exc.event, f"{name}: {exc}")
        outcome.phases = list(self._phases)
        return outcome

    def stop(self) -> None:
        """Stop the arm now; the running skill ends before its next phase."""
        self._stopped.set()
        self.motion.stop()
        if self.context.above is not None:
            # unknown where it stopped: the next move lifts axially first, and then approaches (and lowers) again
            # rather than take the arm for above or at the place
            self.context.contact, self.context.above = True, None

    # --- skills ------------------------------------------------------------------------------------

    def _detect(self, params: dict, world: World) -> SkillOutcome:
        self._to_work()
        obj = params.get("object")
        where = world.locations.get(obj)
        if obj is None or where in (None, "handed_over", "unknown"):
            return SkillOutcome("not_found", f"detect: {obj!r} is not seen in the cell")
        return SkillOutcome("success", f"detect: {obj} at {where}")

    def _grab(self, params: dict, world: World) -> SkillOutcome:
        obj = params["object"]
        place = self._place_of(obj, world)
        self._down_at(place)
        kind = world.catalog.object_type(obj)
        grasped = self._act(ACT_GRAB.get(kind, "suction_on"))
        self._lift(place)
        if not grasped:
            return SkillOutcome("grasp_failed", f"grab: {obj} not grasped at {place}")
        return SkillOutcome("success", f"grab: {obj} taken at {place}")

    def _transfer(self, params: dict, world: World) -> SkillOutcome:
        self._approach(params["target"], world)
        return SkillOutcome("success", f"transfer: {params['object']} above {params['target']}")

    def _move_to_storage(self, params: dict, world: World) -> SkillOutcome:
        obj = params["object"]
        storage = world.catalog.storage.get(obj)
        if storage is None:
            return SkillOutcome("failed", f"move_to_storage: {obj} has no storage")
        self._approach(storage, world)
        return SkillOutcome("success", f"move_to_storage: {obj} above {storage}")

    def _release(self, params: dict, world: World) -> SkillOutcome:
        obj = params["object"]
        kind = world.catalog.object_type(obj)
        target = params.get("target")
        if kind == "tool":
            socket = world.catalog.socket_of(obj)
            if target is None or target != socket:
                return SkillOutcome("failed", f"release: {obj} is only released into its socket {socket!r} "
                                              f"(got {target!r}); it stays in the patron")
        target = target or self.context.above
        if target is None:
            return SkillOutcome("failed", f"release: no target for {obj}")
        return self._put(obj, target, kind, world, "release")

    def _dock_tool(self, params: dict, world: World) -> SkillOutcome:
        obj, target = params["object"], params["target"]
        socket = world.catalog.socket_of(obj)
        if target != socket:
            return SkillOutcome("failed", f"dock_tool: {obj} docks only in {socket!r}, not {target!r}")
        return self._put(obj, target, "tool", world, "dock_tool")

    def _approach(self, params_or_name, world: World) -> SkillOutcome:
        name = params_or_name if isinstance(params_or_name, str) else self._named(params_or_name, world)
        self._go_above(name)
        return SkillOutcome("success", f"approach: above {name}")

    def _lower(self, params: dict, world: World) -> SkillOutcome:
        name = self._named(params, world)
        self._down_at(name)
        return SkillOutcome("success", f"lower: at {name}")

    def _lift(self, params_or_name, world: World | None = None) -> SkillOutcome:
        name = params_or_name if isinstance(params_or_name, str) else self._named(params_or_name, world)
        if self.context.contact and self.context.above in (name, None):  # None: stopped somewhere near a place
            self._retreat()
        return SkillOutcome("success", f"lift: above {name}")

    def _align(self, params: dict, world: World) -> SkillOutcome:
        target = params["target"]
        self._go_above(target)
        pose = self._pose(target)
        self._move(Goal(target, ALIGN, pose.above(), pose.orientation), ALIGN)
        return SkillOutcome("success", f"align: {params['object']} over {target}")

    def _dispense(self, params: dict, world: World) -> SkillOutcome:
        target = params["target"]
        self._down_at(target)
        done = self._act("dispense")
        self._lift(target)
        return SkillOutcome("success" if done else "failed", f"dispense at {target}" + ("" if done else ": failed"))

    def _handoff_screw(self, params: dict, world: World) -> SkillOutcome:
        screw, hole = params["object"], params["target"]
        self._go_above(hole)
        done = self._act("handoff")
        return SkillOutcome("success" if done else "failed", f"handoff_screw: {screw} at {hole}"
                            + ("" if done else ": not taken"))

    def _inspect_state(self, params: dict, world: World) -> SkillOutcome:
        """No motion: what the world holds (empty, holding, placed, unknown)."""
        where = world.locations.get(params.get("object"))
        if where == "unknown":
            return SkillOutcome("unknown", "inspect_state: unknown")
        if where in ("patron", "hand"):
            return SkillOutcome("holding", "inspect_state: holding")
        return SkillOutcome("placed" if where else "empty", f"inspect_state: {where or 'empty'}")

    # --- phases ------------------------------------------------------------------------------------

    def _put(self, obj: str, target: str, kind: str | None, world: World, skill: str) -> SkillOutcome:
        self._down_at(target)
        released = self._act(ACT_RELEASE.get(kind, "suction_off"))
        if not released:
            return SkillOutcome("failed", f"{skill}: {obj} not released at {target}")
        self._lift(target)  # released: lift axially before any horizontal move or wrist turn
        return SkillOutcome("success", f"{skill}: {obj} at {target}")

    def _go_above(self, name: str) -> None:
        """Approach above ``name`` unless already there; out of contact first."""
        if self.context.above == name:
            return
        self._retreat()
        pose = self._pose(name)
        goal = Goal(name, APPROACH, pose.above(), pose.orientation)
        self._move(goal, APPROACH)
        self.context.above, self.context.approach_goal, self.context.contact = name, goal, False

    def _down_at(self, name: str) -> None:
        """Approach (unless done) and lower axially (unless done) at ``name``."""
        self._go_above(name)
        if not self.context.contact:
            pose = self._pose(name)
            self._move(Goal(name, LOWER, pose.position, pose.orientation, axial=True), LOWER)
            self.context.contact = True

    def _retreat(self) -> None:
        """An axial lift to the saved approach height when in contact."""
        if self.context.contact and self.context.approach_goal is not None:
            self._move(self.context.approach_goal, LIFT, axial=True)
            self.context.contact = False

    def _to_work(self) -> None:
        if self.context.above == WORK and not self.context.contact:
            return
        self._retreat()
        pose = self._pose(WORK)
        goal = Goal(WORK, TO_WORK, pose.position, pose.orientation)
        self._move(goal, TO_WORK)
        self.context.above, self.context.approach_goal, self.context.contact = WORK, goal, False

    def _act(self, name: str) -> bool:
        self._check_stopped()
        self._phases.append(ACT)
        return bool(self.motion.act(name))

    def _move(self, goal: Goal, phase: str, axial: bool | None = None) -> None:
        """Plan, check against the policy, execute; any failure ends the skill (never executes a bad plan)."""
        self._check_stopped()
        if axial is not None and goal.axial != axial:
            goal = Goal(goal.name, phase, goal.position, goal.orientation, axial)
        elif goal.phase != phase:
            goal = Goal(goal.name, phase, goal.position, goal.orientation, goal.axial)
        points = self.motion.plan(goal, self.constraints, self._attached())
        if not points:
            raise _Abort(SkillOutcome("failed", f"{phase} to {goal.name}: no plan found"))
        check = self.policy.check(points, self.motion.joint_state_age_s(), self.motion.scene_age_s())
        if not check.ok:
            where = f" at point {check.index}" if check.index is not None else ""
            raise _Abort(SkillOutcome("failed", f"{phase} to {goal.name}: trajectory refused{where} "
                                                f"({check.violation}): {check.reason}", check.index))
        self._check_stopped()
        if not self.motion.execute(points):
            raise _Abort(SkillOutcome("failed", f"{phase} to {goal.name}: execution failed"))
        self._phases.append(phase)

    def _check_stopped(self) -> None:
        if self._stopped.is_set():
            raise _Abort(SkillOutcome("failed", "stopped"))

    # --- places ------------------------------------------------------------------------------------

    def _attached(self) -> str | None:
        return self._holding

    def _named(self, params: dict, world: World) -> str:
        if params.get("target"):
            return params["target"]
        return self._place_of(params["object"], world)

    def _place_of(self, obj: str, world: World) -> str:
        """The place an object is worked at: its own pose if known, else the pose of where it lies."""
        if obj in self.poses:
            return obj
        where = world.locations.get(obj)
        if where in self.poses:
            return where
        raise _Abort(SkillOutcome("failed", f"no pose known for {obj!r} (at {where!r})"))

    def _pose(self, name: str) -> Pose:
        pose = self.poses.get(name)
        if pose is None:
            raise _Abort(SkillOutcome("failed", f"no pose known for {name!r}"))
        return pose
