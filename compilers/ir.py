"""The intermediate representation every dialect loads into, and that compiles to py_trees."""
from __future__ import annotations

from dataclasses import dataclass, field, replace

OP_KINDS = ("sequence", "parallel", "do", "control")
NO_CHILDREN: tuple[str, ...] = ()  # a leaf's children: one object for every leaf, not a list each
STOP_WHENS = ("on_enter", "on_complete")


@dataclass(slots=True)
class Op:
    """One plan node. ``children`` holds child op ids in execution order (a leaf may hold ``NO_CHILDREN``).

    ``node`` names the BehaviorTree.CPP node a ``control`` op runs as ("Sequence",
    "ReactiveFallback", "Repeat", ...). ``reads`` maps a port to the blackboard key
    it reads when the call (or node) starts; ``writes`` maps an output port to the
    key its value from the call's output is written to on success.
    """

    op_id: str
    kind: str
    description: str
    children: list[str] | tuple[str, ...] = field(default_factory=list)
    cap: str | None = None
    args: dict | None = None
    provider: str | None = None
    call_id: str | None = None
    path: str = ""  # where the node sits in the input, for messages
    node: str | None = None
    reads: dict[str, str] | None = None
    writes: dict[str, str] | None = None


@dataclass(slots=True)
class Plan:
    """A loaded, structurally valid plan.

    ``ops`` is ordered parent before children, children in order (pre-order).
    ``numbered_by_loader`` is true when the input carried no usable op ids (RTDL
    trees): ids are then "1", "2", ... in pre-order and an executor renumbers
    them from its own counter.
    """

    dialect: str
    shape: str
    root: str
    ops: dict[str, Op]
    description: str
    depth: int
    numbered_by_loader: bool
    meta: dict = field(default_factory=dict)
    steps: object = None  # the StepGraph of step-graph dialects (transitions, entry)
    source: object = None  # what a dialect read beyond the ops, for its checks (BT.CPP XML: each node's element)
    blackboard_seeds: dict | None = None  # the entries its run's blackboard starts with (``blackboard.seeded``)

    @property
    def op_count(self) -> int:
        return len(self.ops)

    def renumbered(self, first: int) -> "Plan":
        """This plan with loader-assigned ids moved to start at ``first``."""
        if not self.numbered_by_loader:
            raise ValueError("only loader-numbered plans can be renumbered")
        offset = first - 1
        if offset == 0:
            return self

        def moved(op_id: str) -> str:
            return str(int(op_id) + offset)

        ops = {}
        for op in self.ops.values():
            new_id = moved(op.op_id)
            ops[new_id] = Op(new_id, op.kind, op.description, [moved(c) for c in op.children],
                             op.cap, op.args, op.provider, op.call_id, op.path,
                             op.node, op.reads, op.writes)
        return replace(self, root=moved(self.root), ops=ops)


@dataclass(frozen=True, slots=True)
class ControlRequest:
    """A root meta op (cancel_plan, cancel_all, stop_plan_at): control, never a plan."""

    op: str
    dialect: str
    plan_id: str | None = None
    target_op_id: str | None = None
    when: str | None = None
    wait_ms: int = 5000

    def as_dict(self) -> dict:
        out = {"op": self.op}
        if self.plan_id is not None:
            out["plan_id"] = self.plan_id
        if self.target_op_id is not None:
            out["target_op_id"] = self.target_op_id
        if self.when is not None:
            out["when"] = self.when
        if self.op != "stop_plan_at":
            out["wait_ms"] = self.wait_ms
        return out
