"""Graph dialects -> IR -> py_trees: ``load``, ``validate`` and ``compile_plan``."""
from __future__ import annotations

import pathlib
import re
from collections import Counter
from dataclasses import dataclass, field

from bt_exec.errors import Issue, PlanError

from bt_exec.errors import ConfigError

from .catalog import CapabilityCatalog, check_plan
from .ir import ControlRequest, Op, Plan
from .qwen3 import load_qwen3, looks_like_qwen3
from .qwen3_check import check_graph, verdict_of
from .rtdl import detect_shape, load_rtdl
from .scene import Scene
from .skill_catalog import SkillCatalog
from .source import DEFAULT_LIMITS, Limits, check_document, parse_document
from .tree import CompiledPlan, compile_plan

DIALECTS = ("auto", "rtdl", "qwen3")
# Fields holding JSON text: the strings inside are checked once it is decoded, not the text's length.
_ARENA_ARGS_JSON = re.compile(r"nodes\[\d+\]\.call\.args_json")
_RESPONSE = "/response"
DEFAULT_SKILL_CATALOG = "grant"

__all__ = ["CapabilityCatalog", "CompiledPlan", "ControlRequest", "DIALECTS", "Limits", "Op", "Plan",
           "Report", "Scene", "SkillCatalog", "compile_plan", "load", "validate"]


def load(source, dialect: str = "auto", limits: Limits | None = None) -> Plan | ControlRequest:
    """Load a plan (or a root meta op) from a dict, JSON text (str/bytes) or pathlib.Path.

    Raises PlanError carrying every issue found. Tree-shaped plans are numbered
    "1", "2", ... in pre-order.
    """
    limits = limits or DEFAULT_LIMITS
    if dialect not in DIALECTS:
        raise PlanError([Issue("unknown_dialect", "", f"unknown dialect {dialect!r} (expected one of {', '.join(DIALECTS)})")])
    doc = parse_document(source, limits)
    shape = detect_shape(doc) if isinstance(doc, dict) else None
    qwen3 = dialect == "qwen3" or (dialect == "auto" and isinstance(doc, dict) and not shape and looks_like_qwen3(doc))
    # Every value first: the loaders below then read only JSON values, strings within max_string_chars.
    arena = not qwen3 and shape == "arena"
    embedded = _ARENA_ARGS_JSON.fullmatch if arena else _RESPONSE.__eq__ if qwen3 else None
    issues = check_document(doc, limits, arena=arena, measured=not isinstance(source, dict), embedded=embedded)
    if issues:
        raise PlanError(issues)
    if dialect == "auto" and isinstance(doc, dict) and not shape:
        if qwen3:
            return load_qwen3(doc, limits)
        raise PlanError([Issue("unknown_shape", "", "not a plan of any known dialect: expected an RTDL envelope "
                                                   "(key 'rtdl'), tree (key 'op') or wire arena (keys 'nodes', "
                                                   "'root_index'), or a Qwen3 graph (keys 'status', 'entry', 'plan', "
                                                   "'transitions') or its submit envelope (key 'response')")])
    if dialect == "qwen3":
        return load_qwen3(doc, limits)
    return load_rtdl(doc, limits)


@dataclass
class Report:
    """The outcome of ``validate``.

    ``verdict``: "ok"; "invalid"; "control" (an RTDL meta op); for step graphs
    also "replan_required" and "blocked". Only "ok" and "control" may run.
    """

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


def validate(plan, catalog=None, dialect: str = "auto", limits: Limits | None = None,
             scene: Scene | dict | None = None) -> Report:
    """Check a loaded plan, or raw input, without raising for bad input.

    ``catalog``: for RTDL a CapabilityCatalog (or its dict); for step graphs a
    SkillCatalog, or a shipped catalog's name or a file path (default: grant).
    ``scene``: for step graphs, the scene to check objects, revision and
    preconditions against.
    """
    if not isinstance(plan, (Plan, ControlRequest)):
        try:
            plan = load(plan, dialect=dialect, limits=limits)
        except PlanError as exc:
            return Report("invalid", None if dialect == "auto" else dialect, exc.issues)
    if isinstance(plan, ControlRequest):
        return Report("control", plan.dialect, [], {"control": plan.as_dict()})
    if plan.dialect == "qwen3":
        skill_catalog = skill_catalog_of(catalog)
        issues = check_graph(plan, skill_catalog, scene_of(scene))
        return Report(verdict_of(plan, issues), "qwen3", issues, graph_stats(plan))
    issues = check_plan(plan, capability_catalog_of(catalog))
    return Report("invalid" if issues else "ok", plan.dialect, issues, plan_stats(plan))


def capability_catalog_of(catalog) -> CapabilityCatalog | None:
    if catalog is None or isinstance(catalog, CapabilityCatalog):
        return catalog
    if isinstance(catalog, dict):
        return CapabilityCatalog(catalog)
    raise ConfigError(f"an RTDL plan is checked against a capability catalog, not {type(catalog).__name__}")


def skill_catalog_of(catalog) -> SkillCatalog:
    if catalog is None:
        return SkillCatalog.named(DEFAULT_SKILL_CATALOG)
    if isinstance(catalog, SkillCatalog):
        return catalog
    if isinstance(catalog, str):
        return SkillCatalog.named(catalog)
    if isinstance(catalog, dict):
        return SkillCatalog(catalog)
    raise ConfigError(f"a step graph is checked against a skill catalog, not {type(catalog).__name__}")


def scene_of(scene) -> Scene | None:
    """A Scene from a Scene, its dict, or a file path (str or pathlib.Path)."""
    if isinstance(scene, dict):
        return Scene.from_dict(scene)
    if isinstance(scene, (str, pathlib.Path)):
        return Scene.from_file(scene)
    return scene


def graph_stats(plan: Plan) -> dict:
    graph = plan.steps
    stats = {"shape": plan.shape, "status": graph.status, "steps": len(graph.steps),
             "transitions": sum(len(m) for m in graph.transitions.values()), "entry": graph.entry,
             "scene_revision": graph.scene_revision}
    if graph.reason:
        stats["reason"] = graph.reason
    return stats


def plan_stats(plan: Plan) -> dict:
    kinds = Counter(op.kind for op in plan.ops.values())
    return {"shape": plan.shape, "ops": plan.op_count, "depth": plan.depth,
            "sequence": kinds["sequence"], "parallel": kinds["parallel"], "do": kinds["do"]}
