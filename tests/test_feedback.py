"""Feedback in the planner's format: each finished call's {op_id, cap, success, output, error}, cut to a size,
and the plans in flight for the next prompt, through the Python API, HTTP, a real MCP client session and the CLI."""
import http.client
import json
import urllib.parse

import pytest
from command_line import bt_exec_cli
from event_watch import EventWatch
from qwen3_graphs import scene, vacuum_to_work
from rtdl_plans import do, envelope, seq

import bt_exec
from bt_exec.runtime.budgets import json_size
from bt_exec.runtime.feedback import cut_output

BIG = {"image": "p" * 50_000}
SCRIPT = {"caps": {"sim.big": {"output": BIG}, "sim.bad": {"outcome": "failure", "error": "jammed " * 2000},
                   "sim.mid": {"output": {"text": "m" * 5000}}, "sim.slow": {"duration_s": 30}}}
ENTRY_KEYS = ["op_id", "cap", "success", "output", "error"]


def finished(ex, answer):
    assert answer["accepted"], answer["issues"]
    ex.run_until_complete(answer["plan_id"], timeout=30)
    return answer["plan_id"]


class TestFeedback:
    def test_each_finished_call_in_the_order_it_finished_with_big_outputs_cut(self, make_executor):
        ex = make_executor(SCRIPT)
        plan_id = finished(ex, ex.submit(envelope(seq(do("look", cap="sim.big"), do("say"), do("grab", cap="sim.bad"),
                                                      do("never reached")))))
        feedback = ex.get_plan_feedback(plan_id, max_output_chars=500)
        assert (feedback["plan_id"], feedback["running"], feedback["outcome"]) == (plan_id, False, "failed")
        look, say, grab = feedback["ops"]  # the sequence and the op after the failure are not calls that finished
        assert [list(entry) for entry in feedback["ops"]] == [ENTRY_KEYS] * 3
        assert (look["op_id"], look["cap"], look["success"], look["error"]) == ("2", "sim.big", True, "")
        assert look["output"]["truncated"] is True
        assert look["output"]["bytes"] == len(json.dumps(BIG, separators=(",", ":")))
        assert look["output"]["preview"].startswith('{"image":"ppp') and json_size(look["output"]) <= 500
        assert say == {"op_id": "3", "cap": "sim.act", "success": True, "output": {"sim": True, "cap": "sim.act"},
                       "error": ""}
        assert (grab["op_id"], grab["success"]) == ("4", False)
        assert grab["error"].startswith("jammed jammed") and "chars cut" in grab["error"] and len(grab["error"]) < 530

    def test_the_default_keeps_an_output_of_two_thousand_characters_whole(self, make_executor):
        whole, over = {"text": "w" * 1980}, {"text": "o" * 1990}  # 1991 and 2001 characters of JSON
        ex = make_executor({"caps": {"sim.whole": {"output": whole}, "sim.over": {"output": over}}})
        plan_id = finished(ex, ex.submit(envelope(seq(do("a", cap="sim.whole"), do("b", cap="sim.over")))))
        kept, cut = ex.get_plan_feedback(plan_id)["ops"]
        assert kept["output"] == whole
        assert cut["output"]["truncated"] and cut["output"]["bytes"] == 2001 and json_size(cut["output"]) <= 2000

    def test_an_output_the_executor_already_cut_keeps_its_size_and_loses_preview(self, make_executor):
        ex = make_executor(SCRIPT, max_result_bytes=1000)
        plan_id = finished(ex, ex.submit(envelope(do("look", cap="sim.big"))))
        kept = ex.get_plan_result(plan_id)["ops"][0]["result"]["output"]
        [entry] = ex.get_plan_feedback(plan_id, max_output_chars=120)["ops"]
        assert kept["truncated"] and len(kept["preview"]) > 100, "the record keeps its own marker"
        assert entry["output"]["bytes"] == kept["bytes"] == len(json.dumps(BIG, separators=(",", ":")))
        assert kept["preview"].startswith(entry["output"]["preview"][:-1]) and json_size(entry["output"]) <= 120

    def test_feedback_changes_nothing_the_record_keeps(self, make_executor):
        ex = make_executor(SCRIPT, max_result_bytes=100_000)
        plan_id = finished(ex, ex.submit(envelope(do("look", cap="sim.big"))))
        before = ex.get_plan_result(plan_id)
        ex.get_plan_feedback(plan_id, max_output_chars=100)
        assert ex.get_plan_result(plan_id) == before and before["ops"][0]["result"]["output"] == BIG

    def test_a_plan_in_flight_reports_the_calls_finished_so_far(self, make_executor):
        ex = make_executor(SCRIPT)
        plan_id = ex.submit(envelope(seq(do("say"), do("wait", cap="sim.slow"))))["plan_id"]
        for _ in range(50):
            ex.tick_once()
        feedback = ex.get_plan_feedback(plan_id)
        assert (feedback["running"], feedback["outcome"]) == (True, None)
        assert [entry["op_id"] for entry in feedback["ops"]] == ["2"]
        ex.cancel_plan(plan_id, wait_ms=0)
        ex.tick_once()
        after = ex.get_plan_feedback(plan_id)
        assert (after["running"], after["outcome"], after["cancel_reason"]) == (False, "cancelled", "cancel_plan")
        wait = after["ops"][1]
        assert (wait["op_id"], wait["cap"], wait["success"]) == ("3", "sim.slow", False) and wait["error"]

    def test_a_call_stopped_on_complete_after_it_succeeded_says_it_succeeded(self, make_executor):
        ex = make_executor(SCRIPT)
        plan_id = ex.submit(envelope(seq(do("say"), do("then"))))["plan_id"]
        ex.stop_plan_at(plan_id, "2", "on_complete")
        finished(ex, {"accepted": True, "plan_id": plan_id})
        assert [op["state"] for op in ex.get_plan_result(plan_id)["ops"]] == ["canceled", "canceled", "pending"]
        feedback = ex.get_plan_feedback(plan_id)
        assert feedback["cancel_reason"] == "stop point on_complete at op 2"
        assert feedback["ops"] == [{"op_id": "2", "cap": "sim.act", "success": True,
                                    "output": {"sim": True, "cap": "sim.act"}, "error": ""}]

    def test_a_call_that_never_started_is_left_out_and_a_call_the_guard_denied_is_not(self, make_executor):
        guard = {"rules": [{"name": "arm-needs-charge", "effect": "deny", "cap": "arm.*",
                            "state": {"battery": {"lt": 20}}}]}
        ex = make_executor({"state": {"battery": 10}}, call_guard=guard)
        plan_id = ex.submit(envelope(seq(do("say"), do("then"))))["plan_id"]
        ex.stop_plan_at(plan_id, "3", "on_enter")
        finished(ex, {"accepted": True, "plan_id": plan_id})
        assert [op["state"] for op in ex.get_plan_result(plan_id)["ops"]] == ["canceled", "succeeded", "canceled"]
        assert [entry["op_id"] for entry in ex.get_plan_feedback(plan_id)["ops"]] == ["2"], \
            "op 3 was stopped before its call started: the cancel reason says where"
        denied = finished(ex, ex.submit(envelope(do("reach", cap="arm.reach"))))
        [entry] = ex.get_plan_feedback(denied)["ops"]
        assert (entry["op_id"], entry["success"]) == ("4", False) and "arm-needs-charge" in entry["error"]

    def test_a_step_graph_says_its_path(self, make_executor):
        ex = make_executor(scene=scene())
        plan_id = finished(ex, ex.submit(vacuum_to_work()))
        feedback = ex.get_plan_feedback(plan_id)
        assert feedback["path"] == ["s1", "s2", "completed"]
        assert [(entry["op_id"], entry["success"]) for entry in feedback["ops"]] == [("s1", True), ("s2", True)]
        assert all(entry["cap"] for entry in feedback["ops"])

    @pytest.mark.parametrize("limit", [99, 1_000_001, 2000.0, True, "2000", None])
    def test_a_limit_out_of_range_is_refused_by_its_name(self, make_executor, limit):
        ex = make_executor()
        plan_id = finished(ex, ex.submit(envelope(do())))
        with pytest.raises(bt_exec.ControlError, match="max_output_chars must be an integer from 100 to 1000000"):
            ex.get_plan_feedback(plan_id, max_output_chars=limit)

    def test_an_unknown_plan_is_refused_with_what_to_call(self, make_executor):
        with pytest.raises(bt_exec.ControlError, match="no plan '9' is running or kept.*get_finished_plans"):
            make_executor().get_plan_feedback("9")

    def test_any_output_a_backend_returns_is_bounded(self):
        cyclic = []
        cyclic.append(cyclic)
        deep = current = []
        for _ in range(500):
            current.append([])
            current = current[0]


        class Wordy:  # a backend's own type: the doors send its str()
            def __str__(self):
                return "w" * 10**6

        for output in (cyclic, deep, "z" * 10**6, {"k" * 10**5: 1}, 10**400, Wordy()):
            cut = cut_output(output, 150)
            assert json_size(cut) <= 150, type(output)
            assert cut["truncated"] is True and len(json.dumps(cut)) < 400


class TestSnapshot:
    def test_plans_in_flight_with_their_ops_compact(self, make_executor):
        ex = make_executor(SCRIPT)
        first = ex.submit(envelope(seq(do("say"), do("wait", cap="sim.slow")), description="first"))["plan_id"]
        second = ex.submit(envelope(do("wait", cap="sim.slow"), description="second"))["plan_id"]
        ex.stop_plan_at(first, "3", "on_enter")
        snapshot = ex.get_plans_snapshot()
        listed = ex.get_all_plans()
        assert snapshot["count"] == listed["count"] == 2
        assert [{key: plan[key] for key in plan if key != "ops"} for plan in snapshot["plans"]] == listed["plans"]
        ops = {plan["plan_id"]: plan["ops"] for plan in snapshot["plans"]}
        assert ops[first] == [{"op_id": "1", "kind": "sequence", "state": "pending"},
                              {"op_id": "2", "kind": "do", "cap": "sim.act", "state": "pending"},
                              {"op_id": "3", "kind": "do", "cap": "sim.slow", "state": "pending",
                               "stop_point": "on_enter"}]
        assert ops[second] == [{"op_id": "4", "kind": "do", "cap": "sim.slow", "state": "pending"}]
        for _ in range(20):
            ex.tick_once()
        later = ex.get_plans_snapshot()  # the first plan stopped on entering op 3; the second waits on its call
        assert later == {"count": 1, "plans": [{"plan_id": second, "description": "second", "op_count": 1,
                                                "cancelled": False, "paused": False, "stop_points": 0, "ops": [
                                                    {"op_id": "4", "kind": "do", "cap": "sim.slow",
                                                     "state": "running"}]}]}
        ex.cancel_all(wait_ms=0)
        ex.tick_once()
        assert ex.get_plans_snapshot() == {"count": 0, "plans": []}


def get(server, path):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    try:
        connection.request("GET", path)
        response = connection.getresponse()
        return response.status, json.loads(response.read())
    finally:
        connection.close()


class TestHttp:
    def test_feedback_and_snapshot_over_a_real_web_server(self, serve_web):
        executor, server = serve_web(SCRIPT)
        running = executor.submit(envelope(do("wait", cap="sim.slow"), description="waits"))["plan_id"]
        done = finished(executor, executor.submit(envelope(seq(do("look", cap="sim.mid"), do("say")))))
        status, feedback = get(server, f"/api/plans/{done}/feedback?max_output_chars=300")
        assert status == 200 and feedback == executor.get_plan_feedback(done, 300)
        look, say = feedback["ops"]
        assert look["output"]["truncated"] and json_size(look["output"]) <= 300 and say["success"]
        status, default = get(server, f"/api/plans/{done}/feedback")
        preview = default["ops"][0]["output"]["preview"]
        assert status == 200 and 1900 <= len(preview) <= 2000, "about 2000 characters by default"
        running_op_id = running_op(executor, running)
        status, snapshot = get(server, "/api/snapshot")
        assert status == 200 and snapshot["count"] == 1
        assert snapshot["plans"][0]["ops"] == [{"op_id": running_op_id, "kind": "do", "cap": "sim.slow",
                                                "state": "running"}]

    @pytest.mark.parametrize("query, words", [("max_output_chars=99", ["max_output_chars", "100"]),
                                              ("max_output_chars=2000.5", ["max_output_chars"]),
                                              ("max_output_chars=lots", ["max_output_chars"]),
                                              ("limit=3", ["unknown argument"])])
    def test_bad_arguments_are_a_400_naming_them(self, serve_web, query, words):
        executor, server = serve_web(SCRIPT)
        done = finished(executor, executor.submit(envelope(do())))
        status, answer = get(server, f"/api/plans/{done}/feedback?{query}")
        assert status == 400 and answer["error"]["code"] == "bad_arguments"
        assert all(word in answer["error"]["message"] for word in words), answer

    def test_an_unknown_plan_is_a_404_saying_what_to_call(self, serve_web):
        _executor, server = serve_web(SCRIPT)
        status, answer = get(server, "/api/plans/" + urllib.parse.quote("no such") + "/feedback")
        assert (status, answer["error"]["code"]) == (404, "not_found")
        assert "get_finished_plans" in answer["error"]["message"]


def running_op(executor, plan_id):
    """The id of the plan's one op, once its call is under way (the executor ticks in its own thread)."""
    with EventWatch(executor) as watch:
        [op] = executor.get_plan_status(plan_id)["ops"]
        if op["state"] == "running":
            return op["op_id"]
        return watch.wait(lambda event: event["event"] == "node_state" and event["plan_id"] == plan_id
                          and event["state"] == "running")["op_id"]


def http_client_streams(url):
    """The mcp client's streamable HTTP transport, by whichever name this mcp 1.x gives it."""
    try:
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:  # before 1.24
        from mcp.client.streamable_http import streamablehttp_client

        return streamablehttp_client(url)
    return streamable_http_client(url)


class TestMcp:
    def test_an_agent_reads_feedback_and_the_snapshot_in_a_real_session(self, serve_web):
        mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
        import anyio

        executor, server = serve_web(SCRIPT)
        done = finished(executor, executor.submit(envelope(seq(do("look", cap="sim.big"), do("grab", cap="sim.bad")))))
        executor.submit(envelope(do("wait", cap="sim.slow"), description="waits"))

        async def main():
            async with http_client_streams(server.url + "mcp") as (read, write, _):
                async with mcp.ClientSession(read, write) as session:
                    await session.initialize()
                    tools = {tool.name: tool for tool in (await session.list_tools()).tools}
                    feedback = await session.call_tool("get_plan_feedback", {"plan_id": done,
                                                                             "max_output_chars": 200})
                    snapshot = await session.call_tool("get_plans_snapshot", {})
                    refused = await session.call_tool("get_plan_feedback", {"plan_id": done, "max_output_chars": 50})
                    return tools, feedback, snapshot, refused

        tools, feedback, snapshot, refused = anyio.run(main)
        assert "planner" in tools["get_plan_feedback"].description
        assert "next prompt" in tools["get_plans_snapshot"].description
        assert tools["get_plan_feedback"].inputSchema["required"] == ["plan_id"]
        assert not feedback.isError and feedback.structuredContent == executor.get_plan_feedback(done, 200)
        look, grab = feedback.structuredContent["ops"]
        assert look["output"]["truncated"] and json_size(look["output"]) <= 200
        assert not grab["success"] and len(grab["error"]) < 230
        assert not snapshot.isError and snapshot.structuredContent["count"] == 1
        assert refused.isError and refused.content[0].text.startswith("bad_arguments:")


class TestCli:
    def test_run_prints_the_feedback_as_its_last_line(self, tmp_path):
        plan, script = tmp_path / "plan.json", tmp_path / "sim.json"
        plan.write_text(json.dumps(envelope(seq(do("look", cap="sim.big"), do("grab", cap="sim.bad")))))
        script.write_text(json.dumps(SCRIPT))
        ran = bt_exec_cli("run", plan, "--sim-script", script, "--feedback", "--feedback-chars", 400)
        assert ran.returncode == 1, ran.stderr
        lines = ran.stdout.splitlines()
        feedback = json.loads(lines[-1])
        assert lines[-2].startswith("plan 1 failed"), "after the summary line"
        assert (feedback["outcome"], [entry["op_id"] for entry in feedback["ops"]]) == ("failed", ["2", "3"])
        assert feedback["ops"][0]["output"]["truncated"] and json_size(feedback["ops"][0]["output"]) <= 400
        assert not feedback["ops"][1]["success"] and feedback["ops"][1]["error"].startswith("jammed")

    def test_without_the_option_the_output_is_as_before(self, tmp_path):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(envelope(do("say"))))
        ran = bt_exec_cli("run", plan)
        assert ran.returncode == 0 and ran.stdout.splitlines()[-1].startswith("plan 1 succeeded")

    @pytest.mark.parametrize("value", ["99", "1000001", "2k"])
    def test_a_limit_out_of_range_is_a_usage_error(self, tmp_path, value):
        plan = tmp_path / "plan.json"
        plan.write_text(json.dumps(envelope(do("say"))))
        ran = bt_exec_cli("run", plan, "--feedback", "--feedback-chars", value)
        assert ran.returncode == 2 and "--feedback-chars" in ran.stderr and not ran.stdout
