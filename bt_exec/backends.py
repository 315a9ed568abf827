"""The capability backend protocol: how an action behaviour starts, polls and cancels a call.

A backend serves ``start(call)``. A synchronous capability answers with a
terminal ``CallStatus`` straight away; an asynchronous one answers with a run
id (a non-empty string), after which ``status(run_id)`` is polled until a
terminal state and ``cancel(run_id)`` may be called at any time before that.

A backend may also serve ``state()``: a snapshot of what the robot reports (a dict of
JSON values, e.g. ``{"battery": 15, "holding": "cup"}``), read by the call guard at
call time for rules with state conditions. A backend without it reports no state,
and such rules then deny (the guard fails closed).

A backend may also serve the pair ``pause(run_id)`` / ``resume(run_id)``: a paused plan
then pauses its calls in progress too (the call reports PAUSED until resumed); on a
backend without them, calls already running go on to their end while the plan holds
every op not yet started.
"""
from __future__ import annotations

from typing import Any, NamedTuple, Protocol

TERMINAL_STATES = frozenset(("SUCCEEDED", "FAILED", "CANCELED", "TIMEOUT"))

# Op state reported in events for each terminal call state.
OP_STATE_OF = {"SUCCEEDED": "succeeded", "FAILED": "failed", "CANCELED": "canceled", "TIMEOUT": "timeout"}


class CapabilityCall(NamedTuple):
    """One request to run a capability for an op of a plan (immutable: a tuple, cheap to make per call)."""

    plan_id: str
    op_id: str
    cap: str
    args: dict
    provider: str | None
    call_id: str


class CallStatus(NamedTuple):
    """A call's state: PENDING, RUNNING, PAUSED, or terminal SUCCEEDED, FAILED, CANCELED, TIMEOUT.

    ``event`` names the outcome for dialects whose transitions follow events
    (success, failure, timeout, or a skill's own event name).
    """

    state: str
    output: Any = None
    error: str = ""
    detail: str = ""
    event: str | None = None

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL_STATES


class Backend(Protocol):
    """What an action behaviour needs from whatever serves capabilities."""

    def start(self, call: CapabilityCall) -> CallStatus | str: ...

    def status(self, run_id: str) -> CallStatus: ...

    def cancel(self, run_id: str) -> None: ...

    # Optional: ``def state(self) -> dict`` and the ``pause(run_id)``/``resume(run_id)`` pair (see the
    # module's description); not part of the protocol, so a backend without them still is one.
