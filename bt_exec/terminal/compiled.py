"""``bt-exec compile``'s views of a compiled plan: its behaviour tree as text (ASCII or box-drawing
characters) or as Graphviz DOT; a step graph also with its transitions, drawn in DOT as labelled edges.

Each line or node is one behaviour of the compiled tree, named ``[op id] description``; a do op adds its
call (``cap {args}``), a BT.CPP node the node it runs and its literal ports (``Repeat {num_cycles}``), cut to
``CALL_CHARS``.
"""
from __future__ import annotations

import json
from dataclasses import dataclass

from .render import one_line, shortened

# How each kind of op is marked on its line (py_trees' marks: a sequence, a parallel, a leaf).
KIND_SYMBOLS = {"sequence": "{-}", "parallel": "/_/", "do": "-->", "step": "-->", "control": "{-}"}
# Longest call shown after a do op's description: its cap and the start of its args.
CALL_CHARS = 80
DOT_SHAPES = {"sequence": "box", "parallel": "parallelogram", "do": "ellipse", "step": "box", "control": "box"}


@dataclass(frozen=True)
class TextStyle:
    branch: str       # the lead of a child's line that has siblings after it
    last: str         # the lead of a last child's line
    through: str      # under a child with siblings after it: the lead its own children's lines continue
    under_last: str   # under a last child
    dash: str         # between a description and its call
    arrow: str        # in a transition: step -> outcome -> next
    ellipsis: str


ASCII = TextStyle("    ", "    ", "    ", "    ", "--", "->", "...")
UNICODE = TextStyle("├── ", "└── ", "│   ", "    ", "—", "→", "…")


def _call(op, ellipsis: str) -> str | None:
    """``cap {args}`` of a do op (``cap`` alone without args), ``node {args}`` of a BT.CPP node, cut to
    CALL_CHARS; None for other ops."""
    if op is None or op.kind not in ("do", "control"):
        return None
    what = op.cap if op.kind == "do" else op.node
    text = one_line(what) + (f" {json.dumps(op.args, ensure_ascii=False)}" if op.args else "")
    return shortened(one_line(text), CALL_CHARS, ellipsis)


def _behaviours(compiled):
    """(behaviour, its op or None, depth, is the last of its siblings) for every behaviour, in pre-order."""
    op_of = {id(behaviour): compiled.plan.ops[op_id] for op_id, behaviour in compiled.ops.items()}
    stack = [(compiled.root, 0, True)]
    while stack:
        behaviour, depth, last = stack.pop()
        yield behaviour, op_of.get(id(behaviour)), depth, last
        children = getattr(behaviour, "children", None) or []
        for index in range(len(children) - 1, -1, -1):
            stack.append((children[index], depth + 1, index == len(children) - 1))


def tree_text(compiled, style: TextStyle = ASCII) -> str:
    """The tree, one line per behaviour; a step graph's steps, then its transitions ``s1 -> success -> s2``."""
    lines = []
    leads: list[str] = []  # the lead of the children's lines at each depth
    for behaviour, op, depth, last in _behaviours(compiled):
        del leads[depth:]
        lead = "" if depth == 0 else leads[depth - 1] + (style.last if last else style.branch)
        leads.append("" if depth == 0 else leads[depth - 1] + (style.under_last if last else style.through))
        call = _call(op, style.ellipsis)
        symbol = KIND_SYMBOLS.get(op.kind, "-->") if op is not None else "-->"
        lines.append(f"{lead}{symbol} {behaviour.name}" + (f" {style.dash} {call}" if call else ""))
    graph = compiled.plan.steps
    if graph is not None:
        edges = [(step, outcome, target) for step, outcomes in graph.transitions.items()
                 for outcome, target in outcomes.items()]
        lines.append(f"transitions ({len(edges)}):")
        lines += [f"    {one_line(step)} {style.arrow} {one_line(outcome)} {style.arrow} {one_line(target)}"
                  for step, outcome, target in edges]
    return "\n".join(lines)


def dot_id(text: str) -> str:
    """``text`` as a quoted DOT identifier."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _label(*lines: str) -> str:
    return "\\n".join(dot_id(line)[1:-1] for line in lines)


def dot_text(compiled) -> str:
    """Graphviz source, the graph named after the plan's description. A tree: one node per op, an edge to
    each child in order. A step graph: one node per step, an edge per transition labelled with its outcome,
    each terminal reached a node of its own, and the entry marked by an arrow from a dot."""
    plan = compiled.plan
    lines = [f"digraph {dot_id(one_line(plan.description))} {{",
             '  node [fontname="sans-serif", fontsize=10];',
             '  edge [fontname="sans-serif", fontsize=9];']
    graph = plan.steps
    if graph is None:
        lines.append("  ordering=out;")
        for behaviour, op, _depth, _last in _behaviours(compiled):
            call = _call(op, "…")
            lines.append(f"  {dot_id(op.op_id)} [shape={DOT_SHAPES.get(op.kind, 'box')}, "
                         f'label="{_label(behaviour.name, *([call] if call else []))}"];')
            lines += [f"  {dot_id(op.op_id)} -> {dot_id(child)};" for child in op.children]
        return "\n".join(lines + ["}"])
    # Steps and terminals in namespaces of their own: no step id can be taken for a terminal or the entry's dot.
    lines += ["  rankdir=LR;", '  entry [shape=point, label=""];']
    terminals = []
    for step_id, behaviour in compiled.ops.items():
        lines.append(f'  {dot_id("step " + step_id)} [shape=box, label="{_label(behaviour.name)}"];')
    if graph.entry is not None:
        lines.append(f"  entry -> {dot_id('step ' + graph.entry)};")
    for step_id, outcomes in graph.transitions.items():
        for outcome, target in outcomes.items():
            if target in compiled.ops:
                node = dot_id("step " + target)
            else:
                node = dot_id("terminal " + target)
                if target not in terminals:
                    terminals.append(target)
            lines.append(f'  {dot_id("step " + step_id)} -> {node} [label="{_label(one_line(outcome))}"];')
    lines += [f'  {dot_id("terminal " + target)} [shape=octagon, label="{_label(one_line(target))}"];'
              for target in terminals]
    return "\n".join(lines + ["}"])
