"""What a planner gets over ROS: warnings on a submit, the wait cap, the call guard, the feedback and snapshot.

One node process with a call guard file and a sim script whose robot state is low on battery.
"""
import json
import time

import pytest
import rosutil
from rosutil import do, plan, seq

GUARD = {
    "default": "allow",
    "rules": [
        {"name": "no-laser", "effect": "deny", "cap": "laser.*"},
        {"name": "arm-needs-charge", "effect": "deny", "cap": "arm.*", "state": {"battery": {"lt": 20}}},
    ],
}
SCRIPT = {"default": {"outcome": "success", "duration_s": 0.02, "output": {"seen": "x" * 400}},
          "caps": {"sim.slow": {"outcome": "success", "duration_s": 60}},
          "state": {"battery": 12}}


@pytest.fixture(scope="module")
def node(ros, tmp_path_factory):
    folder = tmp_path_factory.mktemp("planner")
    (folder / "guard.json").write_text(json.dumps(GUARD))
    (folder / "script.json").write_text(json.dumps(SCRIPT))
    process = rosutil.NodeProcess(folder / "node.log", {"sim_script": str(folder / "script.json"),
                                                        "call_guard_file": str(folder / "guard.json")})
    process.wait_ready(ros)
    yield process
    assert process.stop() == 0, process.log()


def submit(ros, node, text: str):
    return ros.call(node.name, "submit", graph_json=text)


def wait_finished(ros, node, plan_id: str, timeout: float = 10.0) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        response = ros.call(node.name, "get_status", plan_id=plan_id)
        status = json.loads(response.status_json)
        if response.found and "outcome" in status:
            return status
        time.sleep(0.05)
    raise AssertionError(f"plan {plan_id} did not finish in {timeout} s")


def test_a_reply_with_prose_around_its_json_is_accepted_with_a_warning(ros, node):
    reply = (rosutil.REPO / "examples" / "rtdl" / "pilot_reply_with_prose.txt").read_text()
    response = submit(ros, node, reply)
    assert response.accepted and response.plan_id, response
    warnings = json.loads(response.warnings_json)
    assert [warning["code"] for warning in warnings] == ["text_skipped"], warnings
    assert json.loads(response.issues_json) == []


def test_a_plain_plan_has_no_warnings(ros, node):
    response = submit(ros, node, plan(seq(do())))
    assert response.accepted and json.loads(response.warnings_json) == []


def test_a_meta_op_asking_a_long_wait_is_answered_with_the_cap(ros, node):
    text = (rosutil.REPO / "examples" / "rtdl" / "cancel_all_long_wait.json").read_text()
    response = submit(ros, node, text)
    assert response.accepted and response.verdict == "control", response
    assert "30000" in response.message.replace(",", "") and "capped" in response.message, response.message
    assert [warning["code"] for warning in json.loads(response.warnings_json)] == ["wait_capped"]


def test_a_plan_the_guard_denies_is_refused_at_submit_with_op_and_rule(ros, node):
    response = submit(ros, node, plan(seq(do(), do("laser.fire"))))
    assert not response.accepted and response.verdict == "invalid", response
    (issue,) = [issue for issue in json.loads(response.issues_json) if issue["code"] == "call_denied"]
    assert "no-laser" in issue["message"] and "laser.fire" in issue["message"], issue
    assert issue["path"] == "/rtdl/children/1"


def test_a_state_conditioned_deny_fails_its_op_at_call_time(ros, node):
    response = submit(ros, node, plan(seq(do("camera.snap"), do("arm.grip"), do("audio.speak"))))
    assert response.accepted, json.loads(response.issues_json)  # battery is a robot state: decided when called
    record = wait_finished(ros, node, response.plan_id)
    states = {op["cap"]: op for op in record["ops"] if op.get("cap")}
    assert states["camera.snap"]["state"] == "succeeded"
    assert states["arm.grip"]["state"] == "failed" and "arm-needs-charge" in states["arm.grip"]["result"]["error"]
    assert states["audio.speak"]["state"] == "pending" and record["outcome"] == "failed"


def test_feedback_and_snapshot_over_ros(ros, node):
    finished = submit(ros, node, plan(seq(do("camera.snap"), do("arm.grip"))))
    wait_finished(ros, node, finished.plan_id)
    response = ros.call(node.name, "get_status", plan_id=finished.plan_id, feedback=True, feedback_chars=100)
    feedback = json.loads(response.status_json)
    assert response.found and feedback["running"] is False and feedback["outcome"] == "failed", feedback
    snap, grip = feedback["ops"]
    assert (snap["cap"], snap["success"], snap["output"]["truncated"]) == ("camera.snap", True, True)
    assert (grip["cap"], grip["success"]) == ("arm.grip", False) and "arm-needs-charge" in grip["error"]
    bad = ros.call(node.name, "get_status", plan_id=finished.plan_id, feedback=True, feedback_chars=5)
    assert not bad.found and "100" in json.loads(bad.status_json)["error"]

    running = submit(ros, node, plan(seq(do("sim.slow"), do()), description="still going"))
    try:
        snapshot = json.loads(ros.call(node.name, "list_plans", ops=True).plans_json)
        (entry,) = [entry for entry in snapshot["plans"] if entry["plan_id"] == running.plan_id]
        assert entry["description"] == "still going" and [op["kind"] for op in entry["ops"]] == ["sequence", "do",
                                                                                                  "do"]
        plain = json.loads(ros.call(node.name, "list_plans").plans_json)
        assert all("ops" not in entry for entry in plain["plans"]) and plain["count"] == snapshot["count"]
    finally:
        ros.call(node.name, "cancel", plan_id=running.plan_id, wait_ms=5000)


def test_client_commands_show_warnings_and_feedback(ros, node, tmp_path):
    finished = submit(ros, node, plan(seq(do("camera.snap"))))
    wait_finished(ros, node, finished.plan_id)
    reply = rosutil.REPO / "examples" / "rtdl" / "pilot_reply_with_prose.txt"
    submitted = rosutil.run_cli("submit", str(reply), "--node", node.name)
    assert submitted.returncode == 0 and "accepted: plan" in submitted.stdout, submitted.stderr
    assert "warning:" in submitted.stderr and "[text_skipped]" in submitted.stderr
    as_json = rosutil.run_cli("submit", str(reply), "--json", "--node", node.name)
    assert [w["code"] for w in json.loads(as_json.stdout)["warnings"]] == ["text_skipped"], as_json.stderr
    feedback = rosutil.run_cli("status", finished.plan_id, "--feedback", "--feedback-chars", "100",
                               "--node", node.name)
    assert feedback.returncode == 0, feedback.stderr
    answer = json.loads(feedback.stdout)
    assert answer["outcome"] == "succeeded" and answer["ops"][0]["output"]["truncated"] is True, answer
    snapshot = rosutil.run_cli("plans", "--ops", "--json", "--node", node.name)
    assert snapshot.returncode == 0 and "plans" in json.loads(snapshot.stdout), snapshot.stderr
    for result in (submitted, as_json, feedback, snapshot):
        assert "Traceback" not in result.stderr
