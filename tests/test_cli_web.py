"""`bt-exec run FILE --web PORT`: the console and API are served while the plan runs, as a real process."""
import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest
from rtdl_plans import do, envelope, seq

from bt_exec.web.client import HttpApi



def finish_and_interrupt(api, process):
    """Wait for plan 2 to end (it must succeed), then Ctrl-C the serving command."""
    for _ in range(100):
        if api.call("get_all_plans")["count"] == 0:
            break
        time.sleep(0.05)
    assert api.call("get_plan_result", {"plan_id": "2"})["outcome"] == "succeeded"
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=20)

def start_run(tmp_path, *options, duration_s=0.4, env=None):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(envelope(seq(do("one"), do("two"), do("three")), description="web run")))
    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"default": {"outcome": "success", "duration_s": duration_s}}))
    process = subprocess.Popen([sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--sim-script", str(script),
                                "--web", "0", *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                               env={**os.environ, **(env or {})})
    line = process.stderr.readline()
    found = re.search(r"web console: (http://\S+)", line)
    assert found, f"no URL announced: {line!r}"
    return process, found.group(1)


def test_the_plan_is_visible_over_http_while_it_runs(tmp_path):
    process, url = start_run(tmp_path)
    try:
        api = HttpApi(url)
        plans = api.call("get_all_plans")
        assert plans["count"] == 1 and plans["plans"][0]["description"] == "web run"
        tree = api.call("get_plan_tree", {"plan_id": "1"})
        assert [op["description"] for op in tree["ops"][1:]] == ["one", "two", "three"]
        out, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 0 and "plan 1 succeeded" in out


def test_an_operator_stop_point_over_http_ends_the_run_cancelled(tmp_path):
    process, url = start_run(tmp_path, duration_s=1.0)
    try:
        assert HttpApi(url).call("stop_plan_at", {"plan_id": "1", "op_id": "4", "when": "on_enter"})["armed"]
        out, _ = process.communicate(timeout=20)
    finally:
        process.kill()
    assert process.returncode == 1 and "cancelled" in out and "op 4 do running" not in out


def test_keep_serving_accepts_more_plans_until_ctrl_c(tmp_path):
    process, url = start_run(tmp_path, "--keep-serving", duration_s=0.05)
    try:
        assert "still serving" in process.stderr.readline()
        api = HttpApi(url)
        answer = api.call("submit_plan", {"graph": envelope(do("another"))})
        assert answer["accepted"] and answer["plan_id"] == "2"
        finish_and_interrupt(api, process)
    finally:
        process.kill()
    assert process.returncode == 0  # the plan run by the command succeeded


def test_a_web_app_beyond_loopback_needs_a_token(tmp_path):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(envelope(do())))
    run = subprocess.run([sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--web", "0", "--web-host", "0.0.0.0"],
                         capture_output=True, text=True, timeout=30,
                         env={**os.environ, "BT_EXEC_WEB_TOKEN": ""})
    assert run.returncode == 2 and "needs a token" in run.stderr and "Traceback" not in run.stderr
    assert "started" not in run.stdout  # refused before anything ran


def test_mcp_without_the_mcp_package_says_how_to_get_it(monkeypatch, capsys):
    from bt_exec.cli import main

    monkeypatch.setitem(sys.modules, "mcp", None)  # importing mcp now fails, as where it is not installed
    monkeypatch.setitem(sys.modules, "mcp.types", None)
    assert main(["mcp"]) == 2
    assert "pip install 'bt_exec[mcp]'" in capsys.readouterr().err


def test_an_agent_drives_run_web_over_mcp_without_a_second_process(tmp_path):
    pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
    import anyio
    from mcp import ClientSession
    from test_mcp import http_client_streams

    process, url = start_run(tmp_path, "--keep-serving", duration_s=0.05, env={"BT_EXEC_WEB_TOKEN": "cli-token"})
    try:
        assert "still serving" in process.stderr.readline()

        async def main():
            async with http_client_streams(url + "mcp", {"Authorization": "Bearer cli-token"}) as (read, write, _):
                async with ClientSession(read, write) as session:
                    await session.initialize()
                    first = await session.call_tool("get_plan_result", {"plan_id": "1"})
                    submitted = await session.call_tool("submit_plan", {"graph": envelope(do("by mcp"))})
                    return first.structuredContent, submitted.structuredContent

        first, submitted = anyio.run(main)
        assert first["outcome"] == "succeeded" and submitted["accepted"] and submitted["plan_id"] == "2"
        api = HttpApi(url, token="cli-token")
        finish_and_interrupt(api, process)
    finally:
        process.kill()
    assert process.returncode == 0
