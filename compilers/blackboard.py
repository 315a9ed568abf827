"""Blackboard seeds: the entries a submitted plan's run starts its blackboard with (``Executor.submit(...,
blackboard=...)``, ``submit_plan``'s ``blackboard`` argument, ``bt-exec run --blackboard``), held to the same rules
as plan input: each key a name a ``{key}`` port reads, each value JSON within the limits, and all of them at most
``MAX_SEED_BYTES`` written as compact JSON.

A submission's seeds go into its loaded plan (``seeded``), before it is checked: the run's blackboard starts with
them, the dataflow check counts them as written before any node, and a ``{key}`` port that the loader's guess made
an output (the first node naming a key writes it) reads a seeded key instead, as a key named before any node.
"""
from __future__ import annotations

import dataclasses
import re

from jsonpointer import escape

from bt_exec.errors import Issue, Issues

from .ir import Plan
from .limit_walk import check_document
from .limits import Limits

MAX_SEED_BYTES = 1024 * 1024
SEEDS_PATH = "/blackboard"
# A SubTree's own entry in a flattened BT XML plan: ``<tree ID>#<instance>/<key>``.
_SUBTREE_ENTRY = re.compile(r".*#[0-9]+/")
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")


def seeded(plan: Plan, seeds: dict) -> Plan:
    """``plan`` with its run's blackboard seeded by ``seeds`` (checked: ``seed_issues``): a port the loader took
    for an output only because its op named the key first reads the key instead, as it is named before any op.
    A catalog that declares the port's direction still decides it at check and compile (``btcpp.checks``)."""
    ops = plan.ops
    moved_ops = {}
    for op in ops.values():
        writes = op.writes
        if writes and not seeds.keys().isdisjoint(writes.values()):
            moved = {port: key for port, key in writes.items() if key in seeds}
            kept = {port: key for port, key in writes.items() if port not in moved}
            moved_ops[op.op_id] = dataclasses.replace(op, reads={**(op.reads or {}), **moved}, writes=kept or None)
    if moved_ops:
        ops = {op_id: moved_ops.get(op_id, op) for op_id, op in ops.items()}
    return dataclasses.replace(plan, ops=ops, blackboard_seeds=seeds)


def seed_issues(seeds: object, limits: Limits) -> list[Issue]:
    """Every issue of ``seeds`` (code ``bad_blackboard`` for a key, the limit walk's codes for a value), each at
    ``/blackboard/<key>...``; empty when they may seed a run."""
    if not isinstance(seeds, dict):
        return [Issue("bad_blackboard", SEEDS_PATH, f"the blackboard seeds are an object of key -> JSON value, got "
                                                    f"{type(seeds).__name__}")]
    issues = Issues()
    for key in seeds:
        problem = key_problem(key) if isinstance(key, str) else None  # a key of another type: the walk's
        if problem is not None:
            shown = repr(key) if len(key) <= 80 else f"{key[:80]!r}..."
            issues.append(Issue("bad_blackboard", f"{SEEDS_PATH}/{escape(key)}", f"blackboard key {shown}: {problem}"))
    seed_limits = dataclasses.replace(limits, max_input_bytes=MAX_SEED_BYTES)
    for issue in check_document(seeds, seed_limits, measured=False, at=SEEDS_PATH[1:]):
        if issue.code == "too_large":
            issue = Issue("too_large", SEEDS_PATH, f"the blackboard seeds are over the limit of {MAX_SEED_BYTES} "
                                                   "bytes (counted as compact JSON text)")
        issues.append(issue)
    return issues.listed()


def copied(seeds: dict) -> dict:
    """A copy of checked seeds (JSON values: dicts, lists, scalars), made without recursion however deep they
    nest: the run's own, whatever the caller does with theirs."""
    made: dict = {}
    stack: list[tuple[dict | list, dict | list]] = [(seeds, made)]
    while stack:
        source, target = stack.pop()
        for key, item in source.items() if isinstance(source, dict) else enumerate(source):
            if isinstance(item, (dict, list)):
                child: object = {} if isinstance(item, dict) else []
                stack.append((item, child))
            else:
                child = item
            if isinstance(target, dict):
                target[key] = child
            else:
                target.append(child)
    return made


def key_problem(key: str) -> str | None:
    """What makes ``key`` no blackboard name a seed may give, or None: a name a ``{key}`` port of the main tree
    reads (not blank, without braces, blanks around it or control characters), not a SubTree's own entry."""
    if not key.strip():
        return "a blank name"
    if "{" in key or "}" in key:
        return "braces: no {key} port can name it"
    if key != key.strip():
        return "blanks around it: a {key} port reads its key without them"
    if _CONTROL_CHARACTER.search(key):
        return "a control character"
    if key.startswith("@"):
        return f"{{@key}} is how a SubTree reads the main tree's entry; a seed names it plainly: {key[1:]!r}"
    if _SUBTREE_ENTRY.match(key):
        return "a SubTree's own entry (ID#n/key), which only that SubTree reaches: seeds are the main tree's entries"
    return None
