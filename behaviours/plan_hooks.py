"""What the behaviours of a compiled plan report to, and ask of, the runtime that runs them.

Behaviours receive an object with this interface as ``setup(plan=...)``; the
runtime's per-plan run record implements it.

Event-driven ticking, the contract every behaviour under bt_exec keeps: the
runtime ticks a plan's tree only when something in it can have changed. A
behaviour that stays RUNNING because it waits for something outside the tree
(a capability call, a deadline) registers that source: with ``watch`` the
runtime polls it once per period; with ``watch_for_news`` it is polled only
after ``news(source)`` is called (from any thread: the source has news) or
once the time given to ``poll_at`` has come, so a plan waiting on such a
source costs nothing per period. The tree is ticked when a poll reports news,
when ``wake`` is called, or when a control request (a stop point armed, a
cancel) arrives. A plan left RUNNING with nothing watched (either way) and
nothing pending can never be woken: the runtime's watchdog ends it with a
reason that names the behaviour at the tip of the tree. A paused plan is
waiting legitimately: its held ops are entered once it resumes (which wakes it).

The blackboard: one dict per plan run (``blackboard``), key -> value, which the
ops of a dialect with dataflow read and write as they run (a call's input read
from it when the call starts, its output written to it when it succeeds).
"""
from __future__ import annotations

from typing import Any, Protocol


class WatchedSource(Protocol):
    def poll(self) -> bool:
        """Look for news without blocking; True when the behaviour must be ticked to take it."""


class PlanHooks(Protocol):
    plan_id: str
    cancel_requested: bool  # once true, no op may start: the teardown follows this tick
    paused: bool  # no op may start until the plan resumes
    holding_entries: bool  # paused, or a step is pending: an op being entered asks may_enter first
    blackboard: dict  # the run's blackboard: read and written by ops in the ticking thread only

    def may_enter(self, op_id: str) -> bool:
        """``op_id`` is being entered while ``holding_entries``: False holds it back (it stays pending and is
        entered afresh on a later tick); True lets it start (a pending step: the plan pauses after it)."""

    def pause_point_armed(self, op_id: str, when: str) -> bool:
        """Whether a pause point is armed on ``op_id`` for ``when`` (on_enter | on_complete)."""

    def pause_point_fired(self, op_id: str, when: str) -> None:
        """A guard reached a pause point: it is disarmed (it fires once) and the plan pauses."""

    def stop_point_armed(self, op_id: str, when: str) -> bool:
        """Whether a stop point is armed on ``op_id`` for ``when`` (on_enter | on_complete)."""

    def stop_point_fired(self, op_id: str, when: str) -> None:
        """A guard stopped at ``op_id``: the whole plan is to be cancelled after this tick."""

    def op_state(self, op_id: str, state: str, result: dict | None = None, detail: str | None = None) -> None:
        """``op_id`` changed state (running, paused, succeeded, failed, canceled, timeout)."""

    def watch(self, source: WatchedSource) -> None:
        """A behaviour now waits on ``source``: poll it every period and tick the plan when it has news."""

    def watch_for_news(self, source: WatchedSource) -> None:
        """A behaviour now waits on ``source``, which is told when it has news: poll it at the next tick, then
        only after ``news(source)`` or at ``poll_at``."""

    def news(self, source: WatchedSource) -> None:
        """``source`` has news: poll it at the next tick. Any thread may call it; it never blocks."""

    def poll_at(self, source: WatchedSource, when: float) -> None:
        """Poll ``source`` (watched for news) at the first tick at or after ``when`` (``time.monotonic()``)."""

    def unwatch(self, source: Any) -> None:
        """That wait is over (the call ended or was cancelled)."""

    def wake(self) -> None:
        """Something this plan waits for changed: tick it as soon as possible."""

    def step_taken(self, step_id: str, skill: str, event: str, following: str, state: dict) -> None:
        """Step graphs: ``step_id`` ended with ``event``; the run goes on to ``following`` (a step or terminal)."""

    def graph_ended(self, terminal: str, reason: str | None) -> None:
        """Step graphs: the run reached ``terminal`` (one of the router's terminals)."""
