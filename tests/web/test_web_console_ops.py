"""The console shows what other doors do to a plan's ops (stop points armed, disarmed, fired) and each op's call."""
import json
import urllib.request

from console_page import slow_script
from rtdl_plans import do, envelope, seq

# Ops 1 (the sequence), 2 (held a minute), 3 and 4.
HELD = envelope(seq(do("hold the cup"), do("pour"), do("put the cup down"), description="pour a cup"), "pour a cup")


def http(console, method, path, body=None):
    """A plain HTTP request from the test, as curl or another program would send it (not the page)."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(console.url.rstrip("/") + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"} if data else {})
    with urllib.request.urlopen(request, timeout=10) as answer:
        return json.loads(answer.read())


def listed_stop_points(console, plan_id):
    return console.css(f'#running-plans [data-plan-id="{plan_id}"] .plan-meta').text


def badge_label(console, op_id):
    return console.driver.execute_script(
        "const t = document.querySelector(`g.op[data-op-id='${arguments[0]}'] .stop-text`);"
        "return t && t.closest('.stop-marker').getAttribute('display') !== 'none' ? t.textContent : null;", op_id)


def server_stop_point(console, plan_id, op_id):
    status = http(console, "GET", f"/api/plans/{plan_id}/status?op_ids={op_id}")
    return status["ops"][0]["stop_point"]


def test_stop_points_from_other_doors_show_live_and_a_click_on_the_badge_disarms(console_factory):
    console = console_factory(slow_script(duration_s=3, **{"2": {"outcome": "success", "duration_s": 60}}))
    plan_id = console.submit(HELD)
    console.open()
    console.wait_text("#connection", "live")
    console.wait_op_class("2", "state-running")
    assert badge_label(console, "3") is None

    # Armed over HTTP by another program: the badge is on its op (from the event: the page reads nothing), the
    # list counts it.
    answer = http(console, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "3", "when": "on_enter"})
    assert answer["armed"], answer
    console.wait_op_class("3", "stop-on_enter")
    assert badge_label(console, "3") == "■ stop on enter"
    console.wait_text(f'#running-plans [data-plan-id="{plan_id}"] .plan-meta', "1 stop point")

    http(console, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "3", "when": "on_complete"})
    console.wait_for(lambda d: badge_label(console, "3") == "■ stop on enter + complete",
                     message="the second stop point at op 3 did not show")
    console.wait_text(f'#running-plans [data-plan-id="{plan_id}"] .plan-meta', "2 stop points")

    # Disarmed over HTTP: that one goes, then the other; the badge disappears and the list stops counting.
    answer = http(console, "POST", f"/api/plans/{plan_id}/disarm", {"op_id": "3", "when": "on_enter"})
    assert answer["disarmed"], answer
    console.wait_for(lambda d: badge_label(console, "3") == "■ stop on complete",
                     message="the disarmed stop point stayed on op 3")
    assert "stop-on_enter" not in console.op("3").get_attribute("class")
    http(console, "POST", f"/api/plans/{plan_id}/disarm", {"op_id": "3", "when": "on_complete"})
    console.wait_for(lambda d: badge_label(console, "3") is None,
                     message="the badge stayed after every stop point of op 3 was disarmed")
    assert "stop-on_complete" not in console.op("3").get_attribute("class")
    console.wait_for(lambda d: "stop point" not in listed_stop_points(console, plan_id),
                     message="the plan list still counts a stop point")

    # Armed through the Python API: the same badge; a click on it disarms it through the server.
    console.executor.stop_plan_at(plan_id, "4", "on_complete")
    console.wait_op_class("4", "stop-on_complete")
    assert server_stop_point(console, plan_id, "4") == "on_complete"
    console.css('g.op[data-op-id="4"] .stop-badge').click()
    console.wait_text("#messages", "Stop point disarmed")
    console.wait_for(lambda d: badge_label(console, "4") is None, message="the clicked badge stayed")
    assert server_stop_point(console, plan_id, "4") is None
    assert http(console, "GET", "/api/plans")["plans"][0]["stop_points"] == 0

    # The pressed "Stop on complete" button of the details disarms too.
    console.op("4").click()
    console.css('[data-action="stop-on_complete"]').click()
    console.wait_op_class("4", "stop-on_complete")
    assert server_stop_point(console, plan_id, "4") == "on_complete"
    console.wait_for(lambda d: console.css('[data-action="stop-on_complete"]').get_attribute("aria-pressed") == "true")
    console.css('[data-action="stop-on_complete"]').click()
    console.wait_for(lambda d: badge_label(console, "4") is None, message="the pressed button did not disarm")
    assert server_stop_point(console, plan_id, "4") is None
    console.executor.cancel_plan(plan_id)
    console.wait_text("#status", f"plan {plan_id}: cancelled")


def test_a_stop_point_armed_elsewhere_that_fires_stays_marked_fired(console_factory):
    console = console_factory(slow_script(duration_s=0.05), start=False)
    plan_id = console.submit(envelope(seq(do("wipe"), do("dry"), description="wipe, dry"), "wipe"))  # ops 1, 2, 3
    # Held before op 3 until the stop point is armed (a pause point armed before the executor ticks).
    console.executor.stop_plan_at(plan_id, "3", "on_enter", action="pause")
    console.executor.start()
    console.open()
    console.wait_text("#status", "paused")
    http(console, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "3", "when": "on_enter"})
    console.wait_op_class("3", "stop-on_enter")
    http(console, "POST", f"/api/plans/{plan_id}/resume", {})

    console.wait_text("#status", f"plan {plan_id}: cancelled")
    console.wait_op_class("3", "stop-fired-on_enter")
    console.wait_op_class("3", "state-canceled")
    assert badge_label(console, "3") == "■ stop on enter fired"
    assert not console.all('g.op[data-op-id="3"] .stop-badge[data-disarm]')  # nothing left to disarm
    console.wait_for(lambda d: "stop-on_enter" not in console.op("3").get_attribute("class"),
                     message="op 3 still shows its stop point armed after it fired")
    assert console.wait_text("#event-log", "stop point fired at op 3 on_enter (http)")


SMALL_ARGS = {"place": "kitchen", "speed": 0.5}
BIG_ARGS = {"waypoints": [[i, round(i * 0.25, 2), 0.1] for i in range(400)], "frame": "base_link"}


def test_an_ops_cap_and_args_show_in_its_details_and_tooltip_and_cut_args_load_whole(console_factory):
    assert len(json.dumps(BIG_ARGS)) > 4096
    console = console_factory(slow_script(duration_s=60))
    plan_id = console.submit(envelope(seq(do("go to the kitchen", cap="nav.go_to", args=SMALL_ARGS),
                                          do("follow the path", cap="arm.follow_path", args=BIG_ARGS),
                                          description="go, then follow"), "go, then follow"))  # ops 1, 2, 3
    console.open()
    console.wait_op_class("2", "state-running")

    console.op("2").click()
    console.wait_text("#op-facts", "nav.go_to")
    shown = console.css("#op-blocks pre.args").get_attribute("textContent")
    assert shown == json.dumps(SMALL_ARGS, indent=2)
    assert not console.all('#op-blocks [data-action="full-op"]')
    tooltip = console.css('g.op[data-op-id="2"] > title').get_attribute("textContent")
    assert "cap: nav.go_to" in tooltip and 'args: {"place":"kitchen","speed":0.5}' in tooltip

    console.op("3").click()
    console.wait_text("#op-facts", "arm.follow_path")
    cut = console.css("#op-blocks pre.args.cut").get_attribute("textContent")
    assert cut.startswith('{"waypoints":[[0,0') and len(cut) < len(json.dumps(BIG_ARGS))
    size = console.executor.get_plan_tree(plan_id)["ops"][2]["args"]["bytes"]
    assert f"{size:,} bytes in all" in console.css("#op-blocks .args-cut").text
    tooltip = console.css('g.op[data-op-id="3"] > title').get_attribute("textContent")
    assert "cap: arm.follow_path" in tooltip and f"({size} bytes;" in tooltip

    console.css('#op-blocks [data-action="full-op"]').click()
    whole = console.wait_for(lambda d: console.all("#op-blocks pre.args:not(.cut)"), message="the full op never came")
    assert json.loads(whole[0].get_attribute("textContent")) == BIG_ARGS
    assert "whole" in console.css("#op-blocks").text
    console.op("2").click()  # the whole args stay with their op
    console.wait_text("#op-title", "2")
    console.op("3").click()
    console.wait_text("#op-title", "3")
    assert json.loads(console.css("#op-blocks pre.args").get_attribute("textContent")) == BIG_ARGS
    console.screenshot("web-console-args.png")
    console.executor.cancel_plan(plan_id)
    console.wait_text("#status", f"plan {plan_id}: cancelled")


def test_a_bt_xml_control_op_is_headed_by_the_node_it_runs_as(console_factory):
    console = console_factory(slow_script(duration_s=60))
    plan_id = console.submit('<root BTCPP_format="4"><BehaviorTree ID="Main"><ReactiveSequence>'
                             '<AlwaysSuccess/><MoveTo x="1"/></ReactiveSequence></BehaviorTree></root>')
    console.open()
    console.wait_text("#connection", "live")
    console.wait_op_class("1", "state-running")
    head = console.op("1").find_element("css selector", ".head").text
    assert head.startswith("1 · ReactiveSeq"), head  # cut to the box; the tooltip has it whole
    tooltip = console.driver.execute_script("return document.querySelector(`g.op[data-op-id='1'] title`).textContent")
    assert tooltip.startswith("1 · ReactiveSequence — running"), tooltip
    assert console.executor.cancel_plan(plan_id)["finished"]
