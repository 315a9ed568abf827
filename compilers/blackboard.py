"""Blackboard seeds: the entries a submitted plan's run starts its blackboard with (``Executor.submit(...,
blackboard=...)``, ``submit_plan``'s ``blackboard`` argument, ``bt-exec run --blackboard``), held to the same rules
as plan input: each key a name a ``{key}`` port reads, each value JSON within the limits, and all of them at most
``MAX_SEED_BYTES`` written as compact JSON.

The seeds of a submission reach what its admission builds through ``admitting_with``: the run's blackboard starts
with them, and a dialect's compile may read them (``admission_seeds``): a BT XML leaf's ``{key}`` port that only a
guess made an output reads a seeded key instead, as a key named before any node.
"""
from __future__ import annotations

import contextlib
import dataclasses
import re
from collections.abc import Iterator
from contextvars import ContextVar

from jsonpointer import escape

from bt_exec.errors import Issue, Issues

from .limit_walk import check_document
from .limits import Limits

MAX_SEED_BYTES = 1024 * 1024
SEEDS_PATH = "/blackboard"
# A SubTree's own entry in a flattened BT XML plan: ``<tree ID>#<instance>/<key>``.
_SUBTREE_ENTRY = re.compile(r".*#[0-9]+/")
_CONTROL_CHARACTER = re.compile(r"[\x00-\x1f\x7f]")
# The seeds of the submission being admitted in this thread (the admission builds its run in the submitting thread).
_ADMITTING: ContextVar[dict | None] = ContextVar("blackboard_seeds", default=None)


@contextlib.contextmanager
def admitting_with(seeds: dict) -> Iterator[None]:
    """The admission of one submission, in this thread, with ``seeds`` (checked: ``seed_issues``)."""
    token = _ADMITTING.set(seeds)
    try:
        yield
    finally:
        _ADMITTING.reset(token)


def admission_seeds() -> dict | None:
    """The seeds of the submission being admitted in this thread, or None."""
    return _ADMITTING.get()


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
