"""IR -> py_trees: every op becomes its behaviour wrapped in a StopGuard."""
from __future__ import annotations

from dataclasses import dataclass

import py_trees

from bt_exec.behaviours import CapabilityAction, StopGuard, WaitAllParallel

from .ir import Plan

NAME_DESCRIPTION_CHARS = 60


@dataclass
class CompiledPlan:
    """The py_trees tree of a plan: ``root`` is the root op's guard; ``guards`` maps op id -> guard."""

    plan: Plan
    root: StopGuard
    guards: dict[str, StopGuard]

    @property
    def op_ids(self) -> list[str]:
        return list(self.plan.ops)


def compile_plan(plan: Plan) -> CompiledPlan:
    """Build the behaviour tree of ``plan`` without recursion (children before parents)."""
    guards: dict[str, StopGuard] = {}
    for op in reversed(plan.ops.values()):  # reversed pre-order: every child before its parent
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


def _short(text: str) -> str:
    # Names reach terminals: no control characters, whitespace folded.
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= NAME_DESCRIPTION_CHARS else text[:NAME_DESCRIPTION_CHARS - 1] + "…"
