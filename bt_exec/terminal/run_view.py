"""``bt-exec run``'s view of its plan: one plain line per event, or a live tree on a terminal."""
from __future__ import annotations

import threading
import time
from typing import TextIO

from ..errors import ControlError
from .render import event_line, view_lines
from .screen import draw_frame, start_screen


class EventLines:
    """Batch subscriber printing one line per event (for logs and pipes), a tick's lines at once."""

    def __init__(self, stream: TextIO):
        self._stream = stream
        self._reader_gone = False

    def __call__(self, events: list[dict]) -> None:
        if self._reader_gone:
            return
        lines = [line for line in map(event_line, events) if line is not None]
        if not lines:
            return
        try:
            # One write, its newline in it: another thread's line (a log record, into the same pipe when both
            # streams go there unbuffered) then never lands inside one of these.
            self._stream.write("\n".join(lines) + "\n")
            self._stream.flush()
        except BrokenPipeError:  # the reader went away (`| head`): the run goes on, silently
            self._reader_gone = True


class LiveView:
    """Batch subscriber redrawing the plan's tree view on a terminal, at most ``max_rate_hz`` times a second.

    A tick's events only mark the view as changed: the executor calls subscribers in its
    ticking thread, so the drawing (which reads ``get_plan_tree``) happens in a
    thread of the view's own, which also keeps the rate bounded however fast events come.
    """

    def __init__(self, executor, plan_id: str, stream: TextIO, max_rate_hz: float = 10.0):
        self._executor = executor
        self._plan_id = plan_id
        self._stream = stream
        self._period = 1.0 / max_rate_hz
        self._changed = threading.Event()
        self._closed = threading.Event()
        self._started_at = time.monotonic()
        self._thread = threading.Thread(target=self._redraw_loop, name="bt_exec-live-view", daemon=True)

    def __call__(self, events: list[dict]) -> None:
        self._changed.set()

    def start(self) -> None:
        start_screen(self._stream)
        self._changed.set()
        self._thread.start()

    def close(self) -> None:
        """Stop redrawing and draw the finished plan as the executor keeps it."""
        self._closed.set()
        self._changed.set()
        self._thread.join()
        draw_frame(self._stream, view_lines(self._executor.get_plan_tree(self._plan_id)))

    def _redraw_loop(self) -> None:
        while True:
            self._changed.wait(1.0)  # without events, still once a second: the elapsed time moves on
            if self._closed.is_set():
                return
            self._changed.clear()
            try:
                view = self._executor.get_plan_tree(self._plan_id)
            except ControlError:  # the plan is no longer kept: nothing left to draw
                return
            if not view["running"]:  # close() draws the finished plan
                return
            draw_frame(self._stream, view_lines(view, running_for_s=time.monotonic() - self._started_at))
            self._closed.wait(self._period)
