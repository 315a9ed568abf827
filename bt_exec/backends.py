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

A backend may also tell the runtime when a call has news rather than be asked for it every period
(push): it serves ``watch_call(run_id, news)``, after which it calls ``news()`` (from any thread; it
must not block, and costs a set insertion) whenever the call's status may have changed, until the
call ended or was cancelled. The runtime then asks ``status(run_id)`` only after ``news()`` (once
right after ``watch_call`` too, for what changed before it). A change that comes with the passing of
time alone (a simulated call's end, a timeout the backend keeps) is told from
``send_due_news()``, which the runtime calls once per period whatever the number of calls: it must
cost next to nothing when nothing is due. A backend that also serves ``news_due_at()`` (the
``time.monotonic()`` time when ``send_due_news`` next has something to tell, None while nothing is to
come with time alone) lets the runtime's loop sleep until then instead of waking every period; a
change that is not told with time must then come as ``news()``, which wakes the loop. A backend
without ``watch_call`` is asked every period.
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

    # Optional: ``def state(self) -> dict``, the ``pause(run_id)``/``resume(run_id)`` pair, and the push
    # pair ``watch_call(run_id, news)``/``send_due_news()`` with ``news_due_at()`` (see the module's description);
    # not part of the protocol, so a backend without them still is one.
