"""The small symbolic world of step-graph catalogs: where each tool and part is, what the hand holds.

Two views of one vocabulary:

- ``Abstract`` states map each object to the *set* of modes it may be in
  (tool: patron | stowed; part: held | free; screw: present | gone). The
  validator propagates them along every path to a fixed point; a set with
  one mode is a known fact.
- ``World`` is one concrete world (locations by name) that runs forward: the
  executor keeps one per run for its status, and the sim backend simulates the
  robot with another.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .scene import PATRON, Scene
from .skill_catalog import Skill, SkillCatalog

MODES = {"tool": ("patron", "stowed"), "part": ("held", "free"), "screw": ("present", "gone")}
TAKEN = {"tool": "patron", "part": "held", "screw": "present"}
LEFT = {"tool": "stowed", "part": "free", "screw": "present"}
HAND = "hand"                 # a part's location while held
HANDED_OVER = "handed_over"   # a screw given to the human: gone from the scene
UNKNOWN = "unknown"           # ownership uncertain until inspected

State = dict  # object -> frozenset of modes
_NOT_AT_REST = (None, PATRON, HAND, UNKNOWN, HANDED_OVER)  # World locations that are no place an object lies at


@dataclass(frozen=True)
class Failure:
    """A precondition of a step evaluated on a state."""

    predicate: str
    subject: str        # the object it is about
    may_fail: bool      # fails in at least one state the set allows
    must_fail: bool     # fails in every state the set allows
    culprits: tuple = ()  # (object, modes of it that make the precondition fail) for each object that may

    def describe(self) -> str:
        return {
            "hand_empty": "the hand must be empty",
            "patron_free": "the flange (patron) must be free",
            "own_tool_in_patron": f"its tool {self.subject} must be on the flange (patron)",
            "carried": f"{self.subject} must be held (a tool: on the flange)",
            "present": f"{self.subject} must still be in the scene",
        }[self.predicate]


class Abstract:
    """Transfer functions over abstract states for one catalog and the objects a graph names."""

    def __init__(self, catalog: SkillCatalog, kinds: dict[str, str]):
        self.catalog = catalog
        self.kinds = kinds  # object -> tool | part | screw

    def start(self, index: int) -> State:
        """Every object in the ``index``-th of its two modes. Each object's modes move on independently of
        the others', so between them starts 0 and 1 show every object from each start it may have."""
        return {obj: frozenset((MODES[kind][index],)) for obj, kind in self.kinds.items()}

    def from_scene(self, scene: Scene) -> State:
        """The scene's state; an object whose ownership the scene calls unknown may be in any mode."""
        return {obj: frozenset(MODES[kind]) if scene.state.get(obj) == UNKNOWN else
                frozenset((scene_mode(kind, obj, scene),)) for obj, kind in self.kinds.items()}

    def preconditions(self, skill: Skill, params: dict, state: State) -> list[Failure]:
        """The step's preconditions that may fail in ``state``."""
        subject = params.get("object")
        kind = self.kinds.get(subject) if subject else None
        names = skill.pre.get(kind, ()) if kind else ()
        names = list(names) + list(skill.pre.get("*", ()))
        failures = []
        for name in names:
            culprits = self._culprits(name, subject, state)
            if culprits:
                about = self.catalog.tool_of(subject) if name == "own_tool_in_patron" else subject
                must = any(self._modes_in(state, obj) <= bad for obj, bad in culprits.items())
                failures.append(Failure(name, about or "", True, must, tuple(sorted(culprits.items()))))
        return failures

    def after(self, skill: Skill, params: dict, event: str, state: State) -> State:
        """The state after the step ended with ``event``."""
        subject = params.get("object")
        kind = self.kinds.get(subject) if subject else None
        if skill.observes and kind:
            observed = {"holding": {TAKEN[kind]}, "empty": {LEFT[kind]}, "placed": {LEFT[kind]},
                        "unknown": set(MODES[kind])}.get(event)
            return {**state, subject: frozenset(observed)} if observed else state
        if event in skill.uncertain_after and kind:
            return {**state, subject: state[subject] | {TAKEN[kind]}}
        if event != "success":
            return state  # the skill did not do its work; what it touched is as before
        new = dict(state)
        for effect in skill.effects:
            if "take" in effect and kind:
                new[subject] = frozenset((TAKEN[kind],))
            elif "put" in effect and kind:
                new[subject] = frozenset((LEFT[kind],))
            elif "hand_over" in effect and kind:
                new[subject] = frozenset(("gone",))
        return new

    def _culprits(self, name: str, subject: str | None, state: State) -> dict[str, frozenset]:
        """The objects whose modes in ``state`` may make precondition ``name`` fail, each with the modes that do."""
        if name == "hand_empty":
            return self._any_in(state, "part", "held")
        if name == "patron_free":
            return self._any_in(state, "tool", "patron")
        if name == "own_tool_in_patron":
            return self._not_in(state, self.catalog.tool_of(subject), "patron")
        if name == "carried":
            return self._not_in(state, subject, TAKEN[self.kinds[subject]])
        if name == "present":
            return self._not_in(state, subject, "present")
        raise ValueError(f"unknown predicate {name!r}")

    def _any_in(self, state: State, kind: str, mode: str) -> dict[str, frozenset]:
        return {obj: frozenset((mode,)) for obj, k in self.kinds.items() if k == kind and mode in state[obj]}

    def _not_in(self, state: State, obj: str, mode: str) -> dict[str, frozenset]:
        modes = self._modes_in(state, obj)
        return {obj: frozenset(MODES[self._kind(obj)]) - {mode}} if modes != {mode} else {}

    def _modes_in(self, state: State, obj: str) -> frozenset:
        return state.get(obj, frozenset(MODES[self._kind(obj)]))  # an object not followed: anything

    def _kind(self, obj: str) -> str:
        return self.kinds.get(obj) or self.catalog.object_type(obj)


def scene_mode(kind: str, obj: str, scene: Scene) -> str:
    location = scene.state.get(obj)
    if kind == "tool":
        return "patron" if location == PATRON else "stowed"
    if kind == "part":
        return "held" if scene.holding == obj or location == HAND else "free"
    return "gone" if location == HANDED_OVER else "present"


@dataclass
class World:
    """One concrete world, run forward step by step."""

    catalog: SkillCatalog
    locations: dict = field(default_factory=dict)   # object -> target | patron | hand | handed_over | unknown
    robot_at: str | None = None
    last_known: dict = field(default_factory=dict)  # object -> the last place it lay at (for inspections)

    @classmethod
    def from_scene(cls, catalog: SkillCatalog, scene: Scene) -> "World":
        locations = dict(scene.state)
        if scene.holding:
            locations[scene.holding] = HAND
        return cls(catalog, locations)

    @property
    def holding(self) -> str | None:
        return next((obj for obj, where in self.locations.items() if where == HAND), None)

    def in_patron(self) -> list[str]:
        return [obj for obj, where in self.locations.items() if where == PATRON]

    def snapshot(self) -> dict:
        """What the run status shows: every known location, the held part, the tool on the flange."""
        return {"locations": dict(sorted(self.locations.items())), "holding": self.holding,
                "patron": self.in_patron(), "robot_at": self.robot_at,
                "uncertain": sorted(obj for obj, where in self.locations.items() if where == UNKNOWN)}

    def scene_after(self, scene: Scene) -> Scene:
        """The scene once this world's changes happened: a new revision when anything moved."""
        locations = {obj: where for obj, where in self.locations.items() if where not in (HAND, HANDED_OVER)}
        gone = {obj for obj, where in self.locations.items() if where == HANDED_OVER}
        if locations == scene.state and self.holding == scene.holding and not gone & scene.objects:
            return scene
        return Scene(scene.revision + 1, scene.objects - gone, scene.targets, locations, self.holding)

    def abstract(self, objects: list[str]) -> tuple[Abstract, State]:
        kinds = {obj: self.catalog.object_type(obj) for obj in objects}
        kinds = {obj: kind for obj, kind in kinds.items() if kind in MODES}
        for obj, where in self.locations.items():
            kind = self.catalog.object_type(obj)
            if kind in MODES and obj not in kinds and where in (PATRON, HAND, UNKNOWN):
                kinds[obj] = kind
        model = Abstract(self.catalog, kinds)
        return model, {obj: self._modes(obj, kind) for obj, kind in kinds.items()}

    def unmet(self, skill: Skill, params: dict) -> list[Failure]:
        """Preconditions of the step that do not hold in this world."""
        model, state = self.abstract([v for k, v in params.items() if k in ("object", "tool")])
        return model.preconditions(skill, params, state)

    def apply(self, skill: Skill, params: dict, event: str) -> dict:
        """Move the world on by a step's outcome; returns {object: new location} for what it changed."""
        subject = params.get("object")
        kind = self.catalog.object_type(subject) if subject else None
        changed: dict[str, str] = {}
        if skill.observes and subject:
            if event == "holding":
                changed[subject] = PATRON if kind == "tool" else HAND
            elif event in ("empty", "placed"):
                where = self.locations.get(subject)
                if where in _NOT_AT_REST:  # where it last lay; else a tool lives in its socket
                    where = self.last_known.get(subject) or (
                        self.catalog.socket_of(subject) if kind == "tool" else None) or "released"
                changed[subject] = where
            elif event == "unknown":
                changed[subject] = UNKNOWN
        elif event in skill.uncertain_after and subject:
            changed[subject] = UNKNOWN
        elif event == "success":
            for effect in skill.effects:
                if "take" in effect and subject:
                    changed[subject] = PATRON if kind == "tool" else HAND
                elif "put" in effect and subject:
                    if kind == "tool":
                        changed[subject] = self.catalog.socket_of(subject) or params.get("target") or "released"
                    else:
                        changed[subject] = params.get("target") or self.robot_at or "released"
                elif "hand_over" in effect and subject:
                    changed[subject] = HANDED_OVER
                elif "robot_at" in effect:
                    self.robot_at = self._place(effect["robot_at"], params)
        for obj, where in changed.items():
            if self.locations.get(obj) not in _NOT_AT_REST:  # it leaves (or stays at) a place it lay at
                self.last_known[obj] = self.locations.get(obj)
            self.locations[obj] = where
        return changed

    def _place(self, which: str, params: dict) -> str | None:
        if which == "object":
            return params.get("object")
        if which == "target":
            return params.get("target")
        if which == "storage":
            return self.catalog.storage.get(params.get("object"))
        return which

    def _modes(self, obj: str, kind: str) -> frozenset:
        where = self.locations.get(obj)
        if where == UNKNOWN:
            return frozenset(MODES[kind])
        if kind == "tool":
            return frozenset(("patron" if where == PATRON else "stowed",))
        if kind == "part":
            return frozenset(("held" if where == HAND else "free",))
        return frozenset(("gone" if where == HANDED_OVER else "present",))


def unconfirmed_effects(changed: dict, output: object) -> list[str]:
    """Effects a step's result does not show: a successful step reports the world it left in
    ``output["state"]["locations"]``, and every object it moved must be where the rules put it."""
    if not changed:
        return []
    state = output.get("state") if isinstance(output, dict) else None
    reported = state.get("locations") if isinstance(state, dict) else None
    if not isinstance(reported, dict):
        return [f"expected {obj} at {where}; the result reported no state" for obj, where in changed.items()]
    return [f"expected {obj} at {where}, reported {reported.get(obj)!r}"
            for obj, where in changed.items() if reported.get(obj) != where]
