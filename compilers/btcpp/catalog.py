"""The catalog of BT.CPP nodes a tree is checked against: a ``<TreeNodesModel>`` (the palette Groot2 keeps), from
its own file (``--catalog FILE.xml``) or inside the plan's document. Each entry is a node ID with its kind and its
ports; a port without a ``default`` is required."""
from __future__ import annotations

import pathlib
from dataclasses import dataclass, field

from bt_exec.behaviours.bt_library import PortSpec
from bt_exec.errors import ConfigError, PlanError

from ..limits import DEFAULT_LIMITS
from .xml_read import Element, read_xml

# The elements of a TreeNodesModel, each a node kind.
KINDS = {"Action": "action", "Condition": "condition", "Control": "control", "Decorator": "decorator",
         "SubTree": "subtree"}
PORT_DIRECTIONS = {"input_port": "in", "output_port": "out", "inout_port": "inout"}


@dataclass(frozen=True, slots=True)
class CatalogEntry:
    """One node ID of a catalog: its ``kind`` (action, condition, control, decorator, subtree) and its ports (each a
    ``PortSpec`` of the node library: direction, default (None: required), ``type`` as the model writes it, empty
    when it gives none)."""

    node_id: str
    kind: str
    ports: dict[str, PortSpec] = field(default_factory=dict)
    outputs: frozenset[str] = field(init=False, repr=False, compare=False)  # the ports that write (out, inout)

    def __post_init__(self) -> None:
        object.__setattr__(self, "outputs", frozenset(name for name, port in self.ports.items()
                                                      if port.direction != "in"))

    @property
    def is_leaf(self) -> bool:
        return self.kind in ("action", "condition")


@dataclass(frozen=True, slots=True)
class NodeCatalog:
    """Node IDs and their ports, from a TreeNodesModel."""

    entries: dict[str, CatalogEntry]

    @classmethod
    def from_file(cls, path: str | pathlib.Path) -> NodeCatalog:
        """The catalog of an XML file holding a ``<TreeNodesModel>`` (alone, or in a ``<root>``); ConfigError
        naming the file and where it is wrong."""
        try:
            text = pathlib.Path(path).read_bytes().decode("utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read the node catalog {path}: {getattr(exc, 'strerror', None) or exc}") \
                from None
        return cls.from_text(text, str(path))

    @classmethod
    def from_text(cls, text: str, name: str = "the node catalog") -> NodeCatalog:
        """The catalog of XML text holding a ``<TreeNodesModel>``; ConfigError saying where it is wrong."""
        try:
            root = read_xml(text, DEFAULT_LIMITS).root
        except PlanError as exc:
            raise ConfigError(f"{name}: a node catalog is a TreeNodesModel's XML, and this is not: "
                              f"{exc.issues[0].message}") from None
        model = root if root.tag == "TreeNodesModel" else next(
            (child for child in root.children if child.tag == "TreeNodesModel"), None)
        if model is None:
            raise ConfigError(f"{name}: no <TreeNodesModel> element (the node catalog Groot2 writes)")
        entries, problems = read_model(model)
        if problems:
            raise ConfigError(f"{name}: " + "; ".join(problems))
        return cls(entries)

    def get(self, node_id: str) -> CatalogEntry | None:
        return self.entries.get(node_id)

    def merged_over(self, other: NodeCatalog | None) -> NodeCatalog:
        """This catalog's entries, and ``other``'s for the IDs this one does not declare."""
        if other is None or not other.entries:
            return self
        return NodeCatalog({**other.entries, **self.entries})


def read_model(model: Element) -> tuple[dict[str, CatalogEntry], list[str]]:
    """The entries of a ``<TreeNodesModel>`` element, and what is wrong in it (line by line)."""
    entries: dict[str, CatalogEntry] = {}
    problems: list[str] = []
    for element in model.children:
        kind = KINDS.get(element.tag)
        node_id = element.attrs.get("ID")
        if kind is None:
            problems.append(f"line {element.line}: <{element.tag}> is no node kind (expected one of "
                            f"{', '.join(KINDS)})")
            continue
        if not node_id:
            problems.append(f"line {element.line}: <{element.tag}> has no ID")
            continue
        ports = {}
        for port in element.children:
            direction = PORT_DIRECTIONS.get(port.tag)
            name = port.attrs.get("name")
            if direction is None or not name:
                problems.append(f"line {port.line}: <{port.tag}> in {node_id} is no port (expected input_port, "
                                "output_port or inout_port with a name)")
                continue
            ports[name] = PortSpec(direction, port.attrs.get("default"), port.attrs.get("type", ""))
        entries[node_id] = CatalogEntry(node_id, kind, ports)
    return entries, problems


def node_catalog_of(catalog: object) -> NodeCatalog | None:
    """A NodeCatalog from a NodeCatalog, a file path, or None."""
    if catalog is None or isinstance(catalog, NodeCatalog):
        return catalog
    if isinstance(catalog, (str, pathlib.Path)):
        return NodeCatalog.from_file(catalog)
    raise ConfigError(f"a BT.CPP tree is checked against a node catalog (a TreeNodesModel file), not "
                      f"{type(catalog).__name__}")
