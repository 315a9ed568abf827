"""The console's Pause / Resume / Step buttons and pause points: what the page asks is what the executor does,
and what other doors do shows on the page."""
import time

from console_page import slow_script
from rtdl_plans import do, envelope, seq
from test_web_console_ops import badge_label, http

# Ops 1 (the sequence), 2, 3, 4 and 5, one after another.
FOUR = envelope(seq(do("hold the cup"), do("pour"), do("stir"), do("put the cup down"), description="make tea"),
                "make tea")
PAUSE_SHOWN_S = 1.0


def states(console, plan_id):
    status = http(console, "GET", f"/api/plans/{plan_id}/status")
    return status["paused"], {op["op_id"]: (op["state"], op.get("held", False)) for op in status["ops"]}


def click(console, action):
    button = console.css(f'[data-action="{action}"]')
    console.wait_for(lambda d: button.is_enabled(), message=f"{action} never became enabled")
    button.click()


def test_pause_holds_the_next_op_step_lets_one_in_and_resume_goes_on(console_factory):
    console = console_factory(slow_script(duration_s=1.0))
    plan_id = console.submit(FOUR)
    console.open()
    console.wait_text("#connection", "live")
    console.wait_op_class("2", "state-running")
    assert not console.css('[data-action="resume-plan"]').is_enabled()

    click(console, "pause-plan")
    console.wait_text("#status", "paused")
    console.wait_text(f'#running-plans [data-plan-id="{plan_id}"] .badge', "paused")
    assert not console.css('[data-action="pause-plan"]').is_enabled()
    # The sim pauses the call in progress too; no op starts while the plan stays paused.
    console.wait_op_class("2", "state-paused")
    paused, ops = states(console, plan_id)
    assert paused and ops["2"][0] == "paused" and ops["3"][0] == "pending", ops
    time.sleep(1.2)
    paused, ops = states(console, plan_id)
    assert paused and ops["2"][0] == "paused" and ops["3"][0] == "pending" and ops["4"][0] == "pending", ops

    # Step: exactly one more op goes in, then the plan pauses again behind it.
    click(console, "step-plan")
    console.wait_op_class("3", "state-running")
    console.wait_op_class("4", "held", timeout=5)
    paused, ops = states(console, plan_id)
    assert paused and ops["3"][0] == "succeeded" and ops["4"] == ("pending", True), ops
    assert ops["5"][0] == "pending"
    assert "pending · held" in console.op("4").text
    console.wait_text("#status", "paused")

    click(console, "resume-plan")
    console.wait_op_class("4", "state-running")
    assert "held" not in console.op("4").get_attribute("class")
    console.wait_text("#status", "succeeded", timeout=10)
    assert console.executor.wait_for_plan(plan_id, 10)["outcome"] == "succeeded"


def test_a_pause_point_armed_over_http_shows_at_once_fires_and_one_armed_on_the_page_disarms_by_click(
        console_factory):
    console = console_factory(slow_script(duration_s=1.5))
    plan_id = console.submit(FOUR)
    console.open()
    console.wait_text("#connection", "live")
    console.wait_op_class("2", "state-running")

    started = time.monotonic()
    answer = http(console, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "4", "when": "on_enter",
                                                                     "action": "pause"})
    assert answer["armed"], answer
    console.wait_op_class("4", "pause-on_enter", timeout=PAUSE_SHOWN_S)
    assert time.monotonic() - started <= PAUSE_SHOWN_S
    assert badge_label(console, "4") == "‖ pause on enter"
    assert "stop-on_enter" not in console.op("4").get_attribute("class")

    # Armed from the details panel, then disarmed by a click on its badge.
    console.op("5").click()
    click(console, "pause-on_complete")
    console.wait_op_class("5", "pause-on_complete")
    status = http(console, "GET", f"/api/plans/{plan_id}/status?op_ids=5")
    assert status["ops"][0]["pause_point"] == "on_complete", status
    console.css('g.op[data-op-id="5"] .stop-badge').click()
    console.wait_for(lambda d: badge_label(console, "5") is None, message="the clicked pause badge stayed")
    status = http(console, "GET", f"/api/plans/{plan_id}/status?op_ids=5")
    assert "pause_point" not in status["ops"][0], status

    # Op 3 ends, op 4 is reached: the plan pauses there, op 4 held, the badge gone (a pause point fires once).
    console.wait_text("#status", "paused", timeout=10)
    console.wait_op_class("4", "held", timeout=5)
    assert badge_label(console, "4") is None
    paused, ops = states(console, plan_id)
    assert paused and ops["4"] == ("pending", True), ops
    click(console, "resume-plan")
    console.wait_text("#status", "succeeded", timeout=15)
