"""Node parameters: the executor's limits (op_timeout_s, max_plans, status_queue, max_string_chars) and the
moveit backend's start-up checks, on a node process driven over real ROS 2."""
import importlib.util
import json
import time

import pytest
import rosutil
from rosutil import do, plan, seq

POSES = rosutil.REPO / "config" / "grant_cell_poses.yaml"
LIMITS = rosutil.REPO / "config" / "motion_limits.yaml"


def exits_2(start_node, message, **params):
    node = start_node(ready=False, **params)
    code = node.process.wait(30)
    log = node.log()
    assert code == 2, log
    assert message in log and "Traceback" not in log, log
    return log


def test_op_timeout_ends_a_long_call_timeout(ros, start_node, tmp_path):
    script = tmp_path / "five.json"
    script.write_text(json.dumps({"default": {"outcome": "success", "duration_s": 0.02},
                                  "caps": {"sim.five": {"outcome": "success", "duration_s": 5}}}))
    node = start_node(sim_script=str(script), op_timeout_s=0.2, max_plans=2, status_queue=100)
    answer = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.five"), do("sim.after"))))
    assert answer.accepted, answer.message
    deadline = time.monotonic() + 10
    while True:
        response = ros.call(node.name, "get_status", plan_id=answer.plan_id)
        status = json.loads(response.status_json)
        if response.found and "outcome" in status:
            break
        assert time.monotonic() < deadline, f"plan did not finish: {status}"
        time.sleep(0.05)
    by_cap = {op.get("cap"): op for op in status["ops"]}
    assert by_cap["sim.five"]["state"] == "timeout", status  # cut short: a 5 s call left alone succeeds
    assert by_cap["sim.five"]["result"]["event"] == "timeout"
    assert by_cap["sim.after"]["state"] != "succeeded"  # the sequence stopped at the timed-out call
    assert status["outcome"] == "failed"


def test_max_plans_refuses_one_more(ros, start_node, sim_script):
    node = start_node(sim_script=str(sim_script), max_plans=1)
    first = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"))))
    assert first.accepted, first.message
    second = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"))))
    assert not second.accepted
    assert "max_plans" in second.message or "too_many_plans" in second.issues_json, second


def test_max_string_chars_refuses_a_long_string_naming_where_it_is(ros, start_node, sim_script):
    node = start_node(sim_script=str(sim_script), max_string_chars=40)
    answer = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.act", description="x" * 41))))
    assert not answer.accepted
    issues = json.loads(answer.issues_json)
    assert issues[0]["code"] == "string_too_long" and issues[0]["path"].endswith("/description"), issues


@pytest.mark.parametrize("params, message", [
    ({"op_timeout_s": "-1.0"}, "op_timeout_s must be 0.0 (no limit) or a positive number"),
    ({"op_timeout_s": "-1"}, "parameter op_timeout_s must be a floating point number"),
    ({"max_plans": "0"}, "max_plans must be an integer >= 1"),
    ({"status_queue": "0"}, "status_queue must be an integer >= 1"),
    ({"max_string_chars": "0"}, "max_string_chars must be an integer >= 1"),
    ({"backend": "moveit", "moveit_group": "''"}, "moveit_group must not be empty"),
])
def test_bad_limits_exit_2_naming_the_parameter(start_node, params, message):
    exits_2(start_node, message, **params)


def test_moveit_without_a_scene_exits_2_naming_scene_file(start_node):
    exits_2(start_node, "backend moveit needs scene_file", backend="moveit", cell_poses_file=str(POSES))


def test_moveit_without_poses_exits_2_naming_cell_poses_file(start_node):
    exits_2(start_node, "backend moveit needs cell_poses_file", backend="moveit", scene_file=str(rosutil.SCENE))


def test_moveit_with_a_bad_poses_file_exits_2_naming_the_file_and_key(start_node, tmp_path):
    poses = tmp_path / "poses.yaml"
    poses.write_text("work: {position: [0.5, 0.0]}\n")
    exits_2(start_node, f"cell poses file {poses}: work.position must be 3 finite numbers", backend="moveit",
            scene_file=str(rosutil.SCENE), cell_poses_file=str(poses))


def test_moveit_with_a_bad_limits_file_exits_2_naming_the_parameter(start_node, tmp_path):
    exits_2(start_node, "motion_limits_file: motion limits: cannot read", backend="moveit",
            scene_file=str(rosutil.SCENE), cell_poses_file=str(POSES),
            motion_limits_file=str(tmp_path / "none.yaml"))


def test_physics_with_a_bad_limits_file_exits_2_naming_the_parameter(start_node, tmp_path):
    pytest.importorskip("mujoco", reason="backend physics needs the physics extra")
    exits_2(start_node, "motion_limits_file: motion limits: cannot read", backend="physics",
            motion_limits_file=str(tmp_path / "none.yaml"))


@pytest.mark.skipif(importlib.util.find_spec("moveit") is not None,
                    reason="moveit imports here: the node would start MoveItPy")
def test_moveit_where_moveitpy_is_missing_exits_2_with_one_clear_line(start_node):
    log = exits_2(start_node, "backend moveit needs MoveItPy and its messages (ros-jazzy-moveit-py, "
                              "ros-jazzy-moveit-msgs, sensor_msgs): ", backend="moveit",
                  scene_file=str(rosutil.SCENE), cell_poses_file=str(POSES), motion_limits_file=str(LIMITS))
    assert "see docs/moveit.md" in log
    lines = [line for line in log.splitlines() if "needs MoveItPy" in line]
    assert len(lines) == 1 and lines[0].startswith("bt-exec: cannot start: "), log


@pytest.mark.parametrize("params, messages", [
    ({"contract": "iiwa"}, ["contract is not a parameter of bt_exec_node", "bt_exec_iiwa_node",
                            "bt_exec.launch.py contract:=iiwa"]),
    ({"tick_rate": 5.0, "no_such.thing": 1}, ["tick_rate is not a parameter of bt_exec_node (did you mean "
                                             "tick_rate_hz?)", "no_such.thing is not a parameter"]),
], ids=["contract", "typo-and-unknown"])
def test_an_unknown_parameter_is_refused_at_start_naming_it(start_node, params, messages):
    log = exits_2(start_node, "unknown parameters", **params)
    assert all(message in log for message in messages), log
    assert len(log.strip().splitlines()) == 1, log  # one line, nothing started


def test_the_parameters_ros_gives_every_node_are_taken(ros, start_node):
    node = start_node(use_sim_time="false", **{"qos_overrides./parameter_events.publisher.depth": 100})
    assert ros.call(node.name, "list_plans") is not None


def test_a_guarded_ros_node_judges_a_cap_by_the_server_it_reaches(ros, start_node, tmp_path):
    rules = tmp_path / "rules.json"
    rules.write_text(json.dumps({"rules": [{"name": "arm-off", "effect": "deny", "cap": "arm.*"}]}))
    node = start_node(backend="ros", call_guard_file=str(rules))
    for cap in ("arm.move", "arm_.move", "arm-.move"):  # all reach <ns>/bt_exec/capabilities/arm
        answer = ros.call(node.name, "submit", graph_json=plan(seq(do(cap))))
        assert not answer.accepted, (cap, answer.message)
        (issue,) = json.loads(answer.issues_json)
        assert issue["code"] == "call_denied" and "arm-off" in issue["message"], issue


NAV2_NODES = rosutil.REPO / "examples" / "btcpp" / "nav2_nodes.xml"
BT_XML = ('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence>'
          '<Spin spin_dist="1.0"/><SpinAround/></Sequence></BehaviorTree></root>')


def test_node_catalog_checks_bt_xml_leaves_against_the_tree_nodes_model(ros, start_node, sim_script):
    node = start_node(sim_script=str(sim_script), node_catalog=str(NAV2_NODES))
    answer = ros.call(node.name, "submit", graph_json=BT_XML)
    assert not answer.accepted
    issues = json.loads(answer.issues_json)
    assert [(issue["code"], issue["path"]) for issue in issues] == [
        ("unknown_node", "/root/BehaviorTree[@ID='Main']/Sequence[1]/SpinAround[1]/name()")], issues


def test_a_node_catalog_that_cannot_be_read_exits_2_naming_it(start_node, tmp_path):
    missing = tmp_path / "nodes.xml"
    exits_2(start_node, "nodes.xml", node_catalog=str(missing))
