"""A JSONL journal sink: every event, one JSON object a line, written off the ticking thread."""
from __future__ import annotations

import json
import logging
import pathlib
import queue
import threading

log = logging.getLogger(__name__)

_CLOSE = object()
_ENCODER = json.JSONEncoder(default=str)  # one encoder: json.dumps makes a new one per call when given default


class JsonlJournal:
    """Subscriber that appends events to a file. Cheap to call: it only queues.

    Subscribe it per event (``executor.subscribe(journal)``) or, cheaper, per tick
    (``executor.subscribe_batches(journal.write_batch)``). At most ``max_queued``
    events wait for the writer; events beyond that are dropped and counted in
    ``dropped``, never allowed to grow memory without bound.
    """

    def __init__(self, path: str | pathlib.Path, max_queued: int = 100_000):
        self.path = pathlib.Path(path)
        self.max_queued = max_queued
        self.dropped = 0
        self._file = self.path.open("a", encoding="utf-8")
        self._queue: queue.SimpleQueue = queue.SimpleQueue()
        self._queued = 0  # events in the queue, counted by the callers and the writer
        self._count_lock = threading.Lock()
        self._writer = threading.Thread(target=self._write_loop, name="bt_exec-journal", daemon=True)
        self._writer.start()

    def __call__(self, event: dict) -> None:
        self.write_batch((event,))

    def write_batch(self, events) -> None:
        """Queue a batch of events (copied: subscribers after this one may change theirs)."""
        with self._count_lock:
            if self._queued + len(events) > self.max_queued:
                self.dropped += len(events)
                return
            self._queued += len(events)
        self._queue.put([dict(event) for event in events])

    def close(self) -> None:
        """Write what is queued, then close the file."""
        self._queue.put(_CLOSE)
        self._writer.join()
        self._file.close()
        if self.dropped:
            log.warning("journal %s dropped %d events (queue full)", self.path, self.dropped)

    def _write_loop(self) -> None:
        while True:
            batch = self._queue.get()
            if batch is _CLOSE:
                break
            try:
                # ASCII escapes keep lone surrogates from plan text writable.
                self._file.write("".join(_ENCODER.encode(event) + "\n" for event in batch))
                if self._queue.empty():
                    self._file.flush()
            except (OSError, ValueError) as exc:
                log.warning("journal %s: cannot write an event: %s", self.path, exc)
            with self._count_lock:
                self._queued -= len(batch)
        self._file.flush()
