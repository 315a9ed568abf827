"""The console over bt-exec replay --web: the replay bar's slider follows the run, seeks back and steps forward."""
import json
import pathlib

import pytest
from console_page import Console

from bt_exec.cli.dispatch import main
from bt_exec.events.replay import find_run
from bt_exec.web import WebServer
from bt_exec.web.replay_api import ReplayApi

RTDL = str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "rtdl" / "snapshot_battery.json")


@pytest.fixture
def replayed(driver, tmp_path, capsys):
    """A run recorded by bt-exec run --events (ops 0.4 s each), served by a replay at half speed."""
    journal = tmp_path / "run.jsonl"
    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"default": {"duration_s": 0.4}}))
    assert main(["run", RTDL, "--events", str(journal), "--sim-script", str(script)]) == 0
    capsys.readouterr()
    api = ReplayApi(find_run(str(journal)), speed=0.5)
    server = WebServer(api, port=0)
    server.start()
    console = Console(None, server, driver)
    yield console, journal
    errors = console.page_errors()
    driver.get("about:blank")
    server.close()
    assert not errors, errors


def slider(console):
    return console.driver.execute_script(
        "const s = document.querySelector('#replay-slider'); return [Number(s.value), Number(s.max)];")


def test_the_slider_follows_the_replay_seeks_back_to_pending_ops_and_steps_forward(replayed):
    console, journal = replayed
    events = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    console.open()
    console.wait_for(lambda d: console.css("#replay-bar").is_displayed(), message="no replay bar")
    assert not console.css(".lower .submit").is_displayed(), "a replay cannot take plans"
    console.wait_for(lambda d: slider(console)[1] == len(events), message="the slider does not span the run")
    console.wait_op_class("1", "state-running")
    first = slider(console)[0]
    console.wait_for(lambda d: slider(console)[0] > first, message="the slider did not move while playing")

    console.css('[data-action="replay-toggle"]').click()  # pause the replay
    console.wait_text("#replay-position", "paused")
    console.driver.execute_script(
        "const s = document.querySelector('#replay-slider'); s.value = '1'; s.dispatchEvent(new Event('change'));")
    console.wait_text("#replay-position", f"event 1 / {len(events)}")
    assert events[0]["event"] == "plan_started"
    for op_id in "12345":
        console.wait_op_class(op_id, "state-pending")

    console.css('[data-action="replay-forward"]').click()
    following = events[1]
    assert following["event"] == "node_state"
    console.wait_op_class(following["op_id"], f"state-{following['state']}")
    assert slider(console)[0] == 2
    console.wait_text("#event-log", f"op {following['op_id']}")

    console.css('[data-action="replay-back"]').click()
    console.wait_op_class(following["op_id"], "state-pending")
    assert slider(console)[0] == 1

    console.css('[data-action="replay-toggle"]').click()  # play to the end
    console.wait_text("#status", "succeeded", timeout=15)
    console.wait_text("#replay-position", "ended", timeout=15)
    assert slider(console)[0] == len(events)
