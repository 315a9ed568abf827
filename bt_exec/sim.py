"""The sim backend, the embedded default: scripted outcomes and real-time durations."""
from __future__ import annotations

import collections
import heapq
import itertools
import pathlib
import threading
import time
from dataclasses import dataclass
from typing import Callable

from .backends import CallStatus, CapabilityCall
from .compilers.config_files import check_schema, read_json_file
from .compilers.dialects import skill_catalog_of
from .compilers.symbolic import World

_STATE_OF_OUTCOME = {"success": "SUCCEEDED", "failure": "FAILED", "timeout": "TIMEOUT"}
BUILTIN_DEFAULT = {"outcome": "success", "duration_s": 0.0}
_DEFAULT_KEY = ("default", "")
_MAX_DEFAULT_OUTPUTS = 4096  # plans name caps freely: the outputs shared per cap stay bounded


@dataclass(slots=True)
class _SimRun:
    call: CapabilityCall
    outcome: str
    ends_at: float
    error: str
    output: object
    skill: object = None  # a step-graph skill simulated on the world when the call ends
    left_s: float | None = None  # while paused: the time the call still had to run
    news: Callable[[], None] | None = None  # what tells the runtime the call ended (``watch_call``)


class SimBackend:
    """Serves every capability from a script; nothing moves.

    Script: ``{"default": ENTRY, "caps": {cap: ENTRY}, "ops": {op_id: ENTRY}, "state": {...}}``
    with ENTRY ``{"outcome", "duration_s", "error", "output"}``. The most
    specific entry wins as a whole (ops, then caps, then default); fields it
    omits take the built-in defaults. ``outcome`` is success, failure,
    timeout or an event name; a list gives successive calls, its last value
    repeating. Calls with a duration are asynchronous and can be cancelled.
    ``state`` is the robot's state snapshot ``state()`` reports (what the call
    guard's state rules read), e.g. ``{"battery": 15}``; without it, ``{}``.

    With a ``world`` (a symbolic World of a skill catalog and scene), calls
    whose cap is one of its skills are simulated on it: a precondition that does
    not hold fails the call (event ``failed``), effects happen when the call
    succeeds, inspect_state reports what the world holds unless scripted, and
    every result carries ``output["state"]``, the world after the call.

    A call in progress can be paused (``pause``): it reports PAUSED and its clock stops
    until ``resume``.

    It pushes: a call watched (``watch_call``) is told it has news by ``send_due_news``
    once its end time has come on ``clock``, from one heap of end times (a period with no
    call ending costs one comparison), and when it is paused or resumed; ``news_due_at``
    says when the next end comes, so the runtime's loop sleeps until then.
    """

    def __init__(self, script: dict | str | pathlib.Path | None = None, world=None, history: int = 10_000,
                 clock: Callable[[], float] = time.monotonic):
        """``history``: how many recent calls (and cancelled run ids) ``calls`` (``cancelled``) keep.
        ``clock``: the seconds durations are measured in (a test may step its own)."""
        self.script = load_sim_script(script)
        self._by_op = self.script.get("ops", {})
        self._by_cap = self.script.get("caps", {})
        self._default = self.script.get("default", BUILTIN_DEFAULT)
        self._state = self.script.get("state", {})
        self.clock = clock
        self.world = world
        self._lock = threading.Lock()
        self._runs: dict[str, _SimRun] = {}
        self._ends: list[tuple[float, str]] = []  # heap of (ends_at, run_id) of the watched calls
        self._run_ids = itertools.count(1)
        self._call_counts: dict[tuple[str, str], int] = {}  # calls of each entry whose outcome is a list
        self._default_outputs: dict[str, dict] = {}
        # cap -> the answer of its calls that end at once in success without a world or a list of outcomes: the
        # same immutable CallStatus each time (most plans call a few caps many times)
        self._instant: dict[str, CallStatus] = {}
        # Recent history for inspection and tests; bounded so a long-lived executor stays flat.
        self.calls: collections.deque[CapabilityCall] = collections.deque(maxlen=history)
        self.cancelled: collections.deque[str] = collections.deque(maxlen=history)

    @classmethod
    def in_scene(cls, script=None, skill_catalog=None, scene=None) -> "SimBackend":
        """A SimBackend whose world is ``scene`` (a Scene) with ``skill_catalog``'s skills (default grant);
        without a scene, scripted outcomes only."""
        if scene is None:
            return cls(script)
        return cls(script, world=World.from_scene(skill_catalog_of(skill_catalog), scene))

    def start(self, call: CapabilityCall) -> CallStatus | str:
        if self.world is None and call.op_id not in self._by_op:  # a world may be given later (a new scene)
            instant = self._instant.get(call.cap)
            if instant is not None:
                with self._lock:
                    self.calls.append(call)
                return instant
        skill = self._skill_of(call)
        if skill is not None:
            unmet = self.world.unmet(skill, call.args)
            if unmet:
                with self._lock:
                    self.calls.append(call)
                reasons = "; ".join(failure.describe() for failure in unmet)
                return CallStatus("FAILED", output={"state": self.world.snapshot()}, event="failed",
                                  error=f"sim: precondition of {skill.name} does not hold: {reasons}")
        key, entry = self._entry_for(call)
        outcomes = entry.get("outcome", BUILTIN_DEFAULT["outcome"])
        listed = type(outcomes) is list
        with self._lock:
            self.calls.append(call)
            if listed:
                count = self._call_counts.get(key, 0)
                self._call_counts[key] = count + 1
        if skill is not None and skill.observes and (key[0] == "default" or "outcome" not in entry):
            outcome = self._observe(call.args.get("object"))  # what is there, unless this step is scripted
        elif listed:
            outcome = outcomes[min(count, len(outcomes) - 1)]
        else:
            outcome = outcomes
        error = entry.get("error", "")
        output = entry["output"] if "output" in entry else self._default_output(call.cap)
        duration = entry.get("duration_s", BUILTIN_DEFAULT["duration_s"])
        if duration <= 0:
            if skill is None and outcome == "success":  # the common case, without the general path's lookups
                answer = CallStatus("SUCCEEDED", output, "", "", "success")
                if self.world is None and not listed and key[0] != "ops" and len(self._instant) < _MAX_DEFAULT_OUTPUTS \
                        and ("output" in entry or self._default_outputs.get(call.cap) is output):
                    self._instant[call.cap] = answer  # answered alike from now on, its output shared as before
                return answer
            return self._end(skill, call, outcome, error, output)
        duration = float(duration)
        run_id = f"sim-{next(self._run_ids)}"
        with self._lock:
            self._runs[run_id] = _SimRun(call, outcome, self.clock() + duration, error, output, skill)
        return run_id

    def status(self, run_id: str) -> CallStatus:
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return CallStatus("FAILED", error=f"sim: unknown run {run_id!r}")
            if run.left_s is not None:
                return CallStatus("PAUSED", detail="paused")
            if self.clock() < run.ends_at:
                return CallStatus("RUNNING")
            del self._runs[run_id]
        return self._end(run.skill, run.call, run.outcome, run.error, run.output)

    def cancel(self, run_id: str) -> None:
        with self._lock:
            if self._runs.pop(run_id, None) is not None:
                self.cancelled.append(run_id)

    def watch_call(self, run_id: str, news: Callable[[], None]) -> None:
        """Call ``news()`` once the call's end time has come (from ``send_due_news``), and when it is paused
        or resumed."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None:
                return
            run.news = news
            if run.left_s is None:
                self._push_end(run.ends_at, run_id)

    def send_due_news(self) -> None:
        """Tell the watched calls whose end time has come (the runtime calls it once per period)."""
        ends = self._ends
        if not ends or ends[0][0] > self.clock():
            return
        told = []
        with self._lock:
            now, ends = self.clock(), self._ends
            while ends and ends[0][0] <= now:
                _, run_id = heapq.heappop(ends)
                run = self._runs.get(run_id)  # cancelled, or ended and read: nothing to tell
                if run is not None and run.left_s is None and run.news is not None and run.ends_at <= now:
                    told.append(run.news)
        for news in told:
            news()

    def news_due_at(self) -> float | None:
        """When ``send_due_news`` next has something to tell, on ``time.monotonic``'s clock: the earliest end of a
        watched call (a cancelled call's too, told to nobody); None while no watched call is to end. On a clock of
        its own (a test steps it at will), now: the runtime then looks every period."""
        if self.clock is not time.monotonic:
            return time.monotonic()
        ends = self._ends
        return ends[0][0] if ends else None

    def _push_end(self, ends_at: float, run_id: str) -> None:
        """Caller holds the lock."""
        heapq.heappush(self._ends, (ends_at, run_id))
        if len(self._ends) > 64 + 2 * len(self._runs):  # entries of cancelled or moved calls
            self._ends = [(at, rid) for at, rid in self._ends if rid in self._runs and self._runs[rid].ends_at == at]
            heapq.heapify(self._ends)

    def pause(self, run_id: str) -> None:
        """Stop the call's clock (an unknown or finished run: nothing)."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.left_s is not None:
                return
            run.left_s = max(0.0, run.ends_at - self.clock())
            news = run.news
        if news is not None:
            news()

    def resume(self, run_id: str) -> None:
        """Start a paused call's clock again where it stopped."""
        with self._lock:
            run = self._runs.get(run_id)
            if run is None or run.left_s is None:
                return
            run.ends_at, run.left_s = self.clock() + run.left_s, None
            news = run.news
            if news is not None:
                self._push_end(run.ends_at, run_id)
        if news is not None:
            news()

    def state(self) -> dict:
        """The script's state snapshot (a copy: a reader cannot change what later calls see)."""
        return dict(self._state)

    def active_calls(self) -> list[CapabilityCall]:
        """Calls started and neither finished (polled to the end) nor cancelled."""
        with self._lock:
            return [run.call for run in self._runs.values()]

    @property
    def calls_in_flight(self) -> int:
        """How many calls are started and neither finished nor cancelled (``len(active_calls())``)."""
        return len(self._runs)

    def _default_output(self, cap: str) -> dict:
        """The output of an unscripted call: one object per cap, so what keeps results measures it once."""
        output = self._default_outputs.get(cap)
        if output is None:
            output = {"sim": True, "cap": cap}
            if len(self._default_outputs) < _MAX_DEFAULT_OUTPUTS:
                self._default_outputs[cap] = output
        return output

    def _skill_of(self, call: CapabilityCall):
        if self.world is None:
            return None
        name = self.world.catalog.resolve(call.cap)
        return self.world.catalog.skills[name] if name else None

    def _observe(self, obj: str | None) -> str:
        """What inspect_state sees in the world."""
        where = self.world.locations.get(obj)
        if where == "unknown":
            return "unknown"
        if where in ("patron", "hand"):
            return "holding"
        return "placed" if where else "empty"

    def _end(self, skill, call: CapabilityCall, outcome: str, error: str, output: object) -> CallStatus:
        if skill is None:
            return _final(outcome, error, output)
        if outcome == "failure":  # the sim's generic word; skills name the event "failed"
            outcome = "failed"
        with self._lock:
            if outcome == "success":  # the simulated truth changes only when the skill did its work
                self.world.apply(skill, call.args, outcome)
            state = self.world.snapshot()
        output = {**output, "state": state} if isinstance(output, dict) else {"value": output, "state": state}
        if outcome == "success" or (outcome in skill.outcomes and outcome not in self.world.catalog.failure_outcomes):
            return CallStatus("SUCCEEDED", output=output, event=outcome)
        return _final(outcome, error, output)

    def _entry_for(self, call: CapabilityCall) -> tuple[tuple[str, str], dict]:
        by_op = self._by_op
        if call.op_id in by_op:
            return ("ops", call.op_id), by_op[call.op_id]
        by_cap = self._by_cap
        if call.cap in by_cap:
            return ("caps", call.cap), by_cap[call.cap]
        return _DEFAULT_KEY, self._default


def _final(outcome: str, error: str, output: object) -> CallStatus:
    state = _STATE_OF_OUTCOME.get(outcome)
    if state == "SUCCEEDED":
        return CallStatus(state, output=output, event="success")
    if state is None:  # an event name: the op's dialect decides what it means
        return CallStatus("FAILED", output=output, error=error or f"sim outcome {outcome!r}", event=outcome)
    return CallStatus(state, output=output, error=error or f"sim outcome {outcome}", event=outcome)


def load_sim_script(script: dict | str | pathlib.Path | None) -> dict:
    """A validated sim script from a dict, a file path, or None (everything succeeds at once)."""
    if script is None:
        return {}
    if isinstance(script, (str, pathlib.Path)):
        script = read_json_file(script, "sim script")
    check_schema(script, "sim-script.schema.json", "sim script")
    return script
