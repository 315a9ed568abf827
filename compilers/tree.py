"""IR -> py_trees: every op becomes its behaviour wrapped in a StopGuard."""
from __future__ import annotations

from dataclasses import dataclass

import py_trees

from bt_exec.behaviours import CapabilityAction, SkillAction, StepRouter, StopGuard, WaitAllParallel

from .ir import Plan
from .skill_catalog import SkillCatalog

NAME_DESCRIPTION_CHARS = 60


@dataclass
class CompiledPlan:
    """The py_trees tree of a plan: ``root`` is the root op's guard (a step graph: its router);
    ``guards`` maps op id -> guard."""

    plan: Plan
    root: StopGuard | StepRouter
    guards: dict[str, StopGuard]

    @property
    def op_ids(self) -> list[str]:
        return list(self.plan.ops)


def compile_plan(plan: Plan, catalog: SkillCatalog | None = None) -> CompiledPlan:
    """Build the behaviour tree of ``plan``; step graphs resolve their skills in ``catalog`` (default grant)."""
    if plan.dialect == "qwen3":
        return _compile_graph(plan, catalog or SkillCatalog.named("grant"))
    # Without recursion: reversed pre-order puts every child before its parent.
    guards: dict[str, StopGuard] = {}
    for op in reversed(plan.ops.values()):
        if op.kind == "do":
            body = CapabilityAction(f"{op.op_id} do {op.cap}", op.op_id, op.cap, op.args, op.provider, op.call_id)
        else:
            if op.kind == "sequence":
                body = py_trees.composites.Sequence(f"{op.op_id} sequence", memory=True)
            else:
                body = WaitAllParallel(f"{op.op_id} parallel (wait all)")
            body.add_children([guards[child] for child in op.children])
        guards[op.op_id] = StopGuard(f"[{op.op_id}] {_short(op.description)}", body, op.op_id)
    return CompiledPlan(plan, guards[plan.root], guards)


def _compile_graph(plan: Plan, catalog: SkillCatalog) -> CompiledPlan:
    graph = plan.steps
    guards, skills = {}, {}
    for step_id, op in plan.ops.items():
        skill = catalog.skills[catalog.resolve(op.cap)]
        skills[step_id] = skill
        body = SkillAction(f"{step_id} {op.description}", step_id, skill.name, op.args, skill.outcomes,
                           catalog.failure_outcomes)
        guards[step_id] = StopGuard(f"[{step_id}] {_short(op.description)}", body, step_id)
    router = StepRouter(f"step graph from {graph.entry} ({len(guards)} steps)", guards, graph.entry,
                        graph.transitions, skills, {step_id: op.args for step_id, op in plan.ops.items()})
    return CompiledPlan(plan, router, guards)


def _short(text: str) -> str:
    # Names reach terminals: no control characters, whitespace folded.
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= NAME_DESCRIPTION_CHARS else text[:NAME_DESCRIPTION_CHARS - 1] + "…"
