"""A simulated robot on ROS 2: RunCapability action servers that answer from a sim script.

``run_sim_robot(argv)`` runs node ``bt_exec_sim_robot`` until SIGINT/SIGTERM.
Parameters (``--ros-args -p name:=value``):

* ``sim_script`` (string, ``''``): a sim script (see ``bt_exec.SimBackend``):
  a file path, or the JSON text itself when it starts with ``{``. Empty: every
  call succeeds at once.
* ``providers`` (string array, default ``DEFAULT_PROVIDERS``: ``robot``,
  ``sim``, ``tiago_camera``, ``battery``, ``audio``): one action server
  ``bt_exec/capabilities/<provider>`` each, in the node's namespace (that of
  the bt_exec node it serves: ``-r __ns:=/robot1``). ``robot`` is where
  ``RosActionBackend`` sends caps without a provider prefix (Qwen3 skills);
  the others are the providers of the repository's examples.
* ``feedback_period_s`` (double, 0.2): how often a running goal publishes
  feedback (``state`` ``running``, or ``paused``; the first at once).
* ``pause_service`` (bool, true): offer ``<action name>/pause``
  (``bt_exec_interfaces/srv/PauseGoal``) beside each action server. A paused
  goal's sim clock stops until it is resumed (its feedback says ``paused``);
  false: a robot whose goals cannot be paused (they go on to their end).

Every goal runs one ``SimBackend`` call with the script's outcome and
duration: the result has ``success``, ``event``, ``output_json`` and ``error``
of that call. A cancel request is honoured at once (sim call cancelled, goal
CANCELED); so is one while the goal is paused. A goal whose ``args_json`` is not a JSON object is rejected.

What happens is reported as one JSON line per event on stdout (``ready``,
``rejected``, ``accepted``, ``paused``, ``resumed``, ``succeeded``, ``failed``, ``timeout``,
``canceled``, ``aborted``, ``stopping``, ``stopped``), e.g.
``{"sim_robot": "canceled", "goal_id": "...", "server": "/bt_exec/capabilities/sim", "plan_id": "1",
"op_id": "2", "cap": "sim.wait"}``;
the node also counts them (``SimRobotNode.counts``). On SIGINT/SIGTERM, the clients
get ``CLIENT_CANCEL_GRACE_S`` to cancel their goals (a bt_exec node stopped by
the same Ctrl-C does); goals still running then are aborted (error ``sim
robot shutting down``) so their clients hear of it, then the node stops.
"""
from __future__ import annotations

import collections
import json
import signal
import sys
import threading
import time

import rclpy
from rclpy.action import ActionServer, CancelResponse, GoalResponse
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.context import Context
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.signals import SignalHandlerOptions

from bt_exec.backends import CallStatus, CapabilityCall
from bt_exec.errors import ConfigError
from bt_exec.sim import SimBackend
from bt_exec_interfaces.action import RunCapability
from bt_exec_interfaces.srv import PauseGoal

from .action_backend import PAUSE_SERVICE_SUFFIX, default_server_name

NODE_NAME = "bt_exec_sim_robot"
DEFAULT_PROVIDERS = ("robot", "sim", "tiago_camera", "battery", "audio")
_POLL_S = 0.02           # how often a running goal looks at its sim call and at cancel requests
_EXECUTOR_THREADS = 32   # goals run in executor threads: this many at once, all servers together
CLIENT_CANCEL_GRACE_S = 2.0  # on a stop signal, how long the clients have to cancel their goals before they are aborted

_EVENT_OF_STATE = {"SUCCEEDED": "succeeded", "FAILED": "failed", "TIMEOUT": "timeout", "CANCELED": "canceled"}


class SimRobotNode(Node):
    """Serves RunCapability goals on ``<namespace>/bt_exec/capabilities/<provider>`` for each provider, from a sim
    script: the servers the bt_exec node of the same namespace calls."""

    def __init__(self, *, echo: bool = True, **node_kwargs):
        super().__init__(NODE_NAME, **node_kwargs)
        script = self.declare_parameter("sim_script", "").value
        providers = list(self.declare_parameter("providers", list(DEFAULT_PROVIDERS)).value)
        self.feedback_period_s = float(self.declare_parameter("feedback_period_s", 0.2).value)
        offer_pause = bool(self.declare_parameter("pause_service", True).value)
        script = script.strip()
        self.sim = SimBackend(json.loads(script) if script.startswith("{") else (script or None))
        self.echo = echo
        self.counts: collections.Counter[str] = collections.Counter()
        self._lock = threading.Lock()
        self._running: dict[str, dict] = {}  # goal id -> what it runs, while its execute callback is in progress
        self._sim_runs: dict[str, str] = {}  # goal id -> its sim call's run id, once started
        self._paused: set[str] = set()  # goal ids paused (also before their sim call starts)
        self._stopping = threading.Event()
        self._group = ReentrantCallbackGroup()
        self.servers: dict[str, str] = {}
        self._action_servers = []
        self._pause_services = []
        for provider in dict.fromkeys(providers):
            name = default_server_name(provider, self.get_namespace())
            if name in self.servers.values():
                continue
            self.servers[provider] = name
            self._action_servers.append(ActionServer(
                self, RunCapability, name, execute_callback=lambda handle, p=provider: self._execute(p, handle),
                goal_callback=lambda request, p=provider: self._on_goal(p, request),
                cancel_callback=self._on_cancel, callback_group=self._group))
            if offer_pause:
                self._pause_services.append(self.create_service(
                    PauseGoal, name + PAUSE_SERVICE_SUFFIX, self._on_pause, callback_group=self._group))

    # --- reporting -----------------------------------------------------------------

    def report(self, what: str, /, **fields) -> None:
        """Count ``what`` happened and, with ``echo``, print it as one JSON line on stdout."""
        with self._lock:
            self.counts[what] += 1
        if self.echo:  # one write, its newline in it: the callbacks of several threads report at once
            sys.stdout.write(json.dumps({"sim_robot": what, **fields}) + "\n")
            sys.stdout.flush()

    def running_goals(self) -> list[dict]:
        """Goals whose execution is in progress."""
        with self._lock:
            return list(self._running.values())

    # --- action server callbacks ---------------------------------------------------

    def _on_goal(self, provider: str, request) -> GoalResponse:
        about = _about(request, self.servers[provider])
        if self._stopping.is_set():
            self.report("rejected", reason="sim robot shutting down", **about)
            return GoalResponse.REJECT
        try:
            args = json.loads(request.args_json or "{}")
        except ValueError as exc:
            args, problem = None, f"args_json is not JSON: {exc}"
        else:
            problem = "" if isinstance(args, dict) else "args_json is not a JSON object"
        if problem:
            self.report("rejected", reason=problem, **about)
            return GoalResponse.REJECT
        return GoalResponse.ACCEPT

    def _on_cancel(self, goal_handle) -> CancelResponse:
        return CancelResponse.ACCEPT

    def _on_pause(self, request, response):
        goal_id = request.goal_id.strip().lower()
        with self._lock:
            about = self._running.get(goal_id)
            if about is None:
                response.success, response.message = False, f"no running goal {goal_id!r}"
                return response
            if request.pause:
                self._paused.add(goal_id)
            else:
                self._paused.discard(goal_id)
            run_id = self._sim_runs.get(goal_id)
            if run_id is not None:  # else the sim call is paused as it starts
                (self.sim.pause if request.pause else self.sim.resume)(run_id)
        self.report("paused" if request.pause else "resumed", **about)
        response.success = True
        response.message = f"sim: {about['cap']} {'paused' if request.pause else 'resumed'}"
        return response

    def _execute(self, provider: str, goal_handle) -> RunCapability.Result:
        request = goal_handle.request
        goal_id = bytes(goal_handle.goal_id.uuid).hex()
        about = {"goal_id": goal_id, **_about(request, self.servers[provider])}
        with self._lock:
            self._running[goal_id] = about
        try:
            self.report("accepted", **about)
            return self._run(provider, goal_handle, about)
        except Exception as exc:  # a sim fault aborts this goal, never the node
            self.get_logger().error(f"goal {goal_id}: {type(exc).__name__}: {exc}")
            if goal_handle.is_active:
                goal_handle.abort()
            self.report("aborted", error=str(exc), **about)
            return RunCapability.Result(success=False, event="failure", error=f"sim robot: {type(exc).__name__}: {exc}")
        finally:
            with self._lock:
                self._running.pop(goal_id, None)
                self._sim_runs.pop(goal_id, None)
                self._paused.discard(goal_id)

    def _run(self, provider: str, goal_handle, about: dict) -> RunCapability.Result:
        request = goal_handle.request
        args = json.loads(request.args_json or "{}")
        call = CapabilityCall(request.plan_id, request.op_id, request.cap, args, provider,
                              f"{request.plan_id}:{request.op_id}")
        if goal_handle.is_cancel_requested:  # cancelled between acceptance and execution
            goal_handle.canceled()
            self.report("canceled", **about)
            return RunCapability.Result(success=False, event="", error="canceled on request")
        started = self.sim.start(call)
        if isinstance(started, CallStatus):
            return self._finish(goal_handle, started, about)
        run_id = started
        with self._lock:
            self._sim_runs[about["goal_id"]] = run_id
            if about["goal_id"] in self._paused:  # paused between acceptance and the start of its sim call
                self.sim.pause(run_id)
        next_feedback = 0.0
        while True:
            if goal_handle.is_cancel_requested:
                self.sim.cancel(run_id)
                goal_handle.canceled()
                self.report("canceled", **about)
                return RunCapability.Result(success=False, event="", error="canceled on request")
            if self._stopping.is_set():
                self.sim.cancel(run_id)
                goal_handle.abort()
                self.report("aborted", error="sim robot shutting down", **about)
                return RunCapability.Result(success=False, event="failure", error="sim robot shutting down")
            status = self.sim.status(run_id)
            if status.terminal:
                return self._finish(goal_handle, status, about)
            now = time.monotonic()
            if now >= next_feedback:
                next_feedback = now + self.feedback_period_s
                goal_handle.publish_feedback(RunCapability.Feedback(state=status.state.lower(),
                                                                    detail=status.detail or f"sim: {request.cap}"))
            self._stopping.wait(_POLL_S)

    def _finish(self, goal_handle, status: CallStatus, about: dict) -> RunCapability.Result:
        if status.state == "SUCCEEDED":
            goal_handle.succeed()
        elif status.state == "CANCELED" and goal_handle.is_cancel_requested:
            goal_handle.canceled()
        else:
            goal_handle.abort()
        try:
            output_json = "" if status.output is None else json.dumps(status.output)
        except (TypeError, ValueError):
            output_json = json.dumps(repr(status.output))
        self.report(_EVENT_OF_STATE[status.state], event=status.event, error=status.error, **about)
        return RunCapability.Result(success=status.state == "SUCCEEDED", event=status.event or "",
                                    output_json=output_json, error=status.error or "")

    # --- stopping ------------------------------------------------------------------

    def stop(self, timeout_s: float = 2.0, grace_s: float = CLIENT_CANCEL_GRACE_S) -> bool:
        """Give the clients up to ``grace_s`` to cancel their running goals, then abort the rest (their
        clients get a result) and wait up to ``timeout_s`` for them to end.

        Ctrl-C under ``ros2 launch`` stops the robot and the bt_exec node at once; the node cancels its
        goals as it stops, and its plans must end ``cancelled``, not ``failed`` by an abort of ours that
        happened to come first."""
        self.report("stopping", goals=len(self.running_goals()), grace_s=grace_s)
        grace_over = time.monotonic() + grace_s
        while self.running_goals() and time.monotonic() < grace_over:
            time.sleep(0.01)
        self._stopping.set()
        deadline = time.monotonic() + timeout_s
        had_goals = bool(self.running_goals())
        while self.running_goals() and time.monotonic() < deadline:
            time.sleep(0.01)
        if had_goals:  # their results are sent right after the execute callbacks return
            time.sleep(0.05)
        return not self.running_goals()

    def destroy_node(self) -> None:
        for server in self._action_servers:
            server.destroy()
        self._action_servers = []
        for service in self._pause_services:
            self.destroy_service(service)
        self._pause_services = []
        self._pause_services = []
        super().destroy_node()


def _about(request, server: str) -> dict:
    return {"server": server, "plan_id": request.plan_id, "op_id": request.op_id, "cap": request.cap}


def run_sim_robot(argv: list[str] | None = None) -> int:
    """Run the sim robot until SIGINT/SIGTERM; ``argv`` goes to rclpy (``--ros-args ...``). Returns the exit code."""
    argv = list(sys.argv[1:] if argv is None else argv)
    stop = threading.Event()
    previous = {}
    if threading.current_thread() is threading.main_thread():
        for signum in (signal.SIGINT, signal.SIGTERM):
            previous[signum] = signal.signal(signum, lambda *_: stop.set())
    context = Context()
    spinning = threading.Event()
    node = executor = spinner = None
    try:
        try:
            rclpy.init(args=[NODE_NAME, *argv], context=context, signal_handler_options=SignalHandlerOptions.NO)
            node = SimRobotNode(context=context)
        except (ConfigError, ValueError) as exc:
            print(f"sim-robot: {exc}", file=sys.stderr)
            return 2
        except Exception as exc:  # bad --ros-args, a parameter of the wrong type
            print(f"sim-robot: {type(exc).__name__}: {exc}", file=sys.stderr)
            return 2
        executor = MultiThreadedExecutor(num_threads=_EXECUTOR_THREADS, context=context)
        executor.add_node(node)
        spinning.set()
        spinner = threading.Thread(target=_spin, args=(executor, node, spinning), name="sim_robot-spin", daemon=True)
        spinner.start()
        node.report("ready", node=node.get_fully_qualified_name(), servers=sorted(node.servers.values()))
        while not stop.wait(0.2):
            if not spinner.is_alive():
                print("sim-robot: the executor stopped unexpectedly", file=sys.stderr)
                return 1
        node.stop()  # running goals end (aborted) while the executor still spins, so their results go out
        node.report("stopped")
        return 0
    finally:
        # The order matters (a process that exits while an executor thread spins can abort): stop
        # spinning, shut the executor down, destroy the node, and only then the context.
        spinning.clear()
        if spinner is not None:
            spinner.join(timeout=5)
        if executor is not None:
            executor.shutdown()
        if node is not None:
            node.destroy_node()
        context.try_shutdown()
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _spin(executor, node, spinning: threading.Event) -> None:
    """Spin until told to stop; a callback's exception is logged, never the end of the robot."""
    while spinning.is_set() and executor.context.ok():
        try:
            executor.spin_once(timeout_sec=0.1)
        except Exception as exc:
            node.get_logger().error(f"callback raised {type(exc).__name__}: {exc}")


if __name__ == "__main__":
    sys.exit(run_sim_robot())
