"""Replay of a recorded run: a journal's run found and checked in one streaming pass, and its events played back
at the recorded pace (``bt_exec.replayed_plans`` rebuilds the plans they describe).

A journal's run is what one ``JsonlJournal`` wrote, from its header to the next (``journal.py``). Finding it
reads the file once, line by line, without parsing most lines: our writer ends every event line with its
``"seq":N}`` (``"seq": N}`` before its lines were compact), which is all the check needs (a line that ends
otherwise is parsed). Only the chosen run's
first byte and line are kept, so a journal of any size is indexed in constant memory; the events are then
read again from there as they are played, each value checked as it is read (``replay_checks``).
"""
from __future__ import annotations

import math
import threading
import time
from dataclasses import dataclass
from typing import Callable, Iterator

from ..errors import BtExecError
from .journal import RUN_HEADER, _parse
from .replay_checks import MAX_EVENT_LINE_BYTES, JournalValueError, RunCheck, check_unparsed, is_recorded_time

# Lines as our writer starts them, compact, and as it did before with a space after each colon and comma.
_EVENT_STARTS = (b'{"event":"', b'{"event": "')
_HEADER_STARTS = tuple(start + RUN_HEADER.encode() + b'"' for start in _EVENT_STARTS)
_SEQ_KEY = b'"seq":'
# How much of a run's end is read to find its last event's time: a longer last line leaves the span open.
_TAIL_BYTES = 64 * 1024
# Events handed on at once when they are due together (a tick's, or all of them at --speed 0): enough to keep a
# fast replay from paying per event, few enough that a slow reader still sees them come.
MAX_BATCH = 1000
# Play speeds, times the recorded pace: 0 plays without waiting; slower than MIN_SPEED a recorded second takes
# minutes.
MIN_SPEED, MAX_SPEED = 0.01, 1000.0
# The longest one wait of a paced replay, in slices, so no recorded gap makes a timeout the clock cannot hold.
_WAIT_SLICE_S = 3600.0


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
            if line and line.startswith(_HEADER_STARTS):
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
    if line.startswith(_EVENT_STARTS) and line.endswith(b"}\n"):
        at = line.rfind(_SEQ_KEY)
        if at > 0:
            digits = line[at + len(_SEQ_KEY):-2].removeprefix(b" ")
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
