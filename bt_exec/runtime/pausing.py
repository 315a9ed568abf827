"""Whether one plan is paused or stepping, the ops held at their entry meanwhile, and the calls it paused."""
from __future__ import annotations

import threading
import time


class Pausing:
    """A plan's pause. While ``paused`` every op being entered is held at its entry (``held``: it stays pending
    and asks again on a later tick) and the calls in progress whose backend can pause are paused. A step lets the
    next op enter and pauses the plan behind it. Any thread may pause or resume; what reaches the calls waits for
    the plan's tick (``sync_calls``).

    ``timeout_s``: a pause lasting longer is overdue (``expired``); None: a pause lasts until resumed."""

    def __init__(self, timeout_s: float | None = None):
        self.timeout_s = timeout_s
        self.paused = False
        self.holding_entries = False  # paused, or a step is pending: entries ask enter()
        self.held: set[str] = set()   # ops held at their entry while paused
        self.deadline: float | None = None  # monotonic time a pause is overdue
        self._stepping: str | None = None  # the door whose step is pending (the next entry pauses the plan)
        self._calls_to_sync = False  # a pause or resume not yet applied to the calls in progress
        self._paused_calls: list = []  # the call behaviours paused on their backend
        self._lock = threading.Lock()

    @property
    def stepping(self) -> bool:
        """Whether a step is pending: the next op entered goes in, and the plan pauses behind it."""
        return self._stepping is not None

    def pause(self, pause_calls: bool = True) -> bool:
        """Hold every op not yet entered (and, with ``pause_calls``, pause the calls in progress at the next
        tick); False when already paused."""
        with self._lock:
            if self.paused:
                return False
            self.paused = self.holding_entries = True
            self._stepping = None
            if self.timeout_s is not None:
                self.deadline = time.monotonic() + self.timeout_s
            if pause_calls:
                self._calls_to_sync = True
        return True

    def resume(self, source: str, step: bool = False) -> str | None:
        """Let held ops enter and paused calls go on; with ``step`` (asked by ``source``), only until the next op
        is entered. Without ``step`` a pending step is dropped too. What it ended: ``"pause"``, ``"step"`` (a
        step was pending) or None (the plan ran freely)."""
        with self._lock:
            ended = "pause" if self.paused else "step" if self._stepping is not None else None
            self.paused = False
            self.deadline = None
            self.held.clear()  # held ops are entered afresh on the next tick, or held again
            self._stepping = source if step else None
            self.holding_entries = step
            if ended == "pause":
                self._calls_to_sync = True
        return ended

    def enter(self, op_id: str) -> tuple[bool, str | None]:
        """Op ``op_id`` is being entered: whether it may start (not while paused: it is held), and the door of
        the pending step it is taken for, if any (the plan is to pause behind it)."""
        with self._lock:
            if self.paused:
                self.held.add(op_id)
                return False, None
            source, self._stepping = self._stepping, None
            self.holding_entries = False
            self.held.discard(op_id)
        return True, source

    def expired(self) -> bool:
        """Whether a pause outlasted ``timeout_s``."""
        deadline = self.deadline
        return deadline is not None and time.monotonic() >= deadline

    def sync_calls(self, watched) -> None:
        """Pause (or resume) the calls in progress, the ``watched`` sources that can, as the plan was paused (or
        resumed) since the last tick (caller holds the plan's tick lock)."""
        if not self._calls_to_sync:
            return
        with self._lock:
            self._calls_to_sync = False
            pausing = self.paused
        if pausing:
            for source in list(watched):
                pause_call = getattr(source, "pause_call", None)
                if pause_call is not None and source not in self._paused_calls and pause_call():
                    self._paused_calls.append(source)
        else:
            calls, self._paused_calls = self._paused_calls, []
            for call in calls:
                call.resume_call()

    def release(self) -> None:
        """Forget the calls paused: the plan's tree is gone."""
        self._paused_calls = []
