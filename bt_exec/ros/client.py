"""A one-shot service client for the ``bt-exec`` client commands (submit, plans, status, stop-at, disarm, pause,
resume, step, cancel).

Each command makes a short-lived node in a context of its own, calls one
service of the ``bt_exec`` node and leaves. Ctrl-C is Python's
KeyboardInterrupt (rclpy's signal handling is off), so it always lands.

A request sent right after ``wait_for_service`` by a fresh client can be lost
on DDS (the server may not have matched the new client yet, and service
topics keep no history), so an unanswered request is sent again after 0.5,
1, 2, ... s, where that is safe: submit always carries a run_id (the command
makes one), and stop points, disarms, cancels and status reads repeat
harmlessly. The first answer wins. Pausing, resuming, stepping and arming a
pause point are not safe to repeat (a step sent again moves the plan on
again; a late resume could let the plan past a pause point that fired
meanwhile): ``call(..., repeatable=False)`` first sends the
service's empty request, which the node refuses without effect (no plan_id),
until one is answered, so the server has matched this client, then the real
request once.
"""
from __future__ import annotations

import json
import os
import time
import uuid

import rclpy
from bt_exec_interfaces.srv import Cancel, Disarm, GetStatus, ListPlans, PlanControl, StopAt, Submit
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions

from ..errors import Unreachable

SERVICES = {"submit": Submit, "stop_at": StopAt, "disarm": Disarm, "pause": PlanControl, "resume": PlanControl,
            "step": PlanControl, "cancel": Cancel, "get_status": GetStatus, "list_plans": ListPlans}


RESEND_FIRST_S = 0.5


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

    def call(self, service: str, request=None, extra_wait_s: float = 0.0, repeatable: bool = True):
        """The service's response; ``errors.Unreachable`` when no node answers within the timeout (+ ``extra_wait_s``,
        what the request asks the node to wait: ``control.expected_wait_s``).
        ``repeatable=False``: the request is sent once, after an empty one was answered (see the module)."""
        name = f"{self.target}/{service}"
        client = self.node.create_client(SERVICES[service], name)
        try:
            if not client.wait_for_service(timeout_sec=self.timeout_s):
                raise Unreachable(f"no bt_exec node answers at {name} (waited {self.timeout_s:g} s); start one "
                                  "with `bt-exec serve`, or name a remapped node with --node /NAMESPACE/NAME")
            request = request if request is not None else self.request(service)
            if not repeatable:
                self._answer(client, name, self.request(service), self.timeout_s, resend=True)
            return self._answer(client, name, request, self.timeout_s + extra_wait_s, resend=repeatable)
        finally:
            self.node.destroy_client(client)

    def _answer(self, client, name: str, request, wait_s: float, resend: bool):
        futures = [client.call_async(request)]
        now = time.monotonic()
        deadline = now + wait_s
        resend_after, resend_at = RESEND_FIRST_S, now + RESEND_FIRST_S
        while True:
            for future in futures:
                if future.done():
                    return future.result()
            now = time.monotonic()
            if now >= deadline:
                raise Unreachable(f"{name} gave no answer within {wait_s:g} s")
            if resend and now >= resend_at:
                futures.append(client.call_async(request))
                resend_after *= 2
                resend_at = now + resend_after
            self.executor.spin_once(timeout_sec=min(0.05, deadline - now))


LIST_PLANS_TYPE = "bt_exec_interfaces/srv/ListPlans"


EXECUTOR_NODE_NAME = "bt_exec"  # the name bt_exec_node and bt-exec serve give their node (ros/node.py)
# The graph unchanged this long after something was found: discovery has settled. Longer than the period of
# DDS participant announcements (Fast DDS: 3 s), so that a robot whose first exchange was lost on a loaded
# machine or network is seen by its next announcement.
SETTLED_S = 3.5


def find_executors(client: Client, wait_s: float, settled_s: float = SETTLED_S) -> list[str]:
    """The full names of the bt_exec nodes on the domain (every node serving a ListPlans service), sorted.

    DDS discovery is gradual and says nothing of when it is complete: one robot's node and services can be
    seen seconds before another's. So this looks until the graph (its nodes and their services) has not
    changed for ``settled_s`` (or for as long as the first node took to be seen, when that was longer)
    and no node named bt_exec is still without its services, or until ``wait_s`` has passed; finding
    nothing, it looks the whole ``wait_s``."""
    found: set[str] = set()
    view = None
    started = changed_at = time.monotonic()
    deadline = started + wait_s
    first_seen_after = None
    while True:
        services = client.node.get_service_names_and_types()
        nodes = client.node.get_node_names_and_namespaces()
        for name, types in services:
            if LIST_PLANS_TYPE in types and name.endswith("/list_plans"):
                found.add(name[:-len("/list_plans")])
        now = time.monotonic()
        if found and first_seen_after is None:
            first_seen_after = now - started
        seen = (frozenset(name for name, _ in services), frozenset(nodes))
        if seen != view:
            view, changed_at = seen, now
        # a node is seen before its services: one named as ours but not yet serving is still arriving
        arriving = any(name == EXECUTOR_NODE_NAME and _full_name(namespace, name) not in found
                       for name, namespace in nodes)
        if now >= deadline or (found and not arriving and now - changed_at >= max(settled_s, first_seen_after)):
            return sorted(found)
        client.executor.spin_once(timeout_sec=min(0.1, deadline - now))


def _full_name(namespace: str, name: str) -> str:
    return f"{namespace.rstrip('/')}/{name}"


def list_plans_of(client: Client, nodes: list[str], timeout_s: float) -> dict:
    """node -> its ``get_all_plans`` answer (parsed), or None when it gave none within ``timeout_s``; all asked
    at once."""
    pending = {}
    for node in nodes:
        service = client.node.create_client(ListPlans, f"{node}/list_plans")
        pending[node] = (service, [])
    answers = {node: None for node in nodes}
    deadline = time.monotonic() + timeout_s
    resend_at = {node: time.monotonic() for node in nodes}
    resend_after = {node: RESEND_FIRST_S for node in nodes}
    try:
        while True:
            now = time.monotonic()
            for node, (service, futures) in pending.items():
                if answers[node] is not None:
                    continue
                done = [future for future in futures if future.done() and future.result() is not None]
                if done:
                    answers[node] = json.loads(done[0].result().plans_json)
                elif now >= resend_at[node] and service.service_is_ready():
                    futures.append(service.call_async(ListPlans.Request()))
                    resend_at[node] = now + resend_after[node]
                    resend_after[node] *= 2
            if all(answer is not None for answer in answers.values()) or now >= deadline:
                return answers
            client.executor.spin_once(timeout_sec=min(0.05, deadline - now))
    finally:
        for service, _futures in pending.values():
            client.node.destroy_client(service)


def new_run_id() -> str:
    return uuid.uuid4().hex
