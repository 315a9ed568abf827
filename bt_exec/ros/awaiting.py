"""Waiting without holding the node's one executor thread: an rclpy Future a service callback awaits, settled
from another thread (a worker pool, the executor's done callbacks, a timer).

A Future made by ``waitable`` wakes the rclpy executor when it completes, so the coroutine awaiting it resumes.
"""
from __future__ import annotations

import concurrent.futures
import threading

from rclpy.task import Future

_settle_lock = threading.Lock()


def waitable(executor) -> Future:
    """A Future the callbacks of ``executor`` (an rclpy executor) can await."""
    future = Future(executor=executor)
    future.add_done_callback(_wake)  # completing it from another thread then wakes the executor
    return future


def settle(future: Future, value=None, exception: BaseException | None = None) -> None:
    """Complete ``future`` once: later settlements (a timer racing the plans' end) are ignored."""
    with _settle_lock:
        if future.done() or future.cancelled():
            return
        if exception is not None:
            future.set_exception(exception)
        else:
            future.set_result(value)


def offload(pool: concurrent.futures.Executor, executor, function, *args, **kwargs) -> Future:
    """Run ``function`` in ``pool``; a Future to await for its value (or its exception). RuntimeError when the
    pool was shut down."""
    future = waitable(executor)

    def work():
        try:
            value = function(*args, **kwargs)
        except BaseException as exc:
            settle(future, exception=exc)
        else:
            settle(future, value)

    pool.submit(work)
    return future


def _wake(_future: Future) -> None:
    """A done callback: its only job is to make the executor run, so the coroutine awaiting resumes."""
