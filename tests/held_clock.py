"""A clock for the sim backend that a test holds: a running plan stays where it is while the test looks at it."""
import time


class HeldClock:
    """Stopped until ``release``, so a plan's ops stay running for as long as a test looks at them, however
    loaded the machine; released, it runs on from far ahead, so the calls started while it was held end at once
    and the next take their real durations. Set it as a SimBackend's ``clock`` before any plan runs."""

    def __init__(self):
        self._offset = None

    def __call__(self) -> float:
        return 0.0 if self._offset is None else time.monotonic() + self._offset

    def release(self) -> None:
        self._offset = 1e6 - time.monotonic()
