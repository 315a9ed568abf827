"""The event bus: numbers events and hands them to subscribers, one by one or in batches."""
from __future__ import annotations

import itertools
import logging
import threading
from typing import Callable

log = logging.getLogger(__name__)


class EventBus:
    """Subscribers are called in the publishing (ticking) thread; one that raises is logged and skipped.

    ``subscribe(callback)``: ``callback(event)`` for every event. ``subscribe_batches(callback)``:
    ``callback(events)`` once per batch (a tick's events), for sinks that pay per call.
    Every event gets ``seq``, increasing across the bus, before anyone sees it.
    """

    def __init__(self):
        self._lock = threading.Lock()
        self._each: tuple[Callable[[dict], None], ...] = ()
        self._batches: tuple[Callable[[list[dict]], None], ...] = ()
        self._seq = itertools.count(1)
        self.listened = False  # whether anyone listens: publishers build no event otherwise

    def subscribe(self, callback: Callable[[dict], None]) -> Callable[[], None]:
        with self._lock:
            self._each = self._each + (callback,)
            self.listened = True
        return lambda: self._remove(callback)

    def subscribe_batches(self, callback: Callable[[list[dict]], None]) -> Callable[[], None]:
        with self._lock:
            self._batches = self._batches + (callback,)
            self.listened = True
        return lambda: self._remove(callback)

    def publish(self, events: list[dict]) -> None:
        seq = self._seq
        for event in events:
            event["seq"] = next(seq)
        for callback in self._each:
            for event in events:
                try:
                    callback(event)
                except Exception as exc:
                    log.warning("event subscriber %r raised %s: %s", callback, type(exc).__name__, exc)
        for callback in self._batches:
            try:
                callback(events)
            except Exception as exc:
                log.warning("event subscriber %r raised %s: %s", callback, type(exc).__name__, exc)

    def _remove(self, callback) -> None:
        with self._lock:
            self._each = tuple(s for s in self._each if s is not callback)
            self._batches = tuple(s for s in self._batches if s is not callback)
            self.listened = bool(self._each or self._batches)
