"""The screenshots in docs/img/, remade from the live console: BT_EXEC_SCREENSHOTS=1 pytest tests/web -k screenshots"""
import base64
import json
import os

import pytest
from console_page import REPO, Console
from rtdl_plans import do, envelope, par, seq

from bt_exec.cli.dispatch import main
from bt_exec.events.replay import find_run
from bt_exec.web.server import WebServer
from bt_exec.web.replay_api import ReplayApi

pytestmark = pytest.mark.skipif(os.environ.get("BT_EXEC_SCREENSHOTS") != "1",
                                reason="docs screenshots are remade only with BT_EXEC_SCREENSHOTS=1")

DOCS_IMG = REPO / "docs" / "img"

# Op ids are numbered across plans: plan 1 holds ops 1-3, plan 2 ops 4-6, plan 3 ops 7-16.
SCRIPT = {
    "default": {"outcome": "success", "duration_s": 0.05},
    "ops": {
        "6": {"outcome": "failure", "duration_s": 0.05, "error": "gripper reported no contact: the cup slipped"},
        "9": {"outcome": "success", "duration_s": 0.2, "output": {"image": "sim://snapshot/0001.jpg"}},
        "10": {"outcome": "success", "duration_s": 0.3, "output": {"percent": 82}},
        "12": {"outcome": "success", "duration_s": 120},
    },
}

FETCH_CUP = envelope(seq(
    par(do("take a snapshot of the scene", cap="tiago_camera.camera_snapshot"),
        do("read the battery status", cap="battery.battery_status"),
        description="look around and check the battery"),
    seq(do("drive to the kitchen", cap="nav.go_to", args={"place": "kitchen"}),
        do("find the red cup on the counter", cap="vision.find_object", args={"object": "red cup"}),
        do("grasp the cup", cap="arm.grasp", args={"object": "red cup"}),
        description="go and pick up the cup"),
    do("bring the cup back to the user", cap="nav.go_to", args={"place": "user"}),
    do("tell the user the cup is here", cap="audio.speak_text", args={"text": "Here is your cup."}),
    description="fetch the red cup from the kitchen"), "fetch the red cup from the kitchen")

BAD_PLAN = {"rtdl_description": "fetch the cup", "rtdl": seq(
    do("go to the kitchen", cap="nav.go_to", args={"place": "kitchen"}),
    par(do("find the cup", cap="vision.find_object", args="red cup"),
        {"op": "do", "op_id": 0, "description": "open the gripper", "args": {}},
        description="find the cup and open the gripper"),
    {"op": "dance", "op_id": 0, "description": "celebrate", "children": []},
    do("say done", cap="audio.speak_text", args={"text": "done"}),
    description="fetch the cup")}


def test_screenshots_for_the_docs(console_factory):
    console = console_factory(SCRIPT)
    ex = console.executor
    first = console.submit(envelope(seq(do("take a snapshot", cap="tiago_camera.camera_snapshot"),
                                        do("read the battery", cap="battery.battery_status")), "snapshot + battery"))
    ex.run_until_complete(first, timeout=10)
    second = console.submit(envelope(seq(do("open the drawer", cap="arm.open"), do("grasp the cup", cap="arm.grasp")),
                                     "grasp the cup from the drawer"))
    ex.run_until_complete(second, timeout=10)
    plan = console.submit(FETCH_CUP)
    console.open()
    console.wait_op_class("12", "state-running")
    console.wait_op_class("10", "state-succeeded")
    console.op("14").click()
    console.css('[data-action="stop-on_enter"]').click()
    console.wait_op_class("14", "stop-on_enter")
    console.op("12").click()
    console.wait_text("#op-title", "12")
    console.op("14").click()
    console.wait_text("#op-title", "14")
    console.driver.execute_script("document.querySelectorAll('.msg').forEach(m => m.remove());"
                                  "document.querySelector('#tree-scroll').scrollTo(0, 0);")
    DOCS_IMG.mkdir(parents=True, exist_ok=True)
    console.screenshot(DOCS_IMG / "web-console.png")

    console.set_plan_text(json.dumps(BAD_PLAN, indent=2))
    console.css('[data-action="validate"]').click()
    console.wait_for(lambda d: len(console.all(".outline-node.has-issue")) == 3)
    _capture(console.driver, ".lower", DOCS_IMG / "web-submit-issues.png")
    ex.cancel_plan(plan)


def test_replay_screenshot_for_the_docs(driver, tmp_path, capsys):
    journal, script, plan = tmp_path / "run.jsonl", tmp_path / "sim.json", tmp_path / "plan.json"
    script.write_text(json.dumps(SCRIPT | {"ops": {}}))
    plan.write_text(json.dumps(FETCH_CUP))
    assert main(["run", str(plan), "--events", str(journal), "--sim-script", str(script)]) == 0
    capsys.readouterr()
    server = WebServer(ReplayApi(find_run(str(journal)), speed=1), port=0)
    server.start()
    try:
        console = Console(None, server, driver)
        console.open()
        console.wait_text("#replay-position", "ended")
        events = journal.read_text().splitlines()[1:]
        middle = next(index + 1 for index, line in enumerate(events)  # where the kitchen is reached
                      if json.loads(line).get("op_id") == "6" and json.loads(line).get("state") == "running")
        console.driver.execute_script("const s = document.querySelector('#replay-slider'); s.value = arguments[0];"
                                      "s.dispatchEvent(new Event('change'));", str(middle))
        console.wait_text("#replay-position", f"event {middle} / {len(events)}")
        console.wait_op_class("6", "state-running")
        console.driver.execute_script("document.querySelectorAll('.msg').forEach(m => m.remove());")
        console.screenshot(DOCS_IMG / "web-replay.png")
    finally:
        driver.get("about:blank")
        server.close()


def _capture(driver, selector, path):
    """One element, whole, even where it reaches beyond the window (Chrome DevTools' clip)."""
    box = driver.execute_script(
        "const r = document.querySelector(arguments[0]).getBoundingClientRect();"
        "return {x: r.left + window.scrollX, y: r.top + window.scrollY, width: r.width, height: r.height};",
        selector)
    shot = driver.execute_cdp_cmd("Page.captureScreenshot", {
        "format": "png", "captureBeyondViewport": True, "clip": {**box, "scale": 1}})
    path.write_bytes(base64.b64decode(shot["data"]))
