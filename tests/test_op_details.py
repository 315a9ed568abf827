"""What views show of each op: a call's cap and args (cut past 4 KiB, whole from get_op), the op a failed
plan failed at, and a step graph's trace; through the Python API, HTTP and MCP."""
import pytest
from qwen3_graphs import cap_to_hatch, scene
from rtdl_plans import do, envelope, par, seq

import bt_exec
from bt_exec.runtime.budgets import ARGS_SHOWN_CHARS

BIG = {"poses": ["p" * 100] * 50}  # over 4 KiB of JSON
PLAN = envelope(seq(do("reach", cap="arm.reach", args={"x": 1.5}), par(do("grab", cap="arm.grab", args=BIG),
                                                                       do("look")), description="root"))


def ops_by_id(ops):
    return {op["op_id"]: op for op in ops}


def test_status_lists_each_calls_cap_and_args_cutting_large_args_to_a_marker(make_executor):
    ex = make_executor({"default": {"duration_s": 1.0}})
    plan_id = ex.submit(PLAN)["plan_id"]
    ops = ops_by_id(ex.get_plan_status(plan_id)["ops"])
    assert (ops["2"]["cap"], ops["2"]["args"], ops["2"]["provider"]) == ("arm.reach", {"x": 1.5}, "arm")
    assert "cap" not in ops["1"] and "args" not in ops["3"] and "provider" not in ops["3"], "composites have no call"
    marker = ops["4"]["args"]
    assert marker["truncated"] is True and marker["bytes"] > ARGS_SHOWN_CHARS
    assert marker["preview"].startswith('{"poses"')
    bare = ops_by_id(ex.get_plan_status(plan_id, with_args=False)["ops"])
    assert "cap" not in bare["2"] and "args" not in bare["2"] and "provider" not in bare["2"]
    with pytest.raises(bt_exec.ControlError, match="with_args must be true or false"):
        ex.get_plan_status(plan_id, with_args="no")


def test_status_names_a_calls_provider_where_the_plan_names_one(make_executor):
    ex = make_executor({"default": {"duration_s": 1.0}})
    arena = {"plan_id": "p", "root_index": 0, "nodes": [
        {"node_kind": 0, "children": [1, 2], "op_id": "root", "description": "two calls"},
        {"node_kind": 2, "children": [], "op_id": "named", "description": "a provider named",
         "call": {"call_id": "c1", "provider_id": "arm_a", "contract_id": "sim.act", "args_json": "{}"}},
        {"node_kind": 2, "children": [], "op_id": "unnamed", "description": "no provider named",
         "call": {"call_id": "c2", "contract_id": "sim.act", "args_json": "{}"}}]}
    answer = ex.submit(arena)
    assert answer["accepted"], answer
    ops = ops_by_id(ex.get_plan_status(answer["plan_id"])["ops"])
    assert ops["named"]["provider"] == "arm_a"
    assert "provider" not in ops["unnamed"] and "provider" not in ops["root"]


def test_get_op_gives_the_whole_op_live_and_finished(make_executor):
    ex = make_executor({"default": {"duration_s": 0.2}})
    plan_id = ex.submit(PLAN)["plan_id"]
    ex.stop_plan_at(plan_id, "5", "on_complete")
    live = ex.get_op(plan_id, 4)
    assert live["running"] and live["op"]["args"] == BIG and live["op"]["cap"] == "arm.grab"
    assert ex.get_op(plan_id, "5")["op"]["stop_point"] == "on_complete"
    ex.run_until_complete(plan_id, timeout=10)
    tree = ops_by_id(ex.get_plan_tree(plan_id)["ops"])
    assert tree["4"]["args"]["truncated"] is True and tree["2"]["args"] == {"x": 1.5}
    finished = ex.get_op(plan_id, "4")
    assert not finished["running"] and finished["op"]["args"] == BIG and finished["op"]["state"] == "succeeded"
    assert ex.get_plan_result(plan_id)["ops"][3]["args"] == BIG, "the record keeps args whole"
    with pytest.raises(bt_exec.ControlError, match="get_op: plan '1' has no op '9'"):
        ex.get_op(plan_id, "9")
    with pytest.raises(bt_exec.ControlError, match="get_op: no plan '7' is running or kept"):
        ex.get_op(7, "1")


def test_a_failed_plan_names_the_op_it_failed_at_everywhere(make_executor, events):
    ex = make_executor({"caps": {"arm.grab": {"outcome": "failure", "error": "gripper jammed"}},
                        "default": {"duration_s": 0.05}})
    plan_id = ex.submit(PLAN)["plan_id"]
    record = ex.run_until_complete(plan_id, timeout=10)
    failed_op = {"op_id": "4", "description": "grab", "error": "gripper jammed"}
    assert record["outcome"] == "failed" and record["failed_op"] == failed_op
    assert ex.get_finished_plans()["plans"][0]["failed_op"] == failed_op
    assert ex.get_plan_tree(plan_id)["failed_op"] == failed_op
    assert events.complete(plan_id)["failed_op"] == failed_op
    ok = ex.submit(envelope(do("fine")))["plan_id"]
    assert ex.run_until_complete(ok, timeout=10)["failed_op"] is None


def test_a_step_graphs_tree_view_carries_its_trace_live_and_finished(make_executor):
    ex = make_executor(scene=scene(), max_steps=50)
    plan_id = ex.submit(cap_to_hatch())["plan_id"]
    live = ex.get_plan_tree(plan_id)
    assert live["trace"] == [] or set(live["trace"][0]) == {"step", "outcome", "next", "time"}
    ex.run_until_complete(plan_id, timeout=10)
    trace = ex.get_plan_tree(plan_id)["trace"]
    assert [(t["step"], t["outcome"], t["next"]) for t in trace] == [
        ("t1", "success", "t2"), ("t2", "success", "t3"), ("t3", "success", "t4"), ("t4", "success", "t5"),
        ("t5", "success", "completed")]
    assert all("state" not in entry for entry in trace), "the world's state is the record's, not the view's"


def test_http_and_mcp_give_the_same_op(serve_web):
    from test_mcp import TOKEN, call, run_http_session

    from bt_exec.web.client import HttpApi

    executor, server = serve_web({"default": {"duration_s": 2.0}}, TOKEN)
    plan_id = executor.submit(PLAN)["plan_id"]
    api = HttpApi(server.url, token=TOKEN)
    over_http = api.call("get_op", {"plan_id": plan_id, "op_id": "4"})
    bare = api.call("get_plan_status", {"plan_id": plan_id, "with_args": False})
    assert over_http["op"]["args"] == BIG and "args" not in bare["ops"][1]

    async def body(session):
        return await call(session, "get_op", plan_id=int(plan_id), op_id=4)

    assert run_http_session(server.url + "mcp", body)["value"] == over_http
    executor.cancel_all(wait_ms=5000)
