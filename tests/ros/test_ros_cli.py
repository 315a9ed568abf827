"""The bt-exec client commands against a running node (each command is a process of its own).

Each command starts rclpy and discovers the node (about 2 s here), so the
commands that do not depend on each other run side by side.
"""
import json
import os
import random
import subprocess
import sys
import threading

import pytest
import rosutil
from rosutil import do, plan, seq


@pytest.fixture(scope="module")
def node(ros, sim_script, tmp_path_factory):
    process = rosutil.NodeProcess(tmp_path_factory.mktemp("cli") / "node.log", {"sim_script": str(sim_script)})
    process.wait_ready(ros)
    yield process
    assert process.stop() == 0, process.log()


def batch(node, commands: dict) -> dict:
    """Run the commands side by side; {key: (exit code, stdout, stderr)}."""
    running = {}
    for key, args in commands.items():
        where = [] if "--node" in args or "--robot" in args else ["--node", node.name]
        running[key] = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", *args, *where], stdout=subprocess.PIPE,
                                        stderr=subprocess.PIPE, text=True, cwd=rosutil.REPO)
    out = {}
    for key, process in running.items():
        stdout, stderr = process.communicate(timeout=90)
        assert "Traceback" not in stderr, (key, stderr)
        out[key] = (process.returncode, stdout, stderr)
    return out


def test_client_commands(ros, node, tmp_path):
    path = tmp_path / "plan.json"
    path.write_text(plan(seq(do("sim.slow"), do()), description="from the cli"))
    bad = tmp_path / "bad.json"
    bad.write_text(plan(seq(do(cap="nodot"))))

    code, stdout, stderr = batch(node, {"submit": ["submit", str(path), "--run-id", "cli-1"]})["submit"]
    assert code == 0, stderr
    assert stdout.startswith("accepted: plan ") and "(run cli-1)" in stdout
    plan_id = stdout.split()[2]

    out = batch(node, {
        "status": ["status", plan_id],
        "plans": ["plans"],
        "plans_json": ["plans", "--json"],
        "stop_at": ["stop-at", plan_id, str(int(plan_id) + 1), "--when", "on_complete"],  # op ids count from the root
        "unknown_status": ["status", "424242"],
        "unknown_stop": ["stop-at", "424242", "1"],
        "unknown_cancel": ["cancel", "424242", "--wait-ms", "0"],
        "again": ["submit", str(path), "--run-id", "cli-1", "--json"],
        "refused": ["submit", str(bad)],
        "nobody": ["plans", "--node", "/nobody/home", "--timeout", "1"],
    })
    code, stdout, _ = out["status"]
    assert code == 0 and json.loads(stdout)["plan_id"] == plan_id
    code, stdout, _ = out["plans"]
    assert code == 0 and f"plan {plan_id}: from the cli (3 ops" in stdout
    code, stdout, _ = out["plans_json"]
    assert code == 0 and json.loads(stdout)["count"] == 1
    code, stdout, stderr = out["stop_at"]
    assert code == 0 and "Stop point set" in stdout, stderr
    for key in ("unknown_status", "unknown_stop", "unknown_cancel"):
        code, _, stderr = out[key]
        assert code == 1 and "424242" in stderr, (key, stderr)
    code, stdout, _ = out["again"]
    assert code == 0 and json.loads(stdout)["plan_id"] == plan_id and json.loads(stdout)["issues"] == []
    code, _, stderr = out["refused"]
    assert code == 1 and "refused (invalid)" in stderr and "[" in stderr
    code, _, stderr = out["nobody"]
    assert code == 2 and "no bt_exec node answers at /nobody/home/list_plans" in stderr

    code, stdout, stderr = batch(node, {"cancel": ["cancel", plan_id, "--wait-ms", "5000"]})["cancel"]
    assert code == 0 and f"plan {plan_id!r} finished cancelled" in stdout, stderr
    status = json.loads(ros.call(node.name, "get_status", plan_id=plan_id).status_json)
    assert status["outcome"] == "cancelled"

    code, stdout, stderr = batch(node, {"all": ["cancel"]})["all"]
    assert code == 0 and "cancelled 0 plan(s)" in stdout, stderr


def test_pause_resume_step_and_pause_points_from_the_cli(ros, node, tmp_path):
    plan_id = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"), do()), description="held")).plan_id
    last = json.loads(ros.call(node.name, "get_status", plan_id=plan_id).status_json)["ops"][2]["op_id"]

    out = batch(node, {
        "pause": ["pause", plan_id],
        "pause_point": ["stop-at", plan_id, last, "--when", "on_enter", "--pause"],
        "unknown_pause": ["pause", "424242"],
        "unknown_resume": ["resume", "424242"],
        "unknown_step": ["step", "424242"],
        "unknown_disarm": ["disarm", "424242", "1"],
    })
    code, stdout, stderr = out["pause"]
    assert code == 0 and f"plan {plan_id!r} paused" in stdout, stderr
    code, stdout, stderr = out["pause_point"]
    assert code == 0 and "Pause point set" in stdout, stderr
    for key in ("unknown_pause", "unknown_resume", "unknown_step", "unknown_disarm"):
        code, _, stderr = out[key]
        assert code == 1 and "424242" in stderr, (key, stderr)
    status = json.loads(ros.call(node.name, "get_status", plan_id=plan_id).status_json)
    assert status["paused"] is True and status["ops"][2]["pause_point"] == "on_enter", status
    code, stdout, _ = batch(node, {"plans": ["plans"]})["plans"]
    assert code == 0 and f"plan {plan_id}: held (3 ops, paused, 1 stop point(s))" in stdout, stdout

    out = batch(node, {"resume": ["resume", plan_id], "disarm": ["disarm", plan_id, last, "--when", "on_enter"]})
    code, stdout, stderr = out["resume"]
    assert code == 0 and f"plan {plan_id!r} resumed" in stdout, stderr
    code, stdout, stderr = out["disarm"]
    assert code == 0 and "Stop point disarmed" in stdout, stderr
    status = json.loads(ros.call(node.name, "get_status", plan_id=plan_id).status_json)
    assert status["paused"] is False and "pause_point" not in status["ops"][2], status

    code, stdout, stderr = batch(node, {"step": ["step", plan_id, "--robot", node.namespace]})["step"]
    assert code == 0 and "not paused; it pauses behind the next op" in stdout, stderr
    ros.call(node.name, "cancel", plan_id=plan_id, wait_ms=5000)


class GraphAfter:
    """A stand-in for the client's node and executor whose ROS graph shows ``later`` only after
    ``after_spins`` spins (a robot whose node is seen before its services, as DDS discovery goes)."""

    def __init__(self, nodes, services, later_nodes=(), later_services=(), after_spins=15):
        self.spins = 0
        self.nodes, self.services = list(nodes), list(services)
        self.later_nodes, self.later_services = list(later_nodes), list(later_services)
        self.after_spins = after_spins
        self.node, self.executor = self, self

    def get_node_names_and_namespaces(self):
        return self.nodes + (self.later_nodes if self.spins >= self.after_spins else [])

    def get_service_names_and_types(self):
        return self.services + (self.later_services if self.spins >= self.after_spins else [])

    def spin_once(self, timeout_sec):
        self.spins += 1
        threading.Event().wait(min(timeout_sec, 0.1))


def executor_services(namespace):
    return [(f"{namespace}/bt_exec/list_plans", [client_module().LIST_PLANS_TYPE])]


def client_module():
    from bt_exec.ros import client
    return client


class TestRobotsWaitForASettledGraph:
    def test_a_node_seen_before_its_services_is_waited_for(self):
        graph = GraphAfter([("bt_exec", "/robot1"), ("bt_exec", "/robot2")], executor_services("/robot1"),
                           later_services=executor_services("/robot2"))
        found = client_module().find_executors(graph, wait_s=30, settled_s=0.3)
        assert found == ["/robot1/bt_exec", "/robot2/bt_exec"]

    def test_a_graph_still_changing_is_waited_for(self):
        graph = GraphAfter([("bt_exec", "/robot1")], executor_services("/robot1"),
                           later_nodes=[("other", "/robot2"), ("bt_exec", "/robot2")],
                           later_services=executor_services("/robot2"), after_spins=3)
        assert client_module().find_executors(graph, wait_s=30, settled_s=0.6) == ["/robot1/bt_exec",
                                                                                 "/robot2/bt_exec"]

    def test_what_was_found_is_given_once_the_wait_is_over(self):
        graph = GraphAfter([("bt_exec", "/robot1"), ("bt_exec", "/robot2")], executor_services("/robot1"),
                           after_spins=10**9)  # robot2's services never come
        assert client_module().find_executors(graph, wait_s=0.5, settled_s=0.1) == ["/robot1/bt_exec"]


def test_robots_lists_both_robots_up_every_time(ros, start_node, sim_script):
    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    runs = [subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "robots", "--json"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, cwd=rosutil.REPO) for _ in range(3)]
    for run in runs:
        stdout, stderr = run.communicate(timeout=90)
        assert run.returncode == 0 and "Traceback" not in stderr, stderr
        listed = {robot["node"] for robot in json.loads(stdout)["robots"]}
        assert {first.name, second.name} <= listed, stdout


def test_robots_finding_none_exits_1_saying_so(tmp_path):
    domain = str(random.SystemRandom().randrange(150, 200))  # a domain of its own: no node is there
    listed = subprocess.run([sys.executable, "-m", "bt_exec.cli", "robots", "--wait", "1"], capture_output=True,
                            text=True, timeout=90, cwd=rosutil.REPO, env={**os.environ, "ROS_DOMAIN_ID": domain})
    assert listed.returncode == 1, listed
    assert f"no bt_exec node found on this ROS domain (looked 1 s; ROS_DOMAIN_ID={domain})" in listed.stderr
    assert listed.stdout == "" and "Traceback" not in listed.stderr
    as_json = subprocess.run([sys.executable, "-m", "bt_exec.cli", "robots", "--wait", "1", "--json"],
                             capture_output=True, text=True, timeout=90, cwd=rosutil.REPO,
                             env={**os.environ, "ROS_DOMAIN_ID": domain})
    assert as_json.returncode == 1 and json.loads(as_json.stdout) == {"count": 0, "robots": []}, as_json
