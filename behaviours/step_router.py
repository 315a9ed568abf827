"""The router that runs a step graph: one step at a time, exactly one edge per outcome."""
from __future__ import annotations

from typing import Callable

import py_trees
from py_trees.common import Status

from bt_exec.compat.py_trees import AcyclicLinks

from .op_behaviour import RUNNING


class StepRouter(AcyclicLinks, py_trees.composites.Composite):
    """Runs a step graph. Its children are every step (each a SkillAction, or the StopGuard
    armed above it), in plan order, so any tree display shows them all; only the current one
    (``current_child``) is ticked.

    What the graph's dialect decides reaches it at compile time: ``terminals`` (the
    names that end a run, of which ``success_terminal`` is the one that succeeds and
    ``stop_terminal`` the one a stop takes) and ``unconfirmed_effects(changed, output)``
    (which effects a step's reported output does not show). The run's symbolic world
    arrives in ``setup``.

    Statuses:
        RUNNING: a step runs, or a stop point fired and the plan's teardown is due.
        SUCCESS: the graph reached the success terminal and every executed step's result
            confirmed its effects.
        FAILURE: it reached another terminal, or was stopped: an outcome the skill does not
            have, an outcome with no transition, the executed-step limit, effects a result did
            not confirm. ``terminal`` and ``reason`` say which.
        INVALID (from RUNNING): the plan was torn down; the running step reports ``canceled``.
    """

    def __init__(self, name: str, steps: dict, entry: str, transitions: dict, skills: dict, params: dict, *,
                 terminals: frozenset, success_terminal: str, stop_terminal: str,
                 unconfirmed_effects: Callable[[dict, object], list[str]]):
        super().__init__(name, list(steps.values()))
        self.steps = steps                # step id -> SkillAction
        self.entry = entry
        self.transitions = transitions    # step id -> {event: next}
        self.skills = skills              # step id -> catalog Skill
        self.params = params              # step id -> params
        self.terminals = terminals
        self.success_terminal = success_terminal
        self.stop_terminal = stop_terminal
        self.unconfirmed_effects = unconfirmed_effects
        self._index_of = {step_id: index for index, step_id in enumerate(steps)}
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
        if self.status != RUNNING:
            for child in self.children:  # start afresh: reset steps an earlier run left finished
                if child.status != Status.INVALID:
                    child.stop(Status.INVALID)
            self.initialise()
        while True:
            node = self.children[self._index_of[self.current]]
            self.current_child = node
            if node.status != RUNNING:
                if self.executed >= self.max_steps:
                    yield from self._end(self.stop_terminal, f"executed-step limit of {self.max_steps} reached "
                                                             f"before step {self.current!r}")
                    return
                self.executed += 1
            yield from node.tick()
            result = self.steps[self.current].result
            if node.status == RUNNING:
                if getattr(node, "fired", None) == "on_complete" and self.held is None:
                    # The plan stops here, but the step did its work: what it did stays in the state.
                    self.held = result
                    self._route(self.current, result, stopped=True)
                self.status = RUNNING
                yield self
                return
            following, reason = self._route(self.current, result)
            if following in self.terminals:
                yield from self._end(following, reason)
                return
            self.current = following

    def _route(self, step_id: str, result: dict, stopped: bool = False) -> tuple[str, str | None]:
        """The one edge this outcome takes, after moving the symbolic world on by it (``stopped``: none,
        a stop point ends the run after this step)."""
        skill, params, event = self.skills[step_id], self.params[step_id], result["event"]
        stop = self.stop_terminal
        if event not in skill.outcomes:
            following, reason = stop, f"step {step_id!r} ({skill.name}) reported {event!r}, an outcome it does not have"
        else:
            changed = self.world.apply(skill, params, event)
            following = self.transitions.get(step_id, {}).get(event)
            reason = (f"step {step_id!r} ({skill.name}) ended {event!r}" if following else
                      f"outcome {event!r} of step {step_id!r} has no transition")
            following = stop if stopped else following or stop
            unconfirmed = self.unconfirmed_effects(changed, result.get("output")) if event == "success" else []
            if unconfirmed:
                following = stop
                reason = (f"step {step_id!r} ({skill.name}): its result did not confirm its effects "
                          f"({'; '.join(unconfirmed)})")
        self.hooks.step_taken(step_id, skill.name, event, following, self.world.snapshot())
        return following, reason

    def _end(self, terminal: str, reason: str | None):
        self.terminal, self.reason = terminal, reason
        self.hooks.graph_ended(terminal, reason)
        self.stop(Status.SUCCESS if terminal == self.success_terminal else Status.FAILURE)
        yield self
