"""Any plan written as BehaviorTree.CPP 4 XML, for Groot2's editor and monitor and for the ``btcpp`` dialect.

RTDL: a ``sequence`` is a ``Sequence``; a ``parallel`` is a ``ParallelAll`` with ``max_failures="1"``: RTDL's
parallel runs every child to its end and fails once one failed, which is ParallelAll's meaning (BT.CPP's
``Parallel`` halts the children still running as soon as its failure count is reached); a ``sequence`` or
``parallel`` without children, which succeeds at once, is an ``AlwaysSuccess``. A ``do`` is a leaf whose ID is
its cap and whose ports are its args. A ``btcpp`` plan is written back node for node (its SubTrees were
flattened when it was read). Every node's ``name`` is its op's description.

A Qwen3 step graph is a loop over its steps with its transitions kept, in BT.CPP 4's built-ins (the blackboard
key ``step`` holds the step to run next, ``event`` the outcome the last one reported)::

    Sequence
      Script                      step:='<entry>'; event:=''
      ForceSuccess
        KeepRunningUntilFailure   one pass per executed step
          Fallback
            Sequence              one branch per step, in plan order
              ScriptCondition     step=='s1'
              ForceSuccess
                <skill>           its params as ports, event="{event}": the outcome it reports
              Fallback            the step's transitions
                Sequence
                  ScriptCondition event=='success'
                  Script          step:='s2'; event:=''
                ...
                Script            step:='stop'; event:=''   (an outcome with no transition stops the run)
            AlwaysFailure         step holds a terminal: the loop ends
      ScriptCondition             step=='completed'  (the tree succeeds at the success terminal only)

JSON values become port strings as BT.CPP holds them: text as it is, numbers in decimal, ``true``/``false``, a
list of numbers, booleans or texts without ``;`` joined by ``;`` (BT.CPP's vectors), anything else
``json:<compact JSON>`` (what BT.CPP's convertFromString reads as JSON); the ``<TreeNodesModel>`` gives each
leaf port the type its values share. ``uids=True`` numbers every node (``_uid``, 1.. in document order, as
Groot2's monitor addresses them) and lists the built-in nodes used in the model too, as BT.CPP's own
publisher does.
"""
from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

from bt_exec.errors import BtExecError

from ..dialects import CheckContext
from ..ir import Op, Plan

BTCPP_FORMAT = "4"
MAIN_TREE = "MainTree"
MAX_UID = 65_535  # Groot2 addresses a node by a 16-bit uid
STEP_KEY, EVENT_KEY = "step", "event"  # a step graph's blackboard: the step to run next, the last outcome
SUCCESS_TERMINAL, STOP_TERMINAL = "completed", "stop"  # of compilers.skill_catalog.TERMINALS

# BT.CPP 4's built-in nodes by the model element Groot2 expects for them; any other control node is a Control.
_DECORATORS = frozenset(("Inverter", "ForceSuccess", "ForceFailure", "Repeat", "RetryUntilSuccessful",
                         "KeepRunningUntilFailure", "Timeout", "Delay", "RunOnce", "RateController",
                         "DistanceController", "SpeedController", "LoopInt", "LoopDouble", "LoopString",
                         "LoopBool", "Precondition", "SkipUnlessUpdated", "WaitValueUpdate", "EntryUpdated"))
_CONDITIONS = frozenset(("ScriptCondition", "WasEntryUpdated"))
_BUILTIN_ACTIONS = frozenset(("AlwaysSuccess", "AlwaysFailure", "Script", "SetBlackboard", "Sleep",
                              "UnsetBlackboard", "PopFromQueue"))
_BUILTIN_PORTS = {"ParallelAll": {"max_failures": "1"}, "Script": {"code": None},
                  "ScriptCondition": {"code": None}}
# A name BT.CPP's compact form can take as an element (ASCII, no namespace colon, not starting with "xml").
_XML_NAME = re.compile(r"(?!(?i:xml))[A-Za-z_][A-Za-z0-9_.-]*\Z")
# BT.CPP's port names: a letter first, none of its forbidden characters (. : / and the like), not a reserved
# attribute; kept to what an XML attribute's name holds in ASCII.
_PORT_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]*\Z")
_RESERVED_PORTS = frozenset(("name", "ID"))
# Characters XML 1.0 cannot hold at all, escaped or not.
_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_ESCAPES = str.maketrans({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "\n": "&#10;", "\r": "&#13;",
                          "\t": "&#9;"})
_INT32 = range(-2 ** 31, 2 ** 31)
_PORT_ELEMENTS = {"in": "input_port", "out": "output_port", "inout": "inout_port"}


class ExportError(BtExecError):
    """A plan BehaviorTree.CPP XML cannot hold as it is; the message names the op and what is wrong."""


@dataclass(frozen=True)
class StepNodes:
    """The nodes of one step's branch in a step graph's loop: the branch, its condition on ``step``, the
    ``ForceSuccess`` over the skill, the ``Fallback`` of transitions, each transition's (sequence, condition,
    script) by event, and the script that stops the run on an outcome with no transition."""

    branch: int
    condition: int
    guard: int
    routes: int
    edges: dict[str, tuple[int, int, int]]
    unmapped: int


@dataclass
class BtcppExport:
    """A plan written as BT.CPP XML, and how its nodes stand for the plan's ops.

    Nodes are numbered 1.. in document order (``_uid`` when written with uids). ``parent[uid]`` is the uid of the
    node's parent (0: the tree's root), ``op_of[uid]`` the op the node shows (None for a node of its own: a step
    graph's scripts and loop), ``plan_nodes`` the nodes that show the plan's own status (a step graph's loop),
    ``steps`` each step's branch (``StepNodes``), which its runs and transitions move.
    """

    xml: str
    tree_id: str
    parent: list[int] = field(default_factory=lambda: [0])
    op_of: list[str | None] = field(default_factory=lambda: [None])
    plan_nodes: list[int] = field(default_factory=list)
    steps: dict[str, StepNodes] = field(default_factory=dict)

    @property
    def node_count(self) -> int:
        return len(self.parent) - 1


def plan_to_btcpp(plan: Plan, *, uids: bool = False, context: CheckContext | None = None) -> str:
    """``plan`` (any dialect's IR) as BehaviorTree.CPP 4 XML with a ``<TreeNodesModel>`` of its leaves; ``uids``
    adds a ``_uid`` to every node and the built-in nodes' models, as Groot2's monitor wants them. ``context``: what
    the plan was checked against: a step graph's leaves are the skills its skill catalog resolves its aliases to
    (the shipped grant when it names none), a BT XML plan's model takes the entries of its node catalog over those
    of its own TreeNodesModel, as the check reads them. ExportError for what BT.CPP cannot hold (an arg no port
    can be, text XML cannot carry)."""
    return btcpp_export(plan, uids=uids, context=context).xml


def btcpp_export(plan: Plan, *, uids: bool = False, context: CheckContext | None = None) -> BtcppExport:
    """``plan_to_btcpp``'s XML with the map of its nodes to the plan's ops (``BtcppExport``)."""
    carried = getattr(plan.source, "model", None)  # a BT XML plan's own TreeNodesModel
    given = context.node_catalog if context is not None else None
    entries = {**(carried.entries if carried is not None else {}), **(given.entries if given is not None else {})}
    writer = _Writer(uids, entries)
    tree_id = _tree_id(plan)
    if plan.steps is not None:
        _write_step_graph(plan, writer, context.skills if context is not None else None)
    else:
        _write_ops(plan, writer)
    if writer.count > MAX_UID:
        raise ExportError(f"the plan makes {writer.count} BT.CPP nodes, over the {MAX_UID} Groot2 can address")
    head = f'<root BTCPP_format="{BTCPP_FORMAT}" main_tree_to_execute="{_escaped(tree_id)}">'
    tree_head = f'  <BehaviorTree ID="{_escaped(tree_id)}"' + (' _fullpath="">' if uids else ">")
    lines = ['<?xml version="1.0" encoding="UTF-8"?>', head, tree_head, *writer.lines, "  </BehaviorTree>",
             *writer.model_lines(), "</root>", ""]
    return BtcppExport("\n".join(lines), tree_id, writer.parent, writer.op_of, writer.plan_nodes, writer.steps)


def port_text(value: object) -> str:
    """A JSON value as BT.CPP holds it in a port string (the module's docstring says how)."""
    if isinstance(value, str):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if _vector_type(value) is not None:
        return ";".join(port_text(item) for item in value)
    return "json:" + json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def port_type(value: object) -> str | None:
    """The C++ type BT.CPP's model names for a port holding ``value`` (None: a ``json:`` value, any type)."""
    if isinstance(value, str):
        return "std::string"
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int):
        return "int" if value in _INT32 else "long"
    if isinstance(value, float):
        return "double"
    return _vector_type(value)


def _vector_type(value: object) -> str | None:
    if not isinstance(value, list) or not value:
        return None
    if all(isinstance(item, bool) for item in value):
        return "std::vector<bool>"
    if all(isinstance(item, int) and not isinstance(item, bool) and item in _INT32 for item in value):
        return "std::vector<int>"
    if all(isinstance(item, (int, float)) and not isinstance(item, bool) for item in value):
        return "std::vector<double>"
    if all(isinstance(item, str) and item and ";" not in item for item in value):
        return "std::vector<std::string>"
    return None


def _tree_id(plan: Plan) -> str:
    meta = plan.meta.get("btcpp") if isinstance(plan.meta, dict) else None
    main = meta.get("main_tree") if isinstance(meta, dict) else None
    return main if isinstance(main, str) and _XML_NAME.match(main) else MAIN_TREE


def _escaped(text: str) -> str:
    return text.translate(_ESCAPES)


class _Writer:
    """The tree's element lines, its nodes' parents and ops, and the ports each node ID was given."""

    def __init__(self, uids: bool, carried: dict):
        self.uids = uids
        self.carried = carried  # node ID -> the catalog entry a BT XML plan was read with: written as read
        self.lines: list[str] = []
        self.parent = [0]
        self.op_of: list[str | None] = [None]
        self.plan_nodes: list[int] = []
        self.steps: dict[str, StepNodes] = {}
        self.models: dict[str, _Model] = {}

    @property
    def count(self) -> int:
        return len(self.parent) - 1

    def open(self, node_id: str, depth: int, parent: int, op_id: str | None, name: str | None,
             ports: list[tuple[str, str, str]], leaf: bool, where: str) -> int:
        """Write a node's start tag (or its whole element, ``leaf``); its uid. ``ports``: (name, text, direction)."""
        uid = len(self.parent)
        self.parent.append(parent)
        self.op_of.append(op_id)
        if _XML_NAME.match(node_id):
            tag, attributes = node_id, []
        else:
            tag = _category(node_id, leaf)
            attributes = [f'ID="{_escaped(_xml_text(node_id, where, "its ID"))}"']
        if name is not None:
            attributes.append(f'name="{_escaped(_xml_text(name, where, "its description"))}"')
        if self.uids:
            attributes.append(f'_uid="{uid}"')
        for port, text, _direction in ports:
            attributes.append(f'{port}="{_escaped(_xml_text(text, where, f"port {port!r}"))}"')
        indent = "  " * (depth + 2)
        self.lines.append(f"{indent}<{tag}{''.join(' ' + a for a in attributes)}{'/>' if leaf else '>'}")
        return uid

    def close(self, node_id: str, depth: int) -> None:
        tag = node_id if _XML_NAME.match(node_id) else _category(node_id, leaf=False)
        self.lines.append(f"{'  ' * (depth + 2)}</{tag}>")

    def note_model(self, node_id: str, category: str, ports: list[tuple[str, str, str]],
                   types: dict[str, str | None], builtin: bool) -> None:
        """Remember that a node ``node_id`` was written with ``ports`` (literal values' types in ``types``)."""
        model = self.models.get(node_id)
        if model is None:
            model = self.models[node_id] = _Model(category, builtin)
        model.seen(ports, types)

    def model_lines(self) -> list[str]:
        """The ``<TreeNodesModel>``: every leaf (and custom node), and with uids every built-in node too, by ID."""
        lines = ["  <TreeNodesModel>"]
        carried = self.carried
        for node_id in sorted(self.models):
            model = self.models[node_id]
            if model.builtin and not self.uids:
                continue
            lines.extend(_carried_lines(carried[node_id]) if node_id in carried else model.lines(node_id))
        lines.append("  </TreeNodesModel>")
        return lines


def _carried_lines(entry) -> list[str]:
    """A catalog entry a BT XML plan carried, written back as it was read: its kind, each port's direction, type
    and default."""
    category = entry.kind.capitalize() if entry.kind in ("action", "condition", "control", "decorator") else "Action"
    head = f'    <{category} ID="{_escaped(entry.node_id)}"'
    if not entry.ports:
        return [head + "/>"]
    lines = [head + ">"]
    for name, port in entry.ports.items():
        attributes = [f'name="{_escaped(name)}"']
        if port.type:
            attributes.append(f'type="{_escaped(port.type)}"')
        if port.default is not None:
            attributes.append(f'default="{_escaped(port.default)}"')
        lines.append(f"      <{_PORT_ELEMENTS[port.direction]} {' '.join(attributes)}/>")
    lines.append(f"    </{category}>")
    return lines


def _category(node_id: str, leaf: bool) -> str:
    """The model element Groot2 files a node ID under, and the element of BT.CPP's explicit form
    (``<Action ID="..."/>``) for an ID no element can be named: a leaf is an Action (or a built-in Condition), a
    node with children a Decorator (BT.CPP's built-in decorators) or a Control."""
    if node_id in _DECORATORS:
        return "Decorator"
    if node_id in _CONDITIONS:
        return "Condition"
    return "Action" if leaf else "Control"


def _xml_text(text: str, where: str, what: str) -> str:
    bad = _NOT_XML.search(text)
    if bad:
        raise ExportError(f"{where}: {what} holds the character {bad.group()!a}, which XML cannot carry")
    return text


@dataclass
class _Model:
    """What a TreeNodesModel entry says of one node ID: its category and each port's direction, type, default."""

    category: str
    builtin: bool = False
    uses: int = 0
    ports: dict[str, list] = field(default_factory=dict)  # name -> [direction, type or None, times given, typed]

    def seen(self, ports: list[tuple[str, str, str]], types: dict[str, str | None]) -> None:
        self.uses += 1
        for name, _text, direction in ports:
            known = self.ports.get(name)
            kind = types.get(name)
            if known is None:
                self.ports[name] = [direction, kind, 1]
                continue
            if known[0] != direction:
                known[0] = "inout"
            if known[1] != kind:
                known[1] = None
            known[2] += 1

    def lines(self, node_id: str) -> list[str]:
        defaults = _BUILTIN_PORTS.get(node_id, {})
        head = f'    <{self.category} ID="{_escaped(node_id)}"'
        if not self.ports and not defaults:
            return [head + "/>"]
        lines = [head + ">"]
        names = list(self.ports) + [name for name in defaults if name not in self.ports]
        for name in names:
            direction, kind, given = self.ports.get(name, ("in", None, 0))
            attributes = [f'name="{_escaped(name)}"']
            if kind is not None:
                attributes.append(f'type="{_escaped(kind)}"')
            if defaults.get(name) is not None:
                attributes.append(f'default="{_escaped(defaults[name])}"')
            elif given < self.uses and direction != "out" and name not in defaults:
                attributes.append('default=""')  # some nodes of this ID go without it: optional
            lines.append(f"      <{_PORT_ELEMENTS[direction]} {' '.join(attributes)}/>")
        lines.append(f"    </{self.category}>")
        return lines


def _port_name(name: object, where: str) -> str:
    if not isinstance(name, str) or not _PORT_NAME.match(name) or name in _RESERVED_PORTS:
        raise ExportError(f"{where}: arg {name!r} cannot be a BT.CPP port (a port name is a letter, then letters, "
                          "digits, _ or -, and not name or ID)")
    return name


def _literal_ports(args: dict | None, where: str) -> tuple[list[tuple[str, str, str]], dict[str, str | None]]:
    ports, types = [], {}
    for name, value in (args or {}).items():
        text = port_text(value)
        if len(text) >= 3 and text[0] == "{" and text[-1] == "}":
            raise ExportError(f"{where}: arg {name!r} is the text {text!r}, which BT.CPP would read as the "
                              "blackboard key it names, not as text")
        ports.append((_port_name(name, where), text, "in"))
        types[name] = port_type(value)
    return ports, types


def _ports_of(op: Op, where: str) -> tuple[list[tuple[str, str, str]], dict[str, str | None]]:
    """An op's ports: its literal args, then its blackboard reads and writes (``{key}``; inout where both)."""
    ports, types = _literal_ports(op.args, where)
    given = {name for name, _text, _direction in ports}
    reads, writes = op.reads or {}, op.writes or {}
    for name, key in reads.items():
        if name in given:
            continue
        direction = "inout" if writes.get(name) == key else "in"
        ports.append((_port_name(name, where), "{" + key + "}", direction))
        given.add(name)
    for name, key in writes.items():
        if name not in given:
            ports.append((_port_name(name, where), "{" + key + "}", "out"))
            given.add(name)
    return ports, types


def _write_ops(plan: Plan, writer: _Writer) -> None:
    """An RTDL or btcpp plan, node for node, without recursion (plans nest up to the depth limit)."""
    stack: list[tuple[str, int, int, bool]] = [(plan.root, 0, 0, False)]  # op id, depth, parent uid, closing
    while stack:
        op_id, depth, parent, closing = stack.pop()
        op = plan.ops[op_id]
        node_id = _node_id(op)
        if closing:
            writer.close(node_id, depth)
            continue
        where = f"op {op_id!r}"
        ports, types = _ports_of(op, where)
        if plan.dialect == "btcpp":
            types = {}  # its args are the port strings as written: their types are its catalog's, if any
        if node_id == "ParallelAll" and op.kind == "parallel":
            ports.insert(0, ("max_failures", "1", "in"))  # fails once one child failed, after all ended
        uid = writer.open(node_id, depth, parent, op_id, op.description, ports, not op.children, where)
        category = "Action" if op.kind == "do" else _category(node_id, not op.children)
        writer.note_model(node_id, category, ports, types, builtin=op.kind != "do" and node_id in _BUILTINS)
        if op.children:
            stack.append((op_id, depth, parent, True))
            stack.extend((child, depth + 1, uid, False) for child in reversed(op.children))


def _node_id(op: Op) -> str:
    """The BT.CPP node an op is written as."""
    if op.kind == "do":
        return _leaf_id(op.cap, f"op {op.op_id!r}")
    if op.kind == "sequence":
        return "Sequence" if op.children else "AlwaysSuccess"
    if op.kind == "parallel":
        return "ParallelAll" if op.children else "AlwaysSuccess"
    if op.node:
        return op.node
    raise ExportError(f"op {op.op_id!r}: an op of kind {op.kind!r} has no BT.CPP node")


def _leaf_id(cap: object, where: str) -> str:
    """A call's cap as its leaf's ID; ExportError where BT.CPP would read it as something else than a call."""
    if not isinstance(cap, str) or not cap:
        raise ExportError(f"{where}: a call with no cap has no BT.CPP node ID")
    if cap in _BUILTINS or cap in _EXPLICIT_ELEMENTS:
        raise ExportError(f"{where}: cap {cap!r} is the name of a BT.CPP built-in node or element; a leaf of that "
                          "ID would not run as a call")
    return cap


_BUILTINS = _DECORATORS | _CONDITIONS | _BUILTIN_ACTIONS | frozenset((
    "Sequence", "ReactiveSequence", "SequenceWithMemory", "Fallback", "ReactiveFallback", "Parallel",
    "ParallelAll", "IfThenElse", "WhileDoElse", "Switch2", "Switch3", "Switch4", "Switch5", "Switch6",
    "PipelineSequence", "RecoveryNode", "RoundRobin", "SubTree"))
_EXPLICIT_ELEMENTS = frozenset(("Action", "Condition", "Control", "Decorator", "BehaviorTree", "TreeNodesModel",
                                "root", "include"))


def _write_step_graph(plan: Plan, writer: _Writer, skills) -> None:
    """A step graph as the loop the module's docstring draws; each leaf calls the skill its step's skill names
    in ``skills`` (an alias as its skill), as the step graph's own run does."""
    graph = plan.steps
    entry = graph.entry or plan.root

    def control(node_id: str, depth: int, parent: int, name: str | None = None, plan_node: bool = False) -> int:
        uid = writer.open(node_id, depth, parent, None, name, [], False, "the step graph")
        writer.note_model(node_id, _category(node_id, False), [], {}, builtin=True)
        if plan_node:
            writer.plan_nodes.append(uid)
        return uid

    def leaf(node_id: str, depth: int, parent: int, ports: list, name: str | None = None) -> int:
        uid = writer.open(node_id, depth, parent, None, name, ports, True, "the step graph")
        writer.note_model(node_id, _category(node_id, True), ports, {}, builtin=True)
        return uid

    def script(depth: int, parent: int, following: str, name: str | None = None) -> int:
        return leaf("Script", depth, parent, [("code", f"{STEP_KEY}:={_quoted(following)}; {EVENT_KEY}:=''", "in")],
                    name)

    def condition(depth: int, parent: int, key: str, value: str) -> int:
        return leaf("ScriptCondition", depth, parent, [("code", f"{key}=={_quoted(value)}", "in")])

    root = control("Sequence", 0, 0, plan.description, plan_node=True)
    script(1, root, entry, "start at the entry step")
    force = control("ForceSuccess", 1, root, plan_node=True)
    loop = control("KeepRunningUntilFailure", 2, force, "one step a pass, until a terminal", plan_node=True)
    steps = control("Fallback", 3, loop, "the current step", plan_node=True)
    for step_id in graph.steps:
        op = plan.ops[step_id]
        where = f"step {step_id!r}"
        branch = control("Sequence", 4, steps, f"{step_id}: {op.description}")
        guarded = condition(5, branch, STEP_KEY, step_id)
        guard = control("ForceSuccess", 5, branch, "its outcome routes, success or not")
        ports, types = _literal_ports(op.args, where)
        ports.append(("event", "{" + EVENT_KEY + "}", "out"))
        skill = _leaf_id((skills.resolve(op.cap) if skills is not None else None) or op.cap, where)
        writer.open(skill, 6, guard, step_id, op.description, ports, True, where)
        writer.note_model(skill, "Action", ports, types, builtin=False)
        writer.close("ForceSuccess", 5)
        routes = control("Fallback", 5, branch, f"transitions of {step_id}")
        edges = {}
        for event, following in graph.transitions.get(step_id, {}).items():
            edge = control("Sequence", 6, routes, f"{event} -> {following}")
            edges[event] = (edge, condition(7, edge, EVENT_KEY, event), script(7, edge, following))
            writer.close("Sequence", 6)
        unmapped = script(6, routes, STOP_TERMINAL, "an outcome with no transition stops the run")
        writer.steps[step_id] = StepNodes(branch, guarded, guard, routes, edges, unmapped)
        writer.close("Fallback", 5)
        writer.close("Sequence", 4)
    leaf("AlwaysFailure", 4, steps, [], "a terminal is reached")
    writer.close("Fallback", 3)
    writer.close("KeepRunningUntilFailure", 2)
    writer.close("ForceSuccess", 1)
    condition(1, root, STEP_KEY, SUCCESS_TERMINAL)
    writer.close("Sequence", 0)


def _quoted(text: str) -> str:
    """A step id or event as a literal of BT.CPP's script language (single quotes, which it cannot escape)."""
    if "'" in text:
        raise ExportError(f"{text!r} holds a single quote, which BT.CPP's script language cannot quote")
    return f"'{text}'"
