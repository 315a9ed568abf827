"""Graph dialects -> IR -> py_trees: ``load``, ``validate`` and ``compile_plan``."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from bt_exec.errors import Issue, PlanError

from .catalog import CapabilityCatalog, check_plan
from .ir import ControlRequest, Op, Plan
from .rtdl import detect_shape, load_rtdl
from .source import DEFAULT_LIMITS, Limits, parse_document
from .tree import CompiledPlan, compile_plan

DIALECTS = ("auto", "rtdl")

__all__ = ["CapabilityCatalog", "CompiledPlan", "ControlRequest", "DIALECTS", "Limits", "Op", "Plan",
           "Report", "compile_plan", "load", "validate"]


def load(source, dialect: str = "auto", limits: Limits | None = None) -> Plan | ControlRequest:
    """Load a plan (or a root meta op) from a dict, JSON text (str/bytes) or pathlib.Path.

    Raises PlanError carrying every issue found. Tree-shaped plans are numbered
    "1", "2", ... in pre-order.
    """
    limits = limits or DEFAULT_LIMITS
    if dialect not in DIALECTS:
        raise PlanError([Issue("unknown_dialect", "", f"unknown dialect {dialect!r} (expected one of {', '.join(DIALECTS)})")])
    doc = parse_document(source, limits)
    if dialect == "auto" and isinstance(doc, dict) and not detect_shape(doc):
        raise PlanError([Issue("unknown_shape", "", "not a plan of any known dialect: expected an RTDL envelope "
                                                   "(key 'rtdl'), tree (key 'op') or wire arena (keys 'nodes', 'root_index')")])
    return load_rtdl(doc, limits)


@dataclass
class Report:
    """The outcome of ``validate``: ``verdict`` is "ok", "invalid" or "control" (a meta op)."""

    verdict: str
    dialect: str | None
    issues: list[Issue] = field(default_factory=list)
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return self.verdict in ("ok", "control")

    def as_dict(self) -> dict:
        return {"valid": self.ok, "verdict": self.verdict, "dialect": self.dialect,
                "issues": [i.as_dict() for i in self.issues], "stats": self.stats}


def validate(plan, catalog: CapabilityCatalog | dict | None = None, dialect: str = "auto",
             limits: Limits | None = None) -> Report:
    """Check a loaded plan, or raw input, without raising for bad input."""
    if isinstance(catalog, dict):
        catalog = CapabilityCatalog(catalog)
    if not isinstance(plan, (Plan, ControlRequest)):
        try:
            plan = load(plan, dialect=dialect, limits=limits)
        except PlanError as exc:
            return Report("invalid", None if dialect == "auto" else dialect, exc.issues)
    if isinstance(plan, ControlRequest):
        return Report("control", plan.dialect, [], {"control": plan.as_dict()})
    issues = check_plan(plan, catalog)
    return Report("invalid" if issues else "ok", plan.dialect, issues, plan_stats(plan))


def plan_stats(plan: Plan) -> dict:
    kinds = Counter(op.kind for op in plan.ops.values())
    return {"shape": plan.shape, "ops": plan.op_count, "depth": plan.depth,
            "sequence": kinds["sequence"], "parallel": kinds["parallel"], "do": kinds["do"]}
