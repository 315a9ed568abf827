"""``~/control``: any operation of the control API, by name, answered by the node's executor as its web app and
MCP tools answer it (``bt_exec.web.api.ControlCalls``). The fleet console and its MCP tools reach each robot
through it (``fleet.RosFleet``).

The operation runs in a small pool of its own (a cancel or ``wait_for_plan`` waits), awaited on an rclpy Future,
so no executor thread is held meanwhile.
"""
from __future__ import annotations

import concurrent.futures
import json
import threading

from bt_exec_interfaces.srv import Control
from rclpy.task import Future

from ..web.api import ApiError, ControlCalls
from . import convert

WORKERS = 4
MAX_WAITS = 2  # wait_for_plan calls waiting at once: the other workers stay free for everything else


class ControlService:
    """Serves ``~/control`` on ``node`` for ``executor``; ``close()`` stops taking requests.

    ``max_args_bytes``: the longest ``args_json`` taken (a plan travels in it)."""

    def __init__(self, node, executor, max_args_bytes: int, qos_profile, callback_group):
        self._node = node
        self._calls = ControlCalls(executor, max_waits=MAX_WAITS)
        self._max_args_bytes = max_args_bytes
        self._pool = concurrent.futures.ThreadPoolExecutor(WORKERS, thread_name_prefix="bt_exec-control")
        self._settle_lock = threading.Lock()
        self.service = node.create_service(Control, "~/control", self._on_request, qos_profile=qos_profile,
                                           callback_group=callback_group)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _on_request(self, request, response):
        operation, args_text, door = convert.msg_to_control_call(request)
        future = Future(executor=self._node.executor)
        future.add_done_callback(_wake)
        try:
            self._pool.submit(self._answer, operation, args_text, door, future)
        except RuntimeError:  # the pool was shut down: the node is stopping
            return convert.control_answer_to_msg(503, _error("stopping", "the node is stopping"), response)
        status, answer = await future
        return convert.control_answer_to_msg(status, answer, response)

    def _answer(self, operation: str, args_text: str, door: str, future: Future) -> None:
        try:
            result = 200, self._calls.call(operation, self._args(operation, args_text), door)
        except ApiError as exc:
            result = exc.status, exc.as_dict()
        except Exception as exc:  # never a dead service: the caller hears what failed
            self._node.get_logger().error(f"control {operation[:80]!r}: {type(exc).__name__}: {exc}")
            result = 500, _error("internal", f"internal error: {type(exc).__name__}")
        with self._settle_lock:
            if not future.done():
                future.set_result(result)

    def _args(self, operation: str, text: str) -> object:
        if len(text) > self._max_args_bytes:
            raise ApiError(413, "too_large", f"{operation}: args_json is {len(text)} characters; at most "
                                             f"{self._max_args_bytes} are taken")
        try:
            return json.loads(text)
        except RecursionError:
            raise ApiError(400, "bad_json", f"{operation}: args_json nests too deeply to read; send the plan as "
                                            "JSON text (graph as a string)") from None
        except ValueError as exc:
            raise ApiError(400, "bad_json", f"{operation}: args_json is not JSON: {exc}") from None


def _error(code: str, message: str) -> dict:
    return {"error": {"code": code, "message": message}}


def _wake(_future: Future) -> None:
    """A done callback: its only job is to make the executor run, so the coroutine awaiting resumes."""
