"""`~/control`: any operation of the control API by name, answered as the node's own web app answers it."""
import json

from test_ros_web import call_http, free_port

from rosutil import do, plan, seq


def control(ros, node, operation: str, args=None, door: str = "", args_json: str | None = None):
    response = ros.call(node.name, "control", operation=operation, door=door,
                        args_json=json.dumps(args or {}) if args_json is None else args_json)
    return response.success, response.status, json.loads(response.answer_json)


def test_the_control_service_answers_as_the_web_app_does(ros, start_node, sim_script):
    port = free_port()
    node = start_node(sim_script=str(sim_script), web_port=port)
    running = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow", "hold"), do()), description="held"))
    assert running.accepted
    plan_id = running.plan_id
    bad_plan = plan(seq(do("no.such_cap")))
    for method, path, operation, args in (
            ("GET", "/api/plans", "get_all_plans", {}),
            ("GET", f"/api/plans/{plan_id}/status?summary=true", "get_plan_status",
             {"plan_id": plan_id, "summary": True}),
            ("GET", f"/api/plans/{plan_id}/ops/2", "get_op", {"plan_id": plan_id, "op_id": "2"}),
            ("GET", "/api/plans/999/status", "get_plan_status", {"plan_id": "999"}),
            ("POST", "/api/validate", "validate_plan", {"graph": bad_plan}),
            ("POST", f"/api/plans/{plan_id}/stop_at", "stop_plan_at", {"plan_id": plan_id, "op_id": "3",
                                                                         "when": "sometime"})):
        body = None if method == "GET" else {key: value for key, value in args.items() if key != "plan_id"}
        status, over_http = call_http(port, method, path, body)
        success, control_status, over_ros = control(ros, node, operation, args)
        assert (control_status, over_ros) == (status, over_http), operation
        assert success == (status == 200)
    # The status follows from the refusal's type, as on every door: an unknown plan is not found, not a conflict.
    success, status, unknown = control(ros, node, "get_plan_status", {"plan_id": "999"})
    assert (success, status, unknown["error"]["code"]) == (False, 404, "not_found")
    success, status, conflict = control(ros, node, "get_plan_result", {"plan_id": plan_id})
    assert (success, status, conflict["error"]["code"]) == (False, 409, "control_refused")

    # What a ROS door adds: who asked (named by the events), and its own refusals.
    success, _status, armed = control(ros, node, "stop_plan_at", {"plan_id": plan_id, "op_id": "3",
                                                                   "when": "on_enter"}, door="mcp")
    assert success and armed["success"]
    events = call_http(port, "GET", "/api/events/recent")[1]["events"]
    assert [e["source"] for e in events if e["event"] == "stop_point"] == ["mcp"]
    success, _status, disarmed = control(ros, node, "disarm_stop_point", {"plan_id": plan_id, "op_id": "3",
                                                                          "when": "on_enter"})
    assert success and disarmed["disarmed"]
    events = call_http(port, "GET", "/api/events/recent")[1]["events"]
    assert [e["source"] for e in events if e["event"] == "stop_point"] == ["mcp", "ros"]

    success, status, answer = control(ros, node, "", {})  # the empty request: refused, nothing changes
    assert (success, status, answer["error"]["code"]) == (False, 404, "unknown_operation")
    success, status, answer = control(ros, node, "get_all_plans", args_json="{not json")
    assert (success, status, answer["error"]["code"]) == (False, 400, "bad_json")
    success, status, answer = control(ros, node, "submit_plan", args_json='"x' + "y" * (40 * 1024 * 1024) + '"')
    assert (success, status, answer["error"]["code"]) == (False, 413, "too_large")
    deep = "[" * 100_000 + "]" * 100_000
    success, status, answer = control(ros, node, "submit_plan", args_json=deep)
    assert (success, status) == (False, 400) and "nests too deeply" in answer["error"]["message"]
    success, status, answer = control(ros, node, "get_all_plans", args_json="[1, 2]")
    assert (success, status) == (False, 400) and "must be a JSON object" in answer["error"]["message"]

    success, _status, cancelled = control(ros, node, "cancel_plan", {"plan_id": plan_id, "wait_ms": 5000})
    assert success and cancelled["finished"]
    assert node.alive()
