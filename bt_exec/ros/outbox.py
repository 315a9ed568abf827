"""A bounded outbox drained by a thread of its own (no rclpy here).

The executor calls its subscribers in the ticking thread; the node's status
subscriber only ``put``s here, so a slow publisher or subscriber never stalls
ticking. Items beyond ``max_queued`` are dropped and counted in ``dropped``.
Between items (and at least every ``idle_s``) the thread calls ``idle()``,
where the node publishes its rate-limited tree snapshot.
"""
from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable

log = logging.getLogger(__name__)

_CLOSE = object()


class Outbox:
    def __init__(self, send: Callable[[object], None], *, idle: Callable[[], None] | None = None,
                 max_queued: int = 10_000, idle_s: float = 0.05, name: str = "bt_exec-outbox"):
        self._send = send
        self._idle = idle
        self._idle_s = idle_s
        self._queue: queue.Queue = queue.Queue(maxsize=max_queued)
        self._dropped = 0
        self._dropped_lock = threading.Lock()
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._started = False

    @property
    def dropped(self) -> int:
        """Items dropped so far because the queue was full."""
        return self._dropped

    def start(self) -> None:
        if not self._started:
            self._started = True
            self._thread.start()

    def put(self, item: object) -> bool:
        """Queue ``item``; never blocks. False (and counted) when the queue is full."""
        try:
            self._queue.put_nowait(item)
            return True
        except queue.Full:
            with self._dropped_lock:
                self._dropped += 1
            return False

    def close(self, last: object | None = None, timeout_s: float = 2.0) -> None:
        """Send what is queued, then ``last`` (if given), then stop the thread."""
        if not self._started:
            return
        for item in ((last, _CLOSE) if last is not None else (_CLOSE,)):
            try:
                self._queue.put(item, timeout=timeout_s)
            except queue.Full:
                log.warning("outbox: queue still full after %.1f s; closing without sending the rest", timeout_s)
                break
        self._thread.join(timeout_s)

    def _loop(self) -> None:
        while True:
            try:
                item = self._queue.get(timeout=self._idle_s)
            except queue.Empty:
                item = None
            if item is _CLOSE:
                self._call_idle()
                return
            if item is not None:
                try:
                    self._send(item)
                except Exception as exc:  # a failed publish must not end the thread
                    log.warning("outbox: cannot send an item: %s: %s", type(exc).__name__, exc)
            self._call_idle()

    def _call_idle(self) -> None:
        if self._idle is not None:
            try:
                self._idle()
            except Exception as exc:
                log.warning("outbox: idle hook failed: %s: %s", type(exc).__name__, exc)
