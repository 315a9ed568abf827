"""What Robonix's own Pilot and executor emit loads as it does there: a null call on composite arena
nodes, integer ids, a reply with prose around its JSON, a wait over the cap. Each shape through the
Python API (load, validate, submit) and the CLI (``bt-exec validate``)."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys
import threading

import pytest

import bt_exec
from bt_exec.compilers import load_with_warnings

REPO = pathlib.Path(__file__).resolve().parents[1]
LINEAR_READ_DEADLINE_S = 120
EXAMPLES = REPO / "examples" / "rtdl"
ARENA_NULL_CALLS = EXAMPLES / "arena_null_calls.json"
INTEGER_IDS = EXAMPLES / "stop_plan_at_integer_ids.json"
LONG_WAIT = EXAMPLES / "cancel_all_long_wait.json"
REPLY_WITH_PROSE = EXAMPLES / "pilot_reply_with_prose.txt"


def issues_of(source, **kwargs) -> list[tuple[str, str]]:
    with pytest.raises(bt_exec.PlanError) as caught:
        bt_exec.load(source, **kwargs)
    return [(issue.code, issue.path) for issue in caught.value.issues]


def node(kind: int, children=(), op_id="1", **fields) -> dict:
    return {"node_kind": kind, "children": list(children), "op_id": op_id, "description": f"step {op_id}", **fields}


def do_node(op_id: str, contract="tiago_camera.camera_snapshot", args_json="{}") -> dict:
    return node(2, (), op_id, call={"call_id": f"1:{op_id}", "provider_id": "executor", "contract_id": contract,
                                    "args_json": args_json})


def arena(*nodes, root_index=0) -> dict:
    return {"plan_id": "p", "session_id": "s", "round": 1, "root_index": root_index, "nodes": list(nodes)}


def validate_cli(path: pathlib.Path) -> tuple[int, dict]:
    proc = subprocess.run([sys.executable, "-m", "bt_exec.cli", "validate", str(path), "--json"],
                          capture_output=True, timeout=60, cwd=REPO)
    return proc.returncode, json.loads(proc.stdout)


@pytest.fixture
def executor():
    made = bt_exec.Executor(bt_exec.SimBackend())
    yield made
    made.close(wait_ms=2000)


class TestNullCalls:
    def test_composites_with_a_null_call_load_from_dict_and_text(self):
        doc = json.loads(ARENA_NULL_CALLS.read_text())
        for source in (doc, json.dumps(doc), ARENA_NULL_CALLS):
            plan = bt_exec.load(source)
            assert [(op.op_id, op.kind, op.cap) for op in plan.ops.values()] == [
                ("10", "sequence", None), ("11", "parallel", None), ("12", "do", "tiago_camera.camera_snapshot"),
                ("13", "do", "battery.battery_status"), ("14", "do", "audio.speak_text")]

    def test_the_example_runs_to_success(self, executor):
        answer = executor.submit(ARENA_NULL_CALLS.read_bytes())
        assert answer["accepted"] and "warnings" not in answer
        assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"

    def test_a_real_call_on_a_composite_is_still_refused(self):
        call = do_node("2")["call"]
        for kind in (0, 1):
            doc = arena(node(kind, [1], "1", call=call), do_node("2"))
            assert issues_of(doc) == [("unknown_field", "nodes[0].call")]
            assert issues_of(json.dumps(doc)) == [("unknown_field", "nodes[0].call")]

    def test_a_do_node_needs_a_call_that_is_not_null(self):
        assert issues_of(arena({**do_node("1"), "call": None})) == [("type", "nodes[0].call")]

    def test_a_cycle_is_named_when_the_nodes_are_otherwise_sound(self):
        doc = arena(node(0, [1], "1", call=None), node(1, [2], "2", call=None), node(0, [1], "3", call=None))
        assert issues_of(doc) == [("reached_twice", "nodes[2].children[0]"), ("cycle", "nodes[1]")]
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load(json.dumps(doc))
        assert caught.value.issues[-1].message == "nodes 1, 2 form a cycle"

    def test_a_cycle_is_named_beside_every_other_fault(self):
        doc = arena(node(0, [1], "1"), node(1, [2], "2", extra=True), node(0, [1, 9], "3", call=do_node("x")["call"]),
                    {**do_node("2")})
        found = issues_of(doc)
        assert ("cycle", "nodes[1]") in found
        assert set(found) == {("unknown_field", "nodes[1].extra"), ("index_out_of_range", "nodes[2].children[1]"),
                              ("unknown_field", "nodes[2].call"), ("cycle", "nodes[1]")}
        report = bt_exec.validate(json.dumps(doc))
        assert not report.ok and any(i.code == "cycle" and "nodes 1, 2" in i.message for i in report.issues)

    def test_a_node_listing_itself_is_a_cycle_beside_other_faults(self):
        assert issues_of(arena(node(0, [0], "1", extra=1))) == [("unknown_field", "nodes[0].extra"),
                                                                ("cycle", "nodes[0].children[0]")]

    def test_a_self_listing_is_located_past_entries_equal_to_it(self):
        # True == 1 in Python: the issue must point at the integer, not at the boolean before it
        doc = arena(node(0, [1], "1", extra=1), node(0, [True, 1], "2"))
        assert issues_of(doc) == [("unknown_field", "nodes[0].extra"), ("type", "nodes[1].children[0]"),
                                  ("cycle", "nodes[1].children[1]")]

    def test_cli_validates_the_example(self):
        code, report = validate_cli(ARENA_NULL_CALLS)
        assert (code, report["valid"], report["verdict"]) == (0, True, "ok")


class TestIntegerIds:
    @pytest.mark.parametrize("meta, expected", [
        ({"op": "stop_plan_at", "plan_id": 1, "target_op_id": 1}, ("1", "1")),
        ({"op": "stop_plan_at", "plan_id": 12, "target_op_id": "3"}, ("12", "3")),
        ({"op": "cancel_plan", "plan_id": 0}, ("0", None)),
    ])
    def test_integer_ids_become_their_decimal_string(self, meta, expected):
        for source in (meta, json.dumps(meta), {"rtdl": meta, "rtdl_description": ""}):
            request = bt_exec.load(source)
            assert (request.plan_id, request.target_op_id) == expected

    @pytest.mark.parametrize("value", [-1, 1.5, 2.0, True, False, None, [1], 2 ** 63])
    def test_other_numbers_are_refused_at_the_field(self, value):
        assert issues_of({"op": "cancel_plan", "plan_id": value}) == [("bad_value", "/plan_id")]
        assert issues_of({"rtdl": {"op": "stop_plan_at", "plan_id": "1", "target_op_id": value}}) == [
            ("bad_value", "/rtdl/target_op_id")]

    def test_submit_arms_a_stop_point_named_by_integers(self, executor):
        plan = executor.submit(json.loads((EXAMPLES / "snapshot_battery.json").read_text()))
        answer = executor.submit(INTEGER_IDS.read_text())
        assert answer["accepted"], answer
        assert answer["control"] == {"op": "stop_plan_at", "plan_id": plan["plan_id"], "target_op_id": "1",
                                     "when": "on_complete"}

    def test_builtin_args_take_integer_ids(self):
        tree = {"op": "sequence", "description": "ask and stop", "children": [
            {"op": "do", "description": "status", "cap": "executor.builtin_get_plan_status", "args": {"plan_id": 3}},
            {"op": "do", "description": "stop", "cap": "executor.builtin_stop_plan_at",
             "args": {"plan_id": 3, "op_id": 7, "when": "on_enter"}}]}
        plan = bt_exec.load(tree)
        assert [op.args for op in plan.ops.values() if op.kind == "do"] == [
            {"plan_id": "3"}, {"plan_id": "3", "op_id": "7", "when": "on_enter"}]
        assert tree["children"][0]["args"] == {"plan_id": 3}  # the caller's document is left as it was
        assert bt_exec.validate(tree).ok

    def test_builtin_args_in_an_arena_take_integer_ids(self):
        contract = "robonix/system/executor/builtin/stop_plan_at"
        doc = arena(node(0, [1], "1", call=None), do_node("2", contract, '{"plan_id": 4, "op_id": 9}'))
        for source in (doc, json.dumps(doc)):
            assert bt_exec.load(source).ops["2"].args == {"plan_id": "4", "op_id": "9"}
            assert bt_exec.validate(source).ok

    def test_bad_builtin_ids_are_refused_at_the_arg(self):
        tree = {"op": "do", "description": "status", "cap": "executor.builtin_get_plan_status", "args": {"plan_id": -3}}
        assert issues_of(tree) == [("bad_value", "/args/plan_id")]
        doc = arena(do_node("1", "robonix/system/executor/builtin/get_plan_status", '{"plan_id": 1.5}'))
        for source in (doc, json.dumps(doc)):
            assert issues_of(source) == [("bad_value", "nodes[0].call.args_json at /plan_id")]

    def test_a_cap_of_another_provider_keeps_its_args(self):
        doc = arena(do_node("1", "robonix/system/executor/builtin/get_plan_status", '{"plan_id": -1}'))
        doc["nodes"][0]["call"]["provider_id"] = "someone_else"
        assert bt_exec.load(doc).ops["1"].args == {"plan_id": -1}

    def test_cli_validates_the_example(self):
        code, report = validate_cli(INTEGER_IDS)
        assert (code, report["verdict"]) == (0, "control")
        assert report["stats"]["control"]["plan_id"] == "1" and report["stats"]["control"]["target_op_id"] == "1"


class TestReplyWithProse:
    PLAN = {"rtdl": {"op": "do", "description": "take a snapshot", "cap": "tiago_camera.camera_snapshot"},
            "rtdl_description": "snapshot"}

    def test_the_first_balanced_object_is_read_and_the_text_is_a_warning(self):
        text = f"Sure, here is the plan (as {{asked}}):\n{json.dumps(self.PLAN)}\nTell me if \"more\" is needed."
        plan, warnings = load_with_warnings(text)
        assert plan.description == "snapshot" and plan.op_count == 1
        assert [w["code"] for w in warnings] == ["text_skipped"]
        report = bt_exec.validate(text)
        assert report.ok and report.as_dict()["warnings"] == warnings
        assert bt_exec.load(text.encode()).op_count == 1

    def test_the_one_fenced_block_is_read(self):
        plan, warnings = load_with_warnings(REPLY_WITH_PROSE.read_text())
        assert plan.op_count == 5 and "fenced code block" in warnings[0]["message"]

    def test_an_object_followed_by_text_is_read(self):
        plan, warnings = load_with_warnings(json.dumps(self.PLAN) + "\n\nDone.")
        assert plan.op_count == 1 and warnings[0]["code"] == "text_skipped"

    def test_braces_inside_strings_and_unknown_objects_are_passed_over(self):
        plan = {**self.PLAN, "content": "a } and a { in text"}
        text = 'Note: {"units": "metric"} applies.\n' + json.dumps(plan)
        assert bt_exec.load(text).meta["content"] == "a } and a { in text"

    def test_the_same_plan_twice_is_one_plan(self):
        text = f"{json.dumps(self.PLAN)}\nAgain: {json.dumps(self.PLAN)}"
        assert bt_exec.load(text).op_count == 1

    def test_two_different_plans_are_refused(self):
        other = {**self.PLAN, "rtdl_description": "another"}
        text = f"Either {json.dumps(self.PLAN)} or {json.dumps(other)}"
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load(text)
        [issue] = caught.value.issues
        assert issue.code == "ambiguous_reply" and "two different JSON objects" in issue.message

    @pytest.mark.parametrize("text", ["I cannot do that.", "Sure: {not json} and {nor this", "```\nno json\n```"])
    def test_text_alone_is_refused(self, text):
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load(text)
        [issue] = caught.value.issues
        assert issue.code == "json_syntax" and "no JSON object in this text" in issue.message

    def test_malformed_json_is_still_said_as_such(self):
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load('{"op": "sequence", "children": [')
        assert [i.message for i in caught.value.issues] == ["malformed JSON at line 1 column 33: Expecting value"]

    def test_what_is_read_is_checked_as_usual(self):
        text = 'Here: {"rtdl": {"op": "do", "cap": "tiago_camera.camera_snapshot"}, "rtdl_description": "x"} ok'
        assert issues_of(text) == [("required", "/rtdl")]

    def test_submit_answers_with_the_warning(self, executor):
        text = REPLY_WITH_PROSE.read_text()
        answer = executor.submit(text, run_id="prose")
        assert answer["accepted"] and [w["code"] for w in answer["warnings"]] == ["text_skipped"]
        assert executor.submit(text, run_id="prose") == answer
        assert executor.run_until_complete(answer["plan_id"], timeout=10)["outcome"] == "succeeded"
        checked = executor.validate_plan(text)
        assert checked["valid"] and checked["warnings"] == answer["warnings"]

    def test_a_refusal_by_the_checks_also_says_text_was_skipped(self, executor):
        text = 'Plan: {"rtdl": {"op": "do", "description": "x", "cap": "executor.builtin_get_plan_status"}}'
        answer = executor.submit(text)
        assert not answer["accepted"] and answer["issues"][0]["path"] == "/rtdl/args"
        assert answer["warnings"][0]["code"] == "text_skipped"

    @pytest.mark.parametrize("junk", ["{" * 400_000, '{"' * 300_000, '"' * 500_000 + "{", "} {" * 300_000,
                                      "```\n" * 200_000],
                             ids=["open-braces", "open-strings", "quotes", "closed-pairs", "fences"])
    def test_hostile_text_is_read_in_linear_time(self, junk):
        # Quadratic work on these would take hours, a linear read well under a second: a deadline far past the
        # second tells them apart however busy the machine.
        refused = []

        def read():
            try:
                bt_exec.load("prose " + junk)
            except bt_exec.PlanError as exc:
                refused.append(exc)

        reader = threading.Thread(target=read, daemon=True)
        reader.start()
        reader.join(LINEAR_READ_DEADLINE_S)
        assert not reader.is_alive(), f"no answer after {LINEAR_READ_DEADLINE_S} s: the read is not linear"
        assert refused, "hostile text must be refused"

    def test_a_reply_of_many_blocks_or_deep_braces_is_refused(self):
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load("notes: " + "{} " * 300 + json.dumps(self.PLAN))
        assert [i.code for i in caught.value.issues] == ["ambiguous_reply"]
        with pytest.raises(bt_exec.PlanError) as caught:
            bt_exec.load("deep: " + "{" * 400 + "}" * 400)
        assert [i.code for i in caught.value.issues] == ["too_deep"]

    def test_text_over_the_input_limit_is_refused_unread(self):
        limits = bt_exec.Limits(max_input_bytes=1000)
        assert issues_of("Sure! " + json.dumps(self.PLAN) + " " * 1000, limits=limits) == [("too_large", "")]

    def test_cli_validates_the_example_with_the_warning(self):
        code, report = validate_cli(REPLY_WITH_PROSE)
        assert (code, report["verdict"]) == (0, "ok")
        assert [w["code"] for w in report["warnings"]] == ["text_skipped"]


class TestWaitCap:
    def test_a_long_wait_is_capped_and_said(self):
        request, warnings = load_with_warnings(LONG_WAIT)
        assert request.wait_ms == 30_000
        assert warnings == [{"code": "wait_capped",
                             "message": "wait_ms 60000 capped at 30000 (the longest a cancel waits)"}]

    def test_the_cap_is_a_limit(self):
        limits = bt_exec.Limits(max_wait_ms=1000)
        assert bt_exec.load({"op": "cancel_plan", "plan_id": "1", "wait_ms": 5000}, limits=limits).wait_ms == 1000
        assert bt_exec.load({"op": "cancel_all", "wait_ms": 999}, limits=limits).wait_ms == 999
        assert bt_exec.load({"op": "cancel_all"}, limits=bt_exec.Limits()).wait_ms == 5000
        with pytest.raises(ValueError):
            bt_exec.Limits(max_wait_ms=0)

    def test_a_wait_within_the_cap_has_no_warning(self):
        assert load_with_warnings({"op": "cancel_all", "wait_ms": 30_000})[1] == []

    @pytest.mark.parametrize("wait_ms", [-1, 1.5, True, "60000"])
    def test_other_waits_are_still_refused(self, wait_ms):
        assert issues_of({"op": "cancel_all", "wait_ms": wait_ms}) == [("bad_value", "/wait_ms")]

    def test_submit_and_validate_show_the_wait_used(self, executor):
        answer = executor.submit(LONG_WAIT.read_bytes())
        assert answer["accepted"] and answer["control"]["wait_ms"] == 30_000
        assert [w["code"] for w in answer["warnings"]] == ["wait_capped"]
        report = bt_exec.validate(LONG_WAIT)
        assert report.ok and report.stats["control"]["wait_ms"] == 30_000
        assert report.as_dict()["warnings"][0]["code"] == "wait_capped"

    def test_cli_validates_the_example(self):
        code, report = validate_cli(LONG_WAIT)
        assert (code, report["stats"]["control"]["wait_ms"]) == (0, 30_000)
        assert [w["code"] for w in report["warnings"]] == ["wait_capped"]


def test_well_formed_input_answers_as_before(executor):
    """No warnings key, the same verdicts: nothing changes for input that was already well formed."""
    for path in (EXAMPLES / "snapshot_battery.json", EXAMPLES / "three_commands_arena.json",
                 EXAMPLES / "cancel_all.json"):
        assert "warnings" not in bt_exec.validate(path).as_dict()
        assert "warnings" not in executor.validate_plan(path.read_bytes())


def test_a_capped_wait_is_said_in_the_control_answers_message_and_a_larger_limit_is_waited():
    ex = bt_exec.Executor(bt_exec.SimBackend())
    try:
        answer = ex.submit({"op": "cancel_all", "wait_ms": 60000})
        assert answer["accepted"] and answer["control"]["wait_ms"] == 30000
        assert answer["message"].endswith("(wait_ms 60000 capped at 30000 (the longest a cancel waits))")
    finally:
        ex.close()
    roomy = bt_exec.Executor(bt_exec.SimBackend(), limits=bt_exec.Limits(max_wait_ms=60000))
    try:
        answer = roomy.submit({"op": "cancel_all", "wait_ms": 60000})
        assert answer["accepted"] and answer["control"]["wait_ms"] == 60000 and "warnings" not in answer
        assert roomy.cancel_all(wait_ms=60000)["count"] == 0
    finally:
        roomy.close()


def test_the_cli_text_report_shows_each_warning_under_the_verdict():
    path = EXAMPLES / "pilot_reply_with_prose.txt"
    proc = subprocess.run([sys.executable, "-m", "bt_exec.cli", "validate", str(path)], capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    verdict, warning = proc.stdout.splitlines()
    assert verdict.endswith(": ok: rtdl envelope, 5 ops (1 sequence, 1 parallel, 3 do), depth 3")
    assert warning.startswith("  warning: read the fenced code block") and warning.endswith("[text_skipped]")
