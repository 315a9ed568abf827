"""Reading plan files and standard input, never past the input size limit, and checking them as every door does."""
from __future__ import annotations

import argparse
import sys

import bt_exec

from ..compilers import ControlRequest, Plan, document_of
from ..compilers.dialects import DIALECTS
from ..errors import Issue, PlanError
from .console import EXIT_FAILED, CommandError


def read_input(name: str) -> bytes:
    """The bytes of file ``name`` (``-``: standard input), read no further than the input size limit.

    Raises CommandError (exit 2) if it cannot be read and PlanError if it is over
    the limit: reading on would let /dev/zero or a huge file eat all memory.
    """
    limit = bt_exec.Limits().max_input_bytes
    try:
        if name == "-":
            data = sys.stdin.buffer.read(limit + 1)
        else:
            with open(name, "rb") as file:
                data = file.read(limit + 1)
    except OSError as exc:
        raise CommandError(f"cannot read {name}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise PlanError([Issue("too_large", "", f"{label(name)} is over the input limit of {limit} bytes")])
    return data


def read_plan(args: argparse.Namespace, verb: str) -> tuple[bytes, Plan]:
    """The bytes of ``args.file`` and the plan they hold; CommandError for a meta op, and PlanError if invalid,
    with the issues ``validate`` gives for the same options (a graph read in part is checked as far as it was
    read, against the options' catalog and scene)."""
    source = read_input(args.file)
    try:
        loaded = bt_exec.load(source, dialect=args.dialect)
    except PlanError:
        executor = checking_executor(args, source)
        try:
            report = executor.validate_plan(source, dialect=args.dialect)
        finally:
            executor.close()
        # the issues of the input itself: those its repaired document would have are validate's to show
        raise PlanError([Issue(**issue) for issue in report["issues"] if not issue.get("after_fixes")]) from None
    if isinstance(loaded, ControlRequest):
        raise CommandError(control_message(args.file, loaded.op, verb), EXIT_FAILED)
    return source, loaded


def control_message(name: str, op: str, verb: str) -> str:
    """Why a control request given to ``compile`` or ``run`` is refused."""
    return (f"{label(name)} is a control request ({op}), not a plan: there is nothing to {verb}. A control "
            f"request acts on the plans of a running executor.")


def checking_executor(args: argparse.Namespace, source: bytes) -> bt_exec.Executor:
    """An executor with the options' catalog, scene and guard, that checks plans as every door's does. Never
    started (no tick thread) and running nothing: its sim backend is never called."""
    scene = bt_exec.Scene.from_file(args.scene) if args.scene else None
    catalogs = _catalogs(args.catalog, _dialect_of(source, args.dialect)) if args.catalog else {}
    return bt_exec.Executor(backend=bt_exec.SimBackend(), scene=scene, call_guard=args.guard, **catalogs)


def _dialect_of(source: bytes, dialect: str) -> str | None:
    """The dialect ``source`` is in; None if it does not load and its JSON is no dialect's (validate_plan then
    says why, with no catalog). A document that does not load keeps its dialect's catalog for ``--fix``."""
    if dialect != "auto":
        return dialect
    try:
        return bt_exec.load(source).dialect
    except PlanError:
        pass
    try:
        doc = document_of(source)
    except PlanError:
        return None
    return next((name for name, kind in DIALECTS.items() if kind.recognises(doc)), None)


def _catalogs(name_or_path: str, dialect: str | None) -> dict:
    """The Executor's catalog option for ``--catalog``: the dialect's kind of catalog (skills, capabilities)."""
    if dialect is None:
        return {}
    kind = DIALECTS[dialect]
    return {kind.executor_option: kind.read_catalog(name_or_path)}


def label(name: str) -> str:
    """How messages name input ``name``."""
    return "<stdin>" if name == "-" else name
