"""The console's Pause / Resume / Step buttons and pause points: what the page asks is what the executor does,
and what other doors do shows on the page.

Where the test must act before the plan gets somewhere, the plan waits for it (an op of a minute, or a pause
point armed before the executor ticks): nothing here counts on the machine being fast."""
from console_page import slow_script
from rtdl_plans import do, envelope, seq
from test_web_console_ops import badge_label, http

# Ops 1 (the sequence), 2, 3, 4 and 5, one after another.
FOUR = envelope(seq(do("hold the cup"), do("pour"), do("stir"), do("put the cup down"), description="make tea"),
                "make tea")


def states(console, plan_id):
    status = http(console, "GET", f"/api/plans/{plan_id}/status")
    return status["paused"], {op["op_id"]: (op["state"], op.get("held", False)) for op in status["ops"]}


def stepping(console, plan_id):
    return http(console, "GET", f"/api/plans/{plan_id}/tree")["stepping"]


def click(console, action):
    button = console.css(f'[data-action="{action}"]')
    console.wait_for(lambda d: button.is_enabled(), message=f"{action} never became enabled")
    button.click()


def enabled(console, action):
    return console.css(f'[data-action="{action}"]').is_enabled()


def paused_before(console_factory, op_id, plan=FOUR, duration_s=0.05):
    """A console whose plan (``plan``, ops of ``duration_s``) pauses before op ``op_id`` starts, however long the
    test takes to get there: the pause point is armed before the executor ticks."""
    console = console_factory(slow_script(duration_s=duration_s), start=False)
    plan_id = console.submit(plan)
    assert console.executor.stop_plan_at(plan_id, op_id, "on_enter", action="pause")["armed"]
    console.executor.start()
    return console, plan_id


def test_pause_holds_the_running_plan_and_resume_goes_on(console_factory):
    console = console_factory(slow_script(duration_s=0.05, **{"2": {"outcome": "success", "duration_s": 60}}))
    plan_id = console.submit(FOUR)
    console.open()
    console.wait_text("#connection", "live")
    console.wait_op_class("2", "state-running")
    assert not enabled(console, "resume-plan")

    click(console, "pause-plan")
    console.wait_text("#status", "paused")
    console.wait_text(f'#running-plans [data-plan-id="{plan_id}"] .badge', "paused")
    console.wait_for(lambda d: not enabled(console, "pause-plan"), message="Pause stayed enabled on a paused plan")
    # The sim pauses the call in progress too; no op starts while the plan stays paused.
    console.wait_op_class("2", "state-paused")
    paused, ops = states(console, plan_id)
    assert paused and ops["2"][0] == "paused" and ops["3"][0] == "pending", ops

    click(console, "resume-plan")
    console.wait_op_class("2", "state-running")
    console.wait_text("#status", "running")
    console.wait_for(lambda d: not enabled(console, "resume-plan"), message="Resume stayed enabled once running")
    assert not states(console, plan_id)[0]
    console.executor.cancel_plan(plan_id)
    console.wait_text("#status", "cancelled")


def test_step_on_a_running_plan_enables_resume_which_drops_the_pending_step(console_factory):
    console = console_factory(slow_script(duration_s=0.05, **{"2": {"outcome": "success", "duration_s": 60}}))
    plan_id = console.submit(FOUR)
    console.open()
    console.wait_op_class("2", "state-running")
    assert not enabled(console, "resume-plan")

    # Not paused: the step is pending (the plan pauses behind the next op it starts); Resume would drop it.
    click(console, "step-plan")
    console.wait_for(lambda d: enabled(console, "resume-plan"), message="Resume stayed disabled with a step pending")
    assert stepping(console, plan_id) and not states(console, plan_id)[0]
    click(console, "resume-plan")
    console.wait_for(lambda d: not enabled(console, "resume-plan"),
                     message="Resume stayed enabled once the pending step was dropped")
    assert not stepping(console, plan_id) and not states(console, plan_id)[0]
    assert enabled(console, "pause-plan") and enabled(console, "step-plan")
    console.executor.cancel_plan(plan_id)
    console.wait_text("#status", "cancelled")


def test_step_lets_exactly_one_op_in_and_resume_goes_on_to_the_end(console_factory):
    console, plan_id = paused_before(console_factory, "3")
    console.open()
    console.wait_text("#status", "paused")
    console.wait_op_class("3", "held")
    console.wait_for(lambda d: enabled(console, "resume-plan"), message="Resume is disabled on a paused plan")
    assert not enabled(console, "pause-plan")

    # Step: exactly one more op goes in, then the plan pauses again behind it.
    click(console, "step-plan")
    console.wait_op_class("4", "held")
    paused, ops = states(console, plan_id)
    assert paused and ops["3"][0] == "succeeded" and ops["4"] == ("pending", True), ops
    assert ops["5"][0] == "pending"
    assert "pending · held" in console.op("4").text
    console.wait_text("#status", "paused")

    click(console, "resume-plan")
    console.wait_text("#status", "succeeded")
    assert "held" not in console.op("4").get_attribute("class")
    assert console.executor.wait_for_plan(plan_id, 10)["outcome"] == "succeeded"


def test_a_pause_point_armed_over_http_shows_fires_and_one_armed_on_the_page_disarms_by_click(console_factory):
    console, plan_id = paused_before(console_factory, "2")
    console.open()
    console.wait_text("#status", "paused")

    answer = http(console, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "4", "when": "on_enter",
                                                                     "action": "pause"})
    assert answer["armed"], answer
    console.wait_op_class("4", "pause-on_enter")  # shown from the event, whatever door armed it
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

    # Resumed, ops 2 and 3 run and op 4 is reached: the plan pauses there, op 4 held, the badge gone (a pause
    # point fires once).
    click(console, "resume-plan")
    console.wait_op_class("4", "held")
    console.wait_text("#status", "paused")
    assert badge_label(console, "4") is None
    paused, ops = states(console, plan_id)
    assert paused and ops["3"][0] == "succeeded" and ops["4"] == ("pending", True), ops
    click(console, "resume-plan")
    console.wait_text("#status", "succeeded")
