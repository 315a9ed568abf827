"""The Qwen3 step graphs' repairs, beyond those every document shares (``Qwen3.fixes``): a transition or entry naming
no step, a graph's missing field, and in a loaded graph a misspelt skill, object, target or parameter, an
outcome left without a transition, an edge to the wrong terminal, the wrong tool; and the insertion of a step
the checks find missing (``step_insertion``). Fixes point into a submit envelope with its response JSON text read
as the graph it holds."""
from __future__ import annotations

from jsonpointer import escape

from bt_exec.errors import Issue

from .fixes import (DOCUMENT_FIXERS, DialectFixes, NameSearch, PlanFacts, fault_at, parent_of, renamed_to,
                    replaced_by, required_fixer, value_at)
from .qwen3 import graph_in_response
from .skill_catalog import TERMINALS


def _fixable(doc: object) -> object:
    """A submit envelope whose response is JSON text with the response read as the graph object it holds (a
    copy; the envelope takes either); any other document as it is."""
    if isinstance(doc, dict) and isinstance(doc.get("response"), str):
        try:
            graph = graph_in_response(doc["response"])
        except (ValueError, RecursionError):
            return doc
        if isinstance(graph, dict):
            return {**doc, "response": graph}
    return doc


# Issues located at their step whose fault is elsewhere (its transitions, the paths to it): a fix to the step's
# fields leaves them as they were.
_ABOUT_A_STEP = frozenset(("missing_transition", "no_transitions", "unreachable", "no_way_out",
                           "precondition_fails_in_scene", "precondition_never_holds", "tool_not_in_socket",
                           "no_transfer_before_return"))


def _fault_place(issue: Issue, pointer: str | None) -> str | None:
    """Where the fault of an issue is, when an earlier fix may have repaired it: nowhere a fix reaches for an
    issue about a step's place in the graph, the missing parameter of a step that lacks one."""
    if pointer is None or issue.code in _ABOUT_A_STEP:
        return None
    if issue.code == "missing_param":
        return f"{pointer}/{escape(issue.missing)}" if issue.missing is not None else None
    return fault_at(issue, pointer)


# --- documents that did not load --------------------------------------------------------------------------

def _placeholders(doc, pointer: str, node: dict, field: str) -> list:
    """The value a graph's missing field is given."""
    if field == "status":
        return ["ok"]
    if field == "entry":
        steps = node.get("plan")
        first = steps[0].get("id") if isinstance(steps, list) and steps and isinstance(steps[0], dict) else None
        return [first] if isinstance(first, str) else []
    if field == "transitions":
        return [{}] if isinstance(node.get("plan"), list) and not node["plan"] else []
    return []


def _fix_unknown_step(doc, pointer: str, issue: Issue, names: NameSearch):
    """A transition or the entry naming a step that is not there (``unknown``): the nearest step (or
    terminal)."""
    graph_pointer = pointer.split("/transitions", 1)[0] if "/transitions" in pointer else parent_of(pointer)[0]
    graph = value_at(doc, graph_pointer)
    steps = graph.get("plan") if isinstance(graph, dict) else None
    ids = [step["id"] for step in steps if isinstance(step, dict) and isinstance(step.get("id"), str)] \
        if isinstance(steps, list) else []
    value = value_at(doc, pointer)
    if pointer.endswith("/entry"):
        return replaced_by(pointer, names.nearest(value, ids))
    if isinstance(value, dict):  # an edge of an edge list
        if issue.unknown is not None and issue.unknown == value.get("from"):
            return replaced_by(f"{pointer}/from", names.nearest(value.get("from"), ids))
        return replaced_by(f"{pointer}/to", names.nearest(value.get("to"), ids + list(TERMINALS)))
    source_pointer = parent_of(pointer)[0]
    transitions_pointer, source = parent_of(source_pointer)
    if issue.unknown is not None and issue.unknown == source:  # the source: a key of the transitions map
        transitions = value_at(doc, transitions_pointer)
        free = [step for step in ids if not (isinstance(transitions, dict) and step in transitions)]
        return renamed_to(source_pointer, names.nearest(source, free))
    return replaced_by(pointer, names.nearest(value, ids + list(TERMINALS)))


# --- loaded graphs that were refused --------------------------------------------------------------------------

def _step_of(facts: PlanFacts, issue: Issue):
    return facts.plan.steps.steps.get(issue.steps[0]) if issue.steps else None


def _fix_unknown_skill(facts: PlanFacts, pointer: str, issue: Issue):
    op = facts.op_at(issue, ("/skill",))
    if op is None:
        return None
    skills = facts.context.skills
    return replaced_by(pointer, facts.names.nearest(op.cap, list(skills.skills) + list(skills.aliases)))


def _fix_unknown_name(facts: PlanFacts, pointer: str, issue: Issue):
    """An unknown object or target: the nearest the catalog names (and the scene, when there is one)."""
    step = _step_of(facts, issue)
    if step is None:
        return None
    key = next((key for key, path in step.param_paths.items() if path == issue.path), None)
    if key is None:
        return None
    catalog, scene = facts.context.skills, facts.context.scene
    is_target = issue.code == "unknown_target"
    names = set(_listed_names(catalog.data.get("target_types" if is_target else "object_types", {})))
    if scene is not None:
        names |= scene.targets if is_target else scene.objects
    return replaced_by(pointer, facts.names.nearest(step.params[key], names))


def _listed_names(types: dict) -> list[str]:
    return [name for spec in types.values() if isinstance(spec, dict) for name in spec.get("names", ())]


def _fix_unknown_param(facts: PlanFacts, pointer: str, issue: Issue):
    step = _step_of(facts, issue)
    skill_name = facts.context.skills.resolve(step.skill) if step is not None else None
    if skill_name is None:
        return None
    key = next((key for key, path in step.param_paths.items() if path == issue.path), None)
    free = [name for name in facts.context.skills.skills[skill_name].params if name not in step.params]
    return renamed_to(pointer, facts.names.nearest(key, free)) or [{"op": "remove", "path": pointer}]


def _fix_missing_transition(facts: PlanFacts, pointer: str, issue: Issue):
    """The edge of the outcome left without one (``missing``) to the terminal a planner would give it: a failure
    asks for a new plan."""
    step = _step_of(facts, issue)
    outcome = issue.missing
    graph = facts.plan.steps
    if step is None or outcome is None:
        return None
    target = _cut_off_observer(facts, step) if facts.context.skills.is_failure(outcome) else None
    target = target or _terminal_for(outcome, facts.context.skills)
    if target is None:
        return None
    return [_edge_added(graph, step.step_id, outcome, target)]


def _edge_added(graph, source: str, event: str, target: str) -> dict:
    """The operation adding a transition, in the form the graph writes its transitions in."""
    if graph.edge_list:
        return {"op": "add", "path": f"{graph.prefix}/transitions/-", "value": {"from": source, "event": event,
                                                                                 "to": target}}
    return {"op": "add", "path": f"{graph.prefix}/transitions/{escape(source)}/{escape(event)}", "value": target}


def _edge_target(graph, path: str) -> str:
    """Where the target of the transition at ``path`` is: the path itself in a map, its ``to`` in an edge list."""
    return f"{path}/to" if graph.edge_list else path


def _cut_off_observer(facts: PlanFacts, step) -> str | None:
    """The one step no path reaches, when it observes the object of ``step``: a failure of ``step`` was
    meant to go there (and look at what the robot holds)."""
    cut_off = [step_id for issue in facts.issues if issue.code == "unreachable" for step_id in issue.steps or ()]
    if len(cut_off) != 1:
        return None
    other = facts.plan.steps.steps[cut_off[0]]
    skill = facts.context.skills.resolve(other.skill)
    observes = skill is not None and facts.context.skills.skills[skill].observes
    return other.step_id if observes and other.params.get("object") == step.params.get("object") else None


def _terminal_for(outcome: str, skills) -> str | None:
    if outcome == "unknown":  # what the robot holds is not known: a person looks
        return "operator_required"
    if skills.is_failure(outcome) or outcome in ("empty", "placed"):
        return "replan_required"
    return None


def _fix_failure_to_completed(facts: PlanFacts, pointer: str, issue: Issue):
    return [{"op": "replace", "path": _edge_target(facts.plan.steps, pointer), "value": "replan_required"}]


def _fix_motion_after_collision(facts: PlanFacts, pointer: str, issue: Issue):
    return [{"op": "replace", "path": _edge_target(facts.plan.steps, pointer), "value": "operator_required"}]


def _fix_wrong_tool(facts: PlanFacts, pointer: str, issue: Issue):
    step = _step_of(facts, issue)
    tool = facts.context.skills.tool_of(step.params.get("object", "")) if step is not None else None
    return [{"op": "replace", "path": pointer, "value": tool}] if tool else None


def _fix_tool_not_in_socket(facts: PlanFacts, pointer: str, issue: Issue):
    step = _step_of(facts, issue)
    socket = facts.context.skills.socket_of(step.params.get("object", "")) if step is not None else None
    if socket is None:
        return None
    where = step.param_paths.get("target")
    if where is not None:
        return [{"op": "replace", "path": where, "value": socket}]
    return [{"op": "add", "path": f"{step.path}/target", "value": socket}]


def step_insertion(graph, before: str, path: list[str], skill: str, obj: str, outcomes) -> list | None:
    """The patch that puts a new step ``skill(obj)`` right before step ``before`` on ``path`` (the steps from
    the entry that reach it): the last edge of the path (or the entry) leads to the new step, whose success
    goes on to ``before`` and whose every other outcome asks for a new plan (``graph``: the StepGraph)."""
    new_id = f"{before}_{skill}"
    while new_id in graph.steps:
        new_id += "'"
    prefix = graph.prefix
    edges = {outcome: before if outcome == "success" else "replan_required" for outcome in outcomes}
    patch = [{"op": "add", "path": f"{prefix}/plan/-", "value": {"id": new_id, "skill": skill, "object": obj}}]
    if graph.edge_list:
        patch += [_edge_added(graph, new_id, event, target) for event, target in edges.items()]
    else:
        patch.append({"op": "add", "path": f"{prefix}/transitions/{escape(new_id)}", "value": edges})
    if len(path) < 2:
        return [*patch, {"op": "replace", "path": f"{prefix}/entry", "value": new_id}]
    source = path[-2]
    event = next((event for event, target in graph.transitions.get(source, {}).items() if target == before), None)
    if event is None:
        return None
    return [*patch, {"op": "replace", "path": _edge_target(graph, graph.edge_paths[(source, event)]), "value": new_id}]


QWEN3_FIXES = DialectFixes(
    document={**DOCUMENT_FIXERS, "required": required_fixer(_placeholders), "unknown_step": _fix_unknown_step},
    plan={
        "unknown_skill": _fix_unknown_skill,
        "unknown_object": _fix_unknown_name,
        "unknown_target": _fix_unknown_name,
        "unknown_param": _fix_unknown_param,
        "missing_transition": _fix_missing_transition,
        "failure_to_completed": _fix_failure_to_completed,
        "motion_after_collision": _fix_motion_after_collision,
        "wrong_tool": _fix_wrong_tool,
        "tool_not_in_socket": _fix_tool_not_in_socket,
    },
    fault_place=_fault_place,
    fixable=_fixable,
)
