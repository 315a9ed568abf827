"""Reading plan files and standard input, never past the input size limit."""
from __future__ import annotations

import sys

import bt_exec

from ..compilers import ControlRequest, Plan
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


def read_plan(name: str, dialect: str, verb: str) -> tuple[bytes, Plan]:
    """The bytes of ``name`` and the plan they hold; PlanError if invalid, CommandError for a meta op."""
    source = read_input(name)
    loaded = bt_exec.load(source, dialect=dialect)
    if isinstance(loaded, ControlRequest):
        raise CommandError(control_message(name, loaded.op, verb), EXIT_FAILED)
    return source, loaded


def control_message(name: str, op: str, verb: str) -> str:
    """Why a control request given to ``compile`` or ``run`` is refused."""
    return (f"{label(name)} is a control request ({op}), not a plan: there is nothing to {verb}. A control "
            f"request acts on the plans of a running executor.")


def label(name: str) -> str:
    """How messages name input ``name``."""
    return "<stdin>" if name == "-" else name
