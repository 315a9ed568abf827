"""Stop points, pause points, pause, resume and step over ROS: a real node process, a real rclpy client.

Each change is checked twice: in the service's answer and in the events on ``~/status``, which name the
door that asked (``source: "ros"``).
"""
import json
import time

import pytest
import rosutil
from rosutil import do, plan, seq


@pytest.fixture(scope="module")
def node(ros, sim_script, tmp_path_factory):
    process = rosutil.NodeProcess(tmp_path_factory.mktemp("pause") / "node.log",
                                  {"sim_script": str(sim_script), "tick_rate_hz": 200.0})
    process.wait_ready(ros)
    yield process
    code = process.stop()
    assert code == 0, f"the node did not stop cleanly ({code}):\n{process.log()}"


@pytest.fixture
def api(ros, node):
    class Api:
        def call(self, service, **fields):
            return ros.call(node.name, service, **fields)

        def submit(self, text):
            response = self.call("submit", graph_json=text)
            assert response.accepted, response.message
            return response.plan_id

        def status(self, plan_id):
            response = self.call("get_status", plan_id=plan_id)
            assert response.found, response.status_json
            return json.loads(response.status_json)

        def wait_status(self, plan_id, predicate, timeout=10.0):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                status = self.status(plan_id)
                if predicate(status):
                    return status
                time.sleep(0.02)
            raise AssertionError(f"plan {plan_id}: never as expected; last status {status}")

    collector, subscription = ros.subscribe(f"{node.name}/status")
    ros.wait_matched(subscription)
    api = Api()
    api.events = collector
    yield api
    ros.unsubscribe(subscription)
    assert node.alive(), f"the node died:\n{node.log()}"
    ros.call(node.name, "cancel", plan_id="", wait_ms=5000)


def events_of(api, plan_id, kind, count=1, **fields):
    """Wait for ``count`` events ``kind`` of the plan on ~/status with ``fields``; the list of them."""
    def matching(messages):
        found = [event for event in map(json.loads, messages) if event.get("plan_id") == plan_id
                 and event["event"] == kind and all(event.get(key) == value for key, value in fields.items())]
        return found if len(found) >= count else None

    return api.events.wait_for(matching)


def states(status):
    return [op["state"] for op in status["ops"]]


def test_a_stop_point_armed_and_disarmed_over_ros_says_so_on_status(api):
    plan_id = api.submit(plan(seq(do("sim.slow"), do())))
    last = api.status(plan_id)["ops"][2]["op_id"]
    armed = api.call("stop_at", plan_id=plan_id, op_id=last, when="on_enter")
    assert armed.success and "Stop point set" in armed.message, armed.message
    (event,) = events_of(api, plan_id, "stop_point", state="armed")
    assert (event["source"], event["action"], event["op_id"], event["when"]) == ("ros", "cancel", last, "on_enter")
    assert api.status(plan_id)["ops"][2]["stop_point"] == "on_enter"

    disarmed = api.call("disarm", plan_id=plan_id, op_id=last, when="on_enter")
    assert (disarmed.success, disarmed.disarmed) == (True, True) and "disarmed" in disarmed.message
    (event,) = events_of(api, plan_id, "stop_point", state="disarmed")
    assert (event["source"], event["op_id"]) == ("ros", last)
    again = api.call("disarm", plan_id=plan_id, op_id=last, when="on_enter")
    assert (again.success, again.disarmed) == (True, False) and "nothing to disarm" in again.message

    for service, fields in (("disarm", {"plan_id": plan_id, "op_id": "9999"}),
                            ("disarm", {"plan_id": "424242", "op_id": "1"}),
                            ("stop_at", {"plan_id": plan_id, "op_id": last, "action": "halt"})):
        refused = api.call(service, **fields)
        assert not refused.success and refused.message, (service, fields)
    assert "halt" in refused.message


def test_pause_holds_the_next_op_and_resume_completes_the_plan(api):
    plan_id = api.submit(plan(seq(do("sim.hold"), do(), do())))
    first = api.wait_status(plan_id, lambda status: states(status)[1] == "running")["ops"][1]["op_id"]
    paused = api.call("pause", plan_id=plan_id)
    assert (paused.success, paused.changed) == (True, True) and "paused" in paused.message, paused.message
    (event,) = events_of(api, plan_id, "paused")
    assert event["source"] == "ros"
    again = api.call("pause", plan_id=plan_id)
    assert (again.success, again.changed) == (True, False) and "already paused" in again.message

    # the sim robot pauses the call in progress too, so the plan holds where it is: nothing after it starts
    events_of(api, plan_id, "node_state", op_id=first, state="paused")
    status = api.status(plan_id)
    assert status["paused"] is True and states(status)[1:] == ["paused", "pending", "pending"], status
    assert "outcome" not in status
    listed = json.loads(api.call("list_plans").plans_json)["plans"]
    assert [p["paused"] for p in listed if p["plan_id"] == plan_id] == [True]

    resumed = api.call("resume", plan_id=plan_id)
    assert (resumed.success, resumed.changed) == (True, True) and "resumed" in resumed.message
    (event,) = events_of(api, plan_id, "resumed")
    assert event["source"] == "ros"
    (complete,) = events_of(api, plan_id, "plan_complete")
    assert complete["outcome"] == "succeeded"
    not_paused = api.call("resume", plan_id=plan_id)
    assert (not_paused.success, not_paused.changed) == (True, False) and "not running" in not_paused.message
    for service in ("pause", "resume", "step"):
        unknown = api.call(service, plan_id="424242")
        assert not unknown.success and "424242" in unknown.message, (service, unknown.message)
        empty = api.call(service, plan_id="")
        assert not empty.success and "plan_id" in empty.message, (service, empty.message)


def test_a_pause_point_armed_over_ros_fires_then_step_and_resume_go_on(api):
    plan_id = api.submit(plan(seq(do("sim.hold"), do(), do())))
    ids = [op["op_id"] for op in api.status(plan_id)["ops"]]
    armed = api.call("stop_at", plan_id=plan_id, op_id=ids[2], when="on_enter", action="pause")
    assert armed.success and "Pause point set" in armed.message, armed.message
    (event,) = events_of(api, plan_id, "stop_point", state="armed")
    assert (event["source"], event["action"]) == ("ros", "pause")

    (point,) = events_of(api, plan_id, "pause_point")
    assert (point["op_id"], point["when"], point["source"]) == (ids[2], "on_enter", "ros")
    (paused,) = events_of(api, plan_id, "paused")
    assert (paused["source"], paused["op_id"]) == ("ros", ids[2])
    status = api.wait_status(plan_id, lambda status: status["paused"])
    assert states(status)[1:] == ["succeeded", "pending", "pending"] and status["ops"][2].get("held") is True

    stepped = api.call("step", plan_id=plan_id)
    assert (stepped.success, stepped.changed) == (True, False) and "resumed until" in stepped.message
    (resumed,) = events_of(api, plan_id, "resumed")
    assert resumed["source"] == "ros"
    events_of(api, plan_id, "paused", count=2)  # behind the one op the step let in
    status = api.wait_status(plan_id, lambda status: status["paused"] and states(status)[2] == "succeeded")
    assert states(status)[3] == "pending"

    assert api.call("resume", plan_id=plan_id).changed
    (complete,) = events_of(api, plan_id, "plan_complete")
    assert complete["outcome"] == "succeeded"


def test_the_plan_topic_carries_the_args_as_submitted(ros, api, node):
    text = plan(seq(do(args={"pose": [0.4, -0.1, 0.25], "frame": "table"})), description="with args")
    collector, subscription = ros.subscribe(f"{node.name}/plan", rosutil.LATCHED)
    try:
        ros.wait_matched(subscription)
        plan_id = api.submit(text)
        published = collector.wait_for(lambda messages: [m for m in messages if m == text])
    finally:
        ros.unsubscribe(subscription)
    (call,) = json.loads(published[0])["rtdl"]["children"]
    assert call["args"] == {"pose": [0.4, -0.1, 0.25], "frame": "table"}
    # the same args as the executor shows them (live status, or the final record once it finished)
    assert api.status(plan_id)["ops"][1]["args"] == call["args"]
