"""MoveItBackend: the Backend protocol for Qwen3 Grant skill calls, served by GrantMotionSkills.

``start(call)`` (cap = skill name, args = params) checks the skill's preconditions on the backend's
symbolic World, then runs the skill in a worker thread and returns a run id; ``status`` polls it;
``cancel`` stops the arm (``Motion.stop``) and the call reports CANCELED. A success moves the World on
(``World.apply``) and reports ``output = {"state": world.snapshot(), "phases": [...]}``, so the step
router sees its effects confirmed; a failure reports its catalog event and the error text, with the
failing trajectory point when the motion policy refused one. The arm runs one call at a time.
It pushes (``watch_call``): the worker tells the runtime when the skill ended, so a call is never
polled while the arm moves.
"""
from __future__ import annotations

import itertools
import threading
from dataclasses import dataclass
from typing import Callable

from bt_exec.backends import CallStatus, CapabilityCall
from bt_exec.compilers.symbolic import World
from bt_exec.motion.skills import GrantMotionSkills, SkillOutcome


@dataclass
class _Run:
    call: CapabilityCall
    thread: threading.Thread
    result: CallStatus | None = None
    canceled: bool = False
    news: Callable[[], None] | None = None  # what tells the runtime the skill ended (``watch_call``)


class MoveItBackend:
    """Serves Grant skill calls on the arm; see the module docstring."""

    def __init__(self, skills: GrantMotionSkills, world: World, label: str = "moveit"):
        """``label`` starts its run ids and error texts: the arm it serves (``moveit``, ``physics``)."""
        self.skills = skills
        self.world = world
        self.label = label
        self._lock = threading.Lock()
        self._runs: dict[str, _Run] = {}
        self._ids = itertools.count(1)
        self._draining: list[threading.Thread] = []
        self.calls: list[CapabilityCall] = []

    def start(self, call: CapabilityCall) -> CallStatus | str:
        # A cancelled skill still stopping keeps the arm: the next call is refused, never waited for
        # (start runs in the executor's tick thread and must not block it).
        self._draining = [thread for thread in self._draining if thread.is_alive()]
        with self._lock:
            skill = self._skill_called(call)
            if isinstance(skill, CallStatus):
                return skill
            name = skill.name
            unmet = self.world.unmet(skill, call.args)
            if unmet:
                reasons = "; ".join(failure.describe() for failure in unmet)
                return CallStatus("FAILED", output={"state": self.world.snapshot()}, event="failed",
                                  error=f"{self.label}: precondition of {name} does not hold: {reasons}")
            busy = [run_id for run_id, run in self._runs.items() if run.result is None and run.thread.is_alive()]
            if busy or self._draining:
                which = f"run {busy[0]}" if busy else "a cancelled call that has not stopped yet"
                return CallStatus("FAILED", event="failed", error=f"{self.label}: the arm is busy with {which}")
            run_id = f"{self.label}-{next(self._ids)}"
            thread = threading.Thread(target=self._work, args=(run_id, skill, call), name=run_id, daemon=True)
            self._runs[run_id] = _Run(call, thread)
        thread.start()
        return run_id

    def status(self, run_id: str) -> CallStatus:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return CallStatus("FAILED", error=f"{self.label}: unknown run {run_id!r}", event="failed")
            if run.result is None:
                return CallStatus("RUNNING")
            del self._runs[run_id]
            return run.result

    def cancel(self, run_id: str) -> None:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.result is not None:
                return
            run.canceled = True
            run.result = CallStatus("CANCELED", output={"state": self.world.snapshot()},
                                    error=f"{self.label}: canceled")
            self._draining.append(run.thread)
        self.skills.stop()

    def watch_call(self, run_id: str, news: Callable[[], None]) -> None:
        """Call ``news()`` from the worker once the skill ended."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is not None:
                run.news = news

    def answer_at_once(self, call: CapabilityCall, event: str, detail: str) -> CallStatus:
        """``call`` answered with ``event`` at once, the arm left where it is and the World moved on as that outcome
        says, as a skill ending so would: a dry run's way to take a path the arm would not take by itself."""
        with self._lock:
            skill = self._skill_called(call)
            if isinstance(skill, CallStatus):
                return skill
            return self._result(skill, call, SkillOutcome(event, detail))

    def _skill_called(self, call: CapabilityCall):
        """Under the lock: ``call`` kept in ``calls``, and the skill it names, or its failure when it names none."""
        self.calls.append(call)
        name = self.world.catalog.resolve(call.cap)
        if name is None:
            return CallStatus("FAILED", error=f"{self.label}: {call.cap!r} is not a skill of the catalog",
                              event="failed")
        return self.world.catalog.skills[name]

    def wait_idle(self, timeout: float = 5.0) -> bool:
        """Join every worker thread (tests, shutdown); True when none is left running."""
        with self._lock:
            threads = [run.thread for run in self._runs.values()] + list(self._draining)
        for thread in threads:
            thread.join(timeout)
        return not any(thread.is_alive() for thread in threads)

    def _work(self, run_id: str, skill, call: CapabilityCall) -> None:
        try:
            outcome = self.skills.run(skill.name, call.args, self.world)
        except Exception as exc:  # noqa: BLE001 - a broken seam never routes as success
            outcome = SkillOutcome("failed", f"{type(exc).__name__}: {exc}")
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.canceled:
                return  # reported CANCELED already; the world does not move on a cancelled call
            run.result = self._result(skill, call, outcome)
            news = run.news
        if news is not None:
            news()

    def _result(self, skill, call: CapabilityCall, outcome: SkillOutcome) -> CallStatus:
        event = outcome.event
        failures = self.world.catalog.failure_outcomes
        if event not in skill.outcomes:
            return CallStatus("FAILED", output={"state": self.world.snapshot(), "phases": outcome.phases},
                              event="failed", error=f"{self.label}: {skill.name} ended {event!r}, not one of its "
                                                    f"outcomes: {outcome.detail}")
        self.world.apply(skill, call.args, event)  # success effects, or an uncertain hold after grasp_failed
        output = {"state": self.world.snapshot(), "phases": outcome.phases}
        if event not in failures:
            return CallStatus("SUCCEEDED", output=output, event=event, detail=outcome.detail)
        error = f"{self.label}: {skill.name} {event}: {outcome.detail}"
        if outcome.failing_point is not None:
            output["failing_point"] = outcome.failing_point
        return CallStatus("TIMEOUT" if event == "timeout" else "FAILED", output=output, error=error, event=event,
                          detail=outcome.detail)
