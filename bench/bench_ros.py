"""bt_exec over ROS 2: submit round trip and ~/status event delivery, against a node in a process of its own.

Run from the repository root, inside the ROS 2 environment::

    bash scripts/setup-ros.sh && . build/ros/env.sh
    python bench/bench_ros.py            # full run (about 75 s on 2 cores)
    python bench/bench_ros.py --quick    # smoke run (about 20 s)

Without rclpy (or bt_exec_interfaces) it prints one line saying why it skips, the table with
every figure marked skipped (the reason in its note), and exits 0. The table is ``benchlib``'s,
as every bench script prints; the run's description and any notes follow it.

The node is ``python -m bt_exec.cli serve --ros-args -r __node:=bench_<random> -p tick_rate_hz:=...
-p sim_script:=<temp file>`` (the sim backend), started with a random ``ROS_DOMAIN_ID`` (1..100)
that this process uses as well. Two caps: ``bench.instant`` answers at once, ``bench.step`` takes
``STEP_S`` seconds. This process is the client, kept open for the whole run: a ``~/submit`` client (reliable, keep last
100, as the node's services) and a ``~/status`` subscription with the node's QoS (reliable, volatile,
keep last 1000), each on an rclpy node and context (DDS participant) of its own, spun by a
SingleThreadedExecutor in a thread of its own (an answer is not queued behind the events of its plan's
start).

Figures:

1. Submit round trip. A 256-op RTDL plan (a root sequence of 255 ``bench.instant`` do ops, about
   25 KB of JSON), submitted ``--repeats`` times, each with a distinct run_id. Timed from just
   before ``call_async`` to the response's done callback (in the client's spinning thread).
   Before each submit the previous plan has finished (its ``plan_complete`` came on ``~/status``),
   so every submit meets an idle node. The node starts the accepted plan once the answer has been
   sent (its 256 instant ops and 514 events then take the node's tick and outbox threads some
   20 ms), as a client of a real node sees it. For reference the same text goes, alternately, through
   ``bt_exec.Executor.submit`` in this process (a started Executor at the same tick rate, also
   waited on until the plan completes). Raw py_trees reference, in the same repeats: building
   the same shape as plain behaviours in this process (``raw_tree``: a ``BehaviourTree`` over a
   ``Sequence(memory=True)`` of 255 ``behaviours.Success``), which is what a py_trees program pays
   before its first tick: it has no transport, no text to parse and nothing to validate, so the
   ratio is the whole price of taking a plan as data (in process) and from another process
   (over ROS). The three are timed back to back in each repeat, in alternating order. Each timed
   section follows a ``gc.collect()`` in this process (GC stays enabled; the node's own GC is
   untouched). Ratios: ours / raw of the same statistic (p50, p99, max), and, for
   information, ROS p50 / in-process p50. Targets (reported, not gated): ROS p50 <= 5 ms, p99 <= 20 ms.
2. Event delivery. Plans of ``STEP_OPS`` ``bench.step`` do ops under a root sequence are submitted
   at a steady pace for ``--seconds`` seconds, so that the node emits ``--rate`` events per second
   (each plan emits plan_started, running + a final state for each of its ops, the root included,
   and plan_complete: 2 + 2 * ops events; ops last ``STEP_S``, so each plan's events spread over a
   few tenths of a second and several plans run at once). Every event received on ``~/status`` is
   matched to its plan; lost = events expected for our plans - distinct events received (by
   ``seq``). Gated: lost == 0. Also shown: the rate received while plans were being submitted
   (events that arrived between the first and the last submit / that time) and over the whole
   phase (events / (last - first arrival), which includes the last plans' tail), gaps in ``seq``
   over the phase, and the node's own drop count (its ``~/status`` outbox drops events when its
   queue is full and says so in ``status_dropped`` and, as it stops, in ``node_shutdown``).
   The events of figure 1's plans are checked the same way (information).

The node is always stopped: SIGTERM, then SIGKILL after 10 s (also on errors and Ctrl-C; on Linux
it also gets SIGTERM if this process dies). Exit 1 when a gated bar is missed or the node cannot be
started or driven (its figures then show ``error``, the reason in their note).
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import pathlib
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid

from benchlib import ERROR, FAIL, NO_RAW_ROS, PASS, SKIPPED, Figure, parse_args, report, skipped

REPO = pathlib.Path(__file__).resolve().parents[1]

STEP_S = 0.01          # duration of a bench.step call (sim)
STEP_OPS = 20          # do ops per plan in the event phase (21 ops with the root: 44 events)
SUBMIT_OPS = 256       # ops of figure 1's plan, the root included
# Figure 1's targets over loopback with a client kept open: reported, not gated (shared, noisy machines).
TARGET_P50_S = 0.005
TARGET_P99_S = 0.020
NODE_STOP_S = 10.0
READY_S = 30.0
SIM_SCRIPT = {"default": {"outcome": "success", "duration_s": 0.0},
              "caps": {"bench.instant": {"outcome": "success", "duration_s": 0.0},
                       "bench.step": {"outcome": "success", "duration_s": STEP_S}}}


def _ros_missing() -> str | None:
    for module in ("rclpy", "std_msgs.msg", "bt_exec_interfaces.srv"):
        try:
            __import__(module)
        except Exception as exc:  # ImportError, or a ROS install that fails as it loads
            return f"{module} cannot be imported ({type(exc).__name__}: {exc})"
    return None


# --- plans --------------------------------------------------------------------------

def plan_text(n_do: int, cap: str, description: str) -> str:
    children = [{"op": "do", "op_id": 0, "description": f"step {i}", "cap": cap, "args": {"step": i}}
                for i in range(1, n_do + 1)]
    return json.dumps({"content": None, "rtdl_description": description,
                       "rtdl": {"op": "sequence", "op_id": 0, "description": "in order", "children": children},
                       "task_update": None})


def raw_tree(op_count: int):
    """Raw py_trees' counterpart of accepting figure 1's plan: build the same shape as plain behaviours
    (a ``Sequence(memory=True)`` of ``op_count - 1`` ``behaviours.Success``) in a ``BehaviourTree``."""
    import py_trees

    root = py_trees.composites.Sequence("in order", memory=True)
    root.add_children([py_trees.behaviours.Success(f"step {i}") for i in range(1, op_count)])
    return py_trees.trees.BehaviourTree(root)


def events_of(op_count: int) -> int:
    """Events one plan of ``op_count`` ops (root included) emits when every op runs and ends."""
    return 2 + 2 * op_count


# --- the client ---------------------------------------------------------------------

class StatusLog:
    """Every ~/status message, parsed, with its arrival time; waits for a plan's plan_complete."""

    def __init__(self):
        self._cond = threading.Condition()
        self.by_plan: dict[str, dict[int, str]] = {}   # plan_id -> {seq: event kind}
        self.duplicates = 0
        self.arrivals: list[tuple[float, str | None]] = []  # (perf_counter, plan_id)
        self.completed: set[str] = set()
        self.dropped_reports: list[int] = []   # status_dropped totals
        self.shutdown_dropped: int | None = None
        self.other = 0

    def __call__(self, msg) -> None:
        now = time.perf_counter()
        try:
            event = json.loads(msg.data)
        except ValueError:
            event = {}
        kind = event.get("event")
        plan_id = event.get("plan_id")
        with self._cond:
            self.arrivals.append((now, plan_id))
            if kind == "status_dropped":
                self.dropped_reports.append(int(event.get("dropped", 0)))
            elif kind == "node_shutdown":
                self.shutdown_dropped = int(event.get("dropped", 0))
            elif plan_id is not None and "seq" in event:
                seqs = self.by_plan.setdefault(plan_id, {})
                if event["seq"] in seqs:
                    self.duplicates += 1
                seqs[event["seq"]] = kind
                if kind == "plan_complete":
                    self.completed.add(plan_id)
            else:
                self.other += 1
            self._cond.notify_all()

    def wait(self, predicate, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not predicate():
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._cond.wait(min(left, 0.1))
            return True

    def wait_complete(self, plan_ids, timeout: float, quiet_s: float = 5.0) -> bool:
        """Until every plan's plan_complete came, or ``timeout``, or nothing came for ``quiet_s``."""
        plan_ids = set(plan_ids)
        deadline = time.monotonic() + timeout
        while True:
            with self._cond:
                if plan_ids <= self.completed:
                    return True
                count = len(self.arrivals)
            if time.monotonic() > deadline:
                return False
            with self._cond:
                self._cond.wait(quiet_s)
                if len(self.arrivals) == count and not plan_ids <= self.completed:
                    return False  # quiet: whatever is missing is not coming

    def tally(self, expected: dict[str, int], window: tuple[float, float] | None = None) -> dict:
        """Lost events for the plans in ``expected`` (plan_id -> events it emits); seq gaps among them;
        arrival rates: over the whole span of their arrivals, and within ``window`` (perf_counter times)."""
        with self._cond:
            received = {plan_id: dict(self.by_plan.get(plan_id, {})) for plan_id in expected}
            times = [t for t, plan_id in self.arrivals if plan_id in expected]
        steady = 0.0
        if window is not None and window[1] > window[0]:
            steady = sum(1 for t in times if window[0] <= t <= window[1]) / (window[1] - window[0])
        got = sum(len(seqs) for seqs in received.values())
        want = sum(expected.values())
        seqs = sorted(seq for plan_seqs in received.values() for seq in plan_seqs)
        gaps = (seqs[-1] - seqs[0] + 1 - len(seqs)) if seqs else 0
        span = (times[-1] - times[0]) if len(times) > 1 else 0.0
        short = {plan_id: expected[plan_id] - len(s) for plan_id, s in received.items() if len(s) != expected[plan_id]}
        return {"expected": want, "received": got, "lost": want - got, "seq_gaps": gaps, "span_s": span,
                "rate": got / span if span else 0.0, "steady_rate": steady,
                "plans_short": short}


class Client:
    """A planner kept open: a ``~/submit`` client and a ``~/status`` subscription, each on a node, a context
    (a DDS participant, with receive buffers of its own) and a SingleThreadedExecutor of its own, spun in a
    thread of its own. So an answer neither waits in the same queue nor in the same receive buffers as the
    burst of events its plan's start sends at the same moment (514 for figure 1's plan)."""

    def __init__(self, node_name: str):
        import rclpy
        from bt_exec_interfaces.srv import Submit
        from rclpy.context import Context
        from rclpy.executors import SingleThreadedExecutor
        from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
        from std_msgs.msg import String

        self.Submit = Submit
        self.contexts, self.nodes, self.executors, self._threads = [], [], [], []
        try:
            for role in ("listener", "client"):
                context = Context()
                rclpy.init(context=context)
                self.contexts.append(context)
                self.nodes.append(rclpy.create_node(f"bench_{role}_{uuid.uuid4().hex[:8]}", context=context))
                executor = SingleThreadedExecutor(context=context)
                executor.add_node(self.nodes[-1])
                self.executors.append(executor)
            listener, caller = self.nodes
            requests = QoSProfile(depth=100, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE)
            events = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST, reliability=ReliabilityPolicy.RELIABLE,
                                durability=DurabilityPolicy.VOLATILE)
            self.status = StatusLog()
            self.subscription = listener.create_subscription(String, f"{node_name}/status", self.status, events)
            self.submit_client = caller.create_client(Submit, f"{node_name}/submit", qos_profile=requests)
        except BaseException:
            self._release()
            raise
        for executor in self.executors:
            thread = threading.Thread(target=self._spin, args=(executor,), name="bench-ros", daemon=True)
            thread.start()
            self._threads.append(thread)

    @staticmethod
    def _spin(executor) -> None:
        from rclpy.executors import ExternalShutdownException
        try:
            executor.spin()
        except ExternalShutdownException:
            pass

    def _release(self) -> None:
        for node in self.nodes:
            node.destroy_node()
        for context in self.contexts:
            context.try_shutdown()

    def close(self) -> None:
        for executor in self.executors:
            executor.shutdown(timeout_sec=2.0)
        for thread in self._threads:
            thread.join(5)
        self._release()

    def submit_async(self, text: str, run_id: str):
        """(done Event, [answered_at], rclpy Future): answered_at is set in the spinning thread."""
        request = self.Submit.Request()
        request.graph_json, request.run_id, request.dialect = text, run_id, "rtdl"
        done, answered = threading.Event(), []

        def on_done(_future):
            answered.append(time.perf_counter())
            done.set()

        future = self.submit_client.call_async(request)
        future.add_done_callback(on_done)
        return done, answered, future

    def submit(self, text: str, run_id: str, timeout: float = 30.0):
        """(seconds from call_async to the answer, response)."""
        started = time.perf_counter()
        done, answered, future = self.submit_async(text, run_id)
        if not done.wait(timeout):
            raise RuntimeError(f"no answer to submit {run_id} within {timeout} s")
        return answered[0] - started, future.result()

    def wait_ready(self, node: NodeProcess) -> None:
        """The service exists and answers (a fresh client's first request can be lost: probe until one is
        answered), and the status subscription is matched."""
        deadline = time.monotonic() + READY_S
        while not self.submit_client.wait_for_service(timeout_sec=0.2):
            node.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError(f"the node's submit service did not appear in {READY_S:g} s")
        while True:  # an empty graph_json: refused at once, changes nothing
            request = self.Submit.Request()
            done = threading.Event()
            self.submit_client.call_async(request).add_done_callback(lambda _f, done=done: done.set())
            if done.wait(0.5):
                break
            node.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError("the node's submit service never answered a probe")
        while self.subscription.get_publisher_count() == 0:
            node.check_alive()
            if time.monotonic() > deadline:
                raise RuntimeError("no publisher on the node's ~/status")
            time.sleep(0.02)
        time.sleep(0.3)  # matched in the graph; let the reliable reader be acknowledged


# --- the node process -----------------------------------------------------------------

def _die_with_parent() -> None:
    """In the child, before exec: SIGTERM when this process dies (Linux prctl PR_SET_PDEATHSIG)."""
    try:
        import ctypes
        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)
    except Exception:
        pass


class NodeProcess:
    def __init__(self, workdir: pathlib.Path, tick_rate_hz: float, env: dict):
        self.name = f"/bench_{uuid.uuid4().hex[:12]}"
        script = workdir / "sim.json"
        script.write_text(json.dumps(SIM_SCRIPT))
        self.log_path = workdir / "node.log"
        self._log = open(self.log_path, "wb")  # noqa: SIM115  (open while the process runs)
        args = [sys.executable, "-m", "bt_exec.cli", "serve", "--ros-args", "-r", f"__node:={self.name[1:]}",
                "-p", f"tick_rate_hz:={float(tick_rate_hz)!r}", "-p", "backend:=sim", "-p", f"sim_script:={script}"]
        self.process = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT, cwd=REPO,
                                        env=dict(env, PYTHONUNBUFFERED="1"),
                                        preexec_fn=_die_with_parent if sys.platform.startswith("linux") else None)

    def check_alive(self) -> None:
        if self.process.poll() is not None:
            raise RuntimeError(f"the node exited with {self.process.returncode}")

    def stop(self) -> int | None:
        """SIGTERM, then SIGKILL after NODE_STOP_S; the exit code, or None if it had to be killed."""
        code = self.process.poll()
        if code is None:
            try:
                self.process.send_signal(signal.SIGTERM)
                code = self.process.wait(NODE_STOP_S)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
                code = None
            except BaseException:
                self.process.kill()
                self.process.wait()
                raise
        self._log.close()
        return code

    def log_tail(self, lines: int = 20) -> str:
        if not self._log.closed:
            self._log.flush()
        return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])


# --- the figures ----------------------------------------------------------------------

def percentile(values: list[float], p: float) -> float:
    """Nearest-rank percentile (p in 0..100)."""
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * p // 100))
    return ordered[int(rank) - 1]


def submit_round_trip(client: Client, repeats: int, tick_rate_hz: float, tag: str) -> dict:
    import bt_exec

    text = plan_text(SUBMIT_OPS - 1, "bench.instant", "submit round trip")
    executor = bt_exec.Executor(backend=bt_exec.SimBackend(SIM_SCRIPT), tick_rate_hz=tick_rate_hz)
    finished: dict[str, threading.Event] = {}
    lock = threading.Lock()

    def on_event(event):
        if event.get("event") == "plan_complete":
            with lock:
                finished.setdefault(event["plan_id"], threading.Event()).set()

    executor.subscribe(on_event)
    executor.start()

    def in_process(run_id: str) -> float:
        gc.collect()
        started = time.perf_counter()
        answer = executor.submit(text, run_id=run_id)
        elapsed = time.perf_counter() - started
        if not answer["accepted"]:
            raise RuntimeError(f"in-process submit refused: {answer['message']}")
        with lock:
            done = finished.setdefault(answer["plan_id"], threading.Event())
        if not done.wait(30):
            raise RuntimeError(f"in-process plan {answer['plan_id']} did not complete")
        return elapsed

    expected: dict[str, int] = {}
    incomplete = 0

    def over_ros(run_id: str) -> float:
        nonlocal incomplete
        gc.collect()
        elapsed, response = client.submit(text, run_id)
        if not response.accepted:
            raise RuntimeError(f"submit over ROS refused: {response.verdict}: {response.message}")
        expected[response.plan_id] = events_of(SUBMIT_OPS)
        if not client.status.wait(lambda: response.plan_id in client.status.completed, 30):
            incomplete += 1  # its plan_complete never came: counted as lost in the tally
        return elapsed

    def raw() -> float:
        gc.collect()
        started = time.perf_counter()
        raw_tree(SUBMIT_OPS)
        return time.perf_counter() - started

    ros_t, local_t, raw_t = [], [], []
    try:
        for i in range(3):  # warm-up, untimed
            in_process(f"{tag}-warm-local-{i}")
            over_ros(f"{tag}-warm-ros-{i}")
            raw()
        for i in range(repeats):
            if i % 2:
                raw_t.append(raw())
                local_t.append(in_process(f"{tag}-local-{i}"))
                ros_t.append(over_ros(f"{tag}-ros-{i}"))
            else:
                ros_t.append(over_ros(f"{tag}-ros-{i}"))
                local_t.append(in_process(f"{tag}-local-{i}"))
                raw_t.append(raw())
    finally:
        executor.close(wait_ms=0)
    return {"ros": ros_t, "local": local_t, "raw": raw_t, "bytes": len(text.encode()), "expected": expected,
            "incomplete": incomplete}


def event_delivery(client: Client, rate: float, seconds: float, tag: str) -> dict:
    text = plan_text(STEP_OPS, "bench.step", "event delivery")
    per_plan = events_of(STEP_OPS + 1)
    interval = per_plan / rate
    n_plans = max(1, round(seconds / interval))
    pending = []
    began = time.perf_counter()
    for i in range(n_plans):
        wake = began + i * interval
        delay = wake - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        pending.append(client.submit_async(text, f"{tag}-ev-{i}"))
    last_submit = time.perf_counter()
    expected, refused = {}, 0
    for done, _answered, future in pending:
        if not done.wait(30):
            raise RuntimeError("a submit of the event phase got no answer within 30 s")
        response = future.result()
        if response.accepted:
            expected[response.plan_id] = per_plan
        else:
            refused += 1
    complete = client.status.wait_complete(expected, timeout=60)
    result = client.status.tally(expected, window=(began, last_submit))
    result.update(plans=n_plans, refused=refused, submitted_s=last_submit - began, complete=complete, per_plan=per_plan,
                  target=rate)
    return result


# --- report ---------------------------------------------------------------------------

SUBMIT = f"1  submit {SUBMIT_OPS} ops"
NAMES = (f"{SUBMIT} over ROS, p50", f"{SUBMIT} over ROS, p99", f"{SUBMIT} over ROS, max",
         f"{SUBMIT} in-process, p50", f"{SUBMIT} in-process, p99", "1  ROS p50 / in-process p50",
         "1  events lost, submit phase", "2  events/s received while submitting", "2  events/s received, first to last",
         "2  events received", "2  events lost", "2  seq gaps", "2  duplicate events", "   node's drop count")


def _options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--rate", type=float, default=1000.0, help="events per second in figure 2 (default 1000)")
    parser.add_argument("--seconds", type=float, help="length of figure 2's phase (default 5, or 3 with --quick)")
    parser.add_argument("--tick-rate-hz", type=float, default=100.0, help="the node's tick_rate_hz (default 100)")


def figures(args, detail: list[str] | None = None) -> list[Figure]:
    """Figures 1 and 2 (see the module doc), measured against a node started here and always stopped;
    skipped rows when ROS 2 is not set up. Raises RuntimeError when the node cannot be started or driven.
    ``detail`` gets the run's description and notes."""
    detail = [] if detail is None else detail
    seconds = args.seconds or (3.0 if args.quick else 5.0)
    missing = _ros_missing()
    if missing is not None:
        return skipped("ros", NAMES, f"ROS 2 is not set up here: {missing}; run `bash scripts/setup-ros.sh && "
                                     ". build/ros/env.sh` first")

    # Before any rclpy.init, here and (through env) in the node process.
    domain_id = random.SystemRandom().randint(1, 100)
    os.environ["ROS_DOMAIN_ID"] = str(domain_id)

    def on_sigterm(signum, _frame):
        raise SystemExit(128 + signum)  # unwinds through the finally blocks: the node is stopped

    signal.signal(signal.SIGTERM, on_sigterm)

    import rclpy.utilities

    tag = uuid.uuid4().hex[:8]
    node = client = None
    node_code = "not started"
    with tempfile.TemporaryDirectory(prefix="bench_ros_") as tmp:
        try:
            node = NodeProcess(pathlib.Path(tmp), args.tick_rate_hz, dict(os.environ))
            client = Client(node.name)
            client.wait_ready(node)
            trip = submit_round_trip(client, args.repeats, args.tick_rate_hz, tag)
            node.check_alive()
            events = event_delivery(client, args.rate, seconds, tag)
            node.check_alive()
            trip_tally = client.status.tally(trip["expected"])
        except Exception as exc:
            log = node.log_tail() if node is not None else ""
            raise RuntimeError(f"{type(exc).__name__}: {exc}" + (f"\nnode log (tail):\n{log}" if log else "")) from exc
        finally:
            if node is not None:
                node_code = node.stop()
            if client is not None:
                if node_code is not None:  # a clean stop publishes node_shutdown with the drop total
                    client.status.wait(lambda: client.status.shutdown_dropped is not None, 2.0)
                client.close()

    ros_t, local_t, raw_t = trip["ros"], trip["local"], trip["raw"]
    ros_p50, local_p50, raw_p50 = statistics.median(ros_t), statistics.median(local_t), statistics.median(raw_t)
    raw_p99 = percentile(raw_t, 99)
    status = client.status
    node_dropped = status.shutdown_dropped if status.shutdown_dropped is not None else \
        (max(status.dropped_reports) if status.dropped_reports else None)
    lost = events["lost"]
    vs_raw = {"bench": "ros", "note": RAW_NOTE}
    no_raw = {"bench": "ros", "note": NO_RAW_ROS}
    result = [
        Figure(name=NAMES[0], ours_s=ros_p50, raw_s=raw_p50, ratio=ros_p50 / raw_p50, target=TARGET_P50_S, on="ours",
               **vs_raw),
        Figure(name=NAMES[1], ours_s=percentile(ros_t, 99), raw_s=raw_p99, ratio=percentile(ros_t, 99) / raw_p99,
               target=TARGET_P99_S, on="ours", **vs_raw),
        Figure(name=NAMES[2], ours_s=max(ros_t), raw_s=max(raw_t), ratio=max(ros_t) / max(raw_t), **vs_raw),
        Figure(name=NAMES[3], ours_s=local_p50, raw_s=raw_p50, ratio=local_p50 / raw_p50, **vs_raw),
        Figure(name=NAMES[4], ours_s=percentile(local_t, 99), raw_s=raw_p99,
               ratio=percentile(local_t, 99) / raw_p99, **vs_raw),
        Figure(name=NAMES[5], value=ros_p50 / local_p50, unit="x", on="value", **no_raw),
        Figure(name=NAMES[6], value=trip_tally["lost"], unit=f"of {trip_tally['expected']}", on="value", **no_raw),
        Figure(name=NAMES[7], value=round(events["steady_rate"]), unit=f"/s ({events['target']:.0f} asked)",
               on="value", **no_raw),
        Figure(name=NAMES[8], value=round(events["rate"]), unit="/s", on="value", **no_raw),
        Figure(name=NAMES[9], value=events["received"], unit=f"of {events['expected']}", on="value", **no_raw),
        Figure(name=NAMES[10], value=lost, unit="events", on="value", bar=0,
               verdict=PASS if lost == 0 and events["refused"] == 0 else FAIL, **no_raw),
        Figure(name=NAMES[11], value=events["seq_gaps"], on="value", **no_raw),
        Figure(name=NAMES[12], value=status.duplicates, on="value", **no_raw),
        Figure(name=NAMES[13], value=node_dropped, on="value", **no_raw),
    ]

    detail.append(f"ros: ROS 2 {os.environ.get('ROS_DISTRO', 'jazzy')} "
                  f"({rclpy.utilities.get_rmw_implementation_identifier()}), ROS_DOMAIN_ID {domain_id}, node "
                  f"{node.name} at {args.tick_rate_hz:g} Hz; 1: {args.repeats} submits of a {SUBMIT_OPS}-op plan "
                  f"({trip['bytes'] / 1024:.0f} KiB), each to an idle node; 2: {events['plans']} plans of "
                  f"{STEP_OPS + 1} ops ({events['per_plan']} events each, {STEP_S * 1e3:g} ms per op) submitted over "
                  f"{events['submitted_s']:.1f} s, events over {events['span_s']:.1f} s")
    notes = []
    if events["refused"]:
        notes.append(f"{events['refused']} submits of the event phase were refused")
    if not events["complete"]:
        notes.append("not every plan's plan_complete arrived")
    if events["plans_short"]:
        shown = ", ".join(f"plan {p}: {n}" for p, n in list(events["plans_short"].items())[:5])
        notes.append(f"plans missing events: {shown}")
    if trip["incomplete"]:
        notes.append(f"{trip['incomplete']} plans of figure 1 never showed plan_complete")
    if node_dropped is None:
        notes.append("the node sent no drop count (no status_dropped, no node_shutdown)")
    if node_code != 0:
        notes.append(f"the node did not stop cleanly (exit {node_code})")
    if events["steady_rate"] < 0.9 * events["target"]:
        notes.append(f"events arrived at {events['steady_rate']:.0f}/s while submitting, below 90% of the "
                     f"{events['target']:.0f}/s asked")
    detail.extend(f"ros note: {note}" for note in notes)
    return result


RAW_NOTE = f"raw py_trees: build the same {SUBMIT_OPS}-behaviour tree, no transport, no parsing, no validation; " \
           "ratio = ours / raw of the same statistic"


def main(argv=None) -> int:
    args = parse_args(argv, __doc__.splitlines()[0], 200, 40, "fewer repeats, a shorter event phase (CI)",
                      extend=_options)
    if (args.seconds is not None and args.seconds <= 0) or args.rate <= 0 or args.tick_rate_hz <= 0:
        args.parser.error("--rate, --seconds and --tick-rate-hz must be positive")
    detail: list[str] = []
    try:
        result = figures(args, detail)
    except KeyboardInterrupt:
        print("bench_ros: interrupted; the node was stopped", file=sys.stderr)
        return 130
    except RuntimeError as exc:
        print(f"bench_ros: error: {exc}", file=sys.stderr)
        result = [Figure("ros", name, verdict=ERROR, note=f"the node could not be started or driven: "
                                                            f"{str(exc).splitlines()[0]}") for name in NAMES]
    if all(f.verdict == SKIPPED for f in result) and not args.no_table:
        print(f"bench_ros: skipped: {result[0].note}")
    return report("ros", result, args, detail)


if __name__ == "__main__":
    sys.exit(main())
