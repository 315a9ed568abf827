"""bt_exec as the KUKA iiwa cell's graph executor: node ``iiwa_llm_plan_executor`` under the cell's names.

Services: ``~/submit`` and ``~/cancel`` (``webots_ros2_msgs/srv/SetString``), ``~/get_status``
(``iiwa_msgs/srv/GetRunStatus``). Topics: ``~/plan`` (the accepted envelope exactly as submitted,
transient local, depth 1, published before the run's first motion), ``~/status`` (every event and
the final result, one JSON object per message, each with its run id). The scene comes from the
cell's ``iiwa_scene_context`` (topic, and its ``get_scene`` service at start); submits wait for the
cell's ``scene_ready`` and ``ready_delay_s`` (docs/iiwa.md).

The cell's interface packages are imported when the node is made: where one is missing, ``main``
exits 2 naming it. The executor is made when the first scene arrives (the backend works in it).
Admission (readiness, one run, the check, ``~/plan``, the submit) and scene changes are serialised
by one lock that the executor's tick thread never takes.
"""
from __future__ import annotations

import collections
import logging
import os
import sys
import threading
import time

import rclpy
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.exceptions import InvalidParameterTypeException, InvalidParameterValueException
from rclpy.executors import MultiThreadedExecutor
from rclpy.node import Node
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from rclpy.utilities import remove_ros_args
from std_msgs.msg import Bool, String
from std_srvs.srv import Trigger

from ... import Executor, Limits, SimBackend, SkillCatalog
from ...compilers.symbolic import World
from ...errors import BtExecError, ConfigError, ControlError, PlanError
from ..outbox import Outbox
from ..params import Param
from ..process import SpinThread, release, stop_on_signals
from . import convert, params
from .gate import ReadinessGate

log = logging.getLogger(__name__)

LATCHED = QoSProfile(depth=1, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                     durability=DurabilityPolicy.TRANSIENT_LOCAL)
STATUS_QOS = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                        durability=DurabilityPolicy.VOLATILE)
SERVICE_QOS = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                         durability=DurabilityPolicy.VOLATILE)
GATE_PERIOD_S = 0.1       # readiness, staleness and the scene hand-over are looked at this often (node clock)
REMEMBER_RUN_IDS = 1000   # answers kept per run id (each small: see _kept)
KEPT_ISSUES = 20
SHUTDOWN_CANCEL_MS = 2000
TRANSIENT_VERDICTS = ("not_ready", "busy")  # not remembered: the same run id may be admitted later
CLIENT_CANCEL = "cancelled by the client (~/cancel)"


def cell_interfaces():
    """The cell's service types (SetString, GetRunStatus); ConfigError naming a package that is missing."""
    try:
        from webots_ros2_msgs.srv import SetString
    except ImportError as exc:
        raise ConfigError(_missing("webots_ros2_msgs", "SetString.srv", exc)) from None
    try:
        from iiwa_msgs.srv import GetRunStatus
    except ImportError as exc:
        raise ConfigError(_missing("iiwa_msgs", "GetRunStatus.srv", exc)) from None
    return SetString, GetRunStatus


def _missing(package: str, srv: str, exc: ImportError) -> str:
    return (f"the iiwa contract needs the cell's interface package {package} (with srv/{srv}): build it in the "
            f"cell's workspace and source its install ({type(exc).__name__}: {exc})")


class IiwaExecutorNode(Node):
    """The cell's ``iiwa_llm_plan_executor``. Add it to a multi-threaded executor, then ``start()``; ``close()``."""

    def __init__(self, *, node_name: str = params.NODE_NAME, **node_options):
        super().__init__(node_name, **node_options)
        try:
            set_string, get_run_status = cell_interfaces()
            self.settings = self._declare_parameters()
            self._skill_catalog = SkillCatalog.named(self.settings["skill_catalog"])
            self._make_backend = self._backend_maker()
        except BaseException:
            self.destroy_node()
            raise
        s = self.settings
        self.bt: Executor | None = None  # made when the first scene arrives
        self._backend = None
        self._gate = ReadinessGate(s["ready_delay_s"], s["scene_max_age_s"])
        self._admit_lock = threading.Lock()   # admission and scene changes; never taken in the tick thread
        self._runs_lock = threading.Lock()    # the tables below; taken briefly, also in the tick thread
        self._answers: collections.OrderedDict[str, dict] = collections.OrderedDict()  # run id -> kept answer
        self._run_of_plan: dict[str, str] = {}
        self._stopping: set[str] = set()      # plans asked to stop because the cell is not ready
        self._newest = None                   # the newest scene envelope received
        self._cell_refused = None             # the newest envelope, when the simulated cell could not take it
        self._ready_said: bool | None = None
        self._started_at = self._now()
        self._get_scene_pending = False
        self._closed = False
        self._group = ReentrantCallbackGroup()

        self.plan_publisher = self.create_publisher(String, "~/plan", LATCHED)
        self.status_publisher = self.create_publisher(String, "~/status", STATUS_QOS)
        self._outbox = Outbox(self._publish_status, max_queued=s["status_queue"], name="iiwa-status")
        self.create_service(set_string, "~/submit", self._on_submit, qos_profile=SERVICE_QOS,
                            callback_group=self._group)
        self.create_service(set_string, "~/cancel", self._on_cancel, qos_profile=SERVICE_QOS,
                            callback_group=self._group)
        self.create_service(get_run_status, "~/get_status", self._on_get_status, qos_profile=SERVICE_QOS,
                            callback_group=self._group)
        self.create_subscription(String, s["scene_topic"], self._on_scene, LATCHED, callback_group=self._group)
        ready_qos = LATCHED if s["scene_ready_durability"] == "transient_local" else \
            QoSProfile(depth=1, reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(Bool, s["scene_ready_topic"], self._on_scene_ready, ready_qos,
                                 callback_group=self._group)
        self._get_scene = self.create_client(Trigger, s["scene_service"], callback_group=self._group)
        self._timer = None

    # --- set-up -----------------------------------------------------------------

    def _declare_parameters(self) -> dict:
        values = {}
        for param in params.PARAMETERS:
            values[param.name] = self._declare(param)
        problems = params.check(values)
        if problems:
            raise ConfigError("bad parameters: " + "; ".join(problems))
        return values

    def _declare(self, param: Param):
        descriptor = ParameterDescriptor(name=param.name, description=param.description,
                                         additional_constraints=param.constraints, read_only=True)
        try:
            return self.declare_parameter(param.name, param.default, descriptor).value
        except (InvalidParameterTypeException, InvalidParameterValueException) as exc:
            kind = {float: "a floating point number (e.g. 5.0)", int: "an integer",
                    str: "a string"}[type(param.default)]
            raise ConfigError(f"parameter {param.name} must be {kind}: {' '.join(str(exc).split())}") from None

    def _backend_maker(self):
        """A function making the backend in the first scene. Its files and modules are checked now, so a bad
        sim script or a missing MoveItPy stops the start (exit 2), not the first scene."""
        s = self.settings
        if s["backend"] == "sim":
            sim = SimBackend(s["sim_script"] or None)

            def in_scene(scene):
                sim.world = World.from_scene(self._skill_catalog, scene)
                return sim
            return in_scene
        if s["backend"] == "physics":
            return self._physics_maker()
        if not s["cell_poses_file"]:
            raise ConfigError("backend moveit needs cell_poses_file (the cell's named poses; docs/moveit.md)")
        from ...motion.cell import read_motion_config  # pure Python: the files are checked before MoveIt loads

        poses, limits = read_motion_config(s)
        try:
            from .. import moveit_wiring
        except ImportError as exc:
            raise ConfigError("backend moveit needs MoveItPy and its messages (ros-jazzy-moveit-py, "
                              f"ros-jazzy-moveit-msgs, sensor_msgs): {exc}; see docs/moveit.md") from None
        return lambda scene: moveit_wiring.make_moveit_backend(self, s, self._skill_catalog, scene,
                                                               poses=poses, limits=limits)

    def _physics_maker(self):
        """The Grant cell simulated in MuJoCo, made in the first scene; its joints published on /joint_states from
        now on (once the cell is made). The extra and the limits file are checked now: the start fails, in one line."""
        from ...motion.physics import require_physics
        from ..physics_wiring import JointStatePublisher, make_physics_cell, motion_limits

        require_physics()
        s = self.settings
        limits = motion_limits(s)
        joint_states = JointStatePublisher(self, s["joint_states_hz"])

        def in_scene(scene):
            cell = make_physics_cell(s, self._skill_catalog, scene, limits)
            joint_states.cell = cell
            return cell
        return in_scene

    def start(self) -> None:
        """Start publishing and watching readiness. The node must be in an executor already."""
        if self._timer is not None:
            return
        self._outbox.start()
        self._timer = self.create_timer(GATE_PERIOD_S, self._on_gate_timer, callback_group=self._group)
        self.get_logger().info(f"ready to take the cell's scene on {self.settings['scene_topic']}; services and "
                               f"topics under {self.get_fully_qualified_name()}/")

    def close(self) -> None:
        """Stop every run, the executor and the status thread. The rclpy executor may still spin."""
        if self._closed:
            return
        self._closed = True
        if self._timer is not None:
            self.destroy_timer(self._timer)
        if self.bt is not None:
            try:
                self.bt.close(wait_ms=SHUTDOWN_CANCEL_MS)
            except Exception as exc:
                self.get_logger().error(f"closing the executor: {type(exc).__name__}: {exc}")
        self._outbox.close(last={"event": "node_shutdown", "run_id": None, "dropped": self._outbox.dropped,
                                 "time": time.time()})
        close_backend = getattr(self._backend, "close", None)
        if close_backend is not None:
            try:
                close_backend()
            except Exception as exc:
                self.get_logger().warning(f"closing the backend: {type(exc).__name__}: {exc}")

    # --- the scene and readiness ----------------------------------------------------

    def _now(self) -> float:
        return self.get_clock().now().nanoseconds / 1e9

    def _on_scene(self, msg) -> None:
        self._take_scene(msg.data, "scene_topic")

    def _take_scene(self, text: str, source: str) -> None:
        try:
            envelope = convert.text_to_scene_envelope(text, self.settings["max_input_bytes"],
                                                      self.settings["experiment_id"])
        except ConfigError as exc:
            self.get_logger().warning(f"{source}: {exc}")
            self._say({"event": "scene_refused", "run_id": None, "source": source, "reason": str(exc)})
            return
        try:
            with self._admit_lock:
                check_scene = getattr(self._backend, "check_scene", None)
                if check_scene is not None:  # a simulated cell refuses a scene it cannot be put in, at once
                    check_scene(envelope.scene)
                self._newest = envelope
                self._gate.scene_received(self._now())
                if self.bt is None:
                    self._backend = self._make_backend(envelope.scene)
                    self.bt = self._make_executor(envelope.scene)
                else:
                    self._hand_over_scene()
        except BtExecError as exc:
            self.get_logger().error(f"{source}: cannot run in this scene: {exc}")
            self._say({"event": "scene_refused", "run_id": None, "source": source, "reason": str(exc)})
            return
        self._say({"event": "scene", "run_id": self._active_run_id(), "source": source,
                   "scene_revision": envelope.revision, "experiment_id": envelope.experiment_id,
                   "state_version": envelope.state_version})

    def _make_executor(self, scene) -> Executor:
        s = self.settings
        try:
            limits = Limits(max_input_bytes=s["max_input_bytes"], max_graph_steps=s["max_graph_steps"],
                            max_string_chars=s["max_string_chars"])
        except ValueError as exc:
            raise ConfigError(str(exc)) from None
        executor = Executor(backend=self._backend, limits=limits, tick_rate_hz=s["tick_rate_hz"],
                            skill_catalog=self._skill_catalog, scene=scene, max_active_runs=1,
                            max_steps=s["max_steps"], op_timeout_s=s["op_timeout_s"] or None)
        executor.subscribe(self._on_event)
        executor.start()
        return executor

    def _hand_over_scene(self) -> None:
        """Make the newest envelope the executor's scene, unless a run holds the robot (then after it ends:
        the cell's scene, not the executor's own idea of what the run did, is the one graphs are planned on).
        Called with ``_admit_lock`` held."""
        newest = self._newest
        if (newest is None or self.bt is None or self.bt.scene is newest.scene or newest is self._cell_refused
                or self.bt.get_all_plans()["count"]):
            return
        set_cell_scene = getattr(self._backend, "set_scene", None)
        if set_cell_scene is not None:  # a simulated cell: its parts move to where the scene says, the arm at rest
            try:
                set_cell_scene(newest.scene)
            except ControlError:  # the arm still brakes from a cancelled call: handed over at the next look
                return
            except ConfigError as exc:
                self._cell_refused = newest
                self.get_logger().error(f"scene revision {newest.revision}: the cell cannot be put in it: {exc}")
                self._say({"event": "scene_refused", "run_id": None, "source": "cell", "reason": str(exc)})
                return
        try:
            self.bt.set_scene(newest.scene)
        except ControlError:  # a run took the robot meanwhile: the scene is handed over once it ended
            return
        if set_cell_scene is None:
            self._backend.world = World.from_scene(self._skill_catalog, newest.scene)

    def _on_scene_ready(self, msg) -> None:
        with self._admit_lock:
            self._gate.set_flag(msg.data, self._now())
        self._watch_readiness()

    def _on_gate_timer(self) -> None:
        try:
            if self.bt is not None:
                with self._admit_lock:
                    self._hand_over_scene()
            self._watch_readiness()
            self._ask_for_scene()
        except Exception as exc:  # a timer must keep running
            self.get_logger().error(f"readiness: {type(exc).__name__}: {exc}")

    def _watch_readiness(self) -> None:
        """Stop the active run when the cell is not ready any more; say every change of readiness."""
        now = self._now()
        with self._admit_lock:
            reason = self._gate.not_ready_reason(now)
            stop = self._gate.stop_reason(now)
            if stop is not None and self.bt is not None:
                for run in self.bt.request_cancel_all(stop):
                    with self._runs_lock:
                        first = run.plan_id not in self._stopping
                        self._stopping.add(run.plan_id)
                        run_id = self._run_of_plan.get(run.plan_id)
                    if first:
                        self.get_logger().warning(f"run {run_id}: stopped: {stop}")
                        self._say({"event": "run_stopping", "run_id": run_id, "reason": stop})
            ready = reason is None
            if ready != self._ready_said:
                self._ready_said = ready
                revision = self._newest.revision if self._newest is not None else None
                self._say({"event": "readiness", "run_id": self._active_run_id(), "ready": ready,
                           "reason": reason or "ready", "scene_revision": revision})

    def _ask_for_scene(self) -> None:
        """At start, while no envelope came on the topic: ask the cell's get_scene, if it is there."""
        if (self._newest is not None or self._get_scene_pending or self._closed
                or self._now() - self._started_at > self.settings["get_scene_wait_s"]
                or not self._get_scene.service_is_ready()):
            return
        self._get_scene_pending = True
        future = self._get_scene.call_async(Trigger.Request())
        future.add_done_callback(self._on_get_scene)

    def _on_get_scene(self, future) -> None:
        self._get_scene_pending = False
        try:
            text = convert.trigger_to_scene_text(future.result())
        except Exception as exc:
            self.get_logger().warning(f"scene_service: {type(exc).__name__}: {exc}")
            return
        if text is not None and self._newest is None:
            self._take_scene(text, "scene_service")

    # --- events (the executor's tick thread) -------------------------------------------

    def _on_event(self, event: dict) -> None:
        plan_id = event.get("plan_id")
        with self._runs_lock:
            run_id = self._run_of_plan.get(plan_id)
            if event.get("event") == "plan_complete":
                self._stopping.discard(plan_id)
        self._say(convert.event_with_run_id(event, run_id))

    def _say(self, message: dict) -> None:
        self._outbox.put({"time": time.time(), **message})

    def _publish_status(self, message: dict) -> None:
        self.status_publisher.publish(convert.status_to_msg(message, String()))

    def _active_run_id(self) -> str | None:
        if self.bt is None:
            return None
        plans = self.bt.get_all_plans()["plans"]
        if not plans:
            return None
        with self._runs_lock:
            return self._run_of_plan.get(plans[0]["plan_id"])

    # --- services -----------------------------------------------------------------

    def _on_submit(self, request, response):
        run_id = None
        try:
            try:
                submitted = convert.msg_to_submit(request, self.settings["max_input_bytes"])
            except PlanError as exc:
                issues = [issue.as_dict() for issue in exc.issues]
                self._say({"event": "submit", "run_id": None, "accepted": False, "verdict": "invalid",
                           "message": "; ".join(f"{i['path'] or '/'}: {i['message']}" for i in issues),
                           "issues": issues})
                return convert.success_to_msg(False, response)
            run_id = submitted.run_id
            with self._admit_lock:  # the same run id sent twice at once gets one answer
                with self._runs_lock:
                    answer = self._answers.get(run_id)
                repeated = answer is not None
                if not repeated:
                    answer = self._admit(submitted)
            self._say({"event": "submit", "run_id": run_id, "repeated": repeated, **answer})
            return convert.success_to_msg(answer["accepted"], response)
        except Exception as exc:
            self.get_logger().error(f"submit: {type(exc).__name__}: {exc}")
            self._say({"event": "submit", "run_id": run_id, "accepted": False, "verdict": "internal",
                       "message": f"internal error: {type(exc).__name__}: {exc}"})
            return convert.success_to_msg(False, response)

    def _admit(self, submitted: convert.SubmitValue) -> dict:
        """Readiness, one run at a time, the check, ``~/plan``, then the executor. ``_admit_lock`` held."""
        reason = self._gate.not_ready_reason(self._now())
        if reason is not None or self.bt is None:
            return {"accepted": False, "verdict": "not_ready", "message": f"not ready: {reason or 'no scene yet'}"}
        active = self._active_run_id()
        if active is not None:
            return {"accepted": False, "verdict": "busy",
                    "message": f"run {active!r} is active: one run at a time; wait for its end or cancel it"}
        self._hand_over_scene()
        # Checked first and published before the executor has it: its first tick may start the first motion.
        check = self.bt.validate_plan(submitted.text, "qwen3")
        if check["valid"]:
            self.plan_publisher.publish(convert.text_to_msg(submitted.text, String()))
        answer = self.bt.submit(submitted.text, run_id=submitted.run_id, dialect="qwen3")
        if answer.get("accepted"):
            with self._runs_lock:
                self._run_of_plan[answer["plan_id"]] = submitted.run_id
        elif check["valid"]:  # nothing else submits here, so this is a bug: say so where the plan was seen
            self.get_logger().error(f"run {submitted.run_id}: published on ~/plan, then refused: {answer['message']}")
        kept = _kept(answer)
        if kept["verdict"] not in TRANSIENT_VERDICTS:
            self._remember(submitted.run_id, kept)
        return kept

    def _remember(self, run_id: str, answer: dict) -> None:
        with self._runs_lock:
            self._answers[run_id] = answer
            while len(self._answers) > REMEMBER_RUN_IDS:
                _, old = self._answers.popitem(last=False)
                self._run_of_plan.pop(old.get("plan_id"), None)

    def _on_cancel(self, request, response):
        run_id = None
        try:
            run_id = convert.msg_to_run_id(request)
            with self._runs_lock:
                answer = self._answers.get(run_id)
            plan_id = answer.get("plan_id") if answer else None
            if plan_id is None:
                message, success = f"run {run_id!r} is not one this node accepted; nothing to cancel", False
            elif self.bt.request_cancel(plan_id, CLIENT_CANCEL) is None:
                message, success = f"run {run_id!r} already finished; nothing to cancel", False
            else:
                message, success = f"run {run_id!r}: stopping ({CLIENT_CANCEL})", True
        except ControlError as exc:
            message, success = str(exc), False
        except Exception as exc:
            self.get_logger().error(f"cancel: {type(exc).__name__}: {exc}")
            message, success = f"internal error: {type(exc).__name__}: {exc}", False
        self._say({"event": "cancel", "run_id": run_id, "success": success, "message": message})
        return convert.success_to_msg(success, response)

    def _on_get_status(self, request, response):
        run_id = convert.msg_to_status_run_id(request)
        try:
            with self._runs_lock:
                answer = self._answers.get(run_id)
            if answer is None:
                return convert.run_status_to_msg(None, response)
            plan_id = answer.get("plan_id")
            if plan_id is None:
                return convert.run_status_to_msg(convert.run_status(run_id, answer), response)
            try:
                status = convert.run_status(run_id, answer, live=self.bt.get_plan_status(plan_id))
            except ControlError:  # not running: finished
                try:
                    status = convert.run_status(run_id, answer, result=self.bt.get_plan_result(plan_id))
                except ControlError as exc:
                    status = {**convert.run_status(run_id, answer), "error": str(exc)}
            return convert.run_status_to_msg(status, response)
        except Exception as exc:
            self.get_logger().error(f"get_status: {type(exc).__name__}: {exc}")
            return convert.run_status_to_msg({"error": f"internal error: {type(exc).__name__}: {exc}"}, response)


def _kept(answer: dict) -> dict:
    """What is kept of a submit answer per run id: small, whatever the graph was."""
    return {"accepted": bool(answer.get("accepted")), "verdict": answer.get("verdict"),
            "message": answer.get("message"), "plan_id": answer.get("plan_id"),
            "issues": list(answer.get("issues") or [])[:KEPT_ISSUES]}


# --- process --------------------------------------------------------------------

def main(argv: list[str] | None = None, prog: str = "bt_exec_iiwa_node") -> int:
    """Run the node until SIGINT or SIGTERM: exit 0 after a clean stop, 2 on bad arguments or parameters or
    a missing interface package of the cell. ``argv`` is a full command line whose ``--ros-args`` go to rclpy."""
    argv = list(sys.argv if argv is None else argv)
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format=f"{prog}: %(levelname)s: %(message)s")

    def fail(message: str, code: int) -> int:
        print(f"{prog}: {' '.join(str(message).split())}", file=sys.stderr)
        return code

    stop = threading.Event()
    stop_on_signals(stop, lambda signum, _after_s: os._exit(128 + signum))

    try:
        rclpy.init(args=argv, signal_handler_options=SignalHandlerOptions.NO)
    except Exception as exc:
        return fail(f"bad ROS arguments: {exc}", 2)
    node = ros_executor = spin_thread = None
    try:
        extra = remove_ros_args(argv)[1:]
        if extra:
            return fail(f"unexpected arguments {' '.join(extra)!r}: pass ROS options after --ros-args", 2)
        try:
            node = IiwaExecutorNode()
        except (ConfigError, ValueError) as exc:
            return fail(f"cannot start: {exc}", 2)
        ros_executor = MultiThreadedExecutor(num_threads=max(4, os.cpu_count() or 1))
        ros_executor.add_node(node)
        spin_thread = SpinThread(ros_executor, "iiwa-ros")
        spin_thread.start()
        node.start()
        while not stop.wait(0.2):
            if not rclpy.ok():
                break
        return 0
    except Exception as exc:
        return fail(f"internal error: {type(exc).__name__}: {exc}", 3)
    finally:
        release(node, lambda: node.close(), ros_executor, spin_thread)


if __name__ == "__main__":
    sys.exit(main())
