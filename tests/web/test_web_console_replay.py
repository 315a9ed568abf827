"""The console over bt-exec replay --web: the replay bar's slider follows the run, seeks back to its start and
steps forward; the page says it shows a replay, and where."""
import json
import pathlib

import pytest
from console_page import Console

from bt_exec.cli.dispatch import main
from bt_exec.events.replay import find_run
from bt_exec.web.server import WebServer
from bt_exec.web.replay_api import ReplayApi

RTDL = str(pathlib.Path(__file__).resolve().parents[2] / "examples" / "rtdl" / "snapshot_battery.json")


@pytest.fixture
def replayed(driver, tmp_path, capsys):
    """A run recorded by bt-exec run --events (ops 0.4 s each), served by a replay at a tenth of its speed (the
    test looks at it while it plays: 8 s of replay for its 0.8 s)."""
    journal = tmp_path / "run.jsonl"
    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"default": {"duration_s": 0.4}}))
    assert main(["run", RTDL, "--events", str(journal), "--sim-script", str(script)]) == 0
    capsys.readouterr()
    api = ReplayApi(find_run(str(journal)), speed=0.1)
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
        "const s = document.querySelector('#replay-slider'); return [Number(s.value), Number(s.min), Number(s.max)];")


def seek(console, position):
    console.driver.execute_script("const s = document.querySelector('#replay-slider'); s.value = String(arguments[0]);"
                                  "s.dispatchEvent(new Event('change'));", position)


def op_states(console):
    """The op states the page's tree shows."""
    return console.driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('g.op')].map((g) => "
        "[g.getAttribute('data-op-id'), (g.getAttribute('class').match(/state-(\\w+)/) || [])[1]]));")


def states_after(events, position):
    """Each op's state once ``position`` events were played (ops no event named yet: pending)."""
    states = {}
    for event in events[:position]:
        if event["event"] == "node_state":
            states[event["op_id"]] = event["state"]
    return states


def test_the_slider_follows_the_replay_seeks_back_to_the_start_and_steps_forward(replayed):
    console, journal = replayed
    events = [json.loads(line) for line in journal.read_text().splitlines()[1:]]
    console.open()
    console.wait_for(lambda d: console.css("#replay-bar").is_displayed(), message="no replay bar")
    assert not console.css(".lower .submit").is_displayed(), "a replay cannot take plans"
    console.wait_text("#connection", "replay")  # not "live": the page follows a recorded run
    console.wait_for(lambda d: slider(console)[1:] == [0, len(events)], message="the slider does not span the run")
    console.wait_op_class("1", "state-running")
    first = slider(console)[0]
    console.wait_for(lambda d: slider(console)[0] > first, message="the slider did not move while playing")

    console.css('[data-action="replay-toggle"]').click()  # pause the replay
    console.wait_text("#replay-position", "paused")
    # Where the replay stopped, the tree shows the states of that instant, the badge says where it is.
    position = int(console.css("#replay-position").text.split()[1])
    console.wait_text("#connection", f"event {position} / {len(events)}")
    expected = states_after(events, position)
    console.wait_for(lambda d: all(op_states(console).get(op_id) == state for op_id, state in expected.items()),
                     message=f"the tree is not of event {position}: {op_states(console)} against {expected}")

    # The start: before the first event, no plan has started.
    seek(console, 0)
    console.wait_text("#replay-position", f"before event 1 / {len(events)}")
    console.wait_text("#connection", "start")
    assert slider(console)[0] == 0
    console.wait_for(lambda d: not console.all("g.op"), message="the tree of a plan not yet started is shown")
    assert not console.css('[data-action="replay-back"]').is_enabled()

    console.css('[data-action="replay-forward"]').click()
    assert events[0]["event"] == "plan_started"
    console.wait_text("#replay-position", f"event 1 / {len(events)}")
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

    from selenium.webdriver.support.ui import Select
    Select(console.css("#replay-speed")).select_by_visible_text("max")
    console.css('[data-action="replay-toggle"]').click()  # play to the end
    console.wait_text("#status", "succeeded")
    console.wait_text("#replay-position", "ended")
    assert slider(console)[0] == len(events)
    assert not console.css('[data-action="replay-forward"]').is_enabled()
