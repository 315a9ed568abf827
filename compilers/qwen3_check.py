"""Static safety verification of step graphs before motion, with linear-time graph algorithms.

Verdicts: ``blocked`` (the model refused; decided first), ``invalid`` (structure
or safety broken), ``replan_required`` (sound, but a precondition fails from
the current scene's state on some path), ``ok``. Every issue names its steps.
"""
from __future__ import annotations

import dataclasses
from collections import deque

import networkx as nx

from bt_exec.errors import Issue, Issues

from .ir import Plan
from .qwen3 import StepGraph
from .qwen3_fixes import step_insertion
from .scene import PATRON, Scene
from .skill_catalog import TERMINALS, SkillCatalog
from .symbolic import HAND, MODES, UNKNOWN, Abstract

REPLAN_CODES = frozenset(("precondition_fails_in_scene",))


def verdict_of(plan: Plan, issues: list[Issue]) -> str:
    if plan.steps.status == "blocked":
        return "blocked"
    if any(issue.code not in REPLAN_CODES and issue.code != "too_many_issues" for issue in issues):
        return "invalid"
    return "replan_required" if issues else "ok"


def check_graph(plan: Plan, catalog: SkillCatalog, scene: Scene | None) -> list[Issue]:
    """Every issue of a loaded step graph against the catalog and, when given, the scene. Of a graph refused
    for its shape (``broken``: read with its refused edges left out), the issues the edges left out cannot
    make up: not reachability nor a way out, nor an outcome whose edge was refused."""
    graph: StepGraph = plan.steps
    if graph.status == "blocked":
        return []
    issues = Issues()
    skills = _check_skills(graph, catalog, issues)
    if scene is not None:
        _check_revision(graph, scene, issues)
    _check_params(graph, catalog, skills, scene, issues)
    _check_events(graph, catalog, skills, issues)
    digraph = _digraph(graph)
    if not graph.broken:  # an edge left out would make steps look unreachable or stuck
        _check_reachability(graph, digraph, issues)
    _check_failure_edges(graph, catalog, skills, issues)
    _check_after_collision(graph, catalog, skills, digraph, issues)
    if not graph.broken:
        _check_way_out(graph, digraph, issues)
    _check_tool_returns(graph, catalog, skills, issues)
    if not issues and not graph.broken:  # the meaning of every step is known: follow the symbolic state
        _check_preconditions(graph, catalog, skills, scene, issues)
    return issues.listed()


def _issue(code: str, path: str, message: str, steps, **known) -> Issue:
    """An issue about ``steps`` (each once, first mention first); ``known``: what the repairs work from."""
    return Issue(code, path, message, tuple(dict.fromkeys(steps)), **known)


def _check_skills(graph: StepGraph, catalog: SkillCatalog, issues: list[Issue]) -> dict:
    """Canonical skill of every step whose skill the catalog knows."""
    skills = {}
    for step in graph.steps.values():
        name = catalog.resolve(step.skill)
        if name is not None:
            skills[step.step_id] = catalog.skills[name]
        elif step.skill in catalog.unsupported:
            issues.append(_issue("unsupported_skill", f"{step.path}/skill",
                                 f"step {step.step_id!r}: skill {step.skill!r} is not supported by catalog "
                                 f"{catalog.name}: {catalog.unsupported[step.skill]}", [step.step_id]))
        elif step.skill:
            known = ", ".join(sorted(catalog.skills) + sorted(catalog.aliases))
            issues.append(_issue("unknown_skill", f"{step.path}/skill",
                                 f"step {step.step_id!r}: unknown skill {step.skill!r} (catalog {catalog.name} has: "
                                 f"{known})",
                                 [step.step_id]))
    return skills


def _check_revision(graph: StepGraph, scene: Scene, issues: list[Issue]) -> None:
    path = graph.revision_path
    if graph.scene_revision is None:
        issues.append(_issue("revision_missing", path, f"the graph names no scene_revision; the scene is at "
                                                       f"revision {scene.revision}", []))
    elif graph.scene_revision != scene.revision:
        issues.append(_issue("stale_revision", path, f"the graph was planned on scene_revision {graph.scene_revision}, "
                                                     f"the scene is at revision {scene.revision}: plan again", []))


def _check_params(graph, catalog: SkillCatalog, skills, scene, issues) -> None:
    for step_id, skill in skills.items():
        step = graph.steps[step_id]
        where = f"step {step_id!r} ({step.skill})"
        for key, value in step.params.items():
            spec = skill.params.get(key)
            path = step.param_paths.get(key, step.path)
            if spec is None:
                issues.append(_issue("unknown_param", path, f"{where} takes no {key!r} "
                                                            f"(it takes: {', '.join(skill.params) or 'nothing'})",
                                     [step_id]))
                continue
            if not isinstance(value, str):
                continue  # reported by the loader
            is_target = key == "target"
            kind = catalog.target_type(value) if is_target else catalog.object_type(value)
            noun = "target" if is_target else "object"
            if kind is None:
                issues.append(_issue(f"unknown_{noun}", path, f"{where}: unknown {noun} {value!r}", [step_id]))
            elif kind not in spec["types"]:
                issues.append(_issue(f"wrong_{noun}_type", path, f"{where}: {key} {value!r} is a {kind}; "
                                                                f"{step.skill} takes a {' or '.join(spec['types'])}",
                                     [step_id]))
            elif scene is not None and value not in (scene.targets if is_target else scene.objects):
                issues.append(_issue("not_in_scene", path, f"{where}: {noun} {value!r} is not in the scene", [step_id]))
            if spec.get("must_be") == "tool_of_object" and kind is not None:
                own = catalog.tool_of(step.params.get("object", ""))
                if own != value:
                    issues.append(_issue("wrong_tool", path, f"{where}: {step.params.get('object')!r} is grabbed with "
                                                             f"{own!r}, not {value!r}", [step_id]))
        for key, spec in skill.params.items():
            if not spec.get("optional") and key not in step.param_paths:
                issues.append(_issue("missing_param", step.path, f"{where} needs {key!r}", [step_id], missing=key))
        if skill.one_of and sum(key in step.param_paths for key in skill.one_of) != 1:
            issues.append(_issue("missing_param", step.path, f"{where} needs exactly one of {', '.join(skill.one_of)}",
                                 [step_id]))


def _check_events(graph: StepGraph, catalog: SkillCatalog, skills, issues) -> None:
    refused_by_step: dict[str, set] = {}
    for source, event in graph.refused_edges:
        refused_by_step.setdefault(source, set()).add(event)
    for step_id, skill in skills.items():
        mapped = graph.transitions.get(step_id, {})
        for event in mapped:
            if event not in skill.outcomes:
                issues.append(_issue("unknown_event", graph.edge_paths[(step_id, event)],
                                     f"step {step_id!r} transition {event!r}: {graph.steps[step_id].skill} has no such "
                                     f"outcome (its outcomes: {', '.join(skill.outcomes)})", [step_id]))
        refused = refused_by_step.get(step_id, ())
        if not mapped and not refused:
            issues.append(_issue("no_transitions", graph.steps[step_id].path, f"step {step_id!r} has no transitions",
                                 [step_id]))
            continue
        for event in skill.required:
            if event not in mapped and event not in refused:
                issues.append(_issue("missing_transition", graph.steps[step_id].path,
                                     f"step {step_id!r} ({graph.steps[step_id].skill}) needs a transition for outcome "
                                     f"{event!r}", [step_id], missing=event))


def _digraph(graph: StepGraph) -> nx.DiGraph:
    """Steps and terminals as nodes; an edge where any outcome of a step leads to another."""
    digraph = nx.DiGraph()
    digraph.add_nodes_from(graph.steps)
    digraph.add_edges_from((source, target) for source, mapped in graph.transitions.items()
                           for target in mapped.values())
    return digraph


def _check_reachability(graph: StepGraph, digraph: nx.DiGraph, issues) -> None:
    reached = nx.descendants(digraph, graph.entry) | {graph.entry}
    for step_id, step in graph.steps.items():
        if step_id not in reached:
            issues.append(_issue("unreachable", step.path, f"step {step_id!r} cannot be reached from entry "
                                                           f"{graph.entry!r}", [step_id]))


def _check_failure_edges(graph: StepGraph, catalog: SkillCatalog, skills, issues) -> None:
    for step_id, skill in skills.items():
        for event, target in graph.transitions.get(step_id, {}).items():
            path = graph.edge_paths[(step_id, event)]
            if target == "completed" and catalog.is_failure(event):
                issues.append(_issue("failure_to_completed", path, f"step {step_id!r} transition {event!r} -> "
                                                                   f"'completed': a failure never completes the graph",
                                     [step_id]))
            uncertain = event in skill.uncertain_after or (skill.observes and event == "unknown")
            if uncertain and target in graph.steps:
                next_skill = skills.get(target)
                if next_skill is None or not next_skill.observes:
                    issues.append(_issue("uncertain_ownership", path,
                                         f"step {step_id!r} transition {event!r} -> {target!r}: after {event} it is "
                                         f"unknown what the robot holds; the next step must be inspect_state or a "
                                         f"terminal", [step_id, target]))


def _check_after_collision(graph: StepGraph, catalog, skills, digraph: nx.DiGraph, issues) -> None:
    """No motion step reachable after any collision: one multi-source search back from every motion step
    (linear time) finds, for each step, the nearest motion step it leads to; every collision edge is judged."""
    leads_to: dict[str, str] = {}
    queue: deque = deque()
    for step_id in graph.steps:
        skill = skills.get(step_id)
        if skill is not None and skill.motion:
            leads_to[step_id] = step_id
            queue.append(step_id)
    while queue:
        current = queue.popleft()
        for before in digraph.predecessors(current):
            if before not in leads_to:
                leads_to[before] = leads_to[current]
                queue.append(before)
    for source in graph.steps:
        target = graph.transitions.get(source, {}).get("collision")
        if target in leads_to:
            moving = leads_to[target]
            issues.append(_issue("motion_after_collision", graph.edge_paths[(source, "collision")],
                                 f"step {source!r} transition 'collision' leads to motion: step {moving!r} "
                                 f"({graph.steps[moving].skill}) moves the robot; after a collision only "
                                 f"non-motion steps and terminals may follow", [source, moving]))


def _check_way_out(graph: StepGraph, digraph: nx.DiGraph, issues) -> None:
    """Steps from which no terminal can be reached (co-reachability), reported per cycle."""
    terminals = [t for t in TERMINALS if t in digraph]
    can_finish = set()
    reverse = digraph.reverse(copy=False)
    for terminal in terminals:
        can_finish |= nx.descendants(reverse, terminal)
    stuck = [step_id for step_id in graph.steps if step_id not in can_finish and graph.transitions.get(step_id)]
    if not stuck:
        return
    for component in nx.strongly_connected_components(digraph.subgraph(stuck)):
        members = [s for s in graph.steps if s in component]
        looped = len(members) > 1 or digraph.has_edge(members[0], members[0])
        what = "a cycle with no way out" if looped else "a dead end"
        issues.append(_issue("no_way_out", graph.steps[members[0]].path,
                             f"steps {', '.join(repr(m) for m in members)} form {what}: no terminal can be reached "
                             f"from them", members))


def _check_tool_returns(graph: StepGraph, catalog: SkillCatalog, skills, issues) -> None:
    """A tool goes back only into its own socket, and only directly after a transfer there."""
    predecessors: dict[str, list[tuple[str, str]]] = {}
    for source, mapped in graph.transitions.items():
        for event, target in mapped.items():
            predecessors.setdefault(target, []).append((source, event))
    for step_id, skill in skills.items():
        step = graph.steps[step_id]
        tool = step.params.get("object")
        if not skill.returns_tool or catalog.object_type(tool or "") != "tool":
            continue
        socket = catalog.socket_of(tool)
        target = step.params.get("target")
        if target != socket:
            issues.append(_issue("tool_not_in_socket", step.path,
                                 f"step {step_id!r}: {step.skill}({tool}) must put {tool} into its socket {socket!r}, "
                                 f"not {target or 'wherever the robot is'}: {step.skill} does not carry the tool "
                                 f"anywhere", [step_id]))
            continue
        bad = [(source, event) for source, event in predecessors.get(step_id, [])
               if not _transfers_to(graph.steps[source], skills.get(source), event, tool, socket, catalog)]
        if step_id == graph.entry or bad:
            came = ", ".join(f"{s!r} on {e!r}" for s, e in bad) or "the entry"
            issues.append(_issue("no_transfer_before_return", step.path,
                                 f"step {step_id!r}: {step.skill}({tool}, {socket}) must come directly after a "
                                 f"successful transfer({tool}, {socket}); it is reached from {came}",
                                 [step_id] + [s for s, _ in bad]))


def _transfers_to(step, skill, event, tool, socket, catalog) -> bool:
    if skill is None or event != "success" or step.params.get("object") != tool:
        return False
    if skill.name == "transfer":
        return step.params.get("target") == socket
    return skill.name == "move_to_storage" and catalog.storage.get(tool) == socket


def _check_preconditions(graph: StepGraph, catalog: SkillCatalog, skills, scene: Scene | None, issues) -> None:
    """Propagate the symbolic state along every path to a fixed point, from every start and from the scene."""
    kinds = {}
    for step in graph.steps.values():
        for key in ("object", "tool"):
            name = step.params.get(key)
            kind = catalog.object_type(name) if name else None
            if kind in MODES:
                kinds[name] = kind
                tool = catalog.tool_of(name)
                if tool:
                    kinds[tool] = "tool"
    if scene is not None:
        for obj, where in scene.state.items():
            kind = catalog.object_type(obj)
            if kind in MODES and where in (PATRON, HAND, UNKNOWN):
                kinds[obj] = kind
        if scene.holding and catalog.object_type(scene.holding) in MODES:
            kinds[scene.holding] = catalog.object_type(scene.holding)
    model = Abstract(catalog, kinds)
    # Each object's modes move on independently of the others' (and every transfer function distributes
    # over the join), so the fixed points from starts 0 and 1 tell for each object whether some start
    # keeps a precondition from failing on every path.
    propagate = _Propagation(graph, skills, model)  # edge tables shared by the three starts
    first, second = (propagate(model.start(index)) for index in (0, 1))
    never = set()
    for step_id, state in first.items():
        step, skill = graph.steps[step_id], skills[step_id]
        other = {f.predicate: {obj for obj, _ in f.culprits}
                 for f in model.preconditions(skill, step.params, second[step_id])}
        for failure in model.preconditions(skill, step.params, state):
            if not {obj for obj, _ in failure.culprits} & other.get(failure.predicate, set()):
                continue  # from some start it holds on every path to the step
            never.add(step_id)
            issues.append(_issue("precondition_never_holds", step.path,
                                 f"step {step_id!r} ({step.skill}): {failure.describe()}, and from any starting "
                                 f"scene some path to it leaves it unmet", [step_id]))
    if scene is None:
        return
    start = model.from_scene(scene)
    states, searches = propagate(start), {}
    for step_id in graph.steps:
        if step_id in never or step_id not in states:
            continue
        for failure in model.preconditions(skills[step_id], graph.steps[step_id].params, states[step_id]):
            obj, bad = failure.culprits[0]
            path = _failing_path(graph, skills, model, start, obj, bad, step_id, searches)
            issue = _issue("precondition_fails_in_scene", graph.steps[step_id].path,
                           f"step {step_id!r} ({graph.steps[step_id].skill}): {failure.describe()}, but from the "
                           f"current scene it is not on the path {' -> '.join(path)}: plan again from "
                           f"this scene", path)
            fix = _taking_step(graph, catalog, failure, step_id, path)
            issues.append(dataclasses.replace(issue, fix=fix) if fix else issue)


def _taking_step(graph: StepGraph, catalog: SkillCatalog, failure, step_id: str, path: list[str]) -> list | None:
    """The step to insert when what fails is that a tool is not on the flange: one that takes the tool
    (grab(vacuum) before grab(cap)), on the path that reaches the step without it."""
    if failure.predicate not in ("own_tool_in_patron", "carried") or catalog.object_type(failure.subject) != "tool":
        return None
    taker = next((skill for skill in catalog.skills.values()
                  if any("take" in effect for effect in skill.effects)
                  and "tool" in skill.params.get("object", {}).get("types", ())), None)
    if taker is None:
        return None
    return step_insertion(graph, step_id, path, taker.name, failure.subject, taker.required)


class _Propagation:
    """Fixed points of one graph under one model, from any start, with states as bit sets.

    One bit per (object, mode). An object's modes after a step depend only on its own modes before it,
    mode by mode (every transfer function distributes over the join), so each edge is a table from each
    bit to the bits it becomes, read once off ``model.after`` on one state per mode index, and the join
    is a bitwise or; the edges from one step to one target join into one (the union of their
    tables). The fixed point does not depend on the order steps are revisited in, and steps enter the
    result in the order they are first reached (breadth first), so the states come out as the worklist
    over ``model.after`` states gives them: the same sets, in the same order.
    """

    def __init__(self, graph: StepGraph, skills, model: Abstract):
        self.graph, self.skills, self.model = graph, skills, model
        self.objects = list(model.kinds)
        self.bit: dict = {}  # (object, mode) -> its bit
        modes = {obj: MODES[kind] for obj, kind in model.kinds.items()}
        probes = [{obj: frozenset((m[min(i, len(m) - 1)],)) for obj, m in modes.items()}
                  for i in range(max(map(len, modes.values()), default=0))]
        self.probes = [(probe, self._encode(probe)) for probe in probes]
        self.edges: dict = {}  # step id -> [(target step, bits that stay, [(bit, the bits it becomes)])]
        self.tables: dict = {}  # (skill, event, params) -> (bits that stay, [(bit, the bits it becomes)])

    def __call__(self, start) -> dict:
        """Entry state of every reachable step from ``start``, a state of the objects the model follows."""
        entry = self.graph.entry
        values = {entry: self._encode(start)}
        queue = deque([entry])
        queued = {entry}
        while queue:
            step_id = queue.popleft()
            queued.discard(step_id)
            edges = self.edges.get(step_id)
            if edges is None:
                edges = self.edges[step_id] = self._edges_of(step_id)
            for target, keep, moves in edges:
                value = values[step_id]
                after = value & keep
                for source, image in moves:
                    if value & source:
                        after |= image
                before = values.get(target)
                joined = after if before is None else before | after
                if joined != before:
                    values[target] = joined
                    if target not in queued:
                        queued.add(target)
                        queue.append(target)
        modes: dict = {obj: [] for obj in self.objects}
        for (obj, mode), bit in self.bit.items():
            modes[obj].append((mode, bit))
        decoded = {value: {obj: frozenset(mode for mode, bit in modes[obj] if value & bit) for obj in self.objects}
                   for value in set(values.values())}
        return {step_id: dict(decoded[value]) for step_id, value in values.items()}

    def _bits(self, obj: str, modes) -> int:
        value = 0
        for mode in modes:
            value |= self.bit.get((obj, mode)) or self.bit.setdefault((obj, mode), 1 << len(self.bit))
        return value

    def _encode(self, state) -> int:
        value = 0
        for obj in self.objects:
            value |= self._bits(obj, state[obj])
        return value

    def _edges_of(self, step_id: str) -> list:
        skill, params = self.skills[step_id], self.graph.steps[step_id].params
        try:
            shared = frozenset(params.items())
        except TypeError:  # a parameter that is no name: nothing to share
            shared = None
        edges: dict = {}  # target -> (bits that stay, moves): the edges to one step join into one
        for event, target in self.graph.transitions.get(step_id, {}).items():
            if target not in self.graph.steps:
                continue
            key = (id(skill), event, shared)
            table = self.tables.get(key) if shared is not None else None
            if table is None:
                table = self._table(skill, params, event)
                if shared is not None:
                    self.tables[key] = table
            if target in edges:
                keep, moves = edges[target]
                table = (keep | table[0], moves + [move for move in table[1] if move not in moves])
            edges[target] = table
        return [(target, keep, moves) for target, (keep, moves) in edges.items()]

    def _table(self, skill, params: dict, event: str) -> tuple:
        keep, moves = 0, []
        for probe, everything in self.probes:
            after = self.model.after(skill, params, event, probe)
            keep |= everything
            if after is probe:
                continue
            for obj in self.objects:
                if after[obj] is not probe[obj]:
                    source = self._bits(obj, probe[obj])
                    keep &= ~source
                    moves.append((source, self._bits(obj, after[obj])))
        return keep, moves


class _ModeSearch:
    """Breadth-first search over (step, mode of one object) pairs from the entry, linear in the graph. It
    runs only as far as a question needs and keeps its place, so every failing step of one object shares
    one search; each answer is the path a fresh search stopping at that step would give."""

    def __init__(self, graph: StepGraph, skills, model: Abstract, start, obj: str):
        self.graph, self.skills, self.model, self.start, self.obj = graph, skills, model, start, obj
        self.parent = {(graph.entry, mode): None for mode in sorted(start[obj])}  # sorted: sets follow string hashes
        self.queue = deque(self.parent)
        self.taken: dict = {}  # node -> when it left the queue
        self.unexpanded = None  # the node the last answer stopped at
        self.modes_after: dict = {}  # (skill, event, params, mode) -> modes of obj after that step

    def path(self, step_id: str, bad: frozenset) -> list[str]:
        seen = [(self.taken[(step_id, mode)], (step_id, mode)) for mode in bad if (step_id, mode) in self.taken]
        if seen:
            return self._path(min(seen)[1])
        if self.unexpanded is not None:
            self._expand(self.unexpanded)
            self.unexpanded = None
        while self.queue:
            node = self.queue.popleft()
            self.taken[node] = len(self.taken)
            if node[0] == step_id and node[1] in bad:
                self.unexpanded = node
                return self._path(node)
            self._expand(node)
        return [step_id]  # not reached: the fixed point says it is, so this does not happen

    def _expand(self, node) -> None:
        current, mode = node
        skill, params = self.skills[current], self.graph.steps[current].params
        try:
            shared = frozenset(params.items())
        except TypeError:  # a parameter that is no name: nothing to share
            shared = None
        for event, target in self.graph.transitions.get(current, {}).items():
            if target not in self.graph.steps:
                continue
            key = (id(skill), event, shared, mode)
            modes = self.modes_after.get(key) if shared is not None else None
            if modes is None:
                modes = self.model.after(skill, params, event, {**self.start, self.obj: frozenset((mode,))})[self.obj]
                if shared is not None:
                    self.modes_after[key] = modes
            for following in sorted(modes):
                if (target, following) not in self.parent:
                    self.parent[(target, following)] = node
                    self.queue.append((target, following))

    def _path(self, node) -> list[str]:
        path = []
        while node is not None:
            path.append(node[0])
            node = self.parent[node]
        return list(reversed(path))


def _failing_path(graph: StepGraph, skills, model: Abstract, start, obj: str, bad: frozenset, step_id: str,
                  searches: dict | None = None) -> list[str]:
    """A shortest path from the entry on which ``obj`` reaches ``step_id`` in one of the ``bad`` modes:
    breadth-first over (step, mode of obj) pairs, linear in the graph. ``searches`` (object -> search)
    lets the failing steps of one start share the search of each object."""
    search = searches.get(obj) if searches is not None else None
    if search is None:
        search = _ModeSearch(graph, skills, model, start, obj)
        if searches is not None:
            searches[obj] = search
    return search.path(step_id, bad)
