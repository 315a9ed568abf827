"""bt-exec robonix's gRPC server on real gRPC: the Robonix executor's five contracts served in process over a real
bt_exec Executor (the sim backend, whose scripted durations keep plans running), read by a client of stubs built
from the project's protos over a real channel. Events and their content, refusals, control from this door and
from others, many streams, a client that never reads, a client that goes away, and events lost by a full
stream made whole."""
from __future__ import annotations

import concurrent.futures
import json
import threading

import grpc
import pytest

import bt_exec
from bt_exec.compilers.limits import Limits
from bt_exec.control import ControlApi
from bt_exec.robonix.service import RobonixServer
from bt_exec.robonix.wire import contracts_pb2_grpc, executor_pb2, module_health_pb2, pilot_pb2

from .pilot_stubs import PilotStubs

WAIT_S = 30.0  # the longest a test waits for an event (a loaded machine); a pass takes far less
SEQUENCE, PARALLEL, DO = 0, 1, 2
PENDING, RUNNING, SUCCEEDED, FAILED, CANCELED = 0, 1, 2, 3, 4
PLAN_STARTED, NODE_STATE, PLAN_COMPLETE = 0, 1, 2
QUICK, SHORT, LONG, BROKEN = "robonix/test/quick", "robonix/test/short", "robonix/test/long", "robonix/test/broken"
BULKY = "robonix/test/bulky"
SCRIPT = {"caps": {QUICK: {}, SHORT: {"duration_s": 0.05}, LONG: {"duration_s": 600}, BULKY: {"output": "y" * 200_000},
                   BROKEN: {"outcome": "failure", "error": "gripper jammed"}, "arm.wave": {"duration_s": 600}}}
EXECUTE = "/robonix.contracts.RobonixSystemExecutorExecute/Execute"
CONTROL = "/robonix.contracts.RobonixSystemExecutorControlPlan/ControlPlan"


class Served(PilotStubs):
    """An executor on the sim, its control surface, the server over it, and a client's stubs over a channel."""

    def __init__(self, executor_options=None, api_options=None, **server_options):
        self.backend = bt_exec.SimBackend(SCRIPT)
        self.executor = bt_exec.Executor(self.backend, **(executor_options or {}))
        self.executor.start()
        self.api = ControlApi(self.executor, **(api_options or {}))
        self.server = RobonixServer(self.api, "executor-under-test", "127.0.0.1:0", **server_options)
        self.address = self.server.start()
        self.connect(self.address)

    def close(self):
        self.channel.close()
        self.server.stop(0)
        self.api.close()
        self.executor.close(wait_ms=5000)

    def executor_backend_calls(self, cap) -> list:
        return [call for call in self.backend.calls if call.cap == cap]

    def control_plan(self, action, plan_id="", op_id="", when="", wait_ms=0):
        return self.control(executor_pb2.ControlPlan_Request(action=action, plan_id=plan_id, op_id=op_id, when=when,
                                                             wait_ms=wait_ms), timeout=WAIT_S)

    def active_plans(self) -> dict:
        answer = self.list(executor_pb2.ListActivePlans_Request(), timeout=WAIT_S)
        assert answer.success, answer.error
        return json.loads(answer.plans_json)


@pytest.fixture
def served():
    made = Served()
    yield made
    made.close()


@pytest.fixture
def serve():
    """``serve(**options)``: a Served of its own options, closed after the test."""
    made = []

    def start(*args, **options):
        made.append(Served(*args, **options))
        return made[-1]

    yield start
    for each in made:
        each.close()


def node(kind, op_id, description, children=(), contract=None, args="{}", provider="robonix_test_provider"):
    entry = pilot_pb2.RtdlNode(node_kind=kind, children=list(children), op_id=op_id, description=description)
    if contract is not None:
        entry.call.CopyFrom(pilot_pb2.CapabilityCall(call_id=f"call-{op_id}", provider_id=provider,
                                                     contract_id=contract, args_json=args))
    return entry


def plan_of(plan_id, *nodes, root=0, **fields):
    return pilot_pb2.Plan(plan_id=plan_id, session_id="session-1", round=3, nodes=list(nodes), root_index=root,
                          **fields)


def do(op_id, contract, description=None, **options):
    return node(DO, op_id, description or f"call {op_id}", contract=contract, **options)


class Stream:
    """An Execute call's events as they come: ``until`` reads up to the first event a test waits for."""

    def __init__(self, call):
        self.call = call
        self.events: list = []

    def next(self):
        event = next(self.call)
        self.events.append(event)
        return event

    def until(self, wanted):
        while True:
            event = self.next()
            if wanted(event):
                return event

    def rest(self) -> list:
        for event in self.call:
            self.events.append(event)
        return self.events


def running(op_id):
    return lambda event: event.event_kind == NODE_STATE and event.node_state.op_id == op_id and \
        event.node_state.state == RUNNING


def states(events) -> list[tuple[str, int]]:
    return [(e.node_state.op_id, e.node_state.state) for e in events if e.event_kind == NODE_STATE]


def final_states(events) -> dict[str, object]:
    finals = {}
    for event in events:
        if event.event_kind == NODE_STATE and event.node_state.state not in (PENDING, RUNNING):
            assert event.node_state.op_id not in finals, f"two final states for {event.node_state.op_id}"
            finals[event.node_state.op_id] = event.node_state
    return finals


def assert_framed(events, plan_id, any_failed):
    """plan_started first, exactly one plan_complete, last, both naming ``plan_id``."""
    assert events[0].event_kind == PLAN_STARTED and events[0].plan_started.plan_id == plan_id
    completes = [e for e in events if e.event_kind == PLAN_COMPLETE]
    assert len(completes) == 1 and events[-1] is completes[0]
    assert completes[0].plan_complete.plan_id == plan_id
    assert completes[0].plan_complete.any_failed is any_failed
    assert all(e.node_state.plan_id == plan_id for e in events if e.event_kind == NODE_STATE)


def refusal(error: grpc.RpcError) -> tuple[str, dict]:
    """A refused plan's status message: its reason, and bt_exec's issues."""
    reason, _, issues = error.details().partition("\n")
    return reason, json.loads(issues)


def bt_plan_ids(served) -> list[str]:
    return [plan["plan_id"] for plan in served.executor.get_all_plans()["plans"]]


# --- Execute's events ------------------------------------------------------------------------------------------

def test_a_sequence_and_parallel_stream_their_events_in_order_parallel_children_as_they_complete(served):
    plan = plan_of("pilot-plan-1",
                   node(SEQUENCE, "root", "inspect then report", children=[1, 4]),
                   node(PARALLEL, "look", "look both ways", children=[2, 3]),
                   do("slow_look", SHORT, args='{"side": "left"}'),
                   do("fast_look", QUICK, args='{"side": "right"}'),
                   do("report", QUICK))
    events = Stream(served.execute(plan, timeout=WAIT_S)).rest()
    assert_framed(events, "pilot-plan-1", any_failed=False)
    finals = final_states(events)
    assert set(finals) == {"root", "look", "slow_look", "fast_look", "report"}
    assert all(state.state == SUCCEEDED for state in finals.values())
    order = [op for op, state in states(events) if state != RUNNING]
    # The quick branch ends first though listed second; children end before their parents.
    assert order == ["fast_look", "slow_look", "look", "report", "root"]
    for op, state in states(events):  # every node runs before it ends
        if state == RUNNING:
            assert order.index(op) >= 0
    indexes = {state.op_id: (state.node_index, state.node_kind) for state in finals.values()}
    assert indexes == {"root": (0, SEQUENCE), "look": (1, PARALLEL), "slow_look": (2, DO), "fast_look": (3, DO),
                       "report": (4, DO)}
    leaf = finals["fast_look"]
    assert leaf.description == "call fast_look" and not leaf.operator_detail
    assert (leaf.leaf_result.call_id, leaf.leaf_result.provider_id, leaf.leaf_result.contract_id) == \
        ("call-fast_look", "robonix_test_provider", QUICK)
    assert leaf.leaf_result.success and json.loads(leaf.leaf_result.output) == {"sim": True, "cap": QUICK}
    assert leaf.leaf_result.error == ""
    assert finals["look"].operator_detail.startswith(
        "RTDL parallel op_id=look completed successfully: look both ways (")
    assert finals["root"].operator_detail.startswith(
        "RTDL sequence op_id=root completed successfully: inspect then report")
    assert not finals["root"].HasField("leaf_result")
    started = [e.node_state for e in events if e.event_kind == NODE_STATE and e.node_state.state == RUNNING]
    assert started[0].op_id == "root" and started[0].operator_detail == \
        "RTDL sequence op_id=root started: inspect then report"


def test_a_failed_call_fails_its_sequence_and_the_plan(served):
    plan = plan_of("pilot-plan-2", node(SEQUENCE, "root", "grip then lift", children=[1, 2]),
                   do("grip", BROKEN), do("lift", QUICK))
    events = Stream(served.execute(plan, timeout=WAIT_S)).rest()
    assert_framed(events, "pilot-plan-2", any_failed=True)
    finals = final_states(events)
    assert set(finals) == {"grip", "root"}  # lift never started: no event
    grip = finals["grip"]
    assert grip.state == FAILED and not grip.leaf_result.success and grip.leaf_result.error == "gripper jammed"
    assert finals["root"].state == FAILED
    assert finals["root"].operator_detail.startswith(
        "RTDL sequence op_id=root failed because one or more child nodes failed: grip then lift (")


def test_a_call_to_the_executors_own_id_runs_the_builtin_in_process(served):
    builtin = "robonix/system/executor/builtin/get_all_plans"
    plan = plan_of("pilot-plan-own", node(SEQUENCE, "root", "list then act", children=[1, 2]),
                   do("list", builtin, provider="executor-under-test"), do("act", QUICK))
    events = Stream(served.execute(plan, timeout=WAIT_S)).rest()
    assert_framed(events, "pilot-plan-own", any_failed=False)
    listed = final_states(events)["list"]
    assert listed.state == SUCCEEDED and listed.leaf_result.provider_id == "executor-under-test"
    assert len(json.loads(listed.leaf_result.output)["plans"]) == 1  # the builtin's answer: this plan, in flight
    assert not served.executor_backend_calls(builtin), "a builtin never goes to the backend"


def test_a_plan_without_plan_id_is_named_by_bt_exec_id(served):
    events = Stream(served.execute(plan_of("", do("only", QUICK)), timeout=WAIT_S)).rest()
    named = events[0].plan_started.plan_id
    assert named and named == served.executor.get_finished_plans()["plans"][0]["plan_id"]
    assert_framed(events, named, any_failed=False)


# --- refusals ----------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("nodes, root, reason, code", [
    ([node(SEQUENCE, "a", "first", children=[1]), node(PARALLEL, "b", "second", children=[0])], 0,
     "cycle detected at node 0", "cycle"),
    ([node(SEQUENCE, "a", "first", children=[9])], 0, "node 0 child index 9 is out of bounds", "index_out_of_range"),
    ([node(SEQUENCE, "a", "first", children=[1]), do("", QUICK)], 0, "node 1 op_id must not be empty", None),
    ([node(SEQUENCE, "a", "first", children=[1]), node(DO, "b", " ", contract=QUICK)], 0,
     "node 1 description must not be empty", "empty_description"),
    ([], 0, "Plan.nodes must not be empty", None),
    ([do("a", QUICK)], 4, "Plan.root_index 4 is out of bounds for 1 nodes", "index_out_of_range"),
    ([node(DO, "a", "no call")], 0, "do node 0 must contain a call", "required"),
    ([node(SEQUENCE, "a", "x", children=[1]), do("a", QUICK)], 0, "node 1 has duplicate op_id 'a'", None),
])
def test_an_invalid_arena_is_refused_as_robonix_refuses_it_with_bt_exec_issues_and_no_events(served, nodes, root,
                                                                                             reason, code):
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan_of("bad", *nodes, root=root), timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    said, details = refusal(refused.value)
    assert said == reason
    assert details["issues_total"] == len(details["issues"])
    if code is not None:
        assert code in [issue["code"] for issue in details["issues"]]
    assert served.executor.get_all_plans()["count"] == 0
    assert served.executor.get_finished_plans()["plans"] == []


def test_a_refusal_carries_the_located_fix(served):
    plan = plan_of("bad", node(SEQUENCE, "a", "first", children=[1]), node(DO, "b", "", contract=QUICK))
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan, timeout=WAIT_S))
    _, details = refusal(refused.value)
    empty = next(issue for issue in details["issues"] if issue["code"] == "empty_description")
    assert empty["path"] == "nodes[1].description"
    assert empty["fix"] == [{"op": "replace", "path": "/nodes/1/description", "value": "TODO: describe"}]


def test_what_only_bt_exec_refuses_is_refused_with_its_first_issue(served):
    # A node no parent reaches: robonix-executor would run the plan and skip it; bt_exec refuses the arena.
    plan = plan_of("orphan", node(SEQUENCE, "a", "first", children=[1]), do("b", QUICK), do("c", QUICK))
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan, timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reason, details = refusal(refused.value)
    assert reason.startswith("refused (invalid): nodes[2]")
    assert details["issues"][0]["path"] == "nodes[2]"


def test_args_json_that_is_not_json_refuses_the_plan_naming_where(served):
    plan = plan_of("bad-args", node(SEQUENCE, "a", "first", children=[1]), do("b", QUICK, args="{not json"))
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan, timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reason, details = refusal(refused.value)
    assert reason.startswith("refused (invalid): nodes[1].call.args_json: args_json is not valid JSON")
    assert details["issues"][0]["code"] == "json_syntax"


def test_a_plan_with_a_keystone_token_is_refused_unverified(served):
    plan = plan_of("keystone", do("a", QUICK), auth_session_token="sess-token")
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan, timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.PERMISSION_DENIED
    assert "auth_session_token" in refused.value.details() and "Keystone" in refused.value.details()
    assert served.executor.get_finished_plans()["plans"] == [] and served.executor.get_all_plans()["count"] == 0


def test_a_plan_over_the_executors_limits_is_refused_with_the_limit_issue(serve):
    served = serve({"limits": Limits(max_ops=10)})
    plan = plan_of("big", node(SEQUENCE, "root", "many", children=range(1, 12)),
                   *[do(f"op{i}", QUICK) for i in range(11)])
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan, timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    reason, details = refusal(refused.value)
    assert "over the limit of 10 ops" in reason
    assert details["issues"][0]["code"] == "too_many_ops"


def test_a_plan_over_the_executors_byte_limit_is_refused_before_it_is_read(serve):
    served = serve({"limits": Limits(max_input_bytes=100_000)})
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan_of("heavy", do("a", QUICK, description="x" * 200_000)), timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "larger than max" in refused.value.details()
    assert served.executor.get_finished_plans()["plans"] == []


def test_malformed_protobuf_is_refused_and_the_server_serves_on(served):
    raw = served.channel.unary_stream(EXECUTE)  # no serializers: the bytes go as they are
    with pytest.raises(grpc.RpcError) as refused:
        next(raw(b"\x22\xff\xff\xff\x0f", timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert "robonix.pilot.Plan" in refused.value.details()
    bad_text = b"\x0a\x02\xc3\x28"  # plan_id: two bytes that are not UTF-8
    with pytest.raises(grpc.RpcError) as refused:
        next(raw(bad_text, timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    with pytest.raises(grpc.RpcError) as refused:
        served.channel.unary_unary(CONTROL)(b"\xff", timeout=WAIT_S)
    assert refused.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    events = Stream(served.execute(plan_of("after", do("a", QUICK)), timeout=WAIT_S)).rest()
    assert_framed(events, "after", any_failed=False)


def test_a_plan_id_already_running_is_refused(served):
    first = Stream(served.execute(plan_of("twice", do("a", LONG)), timeout=WAIT_S))
    first.until(running("a"))
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan_of("twice", do("a", QUICK)), timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.ALREADY_EXISTS


# --- control from this door and from others ------------------------------------------------------------------

def test_stop_at_on_enter_of_a_later_op_cancels_the_plan_there(served):
    plan = plan_of("stop-later", node(SEQUENCE, "root", "three steps", children=[1, 2, 3]),
                   do("first", SHORT), do("second", QUICK), do("third", QUICK))
    stream = Stream(served.execute(plan, timeout=WAIT_S))
    stream.next()
    [bt_id] = bt_plan_ids(served)
    # Held at its second op by a pause point armed over another door, so that the stop point is armed before the
    # third op can be entered, whatever the machine's load.
    served.api.call("stop_plan_at", {"plan_id": bt_id, "op_id": "second", "when": "on_enter", "action": "pause"},
                    door="http")
    stream.until(lambda e: e.event_kind == NODE_STATE and e.node_state.op_id == "first" and
                 e.node_state.state == SUCCEEDED)
    answer = served.control_plan("stop_at", "stop-later", "third", "before")
    assert answer.success and answer.message == \
        "Stop point set: RTDL plan 'stop-later' will be cancelled on_enter op_id=third."
    served.api.call("resume_plan", {"plan_id": bt_id}, door="http")
    events = stream.rest()
    assert_framed(events, "stop-later", any_failed=True)
    finals = final_states(events)
    assert finals["second"].state == SUCCEEDED
    third = finals["third"]
    assert third.state == CANCELED and third.operator_detail == "stopped on entering op_id=third: plan cancelled"
    assert not third.HasField("leaf_result")
    assert finals["root"].state == CANCELED
    assert finals["root"].operator_detail.startswith("RTDL sequence op_id=root was canceled: three steps")


def test_control_plan_refuses_as_robonix_does(served):
    stream = Stream(served.execute(plan_of("ask-me", node(SEQUENCE, "root", "r", children=[1]), do("a", LONG)),
                                   timeout=WAIT_S))
    stream.until(running("a"))
    unknown = served.control_plan("halt", "ask-me")
    assert (unknown.success, unknown.completed, unknown.error) == (False, True, "unknown plan-control action 'halt'")
    bad_when = served.control_plan("stop_at", "ask-me", "a", "soon")
    assert bad_when.error == "invalid when 'soon' (expected on_enter or on_complete)" and not bad_when.success
    no_op = served.control_plan("stop_at", "ask-me", "  ")
    assert no_op.error == "stop_plan_at requires non-empty op_id"
    missing = served.control_plan("stop_at", "ask-me", "zz")
    assert (missing.success, missing.error) == (False, "RTDL plan 'ask-me' has no op_id 'zz'")
    gone = served.control_plan("stop_at", "never-ran", "a")
    assert gone.success and gone.message == \
        "RTDL plan 'never-ran' is not running (already finished or cancelled); no stop point needed."
    nothing = served.control_plan("cancel", "never-ran")
    assert (nothing.success, nothing.completed) == (True, True)
    assert nothing.message == "RTDL plan 'never-ran' is not running (already finished or cancelled); nothing to cancel."


def test_cancel_over_control_plan_ends_the_stream_cancelled(served):
    plan = plan_of("cancel-me", node(SEQUENCE, "root", "wait long", children=[1, 2]), do("wait", LONG),
                   do("never", QUICK))
    stream = Stream(served.execute(plan, timeout=WAIT_S))
    stream.until(running("wait"))
    answer = served.control_plan("cancel", "cancel-me", wait_ms=10_000)
    assert (answer.success, answer.completed) == (True, True)
    assert answer.message.startswith("Cancellation was requested for RTDL plan 'cancel-me'; cancelled=true, "
                                     "completed=true.")
    events = stream.rest()
    assert_framed(events, "cancel-me", any_failed=True)
    finals = final_states(events)
    assert set(finals) == {"wait", "root"}
    wait = finals["wait"]
    assert wait.state == CANCELED and not wait.leaf_result.success
    assert wait.leaf_result.error == "plan cancelled while the op ran" and wait.leaf_result.call_id == "call-wait"
    assert finals["root"].operator_detail == \
        "RTDL sequence op_id=root was canceled: wait long (plan cancelled while the op ran)"
    assert served.active_plans() == {"count": 0, "plans": []}


def test_cancel_all_over_control_plan_and_cancel_all_end_every_stream(served):
    streams = []
    for name in ("one", "two"):
        stream = Stream(served.execute(plan_of(name, do("wait", LONG)), timeout=WAIT_S))
        stream.until(running("wait"))
        streams.append(stream)
    answer = served.control_plan("cancel_all")
    assert (answer.success, answer.completed) == (True, True)
    assert answer.message == "Cancellation requested for all RTDL plans; target_count=2, completed=true."
    for stream, name in zip(streams, ("one", "two")):
        assert_framed(stream.rest(), name, any_failed=True)
    third = Stream(served.execute(plan_of("three", do("wait", LONG)), timeout=WAIT_S))
    third.until(running("wait"))
    assert served.cancel_all(executor_pb2.CancelAll_Request(), timeout=WAIT_S).success is True
    assert_framed(third.rest(), "three", any_failed=True)


def test_a_cancel_from_another_door_ends_the_execute_stream(served):
    stream = Stream(served.execute(plan_of("elsewhere", do("wait", LONG)), timeout=WAIT_S))
    stream.until(running("wait"))
    [bt_id] = bt_plan_ids(served)
    assert served.api.call("cancel_plan", {"plan_id": bt_id, "wait_ms": 5000}, door="http")["finished"] is True
    assert_framed(stream.rest(), "elsewhere", any_failed=True)


def test_list_active_plans_while_running(served):
    plan = plan_of("listed", node(SEQUENCE, "root", "two calls", children=[1, 2]), do("now", LONG),
                   do("later", QUICK, provider="other_provider"))
    stream = Stream(served.execute(plan, timeout=WAIT_S))
    stream.until(running("now"))
    other = served.api.call("submit_plan", {"graph": {"op": "do", "description": "from http", "cap": "arm.wave"}})
    arena = served.api.call("submit_plan", {"graph": {"plan_id": "from-mcp", "root_index": 0, "nodes": [
        {"node_kind": 2, "children": [], "op_id": "call", "description": "an arena from another door",
         "call": {"call_id": "c1", "provider_id": "other_provider", "contract_id": LONG, "args_json": "{}"}}]}},
        door="mcp")
    listed = served.active_plans()
    assert listed["count"] == 3
    ours = next(p for p in listed["plans"] if p["plan_id"] == "listed")
    assert {k: ours[k] for k in ("description", "op_count", "cancelled", "stop_points")} == \
        {"description": "two calls", "op_count": 3, "cancelled": False, "stop_points": 0}
    assert ours["ops"] == [
        {"op_id": "root", "kind": "sequence", "description": "two calls", "provider_id": "", "contract_id": "",
         "state": "running"},
        {"op_id": "now", "kind": "do", "description": "call now", "provider_id": "robonix_test_provider",
         "contract_id": LONG, "state": "running"},
        {"op_id": "later", "kind": "do", "description": "call later", "provider_id": "other_provider",
         "contract_id": QUICK, "state": "pending"}]
    theirs = next(p for p in listed["plans"] if p["plan_id"] == other["plan_id"])
    # Another door's plans: the provider their ops name (a tree's cap is provider-qualified).
    assert (theirs["ops"][0]["contract_id"], theirs["ops"][0]["provider_id"]) == ("arm.wave", "arm")
    [from_mcp] = (p for p in listed["plans"] if p["plan_id"] == arena["plan_id"])
    assert (from_mcp["ops"][0]["contract_id"], from_mcp["ops"][0]["provider_id"]) == (LONG, "other_provider")


def test_get_module_health(served):
    report = served.health(module_health_pb2.GetModuleHealth_Request(), timeout=WAIT_S).report
    assert report.schema_version == 1
    module = report.module
    assert (module.module_id, module.provider_id, module.health, module.state, module.reason_code, module.detail,
            module.ttl_ms) == ("executor", "executor-under-test", 0, "active", "OK", "executor serving", 5000)
    assert (module.module_key, module.source, module.received_ts_ns) == ("", "", 0)


# --- many streams, slow and gone clients, lost events ------------------------------------------------------------

def test_fifty_execute_streams_at_once(served):
    count = 50
    barrier = threading.Barrier(count + 1, timeout=WAIT_S)

    def run(i):
        stream = Stream(served.execute(plan_of(f"many-{i}", do("wait", LONG)), timeout=WAIT_S * 2))
        stream.until(running("wait"))
        barrier.wait()
        return stream.rest()

    with concurrent.futures.ThreadPoolExecutor(count) as pool:
        results = [pool.submit(run, i) for i in range(count)]
        barrier.wait()
        assert served.server.open_streams == count
        assert served.active_plans()["count"] == count
        assert served.cancel_all(executor_pb2.CancelAll_Request(), timeout=WAIT_S).success
        for i, result in enumerate(results):
            assert_framed(result.result(timeout=WAIT_S), f"many-{i}", any_failed=True)
    assert served.server.open_streams == 0


def test_more_streams_than_allowed_are_refused(serve):
    served = serve(max_streams=1)
    held = Stream(served.execute(plan_of("held", do("wait", LONG)), timeout=WAIT_S))  # kept: its call stays open
    held.until(running("wait"))
    with pytest.raises(grpc.RpcError) as refused:
        next(served.execute(plan_of("one-more", do("a", QUICK)), timeout=WAIT_S))
    assert refused.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_a_client_that_never_reads_is_cut_off_at_the_bound_and_others_go_on(serve):
    served = serve(max_backlog_bytes=0, max_total_backlog_bytes=64 * 1024)
    done = threading.Event()
    served.executor.subscribe(lambda e: e["event"] == "plan_complete" and e["description"] == "wide" and done.set())
    nodes = [node(PARALLEL, "root", "wide", children=range(1, 301))]
    nodes += [do(f"op{i}", QUICK, description="d" * 1000) for i in range(300)]
    stuck_channel = grpc.insecure_channel(served.address, options=[("grpc.http2.bdp_probe", 0)])
    stuck = contracts_pb2_grpc.RobonixSystemExecutorExecuteStub(stuck_channel).Execute(plan_of("stuck", *nodes),
                                                                                        timeout=WAIT_S)
    try:
        assert done.wait(WAIT_S)  # the plan ran to its end, its client reading nothing
        reader = Stream(served.execute(plan_of("reader", node(SEQUENCE, "r", "r", children=[1]), do("a", SHORT)),
                                       timeout=WAIT_S))
        assert_framed(reader.rest(), "reader", any_failed=False)
        assert served.server.backlog_bytes <= 64 * 1024
        with pytest.raises(grpc.RpcError) as ended:
            for _ in stuck:
                pass
        assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
        assert "fell" in ended.value.details() and "the plan runs on" in ended.value.details()
        assert "backlogs are full" in ended.value.details()
        assert served.executor.get_finished_plans()["plans"][-1]["outcome"] == "succeeded"
    finally:
        stuck_channel.close()


def test_a_stream_further_behind_than_its_plan_can_be_is_ended_and_the_plan_runs_on(serve):
    # No allowance beyond the plan's own events: an output of 200 kB is more than a client may be behind by.
    served = serve({"max_result_bytes": 1 << 20}, max_backlog_bytes=0)
    done = threading.Event()
    served.executor.subscribe(lambda e: e["event"] == "plan_complete" and done.set())
    stream = Stream(served.execute(plan_of("bulky", node(SEQUENCE, "r", "r", children=[1]), do("a", BULKY)),
                                   timeout=WAIT_S))
    with pytest.raises(grpc.RpcError) as ended:
        stream.rest()
    assert ended.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    assert "fell" in ended.value.details() and "backlogs are full" not in ended.value.details()
    assert done.wait(WAIT_S)
    assert served.executor.get_finished_plans()["plans"][0]["outcome"] == "succeeded"


def test_the_plan_runs_on_when_the_execute_client_goes_away(served):
    done = threading.Event()
    served.executor.subscribe(lambda e: e["event"] == "plan_complete" and done.set())
    plan = plan_of("orphaned", node(SEQUENCE, "root", "go on", children=[1, 2]), do("first", SHORT),
                   do("second", SHORT))
    call = served.execute(plan, timeout=WAIT_S)
    Stream(call).until(running("first"))
    call.cancel()
    assert done.wait(WAIT_S)
    [record] = served.executor.get_finished_plans()["plans"]
    assert record["outcome"] == "succeeded"
    assert [op["state"] for op in served.executor.get_plan_result(record["plan_id"])["ops"]] == ["succeeded"] * 3
    assert served.server.open_streams == 0


def test_events_a_full_stream_dropped_are_made_whole_from_the_record(serve, caplog):
    served = serve(api_options={"stream_capacity": 4})
    plan = plan_of("lossy", node(SEQUENCE, "root", "many quick", children=range(1, 21)),
                   *[do(f"op{i}", QUICK) for i in range(20)])
    events = Stream(served.execute(plan, timeout=WAIT_S)).rest()
    assert_framed(events, "lossy", any_failed=False)
    finals = final_states(events)
    assert set(finals) == {"root", *(f"op{i}" for i in range(20))}
    assert all(state.state == SUCCEEDED for state in finals.values())
    assert "event stream lost" in caplog.text  # the tick's 42 events did not fit a stream of 4
