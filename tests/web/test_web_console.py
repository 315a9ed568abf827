"""The operator console in a real (headless) browser: live tree, stop points, cancel, submit with issues."""
import json

from bt_exec.compilers import Scene, SkillCatalog
from bt_exec.compilers.symbolic import World
from console_page import REPO, slow_script
from rtdl_plans import do, envelope, par, seq

import bt_exec

FOUR_SLOW_STEPS = envelope(seq(do("first step"), do("second step"), do("third step"), do("fourth step"),
                               description="four slow steps"), "four slow steps")

BAD_PLAN = {"rtdl_description": "fetch the cup", "rtdl": seq(
    do("go to the kitchen", cap="nav.go_to", args={"place": "kitchen"}),
    par(do("find the cup", cap="vision.find", args=5),  # args must be an object
        {"op": "do", "op_id": 0, "description": "open the gripper", "args": {}}),  # no cap
    {"op": "dance", "op_id": 0, "description": "celebrate", "children": []},  # no such op
    do("say done", cap="audio.speak_text", args={"text": "done"}),
    description="fetch the cup")}


def thousand_ops():
    """1 root + 9 sequences of 110 do ops = 1,000 ops."""
    return envelope(seq(*[seq(*[do(f"step {b}.{i}") for i in range(110)], description=f"batch {b}")
                          for b in range(9)], description="a thousand ops"), "a thousand ops")


def test_stop_on_enter_from_the_page_cancels_before_the_op(console):
    plan_id = console.submit(FOUR_SLOW_STEPS)  # ops: 1 the sequence, 2..5 the do ops, 1.5 s each
    console.open()

    running = console.wait_for(lambda d: console.all("g.op.kind-do.state-running"), message="no running op shown")[0]
    running_id = running.get_attribute("data-op-id")
    assert "state-running" in console.op("1").get_attribute("class")
    target = str(int(running_id) + 2)  # the op after the next one: the next one may start while we click
    assert int(target) <= 5, f"the page showed the plan too late (op {running_id} already running)"
    assert console.wait_text("#status", f"plan {plan_id}: running")

    console.op(target).click()
    console.wait_text("#op-title", target)
    console.css('[data-action="stop-on_enter"]').click()
    console.wait_op_class(target, "stop-on_enter")

    console.wait_text("#status", f"plan {plan_id}: cancelled")
    result = console.executor.get_plan_result(plan_id)
    states = {op["op_id"]: op["state"] for op in result["ops"]}
    assert result["outcome"] == "cancelled"
    assert result["cancel_reason"] == f"stop point on_enter at op {target}"
    # The stopped op never ran: no call reached the backend, it ends canceled ("never started");
    # the op before it finished, every op after it stays pending.
    assert target not in {call.op_id for call in console.executor.backend.calls}
    stopped = next(op for op in result["ops"] if op["op_id"] == target)
    assert stopped["state"] == "canceled" and "never started" in stopped["detail"], stopped
    assert states[str(int(target) - 1)] == "succeeded", states
    assert all(states[str(later)] == "pending" for later in range(int(target) + 1, 6)), states
    console.wait_op_class(target, "state-canceled")
    for later in range(int(target) + 1, 6):
        assert "state-pending" in console.op(str(later)).get_attribute("class")
    console.wait_for(lambda d: console.all(f'#finished-plans [data-plan-id="{plan_id}"]'))
    console.wait_for(lambda d: console.all("#event-log .log-plan_complete"))
    shot = console.screenshot("web-console-stop.png")
    assert shot.stat().st_size > 0


def test_bad_graph_shows_issues_against_its_nodes(console, tmp_path):
    console.open()
    console.set_plan_text(json.dumps(BAD_PLAN, indent=2))
    console.css('[data-action="validate"]').click()

    flagged = console.wait_for(lambda d: console.all('.outline-node.has-issue[data-path="/rtdl/children/1/children/0"]'))
    assert "args must be an object" in flagged[0].text
    assert "no 'cap'" in console.css('.outline-node[data-path="/rtdl/children/1/children/1"]').text
    assert "unknown op 'dance'" in console.css('.outline-node[data-path="/rtdl/children/2"]').text
    for fine in ("/rtdl", "/rtdl/children/0", "/rtdl/children/3"):
        assert "has-issue" not in console.css(f'.outline-node[data-path="{fine}"]').get_attribute("class")
    assert len(console.all("#issues .issue")) == 3

    console.css('[data-action="submit"]').click()
    console.wait_text("#verdict", "refused")
    assert console.executor.get_all_plans()["count"] == 0

    # The same through the file input, with an arena whose issues use nodes[i] paths.
    arena = json.loads((REPO / "examples/rtdl/three_commands_arena.json").read_text())
    arena["nodes"][3]["node_kind"] = 9
    upload = tmp_path / "bad_arena.json"
    upload.write_text(json.dumps(arena))
    console.css("#plan-file").send_keys(str(upload))
    console.wait_for(lambda d: "node_kind" in console.css("#plan-text").get_attribute("value"))
    console.css('[data-action="validate"]').click()
    flagged = console.wait_for(lambda d: console.all('.outline-node.has-issue[data-path="/nodes/3"]'))
    assert "node_kind must be 0" in flagged[0].text
    assert not console.all('.outline-node.has-issue[data-path="/nodes/1"]')


def test_qwen3_issue_marks_its_step(console_factory):
    console = console_factory(scene=str(REPO / "examples/qwen3/scene.json"))
    console.open()
    console.set_plan_text((REPO / "examples/qwen3/cap_without_vacuum.json").read_text())
    console.css('[data-action="validate"]').click()
    flagged = console.wait_for(lambda d: console.all('.outline-node.has-issue[data-step="s1"]'))
    assert "precondition" in flagged[0].text or "vacuum" in flagged[0].text
    console.wait_text("#verdict", "replan_required")


def test_cancel_all_from_the_page(console_factory):
    console = console_factory(slow_script(duration_s=30))
    first = console.submit(envelope(seq(do("wait a"), do("then a")), "plan A"))
    second = console.submit(envelope(seq(do("wait b"), do("then b")), "plan B"))
    console.open()
    console.wait_for(lambda d: len(console.all("#running-plans [data-plan-id]")) == 2, message="two running plans")
    console.wait_text("#status", f"plan {second}: running")  # the newest running plan is selected

    console.css('[data-action="cancel-all"]').click()

    for plan_id in (first, second):
        console.wait_for(lambda d, p=plan_id: console.all(f'#finished-plans [data-plan-id="{p}"]'))
        assert console.executor.get_plan_result(plan_id)["outcome"] == "cancelled"
    console.wait_text("#status", f"plan {second}: cancelled")
    assert not console.all("#running-plans [data-plan-id]")
    console.wait_for(lambda d: console.all(f'#finished-plans [data-plan-id="{first}"] .badge.outcome-cancelled'))


def test_a_thousand_op_plan_renders_every_node_and_takes_updates(console_factory):
    console = console_factory(slow_script(duration_s=60))
    plan_id = console.submit(thousand_ops())
    console.open()
    console.wait_for(lambda d: d.execute_script("return document.querySelectorAll('g.op').length") == 1000,
                     timeout=30, message="not all 1,000 ops were drawn")
    first_leaf = "3"  # root 1, first batch 2, its first do 3
    console.wait_op_class(first_leaf, "state-running")
    console.screenshot("web-console-1000-ops.png")

    console.executor.cancel_plan(plan_id)  # node_state events: the running ops end canceled

    console.wait_op_class(first_leaf, "state-canceled")
    console.wait_text("#status", f"plan {plan_id}: cancelled")
    assert console.driver.execute_script("return document.querySelectorAll('g.op').length") == 1000
    # Texts are drawn for the nodes near the view only; scrolling to the end brings the last op's.
    last = console.driver.execute_script("return [...document.querySelectorAll('g.op')].pop().dataset.opId")
    assert not console.css(f'g.op[data-op-id="{last}"]').find_elements("css selector", "text.desc")
    console.driver.execute_script("const s = document.getElementById('tree-scroll'); s.scrollTo(0, s.scrollHeight)")
    console.wait_for(lambda d: d.find_elements("css selector", f'g.op[data-op-id="{last}"] text.desc'),
                     message="the last op's text was never drawn after scrolling to it")
    last_op = console.executor.get_plan_result(plan_id)["ops"][-1]
    assert (last_op["op_id"], last_op["state"]) == (last, "pending")  # after the cancel, never reached
    assert console.css(f'g.op[data-op-id="{last}"] text.state-label').text == "pending"
    assert "state-pending" in console.css(f'g.op[data-op-id="{last}"]').get_attribute("class")
    font = console.driver.execute_script("return getComputedStyle(document.querySelector('g.op .desc')).fontSize")
    assert float(font.rstrip("px")) >= 10  # drawn legibly; the view scrolls rather than shrinks
    tree = console.css("#tree")
    width = int(tree.get_attribute("width"))
    console.css('[data-action="zoom-out"]').click()
    assert int(tree.get_attribute("width")) < width
    console.css('[data-action="zoom-reset"]').click()
    assert int(tree.get_attribute("width")) == width


def test_dropped_events_make_the_page_read_the_state_again(console_factory):
    # A stream that holds only 5 events: the burst of a 1,000-op plan that runs at once overflows it.
    console = console_factory(slow_script(duration_s=0), stream_capacity=5)
    console.open()
    console.wait_text("#connection", "live")
    plan_id = console.submit(thousand_ops())
    console.executor.run_until_complete(plan_id, timeout=30)

    console.wait_text("#messages", "missed")
    console.wait_text("#status", f"plan {plan_id}: succeeded")
    console.wait_for(lambda d: d.execute_script("return document.querySelectorAll('g.op.state-succeeded').length")
                     == 1000, message="the tree was not read again after the drop")


def test_api_errors_are_shown_and_the_token_is_sent(console_factory):
    console = console_factory(token="s3cret-token")
    console.open()
    field = console.wait_for(lambda d: [f for f in console.all("#token-field") if f.is_displayed()],
                             message="the token field is not shown")[0]
    console.css('[data-action="cancel-all"]').click()
    console.wait_text("#messages", "token_required")  # the server's refusal, shown, not swallowed

    field.find_element("css selector", "input").send_keys("s3cret-token")
    console.css('[data-action="cancel-all"]').click()
    console.wait_text("#messages", "cancelled 0 plan(s)")
    assert console.driver.execute_script("return sessionStorage.getItem('bt_exec.token')") == "s3cret-token"

    console.set_plan_text("{this is not json")
    console.css('[data-action="submit"]').click()
    console.wait_text("#issues", "json_syntax")


def test_a_step_graph_shows_its_steps_and_transitions_live(console_factory):
    scene = str(REPO / "examples/qwen3/scene.json")
    world = World.from_scene(SkillCatalog.named("grant"), Scene.from_file(scene))
    backend = bt_exec.SimBackend({"default": {"duration_s": 0.05}, "ops": {"s2": {"duration_s": 60}}}, world=world)
    console = console_factory(backend=backend, scene=scene)
    plan_id = console.submit(json.loads((REPO / "examples/qwen3/cap_to_hatch.json").read_text()))
    console.open()
    console.wait_op_class("s2", "state-running")
    assert len(console.all("g.op.kind-step")) == 6
    for step in ("s0", "s1"):
        console.wait_op_class(step, "state-succeeded")
        assert "taken" in console.css(f'text.transition[data-from="{step}"][data-outcome="success"]').get_attribute("class")
    assert "taken" not in console.css('text.transition[data-from="s0"][data-outcome="grasp_failed"]').get_attribute("class")
    assert "completed" in console.css('text.transition[data-from="s3"][data-outcome="success"]').text
    console.op("s2").click()
    console.wait_text("#op-facts", "transfer")
    console.wait_text("#plan-facts", "s0 → s1")
    console.screenshot("web-console-qwen3.png")
    console.css('[data-action="cancel-plan"]').click()
    console.wait_text("#status", f"plan {plan_id}: cancelled")
    console.wait_op_class("s2", "state-canceled")


def test_beyond_loopback_the_page_reads_and_follows_live_only_with_the_token(console_factory):
    console = console_factory(token="s3cret-token", host="0.0.0.0")
    plan_id = console.submit(FOUR_SLOW_STEPS)
    console.open()
    console.wait_text("#connection", "disconnected")  # the event stream is refused without the token
    console.wait_text("#messages", "needs a token")
    assert not console.all(f'#running-plans [data-plan-id="{plan_id}"]')

    console.css("#token").send_keys("s3cret-token")
    console.wait_text("#connection", "live")
    console.wait_for(lambda d: console.all(f'#running-plans [data-plan-id="{plan_id}"]'),
                     message="the running plan is not listed once the token is given")
