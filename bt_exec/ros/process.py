"""What every bt_exec node process does around its node: spin it in a thread, and let go of it in order."""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable

import rclpy
from rclpy.executors import Executor, ExternalShutdownException
from rclpy.node import Node

log = logging.getLogger(__name__)

SIGNAL_GRACE_S = 2.0  # a second SIGINT/SIGTERM this soon after the first is the same request (ros2 launch's)
SPIN_WAKE_S = 0.1     # the spin thread looks whether it is halted at least this often
HALT_WAIT_S = 2.0     # for the callback in progress to end once spinning is halted


def stop_on_signals(stop: threading.Event, too_late: Callable[[int, float], None]) -> None:
    """Handle SIGINT and SIGTERM for the rest of the process (from the main thread; elsewhere nothing is
    installed): the first sets ``stop``; another within SIGNAL_GRACE_S is the same request (``ros2 launch``
    forwards the terminal's Ctrl-C as a second SIGINT); one after that calls ``too_late(signum, seconds since
    the first)``, which ends the process. Never given back: a repeated signal that comes while the node is
    torn down, or the process exits, must still find them."""
    first_at: list[float] = []

    def on_signal(signum, _frame):
        now = time.monotonic()
        if not first_at:
            first_at.append(now)
            stop.set()
        elif now - first_at[0] > SIGNAL_GRACE_S:  # asked again, later: the clean stop is stuck
            too_late(signum, now - first_at[0])

    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, on_signal)


class SpinThread(threading.Thread):
    """Spins an rclpy executor until ``halt()``: one ``spin_once`` at a time, each waiting at most
    ``SPIN_WAKE_S``, so the thread sees the halt within that long whatever is in the wait set.

    rclpy's own ``spin()`` ends only when ``Executor.shutdown`` wakes it through a guard condition, which
    rclpy 7 destroys right after triggering it: a spin thread between two waits then enters a wait with
    nothing to wake it (no timer, no message), and the process outlived its clean stop until the join gave
    up (``ros2 launch`` escalated to SIGTERM). Here the executor is shut down only once nothing spins.

    A callback's exception re-raised here (ours catch everything; rclpy's own take/send can still fail, e.g.
    on a request that is not valid UTF-8) is logged and spinning goes on, so that one bad message never ends
    the node's service."""

    def __init__(self, ros_executor: Executor, name: str):
        super().__init__(name=name, daemon=True)
        self.ros_executor = ros_executor
        self._spinning = threading.Event()
        self._spinning.set()

    def run(self) -> None:
        while self._spinning.is_set():
            try:
                self.ros_executor.spin_once(timeout_sec=SPIN_WAKE_S)
            except ExternalShutdownException:
                return
            except Exception as exc:
                if not self.ros_executor.context.ok():
                    return
                log.error("rclpy executor: %s: %s (serving on)", type(exc).__name__, exc)
                time.sleep(0.01)

    def halt(self, timeout_s: float) -> bool:
        """Stop spinning after the callback in progress; whether the thread ended within ``timeout_s``."""
        self._spinning.clear()
        self.join(timeout_s)
        return not self.is_alive()


def release(node: Node | None, close: Callable[[], None], ros_executor: Executor | None,
            spin_thread: SpinThread | None) -> None:
    """Close the node (``close``, while it still spins), stop spinning, shut the executor down, destroy the
    node and shut rclpy down, in that order, whatever fails on the way; then the process, about to end,
    ignores further stop signals."""
    try:
        if node is not None:
            close()
        if spin_thread is not None:
            spin_thread.halt(HALT_WAIT_S)
        if ros_executor is not None:
            ros_executor.shutdown(timeout_sec=HALT_WAIT_S)
        if node is not None:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
        if threading.current_thread() is threading.main_thread():
            # The process ends next, and CPython gives handled signals their default action back while it
            # finalises: a stop signal repeated then (ros2 launch sends two) would kill it mid-exit.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
