"""A JSONL journal sink: every event, one JSON object a line, written off the ticking thread."""
from __future__ import annotations

import json
import logging
import pathlib
import queue
import threading

log = logging.getLogger(__name__)

_CLOSE = object()


class JsonlJournal:
    """Subscriber that appends events to a file. Cheap to call: it only queues.

    The queue is bounded (``max_queued``); events beyond it are dropped and
    counted in ``dropped``, never allowed to grow memory without bound.
    """

    def __init__(self, path: str | pathlib.Path, max_queued: int = 100_000):
        self.path = pathlib.Path(path)
        self._file = self.path.open("a", encoding="utf-8")
        self._queue: queue.Queue = queue.Queue(maxsize=max_queued)
        self.dropped = 0
        self._writer = threading.Thread(target=self._write_loop, name="bt_exec-journal", daemon=True)
        self._writer.start()

    def __call__(self, event: dict) -> None:
        try:
            self._queue.put_nowait(dict(event))
        except queue.Full:
            self.dropped += 1

    def close(self) -> None:
        """Write what is queued, then close the file."""
        self._queue.put(_CLOSE)
        self._writer.join()
        self._file.close()
        if self.dropped:
            log.warning("journal %s dropped %d events (queue full)", self.path, self.dropped)

    def _write_loop(self) -> None:
        while True:
            event = self._queue.get()
            if event is _CLOSE:
                break
            try:
                # ASCII escapes keep lone surrogates from plan text writable.
                self._file.write(json.dumps(event, default=str) + "\n")
                if self._queue.empty():
                    self._file.flush()
            except (OSError, ValueError) as exc:
                log.warning("journal %s: cannot write an event: %s", self.path, exc)
        self._file.flush()
