"""The bt_exec nodes of one ROS domain as a fleet: what ``bt-exec fleet`` serves as one web console and MCP tools.

``RosFleet`` has an rclpy node of its own (in a context of its own, spun in a
thread). It finds every node serving a ``Control`` service (``<node>/control``),
looking again every ``discovery_period_s``; calls any operation of the control
API on any of them through that service, so each robot's own executor answers;
and subscribes to each one's ``~/status``, handing its events on per robot.
``bt_exec.web.fleet_api.FleetApi`` serves it; this module is the only part of
the fleet that knows ROS.

A robot's name is its node's namespace (``/robot1/bt_exec`` is ``robot1``); a
node not named ``bt_exec`` keeps its name too (``/robot1/arm_exec`` is
``robot1/arm_exec``, ``/bt_exec`` is ``bt_exec``).
"""
from __future__ import annotations

import json
import os
import threading
import time
from dataclasses import dataclass
from typing import Callable

import rclpy
from bt_exec_interfaces.srv import Control
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor
from rclpy.signals import SignalHandlerOptions
from std_msgs.msg import String

from ..control import error_from_answer, expected_wait_s
from ..errors import Unreachable
from ..errors import ControlError, NotFound
from . import convert
from .node import NODE_NAME, SERVICE_QOS, STATUS_QOS

CONTROL_TYPE = "bt_exec_interfaces/srv/Control"
CONTROL_SERVICE = "/control"
# An answer may take as long as the operation is asked to wait (wait_for_plan, a cancel), and this beyond it.
ANSWER_MARGIN_S = 10.0
HEALTH_TIMEOUT_S = 2.0
PROBE_RESEND_S = 0.5


def robot_name(node: str) -> str:
    """The robot a node serves: its namespace, or its full name without the leading ``/`` when it is not
    ``bt_exec`` or sits in the root namespace."""
    namespace, _, name = node.rpartition("/")
    return namespace.lstrip("/") if name == NODE_NAME and namespace else node.lstrip("/")


@dataclass
class _Robot:
    name: str
    node: str
    client: object
    subscription: object
    matched: bool = False  # the node has answered this client once, so a request sent now is not lost


class RosFleet:
    """The fleet on this process's ROS domain. ``start(on_events)`` once, then ``robots()`` and ``call(...)``
    from any thread; ``on_events(robot, events)`` is called from the fleet's thread. ``close()`` to leave.

    ``ros_args``: ROS arguments for the fleet's own node (``--ros-args ...``); ``call_timeout_s``: how long a
    robot may take to answer, beyond what the operation asks to wait.
    """

    def __init__(self, ros_args: list[str] | None = None, call_timeout_s: float = ANSWER_MARGIN_S,
                 discovery_period_s: float = 1.0):
        self.ros_args = list(ros_args or [])
        self.call_timeout_s = call_timeout_s
        self.discovery_period_s = discovery_period_s
        self._robots: dict[str, _Robot] = {}
        self._lock = threading.Lock()
        self._context: Context | None = None
        self._node = None
        self._executor: SingleThreadedExecutor | None = None
        self._thread: threading.Thread | None = None
        self._on_events: Callable[[str, list[dict]], None] | None = None

    def start(self, on_events: Callable[[str, list[dict]], None]) -> None:
        self._on_events = on_events
        self._context = Context()
        rclpy.init(args=["bt-exec", *self.ros_args], context=self._context,
                   signal_handler_options=SignalHandlerOptions.NO)
        try:
            self._node = rclpy.create_node(f"bt_exec_fleet_{os.getpid()}", context=self._context,
                                           start_parameter_services=False)
            self._executor = SingleThreadedExecutor(context=self._context)
            self._executor.add_node(self._node)
            self._discover()
            self._node.create_timer(self.discovery_period_s, self._discover)
        except BaseException:
            self._context.try_shutdown()
            raise
        self._thread = threading.Thread(target=self._spin, name="bt_exec-fleet", daemon=True)
        self._thread.start()

    def close(self) -> None:
        if self._context is None:
            return
        self._context.try_shutdown()  # ends the spin
        if self._thread is not None:
            self._thread.join(5.0)
        self._executor.shutdown(timeout_sec=1.0)
        self._node.destroy_node()

    # --- the robots ---------------------------------------------------------------

    def robots(self, ask: bool = True) -> list[dict]:
        """Every robot found, by name: ``{robot, namespace, node, health, plans}``. ``ask``: each is asked for its
        plans in flight, all at once (``health`` is ``ok``, or ``no answer`` within HEALTH_TIMEOUT_S; ``plans``
        its plan ids, or None); else ``health`` is ``unknown`` and ``plans`` None."""
        with self._lock:
            robots = sorted(self._robots.values(), key=lambda robot: robot.name)
        answers = self._ask_all(robots) if ask else {}
        listed = []
        for robot in robots:
            entry = {"robot": robot.name, "namespace": robot.node.rpartition("/")[0] or "/", "node": robot.node,
                     "health": "no answer" if ask else "unknown", "plans": None}
            answer = answers.get(robot.name)
            if answer is not None:
                entry["health"] = "ok"
                entry["plans"] = [plan.get("plan_id") for plan in answer.get("plans", [])]
            listed.append(entry)
        return listed

    def call(self, robot: str, operation: str, args: dict, door: str) -> dict:
        """``operation`` with ``args`` on ``robot``'s executor: its answer, or the typed error of its refusal
        (``control.error_from_answer``), NotFound for a robot not found, Unreachable for one that gives no answer
        in time (``call_timeout_s`` beyond what the operation asks to wait)."""
        with self._lock:
            found = self._robots.get(robot)
            known = ", ".join(sorted(self._robots)) or "none found yet"
        if found is None:
            raise NotFound(f"no robot {robot!r} in the fleet; list_robots names them: {known}", code="unknown_robot")
        wait_s = self.call_timeout_s + expected_wait_s(operation, args)
        deadline = time.monotonic() + wait_s
        try:
            if not self._match(found, deadline):
                raise Unreachable(f"robot {robot!r} ({found.node}) does not answer: its node may have stopped",
                                  code="robot_unreachable")
            waiting = self._send(found, operation, args, door)
        except ControlError:
            raise
        except Exception as exc:  # the robot left the graph meanwhile (its client is gone), or the fleet closes
            raise Unreachable(f"robot {robot!r} ({found.node}) cannot be reached: {type(exc).__name__}",
                              code="robot_unreachable") from None
        if not waiting.wait(max(0.0, deadline - time.monotonic())):
            raise Unreachable(f"robot {robot!r} ({found.node}) gave no answer to {operation} within {wait_s:g} s",
                              code="robot_timeout")
        success, status, answer = waiting.answer
        if success:
            return answer
        raise error_from_answer(status, answer, f"robot {robot!r} refused {operation}")

    def _ask_all(self, robots: list[_Robot]) -> dict:
        """robot name -> its get_all_plans answer, for those that answer within HEALTH_TIMEOUT_S; all asked at once,
        and asked again each PROBE_RESEND_S while unanswered (a read: safe to repeat, and a new client's first
        request may be lost)."""
        deadline = time.monotonic() + HEALTH_TIMEOUT_S
        waiting = {robot.name: _Answer() for robot in robots}
        sent_at = {}
        answers = {}
        while True:
            now = time.monotonic()
            for robot in robots:
                answer = waiting[robot.name]
                if robot.name in answers:
                    continue
                if answer.done:
                    success, _status, value = answer.answer
                    if success and isinstance(value, dict):
                        answers[robot.name] = value
                        robot.matched = True
                elif now - sent_at.get(robot.name, -PROBE_RESEND_S) >= PROBE_RESEND_S \
                        and robot.client.service_is_ready():
                    try:
                        self._send(robot, "get_all_plans", {}, "ros", answer)
                    except Exception:  # the robot left the graph meanwhile
                        continue
                    sent_at[robot.name] = now
            if len(answers) == len(robots) or now >= deadline:
                return answers
            time.sleep(0.02)

    # --- ROS ----------------------------------------------------------------------

    def _spin(self) -> None:
        try:
            while self._context.ok():
                self._executor.spin_once(timeout_sec=0.1)
        except Exception:  # the context was shut down under the spin: the fleet is closing
            pass

    def _discover(self) -> None:
        """Add the nodes serving a Control service that are new, drop those gone from the graph."""
        found = {name[:-len(CONTROL_SERVICE)] for name, types in self._node.get_service_names_and_types()
                 if CONTROL_TYPE in types and name.endswith(CONTROL_SERVICE)}
        with self._lock:
            known = {robot.node: robot for robot in self._robots.values()}
        for node in found - set(known):
            name = robot_name(node)
            client = self._node.create_client(Control, node + CONTROL_SERVICE, qos_profile=SERVICE_QOS)
            subscription = self._node.create_subscription(
                String, node + "/status", lambda msg, robot=name: self._on_status(robot, msg), STATUS_QOS)
            with self._lock:
                self._robots[name] = _Robot(name, node, client, subscription)
        for node in set(known) - found:
            robot = known[node]
            with self._lock:
                self._robots.pop(robot.name, None)
            self._node.destroy_client(robot.client)
            self._node.destroy_subscription(robot.subscription)

    def _on_status(self, robot: str, msg) -> None:
        try:
            event = json.loads(msg.data)
        except ValueError:
            return  # not an event of a bt_exec node
        if isinstance(event, dict) and self._on_events is not None:
            self._on_events(robot, [event])

    def _match(self, robot: _Robot, deadline: float) -> bool:
        """Whether ``robot``'s node answers this fleet's client. A request sent before the server has matched a
        new client can be lost, and a request may not be safe to repeat (a step), so the first time the empty
        request (refused, changing nothing) is sent until one is answered."""
        if robot.matched:
            return True
        probe = _Answer()  # a late answer to an earlier probe counts too
        while time.monotonic() < deadline:
            if robot.client.service_is_ready():
                self._send(robot, "", {}, "ros", probe)
                if probe.wait(min(PROBE_RESEND_S, max(0.0, deadline - time.monotonic()))):
                    robot.matched = True
                    return True
            else:
                time.sleep(0.05)
        return False

    def _send(self, robot: _Robot, operation: str, args: dict, door: str,
              waiting: "_Answer | None" = None) -> "_Answer":
        """Send one request; its answer settles ``waiting`` (a new ``_Answer`` if None), unless another did first."""
        request = convert.control_call_to_msg(operation, args, door, Control.Request())
        waiting = waiting if waiting is not None else _Answer()
        robot.client.call_async(request).add_done_callback(waiting.settle)
        return waiting


# The answer to a request the fleet dropped as it closed: the robot is beyond reach from now on.
_DROPPED_STATUS = 504


class _Answer:
    """A robot's answer to a request (sent once or more), awaited from any thread: the first answer counts."""

    def __init__(self):
        self._done = threading.Event()
        self._lock = threading.Lock()
        self.answer: tuple[bool, int, object] = (False, _DROPPED_STATUS, {})

    @property
    def done(self) -> bool:
        return self._done.is_set()

    def settle(self, future) -> None:
        try:
            answer = convert.msg_to_control_answer(future.result())
        except Exception as exc:  # the request was dropped as the fleet closed
            answer = (False, _DROPPED_STATUS, {"error": {"code": "robot_failed",
                                                         "message": f"{type(exc).__name__}: {exc}"}})
        with self._lock:
            if self._done.is_set():
                return
            self.answer = answer
            self._done.set()

    def wait(self, timeout_s: float) -> bool:
        return self._done.wait(timeout_s)

