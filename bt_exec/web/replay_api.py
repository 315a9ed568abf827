"""A replayed run served as the control API serves a live one: its read operations answered from the plans the
replay rebuilds, its events streamed as the replay clock plays them, its control operations refused.

``WebServer`` takes a ``ReplayApi`` where it takes a ``ControlApi`` (both offer ``call``, ``listen``,
``recent_events`` and ``close``), so the console, ``bt-exec watch --url`` and MCP clients follow a replay
as if it ran now. A replay also has a clock (``REPLAY_ROUTES``, served under ``/api/replay``): the console's
replay bar plays, pauses and seeks it. Seeking back reads the run again from its start, so a replay never
holds more of the journal than a batch of events.
"""
from __future__ import annotations

import collections
import contextlib
import itertools
import logging
import threading
from typing import Callable, Iterator

from ..compilers.limits import INT64_MAX
from ..control import (MAX_WAITS, ROUTES, EventFanout, EventStream, Route, WaitSlots, internal_message, route_named,
                       without_plan_shape)
from ..errors import BadArgument, Busy, Conflict
from ..events.replay import (MAX_BATCH, MAX_SPEED, MIN_SPEED, JournalRun, ReplayError, checked_speed, paced,
                             read_events, run_span)
from ..replayed_plans import ReplayedPlans

log = logging.getLogger(__name__)

# The operations a replay answers: the executor's reads of plans, which ReplayedPlans offers under the same names.
READ_OPERATIONS = frozenset(("get_all_plans", "get_plans_snapshot", "get_plan_tree", "get_finished_plans",
                             "get_plan_status", "get_plan_result", "get_plan_feedback", "get_op", "wait_for_plan"))
# How long a seek request waits for the replay's thread to get there (rebuilding a long run from its start); past
# it the request is answered 503 seek_busy while the seek goes on.
SEEK_WAIT_S = 60.0
# The replay's clock, which only a replay has: where it is in the run, and play, pause, seek. Not MCP tools.
REPLAY_ROUTES: tuple[Route, ...] = (
    Route("get_replay", "GET", "/api/replay",
          "Where the replay is: position (events played), count (events in the run), first_time, last_time and "
          "time (recorded times of the first, last and last played events), playing, speed, ended, and revision "
          "(higher in a later state).",
          lambda replay: replay.clock(), tool=False),
    Route("play_replay", "POST", "/api/replay/play",
          f"Play the replay on from where it is, at speed (times as fast as recorded, {MIN_SPEED:g} to "
          f"{MAX_SPEED:g}; 0: as fast as it can; default: the speed it had); at the end, it plays from the start "
          "again.",
          lambda replay, speed=None: replay.play(speed),
          {"speed": {"description": "play speed factor (0: no waiting)", "type": "number", "minimum": 0,
                     "maximum": MAX_SPEED}}, tool=False),
    Route("pause_replay", "POST", "/api/replay/pause", "Hold the replay where it is.",
          lambda replay: replay.pause(), tool=False),
    Route("seek_replay", "POST", "/api/replay/seek",
          "Move the replay to event_index (the number of the run's events played, 0 to count): the plans are "
          "rebuilt as they were then, and listeners get a replay_seek event telling them to read them again. "
          "The latest seek wins: one still on its way when another comes is answered at once, superseded: true, "
          "with the position it reached.",
          lambda replay, event_index: replay.seek(event_index),
          {"event_index": {"description": "events played once there (past count: the end)", "type": "integer",
                           "minimum": 0, "maximum": INT64_MAX}}, ("event_index",), tool=False),
)
_ROUTES = {route.name: route for route in ROUTES + REPLAY_ROUTES}
_REPLAY_OPERATIONS = frozenset(route.name for route in REPLAY_ROUTES)


class ReplayApi:
    """The control API over a replay of ``run`` at ``speed`` (0: as fast as it can): a replay's ``ControlSurface``.

    Playing starts with ``start()``, or when the first listener opens the event stream (the console and
    ``watch`` do at once), so a browser opened after the command still sees the run from its start.
    ``on_played(events, records)`` is called, in the replay's thread, with each batch played in order (not the
    events a seek passes over) and the final records of the plans it completed; ``done`` is set when the replay
    first reached its end, or ended early: ``error`` then says why. Listeners get a ``replay_clock`` event after
    each batch played and a ``replay_seek`` event after each seek (both carry ``clock()``'s fields).
    """

    routes = ROUTES + REPLAY_ROUTES

    def __init__(self, run: JournalRun, speed: float = 1.0, recent: int = 500, stream_capacity: int = 10_000,
                 max_streams: int = 32, max_waits: int = MAX_WAITS,
                 on_played: Callable[[list[dict], list[dict]], None] | None = None):
        self.run = run
        self.speed = checked_speed(speed)
        self.events = EventFanout(recent, stream_capacity, max_streams)
        self._waits = WaitSlots(max_waits)  # as the live API caps them: waits never take every worker
        self.plans = ReplayedPlans()
        self.done = threading.Event()
        self.error: str | None = None
        self._on_played = on_played
        self._lock = threading.Lock()
        self._control = threading.Condition()
        self._interrupt = threading.Event()  # set to make the playing thread look at its orders
        self._playing = False
        self._closing = False
        self._seeks: collections.deque[_Seek] = collections.deque()  # the newest seek not yet taken up, if any
        self._seeking: _Seek | None = None  # the seek the replay's thread is on
        self._position = 0
        self._time: float | None = None
        self._ended = False
        self._revision = 0  # of the clock's states handed out
        self._span: tuple[float | None, float | None] | None = None
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start playing, once; later calls do nothing."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._serve, name="bt_exec-replay", daemon=True)
        with self._control:
            self._playing = True
        self._thread.start()

    @property
    def started(self) -> bool:
        """Whether the replay has started playing."""
        return self._thread is not None

    def call(self, name: str, args: dict | None = None, door: str = "http") -> dict:
        """Answer read operation ``name`` or a replay clock operation; Conflict (``replay``) for any other,
        NotFound for unknown names, BadArgument for bad arguments, and the replayed plans' own refusals."""
        route = route_named(_ROUTES, name)
        if name not in READ_OPERATIONS and name not in _REPLAY_OPERATIONS:
            raise Conflict(f"{name}: a replay cannot be controlled, nor asked for what only a live executor knows; "
                           f"it answers {', '.join(sorted(READ_OPERATIONS))}", code="replay")
        args = route.checked(args)
        if name in _REPLAY_OPERATIONS:
            return route.call(self, **args)
        with self._waits.held() if name == "wait_for_plan" else contextlib.nullcontext():
            return getattr(self.plans, name)(**args)

    # --- the replay's clock ---------------------------------------------------------------------------

    def clock(self) -> dict:
        """Where the replay is, and how it plays."""
        if self._span is None:
            try:
                self._span = run_span(self.run)
            except OSError:
                self._span = (None, None)
        with self._control:
            # Numbered as taken, under the lock: a page that gets them out of order (an answer overtaken by the
            # event stream) keeps the latest.
            self._revision += 1
            return {"position": self._position, "count": self.run.events, "first_time": self._span[0],
                    "last_time": self._span[1], "time": self._time, "playing": self._playing, "speed": self.speed,
                    "ended": self._ended, "error": self.error, "revision": self._revision}

    def play(self, speed: float | None = None) -> dict:
        """Play on from where the replay is, at ``speed`` (None: the speed it had); from the start once ended."""
        self._refuse_when_failed("play_replay")
        if speed is not None:
            try:
                speed = checked_speed(speed)
            except ReplayError as exc:
                raise BadArgument(f"play_replay: {exc}") from None
        self.start()
        with self._control:
            if speed is not None:
                self.speed = speed
            if self._ended:  # played to the end: play it again from the start
                self._order(_Seek(0))
            self._playing = True
            self._control.notify_all()
        self._interrupt.set()
        return {"success": True, "playing": True, "message": f"replay playing at speed {self.speed:g}"
                                                             f"{' (as fast as it can)' if self.speed == 0 else ''}"}

    def pause(self) -> dict:
        """Hold the replay where it is."""
        self._refuse_when_failed("pause_replay")
        with self._control:
            self._playing = False
        self._interrupt.set()
        return {"success": True, "playing": False, "message": "replay paused"}

    def seek(self, event_index: int) -> dict:
        """Move to ``event_index`` events played; answers once there, or once a later seek superseded this one
        (``superseded``: true), with the clock then."""
        self._refuse_when_failed("seek_replay")
        self.start()
        seek = _Seek(min(event_index, self.run.events))
        with self._control:
            self._order(seek)
        self._interrupt.set()
        if not seek.done.wait(SEEK_WAIT_S):
            raise Busy(f"the replay did not reach event {event_index} within {SEEK_WAIT_S:g} s; it goes on: ask "
                       "get_replay where it is", code="seek_busy")
        self._refuse_when_failed("seek_replay")
        clock = self.clock()
        if seek.superseded:
            return {"success": True, "superseded": True, "target": seek.target,
                    "message": f"a later seek took this one's place; the replay was at event {clock['position']}",
                    **clock}
        return {"success": True, "superseded": False, "target": seek.target, **clock}

    def _order(self, seek: "_Seek") -> None:
        """Make ``seek`` the one the replay's thread goes to next; the seeks it supersedes (one waiting, and the
        one on its way, at its next batch) are answered at once. The caller holds ``_control``."""
        for waiting in self._seeks:
            waiting.supersede()
        self._seeks.clear()
        if self._seeking is not None:
            self._seeking.superseded = True
        self._seeks.append(seek)
        self._control.notify_all()

    def _refuse_when_failed(self, name: str) -> None:
        if self.error is not None:
            raise Conflict(f"{name}: the replay stopped: {self.error}", code="replay_failed")

    # --- listeners ------------------------------------------------------------------------------------

    @property
    def max_streams(self) -> int:
        """How many event streams may be open at once."""
        return self.events.max_streams

    def recent_events(self) -> list[dict]:
        """The events played last (the last ``recent``), oldest first."""
        return self.events.recent_events()

    def listen(self) -> EventStream:
        """A new listener's stream (Busy past ``max_streams``); the first one starts the replay."""
        stream = self.events.listen()
        self.start()
        return stream

    def close(self) -> None:
        """Stop the replay's thread and end every open stream."""
        with self._control:
            self._closing = True
            self._control.notify_all()
        self._interrupt.set()
        if self._thread is not None:
            self._thread.join()
        self.events.close()

    def _clock_event(self, kind: str) -> dict:
        return {"event": kind, **self.clock()}

    # --- the replay's thread --------------------------------------------------------------------------

    def _serve(self) -> None:
        cursor = _Cursor(self.run)
        try:
            while True:
                with self._control:
                    while not (self._playing or self._seeks or self._closing):
                        self._control.wait()
                    if self._closing:
                        return
                    seek = self._seeks.popleft() if self._seeks else None
                    self._seeking = seek
                    speed = self.speed
                    self._interrupt.clear()
                if seek is not None:
                    cursor = self._seek(cursor, seek)
                else:
                    self._play(cursor, speed)
        except (ReplayError, OSError) as exc:
            self.error = str(exc) if isinstance(exc, ReplayError) else f"cannot read {self.run.path}: {exc}"
        except Exception as exc:  # a bug must not pass silently in a thread nobody joins
            log.exception("replay of %s failed", self.run.path)
            self.error = internal_message(exc)
        finally:
            cursor.close()
            with self._control:
                self._playing = False
                for seek in self._seeks:
                    seek.done.set()
                if self._seeking is not None:
                    self._seeking.done.set()
            self.done.set()

    def _play(self, cursor: "_Cursor", speed: float) -> None:
        for batch in paced(cursor, speed, self._interrupt):
            self._take(batch, cursor)
            self.events.send([self._clock_event("replay_clock")])
        if cursor.handed > self._position:  # paced stopped on an order, the event it held not yet due
            cursor.push_back()
        if cursor.exhausted and cursor.handed == self._position:
            with self._control:
                self._playing = False
                self._ended = True
            self.done.set()
            self.events.send([self._clock_event("replay_clock")])

    def _take(self, batch: list[dict], cursor: "_Cursor", stream: bool = True) -> None:
        """Apply ``batch``, the events after ``position``; with ``stream``, hand them to listeners too."""
        completed = self.plans.apply(batch)
        shown = [without_plan_shape(event) if event.get("event") == "plan_started" else event for event in batch]
        self.events.remember(shown)
        with self._control:
            self._position += len(batch)
            self._time = batch[-1].get("time", self._time)
            self._ended = False
        if stream:
            self.events.send(shown)
            if self._on_played is not None:
                self._on_played(batch, completed)

    def _seek(self, cursor: "_Cursor", seek: "_Seek") -> "_Cursor":
        """Play, without pacing and without streaming, to ``seek.target``: from the run's start when it lies
        behind. A step of one batch or less forward streams its events as played."""
        try:
            if seek.target < self._position:
                cursor.close()
                cursor = _Cursor(self.run)
                self.plans.reset()
                self.events.forget()
                with self._control:
                    self._position, self._time = 0, None
                rebuilt = True
            else:
                rebuilt = False
            step = not rebuilt and seek.target - self._position <= MAX_BATCH
            while self._position < seek.target and not seek.superseded:
                batch = list(itertools.islice(cursor, min(MAX_BATCH, seek.target - self._position)))
                if not batch:
                    break
                self._take(batch, cursor, stream=step)
            if cursor.exhausted or self._position >= self.run.events:
                with self._control:
                    self._ended = self._position >= self.run.events
                    if self._ended:  # at the end it plays no more, as when played there: the clock says so at once
                        self._playing = False
            self.events.send([self._clock_event("replay_clock" if step else "replay_seek")])
        finally:
            with self._control:
                self._seeking = None
            seek.done.set()
        return cursor


class _Seek:
    """An order to move the replay to ``target`` events played; ``done`` once there, or once ``superseded`` by a
    later one."""

    def __init__(self, target: int):
        self.target = target
        self.done = threading.Event()
        self.superseded = False

    def supersede(self) -> None:
        self.superseded = True
        self.done.set()


class _Cursor:
    """The run's events from its start, read as they are asked for; the last one handed out can be given back
    (a paced replay stopped before it was due)."""

    def __init__(self, run: JournalRun):
        self._events = read_events(run)
        self._back: dict | None = None
        self._last: dict | None = None
        self.handed = 0
        self.exhausted = False

    def __iter__(self) -> Iterator[dict]:
        return self

    def __next__(self) -> dict:
        if self._back is not None:
            event, self._back = self._back, None
        else:
            try:
                event = next(self._events)
            except StopIteration:
                self.exhausted = True
                raise
        self._last = event
        self.handed += 1
        return event

    def push_back(self) -> None:
        self._back = self._last
        self.handed -= 1

    def close(self) -> None:
        self._events.close()
