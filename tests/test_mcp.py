"""The MCP door: `bt-exec mcp` spawned as a real process, driven through an MCP client session over stdio."""
import json
import os
import sys

import pytest
from rtdl_plans import do, envelope, seq

mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
import anyio  # noqa: E402  (mcp brings it)
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402

from bt_exec.web import ControlApi, WebServer  # noqa: E402

TOOLS = {"submit_plan", "validate_plan", "get_all_plans", "get_plan_status", "get_plan_result", "stop_plan_at",
         "cancel_plan", "cancel_all"}
TOKEN = "mcp-test-token"


def slow_script(tmp_path, duration_s=0.5):
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"default": {"outcome": "success", "duration_s": duration_s}}))
    return str(path)


def run_session(arguments, body, env=None):
    """Spawn ``bt-exec mcp ARGUMENTS`` and run ``body(session)`` (async) in an initialised client session."""
    server = StdioServerParameters(command=sys.executable, args=["-m", "bt_exec.cli", "mcp", *arguments],
                                   env={**os.environ, **(env or {})})
    result = {}

    async def main():
        async with stdio_client(server) as (read, write):
            async with ClientSession(read, write) as session:
                result["init"] = await session.initialize()
                result["value"] = await body(session)

    anyio.run(main)
    return result


async def call(session, name, **arguments):
    """A tool's structured answer; fails the test on a tool error."""
    answer = await session.call_tool(name, arguments)
    assert not answer.isError, answer.content[0].text
    return answer.structuredContent


async def refusal(session, name, **arguments):
    answer = await session.call_tool(name, arguments)
    assert answer.isError
    return answer.content[0].text


def test_an_agent_inspects_then_stops_a_plan_at_a_chosen_op(tmp_path):
    plan = envelope(seq(do("reach"), do("grasp"), do("lift"), do("place")), description="pick and place")

    async def body(session):
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        schemas = {tool.name: tool.inputSchema for tool in listed.tools}
        assert schemas["stop_plan_at"]["required"] == ["plan_id", "op_id"]
        assert schemas["stop_plan_at"]["properties"]["when"]["enum"] == ["on_enter", "on_complete"]

        submitted = await call(session, "submit_plan", graph=plan, run_id="agent-1")
        assert submitted["accepted"]
        plans = await call(session, "get_all_plans")
        assert plans["plans"][0]["plan_id"] == submitted["plan_id"]
        status = await call(session, "get_plan_status", plan_id=submitted["plan_id"])
        place = next(op for op in status["ops"] if op["description"] == "place")
        armed = await call(session, "stop_plan_at", plan_id=submitted["plan_id"], op_id=place["op_id"],
                           when="on_enter")
        assert armed["armed"]
        for _ in range(200):
            plans = await call(session, "get_all_plans")
            if plans["count"] == 0:
                break
            await anyio.sleep(0.05)
        return await call(session, "get_plan_result", plan_id=submitted["plan_id"])

    result = run_session(["--sim-script", slow_script(tmp_path, 0.3)], body)
    assert result["init"].serverInfo.name == "bt_exec" and "get_all_plans" in result["init"].instructions
    record = result["value"]
    assert record["outcome"] == "cancelled" and "on_enter" in record["cancel_reason"]
    states = {op["description"]: op for op in record["ops"]}
    assert states["lift"]["state"] == "succeeded" and states["place"]["started_at"] is None


def test_bad_plans_and_refused_control_come_back_as_actionable_answers(tmp_path):
    bad = envelope(seq(do(), {"op": "do", "op_id": 0, "description": "no cap", "args": {}}))

    async def body(session):
        report = await call(session, "validate_plan", graph=bad)
        refused = await call(session, "submit_plan", graph=bad)
        unknown = await refusal(session, "get_plan_status", plan_id="9")
        wrong_when = await refusal(session, "stop_plan_at", plan_id="1", op_id="1", when="sometime")
        no_such_tool = await refusal(session, "reboot_robot")
        cancelled = await call(session, "cancel_all", wait_ms=1000)
        return report, refused, unknown, wrong_when, no_such_tool, cancelled

    report, refused, unknown, wrong_when, no_such_tool, cancelled = run_session([], body)["value"]
    assert not report["valid"] and report["issues"][0]["path"].startswith("/rtdl/children/1")
    assert not refused["accepted"] and refused["issues"] == report["issues"]
    assert unknown.startswith("control_refused:") and "get_all_plans" in unknown
    assert wrong_when.startswith("bad_arguments:") and "when" in wrong_when
    assert "reboot_robot" in no_such_tool
    assert cancelled["count"] == 0


def test_a_qwen3_graph_runs_in_the_mcp_servers_own_scene():
    graph = json.load(open("examples/qwen3/cap_to_hatch.json"))

    async def body(session):
        answer = await call(session, "submit_plan", graph=json.dumps(graph))
        for _ in range(400):
            if (await call(session, "get_all_plans"))["count"] == 0:
                break
            await anyio.sleep(0.05)
        return answer, await call(session, "get_plan_result", plan_id=answer["plan_id"])

    answer, record = run_session(["--scene", "examples/qwen3/scene.json"], body)["value"]
    assert answer["accepted"] and answer["dialect"] == "qwen3"
    assert record["terminal"] == "completed" and record["path"] == ["s0", "s1", "s2", "s3", "completed"]
    assert record["run_id"] == graph["run_id"]


def test_with_url_the_tools_drive_a_running_app(make_executor):
    executor = make_executor({"default": {"outcome": "success", "duration_s": 2.0}})
    executor.start()
    server = WebServer(ControlApi(executor), port=0, token=TOKEN)
    server.start()
    try:
        async def body(session):
            submitted = await call(session, "submit_plan", graph=envelope(do("wait")))
            assert executor.get_all_plans()["count"] == 1  # it runs in the app's executor, not in the MCP process
            return await call(session, "cancel_plan", plan_id=submitted["plan_id"], wait_ms=5000)

        result = run_session(["--url", server.url], body, env={"BT_EXEC_WEB_TOKEN": TOKEN})
        assert result["value"]["finished"]
        assert executor.get_plan_result("1")["outcome"] == "cancelled"

        async def without_token(session):
            return await refusal(session, "cancel_all")

        assert run_session(["--url", server.url], without_token,
                           env={"BT_EXEC_WEB_TOKEN": ""})["value"].startswith("token_required:")
    finally:
        server.close()


def test_url_and_an_own_executor_option_do_not_mix(tmp_path):
    from bt_exec.cli import main

    assert main(["mcp", "--url", "http://127.0.0.1:1/", "--scene", "examples/qwen3/scene.json"]) == 2
