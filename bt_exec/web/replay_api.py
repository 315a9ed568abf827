"""A replayed run served as the control API serves a live one: its read operations answered from the plans the
replay rebuilds, its events streamed as the replay clock plays them, its control operations refused.

``WebServer`` takes a ``ReplayApi`` where it takes a ``ControlApi`` (both offer ``call``, ``listen``,
``recent_events`` and ``close``), so the console, ``bt-exec watch --url`` and MCP clients follow a replay
as if it ran now.
"""
from __future__ import annotations

import collections
import logging
import threading
from typing import Callable

import jsonschema

from ..errors import ControlError
from ..events.replay import JournalRun, ReplayedPlans, ReplayError, paced, read_events
from ..runtime.op_views import MAX_WAIT_FOR_PLAN_S
from .api import ROUTES, ApiError, EventStream, _describe, _refuse_fractions, without_plan_shape

log = logging.getLogger(__name__)

# The operations a replay answers: the executor's reads of plans, which ReplayedPlans offers under the same names.
READ_OPERATIONS = frozenset(("get_all_plans", "get_plan_tree", "get_finished_plans", "get_plan_status",
                             "get_plan_result", "get_op", "wait_for_plan"))
_ROUTES = {route.name: route for route in ROUTES}
_VALIDATORS = {route.name: jsonschema.Draft202012Validator(route.schema) for route in ROUTES}


class ReplayApi:
    """The control API over a replay of ``run`` at ``speed`` (0: as fast as it can).

    Playing starts with ``start()``, or when the first listener opens the event stream (the console and
    ``watch`` do at once), so a browser opened after the command still sees the run from its start.
    ``on_played(events, records)`` is called, in the replay's thread, with each batch played and the final
    records of the plans it completed; ``done`` is set when the replay ended, ``error`` then says why if it ended early.
    """

    def __init__(self, run: JournalRun, speed: float = 1.0, recent: int = 500, stream_capacity: int = 10_000,
                 max_streams: int = 32,
                 on_played: Callable[[list[dict], list[dict]], None] | None = None):
        self.run = run
        self.speed = speed
        self.max_streams = max_streams
        self.plans = ReplayedPlans()
        self.done = threading.Event()
        self.error: str | None = None
        self._on_played = on_played
        self._recent: collections.deque[dict] = collections.deque(maxlen=recent)
        self._streams: tuple[EventStream, ...] = ()
        self._stream_capacity = stream_capacity
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Start playing, once; later calls do nothing."""
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._play, name="bt_exec-replay", daemon=True)
        self._thread.start()

    @property
    def started(self) -> bool:
        return self._thread is not None

    def call(self, name: str, args: dict | None = None, door: str = "http") -> dict:
        """Answer read operation ``name``; ApiError for any other, for unknown names and for bad arguments."""
        route = _ROUTES.get(name)
        if route is None:
            raise ApiError(404, "unknown_operation", f"no operation {name!r}; known: {', '.join(_ROUTES)}")
        if name not in READ_OPERATIONS:
            raise ApiError(409, "replay", f"{name}: a replay cannot be controlled, nor asked for what only a live "
                                          f"executor knows; it answers {', '.join(sorted(READ_OPERATIONS))}")
        args = {} if args is None else args
        if not isinstance(args, dict):
            raise ApiError(400, "bad_arguments", f"{name}: arguments must be a JSON object, got {type(args).__name__}")
        _refuse_fractions(name, route, args)
        problems = sorted(_VALIDATORS[name].iter_errors(args), key=lambda e: list(e.absolute_path))
        if problems:
            raise ApiError(400, "bad_arguments", f"{name}: " + "; ".join(_describe(p) for p in problems[:5]))
        if name == "wait_for_plan":
            args = {**args, "timeout_s": min(args.get("timeout_s", 30), MAX_WAIT_FOR_PLAN_S)}
        try:
            return getattr(self.plans, name)(**args)
        except ControlError as exc:
            raise ApiError(409, "control_refused", str(exc)) from None

    def recent_events(self) -> list[dict]:
        with self._lock:
            return list(self._recent)

    def listen(self) -> EventStream:
        """A new listener's stream (ApiError 503 past ``max_streams``); the first one starts the replay."""
        stream = EventStream(self._stream_capacity, self._detach)
        with self._lock:
            if len(self._streams) >= self.max_streams:
                raise ApiError(503, "too_many_streams", f"{self.max_streams} event streams are open already; "
                                                       "close one, or poll /api/plans")
            self._streams = self._streams + (stream,)
        self.start()
        return stream

    def close(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
        for stream in self._streams:
            stream.close()

    def _detach(self, stream: EventStream) -> None:
        with self._lock:
            self._streams = tuple(s for s in self._streams if s is not stream)

    def _play(self) -> None:
        try:
            for batch in paced(read_events(self.run), self.speed, self._stop):
                completed = self.plans.apply(batch)
                shown = [without_plan_shape(event) if event.get("event") == "plan_started" else event
                         for event in batch]
                with self._lock:
                    self._recent.extend(shown)
                    streams = self._streams
                for stream in streams:
                    stream.put_all(shown)
                if self._on_played is not None:
                    self._on_played(batch, completed)
        except (ReplayError, OSError) as exc:
            self.error = str(exc) if isinstance(exc, ReplayError) else f"cannot read {self.run.path}: {exc}"
        except Exception as exc:  # a bug must not pass silently in a thread nobody joins
            log.exception("replay of %s failed", self.run.path)
            self.error = f"internal error: {type(exc).__name__}: {exc}"
        finally:
            self.done.set()
