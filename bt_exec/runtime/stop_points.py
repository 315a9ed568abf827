"""The stop and pause points armed on one plan's ops, each with the door that armed it."""
from __future__ import annotations

import threading

from ..compilers.ir import STOP_WHENS


class StopPoints:
    """(op id, when) -> the door that armed it (api, http, mcp, ros, builtin): ``cancel`` holds the stop points
    (reaching one cancels the plan), ``pause`` the pause points (reaching one pauses the plan, once: it is then
    disarmed). ``when`` is on_enter or on_complete.

    Changed from any thread under a lock of its own; read without it (the guards in the tick, status views):
    the tables only gain and lose keys."""

    def __init__(self):
        self.cancel: dict[tuple[str, str], str] = {}
        self.pause: dict[tuple[str, str], str] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self.cancel) + len(self.pause)

    def arm(self, op_id: str, when: str, source: str, action: str) -> None:
        """Arm a stop point (``action`` cancel) or a pause point (``action`` pause) armed by ``source``."""
        with self._lock:
            (self.cancel if action == "cancel" else self.pause)[(op_id, when)] = source

    def disarm(self, op_id: str, when: str) -> list[str]:
        """Disarm the stop and pause points there: the actions of those that were armed (cancel first)."""
        with self._lock:
            return [action for action, points in (("cancel", self.cancel), ("pause", self.pause))
                    if points.pop((op_id, when), None) is not None]

    def take_pause(self, op_id: str, when: str) -> str | None:
        """A pause point reached: disarm it and answer the door that armed it; None when it was disarmed since
        (from another thread)."""
        with self._lock:
            return self.pause.pop((op_id, when), None)

    def stop_point_of(self, op_id: str) -> str | None:
        """When the stop point armed on ``op_id`` stops the plan (on_enter before on_complete); None if none is."""
        points = self.cancel
        for when in STOP_WHENS:
            if (op_id, when) in points:
                return when
        return None

    def pause_point_of(self, op_id: str) -> str | None:
        """When the pause point armed on ``op_id`` pauses the plan (on_enter before on_complete); None if none is."""
        points = self.pause
        if points:
            for when in STOP_WHENS:
                if (op_id, when) in points:
                    return when
        return None
