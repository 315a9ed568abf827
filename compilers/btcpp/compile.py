"""A BT.CPP plan compiled to py_trees: each control op the node library's behaviour of its node (a custom node of
the catalog a pass-through of its children), each leaf a capability call whose args are its literal ports (typed
as the catalog's ports say), reading and writing the blackboard through its {key} ports."""
from __future__ import annotations

import functools

import py_trees

from bt_exec.behaviours import CapabilityAction
from bt_exec.behaviours.bt_library import NODE_LIBRARY, PASS_THROUGH

from ..ir import Plan
from ..limits import STRICT_JSON
from ..tree import CompiledPlan
from .catalog import CatalogEntry, NodeCatalog
from .checks import catalog_for, directions
from .names import key_of

_INTEGER_TYPES = frozenset(("int", "unsigned", "unsigned int", "long", "int8_t", "int16_t", "int32_t", "int64_t",
                            "uint8_t", "uint16_t", "uint32_t", "uint64_t", "size_t"))
_FLOAT_TYPES = frozenset(("double", "float"))
_VECTORS = {"std::vector<int>": int, "std::vector<double>": float, "std::vector<std::string>": str}
JSON_PREFIX = "json:"


def compile_btcpp(plan: Plan, given: NodeCatalog | None) -> CompiledPlan:
    """The py_trees tree of a loaded (and checked) BT.CPP plan."""
    catalog = catalog_for(plan.source, given)
    entries = catalog.entries if catalog is not None else {}
    ops: dict[str, py_trees.behaviour.Behaviour] = {}
    for op in reversed(plan.ops.values()):  # reversed pre-order: every child before its parent
        if op.kind == "do":
            entry = entries.get(op.cap)
            if entry is None:
                reads, writes, args = op.reads, op.writes, _untyped(op.args) if op.args else {}
            else:
                reads, writes = directions(op, entry)
                args = typed_args(op.args, entry) if op.args else {}
            ops[op.op_id] = CapabilityAction(op.op_id, op.description, op.cap, args, None, op.call_id, reads, writes)
            continue
        spec = NODE_LIBRARY.get(op.node) or NODE_LIBRARY[PASS_THROUGH]
        entry = entries.get(op.node)
        args, reads = _with_defaults(op.args or {}, op.reads or {}, entry) if entry is not None else (
            op.args or {}, op.reads or {})
        ops[op.op_id] = spec.build(op.op_id, op.description, args, reads, [ops[child] for child in op.children])
    return CompiledPlan(plan, ops[plan.root], ops)


def _with_defaults(args: dict[str, str], reads: dict[str, str], entry: CatalogEntry) -> tuple[dict, dict]:
    """A library node's ports with the defaults its catalog entry gives the ports not written (the entry overrides
    the library's ports: a default there makes the port optional, so the node must get it): a literal default in
    args, a ``{key}`` one in reads."""
    missing = [(name, port.default) for name, port in entry.ports.items()
               if port.default is not None and name not in args and name not in reads]
    if not missing:
        return args, reads
    args, reads = dict(args), dict(reads)
    for name, default in missing:
        key = key_of(name, default)
        if key is None:
            args[name] = default
        else:
            reads[name] = key
    return args, reads


def typed_args(args: dict[str, str], entry: CatalogEntry | None) -> dict:
    """A leaf's literal ports as its call's args: strings, as BT.CPP holds them, unless the catalog gives the
    port a type (bool, an integer, a float, a vector written ``a;b;c``); an untyped ``json:...`` value is the JSON
    it holds. A value that does not read as its type stays the string it is."""
    if entry is None or not entry.ports:
        return _untyped(args)
    ports = entry.ports
    out = {}
    for name, value in args.items():
        port = ports.get(name)
        out[name] = _typed(value, port.type if port is not None else "")
    return out


def _untyped(args: dict[str, str]) -> dict:
    """Args with no catalog entry: as written, but for ``json:`` values."""
    for value in args.values():
        if value.startswith(JSON_PREFIX):
            return {name: _typed(text, "") for name, text in args.items()}
    return args


def _typed(value: str, kind: str) -> object:
    convert = _CONVERTERS.get(kind)
    if convert is None:
        if kind or not value.lstrip().startswith(JSON_PREFIX):
            return value
        convert = _json
    try:
        return convert(value.strip())
    except (ValueError, KeyError, RecursionError):
        return value


def _vector(item: type, text: str) -> list:
    return [item(part.strip()) for part in text.split(";")] if text else []


def _json(text: str) -> object:
    return STRICT_JSON.decode(text[len(JSON_PREFIX):])


_BOOLS = {"true": True, "1": True, "false": False, "0": False}
# Each port type a literal is converted to, by the C++ type a catalog names.
_CONVERTERS = {"bool": lambda text: _BOOLS[text.lower()],
               **dict.fromkeys(_INTEGER_TYPES, int), **dict.fromkeys(_FLOAT_TYPES, float),
               **{kind: functools.partial(_vector, item) for kind, item in _VECTORS.items()}}
