"""Replay of a recorded run: a journal's run found and checked in one streaming pass, its events played back at
the recorded pace, and the plans they describe rebuilt, answering the read operations an executor answers.

A journal's run is what one ``JsonlJournal`` wrote, from its header to the next (``journal.py``). Finding it
reads the file once, line by line, without parsing most lines: our writer ends every event line with its
``"seq": N}``, which is all the check needs (a line that ends otherwise is parsed). Only the chosen run's
first byte and line are kept, so a journal of any size is indexed in constant memory; the events are then
read again from there as they are played, each value checked as it is read (``replay_checks``).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from ..errors import BadArgument, BtExecError, Conflict, NotFound
from ..runtime.budgets import BoundedTable, json_size, quote, shown
from ..runtime.op_views import MAX_WAIT_FOR_PLAN_S, op_view
from .journal import RUN_HEADER, _parse
from .replay_checks import (MAX_EVENT_LINE_BYTES, MAX_KEPT_BYTES, JournalValueError, RunCheck, check_unparsed,
                            is_recorded_time)
from .shapes import PLAN_KEY, trace_view

_HEADER_START = b'{"event": "' + RUN_HEADER.encode() + b'"'
_SEQ_KEY = b'"seq": '
# How much of a run's end is read to find its last event's time: a longer last line leaves the span open.
_TAIL_BYTES = 64 * 1024
# Events handed on at once when they are due together (a tick's, or all of them at --speed 0): enough to keep a
# fast replay from paying per event, few enough that a slow reader still sees them come.
MAX_BATCH = 1000
# Finished plans a replay keeps for its views, newest first, within MAX_KEPT_BYTES of their records (an executor
# keeps its newest too).
FINISHED_KEPT = 200
# Play speeds, times the recorded pace: 0 plays without waiting; slower than MIN_SPEED a recorded second takes
# minutes.
MIN_SPEED, MAX_SPEED = 0.01, 1000.0
# The longest one wait of a paced replay, in slices, so no recorded gap makes a timeout the clock cannot hold.
_WAIT_SLICE_S = 3600.0
FINAL_STATES = frozenset(("succeeded", "failed", "canceled", "timeout"))


class ReplayError(BtExecError):
    """A journal, or a run of it, that cannot be replayed: the message says where and why."""


@dataclass(frozen=True)
class JournalRun:
    """One run of a journal: ``number`` (from 1, as ``journal check`` lists them), its header, and where its
    ``events`` are: from byte ``start`` (line ``first_line``) to byte ``end``."""

    path: str
    number: int
    header: dict
    first_line: int
    start: int
    end: int
    events: int


def find_run(path: str, number: int | None = None) -> JournalRun:
    """Run ``number`` of the journal at ``path`` (None: the last), checked whole: ReplayError when the file
    has no such run, or the run has a torn or malformed line or holds events of several runs (their ``seq``
    going back: two writers appended at once). OSError when the file cannot be read."""
    chosen = current = None
    runs = 0
    line_number = 0
    offset = 0
    with open(path, "rb") as file:
        while True:
            line = file.readline(MAX_EVENT_LINE_BYTES)
            if not line:
                break
            line_number += 1
            offset += len(line)
            if len(line) == MAX_EVENT_LINE_BYTES and not line.endswith(b"\n"):
                skipped = _skip_line(file)  # read past it: the next line is the file's next
                offset += skipped
                line = b""  # no event, whatever its start: too long to read (take() says so)
            if line and line.startswith(_HEADER_START):
                why, header = _parse(line)
                if why is None and header.get("event") == RUN_HEADER:
                    if current is not None:
                        current.close(offset - len(line), line_number - 1)
                        if runs == number:
                            chosen = current
                            break
                    runs += 1
                    current = _RunScan(line_number, header, offset)
                    continue
            if current is not None:  # lines before the first header were written by a bt_exec that wrote none
                current.take(line, line_number)
    if current is not None and chosen is None and (number is None or runs == number):
        current.close(offset, line_number)
        chosen = current
    if runs == 0:
        raise ReplayError(f"{path} has no run header (a journal of a bt_exec that wrote none, or no journal): "
                          "nothing to replay")
    if chosen is None:
        raise ReplayError(f"{path} has {runs} run{'s' if runs != 1 else ''}; there is no run {number} "
                          "(bt-exec journal check lists them)")
    run_number = number if number is not None else runs
    if chosen.fault is not None:
        raise ReplayError(_fault_message(path, run_number, *chosen.fault))
    if chosen.events == 0:
        raise ReplayError(f"run {run_number} of {path} (line {chosen.header_line}) recorded no events: nothing "
                          "to replay")
    return JournalRun(str(path), run_number, chosen.header, chosen.header_line + 1, chosen.start, chosen.end,
                      chosen.events)


class _RunScan:
    """What ``find_run`` learns of one run as it reads it: its events and its first fault."""

    def __init__(self, header_line: int, header: dict, start: int):
        self.header_line = header_line
        self.header = header
        self.start = start
        self.end = start
        self.events = 0
        self.last_seq: int | None = None
        self.fault: tuple[int, str] | None = None  # (line, why)

    def take(self, line: bytes, number: int) -> None:
        """``line`` (empty: one too long to read) as the run's event at line ``number``."""
        self.events += 1
        if self.fault is not None:
            return
        if not line:
            self.fault = (number, f"longer than {MAX_EVENT_LINE_BYTES} bytes, the longest line a replay reads")
            return
        if not line.endswith(b"\n"):
            self.fault = (number, "torn")
            return
        seq = _seq_of(line)
        if type(seq) is str:
            self.fault = (number, seq)
        elif seq is not None:
            if self.last_seq is not None and seq <= self.last_seq:
                self.fault = (number, f"mixed: seq {seq} after seq {self.last_seq}")
            self.last_seq = seq

    def close(self, end: int, last_line: int) -> None:
        """The run ends at byte ``end``, its last line ``last_line``: a last line that is no event is torn
        (the next run closed it)."""
        self.end = end
        if self.fault is not None and self.fault[0] == last_line and not self.fault[1].startswith(("mixed", "longer")):
            self.fault = (last_line, "torn")


def _skip_line(file) -> int:
    """Read past the rest of a line too long to read; its bytes."""
    skipped = 0
    while True:
        rest = file.readline(MAX_EVENT_LINE_BYTES)
        skipped += len(rest)
        if not rest or rest.endswith(b"\n"):
            return skipped


def _seq_of(line: bytes) -> int | str | None:
    """The ``seq`` our writer puts last on an event line; else the line parsed: its seq (None if it has none),
    or why it is no JSON event."""
    if line.startswith(b'{"event": "') and line.endswith(b"}\n"):
        at = line.rfind(_SEQ_KEY)
        if at > 0:
            digits = line[at + len(_SEQ_KEY):-2]
            if digits.isdigit():
                return int(digits)
    why, event = _parse(line)
    if why is not None:
        return why
    seq = event.get("seq")
    return seq if type(seq) is int else None


def _fault_message(path: str, run_number: int, line: int, why: str) -> str:
    where = f"line {line} of {path} (run {run_number})"
    if why.startswith("value: "):  # a line journal check takes (it reads lines, not values)
        return f"{where}: {why.removeprefix('value: ')}; cannot replay it"
    if why == "torn":
        what = f"{where} is torn: the run writing it ended mid-line, so the run is not whole"
    elif why.startswith("mixed"):
        what = (f"{where} holds events of several runs ({why.removeprefix('mixed: ')}): two writers appended to "
                "the file at once")
    else:
        what = f"{where} is not a JSON event ({why})"
    return f"{what}; cannot replay it (bt-exec journal check {path} lists the journal's faults)"


def read_events(run: JournalRun) -> Iterator[dict]:
    """The run's events, read from the file one line at a time, each value checked as it is read
    (``replay_checks``): ReplayError naming the line for a value a replay cannot take, a run past a live
    executor's limits, or a line that turns out not to be a JSON event (the file changed since it was found)."""
    check = RunCheck()
    with open(run.path, "rb") as file:
        file.seek(run.start)
        offset, number = run.start, run.first_line
        while offset < run.end:
            line = file.readline(MAX_EVENT_LINE_BYTES)
            if not line:
                return
            offset += len(line)
            try:
                check_unparsed(line)
                why, event = _parse(line) if line.endswith(b"\n") else ("torn, or changed since it was found", None)
                if why is None:
                    check.check(event, len(line))
            except JournalValueError as exc:
                why = f"value: {exc}"
            if why is not None:
                raise ReplayError(_fault_message(run.path, run.number, number, why))
            number += 1
            yield event


def run_span(run: JournalRun) -> tuple[float | None, float | None]:
    """The recorded ``time`` of the run's first and last events (None where a line has none): the span a replay's
    clock moves over, read from the two ends of the run, not the whole of it."""
    with open(run.path, "rb") as file:
        file.seek(run.start)
        first = _parse(file.readline(MAX_EVENT_LINE_BYTES))[1]
        file.seek(max(run.start, run.end - _TAIL_BYTES))
        tail = file.read(run.end - file.tell()).rstrip(b"\n")
    last = _parse(tail[tail.rfind(b"\n") + 1:] + b"\n")[1] if tail else None
    return _time_of(first), _time_of(last)


def _time_of(event: object) -> float | None:
    """The event's recorded time where it is one a replay takes (the line's check, not yet run, refuses others)."""
    recorded = event.get("time") if isinstance(event, dict) else None
    return float(recorded) if is_recorded_time(recorded) else None


def checked_speed(speed: object) -> float:
    """``speed`` as a play speed: 0 (no waiting), or MIN_SPEED to MAX_SPEED times the recorded pace;
    ReplayError saying so for anything else (a tiny speed would make a recorded second last for ages)."""
    if type(speed) in (int, float) and (speed == 0 or MIN_SPEED <= speed <= MAX_SPEED):
        return float(speed)
    shown_speed = repr(speed) if type(speed) in (int, float) else type(speed).__name__
    raise ReplayError(f"speed {shown_speed}: expected 0 (as fast as it can) or {MIN_SPEED:g} to {MAX_SPEED:g} "
                      "times the recorded pace")


def paced(events: Iterator[dict], speed: float, stop: threading.Event | None = None,
          clock: Callable[[], float] = time.monotonic) -> Iterator[list[dict]]:
    """``events`` in batches, each when it is due: the gaps between their recorded ``time`` divided by
    ``speed`` (0 or less: no waiting). A batch holds the events already due when the first of it is
    handed on, at most ``MAX_BATCH``. Stops early when ``stop`` is set. ReplayError for a speed
    ``checked_speed`` refuses."""
    speed = checked_speed(speed)
    stop = stop or threading.Event()
    started = clock()
    first_time = None
    batch: list[dict] = []
    for event in events:
        recorded = event.get("time")
        due = started
        if speed > 0 and type(recorded) in (int, float) and math.isfinite(recorded):
            if first_time is None:
                first_time = recorded
            due = started + max(recorded - first_time, 0.0) / speed
        wait = due - clock()
        if batch and (wait > 0 or len(batch) >= MAX_BATCH):
            yield batch
            batch = []
            wait = due - clock()
        while wait > 0:
            if stop.wait(min(wait, _WAIT_SLICE_S)):
                return
            wait = due - clock()
        if stop.is_set():
            break  # the batch's events were taken from ``events`` already: hand them on (``event`` is not)
        batch.append(event)
    if batch:
        yield batch


class ReplayedPlans:
    """The plans a replay's events describe, rebuilt event by event, answering as the executor's read
    operations answer (``get_all_plans``, ``get_plan_tree``, ``get_finished_plans``, ``get_plan_status``,
    ``get_plan_result``, ``get_op``). Thread-safe: one thread applies events while others read."""

    def __init__(self, finished_kept: int = FINISHED_KEPT):
        self.finished_kept = finished_kept
        self._active: dict[str, dict] = {}
        self._finished = BoundedTable(finished_kept, MAX_KEPT_BYTES)  # oldest first
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)

    def apply(self, events: list[dict]) -> list[dict]:
        """Take a batch of events in; answer the final records of the plans it completed."""
        completed = []
        with self._lock:
            for event in events:
                record = self._apply(event)
                if record is not None:
                    completed.append(record)
            self._changed.notify_all()
        return completed

    def reset(self) -> None:
        """Forget every plan: the replay starts again from its run's first event."""
        with self._lock:
            self._active.clear()
            self._finished = BoundedTable(self.finished_kept, MAX_KEPT_BYTES)
            self._changed.notify_all()

    def unfinished(self) -> list[dict]:
        """Records of the plans that started but never completed in the journal (the run ended first)."""
        with self._lock:
            return [_record(plan) for plan in self._active.values()]

    def _apply(self, event: dict) -> dict | None:
        kind = event.get("event")
        plan_id = event.get("plan_id")
        if kind == "plan_started":
            shape = event.get(PLAN_KEY)
            if not isinstance(shape, dict) or not isinstance(shape.get("ops"), list):
                raise ReplayError(f"plan {quote(plan_id)}'s plan_started event records no plan (a journal of a bt_exec "
                                  "that did not record plans): cannot replay it")
            self._active[str(plan_id)] = _new_plan(event, shape)
            return None
        plan = self._active.get(str(plan_id))
        if plan is None:
            return None
        if kind == "node_state":
            op = plan["ops"].get(str(event.get("op_id")))
            if op is not None:
                state = event.get("state")
                op["state"] = state
                if state == "running" and op["started_at"] is None:
                    op["started_at"] = event.get("time")
                if state in FINAL_STATES:
                    op["ended_at"] = event.get("time")
                if "result" in event:
                    op["result"] = event["result"]
                op["detail"] = event.get("detail")
        elif kind == "stop_point":
            op_id, when, state = str(event.get("op_id")), event.get("when"), event.get("state")
            pausing = event.get("action") == "pause"
            points = plan["pause_points"] if pausing else plan["stop_points"]
            if state == "armed":
                points[op_id] = when
            elif points.get(op_id) == when:
                points.pop(op_id)
            if state == "fired" and not pausing:
                plan["cancel_reason"] = f"stop point {when} at op {op_id}"
        elif kind in ("paused", "resumed"):
            plan["paused"] = kind == "paused"
        elif kind == "step_transition":
            plan["trace"].append({key: event.get(key) for key in ("step", "skill", "outcome", "next", "state", "time")})
            plan["state"] = event.get("state")
        elif kind == "plan_complete":
            for key in ("outcome", "cancelled", "cancel_reason", "error", "any_failed", "failed_op", "terminal",
                        "terminal_reason"):
                if key in event:
                    plan[key] = event[key]
            if "state" in event:
                plan["state"] = event["state"]
            plan["ended_at"] = event.get("time")
            plan["running"] = plan["paused"] = False
            del self._active[plan["plan_id"]]
            record = _record(plan)
            self._finished.put(plan["plan_id"], plan, json_size(record["ops"]) or MAX_KEPT_BYTES)
            return record
        return None

    # --- the executor's read operations ---------------------------------------------------------------

    def get_all_plans(self) -> dict:
        with self._lock:
            plans = [{"plan_id": plan["plan_id"], "description": plan["description"], "op_count": len(plan["ops"]),
                      "cancelled": plan["cancelled"], "paused": plan["paused"],
                      "stop_points": len(plan["stop_points"]) + len(plan["pause_points"])}
                     for plan in self._active.values()]
        return {"count": len(plans), "plans": plans}

    def get_finished_plans(self, limit: int = 50) -> dict:
        with self._lock:
            records = [_record(plan) for plan in self._finished.values()[::-1][:limit]]
        plans = [{key: record.get(key) for key in ("plan_id", "run_id", "description", "dialect", "outcome",
                                                   "cancel_reason", "error", "failed_op", "started_at", "ended_at",
                                                   "duration_s")} | {"op_count": len(record["ops"])}
                 for record in records]
        return {"count": len(plans), "plans": plans}

    def get_plan_tree(self, plan_id: str) -> dict:
        with self._lock:
            plan = self._plan(plan_id, "get_plan_tree")
            view = {key: plan[key] for key in ("plan_id", "run_id", "description", "dialect", "root", "running",
                                               "paused", "cancelled", "cancel_reason", "outcome")}
            view["ops"] = [{**op, "args": shown(op["args"]), **_points(plan, op)} if "args" in op
                           else {**op, **_points(plan, op)} for op in plan["ops"].values()]
            if not plan["running"]:
                record = _record(plan)
                view.update(error=None, duration_s=record["duration_s"], failed_op=plan["failed_op"])
            if plan["transitions"] is not None:
                view.update(transitions=plan["transitions"], path=_path(plan), state=plan["state"],
                            trace=trace_view(plan["trace"]))
        return view

    def get_plan_status(self, plan_id: str, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None, with_args: bool = True) -> dict:
        view = op_view("get_plan_status", states, op_ids, summary, max_chars, _text_id)
        with self._lock:
            plan = self._active.get(str(plan_id))
            if plan is None:
                refusal = Conflict if self._finished.get(str(plan_id)) is not None else NotFound
                raise refusal(f"get_plan_status: no active plan {quote(plan_id)} in the replay (it already "
                              "finished, or has not started yet); get_plan_result has a finished plan's record")
            ops = []
            for op in plan["ops"].values():
                entry = {key: op[key] for key in ("op_id", "kind", "description", "state")}
                entry.update(_points(plan, op))
                if with_args and "cap" in op:
                    entry.update(cap=op["cap"], args=shown(op["args"]))
                ops.append(entry)
            status = {"plan_id": plan["plan_id"], "running": True, "paused": plan["paused"],
                      "cancelled": plan["cancelled"], "description": plan["description"], "ops": ops}
            if plan["transitions"] is not None:
                status.update(run_id=plan["run_id"], state=plan["state"],
                              path=[entry["step"] for entry in plan["trace"]])
        return view.apply(status)

    def get_plan_result(self, plan_id: str, *, states=None, op_ids=None, summary: bool = False,
                        max_chars: int | None = None) -> dict:
        view = op_view("get_plan_result", states, op_ids, summary, max_chars, _text_id)
        with self._lock:
            plan = self._finished.get(str(plan_id))
            if plan is None:
                if str(plan_id) in self._active:
                    raise Conflict(f"get_plan_result: plan {quote(plan_id)} is still running in the replay; use "
                                   "get_plan_status")
                raise NotFound(f"get_plan_result: no record of plan {quote(plan_id)} in the replay (not started "
                               "yet, or too old to be kept)")
            record = _record(plan)
        return view.apply(record)

    def get_op(self, plan_id: str, op_id: str) -> dict:
        with self._lock:
            plan = self._plan(plan_id, "get_op")
            op = plan["ops"].get(str(op_id))
            if op is None:
                raise NotFound(f"get_op: plan {quote(plan_id)} has no op {quote(op_id)}; call get_plan_status "
                               "to see its op ids")
            found = {**op, **_points(plan, op)}
            return {"plan_id": plan["plan_id"], "running": plan["running"], "op": found}

    def wait_for_plan(self, plan_id: str, timeout_s: float = 30.0, **view) -> dict:
        """The plan's record once it completed in the replay, or ``{plan_id, finished: false, message}``.
        ``timeout_s`` from 0 to 60, as the executor takes it (longer is waited 60 s)."""
        if type(timeout_s) not in (int, float) or not 0 <= timeout_s < math.inf:
            raise BadArgument(f"wait_for_plan: timeout_s must be a non-negative number of seconds, got "
                              f"{quote(timeout_s)}")
        waited = min(timeout_s, MAX_WAIT_FOR_PLAN_S)
        deadline = time.monotonic() + waited
        with self._changed:
            while str(plan_id) in self._active:
                left = deadline - time.monotonic()
                if left <= 0:
                    return {"plan_id": str(plan_id), "finished": False,
                            "message": f"plan {quote(plan_id)} still running in the replay after {waited:g} s; "
                                       "call wait_for_plan again"}
                self._changed.wait(left)
        return self.get_plan_result(plan_id, **view)

    def _plan(self, plan_id: str, caller: str) -> dict:
        plan = self._active.get(str(plan_id)) or self._finished.get(str(plan_id))
        if plan is None:
            raise NotFound(f"{caller}: no plan {quote(plan_id)} in the replay (not started yet, or too old to be "
                           "kept); call get_all_plans or get_finished_plans to list plans")
        return plan


def _points(plan: dict, op: dict) -> dict:
    """An op's armed stop point, and its pause point where one is armed, as the executor's views name them."""
    points = {"stop_point": plan["stop_points"].get(op["op_id"])}
    pause_point = plan["pause_points"].get(op["op_id"])
    if pause_point is not None:
        points["pause_point"] = pause_point
    return points


def _text_id(value: object, name: str) -> str:
    return str(value)


def _new_plan(event: dict, shape: dict) -> dict:
    ops = {}
    for entry in shape["ops"]:
        if not isinstance(entry, dict) or "op_id" not in entry:
            continue
        op = {"op_id": str(entry["op_id"]), "kind": entry.get("kind"), "description": entry.get("description", ""),
              "state": "pending", "children": [str(child) for child in entry.get("children") or ()]}
        if "cap" in entry:
            op.update(cap=entry["cap"], args=entry.get("args"))
        op.update(result=None, detail=None, started_at=None, ended_at=None)
        ops[op["op_id"]] = op
    return {"plan_id": str(event.get("plan_id")), "run_id": event.get("run_id"),
            "description": event.get("description", ""), "dialect": event.get("dialect"),
            "root": shape.get("root"), "ops": ops, "transitions": shape.get("transitions"),
            "running": True, "cancelled": False, "any_failed": False, "cancel_reason": None, "outcome": None,
            "failed_op": None, "started_at": event.get("time"), "ended_at": None, "stop_points": {}, "pause_points": {},
            "paused": False, "trace": [], "state": None, "terminal": None, "terminal_reason": None}


def _path(plan: dict) -> list:
    return [entry["step"] for entry in plan["trace"]] + ([plan["terminal"]] if plan["terminal"] else [])


def _record(plan: dict) -> dict:
    """A plan's final record as the executor words it (``get_plan_result``); for a plan still running, what the
    journal holds of it, with outcome None."""
    started, ended = plan["started_at"], plan["ended_at"]
    duration = ended - started if isinstance(started, (int, float)) and isinstance(ended, (int, float)) else 0.0
    record = {"plan_id": plan["plan_id"], "run_id": plan["run_id"], "description": plan["description"],
              "dialect": plan["dialect"], "outcome": plan["outcome"], "any_failed": plan["any_failed"],
              "cancelled": plan["cancelled"], "cancel_reason": plan["cancel_reason"], "error": plan.get("error"),
              "started_at": started, "ended_at": ended, "duration_s": max(duration, 0.0), "root": plan["root"],
              "ops": [dict(op) for op in plan["ops"].values()], "failed_op": plan["failed_op"]}
    if plan["transitions"] is not None:
        record.update(transitions=plan["transitions"], terminal=plan["terminal"],
                      terminal_reason=plan["terminal_reason"], trace=list(plan["trace"]),
                      state=plan["state"] or {}, path=_path(plan))
    return record
