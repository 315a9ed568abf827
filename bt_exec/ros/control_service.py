"""``~/control``: any operation of the control API, by name, answered by the node's executor as its web app and
MCP tools answer it (``bt_exec.control.ControlCalls``; a refusal's status from ``control.error_answer``). The fleet
console and its MCP tools reach each robot through it (``fleet.RosFleet``).

The operation runs in a small pool of its own (a cancel or ``wait_for_plan`` waits), awaited (``awaiting``), so
the node's executor thread is never held meanwhile.
"""
from __future__ import annotations

import concurrent.futures

from bt_exec_interfaces.srv import Control

from ..control import ControlCalls, error_answer, parsed_json
from ..errors import TooLarge
from ..errors import Busy
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
            return convert.control_answer_to_msg(*error_answer(Busy("the node is stopping", code="stopping")),
                                                 response)
        status, answer = await waiting
        return convert.control_answer_to_msg(status, answer, response)

    def _answer(self, operation: str, args_text: str, door: str) -> tuple[int, dict]:
        try:
            return 200, self._calls.call(operation, self._args(operation, args_text), door)
        except Exception as exc:  # never a dead service: the caller hears what failed, as every door words it
            return error_answer(exc, f"control {operation[:80]!r}")

    def _args(self, operation: str, text: str) -> object:
        if len(text) > self._max_args_bytes:
            raise TooLarge(f"{operation}: args_json is {len(text)} characters; at most {self._max_args_bytes} are "
                           "taken")
        return parsed_json(text, f"{operation}: args_json")

