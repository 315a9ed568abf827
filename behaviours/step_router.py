"""The router that runs a step graph: one step at a time, exactly one edge per outcome."""
from __future__ import annotations

import py_trees
from py_trees.common import Status

from bt_exec.compilers.skill_catalog import TERMINALS

from .restart import restart


class StepRouter(py_trees.composites.Composite):
    """Runs a step graph. Its children are every step (each a StopGuard over a SkillAction), in plan order,
    so any tree display shows them all; only the current one is ticked.

    Statuses:
        RUNNING: a step runs, or a stop point fired and the plan's teardown is due.
        SUCCESS: the graph reached ``completed`` and every executed step's result confirmed its effects.
        FAILURE: it reached another terminal (replan_required, operator_required, stop), or was stopped:
            an outcome the skill does not have, an outcome with no transition, the executed-step
            limit, effects a result did not confirm. ``terminal`` and ``reason`` say which.
    """

    def __init__(self, name: str, steps: dict, entry: str, transitions: dict, skills: dict, params: dict):
        super().__init__(name, list(steps.values()))
        self.steps = steps                # step id -> StopGuard
        self.entry = entry
        self.transitions = transitions    # step id -> {event: next}
        self.skills = skills              # step id -> catalog Skill
        self.params = params              # step id -> params
        self.hooks = None
        self.world = None
        self.max_steps = 1000
        self.current = entry
        self.executed = 0
        self.terminal: str | None = None
        self.reason: str | None = None
        self.held: dict | None = None  # the result of a step a stop point on_complete holds back

    def setup(self, **kwargs) -> None:
        """Takes ``plan`` (PlanHooks), ``world`` (the run's symbolic World) and ``max_steps``."""
        self.hooks = kwargs["plan"]
        self.world = kwargs["world"]
        self.max_steps = kwargs.get("max_steps", self.max_steps)

    def initialise(self) -> None:
        self.current = self.entry
        self.executed = 0
        self.terminal = self.reason = self.held = None

    def tick(self):
        if self.status != Status.RUNNING:
            restart(self)
        while True:
            guard = self.steps[self.current]
            if guard.status != Status.RUNNING:
                if self.executed >= self.max_steps:
                    yield from self._end("stop", f"executed-step limit of {self.max_steps} reached before step "
                                                 f"{self.current!r}")
                    return
                self.executed += 1
            yield from guard.tick()
            if guard.status == Status.RUNNING:
                if guard.fired == "on_complete" and self.held is None:
                    # The plan stops here, but the step did its work: what it did stays in the state.
                    self.held = guard.decorated.result
                    self._route(self.current, self.held, stopped=True)
                self.status = Status.RUNNING
                yield self
                return
            following, reason = self._route(self.current, guard.decorated.result)
            if following in TERMINALS:
                yield from self._end(following, reason)
                return
            self.current = following

    def _route(self, step_id: str, result: dict, stopped: bool = False) -> tuple[str, str | None]:
        """The one edge this outcome takes, after moving the symbolic world on by it (``stopped``: none,
        a stop point ends the run after this step)."""
        skill, params, event = self.skills[step_id], self.params[step_id], result["event"]
        if event not in skill.outcomes:
            following, reason = "stop", f"step {step_id!r} ({skill.name}) reported {event!r}, an outcome it does not have"
        else:
            changed = self.world.apply(skill, params, event)
            following = self.transitions.get(step_id, {}).get(event)
            reason = (f"step {step_id!r} ({skill.name}) ended {event!r}" if following else
                      f"outcome {event!r} of step {step_id!r} has no transition")
            following = "stop" if stopped else following or "stop"
            unconfirmed = _unconfirmed(changed, result.get("output")) if event == "success" else []
            if unconfirmed:
                following = "stop"
                reason = (f"step {step_id!r} ({skill.name}): its result did not confirm its effects "
                          f"({'; '.join(unconfirmed)})")
        self.hooks.step_taken(step_id, skill.name, event, following, self.world.snapshot())
        return following, reason

    def _end(self, terminal: str, reason: str | None):
        self.terminal, self.reason = terminal, reason
        self.hooks.graph_ended(terminal, reason)
        self.stop(Status.SUCCESS if terminal == "completed" else Status.FAILURE)
        yield self


def _unconfirmed(changed: dict, output: object) -> list[str]:
    """Effects the result's reported state does not show: ``output["state"]["locations"]``."""
    if not changed:
        return []
    state = output.get("state") if isinstance(output, dict) else None
    reported = state.get("locations") if isinstance(state, dict) else None
    if not isinstance(reported, dict):
        return [f"expected {obj} at {where}; the result reported no state" for obj, where in changed.items()]
    return [f"expected {obj} at {where}, reported {reported.get(obj)!r}"
            for obj, where in changed.items() if reported.get(obj) != where]
