"""``~/control``: any operation of the control API, by name, answered by the node's executor as its web app and
MCP tools answer it (``bt_exec.web.api.ControlCalls``). The fleet console and its MCP tools reach each robot
through it (``fleet.RosFleet``).

The operation runs in a small pool of its own (a cancel or ``wait_for_plan`` waits), awaited (``awaiting``), so
the node's executor thread is never held meanwhile.
"""
from __future__ import annotations

import concurrent.futures
import json

from bt_exec_interfaces.srv import Control

from ..web.api import ApiError, ControlCalls
from . import convert
from .awaiting import offload

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
        self.service = node.create_service(Control, "~/control", self._on_request, qos_profile=qos_profile,
                                           callback_group=callback_group)

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)

    async def _on_request(self, request, response):
        operation, args_text, door = convert.msg_to_control_call(request)
        try:
            waiting = offload(self._pool, self._node.executor, self._answer, operation, args_text, door)
        except RuntimeError:  # the pool was shut down: the node is stopping
            return convert.control_answer_to_msg(503, _error("stopping", "the node is stopping"), response)
        status, answer = await waiting
        return convert.control_answer_to_msg(status, answer, response)

    def _answer(self, operation: str, args_text: str, door: str) -> tuple[int, dict]:
        try:
            return 200, self._calls.call(operation, self._args(operation, args_text), door)
        except ApiError as exc:
            return exc.status, exc.as_dict()
        except Exception as exc:  # never a dead service: the caller hears what failed
            self._node.get_logger().error(f"control {operation[:80]!r}: {type(exc).__name__}: {exc}")
            return 500, _error("internal", f"internal error: {type(exc).__name__}")

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

