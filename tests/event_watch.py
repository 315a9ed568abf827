"""Waiting on an executor's events instead of polling it (imported by name, as rtdl_plans is)."""
from __future__ import annotations

import threading
import time
from collections.abc import Callable


class EventWatch:
    """Subscribed to an executor for the ``with`` block: keeps the events it emits, and ``wait`` takes them in
    order, so an event emitted before a wait began is not missed."""

    def __init__(self, executor):
        self._executor = executor
        self._events: list[dict] = []
        self._taken = 0
        self._arrived = threading.Condition()
        self._unsubscribe = None

    def __enter__(self) -> "EventWatch":
        self._unsubscribe = self._executor.subscribe_batches(self._keep)
        return self

    def __exit__(self, *exc_info) -> None:
        self._unsubscribe()

    def _keep(self, events: list[dict]) -> None:  # in the ticking thread
        with self._arrived:
            self._events.extend(events)
            self._arrived.notify_all()

    def wait(self, matches: Callable[[dict], bool], timeout_s: float = 10.0) -> dict:
        """The next event not yet taken that ``matches``, once it was emitted (the ones before it are taken
        too); AssertionError if none came within ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        with self._arrived:
            while True:
                for index in range(self._taken, len(self._events)):
                    if matches(self._events[index]):
                        self._taken = index + 1
                        return self._events[index]
                self._taken = len(self._events)
                left = deadline - time.monotonic()
                if left <= 0:
                    raise AssertionError(f"no matching event within {timeout_s} s")
                self._arrived.wait(left)
