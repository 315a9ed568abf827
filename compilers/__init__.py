"""Graph dialects -> IR -> py_trees: ``load``, ``validate`` and ``compile_plan``.

Each dialect (``dialects.DIALECTS``) loads, checks and compiles its own plans;
these three functions pick the dialect and hand over.
"""
from __future__ import annotations

import gc

from bt_exec.errors import Issue, PlanError

from .catalog import CapabilityCatalog
from .dialects import DIALECTS, FALLBACK_DIALECT, CheckContext, Dialect, dialect_of, scene_of, skill_catalog_of
from .ir import ControlRequest, Op, Plan
from .report import Report
from .scene import Scene
from .skill_catalog import SkillCatalog
from .source import DEFAULT_LIMITS, Limits, check_document, parse_document
from .tree import CompiledPlan

DIALECT_NAMES = ("auto", *DIALECTS)

__all__ = ["CapabilityCatalog", "CheckContext", "CompiledPlan", "ControlRequest", "DIALECT_NAMES", "Dialect",
           "Limits", "Op", "Plan", "Report", "Scene", "SkillCatalog", "compile_plan", "dialect_of", "load",
           "gc_paused", "scene_of", "skill_catalog_of", "validate"]


def load(source, dialect: str = "auto", limits: Limits | None = None) -> Plan | ControlRequest:
    """Load a plan (or a root meta op) from a dict, JSON text (str/bytes) or pathlib.Path.

    Raises PlanError carrying every issue found. Tree-shaped plans are numbered
    "1", "2", ... in pre-order.
    """
    limits = limits or DEFAULT_LIMITS
    if dialect not in DIALECT_NAMES:
        raise PlanError([Issue("unknown_dialect", "", f"unknown dialect {dialect!r} (expected one of "
                                                      f"{', '.join(DIALECT_NAMES)})")])
    with gc_paused():
        doc = parse_document(source, limits)
        chosen = DIALECTS.get(dialect)
        if chosen is None and isinstance(doc, dict):
            chosen = next((d for d in DIALECTS.values() if d.recognises(doc)), None)
        measured = not isinstance(source, dict)  # decoded from text: its size was measured, it shares nothing
        if measured and chosen is not None:
            plan = chosen.load_within_limits(doc, limits)
            if plan is not None:
                return plan
        # Every value first: the loaders then read only JSON values, strings within max_string_chars.
        issues = check_document(doc, limits, arena=chosen is not None and chosen.uses_arena_paths(doc),
                                measured=measured,
                                embedded=chosen.embedded_json(doc) if chosen is not None else None)
        if issues:
            raise PlanError(issues)
        if chosen is None:
            if isinstance(doc, dict):
                raise PlanError([Issue("unknown_shape", "", "not a plan of any known dialect: expected an RTDL "
                                                           "envelope (key 'rtdl'), tree (key 'op') or wire arena "
                                                           "(keys 'nodes', 'root_index'), or a Qwen3 graph (keys "
                                                           "'status', 'entry', 'plan', 'transitions') or its "
                                                           "submit envelope (key 'response')")])
            chosen = FALLBACK_DIALECT
        return chosen.load(doc, limits)


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
    chosen = dialect_of(plan)
    return chosen.check(plan, chosen.context_for(catalog, scene))


def compile_plan(plan: Plan, catalog=None) -> CompiledPlan:
    """Build the behaviour tree of ``plan``; step graphs resolve their skills in ``catalog`` (default grant)."""
    chosen = dialect_of(plan)
    with gc_paused():
        return chosen.compile(plan, chosen.context_for(catalog, None))


class gc_paused:
    """Pause the cyclic garbage collector while building many objects that all stay alive.

    Building a 50k-op plan makes the collector walk the young objects again and
    again for nothing. On the way out what was built goes straight to the oldest
    generation (``gc.freeze`` then ``gc.unfreeze``: two list moves, no walk), so the
    young collections that follow do not walk it either, and the collector is
    restored (if it was on).
    """

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self._was_enabled:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
