"""The node library: BehaviorTree.CPP 4's built-in nodes (and Nav2's controls and decorators) as py_trees behaviours
with their semantics, named as BehaviorTree.CPP names them, each described by a ``NodeSpec``.

A dialect checks a tree against ``NODE_LIBRARY`` (children counts, ports) and builds each node with its spec's
``build(op_id, description, args, reads, children)``. A catalog's custom control node or decorator runs as
``NODE_LIBRARY[PASS_THROUGH]``. Capability calls (the leaves a catalog declares) are ``CapabilityAction``s.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

from .bt_controls import (Fallback, IfThenElse, Parallel, ParallelAll, PassThrough, PipelineSequence,
                          ReactiveFallback, ReactiveSequence, RecoveryNode, RoundRobin, Sequence, SequenceWithMemory,
                          WhileDoElse, parallel_all_problem, parallel_problem)
from .bt_decorators import (Delay, DistanceController, ForceFailure, ForceSuccess, Inverter, KeepRunningUntilFailure,
                            RateController, Repeat, RetryUntilSuccessful, RunOnce, Timeout)
from .bt_leaves import AlwaysFailure, AlwaysSuccess, Script, ScriptCondition
from .bt_node import EVERY_PERIOD, BtNode
from .bt_ports import PORT_DIRECTIONS, PORT_TYPES, PortSpec, PortValueError, blackboard_key
from .bt_script import ScriptError
from .bt_script import Script as ScriptProgram

PASS_THROUGH = "PassThrough"


@dataclass(frozen=True)
class NodeSpec:
    """One node of the library: its BehaviorTree.CPP ``name``, ``category`` ("control", "decorator", or "leaf":
    a built-in leaf that calls nothing), how many children it takes (``max_children`` None: any number), its
    ``ports``, whether it is ``reactive`` (it runs earlier children again on every tick while a later one runs, so
    its plan is ticked every period while it runs), ``build`` and ``check``."""

    name: str
    category: str
    min_children: int
    max_children: int | None
    ports: dict[str, PortSpec]
    reactive: bool
    build: Callable[..., BtNode]
    check: Callable[[dict, int], str | None] = field(default=lambda args, children: None)


def _check_for(node_class) -> Callable[[dict, int], str | None]:
    """The static check of a node's literal ports (``args``: port -> text) and children count: what would fail
    it at its start, said before it runs; None when nothing would."""

    def check(args: dict, children: int) -> str | None:
        values = {}
        for name, text in args.items():
            spec = node_class.PORTS.get(name)
            if spec is None or not isinstance(text, str) or blackboard_key(text) is not None:
                continue
            try:
                values[name] = spec.parse(text)
            except PortValueError as exc:
                return f"port {name!r}: {exc}"
        return _NODE_CHECKS.get(node_class.NODE, _no_check)(values, children)

    return check


def _no_check(values: dict, children: int) -> None:
    return None


def _script_problem(values: dict, children: int) -> str | None:
    code = values.get("code")
    if not isinstance(code, str):
        return None
    try:
        ScriptProgram(code)
    except ScriptError as exc:
        return f"port 'code': {exc}"
    return None


def _rate_problem(values: dict, children: int) -> str | None:
    hz = values.get("hz")
    return f"port 'hz': must be above 0, got {hz:g}" if hz is not None and hz <= 0 else None


_NODE_CHECKS = {
    "Parallel": lambda values, children: parallel_problem(children, values.get("success_count", -1),
                                                          values.get("failure_count", 1)),
    "ParallelAll": lambda values, children: parallel_all_problem(children, values.get("max_failures", 1)),
    "Script": _script_problem,
    "ScriptCondition": _script_problem,
    "RateController": _rate_problem,
}

_ANY = None
# name -> (class, category, min children, max children, reactive)
_NODES = [
    (Sequence, "control", 1, _ANY, False),
    (SequenceWithMemory, "control", 1, _ANY, False),
    (ReactiveSequence, "control", 1, _ANY, True),
    (Fallback, "control", 1, _ANY, False),
    (ReactiveFallback, "control", 1, _ANY, True),
    (Parallel, "control", 1, _ANY, False),
    (ParallelAll, "control", 1, _ANY, False),
    (IfThenElse, "control", 2, 3, False),
    (WhileDoElse, "control", 2, 3, True),
    (PipelineSequence, "control", 1, _ANY, True),
    (RecoveryNode, "control", 2, 2, False),
    (RoundRobin, "control", 1, _ANY, False),
    (PassThrough, "control", 0, _ANY, False),
    (Inverter, "decorator", 1, 1, False),
    (ForceSuccess, "decorator", 1, 1, False),
    (ForceFailure, "decorator", 1, 1, False),
    (Repeat, "decorator", 1, 1, False),
    (RetryUntilSuccessful, "decorator", 1, 1, False),
    (KeepRunningUntilFailure, "decorator", 1, 1, False),
    (Timeout, "decorator", 1, 1, False),
    (Delay, "decorator", 1, 1, False),
    (RunOnce, "decorator", 1, 1, False),
    (RateController, "decorator", 1, 1, False),
    (DistanceController, "decorator", 1, 1, False),
    (AlwaysSuccess, "leaf", 0, 0, False),
    (AlwaysFailure, "leaf", 0, 0, False),
    (Script, "leaf", 0, 0, False),
    (ScriptCondition, "leaf", 0, 0, False),
]

NODE_LIBRARY: dict[str, NodeSpec] = {
    node_class.NODE: NodeSpec(node_class.NODE, category, least, most, dict(node_class.PORTS), reactive,
                              node_class.build, _check_for(node_class))
    for node_class, category, least, most, reactive in _NODES}

__all__ = ["EVERY_PERIOD", "NODE_LIBRARY", "PASS_THROUGH", "PORT_DIRECTIONS", "PORT_TYPES", "BtNode", "NodeSpec",
           "PortSpec", "PortValueError", "ScriptError", "blackboard_key"]
