"""IR -> py_trees: one behaviour per op; stop guards are placed later, where stop points are armed."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import py_trees

from bt_exec.behaviours import CapabilityAction, OpSequence, SkillAction, StepRouter, WaitAllParallel

from .ir import Plan
from .skill_catalog import SkillCatalog


@dataclass(slots=True)
class CompiledPlan:
    """The py_trees tree of a plan: ``root`` is the root op's behaviour (a step graph: its router);
    ``ops`` maps op id -> the op's behaviour."""

    plan: Plan
    root: py_trees.behaviour.Behaviour
    ops: dict[str, py_trees.behaviour.Behaviour]


def compile_tree(plan: Plan) -> CompiledPlan:
    """A tree-shaped plan (sequence, parallel, do) as OpSequence, WaitAllParallel and CapabilityAction."""
    ops: dict[str, py_trees.behaviour.Behaviour] = {}
    # Without recursion: reversed pre-order puts every child before its parent.
    for op in reversed(plan.ops.values()):
        if op.kind == "do":
            ops[op.op_id] = CapabilityAction(op.op_id, op.description, op.cap, op.args, op.provider, op.call_id)
            continue
        body = OpSequence(op.op_id, op.description) if op.kind == "sequence" else WaitAllParallel(op.op_id,
                                                                                                    op.description)
        children = [ops[child] for child in op.children]
        for child in children:
            child.parent = body
        body.children = children  # add_children checks each child's parent: a cost per op for no news
        ops[op.op_id] = body
    return CompiledPlan(plan, ops[plan.root], ops)


def compile_graph(plan: Plan, catalog: SkillCatalog, *, terminals: frozenset, success_terminal: str,
                  stop_terminal: str, unconfirmed_effects: Callable[[dict, object], list[str]]) -> CompiledPlan:
    """A step graph as a StepRouter over one SkillAction per step."""
    graph = plan.steps
    steps, skills = {}, {}
    for step_id, op in plan.ops.items():
        skill = catalog.skills[catalog.resolve(op.cap)]
        skills[step_id] = skill
        steps[step_id] = SkillAction(step_id, op.description, skill.name, op.args,
                                     skill.outcomes, catalog.failure_outcomes)
    router = StepRouter(f"step graph from {graph.entry} ({len(steps)} steps)", steps, graph.entry,
                        graph.transitions, skills, {step_id: op.args for step_id, op in plan.ops.items()},
                        terminals=terminals, success_terminal=success_terminal, stop_terminal=stop_terminal,
                        unconfirmed_effects=unconfirmed_effects)
    return CompiledPlan(plan, router, steps)

