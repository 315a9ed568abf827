"""Graph dialects -> IR -> py_trees: ``load``, ``validate`` and ``compile_plan``, and the repairs of a refused
input as a caller applies them (``fixable``, ``apply_fixes``, ``issues_after_fixes``).

Each dialect (``dialects.DIALECTS``) loads, checks, compiles and repairs its own plans;
these functions pick the dialect and hand over.
"""
from __future__ import annotations

import gc
import sys
from typing import Callable

from bt_exec.errors import ConfigError, Issue, Issues, PlanError

from .catalog import CapabilityCatalog
from .fixes import document_fixes, issues_uncovered, joined
from .dialects import DIALECTS, FALLBACK_DIALECT, CheckContext, Dialect, dialect_of, scene_of, skill_catalog_of
from .ir import ControlRequest, Op, Plan
from .report import PartlyRead, Report
from .rtdl.meta import capped_wait_warnings
from .scene import Scene
from .skill_catalog import SkillCatalog
from .limit_walk import check_document
from .limits import DEFAULT_LIMITS, Limits
from .source import parse_document
from .tree import CompiledPlan

DIALECT_NAMES = ("auto", *DIALECTS)

__all__ = ["CapabilityCatalog", "CheckContext", "CompiledPlan", "ControlRequest", "DIALECT_NAMES", "Dialect",
           "Limits", "Op", "Plan", "Report", "Scene", "SkillCatalog", "apply_fixes", "compile_plan", "dialect_of",
           "check_source", "document_of", "document_text", "fixable", "issues_after_fixes", "load", "gc_paused",
           "load_with_warnings", "refusal_issues", "scene_of", "skill_catalog_of", "validate"]


def load(source, dialect: str = "auto", limits: Limits | None = None) -> Plan | ControlRequest:
    """Load a plan (or a root meta op) from a dict, JSON text (str/bytes) or pathlib.Path.

    Raises PlanError carrying every issue found. Tree-shaped plans are numbered
    "1", "2", ... in pre-order. Text around the JSON (a model's reply) is skipped:
    ``load_with_warnings`` also says so.
    """
    return load_with_warnings(source, dialect, limits)[0]


def load_with_warnings(source, dialect: str = "auto", limits: Limits | None = None) \
        -> tuple[Plan | ControlRequest, list[dict]]:
    """``load``, and the warnings (``{code, message}``) about what was read but changed or skipped on the
    way: text around the JSON, a wait capped at ``limits.max_wait_ms``."""
    limits = limits or DEFAULT_LIMITS
    if dialect not in DIALECT_NAMES:
        raise PlanError([Issue("unknown_dialect", "", f"unknown dialect {dialect!r} (expected one of "
                                                      f"{', '.join(DIALECT_NAMES)})")])
    with gc_paused():
        named = DIALECTS.get(dialect)
        doc, warnings = parse_document(source, limits, named.recognises if named is not None else _recognised)
        try:
            loaded = _load_document(doc, named, not isinstance(source, dict), limits)
        except PartlyRead as exc:  # each issue with its repair, where it has one
            raise PartlyRead(document_fixes(doc, exc.issues, _reader(doc, named).fixes), exc.partial) from None
        except PlanError as exc:
            raise PlanError(document_fixes(doc, exc.issues, _reader(doc, named).fixes)) from None
    if isinstance(loaded, ControlRequest) and isinstance(doc, dict):
        warnings.extend(capped_wait_warnings(doc, loaded))
    return loaded, warnings


def document_of(source, dialect: str = "auto", limits: Limits | None = None) -> object:
    """The JSON document ``load`` reads from ``source`` (of a reply with text around it, the JSON it
    holds): the document its issues' fixes repair, read by ``fixable`` as they point into it. PlanError if there
    is none."""
    named = DIALECTS.get(dialect)
    return parse_document(source, limits or DEFAULT_LIMITS, named.recognises if named is not None else _recognised)[0]


def fixable(doc: object, dialect: str = "auto") -> object:
    """The document the fixes of ``doc``'s issues point into: ``doc`` as its dialect (``dialect``, or the one that
    recognises it) reads it for repair: a Qwen3 submit envelope with its response JSON text read as the graph it
    holds (a copy), any other document as it is."""
    return _reader(doc, DIALECTS.get(dialect)).fixes.fixable(doc)


def apply_fixes(doc: object, issues) -> object:
    """The repaired document: the ``fix`` of every issue (dicts or Issues), in order, applied to a copy of
    ``fixable(doc)``. Raises jsonpatch's errors if the fixes are not this document's."""
    return _reader(doc, None).fixes.patch(fixable(doc), issues)


def document_text(doc: object) -> str | None:
    """The text of a document that is not JSON (BT.CPP XML), as its dialect writes it; None for a JSON document."""
    write = _reader(doc, None).fixes.text
    return write(doc) if write is not None else None


def issues_after_fixes(doc: object, issues: list[Issue], check_again: Callable[[object], list[Issue]],
                       dialect: str = "auto") -> list[Issue]:
    """``issues``, followed by those ``doc`` repaired by their fixes still has (``after_fixes``), round after round
    while new ones carry fixes (``fixes.issues_uncovered``); ``check_again(document)``: the issues of a
    document, with their fixes."""
    fixes = _reader(doc, DIALECTS.get(dialect)).fixes
    return issues_uncovered(fixes.fixable(doc), issues, check_again, fixes.patch)


def _reader(doc: object, named: Dialect | None) -> Dialect:
    """The dialect that reads ``doc``: the one named, else the first that recognises it, else the one a document
    that is no JSON object is reported against."""
    return named or _recognising(doc) or FALLBACK_DIALECT


def _recognising(doc: object) -> Dialect | None:
    """The first dialect that recognises ``doc`` as its own."""
    return next((kind for kind in DIALECTS.values() if kind.recognises(doc)), None)


def _recognised(doc: object) -> bool:
    return _recognising(doc) is not None


def _load_document(doc: object, chosen: Dialect | None, measured: bool, limits: Limits) -> Plan | ControlRequest:
    """``measured``: decoded from text, so its size was measured and it shares nothing."""
    if chosen is None:
        chosen = _recognising(doc)
    elif not isinstance(doc, dict) and not chosen.recognises(doc):
        other = _recognising(doc)
        if other is not None:  # a document of another dialect's own format (XML for BT.CPP)
            raise PlanError([Issue("wrong_dialect", "", f"this is a {other.name} plan, not {chosen.name}: name its "
                                                        f"dialect ({other.name}), or leave it to be detected (auto)")])
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
    preconditions against. Raw input whose issues carry fixes also lists the issues the repaired
    document still has (``issues_after_fixes``).
    """
    report = _validate_once(plan, catalog, dialect, limits, scene)
    if not report.ok and report.issues and not isinstance(plan, (Plan, ControlRequest)):
        try:
            document = document_of(plan, dialect, limits)
        except PlanError:
            return report
        report.issues = issues_after_fixes(
            document, report.issues, lambda repaired: _validate_once(repaired, catalog, dialect, limits, scene).issues,
            dialect)
    return report


def _validate_once(plan, catalog, dialect: str, limits: Limits | None, scene) -> Report:
    return check_source(plan, dialect, limits, lambda chosen: chosen.context_for(catalog, scene))


def check_source(source, dialect: str, limits: Limits | None, context_for: Callable[[Dialect], CheckContext]) \
        -> Report:
    """The report of one check of ``source`` (a loaded plan, or raw input) against the context
    ``context_for(dialect)`` gives for its dialect: what ``validate`` and every door's validate and submit
    decide on, so that one input gets one verdict on every entry point."""
    warnings: list[dict] = []
    if isinstance(source, (Plan, ControlRequest)):
        plan = source
    else:
        try:
            plan, warnings = load_with_warnings(source, dialect=dialect, limits=limits)
        except PlanError as exc:
            return Report("invalid", None if dialect == "auto" else dialect, refusal_issues(exc, context_for))
    if isinstance(plan, ControlRequest):
        return Report("control", plan.dialect, [], {"control": plan.as_dict()}, warnings)
    chosen = dialect_of(plan)
    report = chosen.check(plan, context_for(chosen))
    report.warnings.extend(warnings)
    return report


def refusal_issues(refused: PlanError, context_for: Callable[[Dialect], CheckContext]) -> list[Issue]:
    """The issues of an input ``load`` refused: its own and, of a plan it read in part (a step graph with a
    transition to a missing step), those the checks that need no sound shape find in what was read, checked
    against ``context_for(dialect)``; a fault of the shape hides no other."""
    partial = getattr(refused, "partial", None)
    if partial is None or any(issue.code == "too_many_issues" for issue in refused.issues):
        return refused.issues
    chosen = dialect_of(partial)
    try:
        context = context_for(chosen)
    except ConfigError:  # a broken input's dialect is a guess: a catalog for another dialect refuses no input
        return refused.issues
    found = chosen.check(partial, context).issues
    return Issues(joined(refused.issues, found)).listed()


def compile_plan(plan: Plan, catalog=None) -> CompiledPlan:
    """Build the behaviour tree of ``plan``; step graphs resolve their skills in ``catalog`` (default grant)."""
    chosen = dialect_of(plan)
    with gc_paused():
        return chosen.compile(plan, chosen.context_for(catalog, None))


class gc_paused:
    """Pause the cyclic garbage collector while building many objects that all stay alive.

    Building a 50k-op plan makes the collector walk the young objects again and
    again for nothing. On the way out, when many objects were made, they go straight
    to the oldest generation (``gc.freeze`` then ``gc.unfreeze``: two list moves, no
    walk), so the young collections that follow do not walk them either, and the
    collector is restored (if it was on).

    Every young object of the process moves with them, other threads' garbage cycles
    too, and CPython's rule for full collections (what its young collections moved to
    the oldest generation, against a quarter of what the last full one kept) never
    counts them. So a small build (most plans) moves nothing: its objects age in the
    young collections as any others. And the outermost pause runs a full collection
    itself once the heap (pymalloc's blocks) grew by a quarter since the last one; it
    counts the heap (a walk whose cost grows with the heap) only once the pauses moved
    a sixteenth of it since it last looked, so a pause costs the same in a large process.
    What the pause just before moved counts only from the pause after this one: it is
    mostly what this pause builds on (a plan's load, then its compile; a tree, then its
    tick), still alive, and a full collection then walked it all to free nothing.
    """

    def __enter__(self) -> None:
        self._was_enabled = gc.isenabled()
        if self._was_enabled:
            _collect_when_grown()
        gc.disable()

    def __exit__(self, *exc) -> None:
        if self._was_enabled:
            young = gc.get_count()[0]
            if young > _MOVED_OLD_ABOVE:
                gc.freeze()
                gc.unfreeze()
                _heap_at_full["just_moved"] += young
            gc.enable()


_MOVED_OLD_ABOVE = 2_000  # young objects (net, since the last young collection) a pause moves to the oldest
_FULL_COLLECTION_GROWTH = 1.25
_LOOK_AFTER_MOVED = 1 / 16  # the heap is counted again once pauses moved this share of it since the last count
# The heap after the last full collection, their count, the objects pauses before the last one moved since the heap
# was counted, and those the last pause moved.
_heap_at_full = {"blocks": 0, "collections": -1, "moved": 0, "just_moved": 0}


def _collect_when_grown() -> None:
    """A full collection when the heap grew by a quarter since the last one (ours or CPython's), the heap counted
    after CPython's own and once pauses before the last one moved a sixteenth of it (``sys.getallocatedblocks``
    walks pymalloc's arenas: counting at every pause made admission slower the larger the process)."""
    collections = gc.get_stats()[2]["collections"]
    if collections != _heap_at_full["collections"]:  # CPython's own (or none seen yet): the heap now is the mark
        _heap_at_full.update(blocks=sys.getallocatedblocks(), collections=collections, moved=0, just_moved=0)
        return
    if _heap_at_full["moved"] > _heap_at_full["blocks"] * _LOOK_AFTER_MOVED:
        _heap_at_full["moved"] = 0
        if sys.getallocatedblocks() > _heap_at_full["blocks"] * _FULL_COLLECTION_GROWTH:
            gc.collect()
            _heap_at_full.update(blocks=sys.getallocatedblocks(), collections=gc.get_stats()[2]["collections"],
                                 just_moved=0)
            return
    _heap_at_full["moved"] += _heap_at_full["just_moved"]
    _heap_at_full["just_moved"] = 0
