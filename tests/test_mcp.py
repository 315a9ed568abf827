"""The MCP door: `bt-exec mcp` spawned as a real process, driven through an MCP client session over stdio."""
import http.client
import json
import logging
import os
import subprocess
import sys

import pytest
from held_clock import HeldClock
from rtdl_plans import do, envelope, par, seq

mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
import anyio  # noqa: E402  (mcp brings it)
from mcp import ClientSession, StdioServerParameters  # noqa: E402
from mcp.client.stdio import stdio_client  # noqa: E402
from mcp.shared.exceptions import McpError  # noqa: E402

from bt_exec.control import ControlApi, error_answer  # noqa: E402
from bt_exec.errors import ControlError  # noqa: E402
from bt_exec.web.client import HttpApi  # noqa: E402
from bt_exec.web.server import WebServer  # noqa: E402
from bt_exec.web.mcp_server import MAX_LINE_BYTES  # noqa: E402

TOOLS = {"submit_plan", "validate_plan", "get_all_plans", "get_plan_status", "get_plan_result", "get_plan_feedback",
         "get_plans_snapshot", "stop_plan_at", "disarm_stop_point", "cancel_plan", "cancel_all", "wait_for_plan",
         "get_op", "pause_plan", "resume_plan", "step_plan"}
TOKEN = "mcp-test-token"


def slow_script(tmp_path, duration_s=0.5, held_op=None):
    """A sim script whose calls take ``duration_s``; ``held_op``'s takes 3 s: time for an agent to act on the
    plan (a server in another process runs on the machine's clock)."""
    path = tmp_path / "slow.json"
    path.write_text(json.dumps({"default": {"outcome": "success", "duration_s": duration_s},
                                "ops": {held_op: {"outcome": "success", "duration_s": 3.0}} if held_op else {}}))
    return str(path)


def run_session(arguments, body, env=None):
    """Spawn ``bt-exec mcp ARGUMENTS`` and run ``body(session)`` (async) in an initialised client session."""
    server = StdioServerParameters(command=sys.executable, args=["-m", "bt_exec.cli", "mcp", *arguments],
                                   env={**os.environ, **(env or {})})
    result = {}

    async def main():
        # The server's stderr to the real one: the default is whatever sys.stderr was when mcp was first imported,
        # which under pytest may be a capture buffer with no file descriptor.
        async with stdio_client(server, errlog=sys.__stderr__) as (read, write):
            async with ClientSession(read, write) as session:
                result["init"] = await session.initialize()
                result["value"] = await body(session)

    anyio.run(main)
    return result


async def call(session, name, **arguments):
    """A tool's structured answer; fails the test on a tool error, or where its text block is not the same
    answer as compact JSON (what a host that shows the model only the content blocks shows it)."""
    answer = await session.call_tool(name, arguments)
    assert not answer.isError, answer.content[0].text
    assert len(answer.content) == 1 and json.loads(answer.content[0].text) == answer.structuredContent
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

    result = run_session(["--sim-script", slow_script(tmp_path, 0.05, held_op="2")], body)
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
    assert unknown.startswith("not_found:") and "get_all_plans" in unknown
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


def nested_plan(levels):
    """A valid plan whose tree nests ``levels`` sequences deep (two JSON levels each)."""
    tree = do("innermost")
    for _ in range(levels - 1):
        tree = seq(tree)
    return envelope(tree, description=f"{levels} levels")


def test_stdio_answers_every_request_and_takes_deep_plans_as_text():
    plan = nested_plan(110)

    async def body(session):
        with pytest.raises(McpError) as too_deep:
            await session.call_tool("validate_plan", {"graph": plan})
        as_text = await call(session, "validate_plan", graph=json.dumps(plan))
        still_serving = await call(session, "get_all_plans")
        return too_deep.value, as_text, still_serving

    too_deep, as_text, still_serving = run_session([], body)["value"]
    assert "graph as a string" in str(too_deep) and "levels deep" in str(too_deep)
    assert as_text["valid"] and as_text["stats"]["ops"] == 110
    assert still_serving["count"] == 0


def test_lone_surrogates_and_unreadable_lines_never_stop_the_stdio_server(tmp_path):
    # Raw JSON-RPC lines: the mcp client itself cannot send text UTF-8 cannot carry, an agent's own code can.
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "mcp", "--sim-script",
                                slow_script(tmp_path, 0.05)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def exchange(line: bytes) -> dict:
        process.stdin.write(line + b"\n")
        process.stdin.flush()
        answer = process.stdout.readline()
        assert answer, process.stderr.read().decode()
        return json.loads(answer.decode("ascii"))  # ASCII JSON, whatever the request held

    def tool_call(request_id, name, arguments) -> dict:
        return exchange(json.dumps({"jsonrpc": "2.0", "id": request_id, "method": "tools/call",
                                    "params": {"name": name, "arguments": arguments}}).encode())

    try:
        exchange(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "1"}}}).encode())
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        plan = envelope(seq(do("grip \ud800"), do("lift")), description="bad \udfff text")
        submitted = tool_call(1, "submit_plan", {"graph": plan, "run_id": "lone-\ud800"})
        unknown = tool_call(2, "get_plan_status", {"plan_id": "\ud800"})
        unreadable = exchange(b"{not json")
        too_deep = exchange(b"[" * 100_000)
        too_long = exchange(b'"' + b"x" * MAX_LINE_BYTES + b'"')
        listed = tool_call(3, "get_all_plans", {})
    finally:
        process.stdin.close()
        process.wait(timeout=20)
    assert submitted["id"] == 1 and submitted["result"]["content"]  # accepted or refused: an answer
    assert unknown["result"]["isError"] and unknown["result"]["content"][0]["text"].startswith("not_found:")
    assert unreadable["error"]["code"] == -32700 and too_deep["error"]["code"] == -32700
    assert too_long["error"]["code"] == -32600 and "bytes" in too_long["error"]["message"]
    assert listed["id"] == 3 and not listed["result"].get("isError")
    assert process.returncode == 0 and b"Traceback" not in process.stderr.read()


def test_an_installed_mcp_2_is_named_with_what_to_install(tmp_path):
    # A distribution record saying mcp 2.0.0, found first on the path: what an upgraded environment shows.
    record = tmp_path / "mcp-2.0.0.dist-info"
    record.mkdir()
    (record / "METADATA").write_text("Metadata-Version: 2.1\nName: mcp\nVersion: 2.0.0\n")
    run = subprocess.run([sys.executable, "-m", "bt_exec.cli", "mcp"], capture_output=True, text=True, timeout=60,
                         stdin=subprocess.DEVNULL,
                         env={**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(tmp_path),
                                                                                       os.environ.get("PYTHONPATH")]))})
    assert run.returncode == 2 and "Traceback" not in run.stderr
    assert "mcp 2.0.0 is installed" in run.stderr and "pip install 'mcp>=1.10,<2'" in run.stderr


def http_client_streams(url, headers):
    """The mcp client's streamable HTTP transport, by whichever name this mcp 1.x gives it."""
    try:
        from mcp.client.streamable_http import streamable_http_client
    except ImportError:  # before 1.24
        from mcp.client.streamable_http import streamablehttp_client

        return streamablehttp_client(url, headers=headers)
    import httpx

    return streamable_http_client(url, http_client=httpx.AsyncClient(headers=headers, timeout=30))


def run_http_session(url, body, token=TOKEN):
    result = {}

    async def main():
        async with http_client_streams(url, {"Authorization": f"Bearer {token}"}) as (read, write, _):
            async with ClientSession(read, write) as session:
                result["init"] = await session.initialize()
                result["value"] = await body(session)

    anyio.run(main)
    return result


@pytest.fixture
def web_app(serve_web):
    def start(token=TOKEN, **options):
        executor, server = serve_web({"default": {"outcome": "success", "duration_s": 0.5}}, token, **options)
        executor.backend.clock = HeldClock()  # a plan stays running while the agent looks at it
        return executor, server

    return start


def test_an_agent_drives_the_web_app_over_mcp_at_its_own_address(web_app):
    executor, server = web_app()
    deep = nested_plan(110)

    async def body(session):
        listed = await session.list_tools()
        assert {tool.name for tool in listed.tools} == TOOLS
        submitted = await call(session, "submit_plan", graph=envelope(seq(do("reach"), do("place"))))
        assert executor.get_all_plans()["count"] == 1  # the app's own executor: no second process
        status = await call(session, "get_plan_status", plan_id=submitted["plan_id"])
        cancelled = await call(session, "cancel_plan", plan_id=submitted["plan_id"], wait_ms=5000)
        wrong = await refusal(session, "cancel_plan", plan_id="1", wait_ms=1.0)
        with pytest.raises(McpError) as too_deep:
            await session.call_tool("validate_plan", {"graph": deep})
        as_text = await call(session, "validate_plan", graph=json.dumps(deep))
        return status, cancelled, wrong, too_deep.value, as_text

    result = run_http_session(server.url + "mcp", body)
    status, cancelled, wrong, too_deep, as_text = result["value"]
    assert result["init"].serverInfo.name == "bt_exec"
    assert [op["description"] for op in status["ops"]][1:] == ["reach", "place"] and cancelled["finished"]
    assert wrong.startswith("bad_arguments:") and "wait_ms" in wrong
    assert "graph as a string" in str(too_deep)
    assert as_text["valid"] and as_text["stats"]["ops"] == 110


def http_answer(server, method, path, body=None):
    """``(status, answer)`` of one raw HTTP request to the app, with its token."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request(method, path, body=None if body is None else json.dumps(body),
                       headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer


def test_every_door_refuses_the_same_input_with_the_same_status_code_and_words(web_app):
    """The dispatcher's typed error, the HTTP answer, the HTTP client's error and the MCP tool error of one bad
    request: one status per type (404 not found, 400 bad argument, 409 conflict), one code, one message."""
    executor, server = web_app()
    plan_id = executor.submit(envelope(seq(do("reach"), do("place"))))["plan_id"]  # held running
    cases = [  # operation, arguments, the HTTP request that asks the same, status, code
        ("get_plan_status", {"plan_id": "999"}, "GET", "/api/plans/999/status", None, 404, "not_found"),
        ("get_op", {"plan_id": plan_id, "op_id": "99"}, "GET", f"/api/plans/{plan_id}/ops/99", None, 404,
         "not_found"),
        ("cancel_plan", {"plan_id": "999", "wait_ms": 0}, "POST", "/api/plans/999/cancel", {"wait_ms": 0}, 404,
         "not_found"),
        ("stop_plan_at", {"plan_id": plan_id, "op_id": "2", "when": "sometime"}, "POST",
         f"/api/plans/{plan_id}/stop_at", {"op_id": "2", "when": "sometime"}, 400, "bad_arguments"),
        ("get_finished_plans", {"limit": -1}, "GET", "/api/finished?limit=-1", None, 400, "bad_arguments"),
        ("get_plan_result", {"plan_id": plan_id}, "GET", f"/api/plans/{plan_id}/result", None, 409,
         "control_refused"),
    ]
    direct, over_http, over_client = {}, {}, {}
    for name, args, method, path, body, status, code in cases:
        with pytest.raises(ControlError) as refused:
            server.api.call(name, args)
        direct[name] = error_answer(refused.value)
        over_http[name] = http_answer(server, method, path, body)
        with pytest.raises(ControlError) as relayed:
            HttpApi(server.url, token=TOKEN).call(name, args)
        over_client[name] = error_answer(relayed.value)
        assert (direct[name][0], direct[name][1]["error"]["code"]) == (status, code), name
    assert over_http == direct and over_client == direct

    async def body(session):
        return {name: await refusal(session, name, **args) for name, args, *_ in cases + [("reboot", {}, *[None] * 5)]}

    over_mcp = run_http_session(server.url + "mcp", body)["value"]
    expected = {name: f"{answer['error']['code']}: {answer['error']['message']}"
                for name, (_, answer) in direct.items()}
    assert {name: text for name, text in over_mcp.items() if name != "reboot"} == expected
    assert over_mcp["reboot"].startswith("unknown_operation: no operation 'reboot'")


def mcp_post(server, headers, body=b'{"jsonrpc": "2.0", "id": 1, "method": "tools/list"}'):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json",
                                                           "Accept": "application/json, text/event-stream",
                                                           **headers})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer


def test_mcp_over_http_keeps_the_apps_token_and_origin_rules(web_app):
    executor, server = web_app()
    assert mcp_post(server, {})[0] == 401
    assert mcp_post(server, {"Authorization": "Bearer wrong"})[1]["error"]["code"] == "token_required"
    status, answer = mcp_post(server, {"Authorization": f"Bearer {TOKEN}", "Origin": "http://evil.example"})
    assert (status, answer["error"]["code"]) == (403, "bad_origin")
    status, answer = mcp_post(server, {"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and {tool["name"] for tool in answer["result"]["tools"]} == TOOLS


@pytest.mark.parametrize("body, code", [(b"{not json", -32700), (b"[" * 100_000, -32700),
                                        (b'{"jsonrpc": "2.0", "id": 7, "method": 5}', -32600)])
def test_mcp_over_http_answers_what_it_cannot_read(web_app, body, code):
    _, server = web_app()
    status, answer = mcp_post(server, {"Authorization": f"Bearer {TOKEN}"}, body)
    assert status == 200 and answer["error"]["code"] == code and answer["error"]["message"]


# Messages a client may send that the mcp library cannot take, each with the id and JSON-RPC code of its answer
# (a batch: of each answer). Written as raw JSON: no MCP client sends them.
MISFITS = [
    (b'{"jsonrpc": "2.0", "id": 1.5, "method": "tools/list"}', 1.5, -32600),  # a number id, echoed for the client
    (b'{"jsonrpc": "2.0", "id": null, "method": "tools/list"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": true, "method": "tools/list"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": {"a": 1}, "method": "tools/list"}', None, -32600),
    (b'{"jsonrpc": "2.0", "id": 3, "method": "no/such"}', 3, -32601),
    (b'{"jsonrpc": "2.0", "id": "r", "method": "resources/list"}', "r", -32601),  # MCP's, not served here
    (b'{"jsonrpc": "2.0", "id": 4}', 4, -32600),
    (b'{"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": [1, 2]}', 5, -32602),
    (b'{"jsonrpc": "2.0", "id": 6, "method": "tools/call", "params": {"name": 5}}', 6, -32602),
    (b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": "x"}', 7, -32600),
    (b'{"jsonrpc": "1.0", "id": 8, "method": "tools/list"}', 8, -32600),
    (b'{"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": {"x": NaN}}', None, -32700),
    (b'{"jsonrpc": "2.0", "id": 10, "method": "tools/list", "params": {"x": 1e999}}', None, -32700),
    (b'{"jsonrpc": "2.0", "id": 11, "method": "initialize", "params": {}}', 11, -32602),
    (b'[{"jsonrpc": "2.0", "id": 12, "method": "tools/list"}, {"jsonrpc": "2.0", "method": "notifications/cancelled"},'
     b' 5]', [12, None], -32600),
    (b"[]", None, -32600),
    (b"7", None, -32600),
]
# Messages JSON-RPC answers with nothing: notifications, responses (this server asks nothing).
UNANSWERED = [b'{"jsonrpc": "2.0", "method": "no/such"}',
              b'{"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": [1]}}',
              b'{"jsonrpc": "2.0", "method": "notifications/progress", "params": [1]}',
              b'{"jsonrpc": "2.0", "id": 13, "result": {}}',
              b'{"jsonrpc": "2.0", "id": null, "error": {"code": -32600, "message": "no"}}']


def assert_answers(answer, request_id, code):
    answers = answer if isinstance(request_id, list) else [answer]
    assert [each["id"] for each in answers] == (request_id if isinstance(request_id, list) else [request_id])
    assert all(each["error"]["code"] == code and each["error"]["message"] for each in answers), answer


def test_mcp_over_http_answers_every_request_with_its_json_rpc_error_and_logs_nothing(web_app, caplog):
    _, server = web_app()
    bearer = {"Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": "2025-06-18"}
    with caplog.at_level(logging.WARNING):
        for body, request_id, code in MISFITS:
            status, answer = mcp_post(server, bearer, body)
            assert status == 200, body
            assert_answers(answer, request_id, code)
        for body in UNANSWERED:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
            connection.request("POST", "/mcp", body=body, headers={"Content-Type": "application/json",
                                                                  "Accept": "application/json, text/event-stream",
                                                                  **bearer})
            response = connection.getresponse()
            assert (response.status, response.read()) == (202, b""), body
            connection.close()
        status, listed = mcp_post(server, {**bearer, "Accept": "*/*"})  # curl's: JSON is what it gets
        status_unknown, unknown_tool = mcp_post(server, bearer, b'{"jsonrpc": "2.0", "id": 14, "method": "tools/call", '
                                                                b'"params": {"name": "reboot_robot", "arguments": {}}}')
    assert status == 200 and {tool["name"] for tool in listed["result"]["tools"]} == TOOLS
    assert status_unknown == 200 and unknown_tool["result"]["isError"]
    assert "reboot_robot" in unknown_tool["result"]["content"][0]["text"]
    assert [record.getMessage() for record in caplog.records] == []


def test_the_stdio_server_answers_every_request_with_its_json_rpc_error_and_says_nothing_on_stderr():
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "mcp"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def exchange(line: bytes):
        process.stdin.write(line + b"\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    try:
        early = exchange(b'{"jsonrpc": "2.0", "id": 0, "method": "tools/list"}')
        exchange(json.dumps({"jsonrpc": "2.0", "id": "init", "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
        ).encode())
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        answers = [exchange(body) for body, _, _ in MISFITS]
        # Nothing is written for these: the next line out is the answer to the ping that follows each.
        after = [exchange(body + b'\n{"jsonrpc": "2.0", "id": "after", "method": "ping"}') for body in UNANSWERED]
        listed = exchange(b'{"jsonrpc": "2.0", "id": 99, "method": "tools/list"}')
    finally:
        process.stdin.close()
        process.wait(timeout=20)
    assert_answers(early, 0, -32600)
    assert "before initialize" in early["error"]["message"]
    for answer, (_body, request_id, code) in zip(answers, MISFITS):
        assert_answers(answer, request_id, code)
    assert after == [{"jsonrpc": "2.0", "id": "after", "result": {}}] * len(UNANSWERED)
    assert listed["id"] == 99 and {tool["name"] for tool in listed["result"]["tools"]} == TOOLS
    assert process.returncode == 0 and process.stderr.read() == b""


def big_plan(ops, failing=1):
    """``ops`` do ops in a parallel: the first ``failing`` call ``sim.fail``, the rest ``sim.act`` (slow)."""
    return envelope(par(*[do(f"op {i}", cap="sim.fail" if i < failing else "sim.act") for i in range(ops)]),
                    description="many ops")


def failing_script(tmp_path, duration_s=3.0):
    path = tmp_path / "failing.json"
    path.write_text(json.dumps({"default": {"outcome": "success", "duration_s": duration_s},
                                "caps": {"sim.fail": {"outcome": "failure", "duration_s": 0.0, "error": "no grip"}}}))
    return str(path)


def test_an_agent_affords_a_large_plan_summary_filters_a_cap_and_a_wait(tmp_path):
    async def body(session):
        submitted = await call(session, "submit_plan", graph=big_plan(400))
        plan_id = int(submitted["plan_id"])  # integer ids, as Pilot writes them
        for _ in range(100):
            summary = await call(session, "get_plan_status", plan_id=plan_id, summary=True)
            if summary["counts"].get("failed") and summary["counts"].get("running"):
                break
            await anyio.sleep(0.05)
        full = await session.call_tool("get_plan_status", {"plan_id": plan_id})
        capped = await call(session, "get_plan_status", plan_id=plan_id, max_chars=2000)
        chosen = await call(session, "get_plan_status", plan_id=plan_id, op_ids=[3, "4"], states=["running"])
        not_yet = await call(session, "wait_for_plan", plan_id=plan_id, timeout_s=0.2)
        await call(session, "cancel_plan", plan_id=plan_id, wait_ms=5000)
        final = await call(session, "wait_for_plan", plan_id=plan_id, timeout_s=10, summary=True)
        result = await call(session, "get_plan_result", plan_id=plan_id, states=["failed"])
        bad = [await refusal(session, "get_plan_status", plan_id=value) for value in (True, -1, 1.5)]
        return summary, full, capped, chosen, not_yet, final, result, bad

    init, (summary, full, capped, chosen, not_yet, final, result, bad) = \
        run_session(["--sim-script", failing_script(tmp_path)], body).values()
    assert summary["counts"] == {"failed": 1, "running": 400}  # 399 calls and the parallel above them
    assert {op["state"] for op in summary["ops"]} == {"running", "failed"} and len(summary["ops"]) == 401
    full_text = json.dumps(full.structuredContent, separators=(",", ":"))
    assert len(full_text) > 20_000 and [block.text for block in full.content] == [full_text]
    assert len(json.dumps(capped, separators=(",", ":"))) <= 2000
    assert capped["truncated"]["ops_total"] == 401 and 0 < capped["truncated"]["ops_shown"] < 401
    assert "ask for the rest" in capped["truncated"]["message"] and capped["truncated"]["first_left_out"]
    assert [op["op_id"] for op in chosen["ops"]] == ["3", "4"]
    assert not_yet == {"plan_id": summary["plan_id"], "finished": False, "message": not_yet["message"]}
    assert final["outcome"] == "cancelled" and final["counts"]["failed"] == 1
    assert [op["state"] for op in result["ops"]] == ["failed"] and result["ops"][0]["result"]["error"] == "no grip"
    assert bad[0].startswith("bad_arguments:") and "got true" in bad[0]
    assert "minimum of 0" in bad[1] and "not the float 1.5" in bad[2]
    assert init.serverInfo.version == __import__("bt_exec").__version__


def test_a_client_of_an_older_mcp_revision_gets_the_answer_as_compact_json_text(tmp_path):
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "mcp"], stdin=subprocess.PIPE,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)

    def exchange(message: dict) -> dict:
        process.stdin.write(json.dumps(message).encode() + b"\n")
        process.stdin.flush()
        return json.loads(process.stdout.readline())

    try:
        exchange({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-03-26", "capabilities": {}, "clientInfo": {"name": "old", "version": "1"}}})
        process.stdin.write(b'{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        answer = exchange({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
                           "params": {"name": "get_all_plans", "arguments": {}}})["result"]
    finally:
        process.stdin.close()
        process.wait(timeout=20)
    assert "structuredContent" not in answer and len(answer["content"]) == 1
    assert answer["content"][0]["text"] == '{"count":0,"plans":[]}'


def test_ctrl_c_stops_the_stdio_server_started_by_hand():
    import pty
    import signal

    terminal, its_end = pty.openpty()
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "mcp"], stdin=its_end, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE)
    os.close(its_end)
    try:
        banner = process.stderr.readline().decode()
        # Serving: an initialize typed on the terminal is answered (Ctrl-C comes from a person at a served prompt).
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                                 "clientInfo": {"name": "a person", "version": "1"}}}
        os.write(terminal, json.dumps(initialize).encode() + b"\n")
        answered = json.loads(process.stdout.readline())
        process.send_signal(signal.SIGINT)
        process.wait(timeout=15)
    finally:
        process.kill()
        os.close(terminal)
    assert "serving MCP on stdin/stdout" in banner and "Ctrl-C" in banner and banner.count("\n") == 1
    assert answered["id"] == 1 and answered["result"]["serverInfo"]["name"] == "bt_exec"
    assert process.returncode == 0 and b"Traceback" not in process.stderr.read()


def test_mcp_over_http_answers_in_text_to_every_client_and_structured_to_those_that_read_it(web_app):
    _, server = web_app()
    call_body = (b'{"jsonrpc": "2.0", "id": 2, "method": "tools/call", '
                 b'"params": {"name": "get_all_plans", "arguments": {}}}')
    bearer = {"Authorization": f"Bearer {TOKEN}"}
    status, old = mcp_post(server, bearer, call_body)  # no protocol header: a 2025-03-26 client
    status, new = mcp_post(server, {**bearer, "MCP-Protocol-Version": "2025-06-18"}, call_body)
    assert "structuredContent" not in old["result"]
    assert old["result"]["content"] == [{"type": "text", "text": '{"count":0,"plans":[]}'}]
    assert new["result"]["structuredContent"] == {"count": 0, "plans": []}
    assert new["result"]["content"] == old["result"]["content"]


def test_a_backends_non_finite_numbers_leave_mcp_as_markers(serve_web):
    reading = {"reading": float("nan"), "high": float("inf"), "low": float("-inf")}
    executor, server = serve_web({"default": {"outcome": "success", "duration_s": 0.0, "output": reading}}, TOKEN)
    plan_id = executor.submit(envelope(do("look")))["plan_id"]
    executor.run_until_complete(plan_id, timeout=10)
    call_body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {
        "name": "get_plan_feedback", "arguments": {"plan_id": plan_id}}}).encode()

    def refuse(word):
        raise AssertionError(f"bare {word} in an answer")

    marked = {"reading": "NaN", "high": "Infinity", "low": "-Infinity"}
    for version in ("2025-03-26", "2025-06-18"):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("POST", "/mcp", body=call_body, headers={
            "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "Authorization": f"Bearer {TOKEN}", "MCP-Protocol-Version": version})
        result = json.loads(connection.getresponse().read(), parse_constant=refuse)["result"]
        connection.close()
        text = json.loads(result["content"][0]["text"], parse_constant=refuse)
        assert text["ops"][0]["output"] == marked, version
        assert result.get("structuredContent", text) == text


def test_an_answer_past_the_text_limit_is_cut_to_json_that_says_so(web_app, monkeypatch):
    import bt_exec.web.mcp_server as mcp_server

    monkeypatch.setattr(mcp_server, "TEXT_CHARS", 2000)
    executor, server = web_app()
    plan_id = executor.submit(big_plan(40))["plan_id"]

    async def body(session):
        return [await session.call_tool(name, arguments) for name, arguments in (
            ("get_plan_status", {"plan_id": plan_id}), ("get_plan_status", {"plan_id": plan_id, "max_chars": 9000}),
            ("get_plans_snapshot", {}))]

    status, asked_more, snapshot = run_http_session(server.url + "mcp", body)["value"]
    whole = status.structuredContent
    assert len(whole["ops"]) == 41 and len(json.dumps(whole, separators=(",", ":"))) > 2000
    cut = json.loads(status.content[0].text)
    assert len(status.content[0].text) <= 2000 and cut["plan_id"] == plan_id
    assert cut["ops"] == whole["ops"][:len(cut["ops"])] and 0 < len(cut["ops"]) < 41
    assert cut["truncated"]["ops_total"] == 41 and "ask for the rest" in cut["truncated"]["message"]
    assert json.loads(asked_more.content[0].text) == asked_more.structuredContent  # a larger max_chars: whole
    gist = json.loads(snapshot.content[0].text)
    assert snapshot.structuredContent["count"] == gist["count"] == 1 and "plans" not in gist
    assert "structuredContent" in gist["truncated"]["message"] and len(snapshot.content[0].text) <= 2000


def test_an_agent_pauses_before_a_risky_op_looks_then_resumes(tmp_path):
    plan = envelope(seq(do("reach"), do("grasp"), do("lift")), description="pick")

    async def body(session):
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert "resume_plan" in listed["pause_plan"].description
        assert listed["stop_plan_at"].inputSchema["properties"]["action"]["enum"] == ["cancel", "pause"]
        plan_id = (await call(session, "submit_plan", graph=plan))["plan_id"]
        armed = await call(session, "stop_plan_at", plan_id=plan_id, op_id="4", when="on_enter", action="pause")
        assert armed["armed"]
        for _ in range(200):
            status = await call(session, "get_plan_status", plan_id=plan_id)
            if status["paused"]:
                break
            await anyio.sleep(0.05)
        held = [op["op_id"] for op in status["ops"] if op.get("held")]
        paused_again = await call(session, "pause_plan", plan_id=int(plan_id))
        resumed = await call(session, "resume_plan", plan_id=plan_id)
        stepped = await call(session, "step_plan", plan_id=plan_id)
        record = await call(session, "wait_for_plan", plan_id=plan_id, timeout_s=10)
        unknown = await refusal(session, "resume_plan", plan_id="42")
        return status, held, paused_again, resumed, stepped, record, unknown

    status, held, paused_again, resumed, stepped, record, unknown = run_session(
        ["--sim-script", slow_script(tmp_path, 0.05, held_op="2")], body)["value"]
    assert status["paused"] and held == ["4"]
    assert not paused_again["paused"] and resumed["resumed"] and stepped["success"]
    assert record["outcome"] == "succeeded", "a step on a plan that ends behind its last op leaves nothing held"
    assert unknown.startswith("not_found: resume_plan: no plan '42'")


def test_ctrl_c_while_the_mcp_package_loads_waits_for_it_then_interrupts():
    # pydantic builds the package's message types as it is imported and would turn a KeyboardInterrupt raised
    # meanwhile into a SchemaError (an "internal error"): the Ctrl-C is held until the import is done.
    code = ("import os, signal, sys\n"
            "class CtrlC:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'mcp.types':\n"
            "            os.kill(os.getpid(), signal.SIGINT)\n"
            "        return None\n"
            "sys.meta_path.insert(0, CtrlC())\n"
            "from bt_exec.cli import main\n"
            "code = main(['mcp'])\n"
            "print(code, 'mcp.types' in sys.modules, flush=True)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60,
                            stdin=subprocess.DEVNULL)
    assert result.stdout.split() == ["130", "True"], (result.stdout, result.stderr)
    assert "Traceback" not in result.stderr and "internal error" not in result.stderr


def test_ctrl_c_while_the_commands_load_is_an_interrupted_command():
    code = ("import sys\n"
            "class CtrlC:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'bt_exec.cli.dispatch':\n"
            "            raise KeyboardInterrupt\n"
            "        return None\n"
            "sys.meta_path.insert(0, CtrlC())\n"
            "from bt_exec.cli import main\n"
            "print(main(['validate', 'x.json']), flush=True)\n")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.stdout.split() == ["130"] and "Traceback" not in result.stderr, (result.stdout, result.stderr)
