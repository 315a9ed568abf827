"""The readiness gate of the iiwa profile (no rclpy: times are given, in seconds of the node's clock).

Ready means: the cell said ``scene_ready`` true, a scene envelope was received and is not stale, and
``delay_s`` passed since the later of the two. ``scene_ready`` turning false or the scene going stale
resets the wait: the node then stops the active run and refuses submits until ready again.
"""
from __future__ import annotations


class ReadinessGate:
    def __init__(self, delay_s: float, max_age_s: float = 0.0):
        self.delay_s = delay_s
        self.max_age_s = max_age_s  # 0.0: a scene never goes stale by age
        self.flag = False
        self._scene_at: float | None = None  # when the newest envelope came
        self._since: float | None = None     # when flag and a fresh scene were last both true

    def set_flag(self, value: bool, now: float) -> None:
        self.flag = bool(value)
        self._settle(now)

    def scene_received(self, now: float) -> None:
        self._scene_at = now
        self._settle(now)

    def not_ready_reason(self, now: float) -> str | None:
        """Why a submit would be refused now; None when ready."""
        self._settle(now)
        if not self.flag:
            return "the cell's scene_ready is not true"
        if self._scene_at is None:
            return "no scene received yet"
        if self.stale(now):
            return f"the scene is stale: no envelope for {now - self._scene_at:.1f} s (scene_max_age_s " \
                   f"{self.max_age_s:g})"
        waited = now - self._since
        if waited < self.delay_s:
            return f"the cell became ready {waited:.1f} s ago; waiting {self.delay_s:g} s (ready_delay_s)"
        return None

    def stop_reason(self, now: float) -> str | None:
        """Why an active run must stop now (scene_ready false, or the scene stale); None otherwise."""
        if not self.flag:
            return "the cell's scene_ready turned false"
        if self._scene_at is not None and self.stale(now):
            return "the scene went stale (scene_max_age_s)"
        return None

    def stale(self, now: float) -> bool:
        return self.max_age_s > 0 and self._scene_at is not None and now - self._scene_at > self.max_age_s

    def _settle(self, now: float) -> None:
        both = self.flag and self._scene_at is not None and not self.stale(now)
        if not both:
            self._since = None
        elif self._since is None:
            self._since = now
