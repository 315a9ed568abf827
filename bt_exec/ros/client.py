"""A one-shot service client for the ``bt-exec`` client commands (submit, plans, status, stop-at, cancel).

Each command makes a short-lived node in a context of its own, calls one
service of the ``bt_exec`` node and leaves. Ctrl-C is Python's
KeyboardInterrupt (rclpy's signal handling is off), so it always lands.

A request sent right after ``wait_for_service`` by a fresh client can be lost
on DDS (the server may not have matched the new client yet, and service
topics keep no history), so an unanswered request is sent again after 0.5,
1, 2, ... s. Every request the commands send is safe to repeat: submit always
carries a run_id (the command makes one), and stop points, cancels and
status reads repeat harmlessly. The first answer wins.
"""
from __future__ import annotations

import os
import time
import uuid

import rclpy
from bt_exec_interfaces.srv import Cancel, GetStatus, ListPlans, StopAt, Submit
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

SERVICES = {"submit": Submit, "stop_at": StopAt, "cancel": Cancel, "get_status": GetStatus,
            "list_plans": ListPlans}


RESEND_FIRST_S = 0.5


class Unreachable(Exception):
    """No node serves the service, or it gave no answer in time."""


class Client:
    """``with Client("/bt_exec", ros_args, timeout_s) as client: client.call("list_plans")``."""

    def __init__(self, node: str = "/bt_exec", ros_args: list[str] | None = None, timeout_s: float = 10.0):
        self.target = node.rstrip("/") or "/bt_exec"
        self.timeout_s = timeout_s
        self.context = Context()
        rclpy.init(args=["bt-exec", *(ros_args or [])], context=self.context,
                   signal_handler_options=SignalHandlerOptions.NO)
        try:
            self.node = rclpy.create_node(f"bt_exec_cli_{os.getpid()}", context=self.context,
                                          start_parameter_services=False)
            self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.node)
        except BaseException:
            self.context.try_shutdown()
            raise

    def __enter__(self):
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    def close(self) -> None:
        try:
            self.executor.shutdown(timeout_sec=1.0)
            self.node.destroy_node()
        finally:
            self.context.try_shutdown()

    def request(self, service: str):
        return SERVICES[service].Request()

    def call(self, service: str, request=None, extra_wait_s: float = 0.0):
        """The service's response; Unreachable when no node answers within the timeout (+ ``extra_wait_s``)."""
        name = f"{self.target}/{service}"
        client = self.node.create_client(SERVICES[service], name)
        try:
            if not client.wait_for_service(timeout_sec=self.timeout_s):
                raise Unreachable(f"no bt_exec node answers at {name} (waited {self.timeout_s:g} s); start one "
                                  "with `bt-exec serve`, or name a remapped node with --node /NAMESPACE/NAME")
            request = request if request is not None else self.request(service)
            futures = [client.call_async(request)]
            now = time.monotonic()
            deadline = now + self.timeout_s + extra_wait_s
            resend_after, resend_at = RESEND_FIRST_S, now + RESEND_FIRST_S
            while True:
                for future in futures:
                    if future.done():
                        return future.result()
                now = time.monotonic()
                if now >= deadline:
                    raise Unreachable(f"{name} gave no answer within {self.timeout_s + extra_wait_s:g} s")
                if now >= resend_at:
                    futures.append(client.call_async(request))
                    resend_after *= 2
                    resend_at = now + resend_after
                self.executor.spin_once(timeout_sec=min(0.05, deadline - now))
        finally:
            self.node.destroy_client(client)


def new_run_id() -> str:
    return uuid.uuid4().hex
