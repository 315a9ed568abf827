"""The static checks of a loaded BT.CPP tree, all at once, each issue at its element path and line: node IDs no
library, catalog or tree knows (with the nearest known names), ports missing or unknown, children counts, text
inside elements, and the dataflow of the blackboard (a key read before anything in the tree writes it, a warning).

Nodes are checked against BT.CPP's node library (``NODE_LIBRARY``) and the catalog: the one given, over the
``<TreeNodesModel>`` the document carries. Leaves are checked only against a catalog: without one any leaf ID is
taken, and a warning says so.
"""
from __future__ import annotations

from dataclasses import dataclass

from bt_exec.behaviours.bt_library import NODE_LIBRARY, NodeSpec, PortSpec
from bt_exec.errors import Issue, Issues

from ..fixes import NameSearch
from ..ir import Op, Plan
from .catalog import CatalogEntry, NodeCatalog
from .load import BtcppSource
from .paths import attribute

# Characters of an element's text a message quotes.
TEXT_SHOWN = 80
# A library node's category as a catalog names kinds.
_LIBRARY_KINDS = {"control": "control", "decorator": "decorator", "leaf": "action"}


def catalog_for(source: BtcppSource, given: NodeCatalog | None) -> NodeCatalog | None:
    """The catalog a tree is checked against: the one given, over the one its document carries."""
    if given is None:
        return source.model
    return given.merged_over(source.model)


def check_tree(plan: Plan, given: NodeCatalog | None) -> tuple[list[Issue], list[dict]]:
    """Every issue of ``plan`` (each once, however many SubTree instances share its element) and the warnings:
    the reading's, custom nodes run as pass-throughs, leaves left unchecked, keys read before they are written."""
    source: BtcppSource = plan.source
    catalog = catalog_for(source, given)
    checker = _Checker(catalog, source)
    for op in plan.ops.values():
        checker.check(op)
        if checker.issues.dropped:
            break
    warnings = list(source.warnings) + checker.warnings
    if catalog is None and any(op.kind == "do" for op in plan.ops.values()):
        warnings.append({"code": "leaves_unchecked",
                         "message": "no node catalog (a TreeNodesModel: --catalog FILE.xml, or one in the document): "
                                    "leaf IDs and their ports were not checked, and a {key} port is taken as the "
                                    "leaf's output where no node before names the key"})
    warnings.extend(_dataflow(plan, catalog))
    return checker.issues.listed(), warnings


def directions(op: Op, entry: CatalogEntry | None) -> tuple[dict | None, dict | None]:
    """The blackboard keys a leaf reads and writes (port -> key): as its catalog entry declares its ports (an
    undeclared port is read), else as loaded."""
    if op.kind != "do" or entry is None or not (op.reads or op.writes):
        return op.reads, op.writes
    if not op.writes and entry.outputs.isdisjoint(op.reads):  # most leaves: inputs only, as loaded
        return op.reads, None
    ports = entry.ports
    reads: dict[str, str] = {}
    writes: dict[str, str] = {}
    for keys in (op.reads, op.writes):
        for port, key in keys.items() if keys else ():
            declared = ports.get(port)
            direction = declared.direction if declared is not None else "in"
            if direction != "out":
                reads[port] = key
            if direction != "in":
                writes[port] = key
    return reads or None, writes or None


@dataclass(slots=True)
class _NodeRules:
    """What the nodes of one ID are checked against: its library spec, its catalog entry, its kind as a catalog
    names kinds (None: neither knows it), its ports (the library's, the entry's over them) and those required."""

    spec: NodeSpec | None
    entry: CatalogEntry | None
    kind: str | None
    declared: dict[str, PortSpec]
    required: tuple[str, ...]


class _Checker:
    def __init__(self, catalog: NodeCatalog | None, source: BtcppSource):
        self.catalog = catalog
        self.source = source
        self.issues = Issues()
        self.warnings: list[dict] = []
        self.seen: set[tuple[str, str]] = set()
        self.names = NameSearch()
        self.known = sorted(set(NODE_LIBRARY) | set(catalog.entries if catalog is not None else ()))
        self.rules: dict[str, _NodeRules] = {}

    def add(self, issue: Issue) -> None:
        if (issue.code, issue.path) not in self.seen:
            self.seen.add((issue.code, issue.path))
            self.issues.append(issue)

    def rules_of(self, node_id: str) -> _NodeRules:
        """The rules of ``node_id``, worked out once per ID."""
        rules = self.rules.get(node_id)
        if rules is None:
            entry = self.catalog.get(node_id) if self.catalog is not None else None
            spec = NODE_LIBRARY.get(node_id)
            kind = entry.kind if entry is not None else _LIBRARY_KINDS.get(spec.category) if spec is not None else None
            declared = spec.ports if spec is not None else {}
            if entry is not None:
                declared = {**declared, **entry.ports}
            required = tuple(name for name, port in declared.items()
                             if port.default is None and port.direction in ("in", "inout"))
            rules = self.rules[node_id] = _NodeRules(spec, entry, kind, declared, required)
        return rules

    def check(self, op: Op) -> None:
        node_id = op.node or op.cap
        rules = self.rules.get(node_id) or self.rules_of(node_id)
        spec, entry, kind = rules.spec, rules.entry, rules.kind
        texts = self.source.texts
        if kind is None and op.kind == "do" and self.catalog is None and not texts:
            return  # a leaf with no catalog to check it against: nothing to say of it
        if kind is None:
            if op.kind == "control" or self.catalog is not None:
                self._unknown(op, node_id)
        elif spec is None and op.kind == "control" and kind in ("control", "decorator"):
            self._warn("custom_node", f"{node_id} is a custom {kind} of the catalog: it runs as a "
                                      "pass-through of its children (they run in order, its result is theirs)")
        if kind is not None:
            children = self.source.children_of(op) if self.source.unexpanded else len(op.children)
            if children or kind not in ("action", "condition"):
                self._children(op, node_id, children, kind, spec)
            if not _ports_fit(op, rules):
                self._ports(op, node_id, rules.declared)
            if spec is not None and entry is None:
                problem = spec.check(op.args or {}, children)
                if problem is not None:
                    self.add(Issue("bad_port_value", op.path, f"line {self._line(op)}: {node_id}: {problem}"))
        text = texts.get(op.path) if texts else None
        if text:
            tag = op.path.rsplit("/", 1)[-1].split("[", 1)[0]
            self.add(Issue("text_in_element", f"{op.path}/text()",
                           f"line {self._line(op)}: text inside <{tag}> ({_shown(text)}): BT.CPP reads none, a "
                           "value goes in an attribute (a port)", fix=[{"op": "remove", "path": f"{op.path}/text()"}]))

    def _line(self, op: Op) -> int:
        return self.source.lines.get(op.path, 0)

    def _unknown(self, op: Op, node_id: str) -> None:
        line = self._line(op)
        where = attribute(op.path, "ID") if op.path in self.source.explicit else f"{op.path}/name()"
        nearest = self.names.nearest(node_id, self.known)
        what = "no catalog entry nor library node" if self.catalog is not None else "no library node"
        shown = f" (nearest known: {', '.join(nearest)})" if nearest else ""
        patches = [[{"op": "replace", "path": where, "value": name}] for name in nearest]
        self.add(Issue("unknown_node", where, f"line {line}: {node_id!r} names {what}{shown}"
                       + ("" if op.kind == "do" else ": a node with children is a control node or a decorator, and "
                                                     "one of the catalog's must be declared there"),
                       unknown=node_id, allowed=tuple(self.known),
                       fix=patches[0] if len(patches) == 1 else None,
                       alternatives=patches if len(patches) > 1 else None))

    def _children(self, op: Op, node_id: str, count: int, kind: str, spec) -> None:
        line = self._line(op)
        if kind in ("action", "condition"):
            if count:
                self.add(Issue("leaf_children", op.path, f"line {line}: {node_id} is a leaf ({kind}) and takes no "
                                                         f"child, this one has {count}"))
        elif kind == "decorator":
            if count != 1:
                self.add(Issue("decorator_children", op.path,
                               f"line {line}: the decorator {node_id} takes exactly one child, this one has {count}"
                               + (": wrap them in a Sequence or a Fallback" if count > 1 else "")))
        elif kind == "control":
            least = spec.min_children if spec is not None else 1
            most = spec.max_children if spec is not None else None
            if count < least:
                self.add(Issue("control_children", op.path,
                               f"line {line}: the control node {node_id} takes at least {_children_count(least)}, "
                               f"this one has {count}"))
            elif most is not None and count > most:
                self.add(Issue("control_children", op.path,
                               f"line {line}: the control node {node_id} takes at most {_children_count(most)}, "
                               f"this one has {count}"))

    def _ports(self, op: Op, node_id: str, declared: dict) -> None:
        line = self._line(op)
        written = [*(op.args or ()), *(op.reads or ()), *(op.writes or ())]
        for port in written:
            if port in declared:
                continue
            where = attribute(op.path, port)
            free = [name for name in declared if name not in written]
            nearest = self.names.nearest(port, free)
            patches = [[{"op": "move", "from": where, "path": attribute(op.path, name)}] for name in nearest]
            self.add(Issue("unknown_port", where,
                           f"line {line}: {node_id} has no port {port!r} (its ports: "
                           f"{', '.join(declared) or 'none'})", allowed=tuple(declared), unknown=port,
                           fix=patches[0] if len(patches) == 1 else None if patches
                           else [{"op": "remove", "path": where}],
                           alternatives=patches if len(patches) > 1 else None))
        for name, port in declared.items():
            if port.default is None and port.direction in ("in", "inout") and name not in written:
                self.add(Issue("missing_port", attribute(op.path, name),
                               f"line {line}: {node_id} needs its port {name!r} (it has no default)",
                               missing=name))

    def _warn(self, code: str, message: str) -> None:
        warning = {"code": code, "message": message}
        if warning not in self.warnings:
            self.warnings.append(warning)


def _ports_fit(op: Op, rules: _NodeRules) -> bool:
    """Whether every port ``op`` writes is declared and every required one written: what ``_ports`` would find
    nothing wrong with, told without listing the ports."""
    args, reads, writes = op.args, op.reads, op.writes
    declared = rules.declared.keys()
    if (args and not declared >= args.keys()) or (reads and not declared >= reads.keys()) \
            or (writes and not declared >= writes.keys()):
        return False
    for name in rules.required:
        if not ((args and name in args) or (reads and name in reads) or (writes and name in writes)):
            return False
    return True


def _dataflow(plan: Plan, catalog: NodeCatalog | None) -> list[dict]:
    """A warning for each key some node of the tree writes and a node reads before (in the order the tree
    starts them, pre-order): on that path it is read before anything wrote it. Keys nothing in the tree writes
    are set from outside (Nav2's goal), as are the submission's seeds: no warning."""
    flows = []
    entries = catalog.entries if catalog is not None else {}
    for op in plan.ops.values():
        reads, writes = op.reads, op.writes
        if reads or writes:
            entry = entries.get(op.cap) if op.kind == "do" else None
            if entry is not None:
                reads, writes = directions(op, entry)
            flows.append((op, reads, writes))
    # the keys some node writes and no node has yet either read unwritten (warned) or written
    pending = {key for _, _, writes in flows if writes for key in writes.values()}
    if plan.blackboard_seeds:
        pending.difference_update(plan.blackboard_seeds)
    out = []
    for op, reads, writes in flows:
        if not pending:
            break
        for port, key in reads.items() if reads else ():
            if key in pending:
                pending.discard(key)
                out.append({"code": "read_before_write",
                            "message": f"{op.path}: port {port!r} reads {{{key}}} before any node of the tree "
                                       "writes it (on this path it is set only if set from outside)"})
        if writes:
            pending.difference_update(writes.values())
    return out


def _shown(text: str) -> str:
    return repr(text) if len(text) <= TEXT_SHOWN else f"{text[:TEXT_SHOWN]!r}..."


def _children_count(count: int) -> str:
    return f"{count} child" if count == 1 else f"{count} children"
