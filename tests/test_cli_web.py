"""`bt-exec run FILE --web PORT`: the console and API are served while the plan runs, as a real process (what
needs no server runs in this interpreter).

The plans here wait for the test where it must act while they run (a pause point, resumed over HTTP): no test
counts on the machine being fast enough to act before a plan ends."""
import json
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from command_line import bt_exec_cli
from rtdl_plans import do, envelope, seq

from bt_exec.terminal.watch import EventStream
from bt_exec.web.client import HttpApi

WAIT_S = 20.0


def finish_and_interrupt(api, process):
    """Wait for plan 2 to end (it must succeed), then Ctrl-C the serving command."""
    assert api.call("wait_for_plan", {"plan_id": "2", "timeout_s": WAIT_S})["outcome"] == "succeeded"
    process.send_signal(signal.SIGINT)
    process.communicate(timeout=WAIT_S)


class RunCommand:
    """``bt-exec run`` with ``--web 0`` as a process: its URL, and its stderr read line by line as it comes."""

    def __init__(self, tmp_path, *options, env=None):
        plan = tmp_path / "plan.json"  # ops: 1 the sequence, 2, 3 and 4 the do ops
        plan.write_text(json.dumps(envelope(seq(do("one"), do("two"), do("three")), description="web run")))
        script = tmp_path / "sim.json"
        script.write_text(json.dumps({"default": {"outcome": "success", "duration_s": 0.05}}))
        self.process = subprocess.Popen(
            [sys.executable, "-m", "bt_exec.cli", "run", str(plan), "--sim-script", str(script), "--web", "0",
             *options], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env={**os.environ, **(env or {})})
        self._lines = queue.Queue()
        threading.Thread(target=self._read_stderr, daemon=True).start()
        found = re.search(r"web console: (http://\S+)", self.wait_line("web console"))
        assert found, "no URL announced"
        self.url = found.group(1)

    def _read_stderr(self):
        for line in self.process.stderr:
            self._lines.put(line)

    def wait_line(self, text, timeout=WAIT_S):
        """The next line of stderr holding ``text`` (the ones before it are passed over)."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                line = self._lines.get(timeout=max(deadline - time.monotonic(), 0))
            except queue.Empty:
                raise AssertionError(f"bt-exec run never said {text!r} on stderr") from None
            if text in line:
                return line

    def finish(self):
        """stdout, once the command ended (killed if it has not within WAIT_S)."""
        try:
            out, _ = self.process.communicate(timeout=WAIT_S)
        finally:
            self.process.kill()
        return out


def test_the_plan_is_visible_over_http_while_it_runs_and_its_stream_ends_saying_the_run_ended(tmp_path):
    run = RunCommand(tmp_path, "--pause-at", "3:on_enter")
    try:
        run.wait_line("plan 1 paused at op 3")
        api = HttpApi(run.url)
        plans = api.call("get_all_plans")
        assert plans["count"] == 1 and plans["plans"][0]["description"] == "web run"
        tree = api.call("get_plan_tree", {"plan_id": "1"})
        assert [op["description"] for op in tree["ops"][1:]] == ["one", "two", "three"]
        assert [op["state"] for op in tree["ops"][1:]] == ["succeeded", "pending", "pending"]
        events = EventStream(run.url)
        assert api.call("resume_plan", {"plan_id": "1"})["resumed"]
        urllib.request.urlopen(run.url).read()  # the page loaded: the command stops serving soon after the run
        kinds = []
        while not kinds or kinds[-1] != "server_closing":
            got = events.get(WAIT_S)
            assert got is not None and got[0] == "event", f"the stream ended without a word: {got}"
            kinds.append(got[1]["event"])
        # Closed on purpose, it says so (a page then shows the run ended instead of reconnecting), after the
        # plan's last events.
        assert got[1]["message"] == "bt-exec run ended"
        assert "plan_complete" in kinds
        out = run.finish()
    finally:
        run.process.kill()
    assert run.process.returncode == 0 and "plan 1 succeeded" in out


def test_an_operator_stop_point_over_http_ends_the_run_cancelled(tmp_path):
    run = RunCommand(tmp_path, "--pause-at", "3:on_enter")
    try:
        run.wait_line("plan 1 paused at op 3")
        api = HttpApi(run.url)
        assert api.call("stop_plan_at", {"plan_id": "1", "op_id": "4", "when": "on_enter"})["armed"]
        assert api.call("resume_plan", {"plan_id": "1"})["resumed"]
        urllib.request.urlopen(run.url).read()  # the page loaded: serving ends soon after the run, not after the grace
        out = run.finish()
    finally:
        run.process.kill()
    assert run.process.returncode == 1 and "cancelled" in out and "op 4 do running" not in out


def test_keep_serving_accepts_more_plans_until_ctrl_c(tmp_path):
    run = RunCommand(tmp_path, "--keep-serving")
    try:
        run.wait_line("still serving")
        api = HttpApi(run.url)
        answer = api.call("submit_plan", {"graph": envelope(do("another"))})
        assert answer["accepted"] and answer["plan_id"] == "2"
        finish_and_interrupt(api, run.process)
    finally:
        run.process.kill()
    assert run.process.returncode == 0  # the plan run by the command succeeded


def test_a_web_app_beyond_loopback_needs_a_token(tmp_path, monkeypatch):
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(envelope(do())))
    monkeypatch.setenv("BT_EXEC_WEB_TOKEN", "")
    run = bt_exec_cli("run", plan, "--web", "0", "--web-host", "0.0.0.0")
    assert run.returncode == 2 and "needs a token" in run.stderr and "Traceback" not in run.stderr
    assert "started" not in run.stdout  # refused before anything ran


def test_mcp_without_the_mcp_package_says_how_to_get_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "mcp", None)  # importing mcp now fails, as where it is not installed
    monkeypatch.setitem(sys.modules, "mcp.types", None)
    result = bt_exec_cli("mcp")
    assert result.returncode == 2 and "pip install 'bt_exec[mcp]'" in result.stderr


def test_an_agent_drives_run_web_over_mcp_without_a_second_process(tmp_path):
    pytest.importorskip("mcp", reason="the mcp package is not installed (pip install -e '.[test]')")
    import anyio
    from mcp import ClientSession
    from test_mcp import http_client_streams

    run = RunCommand(tmp_path, "--keep-serving", env={"BT_EXEC_WEB_TOKEN": "cli-token"})
    process, url = run.process, run.url
    try:
        run.wait_line("still serving")

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
