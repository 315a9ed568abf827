"""One console and one set of MCP tools for a fleet: `bt-exec fleet` finds the bt_exec nodes of the domain (each
robot's, in a namespace of its own) and hands each operation to the robot it names, whose executor answers it."""
import http.client
import json
import os
import pathlib
import re
import signal
import sys
import threading
import time
import urllib.parse

import pytest

import rosutil
from rosutil import do, plan, seq

FOUND_S = 20.0  # DDS discovery is gradual


class FleetProcess(rosutil.CliProcess):
    """``bt-exec fleet --web 0`` in a process of its own; its URL is read from what it prints."""

    def __init__(self, log_path: pathlib.Path, *args: str):
        super().__init__(log_path, ["fleet", "--web", "0", *args])
        deadline = time.monotonic() + 30
        while (found := re.search(r"fleet console: (http://\S+)", self.log())) is None:
            assert self.process.poll() is None, f"bt-exec fleet exited with {self.process.returncode}:\n{self.log()}"
            assert time.monotonic() < deadline, f"bt-exec fleet printed no URL:\n{self.log()}"
            time.sleep(0.05)
        self.url = found.group(1)
        self.port = urllib.parse.urlsplit(self.url).port

    def call(self, method: str, path: str, body=None, timeout: float = 30.0) -> tuple[int, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body).encode(),
                               headers={"Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    def robot_path(self, robot: str, rest: str) -> str:
        return f"/api/robots/{urllib.parse.quote(robot, safe='')}/{rest}"

    def wait_for_robots(self, *names: str) -> list[dict]:
        deadline = time.monotonic() + FOUND_S
        while True:
            status, answer = self.call("GET", "/api/robots")
            assert status == 200, answer
            robots = {robot["robot"]: robot for robot in answer["robots"]}
            if all(name in robots and robots[name]["health"] == "ok" for name in names):
                return answer["robots"]
            assert time.monotonic() < deadline, f"robots {names} not all found: {answer}"
            time.sleep(0.2)

@pytest.fixture
def fleet_app(tmp_path):
    started = []

    def start(*args: str) -> FleetProcess:
        app = FleetProcess(tmp_path / f"fleet{len(started)}.log", *args)
        started.append(app)
        return app

    yield start
    for app in started:
        app.stop()


def robot_of(node) -> str:
    return node.namespace.lstrip("/")


def test_the_fleet_console_forwards_each_operation_to_the_robot_it_names(ros, start_node, sim_script, fleet_app):
    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    app = fleet_app()
    robots = {robot["robot"]: robot for robot in app.wait_for_robots(robot_of(first), robot_of(second))}
    assert robots[robot_of(second)] == {"robot": robot_of(second), "namespace": second.namespace,
                                        "node": second.name, "health": "ok", "plans": []}
    status_events, subscription = ros.subscribe(f"{second.name}/status")
    ros.wait_matched(subscription)

    # Plan ids are each robot's own: the same id on two robots, each plan on the robot it was sent to.
    slow = plan(seq(do("sim.slow", "hold"), do("sim.act", "after")), description="second's plan")
    status, submitted = app.call("POST", app.robot_path(robot_of(second), "plans"), {"graph": slow})
    assert status == 200 and submitted["accepted"], submitted
    status, other = app.call("POST", app.robot_path(robot_of(first), "plans"),
                             {"graph": plan(seq(do("sim.slow")), description="first's plan")})
    assert status == 200 and other["plan_id"] == submitted["plan_id"], other
    plan_id = submitted["plan_id"]

    # The same question through the fleet and through the robot's own service: the same answer.
    status, through_fleet = app.call("GET", app.robot_path(robot_of(second), "plans"))
    own = json.loads(ros.call(second.name, "list_plans").plans_json)
    assert status == 200 and through_fleet == own and [p["description"] for p in own["plans"]] == ["second's plan"]
    robots = {robot["robot"]: robot for robot in app.call("GET", "/api/robots")[1]["robots"]}
    assert robots[robot_of(second)]["plans"] == [plan_id] and robots[robot_of(first)]["plans"] == [plan_id]

    # A terminal on SSH watches one robot of the fleet.
    watched = rosutil.run_cli("watch", "--url", app.url, "--robot", robot_of(second), "--once")
    assert watched.returncode == 0 and "second's plan" in watched.stdout and "hold" in watched.stdout, watched
    assert "first's plan" not in watched.stdout

    # Control reaches only the robot named; its events say the door it came through.
    status, armed = app.call("POST", app.robot_path(robot_of(second), f"plans/{plan_id}/stop_at"),
                             {"op_id": "3", "when": "on_enter"})
    assert status == 200 and armed["success"], armed
    status_events.wait_for(lambda messages: any(
        e["event"] == "stop_point" and e["state"] == "armed" and e["source"] == "http" and e["plan_id"] == plan_id
        for e in map(json.loads, messages)))
    status, cancelled = app.call("POST", app.robot_path(robot_of(second), f"plans/{plan_id}/cancel"), {})
    assert status == 200 and cancelled["finished"], cancelled
    status, first_plans = app.call("GET", app.robot_path(robot_of(first), "plans"))
    assert [p["description"] for p in first_plans["plans"]] == ["first's plan"]
    status, result = app.call("GET", app.robot_path(robot_of(second), f"plans/{plan_id}/result"))
    assert status == 200 and result["outcome"] == "cancelled", result

    # Each robot's events, tagged with it; a robot's stream holds only its own.
    status, recent = app.call("GET", f"/api/events/recent?robot={urllib.parse.quote(robot_of(second))}")
    kinds = [(e["event"], e.get("plan_id")) for e in recent["events"]]
    assert ("plan_started", plan_id) in kinds and ("plan_complete", plan_id) in kinds, kinds
    assert {e["robot"] for e in recent["events"]} == {robot_of(second)}
    described = [e.get("description") for e in recent["events"] if e["event"] == "plan_started"]
    assert described == ["second's plan"]
    status, every = app.call("GET", "/api/events/recent")
    assert {robot_of(first), robot_of(second)} <= {e["robot"] for e in every["events"]}

    # Refusals: the robot's own, passed on (status, code, message), and the fleet's for robots it does not know.
    status, refused = app.call("GET", app.robot_path(robot_of(first), "plans/999/status"))
    assert status == 404 and refused["error"]["code"] == "not_found" and "'999'" in refused["error"]["message"]
    status, bad = app.call("POST", app.robot_path(robot_of(first), "plans/1/stop_at"), {"op_id": "2", "when": "x"})
    assert status == 400 and bad["error"]["code"] == "bad_arguments" and "'x' is not one of" in bad["error"]["message"]
    status, unknown = app.call("GET", app.robot_path("no_such_robot", "plans"))
    assert status == 404 and unknown["error"]["code"] == "unknown_robot"
    assert robot_of(first) in unknown["error"]["message"]
    status, unknown = app.call("GET", "/api/events/recent?robot=no_such_robot")
    assert status == 404 and unknown["error"]["code"] == "unknown_robot"
    status, missing = app.call("GET", "/api/plans")
    assert status == 404 and missing["error"]["code"] == "not_found"
    app.call("POST", app.robot_path(robot_of(first), "cancel_all"), {})
    assert app.stop(signal.SIGINT) == 0 and "Traceback" not in app.log()  # Ctrl-C: a clean stop


def test_a_robot_stream_follows_that_robot_live(ros, start_node, sim_script, fleet_app):
    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    app = fleet_app()
    app.wait_for_robots(robot_of(first), robot_of(second))
    lines: list[str] = []
    opened = threading.Event()

    def read_stream() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", app.port, timeout=20)
        connection.request("GET", f"/api/events?robot={urllib.parse.quote(robot_of(second))}")
        response = connection.getresponse()
        opened.set()
        while len(lines) < 200:
            line = response.fp.readline().decode()
            if not line:
                return
            if line.startswith("data: "):
                lines.append(line[len("data: "):])
                if json.loads(lines[-1]).get("event") == "plan_complete":
                    return

    reader = threading.Thread(target=read_stream, daemon=True)
    reader.start()
    assert opened.wait(10)
    time.sleep(0.3)
    app.call("POST", app.robot_path(robot_of(first), "plans"), {"graph": plan(seq(do()), description="not this")})
    status, answer = app.call("POST", app.robot_path(robot_of(second), "plans"),
                              {"graph": plan(seq(do(), do()), description="this one")})
    assert status == 200 and answer["accepted"]
    reader.join(20)
    events = [json.loads(line) for line in lines]
    assert events and events[-1]["event"] == "plan_complete" and events[-1]["outcome"] == "succeeded", events
    assert {event["robot"] for event in events} == {robot_of(second)}
    assert [e["description"] for e in events if e["event"] == "plan_started"] == ["this one"]


# --- MCP --------------------------------------------------------------------------------------------------------------

def mcp_session(streams, body):
    import anyio
    from mcp import ClientSession

    result = {}

    async def main():
        async with streams as opened:
            read, write = opened[0], opened[1]
            async with ClientSession(read, write) as session:
                await session.initialize()
                result["value"] = await body(session)

    anyio.run(main)
    return result["value"]


async def tool(session, name, **arguments):
    answer = await session.call_tool(name, arguments)
    assert not answer.isError, answer.content[0].text
    return answer.structuredContent or json.loads(answer.content[0].text)


def test_an_agent_drives_any_robot_of_the_fleet_over_mcp(ros, start_node, sim_script, fleet_app):
    pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
    import anyio
    from mcp import StdioServerParameters
    from mcp.client.stdio import stdio_client
    from test_mcp import http_client_streams

    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    app = fleet_app()
    app.wait_for_robots(robot_of(first), robot_of(second))

    async def over_http(session):
        tools = {t.name: t for t in (await session.list_tools()).tools}
        assert "list_robots" in tools and tools["submit_plan"].inputSchema["required"][:1] == ["robot"]
        robots = await tool(session, "list_robots")
        assert {robot_of(first), robot_of(second)} <= {robot["robot"] for robot in robots["robots"]}
        submitted = await tool(session, "submit_plan", robot=robot_of(first),
                               graph=plan(seq(do(), do()), description="by an agent"))
        done = await tool(session, "wait_for_plan", robot=robot_of(first), plan_id=submitted["plan_id"],
                          timeout_s=20, summary=True)
        elsewhere = await tool(session, "get_all_plans", robot=robot_of(second))
        refused = await session.call_tool("get_all_plans", {"robot": "no_such_robot"})
        missing = await session.call_tool("get_all_plans", {})
        return done, elsewhere, refused, missing

    done, elsewhere, refused, missing = mcp_session(http_client_streams(app.url + "mcp", {}), over_http)
    assert done["outcome"] == "succeeded", done
    assert elsewhere["plans"] == []
    assert refused.isError and refused.content[0].text.startswith("unknown_robot: ")
    assert missing.isError and "robot: required" in missing.content[0].text

    # The same tools on standard input and output, for an agent that starts the fleet server itself.
    server = StdioServerParameters(command=sys.executable, args=["-m", "bt_exec.cli", "fleet", "--mcp"],
                                   env=dict(os.environ))

    async def over_stdio(session):
        deadline = time.monotonic() + FOUND_S
        while True:
            robots = await tool(session, "list_robots")
            if robot_of(second) in {robot["robot"] for robot in robots["robots"]}:
                break
            assert time.monotonic() < deadline, robots
            await anyio.sleep(0.2)
        return await tool(session, "get_all_plans", robot=robot_of(second))

    listed = json.loads(ros.call(second.name, "list_plans").plans_json)
    assert mcp_session(stdio_client(server, errlog=sys.__stderr__), over_stdio) == listed


# --- the console ------------------------------------------------------------------------------------------------------

def test_the_console_shows_the_robot_picked_and_acts_on_it_alone(ros, start_node, sim_script, fleet_app):
    from headless_chromium import start_chromium
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    first, second = start_node(sim_script=str(sim_script)), start_node(sim_script=str(sim_script))
    app = fleet_app()
    app.wait_for_robots(robot_of(first), robot_of(second))
    for node, description in ((first, "first's plan"), (second, "second's plan")):
        status, answer = app.call("POST", app.robot_path(robot_of(node), "plans"),
                                  {"graph": plan(seq(do("sim.slow")), description=description)})
        assert status == 200 and answer["accepted"], answer
    browser = start_chromium()
    try:
        def running_text(_=None) -> str:
            return browser.find_element(By.ID, "running-plans").text

        wait = WebDriverWait(browser, 20, poll_frequency=0.1)
        browser.get(app.url + "?robot=" + urllib.parse.quote(robot_of(first)))
        wait.until(lambda _: "first's plan" in running_text())
        assert "second's plan" not in running_text()
        picker = Select(browser.find_element(By.ID, "robot"))
        assert {robot_of(first), robot_of(second)} <= {option.get_attribute("value") for option in picker.options}
        assert picker.first_selected_option.get_attribute("value") == robot_of(first)
        assert "1 plan in flight" in picker.first_selected_option.text
        assert browser.find_element(By.ID, "robot-health").text == "● answers"

        picker.select_by_value(robot_of(second))
        wait.until(lambda _: "robot=" + urllib.parse.quote(robot_of(second)) in browser.current_url)
        wait.until(lambda _: "second's plan" in running_text())
        assert "first's plan" not in running_text()
        if os.environ.get("BT_EXEC_SCREENSHOTS") == "1":  # docs/web.md's picture of it
            time.sleep(1.0)
            browser.save_screenshot(str(rosutil.REPO / "docs" / "img" / "fleet-console.png"))
        # The stream is the picked robot's: its plan's end shows without a reload.
        browser.find_element(By.CSS_SELECTOR, "[data-action=cancel-all]").click()
        wait.until(lambda _: "second's plan" not in running_text())
        assert app.call("GET", app.robot_path(robot_of(second), "plans"))[1]["plans"] == []
        still = app.call("GET", app.robot_path(robot_of(first), "plans"))[1]["plans"]
        assert [p["description"] for p in still] == ["first's plan"]
        errors = [entry["message"] for entry in browser.get_log("browser") if entry["level"] == "SEVERE"]
        assert errors == []
    finally:
        browser.quit()
        app.call("POST", app.robot_path(robot_of(first), "cancel_all"), {})
