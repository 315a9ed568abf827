"""The ``bt_exec`` ROS 2 node: services, topics and parameters over ``bt_exec.Executor``.

A thin layer: every typed service is a codec over ``bt_exec.control``, the one control surface of every
door: the pure conversions in ``convert`` read its request as an operation and its arguments, the
dispatcher runs it (``ControlCalls.call``, with ``door="ros"``), and its answer or typed refusal
(``control.error_answer``) fills the response. The executor ticks in its own loop (``Executor.start()``),
never in an rclpy timer. See docs/ros.md for the API.

Services (all in one reentrant callback group; the process spins them in a SingleThreadedExecutor):
``~/submit``, ``~/stop_at``, ``~/disarm``, ``~/pause``, ``~/resume``, ``~/step``, ``~/cancel``,
``~/get_status``, ``~/list_plans``, and ``~/control`` (any operation of the control API by name, as the
web app answers it: ``control_service``). Whatever they arm, disarm, pause or resume is done with
``source="ros"``, so the executor's events name this door.
Submit and cancel are ``async``: submit validates and compiles in the callback
(a large text, or one that may wait, in a small worker pool), a cancel that waits
runs in a pool of its own, awaited on an rclpy Future, so neither holds an executor
thread while it waits.

Topics: ``~/plan`` (each accepted graph's text, published from the tick thread
as the plan starts: before its first tick), ``~/status`` (one JSON event per
message, from an outbox thread), ``~/tree`` (op states of the running plans,
on change, at most 10 Hz).

Web app (``web_port`` > 0): ``bt_exec.web``'s operator console, JSON API and
event stream over the same executor, served by threads of its own; bound as
the node is made (a taken port or a missing token stops the start), served
from ``start()``, closed first in ``close()``.

Groot2 (``groot2_port`` > 0): ``bt_exec.groot2``'s publisher serves the newest plan to Groot2's monitor from a
thread of its own, bound and serving as the node is made (a taken port, or no pyzmq, stops the start), closed
once the executor is in ``close()``.
"""
from __future__ import annotations

import collections
import concurrent.futures
import functools
import gc
import logging
import os
import signal
import sys
import threading
import time

import rclpy
from bt_exec_interfaces.srv import Cancel, Disarm, GetStatus, ListPlans, PlanControl, StopAt, Submit
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.duration import Duration
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import SingleThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from std_msgs.msg import String

from .. import CapabilityCatalog, Executor, JsonlJournal, Limits, Scene, SimBackend, SkillCatalog
from ..control import ControlCalls, error_answer, expected_wait_s
from ..errors import Busy, ConfigError, ControlError, Conflict
from . import convert, params, tree_watcher
from .awaiting import offload
from .control_service import ControlService
from .outbox import Outbox
from .process import SpinThread, release, stop_on_signals

log = logging.getLogger(__name__)

NODE_NAME = "bt_exec"
PLAN_QOS = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                      durability=DurabilityPolicy.TRANSIENT_LOCAL)
STATUS_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)
TREE_QOS = PLAN_QOS  # a late viewer gets the latest snapshot
# Services keep 100 requests (rclpy's default is 10): a burst from many clients, or many waiting cancels
# sent at once, is queued rather than dropped before the executor takes it.
SERVICE_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
TREE_PERIOD_S = 0.1      # ~/tree: at most 10 Hz
DROP_REPORT_PERIOD_S = 1.0
STATUS_QUEUE = params.STATUS_QUEUE  # default of status_queue: events waiting for the ~/status publisher
REMEMBER_RUN_IDS = 10_000  # as many as the executor remembers answers for
SUBMIT_WORKERS = 2
# A submit up to this many characters is validated and compiled in the service callback (a few ms for 256 ops): handing
# it to a worker and back costs two more thread switches, each a wait for the GIL while the tick thread runs.
INLINE_SUBMIT_CHARS = 64 * 1024
# A plan accepted over ~/submit is held (Executor.submit's hold_start_s) until the submit's answer has been sent, or
# this long: started beside the answer, the two shared one GIL and the answer waited for most of the plan's start.
ANSWER_FIRST_S = 0.02
SHUTDOWN_CANCEL_MS = 2000  # of shutdown_timeout_s, the most spent waiting for plans to finish
LAST_EVENTS_S = 1.0        # of shutdown_timeout_s, what is kept for the last events to reach the subscribers
ACK_SLICE_S = 0.05         # the longest one wait for those acknowledgements holds the interpreter
FORCED_EXIT = 1            # the teardown outlived shutdown_timeout_s
CLOSE_MARGIN_S = 1.0       # beyond shutdown_timeout_s, for the parts of the stop the bound does not cover
TREE_EVENTS = frozenset(("plan_started", "node_state", "step_transition", "plan_complete", "stop_point", "paused",
                         "resumed", "pause_point"))
SHUTDOWN_REASON = "executor closed"  # the reason Executor.close gives: what the node does next
SOURCE = "ros"  # the door named by the events of what the services arm, disarm, pause and resume

def _ms_left(deadline: float) -> int:
    return max(0, int((deadline - time.monotonic()) * 1000))


class ExecutorNode(Node):
    """The ``bt_exec`` node. Call ``start()`` once it is added to an rclpy executor, ``close()`` to stop.

    ``executor``: host this bt_exec Executor instead of building one from the
    parameters (embedding and tests); its tick loop is started by ``start()``
    unless ``start(tick=False)``.
    """

    def __init__(self, executor: Executor | None = None, *, node_name: str = NODE_NAME, **node_options):
        super().__init__(node_name, **node_options)
        self._backend = None
        self.web = None
        self.groot2 = None
        self.watcher = None
        try:
            self.settings = self._declare_parameters()
            self.bt = executor if executor is not None else self._make_executor()
            self.web = self._make_web()
            self.groot2 = self._make_groot2()
        except BaseException:
            if self.web is not None:
                self.web.close()
            self.destroy_node()
            raise
        self._group = ReentrantCallbackGroup()
        # A plan submitted here is held until ~/submit's answer has been sent (_start_after_answer releases it).
        self._calls = ControlCalls(self.bt, hold_start_s=ANSWER_FIRST_S)
        self._pool = concurrent.futures.ThreadPoolExecutor(SUBMIT_WORKERS, thread_name_prefix="bt_exec-submit")
        # A waiting cancel holds one of these threads: one for each plan there may be and one for a cancel of
        # all, so a cancel is never queued behind the waits of others (only behind a cancel of the same plans).
        self._cancel_pool = concurrent.futures.ThreadPoolExecutor(self.bt.max_plans + 1,
                                                                  thread_name_prefix="bt_exec-cancel")
        self._plan_lock = threading.Lock()
        self._plan_texts: collections.OrderedDict[str, str] = collections.OrderedDict()  # run_id -> text to publish
        self._run_ids_seen: collections.OrderedDict[str, None] = collections.OrderedDict()
        self._in_flight = 0  # async service callbacks running (submit, cancel)
        self._in_flight_lock = threading.Lock()
        self._tree_dirty = threading.Event()
        self._tree_dirty.set()  # publish an empty snapshot at once: a viewer learns there are no plans
        self._tree_sent_at = 0.0
        self._dropped_reported = 0
        self._dropped_reported_at = 0.0
        self._closed = False
        self._started = False

        self.plan_publisher = self.create_publisher(String, "~/plan", PLAN_QOS)
        self.status_publisher = self.create_publisher(String, "~/status", STATUS_QOS)
        self.tree_publisher = self.create_publisher(String, "~/tree", TREE_QOS)
        # The typed services: (type, name, request -> (operation, args), (status, answer) -> response, whether an
        # answer changes what ~/tree shows).
        codecs = ((StopAt, "~/stop_at", convert.msg_to_stop_at, convert.stop_at_to_msg, True),
                  (Disarm, "~/disarm", convert.msg_to_disarm, convert.disarm_to_msg, True),
                  *((PlanControl, f"~/{verb}", functools.partial(convert.msg_to_plan_control, f"{verb}_plan"),
                     functools.partial(convert.plan_control_to_msg, f"{verb}_plan"), True)
                    for verb in ("pause", "resume", "step")),
                  (ListPlans, "~/list_plans", convert.msg_to_plans_request, convert.plans_to_msg, False))
        for srv_type, name, to_call, to_msg, marks_tree in codecs:
            self.create_service(srv_type, name, self._codec(name, to_call, to_msg, marks_tree),
                                qos_profile=SERVICE_QOS, callback_group=self._group)
        for srv_type, name, callback in ((Submit, "~/submit", self._on_submit), (Cancel, "~/cancel", self._on_cancel),
                                         (GetStatus, "~/get_status", self._on_get_status)):
            self.create_service(srv_type, name, callback, qos_profile=SERVICE_QOS, callback_group=self._group)
        # A plan travels in args_json as JSON text in a JSON string: allow for its escaping.
        self._control = ControlService(self, self.bt, 2 * self.bt.limits.max_input_bytes, SERVICE_QOS, self._group)

        self._outbox = Outbox(self._publish_event, idle=self._on_idle, max_queued=self.settings["status_queue"],
                              idle_s=TREE_PERIOD_S / 2, name="bt_exec-status")
        self._journal = None
        journal_path = self.settings.get("journal_path")
        if journal_path:
            try:
                self._journal = JsonlJournal(journal_path)
            except OSError as exc:
                if self.web is not None:
                    self.web.close()
                if self.groot2 is not None:
                    self.groot2.close()
                self.destroy_node()
                raise ConfigError(f"journal_path: cannot write events to {journal_path}: "
                                  f"{exc.strerror or exc}") from None
        self._unsubscribes = [self.bt.subscribe(self._on_event)]
        if self._journal is not None:
            self._unsubscribes.append(self.bt.subscribe(self._journal))

        why_not = tree_watcher.available()
        if why_not is None:
            try:
                self.watcher = tree_watcher.TreeWatcherSeam(self, self.bt, linger_s=self.settings["tree_linger_s"])
            except Exception as exc:
                self.get_logger().warning(f"py-trees-tree-watcher support is off: {type(exc).__name__}: {exc}")
        else:  # once, as the node starts; everything else is served as usual
            self.get_logger().info(f"py-trees-tree-watcher support is off: {why_not}; install py_trees_ros "
                                   "(ros-jazzy-py-trees-ros) to watch the plans' trees")

    # --- set-up -----------------------------------------------------------------

    def _declare_parameters(self) -> dict:
        values = {}
        for param in params.PARAMETERS:
            descriptor = ParameterDescriptor(name=param.name, description=param.description,
                                             additional_constraints=param.constraints, read_only=True)
            try:
                values[param.name] = self.declare_parameter(param.name, param.default, descriptor).value
            except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
                kind = {float: "a floating point number (e.g. 5.0)", int: "an integer",
                        str: "a string"}[type(param.default)]
                raise ConfigError(f"parameter {param.name} must be {kind}: {convert.one_line(exc)}") from None
        # What -p and --params-file gave this node (rclpy keeps it only as the node's private overrides).
        unknown = params.unknown(set(self._parameter_overrides) - set(self._parameters))
        if unknown:
            raise ConfigError("unknown parameters: " + "; ".join(unknown) + " (ros2 param list: the parameters "
                              "bt_exec_node has; docs/ros.md)")
        problems = params.check(values)
        if problems:
            raise ConfigError("bad parameters: " + "; ".join(problems))
        return values

    def _make_executor(self) -> Executor:
        s = self.settings
        try:
            limits = Limits(max_input_bytes=s["max_input_bytes"], max_ops=s["max_ops"], max_depth=s["max_depth"],
                            max_graph_steps=s["max_graph_steps"], max_string_chars=s["max_string_chars"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        skill_catalog = SkillCatalog.named(s["skill_catalog"])
        scene = Scene.from_file(s["scene_file"]) if s["scene_file"] else None
        catalog = CapabilityCatalog.from_file(s["catalog"]) if s["catalog"] else None
        if s["backend"] == "sim":
            backend = SimBackend.in_scene(s["sim_script"] or None, skill_catalog, scene)
        elif s["backend"] == "moveit":
            backend = self._make_moveit_backend(skill_catalog, scene)
        elif s["backend"] == "physics":
            backend = self._make_physics_cell(skill_catalog, scene)
        else:
            if s["sim_script"]:
                self.get_logger().warning("sim_script is ignored with backend ros")
            try:
                from .action_backend import RosActionBackend
            except ImportError as exc:
                raise ConfigError(f"backend ros is not available: {exc}") from None
            backend = RosActionBackend(self, server_timeout_s=s["capability_server_timeout_s"])
        self._backend = backend
        return Executor(backend=backend, catalog=catalog, limits=limits, tick_rate_hz=s["tick_rate_hz"],
                        skill_catalog=skill_catalog, scene=scene, max_active_runs=s["max_active_runs"],
                        max_steps=s["max_steps"], op_timeout_s=s["op_timeout_s"] or None, max_plans=s["max_plans"],
                        call_guard=s["call_guard_file"] or None, node_catalog=s["node_catalog"] or None)

    def _make_moveit_backend(self, skill_catalog: SkillCatalog, scene: Scene | None):
        """The Grant skills on the arm (bt_exec.motion, docs/moveit.md); ConfigError when it cannot be had."""
        s = self.settings
        if scene is None:
            raise ConfigError("backend moveit needs scene_file: step graphs run in a scene (the cell's objects "
                              "and targets)")
        if s["sim_script"]:
            self.get_logger().warning("sim_script is ignored with backend moveit")
        from ..motion.cell import read_motion_config  # pure Python: the files are checked before MoveIt loads

        poses, limits = read_motion_config(s)
        try:
            from . import moveit_wiring
        except ImportError as exc:
            raise ConfigError("backend moveit needs MoveItPy and its messages (ros-jazzy-moveit-py, "
                              f"ros-jazzy-moveit-msgs, sensor_msgs): {exc}; see docs/moveit.md") from None
        return moveit_wiring.make_moveit_backend(self, s, skill_catalog, scene, poses=poses, limits=limits)

    def _make_physics_cell(self, skill_catalog: SkillCatalog, scene: Scene | None):
        """The Grant cell simulated in MuJoCo (bt_exec.motion.physics, docs/physics.md), its joints published on
        /joint_states; ConfigError when it cannot be had."""
        s = self.settings
        if s["sim_script"]:
            self.get_logger().warning("sim_script is ignored with backend physics: the physics decides outcomes")
        from .physics_wiring import JointStatePublisher, make_physics_cell, motion_limits

        cell = make_physics_cell(s, skill_catalog, scene, motion_limits(s))
        JointStatePublisher(self, s["joint_states_hz"], cell)  # its timer lives as long as the node
        return cell

    def _make_web(self):
        """The web app over this node's executor when ``web_port`` is set (bound, not yet serving), else None.

        ConfigError when it cannot be: bound beyond loopback without a token, or the port is taken.
        """
        s = self.settings
        if not s["web_port"]:
            return None
        from ..control import ControlApi
        from ..web.server import WebServer  # only when asked for: the node runs without it

        api = ControlApi(self.bt)
        try:
            return WebServer(api, host=s["web_host"], port=s["web_port"],
                             token=s["web_token"] or os.environ.get(params.WEB_TOKEN_ENV) or None)
        except BaseException:
            api.close()
            raise

    def _make_groot2(self):
        """The Groot2 publisher over this node's executor when ``groot2_port`` is set (serving), else None.

        ConfigError when it cannot be: pyzmq is not installed, or a port is taken."""
        s = self.settings
        if not s["groot2_port"]:
            return None
        try:
            from ..groot2.publisher import Groot2Error, Groot2Publisher  # only when asked for: it needs pyzmq
        except ImportError as exc:
            raise ConfigError(f"groot2_port: Groot2 needs pyzmq ({exc}); install it (pip install pyzmq, or "
                              "python3-zmq)") from None
        try:
            publisher = Groot2Publisher(self.bt, s["groot2_port"], host=s["groot2_host"]).start()
        except Groot2Error as exc:
            raise ConfigError(f"groot2_port: {exc}") from None
        self.get_logger().info(f"Groot2: connect to {s['groot2_host']}:{s['groot2_port']} "
                               f"(publisher on {s['groot2_port'] + 1})")
        return publisher

    def start(self, tick: bool = True) -> None:
        """Start publishing and (``tick``) the executor's tick loop. The node must be in an executor already."""
        if self._started:
            return
        self._started = True
        self._outbox.start()
        if tick:
            self.bt.start()
        s = self.settings
        if self.web is not None:
            self.web.start()
            token = "its token guards POSTs, /mcp and, beyond loopback, reads" if self.web.token else "no token"
            self.get_logger().info(f"web app: {self.web.url} ({token})")
        self.get_logger().info(f"ready: backend {s['backend']}, {s['tick_rate_hz']:g} Hz; services and topics "
                               f"under {self.get_fully_qualified_name()}/")

    def _await_status_acks(self, until: float) -> None:
        """Wait until ~/status's subscribers acknowledged its last events, or ``until`` (monotonic).

        rclpy's wait holds the interpreter for as long as it waits, so it is asked in short slices: between them
        the spin thread answers what is still asked of the node as it closes (a viewer closing its snapshot
        stream gives up after 0.5 s, and its answer came too late to send)."""
        while not self.status_publisher.wait_for_all_acked(Duration(nanoseconds=int(ACK_SLICE_S * 1e9))):
            if time.monotonic() >= until:
                return

    def close(self) -> None:
        """Cancel every plan, answer waiting cancels, let the backend's action goals be cancelled and answered,
        send the last events (``plan_complete`` of each plan, then ``node_shutdown``) and stop the threads, all
        within ``shutdown_timeout_s`` as far as each part allows. The node must still spin (ros backend)."""
        if self._closed:
            return
        self._closed = True
        deadline = time.monotonic() + self.settings["shutdown_timeout_s"]
        # Before anything else: a plan whose record is written from now on is ``cancelled``, whatever its
        # capability servers, shutting down too (Ctrl-C reaches every process of a launch), answer meanwhile.
        self.bt.request_cancel_all(SHUTDOWN_REASON)
        if self.web is not None:  # no plan comes in over HTTP while the others are cancelled
            try:
                self.web.close()
            except Exception as exc:
                self.get_logger().error(f"closing the web app: {type(exc).__name__}: {exc}")
        try:
            self.bt.close(wait_ms=min(SHUTDOWN_CANCEL_MS, _ms_left(deadline)))
        except Exception as exc:
            self.get_logger().error(f"closing the executor: {type(exc).__name__}: {exc}")
        if self.groot2 is not None:  # once the plans' last statuses are in
            self.groot2.close()
        for unsubscribe in self._unsubscribes:
            unsubscribe()
        answers_due = min(deadline, time.monotonic() + 1.0)  # let waiting service callbacks send their answers
        while self._in_flight and time.monotonic() < answers_due:
            time.sleep(0.01)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._cancel_pool.shutdown(wait=False, cancel_futures=True)
        self._control.close()
        close_backend = getattr(self._backend, "close", None)
        if close_backend is not None:  # before node_shutdown: that event says the robot was told to stop
            try:
                close_backend(wait_s=max(0.0, deadline - time.monotonic() - LAST_EVENTS_S))
            except Exception as exc:
                self.get_logger().warning(f"closing the backend: {type(exc).__name__}: {exc}")
        self._outbox.close(last={"event": "node_shutdown", "dropped": self._outbox.dropped, "time": time.time()},
                           timeout_s=max(0.1, min(2.0, deadline - time.monotonic())))
        if self._outbox.dropped:
            self.get_logger().warning(f"~/status dropped {self._outbox.dropped} events in all (queue full)")
        try:  # the process may end right after: let the subscribers have the last events first
            self._await_status_acks(min(time.monotonic() + LAST_EVENTS_S, deadline))
        except Exception as exc:
            self.get_logger().debug(f"~/status: last events not acknowledged: {exc}")
        if self._journal is not None:
            self._journal.close()
        if self.watcher is not None:
            self.watcher.close(timeout_s=max(0.1, min(1.0, deadline - time.monotonic())))

    def left_running(self) -> str:
        """What a forced exit leaves behind: the plans in flight and the action goals not yet ended on a server."""
        try:
            plans = [plan["plan_id"] for plan in self.bt.get_all_plans()["plans"]]
        except Exception as exc:
            plans = [f"unknown ({type(exc).__name__})"]
        in_flight = getattr(self._backend, "in_flight", None)
        goals = [f"{goal['cap']} (op {goal['op_id']}, goal {goal['goal_id'] or 'not accepted yet'}) on "
                 f"{goal['server']}" for goal in (in_flight() if in_flight is not None else [])]
        return (f"plans in flight: {', '.join(plans) or 'none'}; action goals not ended on their server: "
                f"{', '.join(goals) or 'none'}")

    # --- events (called in the executor's ticking thread) --------------------------

    def _on_event(self, event: dict) -> None:
        kind = event.get("event")
        if kind == "plan_started":
            self._publish_plan_text(event.get("run_id"))
        self._outbox.put(dict(event))
        if kind in TREE_EVENTS:
            self._mark_tree_changed()

    def _mark_tree_changed(self) -> None:
        """~/tree and the tree watcher's snapshot streams publish the tree anew (each at its own pace)."""
        self._tree_dirty.set()
        if self.watcher is not None:
            self.watcher.mark_changed()

    def _publish_plan_text(self, run_id: str | None) -> None:
        """``~/plan``: the graph text, once per run_id, as the plan starts (before its first tick)."""
        if run_id is None:
            return
        with self._plan_lock:
            text = self._plan_texts.pop(run_id, None)
        if text is not None:
            self.plan_publisher.publish(convert.text_to_msg(text, String()))

    # --- outbox thread ------------------------------------------------------------

    def _publish_event(self, event: dict) -> None:
        self.status_publisher.publish(convert.event_to_msg(event, String()))

    def _on_idle(self) -> None:
        now = time.monotonic()
        dropped = self._outbox.dropped
        if dropped > self._dropped_reported and now - self._dropped_reported_at >= DROP_REPORT_PERIOD_S:
            self.get_logger().warning(f"~/status: {dropped - self._dropped_reported} events dropped "
                                      f"({dropped} in all): the publisher queue was full")
            self._dropped_reported, self._dropped_reported_at = dropped, now
            self._publish_event({"event": "status_dropped", "dropped": dropped, "time": time.time()})
        if self._tree_dirty.is_set() and now - self._tree_sent_at >= TREE_PERIOD_S:
            self._tree_dirty.clear()
            self._tree_sent_at = now
            self.tree_publisher.publish(convert.snapshot_to_msg(self.tree_snapshot(), String()))

    def tree_snapshot(self) -> dict:
        plans = []
        for plan in self.bt.get_all_plans()["plans"]:
            try:
                plans.append(self.bt.get_plan_status(plan["plan_id"]))
            except ControlError:
                pass  # it finished meanwhile; its plan_complete marks the tree changed again
        return {"time": time.time(), "plans": plans}

    # --- services -----------------------------------------------------------------

    def _answer(self, name: str, args: dict) -> tuple[int, dict]:
        """Operation ``name`` run by the control dispatcher for this door: ``(200, its answer)``, or the status and
        ``{"error": {code, message}}`` of its refusal (``control.error_answer``, which logs a bug)."""
        try:
            return convert.OK, self._calls.call(name, args, SOURCE)
        except Exception as exc:
            return error_answer(exc, f"{name} over ROS")

    async def _answer_off_thread(self, pool, name: str, args: dict) -> tuple[int, dict]:
        """``_answer`` in a thread of ``pool``, awaited on an rclpy Future (no executor thread is held)."""
        try:
            waiting = offload(pool, self.executor, self._answer, name, args)
        except RuntimeError:  # the pool was shut down: the node is stopping
            return error_answer(Busy("the node is stopping", code="stopping"))
        return await waiting

    def _codec(self, service: str, to_call, to_msg, marks_tree: bool):
        """The callback of a typed service that never waits: the request as a call (``to_call``), answered here,
        the answer as the response (``to_msg``)."""
        def on_request(request, response):
            try:
                status, answer = self._answer(*to_call(request))
                if marks_tree and status == convert.OK:
                    self._mark_tree_changed()
                return to_msg(status, answer, response)
            except Exception as exc:  # a conversion's bug: the caller hears it and the service lives on
                return to_msg(*error_answer(exc, service), response)

        return on_request

    async def _on_submit(self, request, response):
        run_id = request.run_id
        with self._in_flight_lock:
            self._in_flight += 1
        try:
            submission = convert.msg_to_submission(request, self.bt.limits.max_input_bytes)
            run_id = submission.run_id
            with self._plan_lock:
                fresh = run_id not in self._run_ids_seen
                if fresh:
                    self._run_ids_seen[run_id] = None
                    while len(self._run_ids_seen) > REMEMBER_RUN_IDS:
                        self._run_ids_seen.popitem(last=False)
                    self._plan_texts[run_id] = submission.text
                    while len(self._plan_texts) > REMEMBER_RUN_IDS:
                        self._plan_texts.popitem(last=False)
            if submission.refusal is not None:
                status, answer = error_answer(submission.refusal)
            elif len(submission.source) <= INLINE_SUBMIT_CHARS and '"wait_ms"' not in submission.source:
                status, answer = self._answer("submit_plan", submission.args)
            else:  # a large plan, or a meta op that may wait: off the executor's threads
                status, answer = await self._answer_off_thread(self._pool, "submit_plan", submission.args)
            if status == convert.OK and answer.get("accepted") and answer.get("plan_id"):
                self._start_after_answer(answer["plan_id"])
            elif fresh:
                with self._plan_lock:
                    self._plan_texts.pop(run_id, None)  # a refusal or a meta op: nothing is published
            return convert.answer_to_submit_msg(status, answer, response, run_id)
        except Exception as exc:  # never a dead service
            return convert.answer_to_submit_msg(*error_answer(exc, "~/submit"), response, run_id)
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1

    def _start_after_answer(self, plan_id: str) -> None:
        """Release the held start of ``plan_id`` once this ~/submit callback's answer has been sent.

        The release is a task of the rclpy executor that runs this callback. rclpy sends a service's answer in
        the callback's own task, right after the callback returns; a SingleThreadedExecutor (the process's)
        runs the next task only after that one: so the plan's first tick comes after the answer. Not spinning
        (a callback called by hand), the hold runs out by itself after ANSWER_FIRST_S."""
        ros_executor = self.executor
        if ros_executor is not None:
            ros_executor.create_task(self.bt.release_start, plan_id)

    async def _on_cancel(self, request, response):
        with self._in_flight_lock:
            self._in_flight += 1
        try:
            name, args = convert.msg_to_cancel(request)
            if expected_wait_s(name, args, self.bt.limits) > 0:
                status, answer = await self._answer_off_thread(self._cancel_pool, name, args)
            else:
                status, answer = self._answer(name, args)
            return convert.cancel_to_msg(status, answer, response)
        except Exception as exc:  # never a dead service
            return convert.cancel_to_msg(*error_answer(exc, "~/cancel"), response)
        finally:
            with self._in_flight_lock:
                self._in_flight -= 1

    def _on_get_status(self, request, response):
        """The plan's live status; for a plan no longer running (``get_plan_status`` refuses it as a Conflict), its
        final record; or its feedback."""
        try:
            name, args = convert.msg_to_status_request(request)
            status, answer = self._answer(name, args)
            if name == "get_plan_status" and status != convert.OK and answer["error"]["code"] == Conflict.code:
                status, answer = self._answer("get_plan_result", args)
            return convert.status_to_msg(status, answer, response)
        except Exception as exc:  # never a dead service
            return convert.status_to_msg(*error_answer(exc, "~/get_status"), response)


# --- process --------------------------------------------------------------------

def _close_within_bound(node: ExecutorNode, force_exit) -> None:
    """``node.close()`` in a thread of its own; past ``shutdown_timeout_s`` (and a margin), a forced exit."""
    def close() -> None:
        try:
            node.close()
        except Exception as exc:
            node.get_logger().error(f"closing the node: {type(exc).__name__}: {exc}")

    closer = threading.Thread(target=close, name="bt_exec-close", daemon=True)
    closer.start()
    bound = node.settings["shutdown_timeout_s"]
    closer.join(bound + CLOSE_MARGIN_S)
    if closer.is_alive():
        force_exit(FORCED_EXIT, f"the clean stop took more than shutdown_timeout_s ({bound:g} s)")


def main(argv: list[str] | None = None, prog: str = "bt_exec_node") -> int:
    """Run the node until SIGINT or SIGTERM; exit 0 after a clean stop, 2 on bad arguments or parameters.

    ``argv`` is a full command line (program name first) whose ``--ros-args ...`` go to rclpy.
    Signals are handled here, not by rclpy (which can miss a SIGTERM while spinning):
    the main thread only waits, so it acts on a signal at once. The first SIGINT or SIGTERM starts the
    clean stop (``ExecutorNode.close``); another within process.SIGNAL_GRACE_S is the same request (``ros2 launch``
    forwards the terminal's Ctrl-C as a second SIGINT). Only a signal after that, or a clean stop past
    ``shutdown_timeout_s``, ends the process at once (128 + the signal, or FORCED_EXIT), saying on stderr
    what was left running.
    """
    argv = list(sys.argv if argv is None else argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format=f"{prog}: %(levelname)s: %(message)s")

    def fail(message: str, code: int) -> int:
        print(f"{prog}: {convert.one_line(message)}", file=sys.stderr)
        return code

    stop = threading.Event()
    started: list[ExecutorNode] = []

    def force_exit(code: int, why: str) -> None:
        left = ["the node had not started"]
        if started:  # asked in a thread of its own: a stuck teardown may hold what it needs
            left = []
            reporter = threading.Thread(target=lambda: left.append(started[0].left_running()), daemon=True)
            reporter.start()
            reporter.join(0.5)
        print(f"{prog}: forced exit: {why}; {left[0] if left else 'what was left running is unknown (busy)'}",
              file=sys.stderr, flush=True)
        os._exit(code)

    stop_on_signals(stop, lambda signum, after_s: force_exit(
        128 + signum, f"{signal.Signals(signum).name} {after_s:.1f} s after the first stop signal"))
    try:
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as exc:
        return fail(f"bad ROS arguments: {exc}", 2)
    node = ros_executor = spin_thread = None
    code = 0
    try:
        extra = remove_ros_args(argv)[1:]
        if extra:
            return fail(f"unexpected arguments {' '.join(extra)!r}: pass ROS options after --ros-args "
                        "(-p NAME:=VALUE, -r FROM:=TO, --params-file FILE, --log-level LEVEL)", 2)
        if stop.is_set():  # stopped while starting
            return code
        try:
            node = ExecutorNode()
        except (ConfigError, ValueError) as exc:
            return fail(f"cannot start: {exc}", 2)
        started.append(node)
        # One thread: a callback runs where the request was taken, with no hand-over to a worker thread and no
        # wait set rebuilt beside it (about 0.4 ms of a submit's answer). So no callback may block: one that waits
        # (a cancel's wait_ms, a large submit) awaits a Future (``_answer_off_thread``); a blocking one
        # would stall every service, and the action backend's goal answers, for as long as it waits. One thread
        # also orders a submitted plan's start after its answer (``_start_after_answer``).
        ros_executor = SingleThreadedExecutor()
        ros_executor.add_node(node)
        if node.watcher is not None and node.watcher.own_node is not None:
            ros_executor.add_node(node.watcher.own_node)
        spin_thread = SpinThread(ros_executor, "bt_exec-ros")
        spin_thread.start()
        node.start()
        # What is loaded by now lives as long as the process: out of the collector's sight, a full collection
        # (which a large plan's objects can trigger) no longer walks it.
        gc.freeze()
        while not stop.wait(0.2):
            if not rclpy.ok():  # the context was shut down from elsewhere
                break
        return code
    except Exception as exc:
        return fail(f"internal error: {type(exc).__name__}: {exc}", 3)
    finally:
        release(node, lambda: _close_within_bound(node, force_exit), ros_executor, spin_thread)

if __name__ == "__main__":
    sys.exit(main())
