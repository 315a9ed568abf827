"""What every bt_exec node process does around its node: spin it in a thread, and let go of it in order."""
from __future__ import annotations

import logging
import signal
import threading
import time
from typing import Callable

import rclpy
from rclpy.executors import ExternalShutdownException, MultiThreadedExecutor
from rclpy.node import Node

log = logging.getLogger(__name__)


def spin(ros_executor: MultiThreadedExecutor, stop: threading.Event) -> None:
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


def release(node: Node | None, close: Callable[[], None], ros_executor: MultiThreadedExecutor | None,
            spin_thread: threading.Thread | None, previous_handlers: dict) -> None:
    """Close the node (``close``), stop spinning, destroy the node, shut rclpy down and give the signals
    back their handlers, in that order, whatever fails on the way."""
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
        for signum, handler in previous_handlers.items():
            signal.signal(signum, handler)
