"""Stop points as events: armed, disarmed and fired, each with the door that asked, on the executor's stream."""
import pytest
from rtdl_plans import do, envelope, seq

import bt_exec

# 1 seq(root) > 2 do(a), 3 do(b), 4 do(c)
PLAN = envelope(seq(do("a"), do("b"), do("c"), description="root"))


def stop_point_events(events, plan_id):
    return [{key: e[key] for key in ("op_id", "when", "state", "source")}
            for e in events.of(plan_id) if e["event"] == "stop_point"]


def test_arming_and_firing_are_events_naming_the_op_the_phase_and_the_door(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.05}})
    plan_id = ex.submit(PLAN)["plan_id"]
    ex.stop_plan_at(plan_id, "3", "on_enter")
    ex.run_until_complete(plan_id, timeout=10)
    assert stop_point_events(events, plan_id) == [
        {"op_id": "3", "when": "on_enter", "state": "armed", "source": "api"},
        {"op_id": "3", "when": "on_enter", "state": "fired", "source": "api"}]
    fired = [e for e in events.of(plan_id) if e["event"] == "stop_point" and e["state"] == "fired"][0]
    canceled = [e for e in events.of(plan_id) if e["event"] == "node_state" and e["op_id"] == "3"][0]
    assert events.events.index(fired) < events.events.index(canceled), "the stop point fires before its op is canceled"
    assert isinstance(fired["time"], float)


def test_an_armed_stop_point_is_on_the_stream_before_the_plan_moves_on(make_executor, events):
    """An operator's view learns of the stop point while the plan still runs, not only when it fires."""
    ex = make_executor({"default": {"duration_s": 0.3}})
    plan_id = ex.submit(PLAN)["plan_id"]
    ex.stop_plan_at(plan_id, "4", "on_complete")
    ex.run_until_complete(plan_id, timeout=10)
    kinds = [(e["event"], e.get("op_id"), e.get("state")) for e in events.of(plan_id)]
    armed = kinds.index(("stop_point", "4", "armed"))
    assert armed < kinds.index(("node_state", "3", "running"))


def test_a_stop_point_armed_by_a_builtin_names_the_builtin(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.05}})
    target = ex.submit(PLAN)["plan_id"]
    arming = ex.submit(envelope(seq(do("arm it", cap="executor.builtin_stop_plan_at",
                                       args={"plan_id": target, "op_id": "4", "when": "on_enter"}))))["plan_id"]
    ex.run_until_complete(arming, timeout=10)
    ex.run_until_complete(target, timeout=10)
    assert stop_point_events(events, target) == [
        {"op_id": "4", "when": "on_enter", "state": "armed", "source": "builtin"},
        {"op_id": "4", "when": "on_enter", "state": "fired", "source": "builtin"}]


def test_a_disarmed_stop_point_lets_the_plan_go_on(make_executor, events):
    ex = make_executor({"default": {"duration_s": 0.1}})
    plan_id = ex.submit(PLAN)["plan_id"]
    ex.stop_plan_at(plan_id, "4", "on_enter")
    assert ex.get_all_plans()["plans"][0]["stop_points"] == 1
    answer = ex.disarm_stop_point(plan_id, 4, "on_enter")
    assert answer == {"success": True, "disarmed": True,
                      "message": f"Stop point disarmed: plan '{plan_id}' goes on on_enter op_id=4."}
    assert ex.get_all_plans()["plans"][0]["stop_points"] == 0
    again = ex.disarm_stop_point(plan_id, "4", "on_enter")
    assert not again["disarmed"] and "has no stop point on_enter op_id=4" in again["message"]
    record = ex.run_until_complete(plan_id, timeout=10)
    assert record["outcome"] == "succeeded" and [op["state"] for op in record["ops"]] == ["succeeded"] * 4
    assert stop_point_events(events, plan_id) == [
        {"op_id": "4", "when": "on_enter", "state": "armed", "source": "api"},
        {"op_id": "4", "when": "on_enter", "state": "disarmed", "source": "api"}]
    finished = ex.disarm_stop_point(plan_id, "4", "on_enter")
    assert not finished["disarmed"] and "is not running" in finished["message"]


@pytest.mark.parametrize("plan_id, op_id, when, source, message", [
    ("1", "9", "on_enter", "api", "disarm_stop_point: plan '1' has no op '9'"),
    ("1", "2", "on_exit", "api", "disarm_stop_point: invalid when 'on_exit'"),
    ("1", True, "on_enter", "api", "disarm_stop_point: op_id must be a non-empty string or a non-negative integer"),
    ("1", "2", "on_enter", "radio", "disarm_stop_point: invalid source 'radio'"),
])
def test_a_bad_disarm_is_refused_naming_what_is_wrong(make_executor, plan_id, op_id, when, source, message):
    ex = make_executor({"default": {"duration_s": 0.5}})
    ex.submit(PLAN)
    with pytest.raises(bt_exec.ControlError) as refused:
        ex.disarm_stop_point(plan_id, op_id, when, source)
    assert str(refused.value).startswith(message)
    assert ex.get_plan_status("1")["ops"][1]["state"] in ("pending", "running"), "the plan runs on untouched"


def test_over_http_the_events_name_http(serve_web, events):
    from bt_exec.web.client import HttpApi

    executor, server = serve_web({"default": {"duration_s": 0.3}})
    api = HttpApi(server.url)
    plan_id = api.call("submit_plan", {"graph": PLAN})["plan_id"]
    assert api.call("stop_plan_at", {"plan_id": plan_id, "op_id": 3, "when": "on_enter"})["armed"]
    assert api.call("disarm_stop_point", {"plan_id": plan_id, "op_id": "3", "when": "on_enter"})["disarmed"]
    assert api.call("stop_plan_at", {"plan_id": plan_id, "op_id": "4"})["armed"]
    executor.run_until_complete(plan_id, timeout=10)
    assert stop_point_events(events, plan_id) == [
        {"op_id": "3", "when": "on_enter", "state": "armed", "source": "http"},
        {"op_id": "3", "when": "on_enter", "state": "disarmed", "source": "http"},
        {"op_id": "4", "when": "on_complete", "state": "armed", "source": "http"},
        {"op_id": "4", "when": "on_complete", "state": "fired", "source": "http"}]
    streamed = [event for event in server.api.recent_events() if event["event"] == "stop_point"]
    assert [event["state"] for event in streamed] == ["armed", "disarmed", "armed", "fired"], "the SSE log has them"


def test_over_mcp_the_events_name_mcp_whether_served_by_the_app_or_by_bt_exec_mcp_url(serve_web, events):
    from test_mcp import TOKEN, call, run_http_session, run_session

    executor, server = serve_web({"default": {"duration_s": 3.0}}, TOKEN)  # both still run when armed
    first = executor.submit(PLAN)["plan_id"]
    second = executor.submit(PLAN)["plan_id"]

    async def arm(session, plan_id):
        last = executor.get_plan_status(plan_id)["ops"][-1]["op_id"]  # tree plans' ids follow the executor's count
        armed = await call(session, "stop_plan_at", plan_id=int(plan_id), op_id=int(last), when="on_enter")
        disarmed = await call(session, "disarm_stop_point", plan_id=plan_id, op_id=last, when="on_enter")
        return armed["armed"], disarmed["disarmed"]

    assert run_http_session(server.url + "mcp", lambda session: arm(session, first))["value"] == (True, True)
    assert run_session(["--url", server.url], lambda session: arm(session, second),
                       env={"BT_EXEC_WEB_TOKEN": TOKEN})["value"] == (True, True)
    executor.cancel_all(wait_ms=5000)
    for plan_id in (first, second):
        assert [(e["state"], e["source"]) for e in stop_point_events(events, plan_id)] == [
            ("armed", "mcp"), ("disarmed", "mcp")]
