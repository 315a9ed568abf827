"""Hostile BT.CPP XML refused as an invalid plan through every door: a truncated document, an entity bomb, an
external entity (whose file is never opened), 10,000-deep nesting and a file over the byte limit; each within 1 s,
named, never a traceback."""
from __future__ import annotations

import http.client
import json
import os
import pathlib
import sys
import time

import pytest
from command_line import bt_exec_cli, bt_exec_process

import bt_exec

LIMIT = bt_exec.Limits().max_input_bytes
BOMB = ('<?xml version="1.0"?>\n<!DOCTYPE root [\n<!ENTITY a "aaaaaaaaaa">\n'
        + "".join(f'<!ENTITY {name} "{("&" + previous + ";") * 10}">\n'
                  for previous, name in zip("abcdefgh", "bcdefghi"))
        + ']>\n<root BTCPP_format="4"><BehaviorTree><Say text="&i;"/></BehaviorTree></root>')


def external(secret) -> str:
    return (f'<?xml version="1.0"?>\n<!DOCTYPE root [<!ENTITY secret SYSTEM "file://{secret}">]>\n'
            '<root BTCPP_format="4"><BehaviorTree><Say text="&secret;"/></BehaviorTree></root>')


@pytest.fixture
def hostile(tmp_path):
    """name -> (XML text, the issue code it is refused with). The external entity names a FIFO: a parser that
    opened it would block there (no writer ever comes), so a refusal in time shows it was never opened."""
    secret = tmp_path / "secret"
    os.mkfifo(secret)
    deep = 10_000
    return {
        "truncated": ('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence><MoveTo goal="a"/>', "xml_syntax"),
        "entity bomb": (BOMB, "xml_forbidden"),
        "external entity": (external(secret), "xml_forbidden"),
        "deep nesting": ('<root BTCPP_format="4"><BehaviorTree>' + "<Inverter>" * deep + "<Say/>"
                         + "</Inverter>" * deep + "</BehaviorTree></root>", "too_deep"),
        "over the byte limit": ('<root BTCPP_format="4"><BehaviorTree><Say text="' + "x" * LIMIT
                                + '"/></BehaviorTree></root>', "too_large"),
    }


CASES = ["truncated", "entity bomb", "external entity", "deep nesting", "over the byte limit"]


@pytest.mark.parametrize("name", CASES)
def test_refused_in_process_within_a_second(hostile, name):
    text, code = hostile[name]
    started = time.perf_counter()
    report = bt_exec.validate(text)
    assert time.perf_counter() - started < 1.0
    assert report.verdict == "invalid" and [issue.code for issue in report.issues] == [code]


@pytest.mark.parametrize("name", CASES)
def test_the_command_line_refuses_it_with_exit_1_and_no_traceback(hostile, tmp_path, name):
    text, code = hostile[name]
    plan = tmp_path / "plan.xml"
    plan.write_text(text)
    done = bt_exec_process("validate", plan)  # a process of its own: its exit status and streams as a shell sees them
    assert done.returncode == 1, (done.stdout, done.stderr)
    assert "Traceback" not in done.stdout + done.stderr and f"[{code}]" in done.stdout
    for command in ("run", "compile"):
        done = bt_exec_cli(command, plan)
        assert done.returncode == 1, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stdout + done.stderr and f"[{code}]" in done.stdout + done.stderr


@pytest.mark.parametrize("name", CASES)
def test_http_validate_and_submit_refuse_it(hostile, serve_web, name):
    text, code = hostile[name]
    # a body limit above the plan's, so that the plan's own limit is what refuses the largest
    executor, server = serve_web({"default": {"outcome": "success"}}, max_body_bytes=2 * LIMIT)
    for path in ("/api/validate", "/api/plans"):
        status, answer = post(server, path, {"graph": text})
        assert status in (200, 400), (status, answer)
        issues = answer.get("issues") or answer.get("error", {}).get("issues")
        assert [issue["code"] for issue in issues] == [code]
    assert executor.get_all_plans()["count"] == 0


def test_mcp_submit_refuses_it(hostile, serve_web):
    mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
    import anyio
    import httpx
    from mcp.client.streamable_http import streamable_http_client

    executor, server = serve_web({"default": {"outcome": "success"}})
    answers = {}

    async def main():
        client = httpx.AsyncClient(timeout=30)
        async with streamable_http_client(server.url + "mcp", http_client=client) as (read, write, _):
            async with mcp.ClientSession(read, write) as session:
                await session.initialize()
                for name in CASES[:-1]:
                    answers[name] = await session.call_tool("submit_plan", {"graph": hostile[name][0]})

    anyio.run(main)
    for name in CASES[:-1]:
        answer = answers[name]
        text = answer.content[0].text
        assert hostile[name][1] in text and "Traceback" not in text
    assert executor.get_all_plans()["count"] == 0


def post(server, path: str, body: dict) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
    connection.request("POST", path, body=json.dumps(body), headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read() or b"{}")
    connection.close()
    return response.status, answer


def test_bt_exec_mcp_checks_bt_xml_against_its_node_catalog():
    """``bt-exec mcp --node-catalog FILE.xml`` (its own executor, over stdio): leaves the catalog knows pass, others
    are unknown nodes; hostile XML is refused there too."""
    mcp = pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
    import anyio
    from mcp.client.stdio import StdioServerParameters, stdio_client

    examples = pathlib.Path(__file__).resolve().parents[2] / "examples" / "btcpp"
    server = StdioServerParameters(command=sys.executable, args=["-m", "bt_exec.cli", "mcp", "--node-catalog",
                                                                 str(examples / "nav2_nodes.xml")],
                                   env=dict(os.environ))
    nav2 = (examples / "nav2_navigate.xml").read_text()
    answers = {}

    async def main():
        async with stdio_client(server, errlog=sys.__stderr__) as (read, write):
            async with mcp.ClientSession(read, write) as session:
                await session.initialize()
                for name, graph in (("nav2", nav2), ("unknown", nav2.replace("<GoalUpdated/>", "<GoalUpdatd/>")),
                                    ("bomb", BOMB)):
                    answer = await session.call_tool("validate_plan", {"graph": graph})
                    answers[name] = answer.structuredContent

    anyio.run(main)
    assert answers["nav2"]["valid"], answers["nav2"]["issues"]
    assert {issue["code"] for issue in answers["unknown"]["issues"]} == {"unknown_node"}
    assert answers["unknown"]["issues"][0]["fix"][0]["value"] == "GoalUpdated"
    assert [issue["code"] for issue in answers["bomb"]["issues"]] == ["xml_forbidden"]
