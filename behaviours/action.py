"""The action behaviours: one capability call over a backend, and one step of a step graph."""
from __future__ import annotations

import functools
import logging
import time

from py_trees.common import Status

from bt_exec.backends import OP_STATE_OF, CallStatus, CapabilityCall

from bt_exec.compat.py_trees import LeanBehaviour

from .op_behaviour import RUNNING, OpReports, canceled_detail

log = logging.getLogger(__name__)

_TIMED_OUT = CallStatus("TIMEOUT")  # the news a poll delivers when the op timeout passed


class CapabilityAction(OpReports, LeanBehaviour):
    """Runs one capability call: started in ``initialise``, taken in ``update``, cancelled in ``terminate``.

    Statuses:
        RUNNING: the call is in progress (the capability may report it paused), or the op was
            held back because the plan is being cancelled or is paused.
        SUCCESS: the capability reported SUCCEEDED.
        FAILURE: it reported FAILED, TIMEOUT or CANCELED, or the backend raised
            or answered something that is not a call status, or it ran past the op
            timeout (the call is then cancelled and the op ends ``timeout``);
            ``result["error"]`` says which.
        INVALID (from RUNNING): the plan was torn down; the call is cancelled and the op
            reports ``canceled``.

    Waking: while its call runs the action is a watched source of its plan. On a
    backend that pushes (``watch_call``) the runtime calls ``poll()`` only once the
    backend told it the call has news, or once the op timeout is due; on any other,
    once per period. ``poll`` asks the backend (or sees the deadline pass) and keeps
    what changed; the tick that follows takes it in ``update``. A tick with no news
    costs no backend call.

    After it finishes, ``final_state`` is the op state (succeeded, failed,
    timeout, canceled) and ``result`` is ``{success, output, error, cap, call_id, event}``.
    """

    # A leaf: one empty tuple for every action, where LeanBehaviour's __init__ (not called) makes a list each.
    children = ()
    # What a run sets: class-level defaults keep a plan's many idle actions small.
    backend = None
    timeout_s: float | None = None
    result: dict | None = None
    final_state: str | None = None
    _run_id: str | None = None
    _news: CallStatus | None = None
    _reported_state = "RUNNING"
    _deadline: float | None = None
    _paused_at: float | None = None  # when pause_call paused the call
    _pushed = False  # the call's backend tells the runtime when it has news
    reads: dict[str, str] | None = None
    writes: dict[str, str] | None = None
    _runs = 0  # calls started so far: the op may run again (a loop, a retry, a reactive re-check)
    _read_args: dict | None = None  # the args this call was started with, read from the blackboard

    def __init__(self, op_id: str, description: str, cap: str, args: dict, provider: str | None = None,
                 call_id: str | None = None, reads: dict[str, str] | None = None,
                 writes: dict[str, str] | None = None):
        """``reads``: argument name -> blackboard key, each read when a call starts (the argument's value for that
        call); ``writes``: output name -> blackboard key, each written from the call's output when it succeeds (the
        output ``event`` is the call's outcome event, written however it ended)."""
        self.op_id = op_id
        self.description = description
        self.cap = cap
        self.args = args
        self.provider = provider
        self.call_id = call_id
        if reads:
            self.reads = reads
        if writes:
            self.writes = writes

    def setup(self, **kwargs) -> None:
        """Takes ``plan`` (the run's PlanHooks), ``capabilities`` (whose ``backend_for(cap, provider)``
        gives the backend that serves this op) and, optionally, ``op_timeout_s``: the longest a call
        may run before it is cancelled and the op ends ``timeout``."""
        self.hooks = self.report_to = kwargs["plan"]
        self.backend = kwargs["capabilities"].backend_for(self.cap, self.provider)
        timeout_s = kwargs.get("op_timeout_s")
        if timeout_s is not None:
            self.timeout_s = timeout_s

    def tick(self):
        # Behaviour.tick's lifecycle (initialise on entry, update, stop when finished) without its
        # per-tick debug line; plus the hold-back of an op entered while its plan is being cancelled.
        if self.status != RUNNING or self.held_back:
            if self.held_back_on_entry():
                yield self
                return
            self.initialise()
        new_status = self.update()
        if new_status != RUNNING:
            self.stop(new_status)
        self.status = new_status
        yield self

    def stop(self, new_status: Status) -> None:
        # Behaviour.stop without its debug line, whose text is built even when debug logging is off.
        self.terminate(new_status)
        self.status = new_status

    def initialise(self) -> None:
        if self.final_state is not None or self._news is not None or self._deadline is not None \
                or self._reported_state != "RUNNING":  # entered again: forget everything of the last call
            self.result = self.final_state = self._run_id = self._news = self._deadline = self._read_args = None
            self._pushed = False
            self._reported_state = "RUNNING"
        self.report_to.op_state(self.op_id, "running", None, None)
        self._runs += 1
        if self.call_id is None:
            self.call_id = f"{self.hooks.plan_id}:{self.op_id}"
        elif self._runs > 1:  # each call of an op running again is a call of its own: its id's "#n" says which
            base = self.call_id if self._runs == 2 else self.call_id.rsplit("#", 1)[0]
            self.call_id = f"{base}#{self._runs}"
        args = self.args
        if self.reads is not None:
            args = self._args_read()
            if args is None:
                return
        call = CapabilityCall(self.hooks.plan_id, self.op_id, self.cap, args, self.provider, self.call_id)
        try:
            started = self.backend.start(call)
        except Exception as exc:  # a backend fault fails this op, never the executor
            self._finish(CallStatus("FAILED", error=f"backend raised {type(exc).__name__}: {exc}"))
            return
        if isinstance(started, str) and started:
            self._run_id = started
            if self.timeout_s is not None:
                self._deadline = time.monotonic() + self.timeout_s
            self._watch(started)
        elif isinstance(started, CallStatus) and started.terminal:
            self._finish(started)
        else:
            self._finish(CallStatus("FAILED", error=f"backend returned {_describe(started)} from start, "
                                                    "expected a run id or a terminal CallStatus"))

    def _args_read(self) -> dict | None:
        """The call's args with the blackboard's values of the ports it reads; None (the call failed, naming the
        port and the key) when a key is not set."""
        blackboard = self.hooks.blackboard
        args = dict(self.args or {})
        for port, key in self.reads.items():
            if key not in blackboard:
                self._finish(CallStatus("FAILED", error=f"input port {port!r} reads blackboard key {key!r}, which is "
                                                        "not set"))
                return None
            args[port] = blackboard[key]
        self._read_args = args
        return args

    def _write_outputs(self) -> None:
        """The call ended: its outputs written to the blackboard keys of its output ports (on success; the
        outcome ``event`` whatever the ending)."""
        blackboard = self.hooks.blackboard
        result = self.result
        output = result["output"]
        for port, key in self.writes.items():
            if port == "event":
                blackboard[key] = result["event"]
            elif result["success"] and type(output) is dict and port in output:
                blackboard[key] = output[port]

    def _watch(self, run_id: str) -> None:
        """Wait on the call: told of its news where its backend pushes, else polled every period."""
        watch_call = getattr(self.backend, "watch_call", None)
        if watch_call is None:
            self.hooks.watch(self)
            return
        self.hooks.watch_for_news(self)
        try:  # what the backend holds refers to this action; nothing here refers back to it (no cycle)
            watch_call(run_id, functools.partial(self.hooks.news, self))
        except Exception as exc:  # then asked every period, as on a backend that cannot push
            log.warning("watch_call of %s (op %s, run %s) raised %s: %s; polling it instead", self.cap, self.op_id,
                        run_id, type(exc).__name__, exc)
            self.hooks.unwatch(self)
            self.hooks.watch(self)
            return
        self._pushed = True
        if self._deadline is not None:
            self.hooks.poll_at(self, self._deadline)

    def poll(self) -> bool:
        """Ask the backend for news (or see the op timeout pass); True when a tick must take it."""
        if self._deadline is not None and self._paused_at is None:
            if time.monotonic() >= self._deadline:
                self._news = _TIMED_OUT
                return True
            if self._pushed:  # polled before its deadline: look again at the deadline
                self.hooks.poll_at(self, self._deadline)
        status = self._status()
        if status.terminal or status.state != self._reported_state:
            self._news = status
            return True
        return False

    def update(self) -> Status:
        news, self._news = self._news, None
        if news is not None and self.final_state is None:
            if news is _TIMED_OUT:
                self.hooks.unwatch(self)
                self._cancel_call()
                self._finish(CallStatus("TIMEOUT", error=f"no result within the op timeout of {self.timeout_s:g} s; "
                                                         "the call was cancelled"))
            elif news.terminal:
                self.hooks.unwatch(self)
                self._finish(news)
            else:
                self._reported_state = news.state
                self.report("paused" if news.state == "PAUSED" else "running", detail=news.detail or None)
        if self.final_state is None:
            return RUNNING
        return Status.SUCCESS if self.final_state == "succeeded" else Status.FAILURE

    def terminate(self, new_status: Status) -> None:
        if new_status != Status.INVALID:
            if self.writes is not None:
                self._write_outputs()
            self.report_to.op_state(self.op_id, self.final_state, self.result, None)
        elif self.status == RUNNING and not self.held_back:
            if self._run_id is not None and self.final_state is None:
                self.hooks.unwatch(self)
                self._cancel_call()
            self.report("canceled", detail=canceled_detail())

    def pause_call(self) -> bool:
        """Pause the call in progress where its backend has the optional ``pause``/``resume`` pair; whether
        it did. The op timeout stops counting until ``resume_call``."""
        pause = getattr(self.backend, "pause", None)
        if pause is None or self._run_id is None or self.final_state is not None:
            return False
        try:
            pause(self._run_id)
        except Exception as exc:  # the call then goes on, as on a backend without pause
            log.warning("pause of %s (op %s, run %s) raised %s: %s", self.cap, self.op_id, self._run_id,
                        type(exc).__name__, exc)
            return False
        self._paused_at = time.monotonic()
        if self._pushed:  # the tick polls it, as it polls a call asked every period
            self.hooks.news(self)
        return True

    def resume_call(self) -> None:
        """Resume a call ``pause_call`` paused; its op timeout is moved on by the time it was paused."""
        paused_at, self._paused_at = self._paused_at, None
        if self._run_id is None or self.final_state is not None or paused_at is None:
            return
        if self._deadline is not None:
            self._deadline += time.monotonic() - paused_at
        try:
            self.backend.resume(self._run_id)
        except Exception as exc:
            log.warning("resume of %s (op %s, run %s) raised %s: %s", self.cap, self.op_id, self._run_id,
                        type(exc).__name__, exc)
        if self._pushed:  # polled this tick; the poll looks again at the deadline moved on
            self.hooks.news(self)

    def _cancel_call(self) -> None:
        try:
            self.backend.cancel(self._run_id)
        except Exception as exc:
            log.warning("cancel of %s (op %s, run %s) raised %s: %s", self.cap, self.op_id, self._run_id,
                        type(exc).__name__, exc)
        self._run_id = None

    def _status(self) -> CallStatus:
        try:
            status = self.backend.status(self._run_id)
        except Exception as exc:
            return CallStatus("FAILED", error=f"backend status raised {type(exc).__name__}: {exc}")
        if not isinstance(status, CallStatus) or status.state not in OP_STATE_OF and status.state not in (
                "PENDING", "RUNNING", "PAUSED"):
            return CallStatus("FAILED",
                              error=f"backend returned {_describe(status)} from status, expected a CallStatus")
        if status.state == "PENDING":  # not started yet is still "running" to the plan
            return CallStatus("RUNNING", status.output, status.error, status.detail, status.event)
        return status

    def _finish(self, status: CallStatus) -> None:
        self.final_state = OP_STATE_OF[status.state]
        success = status.state == "SUCCEEDED"
        error = status.error or ("" if success else f"capability ended {status.state}")
        self.result = {"success": success, "output": status.output, "error": error, "cap": self.cap,
                       "call_id": self.call_id, "event": status.event or _DEFAULT_EVENT[status.state]}
        if self.reads is not None and self._read_args is not None:  # what this call read from the blackboard
            self.result["args"] = self._read_args
        self.feedback_message = error or "succeeded"


_DEFAULT_EVENT = {"SUCCEEDED": "success", "FAILED": "failure", "CANCELED": "canceled", "TIMEOUT": "timeout"}


def _describe(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


class SkillAction(CapabilityAction):
    """One step of a step graph: a capability call whose outcome is one event of its skill.

    Statuses:
        RUNNING: the skill runs (or the step was held back: the plan is being cancelled or is paused).
        SUCCESS: it ended with an event its catalog does not count as a failure.
        FAILURE: it ended with a failure event (or the call broke, reported as ``failed``),
            or with an event the skill does not have.
        INVALID (from RUNNING): torn down; the call is cancelled, the step reports ``canceled``.

    ``result["event"]`` is the outcome the graph's router follows.
    """

    def __init__(self, op_id: str, description: str, skill: str, params: dict, outcomes: tuple,
                 failure_outcomes: frozenset):
        super().__init__(op_id, description, skill, params)
        self.outcomes = outcomes
        self.failure_outcomes = failure_outcomes

    def _finish(self, status: CallStatus) -> None:
        super()._finish(status)
        event = status.event or _SKILL_EVENT[status.state]
        if event == "success" and status.state != "SUCCEEDED":  # a call that did not succeed never routes as success
            event = _SKILL_EVENT[status.state]
        self.result["event"] = event
        if event not in self.outcomes:
            self.final_state = "failed"
            self.result["success"] = False
            self.result["error"] = self.result["error"] or f"unknown outcome {event!r} of {self.cap}"
        elif event == "timeout":
            self.final_state = "timeout"
        else:
            self.final_state = "failed" if event in self.failure_outcomes else "succeeded"
            self.result["success"] = self.final_state == "succeeded"
            if self.result["success"]:
                self.result["error"] = ""


# A call that ended without naming its event: what the step graph sees.
_SKILL_EVENT = {"SUCCEEDED": "success", "FAILED": "failed", "CANCELED": "failed", "TIMEOUT": "timeout"}
