"""The ROS layer without ROS: the core never imports rclpy; the ROS commands say how to set ROS up.

These run everywhere (no rclpy needed); the ROS tests proper are in tests/ros.
"""
import json
import pathlib
import subprocess
import sys
import threading
import time

import py_trees
import pytest
from held_clock import HeldClock
from py_trees.common import Status

import bt_exec
from bt_exec.ros.outbox import Outbox
from bt_exec.ros.tree_watcher import Mirror, MirrorHost

REPO = pathlib.Path(__file__).resolve().parents[1]
ROS_COMMANDS = [["serve"], ["sim-robot"], ["submit", "examples/rtdl/snapshot_battery.json"], ["plans"],
                ["status", "1"], ["stop-at", "1", "2"], ["stop-at", "1", "2", "--pause"], ["disarm", "1", "2"],
                ["pause", "1"], ["resume", "1"], ["step", "1"], ["cancel"], ["robots"], ["plans", "--robot", "robot1"],
                ["fleet", "--web", "0"], ["fleet", "--mcp"]]


def run_python(code: str) -> subprocess.CompletedProcess:
    """``python -c CODE`` from the repository's root: a fresh interpreter, for what imports must not load."""
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, cwd=REPO)


def test_the_core_and_the_cli_import_no_rclpy():
    result = run_python("import sys, bt_exec, bt_exec.cli, bt_exec.ros, bt_exec.ros.params, bt_exec.ros.convert, "
                        "bt_exec.ros.outbox, bt_exec.ros.tree_watcher; print(sorted(m for m in sys.modules if "
                        "m.split('.')[0] in ('rclpy', 'std_msgs', 'bt_exec_interfaces')))")
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


def test_the_ros_modules_without_rclpy_leave_the_web_server_alone():
    # the node imports the web app only when web_port is set
    result = run_python("import sys, bt_exec.ros, bt_exec.ros.params, bt_exec.ros.convert, bt_exec.ros.outbox, "
                        "bt_exec.ros.tree_watcher; print(sorted(m for m in sys.modules if m.split('.')[:2] == "
                        "['bt_exec', 'web']))")
    assert result.returncode == 0 and result.stdout.strip() == "[]", result.stderr


def test_the_motion_package_imports_no_ros_and_no_moveit():
    result = run_python("import importlib, json, pkgutil, sys, bt_exec.motion as motion\n"
                        "names = sorted(module.name for module in pkgutil.iter_modules(motion.__path__))\n"
                        "for name in names:\n"
                        "    importlib.import_module('bt_exec.motion.' + name)\n"
                        "print(json.dumps([names, sorted(m for m in sys.modules if m.split('.')[0] in ('rclpy', "
                        "'moveit', 'moveit_msgs', 'geometry_msgs', 'sensor_msgs', 'shape_msgs', 'std_msgs') "
                        "or m.startswith('bt_exec.ros'))]))")
    assert result.returncode == 0, result.stderr
    names, ros_modules = json.loads(result.stdout)
    assert {"backend", "cell", "policy", "skills"} <= set(names) and ros_modules == []


@pytest.fixture(scope="module")
def ros_commands_without_rclpy():
    """Each of ROS_COMMANDS run by ``main`` in one fresh interpreter where rclpy is hidden (None in sys.modules
    makes its import fail), whether or not it is installed here: [exit code, stderr] per command."""
    result = run_python("import contextlib, io, json, sys\n"
                        "sys.modules['rclpy'] = None\n"
                        "from bt_exec.cli import main\n"
                        "answers = []\n"
                        f"for args in {ROS_COMMANDS!r}:\n"
                        "    err = io.StringIO()\n"
                        "    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(err):\n"
                        "        answers.append([main(args), err.getvalue()])\n"
                        "print(json.dumps(answers))")
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


@pytest.mark.parametrize("index", range(len(ROS_COMMANDS)), ids=[args[0] for args in ROS_COMMANDS])
def test_ros_commands_without_rclpy_say_how_to_set_it_up(ros_commands_without_rclpy, index):
    code, stderr = ros_commands_without_rclpy[index]
    assert code == 2, (ROS_COMMANDS[index], stderr)
    assert "ROS 2 is not set up here" in stderr
    assert "bash scripts/setup-ros.sh && . build/ros/env.sh" in stderr
    assert "Traceback" not in stderr


def test_ros_args_belong_to_ros_commands(capsys):
    from bt_exec.cli import main

    assert main(["validate", "examples/rtdl/snapshot_battery.json", "--ros-args", "-p", "x:=1"]) == 2
    assert "--ros-args is only for the ROS commands" in capsys.readouterr().err


def test_fleet_says_what_to_serve(capsys):
    from bt_exec.cli import main

    assert main(["fleet"]) == 2
    assert "say what to serve: --web PORT (the console), --mcp" in capsys.readouterr().err


def test_client_command_usage_errors(capsys):
    from bt_exec.cli import main

    assert main(["cancel", "1", "--wait-ms", "-5"]) == 2
    assert main(["stop-at", "1", "2", "--when", "later"]) == 2
    assert main(["submit", "x.json", "--dialect", "klingon"]) == 2
    assert main(["plans", "--timeout", "0"]) == 2
    assert main(["stop-at", "1", "2", "--action", "halt"]) == 2
    assert main(["stop-at", "1", "2", "--pause", "--action", "cancel"]) == 2  # one or the other
    assert main(["disarm", "1", "2", "--when", "later"]) == 2
    for command in ("pause", "resume", "step"):
        assert main([command]) == 2  # PLAN is required
    assert "the following arguments are required: PLAN" in capsys.readouterr().err


def test_outbox_sends_in_order_and_counts_what_it_drops():
    sent, gate = [], threading.Event()

    def send(item):
        gate.wait(5)
        sent.append(item)

    idles = []
    outbox = Outbox(send, idle=lambda: idles.append(1), max_queued=3, idle_s=0.01)
    outbox.start()
    results = [outbox.put(i) for i in range(10)]  # the sender is stuck on the first item: 3 queued, the rest dropped
    assert results.count(False) == outbox.dropped >= 6
    gate.set()
    outbox.close(last="bye")
    assert sent[-1] == "bye" and sent[:-1] == sorted(sent[:-1]) and len(sent) - 1 == 10 - outbox.dropped
    assert idles


def test_outbox_survives_a_failing_sender():
    sent = []

    def send(item):
        if item == 1:
            raise RuntimeError("publisher gone")
        sent.append(item)

    outbox = Outbox(send, idle_s=0.01)
    outbox.start()
    for i in range(3):
        outbox.put(i)
    outbox.close()
    assert sent == [0, 2]


def test_mirror_reports_the_plans_without_ticking_them():
    class Counting(py_trees.behaviour.Behaviour):
        ticks = 0

        def update(self):
            Counting.ticks += 1
            return Status.RUNNING

    plan_root = py_trees.composites.Sequence("plan", memory=True, children=[Counting("op")])
    plan_root.tick_once()  # the executor's tick
    mirror = Mirror("bt_exec")
    tree = py_trees.trees.BehaviourTree(mirror)
    snapshot = py_trees.visitors.SnapshotVisitor()
    tree.visitors.append(snapshot)
    tree.insert_subtree(plan_root, mirror.id, 0)
    tree.tick()
    assert Counting.ticks == 1 and mirror.status == Status.RUNNING and mirror.tip() is not None
    assert set(snapshot.visited) == {b.id for b in (mirror, plan_root, plan_root.children[0])}
    tree.tick()
    assert not snapshot.changed
    plan_root.children[0].stop(Status.SUCCESS)
    tree.tick()
    assert snapshot.changed
    tree.prune_subtree(plan_root.id)  # never stops the plan: the executor does that
    assert plan_root.parent is None and mirror.children == [] and plan_root.status == Status.RUNNING
    mirror.stop(Status.INVALID)
    assert Counting.ticks == 1


def test_mirror_host_follows_the_executor(make_executor):
    executor = make_executor({"caps": {"sim.slow": {"duration_s": 60}}})
    tree = py_trees.trees.BehaviourTree(Mirror("bt_exec"))
    updates = []
    tree.tree_update_handler = lambda: updates.append(len(tree.root.children))  # py_trees_ros publishes here
    host = MirrorHost(tree, executor)
    host.update()
    assert tree.root.children == [] and updates == []
    slow = {"op": "sequence", "description": "slow", "children": [
        {"op": "do", "description": "wait", "cap": "sim.slow", "args": {}}]}
    first = executor.submit(slow)["plan_id"]
    second = executor.submit(slow)["plan_id"]
    executor.tick_once()
    host.update()
    assert len(tree.root.children) == 2 and updates == [2]  # published once, both frames in
    assert [b.status for b in tree.root.children] == [Status.RUNNING, Status.RUNNING]
    executor.cancel_plan(first, wait_ms=0)
    host.update()
    assert len(tree.root.children) == 1 and updates == [2, 1]
    executor.cancel_plan(second, wait_ms=0)
    host.update()
    assert tree.root.children == [] and updates[-1] == 0


def hosted_steps(make_executor, clock=time.monotonic):
    """A two-op plan (its first op slow: 0.3 s on the sim's ``clock``) ticked once under a mirror host: executor,
    mirror tree, the tree's update counts, host, plan id."""
    executor = make_executor(backend=bt_exec.SimBackend({"caps": {"sim.step": {"duration_s": 0.3}}}, clock=clock))
    tree = py_trees.trees.BehaviourTree(Mirror("bt_exec"))
    updates = []
    tree.tree_update_handler = lambda: updates.append(len(tree.root.children))
    host = MirrorHost(tree, executor)
    steps = {"op": "sequence", "description": "steps", "children": [
        {"op": "do", "description": "step", "cap": "sim.step", "args": {}},
        {"op": "do", "description": "act", "cap": "sim.act", "args": {}}]}
    plan_id = executor.submit(steps)["plan_id"]
    executor.tick_once()
    host.update()
    return executor, tree, updates, host, plan_id


def test_mirror_host_follows_stop_guards_placed_mid_run(make_executor):
    executor, tree, updates, host, plan_id = hosted_steps(make_executor)
    root_op = executor.behaviour_trees()[plan_id]
    (frame,) = tree.root.children  # each plan under a frame named after it
    assert frame.name == f"plan {plan_id}: steps" and frame.decorated is root_op and updates == [1]

    executor.stop_plan_at(plan_id, "3", "on_enter")  # a guard above an inner op
    host.update()
    assert "stop point at [3]" in [behaviour.name for behaviour in tree.root.iterate()] and updates == [1, 1]
    executor.stop_plan_at(plan_id, "1", "on_complete")  # a guard above the plan's root op: the plan's new root
    guard = executor.behaviour_trees()[plan_id]
    assert frame.decorated is root_op  # the executor never edits the mirror: only the host's update does
    host.update()
    assert guard is not root_op and root_op.parent is guard
    assert tree.root.children == [frame] and frame.decorated is guard and guard.parent is frame and updates == [1, 1, 1]

    record = executor.run_until_complete(plan_id, timeout=10)  # the hosted guards still stop the plan
    assert record["outcome"] == "cancelled"
    assert [op["state"] for op in record["ops"]] == ["canceled", "succeeded", "canceled"], record["ops"]
    host.update()
    assert tree.root.children == [] and updates == [1, 1, 1, 0] and guard.parent is None


def test_mirror_host_shows_a_paused_plan_and_its_pause_points(make_executor):
    clock = HeldClock()  # op 2 runs until the test lets it end, however loaded the machine
    executor, tree, updates, host, plan_id = hosted_steps(make_executor, clock)
    (frame,) = tree.root.children
    assert frame.feedback_message == "" and updates == [1]

    executor.stop_plan_at(plan_id, "3", "on_enter", source="ros", action="pause")
    executor.tick_once()
    host.update()
    (guard,) = [b for b in tree.root.iterate() if b.name == "stop point at [3]"]
    assert guard.feedback_message == "pause on_enter armed" and updates == [1, 1]  # the guard is published
    assert executor.pause_plan(plan_id, source="ros")["paused"]
    host.update()
    assert frame.feedback_message == "paused" and updates == [1, 1, 1]  # a message alone changing is published
    host.update()
    assert updates == [1, 1, 1]  # and only once
    assert executor.resume_plan(plan_id, source="ros")["resumed"]
    host.update()
    assert frame.feedback_message == "" and updates == [1, 1, 1, 1]

    clock.release()  # op 2's call ends at its next poll
    executor.tick_once()  # on to op 3, where the pause point fires
    assert executor.get_all_plans()["plans"][0]["paused"]
    host.update()
    assert frame.feedback_message == "paused; held at entry: [3]"
    assert guard.feedback_message == "stop point disarmed"  # a pause point fires once
    executor.resume_plan(plan_id)
    record = executor.run_until_complete(plan_id, timeout=10)
    assert record["outcome"] == "succeeded"
    host.update()
    assert tree.root.children == []


def test_the_node_module_is_lazy_about_ros():
    # bt_exec.ros.node needs rclpy; importing it without ROS fails with ImportError (the CLI turns that into
    # the set-up message), never with another error.
    result = run_python("import sys; sys.modules['rclpy'] = None\ntry:\n    import bt_exec.ros.node\n"
                        "except ImportError:\n    print('ImportError')")
    assert result.stdout.strip() == "ImportError", result.stderr
