"""A BT.CPP document loaded into the IR: the main tree, its SubTrees flattened into it with their ports remapped,
each node one op in pre-order (numbered "1", "2", ...). Library nodes (BT.CPP's and Nav2's controls, decorators,
built-in leaves) and nodes with children are ``control`` ops; any other node is a leaf, a capability call (``do``).

What the checks need beyond the ops (each node's line, text and form; the trees; the catalog the document
carries; the warnings met) is kept in ``Plan.source``. Faults of the document's shape (no main tree, an unknown or
cyclic SubTree, past a limit) refuse it with every one found, the plan read so far checked as well.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import networkx

from bt_exec.behaviours.bt_library import NODE_LIBRARY
from bt_exec.errors import Issue, Issues, PlanError

from ..fixes import NameSearch
from ..ir import NO_CHILDREN, Op, Plan
from ..limits import Limits
from ..report import PartlyRead
from .catalog import NodeCatalog, read_model
from .names import (EXPLICIT, FORMATS, NOT_PORTS, ROOT_ATTRIBUTES, SCRIPT_ATTRIBUTES, SUBTREE_OPTIONS, SUBTREE_TAGS,
                    TRUE_WORDS, V3_NAMES, V3_PORTS, key_of)
from .paths import ROOT_PATH, attribute, by_id, child_paths
from .xml_read import Element, XmlDocument

DIALECT = "btcpp"
# The attributes of a node that are no plain port: what every node may carry, and the scripts refused.
_NOT_PLAIN_PORTS = NOT_PORTS | SCRIPT_ATTRIBUTES


@dataclass(eq=False, slots=True)
class BtcppSource:
    """What a BT.CPP document says beyond the ops, for the checks: its trees (ID -> path), the main one, the
    catalog it carries (its own ``<TreeNodesModel>``), the warnings met reading it, and of the node elements (by
    element path) the line each starts on, the text written inside those that hold some, the paths of those in
    the explicit form (``<Action ID=...>``), and the child elements an op lacks (a SubTree that could not be
    expanded). A node's ID is its op's node or cap, its ports its op's args, reads and writes; the elements
    themselves are not kept (a plan holds what it runs)."""

    trees: dict[str, str]
    main: str
    model: NodeCatalog | None
    warnings: list[dict] = field(default_factory=list)
    lines: dict[str, int] = field(default_factory=dict)
    texts: dict[str, str] = field(default_factory=dict)
    explicit: set[str] = field(default_factory=set)
    unexpanded: dict[str, int] = field(default_factory=dict)

    def children_of(self, op: Op) -> int:
        """How many child elements the node of ``op`` has."""
        return len(op.children) + self.unexpanded.get(op.path, 0)


class _Literal(str):
    """A SubTree port given a literal value: its {key} reads inside the SubTree read that text."""


@dataclass(slots=True)
class _Scope:
    """The blackboard of one tree instance: its remapped keys (a parent's key, or a literal), whether the rest
    reach the parent's (``_autoremap``), and the prefix of its own keys (a SubTree's blackboard is its own)."""

    remap: dict[str, str]
    autoremap: bool
    prefix: str
    parent: _Scope | None

    def key(self, name: str) -> str:
        """The flattened plan's key for ``name`` read in this scope (a ``_Literal`` when remapped to a literal);
        ``@name`` is the main tree's own key, from any SubTree."""
        if name.startswith("@"):
            return name[1:]
        scope = self
        while True:
            if name in scope.remap:
                return scope.remap[name]
            if not scope.autoremap or scope.parent is None:
                return scope.prefix + name
            scope = scope.parent


def load_btcpp(doc: object, limits: Limits) -> Plan:
    """The plan a BT.CPP document runs; PartlyRead (PlanError) with every issue of its shape found."""
    if not isinstance(doc, XmlDocument):
        raise PlanError([Issue("type", "", "a BT.CPP plan is XML text with a <root> element, got a JSON document")])
    return _Loader(doc, limits).load()


class _Loader:
    def __init__(self, doc: XmlDocument, limits: Limits):
        self.root = doc.root
        self.has_subtrees = any(tag in doc.tags for tag in SUBTREE_TAGS)
        self.limits = limits
        self.issues = Issues()
        self.warnings: list[dict] = []
        self.ops: dict[str, Op] = {}
        self.lines: dict[str, int] = {}
        self.texts: dict[str, str] = {}
        self.explicit: set[str] = set()
        self.unexpanded: dict[str, int] = {}
        self.named: set[str] = set()  # the keys the ops so far name, in pre-order (see ``_directions``)
        self.trees: dict[str, tuple[Element, str]] = {}
        self.format = "4"
        self.instances = 0
        self.names = NameSearch()

    def load(self) -> Plan:
        root = self.root
        if root.tag != "root":
            raise PlanError([Issue("bad_root", f"/{root.tag}", f"line {root.line}: the document's element is "
                                                               f"<{root.tag}>, BT.CPP's is <root>")])
        self._root_attributes()
        model = self._root_children()
        main = self._main_tree()
        cycles, referenced = self._subtree_references(main)
        # Without a main tree the document is refused; the tree that would most likely be it is still checked.
        checked = main or next((name for name in self.trees if name not in referenced), next(iter(self.trees), None))
        depth = 0
        if checked is not None and not self.issues.dropped:
            depth = self._flatten(checked, cycles)
        source = BtcppSource({name: path for name, (_, path) in self.trees.items()}, main or "", model,
                             self.warnings, self.lines, self.texts, self.explicit, self.unexpanded)
        description = self.ops["1"].description if "1" in self.ops else "a BT.CPP plan read in part"
        plan = Plan(dialect=DIALECT, shape=DIALECT, root="1" if "1" in self.ops else "", ops=self.ops,
                    description=f"{main}: {description}" if main and "1" in self.ops else description,
                    depth=depth, numbered_by_loader=True,
                    meta={DIALECT: {"main_tree": main or "", "format": self.format}}, source=source)
        if self.issues:
            raise PartlyRead(self.issues.listed(), plan)
        return plan

    # --- the document around the trees --------------------------------------------------------------------

    def _root_attributes(self) -> None:
        attrs = self.root.attrs
        written = attrs.get("BTCPP_format")
        if written is None:
            self._warn("no_format", "<root> has no BTCPP_format: read as BT.CPP 4 reads it (BT.CPP 4 warns too), "
                                    "BT.CPP 3's node names taken for their successors")
        elif written.strip() not in FORMATS:
            self.issues.append(Issue("bad_value", attribute(ROOT_PATH, "BTCPP_format"),
                                     f"line {self.root.line}: BTCPP_format {written!r} is none of "
                                     f"{', '.join(FORMATS)}", allowed=FORMATS))
        elif written.strip() == "3":
            self.format = "3"
            self._warn("v3_format", "BTCPP_format=\"3\": a BT.CPP 3 tree, read as BT.CPP 4 reads it once converted "
                                    "(its node names taken for their successors)")
        for name in attrs:
            if name not in ROOT_ATTRIBUTES:
                self._warn("unknown_root_attribute", f"<root> attribute {name!r} is not BT.CPP's: ignored")

    def _root_children(self) -> NodeCatalog | None:
        model = None
        unnamed = 0
        for element, path in zip(self.root.children, child_paths(ROOT_PATH, self.root.children)):
            if element.tag == "BehaviorTree":
                tree_id = element.attrs.get("ID")
                if tree_id is None:  # BT.CPP names an unnamed tree, and runs it when it is the only one
                    tree_id = f"BehaviorTree_{unnamed}"
                    unnamed += 1
                elif tree_id not in self.trees:  # a second tree of that ID is named by its position
                    path = f"{ROOT_PATH}/{by_id('BehaviorTree', tree_id)}"
                if tree_id in self.trees:
                    self.issues.append(Issue("duplicate_tree", path, f"line {element.line}: a second tree "
                                                                     f"{tree_id!r} (IDs name one tree each)"))
                    continue
                self.trees[tree_id] = (element, path)
            elif element.tag == "TreeNodesModel":
                entries, problems = read_model(element)
                for problem in problems:
                    self.issues.append(Issue("bad_model", path, problem))
                model = NodeCatalog(entries)
            elif element.tag == "include":
                self.issues.append(Issue("include_refused", path, f"line {element.line}: <include> names another "
                                                                  "file, and files a plan names are never read: "
                                                                  "put its trees in this document"))
            else:
                self._warn("unknown_element", f"line {element.line}: <{element.tag}> in <root> is not BT.CPP's: "
                                              "ignored")
        return model

    def _main_tree(self) -> str | None:
        named = self.root.attrs.get("main_tree_to_execute")
        if named is not None:
            if named in self.trees:
                return named
            nearest = self.names.nearest(named, self.trees)
            where = attribute(ROOT_PATH, "main_tree_to_execute")
            self.issues.append(Issue("unknown_main_tree", where,
                                     f"line {self.root.line}: main_tree_to_execute names {named!r}, and no tree has "
                                     f"that ID (trees: {_listed(self.trees)})", allowed=tuple(self.trees),
                                     **_replacements(where, nearest)))
            return None
        if len(self.trees) == 1:
            return next(iter(self.trees))
        if not self.trees:
            self.issues.append(Issue("no_tree", ROOT_PATH, f"line {self.root.line}: <root> holds no <BehaviorTree>"))
            return None
        where = attribute(ROOT_PATH, "main_tree_to_execute")
        self.issues.append(Issue(
            "no_main_tree", ROOT_PATH, f"line {self.root.line}: {len(self.trees)} trees ({_listed(self.trees)}) and "
                                       "no main_tree_to_execute saying which one runs",
            alternatives=[[{"op": "add", "path": where, "value": name}] for name in self.trees]))
        return None

    def _subtree_references(self, main: str | None) -> tuple[set[tuple[str, str]], set[str]]:
        """Every SubTree of every tree checked against the trees there are; the references that close a cycle
        (tree, SubTree ID), which the flattening does not follow, and the trees some SubTree names. A cycle is
        shown from the tree of it nearest the main tree, closed by the SubTree that leads back there."""
        graph = networkx.DiGraph()
        graph.add_nodes_from(self.trees)
        for tree_id, (tree, path) in self.trees.items() if self.has_subtrees else ():
            for element, element_path in _elements(tree, path):
                if element.tag not in SUBTREE_TAGS:
                    continue
                target = element.attrs.get("ID")
                if target is None:
                    self.issues.append(Issue("required", element_path, f"line {element.line}: <{element.tag}> has "
                                                                       "no ID", missing="ID"))
                elif target not in self.trees:
                    where = attribute(element_path, "ID")
                    self.issues.append(Issue("unknown_subtree", where,
                                             f"line {element.line}: SubTree {target!r} names no tree (trees: "
                                             f"{_listed(self.trees)})", allowed=tuple(self.trees), unknown=target,
                                             **_replacements(where, self.names.nearest(target, self.trees))))
                else:
                    graph.add_edge(tree_id, target, path=element_path, line=element.line)
        closing = set()
        order = {name: index for index, name in enumerate(self.trees)}
        near = networkx.single_source_shortest_path_length(graph, main) if main is not None else {}
        for cycle in networkx.simple_cycles(graph):
            start = min(range(len(cycle)), key=lambda at: (near.get(cycle[at], len(order)), order[cycle[at]]))
            cycle = cycle[start:] + cycle[:start]
            last, first = cycle[-1], cycle[0]
            edge = graph.edges[last, first]
            closing.add((last, first))
            shown = " -> ".join([*cycle, first])
            self.issues.append(Issue("subtree_cycle", edge["path"], f"line {edge['line']}: SubTrees include each "
                                                                    f"other without end: {shown}"))
            if len(closing) >= 20:
                break
        return closing, {target for _, target in graph.edges}

    # --- the trees, flattened -------------------------------------------------------------------------------

    def _flatten(self, main: str, cycles: set[tuple[str, str]]) -> int:
        tree, path = self.trees[main]
        first = self._tree_node(tree, path)
        if first is None:
            return 0
        max_ops, max_depth = self.limits.max_ops, self.limits.max_depth
        ops, issues, make_op = self.ops, self.issues, self._op
        deepest = count = 0
        # (element, path, depth, parent op, scope, tree it is in, label of the SubTree it starts)
        stack: list[tuple] = [(first[0], first[1], 1, None, _Scope({}, False, "", None), main, None)]
        push, pop = stack.append, stack.pop
        while stack:
            element, path, depth, parent, scope, tree_id, label = pop()
            if element.tag in SUBTREE_TAGS:
                expanded = self._subtree(element, path, scope, tree_id, cycles)
                if expanded is not None:
                    target, inner, inner_path, inner_scope = expanded
                    name = element.attrs.get("name") or target
                    push((inner, inner_path, depth, parent, inner_scope, target,
                          f"{label} / {name}" if label else name))
                elif parent is not None:
                    self.unexpanded[parent.path] = self.unexpanded.get(parent.path, 0) + 1
                continue
            if count >= max_ops:
                issues.append(Issue("too_many_ops", path, f"line {element.line}: more than the limit of "
                                                          f"{max_ops} nodes, SubTrees expanded"))
                return deepest
            if depth > max_depth:
                issues.append(Issue("too_deep", path, f"line {element.line}: nesting deeper than the limit "
                                                      f"of {max_depth} levels, SubTrees expanded"))
                return deepest
            if depth > deepest:
                deepest = depth
            count += 1
            op_id = str(count)
            op = ops[op_id] = make_op(element, path, op_id, scope, label)
            if parent is not None:
                parent.children.append(op_id)
            if issues and issues.dropped:
                return deepest
            children = element.children
            if children:
                below = depth + 1
                paths = child_paths(path, children)
                for index in range(len(children) - 1, -1, -1):
                    push((children[index], paths[index], below, op, scope, tree_id, None))
        return deepest

    def _tree_node(self, tree: Element, path: str) -> tuple[Element, str] | None:
        if len(tree.children) != 1:
            self.issues.append(Issue("tree_children", path, f"line {tree.line}: a <BehaviorTree> holds exactly one "
                                                            f"node, this one holds {len(tree.children)}"))
            if not tree.children:
                return None
        return tree.children[0], child_paths(path, tree.children)[0]

    def _subtree(self, element: Element, path: str, scope: _Scope, tree_id: str,
                 cycles: set[tuple[str, str]]) -> tuple[str, Element, str, _Scope] | None:
        """What a SubTree element expands to: its tree's ID, first node and path, and the scope its ports make;
        None when it cannot (already reported)."""
        target = element.attrs.get("ID")
        if target not in self.trees or (tree_id, target) in cycles:
            return None
        if element.tag == "SubTreePlus":
            self._warn("v3_name", "BT.CPP 3's <SubTreePlus> read as BT.CPP 4's <SubTree>")
        if element.children:
            self.issues.append(Issue("subtree_children", path, f"line {element.line}: a <SubTree> takes no child "
                                                               f"element, this one has {len(element.children)}"))
        autoremap = False
        remap: dict[str, str] = {}
        for name, value in element.attrs.items():
            if name in SUBTREE_OPTIONS:
                if name != "_autoremap":
                    self._warn("v3_name", f"BT.CPP 3's {name} read as BT.CPP 4's _autoremap")
                autoremap = autoremap or value.strip() in TRUE_WORDS
            elif name in NOT_PORTS:
                continue
            elif name in SCRIPT_ATTRIBUTES:
                self._script(element, path, name)
            else:
                key = key_of(name, value)
                if key is None and self.format == "3" and element.tag == "SubTree":
                    key = value.strip()  # BT.CPP 3 remapped a SubTree's port to the key named, without braces
                remap[name] = scope.key(key) if key is not None else _Literal(value)
        self.instances += 1
        tree, tree_path = self.trees[target]
        first = self._tree_node(tree, tree_path)
        if first is None:
            return None
        return target, first[0], first[1], _Scope(remap, autoremap, f"{target}#{self.instances}/", scope)

    def _op(self, element: Element, path: str, op_id: str, scope: _Scope, label: str | None) -> Op:
        attrs, tag = element.attrs, element.tag
        self.lines[path] = element.line
        if element.text:
            self.texts[path] = element.text
        explicit = tag if tag in EXPLICIT else None
        if explicit:
            self.explicit.add(path)
            written = attrs.get("ID")
            if written is None:
                self.issues.append(Issue("required", path, f"line {element.line}: <{tag}> has no ID (the node it "
                                                           "runs)", missing="ID"))
                written = tag
        else:
            written = tag
        node_id = written
        renamed = None
        if written in V3_NAMES or written in V3_PORTS:
            node_id = V3_NAMES.get(written, written)
            if node_id != written:
                self._warn("v3_name", f"BT.CPP 3's {written} read as BT.CPP 4's {node_id}")
            renamed = V3_PORTS.get(node_id)
        scoped = scope.remap or scope.parent is not None
        args: dict[str, str] = {}
        keys: dict[str, str] = {}
        for name, value in attrs.items():
            if name in _NOT_PLAIN_PORTS:
                if name in SCRIPT_ATTRIBUTES:
                    self._script(element, path, name)
                continue
            if renamed is not None and name in renamed:
                self._warn("v3_name", f"BT.CPP 3's {node_id} port {name} read as BT.CPP 4's {renamed[name]}")
                name = renamed[name]
            key = key_of(name, value) if "{" in value else None
            if key is None:
                args[name] = value
            elif not scoped and key[0] != "@":
                keys[name] = key
            else:
                flat = scope.key(key)
                if isinstance(flat, _Literal):
                    args[name] = str(flat)
                else:
                    keys[name] = flat
        description = attrs.get("name") or node_id
        if label:
            description = f"{label} / {description}"
        named = self.named
        if node_id in NODE_LIBRARY or element.children or explicit == "Control" or explicit == "Decorator":
            if keys:
                named.update(keys.values())
            return Op(op_id, "control", description, [], None, args, None, None, path, node_id, keys or None)
        if not keys or named.issuperset(keys.values()):
            return Op(op_id, "do", description, NO_CHILDREN, node_id, args, None, None, path, None, keys or None,
                      None)
        reads, writes = self._directions(keys)
        return Op(op_id, "do", description, NO_CHILDREN, node_id, args, None, None, path, None, reads, writes)

    def _directions(self, keys: dict[str, str]) -> tuple[dict | None, dict]:
        """A leaf's {key} ports as reads and writes, with no catalog to say which are outputs: in pre-order (the
        order a tree's calls start in), a key no node before has named is the leaf's output, written from its
        call's output of that port; a key named before is read. Called for a leaf naming some key first. A
        catalog, once given, says instead (the checks and compile)."""
        named = self.named
        writes = {port: key for port, key in keys.items() if key not in named}
        named.update(keys.values())
        reads = {port: key for port, key in keys.items() if port not in writes}
        return reads or None, writes

    def _script(self, element: Element, path: str, name: str) -> None:
        self.issues.append(Issue("unsupported_script", attribute(path, name),
                                 f"line {element.line}: {name} is a BT.CPP script condition, which this executor "
                                 "does not run: express it as nodes of the tree"))

    def _warn(self, code: str, message: str) -> None:
        warning = {"code": code, "message": message}
        if warning not in self.warnings:
            self.warnings.append(warning)


def _elements(tree: Element, path: str):
    """(element, path) of every element below a tree, in pre-order, without recursion."""
    stack = list(reversed(list(zip(tree.children, child_paths(path, tree.children)))))
    while stack:
        element, element_path = stack.pop()
        yield element, element_path
        stack.extend(reversed(list(zip(element.children, child_paths(element_path, element.children)))))


def _replacements(where: str, names: list[str]) -> dict:
    """An issue's fix (one name) or alternatives (several) replacing the value at ``where``."""
    patches = [[{"op": "replace", "path": where, "value": name}] for name in names]
    if not patches:
        return {}
    return {"fix": patches[0]} if len(patches) == 1 else {"alternatives": patches}


def _listed(names) -> str:
    shown = list(names)[:10]
    return ", ".join(shown) + (", ..." if len(names) > 10 else "") if shown else "none"

