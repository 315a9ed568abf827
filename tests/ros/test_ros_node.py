"""The bt_exec node's services and topics, in a process of its own, driven over real ROS 2."""
import json
import re
import time

import pytest
import rosutil
from rosutil import do, plan, seq


@pytest.fixture(scope="module")
def journal(tmp_path_factory):
    return tmp_path_factory.mktemp("journal") / "events.jsonl"


@pytest.fixture(scope="module")
def node(ros, sim_script, journal, tmp_path_factory):
    process = rosutil.NodeProcess(tmp_path_factory.mktemp("node") / "node.log",
                                  {"sim_script": str(sim_script), "scene_file": str(rosutil.SCENE),
                                   "journal_path": str(journal), "tick_rate_hz": 200.0})
    process.wait_ready(ros)
    yield process
    code = process.stop()
    assert code == 0, f"the node did not stop cleanly ({code}):\n{process.log()}"


@pytest.fixture
def api(ros, node):
    class Api:
        name = node.name

        def call(self, service, timeout=15.0, **fields):
            return ros.call(node.name, service, timeout, **fields)

        def submit(self, text, **fields):
            return self.call("submit", graph_json=text, **fields)

        def status(self, plan_id):
            response = self.call("get_status", plan_id=plan_id)
            return response.found, json.loads(response.status_json)

        def wait_finished(self, plan_id, timeout=10.0):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found, status = self.status(plan_id)
                if found and "outcome" in status:
                    return status
                time.sleep(0.05)
            raise AssertionError(f"plan {plan_id} did not finish in {timeout} s")

        def wait_op(self, plan_id, index, state, timeout=10.0):
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                found, status = self.status(plan_id)
                if found and status["ops"][index]["state"] == state:
                    return status
                time.sleep(0.02)
            raise AssertionError(f"plan {plan_id}: op #{index} never {state}")

    yield Api()
    assert node.alive(), f"the node died:\n{node.log()}"
    ros.call(node.name, "cancel", plan_id="", wait_ms=5000)  # leave no plan running for the next test


def ops_of(api, plan_id):
    found, status = api.status(plan_id)
    assert found, status
    return [op["op_id"] for op in status["ops"]]


# --- submit ---------------------------------------------------------------------

def test_submit_accepts_a_plan_and_runs_it(api):
    response = api.submit(plan(seq(do(), do())), run_id="run-accept")
    assert response.accepted, response.message
    assert (response.run_id, response.verdict, json.loads(response.issues_json)) == ("run-accept", "ok", [])
    assert response.plan_id and "accepted" in response.message
    record = api.wait_finished(response.plan_id)
    assert record["outcome"] == "succeeded" and record["run_id"] == "run-accept"


def test_submit_refuses_an_invalid_plan_with_issues(api):
    response = api.submit(plan(seq(do(cap="nodot"))), run_id="run-invalid")
    assert not response.accepted and response.verdict == "invalid" and response.plan_id == ""
    issues = json.loads(response.issues_json)
    assert issues and all({"code", "path", "message"} <= set(issue) for issue in issues)
    assert any("cap" in issue["path"] for issue in issues)


def test_the_same_run_id_gets_the_same_answer(api):
    first = api.submit(plan(seq(do())), run_id="run-twice")
    again = api.submit(plan(seq(do(), do(), do())), run_id="run-twice")  # different text: still the first answer
    assert first.accepted and again.accepted
    assert (again.plan_id, again.message, again.run_id) == (first.plan_id, first.message, "run-twice")


def test_an_empty_run_id_gets_one_made_and_echoed(api):
    response = api.submit(plan(seq(do())))
    assert response.accepted and re.fullmatch(r"[0-9a-f]{32}", response.run_id)
    assert api.wait_finished(response.plan_id)["run_id"] == response.run_id


def test_a_meta_op_is_carried_out(api):
    response = api.submit(json.dumps({"rtdl_description": "stop", "rtdl": {"op": "cancel_all", "wait_ms": 100}}))
    assert response.accepted and response.verdict == "control" and response.plan_id == ""


def test_qwen3_graph_with_scene_revision_is_wrapped_in_an_envelope(api):
    response = api.submit(rosutil.qwen3_graph(), dialect="qwen3", scene_revision=12, run_id="hatch-ros")
    assert response.accepted, (response.message, response.issues_json)
    record = api.wait_finished(response.plan_id)
    assert record["terminal"] == "completed" and record["run_id"] == "hatch-ros"
    stale = api.submit(rosutil.qwen3_graph(), dialect="qwen3", scene_revision=11, run_id="hatch-stale")
    assert not stale.accepted
    assert any(issue["code"] == "stale_revision" for issue in json.loads(stale.issues_json))


SEEDED_BT_XML = ('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence><MoveTo goal="{goal}" speed="{speed}"/>'
                 '<Say text="{words}"/></Sequence></BehaviorTree></root>')


def test_blackboard_json_seeds_a_bt_xml_plan_and_bad_seeds_are_refused_where_they_are_wrong(api):
    seeds = {"goal": {"x": 1.5, "y": -2, "frame": "map"}, "speed": 0.5, "words": "arrived"}
    response = api.submit(SEEDED_BT_XML, run_id="seeded", blackboard_json=json.dumps(seeds))
    assert response.accepted, (response.message, response.issues_json)
    record = api.wait_finished(response.plan_id)
    assert record["outcome"] == "succeeded"
    assert [op["result"]["args"] for op in record["ops"] if op["kind"] == "do"] == [
        {"goal": seeds["goal"], "speed": 0.5}, {"text": "arrived"}]
    for text, code, path, said in (
            ('{"goal": 1,}', "bad_json", "", "blackboard_json is not JSON: Expecting property name enclosed in "
                                             "double quotes: line 1 column 12 (char 11)"),
            ('["goal"]', "bad_arguments", "", "blackboard"),
            ('{"@goal": 1}', "bad_blackboard", "/blackboard/@goal", "blackboard key '@goal'")):
        refused = api.submit(SEEDED_BT_XML, blackboard_json=text)
        assert (refused.accepted, refused.verdict, refused.plan_id) == (False, "invalid", ""), refused.message
        [issue] = json.loads(refused.issues_json)
        assert (issue["code"], issue["path"]) == (code, path) and said in issue["message"], issue
    assert api.submit(plan(seq(do()))).accepted  # the service lives on


# --- ~/plan ---------------------------------------------------------------------

def test_plan_topic_is_latched_and_published_once_per_run_id(ros, api):
    text = plan(seq(do(), description="latched"), description="the latched plan")
    response = api.submit(text, run_id="run-latched")
    assert response.accepted
    api.wait_finished(response.plan_id)  # it started (and was published) before we subscribe
    collector, subscription = ros.subscribe(f"{api.name}/plan", rosutil.LATCHED)
    try:
        collector.wait_for(lambda messages: messages)
        assert api.submit(text, run_id="run-latched").plan_id == response.plan_id  # a resubmit
        api.submit(json.dumps({"rtdl_description": "stop", "rtdl": {"op": "cancel_all", "wait_ms": 0}}))  # meta op
        refused = api.submit("{not json", run_id="run-refused")
        assert not refused.accepted
        time.sleep(0.5)
        assert collector.messages == [text]
        other = plan(seq(do(), description="next"), description="the next plan")
        api.submit(other, run_id="run-next")
        collector.wait_for(lambda messages: len(messages) == 2)
        assert collector.messages == [text, other]
    finally:
        ros.unsubscribe(subscription)


# --- ~/status and ~/tree ----------------------------------------------------------

def test_status_events_arrive_in_order(ros, api):
    collector, subscription = ros.subscribe(f"{api.name}/status")
    try:
        ros.wait_matched(subscription)
        response = api.submit(plan(seq(do(), seq(do(), do()), do("sim.fail"))), run_id="run-events")
        plan_id = response.plan_id

        def complete(messages):
            events = [e for e in map(json.loads, messages) if e.get("plan_id") == plan_id]
            return events if events and events[-1]["event"] == "plan_complete" else None

        events = collector.wait_for(complete)
    finally:
        ros.unsubscribe(subscription)
    kinds = [event["event"] for event in events]
    assert kinds[0] == "plan_started" and kinds[-1] == "plan_complete" and kinds.count("plan_complete") == 1
    assert set(kinds[1:-1]) == {"node_state"}
    seqs = [event["seq"] for event in events]
    assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs)
    assert events[-1]["outcome"] == "failed" and events[-1]["run_id"] == "run-events"


def test_events_are_journaled(api, journal):
    plan_id = api.submit(plan(seq(do())), run_id="run-journal").plan_id
    api.wait_finished(plan_id)
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline:
        events = [json.loads(line) for line in journal.read_text().splitlines()]
        if any(e["event"] == "plan_complete" and e["plan_id"] == plan_id for e in events):
            break
        time.sleep(0.05)
    mine = [e["event"] for e in events if e.get("plan_id") == plan_id]
    assert mine[0] == "plan_started" and mine[-1] == "plan_complete"


def test_tree_topic_shows_running_plans_at_most_10_hz(ros, api):
    collector, subscription = ros.subscribe(f"{api.name}/tree", rosutil.LATCHED)
    try:
        ros.wait_matched(subscription)
        slow = api.submit(plan(seq(do("sim.slow"))), run_id="run-tree").plan_id

        def running(messages):
            for snapshot in map(json.loads, reversed(messages)):
                for status in snapshot["plans"]:
                    if status["plan_id"] == slow and status["ops"][1]["state"] == "running":
                        return status
            return None

        status = collector.wait_for(running)
        assert [op["state"] for op in status["ops"]] == ["running", "running"]
        busy = api.submit(plan(seq(*[do() for _ in range(60)])), run_id="run-busy")  # many state changes
        before = len(collector.messages)
        began = time.monotonic()
        api.wait_finished(busy.plan_id)
        elapsed = time.monotonic() - began
        sent = len(collector.messages) - before
        assert sent <= 10 * elapsed + 3, f"{sent} tree messages in {elapsed:.2f} s"
        api.call("cancel", plan_id=slow, wait_ms=5000)
        collector.wait_for(lambda messages: json.loads(messages[-1])["plans"] == [])
    finally:
        ros.unsubscribe(subscription)


# --- stop points ------------------------------------------------------------------

@pytest.mark.parametrize("target, when, tree, expect", [
    # a do op, on_enter: it is cancelled as it is entered; nothing after it starts
    (2, "on_enter", seq(do("sim.step"), do(), do()), ["canceled", "succeeded", "canceled", "pending"]),
    # a do op, on_complete: the plan ends as it completes; nothing after it starts
    (1, "on_complete", seq(do("sim.step"), do()), ["canceled", "canceled", "pending"]),
    # a sequence op, on_enter: none of its ops start
    (2, "on_enter", seq(do("sim.step"), seq(do(), do())), ["canceled", "succeeded", "canceled", "pending", "pending"]),
    # a sequence op, on_complete: its ops ran; what follows it never starts
    (1, "on_complete", seq(seq(do("sim.step"), do()), do()),
     ["canceled", "canceled", "succeeded", "succeeded", "pending"]),
])
def test_stop_at(api, target, when, tree, expect):
    response = api.submit(plan(tree))
    assert response.accepted
    op_ids = ops_of(api, response.plan_id)
    armed = api.call("stop_at", plan_id=response.plan_id, op_id=op_ids[target], when=when)
    assert armed.success and "Stop point set" in armed.message, armed.message
    record = api.wait_finished(response.plan_id)
    assert record["outcome"] == "cancelled"
    assert record["cancel_reason"] == f"stop point {when} at op {op_ids[target]}"
    assert [op["state"] for op in record["ops"]] == expect


def test_stop_at_empty_when_means_on_complete(api):
    response = api.submit(plan(seq(do("sim.step"), do())))
    op_ids = ops_of(api, response.plan_id)
    assert api.call("stop_at", plan_id=response.plan_id, op_id=op_ids[1], when="").success
    assert api.wait_finished(response.plan_id)["cancel_reason"] == f"stop point on_complete at op {op_ids[1]}"


# --- cancel, list, status -----------------------------------------------------------

def test_cancel_a_running_sim_op_waits_for_the_end(api):
    plan_id = api.submit(plan(seq(do("sim.slow"))), run_id="run-cancel").plan_id
    api.wait_op(plan_id, 1, "running")
    response = api.call("cancel", plan_id=plan_id, wait_ms=5000)
    assert response.success and response.finished, response.message  # finished: not cut by wait_ms
    record = api.wait_finished(plan_id)
    assert record["outcome"] == "cancelled" and [op["state"] for op in record["ops"]] == ["canceled", "canceled"]
    again = api.call("cancel", plan_id=plan_id, wait_ms=1000)
    assert again.success and again.finished and again.message == f"plan {plan_id!r} already finished; nothing to cancel"


def test_many_concurrent_cancels_with_submit_and_status_in_between(ros, api):
    plan_ids = [api.submit(plan(seq(do("sim.slow")))).plan_id for _ in range(6)]
    for plan_id in plan_ids:
        api.wait_op(plan_id, 1, "running")
    cancels = [ros.call_async(api.name, "cancel", plan_id=plan_id, wait_ms=30000) for plan_id in plan_ids]
    others = [ros.call_async(api.name, "list_plans"), ros.call_async(api.name, "get_status", plan_id=plan_ids[0]),
              ros.call_async(api.name, "submit", graph_json=plan(seq(do())))]
    answers = [pending.result(5) for pending in others]
    assert answers[2].accepted
    for pending in cancels:
        response = pending.result(5)
        assert response.success and response.finished, response.message
    api.wait_finished(answers[2].plan_id)
    assert json.loads(api.call("list_plans").plans_json)["count"] == 0


def test_cancel_all_and_wait_ms_cap(api):
    for _ in range(2):
        api.submit(plan(seq(do("sim.slow"))))
    response = api.call("cancel", plan_id="", wait_ms=4_000_000_000)
    assert response.success and response.finished
    assert response.message == "cancelled 2 plan(s) (wait_ms capped at 30000)"
    empty = api.call("cancel", plan_id="", wait_ms=0)
    assert empty.success and empty.finished and empty.message == "cancelled 0 plan(s)"


def test_list_plans_and_get_status_live_finished_unknown(api):
    plan_id = api.submit(plan(seq(do("sim.slow"), description="slow one"), description="listed")).plan_id
    listed = json.loads(api.call("list_plans").plans_json)
    assert listed["count"] == 1
    assert listed["plans"][0] == {"plan_id": plan_id, "description": "listed", "op_count": 2, "cancelled": False,
                                  "paused": False, "stop_points": 0}
    found, live = api.status(plan_id)
    assert found and live["running"] and [op["kind"] for op in live["ops"]] == ["sequence", "do"]
    assert api.call("cancel", plan_id=plan_id, wait_ms=5000).finished
    found, final = api.status(plan_id)
    assert found and final["outcome"] == "cancelled" and final["plan_id"] == plan_id
    found, unknown = api.status("999999")
    assert not found and "error" in unknown and "999999" in unknown["error"]


# --- bad requests ---------------------------------------------------------------------

def test_bad_requests_are_answered_and_the_node_lives_on(api, node):
    def refused(response, code):
        assert not response.accepted and response.verdict == "invalid" and response.plan_id == ""
        assert code in [issue["code"] for issue in json.loads(response.issues_json)], response.issues_json

    refused(api.submit("{not json"), "json_syntax")
    refused(api.submit(""), "json_syntax")
    refused(api.submit("x" * (20 * 1024 * 1024)), "too_large")
    klingon = api.submit(plan(seq(do())), dialect="klingon")  # refused by the route's schema, as on every door
    refused(klingon, "bad_arguments")
    assert "dialect" in klingon.message and "klingon" in klingon.message, klingon.message
    refused(api.submit(plan(seq(do())), run_id="   "), "bad_run_id")
    refused(api.submit("[1, 2]"), "type")
    stop = api.call("stop_at", plan_id="424242", op_id="1", when="on_enter")
    assert not stop.success and "424242" in stop.message
    plan_id = api.submit(plan(seq(do("sim.slow")))).plan_id
    assert not api.call("stop_at", plan_id=plan_id, op_id="1", when="sometime").success
    assert not api.call("stop_at", plan_id=plan_id, op_id="no-such-op").success
    assert not api.call("stop_at", plan_id="", op_id="").success
    cancel = api.call("cancel", plan_id="424242", wait_ms=100)
    assert not cancel.success and not cancel.finished and "424242" in cancel.message
    found, status = api.status("")
    assert not found and "error" in status
    assert node.alive()
    assert json.loads(api.call("list_plans").plans_json)["count"] == 1
