"""Several robots on one DDS domain: each bt_exec node in a namespace of its own, found by `bt-exec robots` and
addressed with `--robot NS`; a plan stays on the robot it was sent to."""
import json

import rosutil
from rosutil import do, plan, seq


def test_robots_are_discovered_and_addressed_by_namespace(ros, start_node, sim_script):
    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    running = ros.call(second.name, "submit", graph_json=plan(seq(do("sim.slow"))))
    assert running.accepted
    try:
        listed = rosutil.run_cli("robots", "--json", "--wait", "3")
        assert listed.returncode == 0 and "Traceback" not in listed.stderr, listed.stderr
        robots = {robot["namespace"]: robot for robot in json.loads(listed.stdout)["robots"]}
        assert robots[first.namespace] == {"namespace": first.namespace, "node": first.name, "health": "ok",
                                           "plans": []}
        assert robots[second.namespace]["plans"] == [running.plan_id]

        text = rosutil.run_cli("robots", "--wait", "3")
        assert f"{second.namespace}  {second.name}  ok  1 plan(s) in flight: {running.plan_id}" in text.stdout

        namespace = first.namespace.lstrip("/")  # --robot takes it with or without the leading slash
        plans = rosutil.run_cli("plans", "--robot", namespace, "--json")
        assert plans.returncode == 0 and json.loads(plans.stdout) == {"count": 0, "plans": []}, plans.stderr
        other = rosutil.run_cli("plans", "--robot", second.namespace, "--json")
        assert [entry["plan_id"] for entry in json.loads(other.stdout)["plans"]] == [running.plan_id]

        both = rosutil.run_cli("plans", "--robot", "robot1", "--node", "/bt_exec")
        assert both.returncode == 2 and "not allowed with" in both.stderr
        bad = rosutil.run_cli("plans", "--robot", "1robot")
        assert bad.returncode == 2 and "is not a ROS namespace" in bad.stderr
    finally:
        ros.call(second.name, "cancel", plan_id=running.plan_id, wait_ms=5000)
