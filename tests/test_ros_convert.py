"""The pure conversions between bt_exec's dicts and the interface messages, without ROS.

The messages are made from the interface definitions (tests/interface_messages.py);
tests/ros/test_ros_interfaces.py checks the same conversions on the generated classes.
"""
import json
import re

import pytest
from interface_messages import String, service

import bt_exec
from bt_exec.control import ControlCalls, error_answer
from bt_exec.errors import Busy, NotFound
from bt_exec.ros import convert

Submit, StopAt, Disarm, PlanControl, Cancel, GetStatus, ListPlans = (service(name) for name in (
    "Submit", "StopAt", "Disarm", "PlanControl", "Cancel", "GetStatus", "ListPlans"))

LIMIT = 16 * 1024 * 1024


def submit(**fields):
    return Submit.Request(**fields)


def test_submission_passes_text_through_and_makes_a_run_id():
    text = '{"rtdl": {"op": "sequence", "description": "x", "children": []}}'
    sub = convert.msg_to_submission(submit(graph_json=text), LIMIT)
    assert (sub.text, sub.source, sub.dialect) == (text, text, "auto")
    assert sub.run_id_made and re.fullmatch(r"[0-9a-f]{32}", sub.run_id)
    given = convert.msg_to_submission(submit(graph_json=text, run_id="r1", dialect="rtdl"), LIMIT)
    assert (given.run_id, given.run_id_made, given.dialect) == ("r1", False, "rtdl")
    assert convert.msg_to_submission(submit(graph_json=text, dialect="QWEN3"), LIMIT).dialect == "qwen3"
    assert convert.msg_to_submission(submit(graph_json=text, dialect="klingon"), LIMIT).dialect == "klingon"


def test_bt_xml_is_submitted_as_its_text_and_hostile_xml_refused_as_invalid():
    plan = ('<root BTCPP_format="4"><BehaviorTree><Sequence><MoveTo goal="kitchen"/><Say text="done"/></Sequence>'
            '</BehaviorTree></root>')
    bomb = ('<!DOCTYPE r [<!ENTITY a "aaaa"><!ENTITY b "&a;&a;&a;">]>'
            '<root><BehaviorTree><Say text="&b;"/></BehaviorTree></root>')
    executor = bt_exec.Executor(backend=bt_exec.SimBackend())
    calls = ControlCalls(executor)
    try:
        for text, dialect, accepted, verdict in ((plan, "BTCPP", True, "ok"), (plan, "", True, "ok"),
                                                 (bomb, "btcpp", False, "invalid")):
            sub = convert.msg_to_submission(submit(graph_json=text, dialect=dialect), LIMIT)
            assert sub.dialect == (dialect.lower() or "auto") and sub.source == text
            response = convert.answer_to_submit_msg(200, calls.call("submit_plan", sub.args, "ros"),
                                                    Submit.Response(), sub.run_id)
            assert (response.accepted, response.verdict) == (accepted, verdict)
        assert json.loads(response.issues_json)[0]["code"] == "xml_forbidden"
    finally:
        executor.close()


SEEDED_PLAN = ('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence><MoveTo goal="{goal}"/><Say text="{words}"/>'
               '</Sequence></BehaviorTree></root>')


def test_blackboard_json_seeds_the_submission_and_text_that_is_not_json_is_its_refusal():
    seeds = {"goal": {"x": 1.5, "y": -2}, "words": "arrived"}
    sub = convert.msg_to_submission(submit(graph_json=SEEDED_PLAN, blackboard_json=json.dumps(seeds)), LIMIT)
    assert sub.refusal is None and sub.args["blackboard"] == seeds
    unseeded = convert.msg_to_submission(submit(graph_json=SEEDED_PLAN, blackboard_json="  "), LIMIT)
    assert unseeded.refusal is None and "blackboard" not in unseeded.args
    for text, limit, code, said in (
        ('{"goal": }', LIMIT, "bad_json", "blackboard_json is not JSON: Expecting value: line 1 column 10 (char 9)"),
        ("[" * 100_000, LIMIT, "bad_json", "blackboard_json nests too deeply to read"),
        ('{"words": "' + "x" * 64 + '"}', 64, "too_large", "blackboard_json is 77 characters; at most 64 are read")):
        refused = convert.msg_to_submission(submit(graph_json=SEEDED_PLAN, run_id="r", blackboard_json=text), limit)
        assert refused.blackboard is None and (refused.refusal.code, refused.refusal.message) == (code, said)
        response = convert.answer_to_submit_msg(*error_answer(refused.refusal), Submit.Response(), refused.run_id)
        assert (response.accepted, response.verdict, response.run_id) == (False, "invalid", "r")
        assert json.loads(response.issues_json) == [{"code": code, "path": "", "message": said}]


def test_qwen3_with_a_scene_revision_is_wrapped():
    graph = '{"status": "ok", "entry": "s0", "plan": [], "transitions": []}'
    sub = convert.msg_to_submission(submit(graph_json=graph, dialect="qwen3", scene_revision=12, run_id="h"), LIMIT)
    assert json.loads(sub.source) == {"run_id": "h", "scene_revision": 12, "response": graph}
    assert sub.text == graph
    for unwrapped in ({"dialect": "qwen3"}, {"dialect": "", "scene_revision": 3},
                      {"dialect": "rtdl", "scene_revision": 3}):
        assert convert.msg_to_submission(submit(graph_json=graph, **unwrapped), LIMIT).source == graph


def test_request_numbers_land_in_the_loaders_ranges():
    """Whatever an int64 scene_revision or a uint32 wait_ms holds, the plan or cancel built from it is taken: the
    executor caps the wait, and says so, as it does for every door."""
    graph = '{"status": "ok", "entry": "s0", "plan": [{"id": "s0", "skill": "inspect_state"}], "transitions": {}}'
    for revision in (0, 2 ** 63 - 1):
        sub = convert.msg_to_submission(submit(graph_json=graph, dialect="qwen3", scene_revision=revision), LIMIT)
        assert bt_exec.load(sub.source).meta["scene_revision"] == revision
    calls = ControlCalls(bt_exec.Executor(backend=bt_exec.SimBackend()))
    for asked in (0, 30_000, 30_001, 2 ** 32 - 1):
        answer = calls.call(*convert.msg_to_cancel(Cancel.Request(wait_ms=asked)), "ros")
        assert answer["message"] == "cancelled 0 plan(s)" + (" (wait_ms capped at 30000)" if asked > 30_000 else "")


def test_an_envelope_names_its_run_id():
    envelope = json.dumps({"run_id": "hatch-2", "scene_revision": 12, "response": "{}"})
    assert convert.msg_to_submission(submit(graph_json=envelope), LIMIT).run_id == "hatch-2"
    assert convert.msg_to_submission(submit(graph_json=envelope, run_id="mine"), LIMIT).run_id == "mine"
    assert convert.envelope_run_id('{"run_id": "a"}', LIMIT) is None  # not an envelope: no response
    assert convert.envelope_run_id('{"run_id": "a", "response": ', LIMIT) is None  # not JSON
    assert convert.envelope_run_id('{"run_id": 5, "response": "x"}', LIMIT) is None
    assert convert.envelope_run_id(envelope, 10) is None  # over the limit: not parsed


def test_answers_to_submit_responses():
    accepted = convert.answer_to_submit_msg(200, {"accepted": True, "run_id": "r", "plan_id": "3", "verdict": "ok",
                                                  "issues": [], "message": "plan 3 accepted:\n 2 ops"},
                                            Submit.Response(), "r")
    assert (accepted.accepted, accepted.plan_id, accepted.message, accepted.issues_json) == (
        True, "3", "plan 3 accepted: 2 ops", "[]")
    refused = convert.answer_to_submit_msg(200, {"accepted": False, "run_id": None, "plan_id": None,
                                                 "verdict": "invalid", "message": "refused",
                                                 "issues": [{"code": "json_syntax", "path": "", "message": "\ud800"}]},
                                           Submit.Response(), "made")
    assert (refused.run_id, refused.plan_id) == ("made", "")
    assert refused.issues_json.isascii() and json.loads(refused.issues_json)[0]["message"] == "\ud800"
    assert json.loads(accepted.warnings_json) == [] and json.loads(refused.warnings_json) == []


@pytest.mark.parametrize("error, verdict, code, message", [
    (RuntimeError("boom"), "invalid", "internal", "internal error: RuntimeError"),
    (Busy("the node is stopping", code="stopping"), "busy", "stopping", "the node is stopping")])
def test_a_refused_submit_call_is_a_refused_submit(error, verdict, code, message):
    """The dispatcher's refusal, worded by control.error_answer, as the response's one issue; busy when it may pass
    later."""
    response = convert.answer_to_submit_msg(*error_answer(error), Submit.Response(), "r")
    assert (response.accepted, response.run_id, response.plan_id, response.verdict, response.message) == (
        False, "r", "", verdict, f"refused ({verdict}): {message}")
    assert json.loads(response.issues_json) == [{"code": code, "path": "", "message": message}]


def test_warnings_of_reading_the_input_reach_the_submit_response():
    warning = {"code": "text_skipped", "path": "", "message": "text around the JSON was skipped"}
    answer = {"accepted": True, "run_id": "r", "plan_id": "3", "verdict": "ok", "issues": [], "message": "ok",
              "warnings": [warning]}
    response = convert.answer_to_submit_msg(200, answer, Submit.Response(), "r")
    assert json.loads(response.warnings_json) == [warning] and response.warnings_json.isascii()


def test_status_feedback_and_snapshot_requests():
    assert convert.msg_to_status_request(GetStatus.Request(plan_id="2")) == ("get_plan_status", {"plan_id": "2"})
    assert convert.msg_to_status_request(GetStatus.Request(plan_id="2", feedback=True)) == (
        "get_plan_feedback", {"plan_id": "2"})  # 0: the operation's default
    assert convert.msg_to_status_request(GetStatus.Request(plan_id="2", feedback=True, feedback_chars=150)) == (
        "get_plan_feedback", {"plan_id": "2", "max_output_chars": 150})
    assert convert.msg_to_plans_request(ListPlans.Request()) == ("get_all_plans", {})
    assert convert.msg_to_plans_request(ListPlans.Request(ops=True)) == ("get_plans_snapshot", {})


NOT_FOUND = error_answer(NotFound("no plan\n'9'"))


def test_control_requests_and_answers():
    """Empty fields ask for the operation's defaults; ids and waits go as they came (the dispatcher checks them)."""
    assert convert.msg_to_stop_at(StopAt.Request(plan_id="1", op_id="2", when="")) == (
        "stop_plan_at", {"plan_id": "1", "op_id": "2"})
    assert convert.msg_to_stop_at(StopAt.Request(plan_id="1", op_id="2", when="on_enter", action=" pause ")) == (
        "stop_plan_at", {"plan_id": "1", "op_id": "2", "when": "on_enter", "action": "pause"})
    assert convert.msg_to_disarm(Disarm.Request(plan_id="1", op_id="2")) == (
        "disarm_stop_point", {"plan_id": "1", "op_id": "2"})
    assert convert.msg_to_disarm(Disarm.Request(plan_id="1", op_id="2", when="on_enter"))[1]["when"] == "on_enter"
    assert convert.msg_to_cancel(Cancel.Request(plan_id="", wait_ms=100)) == ("cancel_all", {"wait_ms": 100})
    assert convert.msg_to_cancel(Cancel.Request(plan_id="4", wait_ms=4_000_000_000)) == (
        "cancel_plan", {"plan_id": "4", "wait_ms": 4_000_000_000})
    answer = convert.cancel_to_msg(200, {"finished": False, "message": "a\nb"}, Cancel.Response())
    assert (answer.success, answer.finished, answer.message) == (True, False, "a b")
    refused = convert.cancel_to_msg(*NOT_FOUND, Cancel.Response())
    assert (refused.success, refused.finished, refused.message) == (False, False, "no plan '9'")
    stop = convert.stop_at_to_msg(*NOT_FOUND, StopAt.Response())
    assert (stop.success, stop.message) == (False, "no plan '9'")
    found = convert.status_to_msg(200, {"plan_id": "1"}, GetStatus.Response())
    assert found.found and json.loads(found.status_json) == {"plan_id": "1"}
    missing = convert.status_to_msg(*NOT_FOUND, GetStatus.Response())
    assert not missing.found and json.loads(missing.status_json) == {"error": "no plan '9'", "code": "not_found"}
    plans = convert.plans_to_msg(200, {"count": 0, "plans": []}, ListPlans.Response())
    assert json.loads(plans.plans_json) == {"count": 0, "plans": []}
    broken = convert.plans_to_msg(*error_answer(RuntimeError("boom")), ListPlans.Response())
    assert json.loads(broken.plans_json) == {"count": 0, "plans": [], "error": "internal error: RuntimeError",
                                             "code": "internal"}


def test_topic_messages():
    message = String()
    event = convert.event_to_msg({"event": "plan_started", "plan_id": "1", "time": 1.5, "obj": object()}, message)
    assert event is message and json.loads(event.data)["event"] == "plan_started"
    assert convert.text_to_msg("unchanged \u00e9", String()).data == "unchanged \u00e9"
    assert json.loads(convert.snapshot_to_msg({"time": 1.0, "plans": []}, String()).data)["plans"] == []


def test_a_replan_answer_carries_the_scene():
    scene = {"scene_revision": 12, "objects": ["cap"], "targets": ["work"], "state": {}, "holding": None}
    answer = {"accepted": False, "verdict": "replan_required", "message": "plan again", "issues": [], "scene": scene}
    response = convert.answer_to_submit_msg(200, answer, Submit.Response(), "r1")
    assert json.loads(response.scene_json) == scene
    assert convert.answer_to_submit_msg(200, {"accepted": True, "plan_id": "1"}, Submit.Response(),
                                        "r2").scene_json == ""


def test_the_messages_refuse_what_the_interfaces_do_not_have():
    # the stand-ins are as strict as the generated classes, so a misspelt field or a wrong type fails here
    with pytest.raises(AttributeError):
        Submit.Response().accpeted = True
    with pytest.raises(TypeError):
        Cancel.Response().finished = "yes"
    with pytest.raises(TypeError):
        Submit.Request(graph="{}")


def test_disarm_and_plan_control_answers():
    disarmed = convert.disarm_to_msg(200, {"success": True, "disarmed": True, "message": "Stop point\ndisarmed"},
                                     Disarm.Response())
    assert (disarmed.success, disarmed.disarmed, disarmed.message) == (True, True, "Stop point disarmed")
    refused = convert.disarm_to_msg(*NOT_FOUND, Disarm.Response())
    assert (refused.success, refused.disarmed, refused.message) == (False, False, "no plan '9'")
    answers = {"pause_plan": {"success": True, "paused": True, "message": "paused"},
               "resume_plan": {"success": True, "resumed": False, "message": "not paused"},
               "step_plan": {"success": True, "message": "stepped"}}
    assert convert.msg_to_plan_control("step_plan", PlanControl.Request(plan_id="3")) == (
        "step_plan", {"plan_id": "3"})
    filled = [convert.plan_control_to_msg(operation, 200, answer, PlanControl.Response())
              for operation, answer in answers.items()]
    assert [(r.success, r.changed, r.message) for r in filled] == [
        (True, True, "paused"), (True, False, "not paused"), (True, False, "stepped")]
    unknown = convert.plan_control_to_msg("pause_plan", *NOT_FOUND, PlanControl.Response())
    assert (unknown.success, unknown.changed, unknown.message) == (False, False, "no plan '9'")


def test_the_executor_takes_ros_text_ids_as_it_takes_integer_ids():
    executor = bt_exec.Executor(backend=bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 60}}))
    try:
        rtdl = {"op": "sequence", "op_id": 1, "description": "s", "children": [
            {"op": "do", "op_id": 2, "description": "d", "cap": "sim.act", "args": {}}]}
        calls = ControlCalls(executor)
        plan_id = executor.submit(json.dumps({"rtdl_description": "ids", "rtdl": rtdl}))["plan_id"]
        assert calls.call(*convert.msg_to_stop_at(
            StopAt.Request(plan_id=str(plan_id), op_id="2", when="on_enter", action="pause")), "ros")["armed"]
        assert executor.get_op(int(plan_id), 2)["op"]["pause_point"] == "on_enter"
        assert calls.call(*convert.msg_to_disarm(
            Disarm.Request(plan_id=str(plan_id), op_id="2", when="on_enter")), "ros")["disarmed"]
    finally:
        executor.close(wait_ms=1000)


def test_a_control_call_and_its_answer_round_trip():
    Control = service("Control")
    request = convert.control_call_to_msg("stop_plan_at", {"plan_id": 3, "op_id": "\ud800x"}, "http",
                                          Control.Request())
    operation, args_text, door = convert.msg_to_control_call(request)
    assert (operation, json.loads(args_text), door) == ("stop_plan_at", {"plan_id": 3, "op_id": "\ud800x"}, "http")
    assert request.args_json.isascii()  # a lone surrogate cannot make the message unencodable
    assert convert.msg_to_control_call(Control.Request()) == ("", "{}", "ros")  # empty: no arguments, the ROS door

    answered = convert.control_answer_to_msg(200, {"plans": [], "count": 0}, Control.Response())
    assert convert.msg_to_control_answer(answered) == (True, 200, {"plans": [], "count": 0})
    refused = convert.control_answer_to_msg(409, {"error": {"code": "control_refused", "message": "no plan"}},
                                            Control.Response())
    assert convert.msg_to_control_answer(refused) == (False, 409, {"error": {"code": "control_refused",
                                                                             "message": "no plan"}})
    broken = Control.Response(success=True, status=200, answer_json="{not json")
    assert convert.msg_to_control_answer(broken)[:2] == (False, 502)
