"""What RTDL's shapes read alike: the op kinds, the id args of the executor's builtin calls, the plan read
in part, and how an issue names a value's type."""
from __future__ import annotations

import re

from bt_exec.errors import Issue

from ..control_values import id_text
from ..ir import Op, Plan

META_OPS = ("cancel_plan", "cancel_all", "stop_plan_at")
TREE_OPS = ("sequence", "parallel", "do")
ARENA_KINDS = {0: "sequence", 1: "parallel", 2: "do"}
# How the caps of the executor's builtins begin (compilers.catalog names them): their args name plans and
# ops by id. The arena's form is a builtin only from the executor's own provider.
BUILTIN_CAP_PREFIX, ARENA_BUILTIN_CAP_PREFIX = "executor.builtin_", "robonix/system/executor/builtin/"
BUILTIN_CAP_PREFIXES = (BUILTIN_CAP_PREFIX, ARENA_BUILTIN_CAP_PREFIX)
_ID_ARGS = ("plan_id", "op_id", "target_op_id")
NON_BLANK = re.compile(r"\S")


def builtin_ids_as_text(args: dict, path: str, issues: list[Issue]) -> dict:
    """The args of a builtin call with their integer ids as decimal strings (a copy when one changes);
    a negative, fractional or boolean id is an issue at its arg."""
    if not has_id_not_text(args):
        return args
    args = dict(args)
    for key in _ID_ARGS:
        if key in args and type(args[key]) is not str:
            text = id_text(args[key], key, f"{path}/{key}", issues)
            if text is not None:
                args[key] = text
    return args


def names_builtin(cap: str, provider: str | None) -> bool:
    """Whether an arena call of ``cap`` from ``provider`` is one of the executor's builtins."""
    return cap.startswith(BUILTIN_CAP_PREFIX) or cap.startswith(ARENA_BUILTIN_CAP_PREFIX) and \
        provider in (None, "executor")


def has_id_not_text(args: dict) -> bool:
    """Whether a builtin call's args give a plan or op id as something other than text."""
    return any(key in args and type(args[key]) is not str for key in _ID_ARGS)


def partial_plan(ops: dict[str, Op], shape: str, meta: dict) -> Plan:
    """The sound ops of a plan refused for its shape, each where it is in the input: what the checks of its
    calls (catalog, builtins, guard) still run on, so that a fault of one node hides none of another's."""
    return Plan(dialect="rtdl", shape=shape, root="", ops=ops, description="a plan read in part", depth=0,
                numbered_by_loader=False, meta=meta)


def unknown_keys(node: dict, allowed: frozenset) -> list:
    """The keys of ``node`` not in ``allowed``, in input order (a set difference would follow string hashes,
    which change from one process to the next)."""
    return [key for key in node if key not in allowed]


def is_int(value: object) -> bool:
    """Whether ``value`` is an integer (a boolean is not)."""
    return isinstance(value, int) and not isinstance(value, bool)


def type_name(value: object) -> str:
    """The JSON type of ``value`` as an issue names it: 'an object', 'a string', 'null' ..."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean", int: "an integer",
            float: "a number", type(None): "null"}.get(type(value), type(value).__name__)
