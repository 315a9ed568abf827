"""RTDL (Robonix) loading: envelope, bare tree and wire arena shapes, plus root meta ops.

Nodes are checked by hand rather than by jsonschema, for speed on 10k-op plans;
tests/test_schema_agreement.py proves the schemas in ``schemas/`` and these modules
agree. Every problem is collected, not just the first. One module a shape: ``envelope``,
``tree``, ``meta`` (meta ops), ``arena`` (and ``arena_tree``, whether its indices make a tree);
``ops`` holds what they read alike.
"""
from __future__ import annotations

from bt_exec.errors import Issue, PlanError

from ..ir import ControlRequest, Plan
from ..limits import Limits
from .arena import load_arena
from .envelope import load_envelope
from .ops import type_name
from .tree import load_tree_root


def detect_shape(doc: dict) -> str | None:
    """Which RTDL shape ``doc`` is: envelope, arena or tree; None if none fits."""
    if "rtdl" in doc:
        return "envelope"
    if "nodes" in doc or "root_index" in doc:
        return "arena"
    if "op" in doc:
        return "tree"
    return None


def load_rtdl(doc: object, limits: Limits) -> Plan | ControlRequest:
    """Load an RTDL document of any shape; raise PlanError with every issue found."""
    if not isinstance(doc, dict):
        raise PlanError([Issue("type", "", f"an RTDL document must be a JSON object, got {type_name(doc)}")])
    shape = detect_shape(doc)
    if shape == "envelope":
        return load_envelope(doc, limits)
    if shape == "arena":
        return load_arena(doc, limits)
    if shape == "tree":
        return load_tree_root(doc, "", limits, description=None, meta={})
    raise PlanError([Issue("unknown_shape", "", "not an RTDL document: expected an envelope (key 'rtdl'), "
                                               "a tree (key 'op') or a wire arena (keys 'nodes', 'root_index')")])
