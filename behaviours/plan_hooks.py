"""What the behaviours of a compiled plan report to, and ask of, the runtime that runs them.

Behaviours receive an object with this interface as ``setup(plan=...)``; the
executor's per-plan run record implements it.
"""
from __future__ import annotations

from typing import Any, Protocol


class PlanHooks(Protocol):
    plan_id: str
    cancel_requested: bool  # once true, no op may start: the teardown follows this tick

    def stop_point_armed(self, op_id: str, when: str) -> bool:
        """Whether a stop point is armed on ``op_id`` for ``when`` (on_enter | on_complete)."""

    def stop_point_fired(self, op_id: str, when: str) -> None:
        """A guard stopped at ``op_id``: the whole plan is to be cancelled after this tick."""

    def op_state(self, op_id: str, state: str, result: dict | None = None, detail: str | None = None) -> None:
        """``op_id`` changed state (running, paused, succeeded, failed, canceled, timeout)."""

    def call_started(self, action: Any) -> None:
        """An asynchronous call began: the runtime polls ``action.poll()`` to decide when to tick."""

    def call_ended(self, action: Any) -> None:
        """That call reached a terminal state or was cancelled."""

    def step_taken(self, step_id: str, skill: str, event: str, following: str, state: dict) -> None:
        """Step graphs: ``step_id`` ended with ``event``; the run goes on to ``following`` (a step or terminal)."""

    def graph_ended(self, terminal: str, reason: str | None) -> None:
        """Step graphs: the run reached ``terminal`` (completed, replan_required, operator_required, stop)."""
