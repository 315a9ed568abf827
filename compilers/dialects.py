"""The plan dialects behind one interface: each loads, checks, compiles and says what its runs need.

The executor, the loader and the tree builder reach a dialect through ``DIALECTS``
and the ``Dialect`` protocol only: no dialect is named anywhere else.
"""
from __future__ import annotations

import pathlib
import re
from collections import Counter
from operator import attrgetter
from dataclasses import dataclass
from typing import Callable, Protocol

from bt_exec.errors import ConfigError, Issue, Issues

from .call_guard import CallGuard
from .btcpp.catalog import NodeCatalog, node_catalog_of
from .btcpp.checks import check_tree
from .btcpp.compile import compile_btcpp
from .btcpp.load import load_btcpp
from .btcpp.patch import patch_xml, xml_text
from .btcpp.xml_read import XmlDocument
from .catalog import CapabilityCatalog, check_plan, is_control_only
from .control_values import MAX_WAIT_MS
from .fixes import DialectFixes, plan_fixes
from .ir import ControlRequest, Plan
from .qwen3 import load_qwen3, looks_like_qwen3
from .qwen3_check import check_graph, verdict_of
from .qwen3_fixes import QWEN3_FIXES
from .report import Report
from .rtdl import detect_shape, load_rtdl
from .rtdl.arena import load_arena_within_limits
from .rtdl.envelope import load_envelope_within_limits
from .rtdl.fixes import RTDL_FIXES
from .scene import Scene
from .skill_catalog import TERMINALS, SkillCatalog
from .limits import Limits
from .symbolic import World, unconfirmed_effects
from .tree import CompiledPlan, compile_graph, compile_tree

DEFAULT_SKILL_CATALOG = "grant"
_ARENA_ARGS_JSON = re.compile(r"nodes\[\d+\]\.call\.args_json")

NO_SCENE = Issue("no_scene", "", "no scene given: step graphs are checked and run against one "
                                 "(--scene FILE, Executor(scene=...), validate(scene=...))", ())


@dataclass(frozen=True, slots=True)
class CheckContext:
    """What plans are checked and compiled against.

    ``capability_catalog``: RTDL's allow-list with args schemas (None: builtins only are
    checked). ``skill_catalog``: step graphs' skills. ``scene``: the world step graphs are
    checked against; ``require_scene``: an executor runs step graphs only against one, so
    without it they are refused (``no_scene``) with every other issue listed beside it.
    ``call_guard``: the rules every capability call passes; do ops and steps it denies whatever the
    robot's state are refused (``call_denied``). ``max_wait_ms``: the longest a builtin cancel waits
    (a longer wait is capped, with a warning). ``node_catalog``: the BT.CPP nodes (a TreeNodesModel) BT XML trees
    are checked against (None: their leaves are not checked).
    """

    capability_catalog: CapabilityCatalog | None = None
    skill_catalog: SkillCatalog | None = None
    scene: Scene | None = None
    require_scene: bool = False
    call_guard: CallGuard | None = None
    max_wait_ms: int = MAX_WAIT_MS
    node_catalog: NodeCatalog | None = None

    @property
    def skills(self) -> SkillCatalog:
        return self.skill_catalog or SkillCatalog.named(DEFAULT_SKILL_CATALOG)


class Dialect(Protocol):
    """One plan dialect."""

    name: str
    holds_robot: bool     # a run takes the robot: at most max_active_runs such plans at once
    needs_scene: bool     # checked and run against a scene
    routes_builtins: bool  # its do ops may call the executor's builtin capabilities

    def recognises(self, doc: object) -> bool:
        """Whether a decoded document (a JSON value, or an XML document), of no dialect named by the caller, is
        this dialect's."""

    def embedded_json(self, doc: dict) -> Callable[[str], bool] | None:
        """Where strings hold JSON text of their own, checked once decoded: path -> bool."""

    def uses_arena_paths(self, doc: dict) -> bool:
        """Whether issues about ``doc`` are located in arena notation (``nodes[1].call``)."""

    def load(self, doc: object, limits: Limits) -> Plan | ControlRequest:
        """The loaded plan; PlanError with every issue found."""

    def load_within_limits(self, doc: object, limits: Limits) -> Plan | None:
        """The plan, when one walk of this dialect's own proves the decoded document within every limit
        ``check_document`` enforces (it then needs no walk of its own); None: check and load it the long way."""

    def check(self, plan: Plan, context: CheckContext) -> Report:
        """Every issue of a loaded plan and its verdict."""

    def refusal_details(self, plan: Plan, report: Report, context: CheckContext) -> dict:
        """Fields a refusal of this plan carries beyond verdict and issues."""

    def compile(self, plan: Plan, context: CheckContext) -> CompiledPlan:
        """The plan's py_trees tree."""

    def world_of(self, plan: Plan, context: CheckContext) -> World | None:
        """The symbolic world a run of this plan moves on (set up into its tree), or None."""

    def accepted_message(self, plan_id: str, plan: Plan, context: CheckContext) -> str:
        """What an accepted submit says."""

    def is_control_only(self, plan: Plan) -> bool:
        """Whether the plan only controls other plans (never refused for room, never listed)."""

    executor_option: str  # the Executor keyword its catalog is given by
    fixes: DialectFixes  # its repairs: fixers by issue code, where a fault lies, the document fixes point into

    def read_catalog(self, name_or_path: str) -> object:
        """This dialect's catalog from a shipped catalog's name or a file path (ConfigError if unreadable)."""

    def context_for(self, catalog: object, scene: object) -> CheckContext:
        """A CheckContext from the catalog a caller gave for this dialect (an object, its dict, a
        name or a path) and, for dialects that use one, a scene."""


class Rtdl:
    """Robonix's RTDL: envelope, tree and wire-arena shapes; meta ops are control, not plans."""

    name = "rtdl"
    holds_robot = False
    needs_scene = False
    routes_builtins = True
    executor_option = "catalog"
    fixes = RTDL_FIXES

    def recognises(self, doc: object) -> bool:
        return isinstance(doc, dict) and detect_shape(doc) is not None

    def embedded_json(self, doc: dict) -> Callable[[str], bool] | None:
        return _ARENA_ARGS_JSON.fullmatch if self.uses_arena_paths(doc) else None

    def uses_arena_paths(self, doc: dict) -> bool:
        return isinstance(doc, dict) and detect_shape(doc) == "arena"

    def load(self, doc: object, limits: Limits) -> Plan | ControlRequest:
        return load_rtdl(doc, limits)

    def load_within_limits(self, doc: object, limits: Limits) -> Plan | None:
        # An arena's or an envelope's values are few kinds in fixed places, cheap to prove as they are read.
        shape = detect_shape(doc) if isinstance(doc, dict) else None
        if shape == "arena":
            return load_arena_within_limits(doc, limits)
        return load_envelope_within_limits(doc, limits) if shape == "envelope" else None

    def check(self, plan: Plan, context: CheckContext) -> Report:
        warnings: list[dict] = []
        issues = check_plan(plan, context.capability_catalog, context.skills, warnings, context.max_wait_ms)
        if context.call_guard is not None:
            issues = (Issues(issues) + context.call_guard.check_plan(plan)).listed()
        if issues:
            issues = plan_fixes(plan, issues, context, self.fixes)
        kinds = Counter(map(attrgetter("kind"), plan.ops.values()))
        stats = {"shape": plan.shape, "ops": plan.op_count, "depth": plan.depth,
                 "sequence": kinds["sequence"], "parallel": kinds["parallel"], "do": kinds["do"]}
        return Report("invalid" if issues else "ok", plan.dialect, issues, stats, warnings)

    def refusal_details(self, plan: Plan, report: Report, context: CheckContext) -> dict:
        return {}

    def compile(self, plan: Plan, context: CheckContext) -> CompiledPlan:
        return compile_tree(plan)

    def world_of(self, plan: Plan, context: CheckContext) -> None:
        return None

    def accepted_message(self, plan_id: str, plan: Plan, context: CheckContext) -> str:
        return f"plan {plan_id} accepted: {plan.op_count} ops, {plan.description!r}"

    def is_control_only(self, plan: Plan) -> bool:
        return is_control_only(plan)

    def read_catalog(self, name_or_path: str) -> CapabilityCatalog:
        return CapabilityCatalog.from_file(name_or_path)

    def context_for(self, catalog: object, scene: object) -> CheckContext:
        return CheckContext(capability_catalog=capability_catalog_of(catalog))


class Qwen3:
    """The fine-tuned Qwen3's step graphs: steps of catalog skills, transitions by outcome event."""

    name = "qwen3"
    holds_robot = True
    needs_scene = True
    routes_builtins = False
    executor_option = "skill_catalog"
    fixes = QWEN3_FIXES

    def recognises(self, doc: object) -> bool:
        return isinstance(doc, dict) and looks_like_qwen3(doc)

    def embedded_json(self, doc: dict) -> Callable[[str], bool]:
        return "/response".__eq__

    def uses_arena_paths(self, doc: dict) -> bool:
        return False

    def load(self, doc: object, limits: Limits) -> Plan:
        return load_qwen3(doc, limits)

    def load_within_limits(self, doc: object, limits: Limits) -> None:
        return None

    def check(self, plan: Plan, context: CheckContext) -> Report:
        graph = plan.steps
        issues = check_graph(plan, context.skills, context.scene)
        if context.call_guard is not None and plan.steps.status != "blocked":
            issues = (Issues(issues) + context.call_guard.check_plan(plan)).listed()
        verdict = verdict_of(plan, issues)
        if context.require_scene and context.scene is None and verdict != "blocked":
            issues, verdict = [NO_SCENE, *issues], "invalid"
        if issues:
            issues = plan_fixes(plan, issues, context, self.fixes)
        stats = {"shape": plan.shape, "status": graph.status, "steps": len(graph.steps),
                 "transitions": sum(len(m) for m in graph.transitions.values()), "entry": graph.entry,
                 "scene_revision": graph.scene_revision}
        if graph.reason:
            stats["reason"] = graph.reason
        return Report(verdict, "qwen3", issues, stats)

    def refusal_details(self, plan: Plan, report: Report, context: CheckContext) -> dict:
        details = {}
        if report.verdict == "blocked":  # the planner refused: report its reason, run nothing
            reason = plan.steps.reason
            details.update(message="blocked by the planner" + (f": {reason}" if reason else ""), reason=reason)
        stale = any(issue.code in ("stale_revision", "revision_missing") for issue in report.issues)
        if context.scene is not None and (report.verdict == "replan_required" or stale):
            details["scene"] = context.scene.as_dict()  # a fresh snapshot for the planner; the model is not called
        return details

    def compile(self, plan: Plan, context: CheckContext) -> CompiledPlan:
        return compile_graph(plan, context.skills, terminals=frozenset(TERMINALS), success_terminal="completed",
                             stop_terminal="stop", unconfirmed_effects=unconfirmed_effects)

    def world_of(self, plan: Plan, context: CheckContext) -> World:
        return World.from_scene(context.skills, context.scene)

    def accepted_message(self, plan_id: str, plan: Plan, context: CheckContext) -> str:
        return (f"plan {plan_id} accepted: {plan.op_count}-step graph from {plan.root}, scene revision "
                f"{context.scene.revision}")

    def is_control_only(self, plan: Plan) -> bool:
        return False

    def read_catalog(self, name_or_path: str) -> SkillCatalog:
        return SkillCatalog.named(name_or_path)

    def context_for(self, catalog: object, scene: object) -> CheckContext:
        # as an executor checks them: a graph is judged against a scene, and without one it is refused
        return CheckContext(skill_catalog=skill_catalog_of(catalog), scene=scene_of(scene), require_scene=True)


class Btcpp:
    """BehaviorTree.CPP's XML (BT.CPP 4, and 3 with warnings): trees of its node library whose leaves are
    capability calls, SubTrees flattened, checked against a TreeNodesModel catalog."""

    name = "btcpp"
    holds_robot = False
    needs_scene = False
    routes_builtins = False
    executor_option = "node_catalog"
    fixes = DialectFixes(document={}, patch=patch_xml, text=xml_text)

    def recognises(self, doc: object) -> bool:
        return isinstance(doc, XmlDocument)

    def embedded_json(self, doc: object) -> None:
        return None

    def uses_arena_paths(self, doc: object) -> bool:
        return False

    def load(self, doc: object, limits: Limits) -> Plan:
        return load_btcpp(doc, limits)

    def load_within_limits(self, doc: object, limits: Limits) -> Plan | None:
        # XML is held to the limits as it is read and loaded: no JSON walk has anything to check
        return load_btcpp(doc, limits) if isinstance(doc, XmlDocument) else None

    def check(self, plan: Plan, context: CheckContext) -> Report:
        issues, warnings = check_tree(plan, context.node_catalog)
        if context.call_guard is not None:
            issues = (Issues(issues) + context.call_guard.check_plan(plan)).listed()
        if issues:
            issues = plan_fixes(plan, issues, context, self.fixes)
        kinds = Counter(map(attrgetter("kind"), plan.ops.values()))
        stats = {"shape": plan.shape, "ops": plan.op_count, "depth": plan.depth, "main_tree": plan.source.main,
                 "trees": len(plan.source.trees), "control": kinds["control"], "do": kinds["do"]}
        return Report("invalid" if issues else "ok", plan.dialect, issues, stats, warnings)

    def refusal_details(self, plan: Plan, report: Report, context: CheckContext) -> dict:
        return {}

    def compile(self, plan: Plan, context: CheckContext) -> CompiledPlan:
        return compile_btcpp(plan, context.node_catalog)

    def world_of(self, plan: Plan, context: CheckContext) -> None:
        return None

    def accepted_message(self, plan_id: str, plan: Plan, context: CheckContext) -> str:
        return f"plan {plan_id} accepted: {plan.op_count} nodes, tree {plan.source.main!r}, {plan.description!r}"

    def is_control_only(self, plan: Plan) -> bool:
        return False

    def read_catalog(self, name_or_path: str) -> NodeCatalog:
        return NodeCatalog.from_file(name_or_path)

    def context_for(self, catalog: object, scene: object) -> CheckContext:
        return CheckContext(node_catalog=node_catalog_of(catalog))


# In the order ``load`` tries them on a document whose dialect is not given.
DIALECTS: dict[str, Dialect] = {"rtdl": Rtdl(), "qwen3": Qwen3(), "btcpp": Btcpp()}
# A document that is not a JSON object is reported against this dialect's shapes.
FALLBACK_DIALECT = DIALECTS["rtdl"]


def dialect_of(plan: Plan) -> Dialect:
    return DIALECTS[plan.dialect]


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
    if isinstance(catalog, (str, pathlib.Path)):
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
