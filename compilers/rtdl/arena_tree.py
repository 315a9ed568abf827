"""Whether a wire arena's child indices make one tree from its root and, when they do not, what is wrong: a
node listing itself, a node reached twice, cycles, nodes never reached, nesting past the depth limit."""
from __future__ import annotations

import networkx as nx

from bt_exec.errors import Issue, Issues

from ..ir import Op
from ..limits import Limits
from .ops import is_int


def walk_arena_tree(nodes: list, ops: list[Op], root_index: int, max_depth: int) -> tuple[dict[str, Op], int] | None:
    """The ops of a sound arena by id in pre-order, each given its children's ids, and its depth: one walk
    from the root that meets every node once, with unique op ids, within ``max_depth``. None when it is not
    so: the checks of ``_arena_plan`` then say what is wrong (and set every op's children again)."""
    seen = bytearray(len(nodes))
    seen[root_index] = 1
    by_id: dict[str, Op] = {}
    visited = depth = 0
    stack = [(root_index, 1)]
    push, pop = stack.append, stack.pop
    while stack:
        index, level = pop()
        op = ops[index]
        by_id[op.op_id] = op
        visited += 1
        if level > depth:
            depth = level
        children = nodes[index]["children"]
        if children:  # a do node's op keeps the empty list it was made with
            for child in children:
                if seen[child]:
                    return None
                seen[child] = 1
            op.children = [ops[child].op_id for child in children]
            level += 1
            for child in reversed(children):
                push((child, level))
    if visited < len(nodes) or len(by_id) < visited or depth > max_depth:
        return None
    return by_id, depth


def check_arena_graph(nodes: list, root_index: int, limits: Limits, issues: list[Issue]) -> tuple[list[int], int]:
    """Check the arena is one tree rooted at root_index; return its pre-order and depth.

    Linear time: one pass over the edges for nodes listed twice, one pre-order walk
    from the root. With no node listed twice and the root listed nowhere, that walk
    visits each reachable node once and a tree is exactly an arena it visits whole.
    Only when it is not a tree is the networkx DiGraph built, once, to name what is
    wrong: strongly connected components for cycles, then the nodes left unreached.
    """
    if _listed_once(nodes, root_index):
        return _tree_order(nodes, root_index, limits, issues)
    first_listed: dict[int, tuple[int, int] | None] = {root_index: None}  # child -> (parent, position); root: None
    for index, node in enumerate(nodes):
        for position, child in enumerate(node["children"]):
            if child == index:
                issues.append(Issue("cycle", f"nodes[{index}].children[{position}]",
                                    f"node {index} lists itself as a child"))
            elif child in first_listed:
                first = first_listed[child]
                also = "root_index" if first is None else f"nodes[{first[0]}].children[{first[1]}]"
                issues.append(Issue("reached_twice", f"nodes[{index}].children[{position}]",
                                    f"node {child} is reached more than once (also from {also})"))
            else:
                first_listed[child] = (index, position)
            if issues.dropped:
                return [], 0
    if issues:  # already no tree: name the cycles too, the cost no longer matters
        issues.extend(_cycle_issues(_digraph(nodes), set()))
        return [], 0
    return _tree_order(nodes, root_index, limits, issues)


def cycles_among_faults(nodes: list) -> list[Issue]:
    """The cycles of an arena whose nodes have faults of their own, over the child indices that are sound: a
    cycle is named as one whatever else is wrong. (A node reached twice or not at all may follow from a
    faulty node; those are told once the nodes are sound.)"""
    count = len(nodes)
    issues = Issues()
    sound = []
    for index, node in enumerate(nodes):
        children = node.get("children") if type(node) is dict else None
        kept = []
        for position, child in enumerate(children if type(children) is list else ()):
            if not is_int(child) or not 0 <= child < count:
                continue
            if child == index:
                issues.append(Issue("cycle", f"nodes[{index}].children[{position}]",
                                    f"node {index} lists itself as a child"))
            else:
                kept.append(child)
        sound.append({"children": kept})
    issues.extend(_cycle_issues(_digraph(sound), set()))
    return issues


def _listed_once(nodes: list, root_index: int) -> bool:
    """Whether no node lists itself, none is listed twice and the root is listed nowhere."""
    listed = [False] * len(nodes)
    listed[root_index] = True
    for index, node in enumerate(nodes):
        for child in node["children"]:
            if listed[child] or child == index:
                return False
            listed[child] = True
    return True


def _tree_order(nodes: list, root_index: int, limits: Limits, issues: list[Issue]) -> tuple[list[int], int]:
    """Pre-order and depth of an arena whose nodes are each listed once at most; issues when it is no tree."""
    order: list[int] = []
    depth = deepest = 0
    stack = [(root_index, 1)]
    while stack:
        index, level = stack.pop()
        order.append(index)
        if level > depth:
            depth, deepest = level, index
        for child in reversed(nodes[index]["children"]):
            stack.append((child, level + 1))
    if len(order) < len(nodes):
        reached = set(order)
        unreached = _digraph(nodes).subgraph(index for index in range(len(nodes)) if index not in reached)
        on_cycles: set[int] = set()
        issues.extend(_cycle_issues(unreached, on_cycles))
        for index in sorted(set(unreached) - on_cycles):
            issues.append(Issue("unreachable", f"nodes[{index}]",
                                f"node {index} is not reachable from root_index {root_index}"))
        return [], 0
    if depth > limits.max_depth:
        issues.append(Issue("too_deep", f"nodes[{deepest}]",
                            f"node {deepest} is {depth} levels deep, over the limit of {limits.max_depth}"))
        return [], depth
    return order, depth


def _digraph(nodes: list) -> nx.DiGraph:
    graph = nx.DiGraph()
    graph.add_nodes_from(range(len(nodes)))
    graph.add_edges_from((index, child) for index, node in enumerate(nodes) for child in node["children"])
    return graph


def _cycle_issues(graph: nx.DiGraph, on_cycles: set[int]) -> list[Issue]:
    """One issue per cycle of two or more nodes (strongly connected components, linear time).

    Adds the nodes found on cycles to ``on_cycles``.
    """
    issues = Issues()
    for component in nx.strongly_connected_components(graph):
        if len(component) > 1:
            on_cycles.update(component)
            members = sorted(component)
            shown = ", ".join(str(m) for m in members[:8]) + (" ..." if len(members) > 8 else "")
            issues.append(Issue("cycle", f"nodes[{members[0]}]", f"nodes {shown} form a cycle"))
    return issues
