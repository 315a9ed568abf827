"""Qwen3 step graphs: parsing the graph (or its submit envelope) into the IR.

Shape only: ids, types, references between steps. What the skills, objects
and events mean is checked against a catalog and a scene by ``qwen3_check``.
A graph whose ``status`` is ``blocked`` always loads, whatever else is wrong:
that verdict is decided first.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from jsonpointer import escape

from bt_exec.errors import Issue, Issues, PlanError

from .ir import Op, Plan
from .report import PartlyRead
from .skill_catalog import TERMINALS
from .limit_walk import check_document
from .limits import INT64_MAX, INT64_MIN, STRICT_JSON, Limits, number_shown
from .reply import located

PARAMS = ("object", "target", "tool")
_STEP_KEYS = frozenset(("id", "skill", "args", "description"))
_FENCE = re.compile(r"\A\s*```[A-Za-z0-9_-]*[ \t]*\r?\n(.*?)\r?\n?```\s*\Z", re.S)


@dataclass
class Step:
    step_id: str
    skill: str                  # as the model wrote it; the catalog resolves aliases
    params: dict                # object / target / tool, and anything else it gave
    path: str
    param_paths: dict = field(default_factory=dict)  # param given -> where it is in the input (step or args)


@dataclass
class StepGraph:
    status: str
    entry: str | None
    steps: dict = field(default_factory=dict)          # id -> Step, in plan order
    transitions: dict = field(default_factory=dict)    # id -> {event: next step or terminal}
    edge_paths: dict = field(default_factory=dict)     # (id, event) -> path in the input
    scene_revision: int | None = None
    run_id: str | None = None
    reason: str | None = None
    prefix: str = ""                                   # "/response" inside a submit envelope
    edge_list: bool = False                            # transitions written as a list of {from, event, to}
    revision_path: str = "/scene_revision"             # where scene_revision is (or belongs) in the input
    # A graph refused for its shape, read as far as it could be: its refused edges are left out, and
    # refused_edges holds the (step, event) of each whose step is known.
    broken: bool = False
    refused_edges: set = field(default_factory=set)

    def successors(self, step_id: str) -> list[tuple[str, str]]:
        return list(self.transitions.get(step_id, {}).items())


def looks_like_qwen3(doc: dict) -> bool:
    return any(key in doc for key in ("response", "status", "plan", "transitions", "entry"))


def load_qwen3(doc: object, limits: Limits) -> Plan:
    if not isinstance(doc, dict):
        raise PlanError([_issue("type", "", "a Qwen3 graph must be a JSON object")])
    prefix = ""
    run_id = revision = None
    issues = Issues()
    if "response" in doc:
        run_id, revision = _envelope_fields(doc, issues)
        doc, prefix = _response(doc["response"], limits, issues), "/response"
    if not isinstance(doc, dict):
        raise PlanError(issues)
    revision_path = "/scene_revision"  # a submit envelope carries it beside the response
    inner = doc.get("scene_revision")
    if revision is not None and "scene_revision" in doc and inner != revision:
        issues.append(_issue("revision_conflict", f"{prefix}/scene_revision",
                             f"the graph says scene_revision {number_shown(inner)}, its submit envelope "
                             f"{number_shown(revision)}"))
    if revision is None and "scene_revision" in doc:
        revision, revision_path = doc["scene_revision"], f"{prefix}/scene_revision"
        if issue := _revision_issue(revision, revision_path):
            issues.append(issue)
            revision = None
    status = doc.get("status")
    reason = doc.get("reason") if isinstance(doc.get("reason"), str) else None
    graph = StepGraph(status=status if status in ("ok", "blocked") else "ok", entry=None, scene_revision=revision,
                      run_id=run_id, reason=reason, prefix=prefix, revision_path=revision_path)
    if "status" not in doc:
        issues.append(_issue("required", f"{prefix}/status", "graph has no 'status' (ok or blocked)", missing="status"))
    elif status not in ("ok", "blocked"):
        issues.append(_issue("bad_value", f"{prefix}/status", f"status must be ok or blocked, got {status!r}",
                             allowed=("ok", "blocked")))
    _read_steps(doc, graph, limits, issues)
    if not any(issue.code == "too_many_steps" for issue in issues):  # else no step was read: edges say nothing
        _read_transitions(doc, graph, issues)
        _read_entry(doc, graph, issues)
    if issues and graph.status != "blocked":
        graph.broken = True
        raise PartlyRead(issues, _as_plan(graph))
    return _as_plan(graph)


def _envelope_fields(doc: dict, issues: list[Issue]) -> tuple[str | None, int | None]:
    run_id = doc.get("run_id")
    if run_id is not None and (not isinstance(run_id, str) or not run_id.strip()):
        issues.append(_issue("type", "/run_id", f"run_id must be a non-empty string, got {run_id!r}"))
        run_id = None
    revision = doc.get("scene_revision")
    if revision is not None and (issue := _revision_issue(revision, "/scene_revision")):
        issues.append(issue)
        revision = None
    return run_id, revision


def _response(response: object, limits: Limits, issues: list[Issue]) -> object:
    """The graph in a submit envelope: an object, or model output text holding one (one code fence allowed)."""
    if isinstance(response, dict):
        return response
    if not isinstance(response, str):
        issues.append(_issue("type", "/response", "response must be the graph as an object or as JSON text, got "
                                                  f"{type(response).__name__}"))
        return None
    try:
        graph = graph_in_response(response)
    except (ValueError, RecursionError) as exc:
        issues.append(_issue("json_syntax", "/response", f"response is not JSON text of a graph: {exc}"))
        return None
    if not isinstance(graph, dict):
        issues.append(_issue("type", "/response", "response must hold a JSON object"))
        return None
    problems = check_document(graph, limits, depth=1, at="response")  # its values, as if written in the envelope
    if problems:
        raise PlanError(issues + problems)
    return graph


def graph_in_response(response: str) -> object:
    """The JSON value a submit envelope's response text holds (in one code fence or none); ValueError if none,
    saying where in the response text it breaks."""
    fenced = _FENCE.match(response)
    start, end = fenced.span(1) if fenced else (0, len(response))
    body = response[start:end]
    start += len(body) - len(body.lstrip())
    try:
        return STRICT_JSON.decode(body.strip())
    except json.JSONDecodeError as exc:
        raise ValueError(f"{exc.msg} at {located(response, start + exc.pos)}") from None


def _read_steps(doc: dict, graph: StepGraph, limits: Limits, issues: list[Issue]) -> None:
    prefix = graph.prefix
    plan = doc.get("plan")
    if "plan" not in doc:
        issues.append(_issue("required", f"{prefix}/plan", "graph has no 'plan' (its list of steps)", missing="plan"))
        return
    if not isinstance(plan, list):
        issues.append(_issue("type", f"{prefix}/plan", "plan must be an array of steps", expected="array"))
        return
    if len(plan) > limits.max_graph_steps:
        issues.append(_issue("too_many_steps", f"{prefix}/plan",
                             f"{len(plan)} steps, over the limit of {limits.max_graph_steps}"))
        return
    for index, raw in enumerate(plan):
        path = f"{prefix}/plan/{index}"
        if not isinstance(raw, dict):
            issues.append(_issue("type", path, "a step must be an object", expected="object"))
            continue
        step_id, skill = raw.get("id"), raw.get("skill")
        if not isinstance(step_id, str) or not step_id.strip():
            issues.append(_issue("bad_value", f"{path}/id", f"step id must be a non-empty string, got {step_id!r}"))
            continue
        if step_id in TERMINALS:
            issues.append(_issue("bad_value", f"{path}/id", f"step id {step_id!r} is a terminal's name", [step_id]))
            continue
        if step_id in graph.steps:
            issues.append(_issue("duplicate_step", f"{path}/id", f"step id {step_id!r} is used twice", [step_id]))
            continue
        if not isinstance(skill, str) or not skill.strip():
            issues.append(_issue("bad_value", f"{path}/skill", f"step {step_id!r}: skill must be a non-empty string",
                                 [step_id]))
            skill = ""
        params, param_paths = _params(raw, path, step_id, issues)
        graph.steps[step_id] = Step(step_id, skill, params, path, param_paths)


def _params(raw: dict, path: str, step_id: str, issues: list[Issue]) -> tuple[dict, dict]:
    params = {key: value for key, value in raw.items() if key not in _STEP_KEYS}
    paths = {key: f"{path}/{escape(key)}" for key in params}
    args = raw.get("args", {})
    if not isinstance(args, dict):
        issues.append(_issue("type", f"{path}/args", f"step {step_id!r}: args must be an object", [step_id],
                             expected="object"))
        args = {}
    for key, value in args.items():
        if key in params and params[key] != value:
            issues.append(_issue("param_conflict", f"{path}/args/{escape(key)}",
                                 f"step {step_id!r}: {key} is {params[key]!r} on the step but {value!r} in args",
                                 [step_id]))
        if key not in params:
            params[key], paths[key] = value, f"{path}/args/{escape(key)}"
    refused = [key for key, value in params.items() if not isinstance(value, str) or not value.strip()]
    for key in refused:
        if not issues.dropped:
            issues.append(_issue("type", paths[key], f"step {step_id!r}: {key} must be a name, got {params[key]!r}",
                                 [step_id]))
        # Refused, its value is not read: a graph refused for it is still checked (refusal_issues) on names only;
        # its path stays, so that it is not reported missing as well.
        del params[key]
    return params, paths


def _read_transitions(doc: dict, graph: StepGraph, issues: list[Issue]) -> None:
    prefix = graph.prefix
    raw = doc.get("transitions")
    if "transitions" not in doc:
        issues.append(_issue("required", f"{prefix}/transitions", "graph has no 'transitions'", missing="transitions"))
        return
    edges: list[tuple[object, object, object, str]] = []
    if isinstance(raw, dict):
        for source, by_event in raw.items():
            if not isinstance(by_event, dict):
                issues.append(_issue("type", f"{prefix}/transitions/{escape(source)}",
                                     f"transitions of step {source!r} must map events to next steps", [source]))
                continue
            here = f"{prefix}/transitions/{escape(source)}"
            edges += [(source, event, target, f"{here}/{escape(event)}") for event, target in by_event.items()]
    elif isinstance(raw, list):
        graph.edge_list = True
        for index, edge in enumerate(raw):
            path = f"{prefix}/transitions/{index}"
            if not isinstance(edge, dict) or not {"from", "event", "to"} <= edge.keys():
                issues.append(_issue("type", path, "an edge must be an object with from, event and to",
                                     expected="object"))
                continue
            edges.append((edge["from"], edge["event"], edge["to"], path))
    else:
        issues.append(_issue("type", f"{prefix}/transitions", "transitions must be a map or an edge list"))
        return
    for source, event, target, path in edges:
        if issues.dropped:
            return
        if not (isinstance(source, str) and isinstance(event, str) and isinstance(target, str)):
            # in a map, only the target may be something else, and the path leads to it
            issues.append(_issue("type", path, "from, event and to must be strings",
                                 expected=None if graph.edge_list else "string"))
            continue
        if source not in graph.steps:
            issues.append(_issue("unknown_step", path, f"{_where(source, event, target)}: there is no step {source!r}",
                                 [source], unknown=source))
            continue
        if target not in graph.steps and target not in TERMINALS:
            issues.append(_issue("unknown_step", path, f"{_where(source, event, target)}: {target!r} is neither a step "
                                                       f"nor a terminal ({', '.join(TERMINALS)})", [source],
                                 unknown=target))
            graph.refused_edges.add((source, event))
            continue
        mapped = graph.transitions.setdefault(source, {})
        if event in mapped and mapped[event] != target:
            issues.append(_issue("duplicate_transition", path, f"{_where(source, event, target)}: event {event!r} "
                                                               f"already leads to {mapped[event]!r}", [source]))
            continue
        mapped[event] = target
        graph.edge_paths[(source, event)] = path


def _where(source: str, event: str, target: str) -> str:
    return f"step {source!r} transition {event!r} -> {target!r}"


def _read_entry(doc: dict, graph: StepGraph, issues: list[Issue]) -> None:
    entry = doc.get("entry")
    path = f"{graph.prefix}/entry"
    if "entry" not in doc:
        issues.append(_issue("required", path, "graph has no 'entry' step", missing="entry"))
    elif not isinstance(entry, str) or entry not in graph.steps:
        issues.append(_issue("unknown_step", path, f"entry {entry!r} is not a step of the plan",
                             unknown=entry if isinstance(entry, str) else None))
    else:
        graph.entry = entry


def _as_plan(graph: StepGraph) -> Plan:
    ops = {}
    for step in graph.steps.values():
        shown = ", ".join(str(step.params[key]) for key in PARAMS if key in step.params)
        ops[step.step_id] = Op(step.step_id, "step", f"{step.skill}({shown})", cap=step.skill,
                               args=dict(step.params), path=step.path)
    description = f"{len(ops)}-step graph from {graph.entry}" if graph.entry else "step graph"
    return Plan(dialect="qwen3", shape="envelope" if graph.prefix else "graph", root=graph.entry or "",
                ops=ops, description=description, depth=0, numbered_by_loader=False,
                meta={"run_id": graph.run_id, "scene_revision": graph.scene_revision, "status": graph.status,
                      "reason": graph.reason},
                steps=graph)


def _issue(code: str, path: str, message: str, steps=(), **known) -> Issue:
    """An issue about ``steps``; ``known``: what the repairs work from (Issue's allowed, expected, missing ...)."""
    return Issue(code, path, message, tuple(steps), **known)


def _revision_issue(value: object, path: str) -> Issue | None:
    """What is wrong with a scene_revision: not an integer, or one no door's wire type (ROS int64) carries."""
    if not isinstance(value, int) or isinstance(value, bool):
        return _issue("type", path, f"scene_revision must be an integer, got {number_shown(value)}", expected="integer")
    if not INT64_MIN <= value <= INT64_MAX:
        return _issue("bad_value", path, f"scene_revision must be a 64-bit signed integer, got {number_shown(value)}")
    return None
