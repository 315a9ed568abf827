"""The Robonix door's pure conversions where the server's tests cannot reach every case: refusals bounded to fit a
gRPC status, robonix-executor's checks on arenas too deep for recursion, ControlPlan read as it reads it, and
the active plans' order."""
from __future__ import annotations

import json

import pytest

from bt_exec.robonix import convert
from bt_exec.robonix.wire import executor_pb2, pilot_pb2


def chain(depth: int, cycle: bool = False) -> pilot_pb2.Plan:
    """Sequences nested ``depth`` deep over one do node; ``cycle``: the last sequence points back at the root."""
    nodes = [pilot_pb2.RtdlNode(node_kind=convert.SEQUENCE, children=[i + 1], op_id=f"s{i}", description="down")
             for i in range(depth)]
    leaf = pilot_pb2.RtdlNode(node_kind=convert.DO, op_id="leaf", description="act")
    leaf.call.CopyFrom(pilot_pb2.CapabilityCall(call_id="c", provider_id="p", contract_id="x/y", args_json="{}"))
    if cycle:
        nodes[-1].children[:] = [0]
    return pilot_pb2.Plan(plan_id="deep", nodes=nodes + [leaf])


def test_a_deep_arena_is_walked_without_recursion():
    assert convert.robonix_refusal(convert.msg_to_arena(chain(5000))) is None
    assert convert.robonix_refusal(convert.msg_to_arena(chain(5000, cycle=True))) == "cycle detected at node 0"


def test_a_node_shared_by_two_parents_is_no_cycle_to_robonix():
    nodes = [pilot_pb2.RtdlNode(node_kind=convert.PARALLEL, children=[1, 1], op_id="p", description="twice"),
             pilot_pb2.RtdlNode(node_kind=convert.SEQUENCE, op_id="s", description="empty")]
    assert convert.robonix_refusal(convert.msg_to_arena(pilot_pb2.Plan(nodes=nodes))) is None


def sent_bytes(text: str) -> int:
    return sum(1 if 0x20 <= byte <= 0x7E and byte != 0x25 else 3 for byte in text.encode())


def test_a_refusal_keeps_the_issues_that_fit_a_grpc_status():
    issues = [{"code": "empty_description", "path": f"nodes[{i}].description", "message": "description … empty 100%",
               "fix": [{"op": "replace", "path": f"/nodes/{i}/description", "value": "TODO: describe"}]}
              for i in range(500)]
    message = convert.refusal_message("node 0 description must not be empty", issues)
    assert sent_bytes(message) <= convert.MAX_REFUSAL_BYTES
    reason, _, details = message.partition("\n")
    assert reason == "node 0 description must not be empty"
    details = json.loads(details)
    assert details["issues_total"] == 500 and 10 < len(details["issues"]) < 500
    kept = len(details["issues"])
    assert details["issues"][:-1] == issues[:kept - 1]  # whole, in order; the last may have lost its fix
    assert details["issues"][-1]["path"] == issues[kept - 1]["path"]


def test_an_issue_too_large_to_keep_whole_is_kept_without_its_fix():
    huge = {"code": "bad_value", "path": "nodes[0]", "message": "m" * 10_000,
            "fix": [{"op": "replace", "path": "/nodes/0", "value": "v" * 10_000}]}
    details = json.loads(convert.refusal_message("why", [huge]).partition("\n")[2])
    assert details["issues"][0]["code"] == "bad_value" and "fix" not in details["issues"][0]
    assert len(details["issues"][0]["message"]) <= 301


@pytest.mark.parametrize("request_fields, expected", [
    ({"action": "cancel", "plan_id": "p"}, convert.ControlAsk("cancel", "p", wait_ms=5000)),
    ({"action": "cancel_all", "wait_ms": 1 << 64 - 1}, convert.ControlAsk("cancel_all", "", wait_ms=(1 << 63) - 1)),
    ({"action": "stop_at", "plan_id": "p", "op_id": " 7 ", "when": "after"},
     convert.ControlAsk("stop_at", "p", "7", "on_complete")),
    ({"action": "stop_at", "plan_id": "p", "op_id": "7"}, convert.ControlAsk("stop_at", "p", "7", "on_complete")),
    ({"action": "stop_at", "plan_id": "p", "op_id": "7", "when": "before"},
     convert.ControlAsk("stop_at", "p", "7", "on_enter")),
])
def test_control_plan_is_read_as_robonix_reads_it(request_fields, expected):
    assert convert.msg_to_control(executor_pb2.ControlPlan_Request(**request_fields)) == expected


def test_active_plans_are_ordered_numbers_first():
    plans = [{"plan_id": name} for name in ("uuid-b", "10", "2", "uuid-a")]
    assert [p["plan_id"] for p in json.loads(convert.plans_json(plans))["plans"]] == ["2", "10", "uuid-b", "uuid-a"]


def test_an_output_that_is_not_text_goes_as_json_and_text_as_it_is():
    node = convert.PlanNode(3, convert.DO, "c", "p", "x/y")
    assert convert.leaf_result(node, {"success": True, "output": {"v": float("nan")}}, "").output == '{"v":"NaN"}'
    assert convert.leaf_result(node, {"success": True, "output": "plain \ud800"}, "").output == "plain ?"
    assert convert.leaf_result(node, None, "torn down").error == "torn down"
    cut = convert.leaf_result(node, {"success": True, "output": "x" * (convert.MAX_OUTPUT_CHARS + 5)}, "").output
    assert cut.startswith("x" * 1000) and cut.endswith(f"(cut: {convert.MAX_OUTPUT_CHARS + 5} characters in all)")
