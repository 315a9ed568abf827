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


def spin(ros_executor: Executor, stop: threading.Event) -> None:
    """Spin until the executor is shut down. rclpy re-raises a callback's exception here (ours catch
    everything; rclpy's own take/send can still fail, e.g. on a request that is not valid UTF-8): log it
    and spin on, so that one bad message never ends the node's service."""
    while not stop.is_set():
        try:
            ros_executor.spin()
            return
        except ExternalShutdownException:
            return
        except Exception as exc:
            log.error("rclpy executor: %s: %s (serving on)", type(exc).__name__, exc)
            time.sleep(0.01)


def release(node: Node | None, close: Callable[[], None], ros_executor: Executor | None,
            spin_thread: threading.Thread | None) -> None:
    """Close the node (``close``), stop spinning, destroy the node and shut rclpy down, in that order,
    whatever fails on the way; then the process, about to end, ignores further stop signals."""
    try:
        if node is not None:
            close()
        if ros_executor is not None:
            ros_executor.shutdown(timeout_sec=2.0)
        if spin_thread is not None:
            spin_thread.join(5.0)
        if node is not None:
            node.destroy_node()
    finally:
        rclpy.try_shutdown()
        if threading.current_thread() is threading.main_thread():
            # The process ends next, and CPython gives handled signals their default action back while it
            # finalises: a stop signal repeated then (ros2 launch sends two) would kill it mid-exit.
            for signum in (signal.SIGINT, signal.SIGTERM):
                signal.signal(signum, signal.SIG_IGN)
