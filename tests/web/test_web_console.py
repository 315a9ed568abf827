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


def test_stop_on_enter_from_the_page_cancels_before_the_op(console_factory):
    console = console_factory(slow_script(duration_s=0.05), start=False)
    plan_id = console.submit(FOUR_SLOW_STEPS)  # ops: 1 the sequence, 2..5 the do ops
    # The plan waits before op 3 (a pause point armed before the executor ticks) while the page arms op 4.
    console.executor.stop_plan_at(plan_id, "3", "on_enter", action="pause")
    console.executor.start()
    console.open()
    target = "4"
    console.wait_text("#status", f"plan {plan_id}: paused")
    assert "state-running" in console.op("1").get_attribute("class")

    console.op(target).click()
    console.wait_text("#op-title", target)
    console.css('[data-action="stop-on_enter"]').click()
    console.wait_op_class(target, "stop-on_enter")
    console.css('[data-action="resume-plan"]').click()

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

    flagged = console.wait_for(
        lambda d: console.all('.outline-node.has-issue[data-path="/rtdl/children/1/children/0"]'))
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


def batch_id(b):
    """The op id of thousand_ops' batch b (root 1, then each batch followed by its 110 do ops)."""
    return str(2 + b * 111)


def leaf_id(b, i):
    return str(2 + b * 111 + 1 + i)


def drawn_ops(console):
    return console.driver.execute_script("return document.querySelectorAll('g.op').length")


def test_a_thousand_op_plan_opens_only_the_path_to_the_running_op(console_factory):
    console = console_factory(slow_script(duration_s=60))
    plan_id = console.submit(thousand_ops())
    console.open()
    console.wait_op_class(leaf_id(0, 0), "state-running")
    # Readable at first paint: the root and the running batch with its ops at 100%; the other batches
    # closed (below the open one); only the ops in and around the view are in the DOM.
    assert "open" in console.op(batch_id(0)).get_attribute("class")
    assert drawn_ops(console) < 150
    assert console.op("1").get_attribute("data-total") == "990"
    assert "0/110 done · 1 running" in console.op(batch_id(0)).text
    font = console.driver.execute_script("return getComputedStyle(document.querySelector('g.op .desc')).fontSize")
    assert float(font.rstrip("px")) >= 10
    console.screenshot("web-console-1000-ops.png")
    console.css("#follow-running").click()
    console.driver.execute_script("const s = document.getElementById('tree-scroll'); s.scrollTo(0, s.scrollHeight)")
    for b in range(1, 9):
        console.wait_for(lambda d, b=b: console.all(f'g.op[data-op-id="{batch_id(b)}"].collapsed'),
                         message=f"batch {b} is not drawn closed")
    assert not console.all(f'g.op[data-op-id="{leaf_id(1, 0)}"]')
    assert drawn_ops(console) < 150
    assert console.op(batch_id(1)).get_attribute("data-total") == "110"

    # A collapsed composite opens and closes from its button.
    console.css(f'g.op[data-op-id="{batch_id(1)}"] .toggle').click()
    console.wait_for(lambda d: console.all(f'g.op[data-op-id="{leaf_id(1, 0)}"]'), message="batch 1 did not open")
    assert "open" in console.op(batch_id(1)).get_attribute("class")
    console.css(f'g.op[data-op-id="{batch_id(1)}"] .toggle').click()
    console.wait_for(lambda d: not console.all(f'g.op[data-op-id="{leaf_id(1, 0)}"]'), message="batch 1 did not close")
    from selenium.webdriver.common.keys import Keys
    console.op(batch_id(1)).send_keys(Keys.ARROW_RIGHT)  # the keyboard opens and closes too
    console.wait_for(lambda d: console.all(f'g.op[data-op-id="{leaf_id(1, 0)}"]'), message="→ did not open batch 1")
    console.op(batch_id(1)).send_keys(Keys.ARROW_LEFT)
    console.wait_for(lambda d: not console.all(f'g.op[data-op-id="{leaf_id(1, 0)}"]'),
                     message="← did not close batch 1")
    # Closing the running batch hides its op; "Find running" opens the way to it again.
    console.driver.execute_script("document.getElementById('tree-scroll').scrollTo(0, 0)")
    console.wait_for(lambda d: console.all(f'g.op[data-op-id="{batch_id(0)}"] .toggle'))
    console.css(f'g.op[data-op-id="{batch_id(0)}"] .toggle').click()
    console.wait_for(lambda d: not console.all(f'g.op[data-op-id="{leaf_id(0, 0)}"]'))
    assert "1 running" in console.op(batch_id(0)).text
    console.css('[data-action="goto-running"]').click()
    console.wait_op_class(leaf_id(0, 0), "selected")

    # Search by text and by op id: the match is opened, scrolled to and selected.
    search = console.css("#search")
    search.send_keys("step 5.7")
    console.wait_text("#search-count", "1 match")
    search.send_keys("\n")
    console.wait_op_class(leaf_id(5, 7), "selected")
    console.wait_text("#op-title", leaf_id(5, 7))
    assert "open" in console.op(batch_id(5)).get_attribute("class")
    search.clear()
    search.send_keys(leaf_id(8, 100) + "\n")
    console.wait_text("#op-title", leaf_id(8, 100))
    assert console.op(leaf_id(8, 100)).is_displayed()

    # The minimap scrolls the view where it is clicked, and ends "follow running".
    scroll_top = "return document.getElementById('tree-scroll').scrollTop"
    console.css("#follow-running").click()
    assert console.css("#follow-running").is_selected()
    console.driver.execute_script("document.getElementById('tree-scroll').scrollTo(0, 0)")
    console.wait_for(lambda d: d.execute_script(scroll_top) == 0)
    minimap = console.css("#minimap")
    assert minimap.size["height"] > 100
    from selenium.webdriver.common.action_chains import ActionChains
    halfway = minimap.size["height"] // 2 - 5
    ActionChains(console.driver).move_to_element_with_offset(minimap, 0, halfway).click().perform()
    console.wait_for(lambda d: d.execute_script(scroll_top) > 1000, message="the minimap click did not scroll")
    assert not console.css("#follow-running").is_selected()

    console.executor.cancel_plan(plan_id)  # node_state events: the running op ends canceled
    console.wait_text("#status", f"plan {plan_id}: cancelled")
    console.driver.execute_script("document.getElementById('tree-scroll').scrollTo(0, 0)")
    console.wait_for(lambda d: console.op(batch_id(0)).get_attribute("data-done") == "1",
                     message="batch 0 never counted its canceled op")
    last_op = console.executor.get_plan_result(plan_id)["ops"][-1]
    assert (last_op["op_id"], last_op["state"]) == (leaf_id(8, 109), "pending")
    tree = console.css("#tree")
    width = int(tree.get_attribute("width"))
    console.css('[data-action="zoom-out"]').click()
    assert int(tree.get_attribute("width")) < width
    console.css('[data-action="zoom-reset"]').click()
    assert int(tree.get_attribute("width")) == width


def test_follow_running_keeps_the_running_op_in_view(console_factory):
    console = console_factory(slow_script(duration_s=0.12), start=False)
    plan_id = console.submit(envelope(seq(*[do(f"step {i}") for i in range(60)], description="sixty steps"), "sixty"))
    console.open()
    console.wait_text("#status", f"plan {plan_id}: running")
    console.executor.start()  # the page is up before the first op starts, however slow the machine
    in_view = """const s = document.getElementById('tree-scroll').getBoundingClientRect();
        const r = document.querySelector('g.op.kind-do.state-running');
        if (!r) return null;
        const b = r.getBoundingClientRect();
        return b.top >= s.top && b.bottom <= s.bottom;"""
    seen = 0
    while console.executor.get_plan_tree(plan_id)["running"] and seen < 20:
        shown = console.driver.execute_script(in_view)
        running = console.all("g.op.kind-do.state-running")
        if shown is not None and running and int(running[0].get_attribute("data-op-id")) > 20:
            console.wait_for(lambda d: d.execute_script(in_view) in (True, None),
                             message="the running op was left out of view")
            seen += 1
    assert seen, "never saw a running op far down the plan"
    assert console.driver.execute_script("return document.getElementById('tree-scroll').scrollTop") > 0


def test_ten_thousand_ops_draw(console_factory):
    console = console_factory(slow_script(duration_s=60))
    plan = envelope(par(*[seq(*[do(f"leaf {b}.{i}") for i in range(100)], description=f"branch {b}")
                          for b in range(99)], description="ten thousand ops"), "ten thousand ops")
    plan_id = console.submit(plan)
    console.open()
    console.wait_text("#status", f"plan {plan_id}: running", timeout=30)
    console.wait_for(lambda d: d.execute_script("return performance.getEntriesByName('bt-tree-drawn').length"),
                     timeout=30, message="the 10,000-op tree was never drawn")
    assert console.op("1").get_attribute("data-total") == "9900"
    assert console.op("1").get_attribute("data-done") == "0"
    assert drawn_ops(console) < 500
    last_branch = str(10000 - 100)
    console.css("#search").send_keys(last_branch + "\n")
    console.wait_text("#op-title", last_branch)
    console.executor.cancel_plan(plan_id)
    console.wait_text("#status", f"plan {plan_id}: cancelled", timeout=30)


def test_a_failed_op_shows_its_error_on_its_box_in_the_header_and_the_list(console_factory):
    console = console_factory(slow_script(duration_s=0.05, **{
        "4": {"outcome": "failure", "duration_s": 0.05, "error": "gripper reported no contact: the cup slipped"},
        "8": {"outcome": "success", "duration_s": 30},
        "10": {"outcome": "failure", "duration_s": 0.05, "error": "no cup left"}}))
    console.open()
    console.wait_text("#connection", "live")
    failing = console.submit(envelope(seq(do("open the drawer"), par(do("grasp the cup"), do("look")), do("leave"),
                                          description="fetch"), "fetch the cup"))
    console.executor.run_until_complete(failing, timeout=10)
    console.wait_text("#status", f"plan {failing}: failed at op 4")
    console.wait_text("#status", "gripper reported no contact")
    assert "grasp the cup" in console.css("#status").text
    error_line = console.wait_for(lambda d: console.all('g.op[data-op-id="4"] text.sub.error-line'))[0]
    assert "gripper reported no contact" in error_line.text
    assert "has-error" in console.op("4").get_attribute("class")
    console.wait_text(f'#finished-plans [data-plan-id="{failing}"] .plan-fail-line', "op 4")
    console.wait_text("#plan-facts", "gripper reported no contact")
    console.css('#status [data-action="goto-failed"]').click()
    console.wait_text("#op-title", "4")
    console.screenshot("web-console-failed.png")
    # A plan that fails while another is shown: its list entry says where, from the event stream.
    waiting = console.submit(envelope(seq(do("wait")), "a long wait"))  # ops 7, 8
    console.wait_text("#status", f"plan {waiting}: running")
    console.css("#follow").click()  # stay on the waiting plan
    other = console.submit(envelope(seq(do("grasp again")), "fails while not shown"))  # ops 9, 10
    console.wait_text(f'#finished-plans [data-plan-id="{other}"] .plan-fail-line', "op 10 “grasp again”: no cup left")
    assert console.css("#status").text.startswith(f"▶ plan {waiting}")
    console.executor.cancel_plan(waiting)
    # A page opened after the failure names the op too.
    console.open()
    console.wait_text(f'#finished-plans [data-plan-id="{failing}"] .plan-fail-line', "op 4 “grasp the cup”")
    # ... from the list itself: no failed plan's tree is read but the one shown.
    assert console.wait_text("#status", f"plan {waiting}: cancelled")  # the newest finished plan is shown
    assert read_paths(console, "/tree") == {f"/api/plans/{waiting}/tree"}


def read_paths(console, part):
    """The paths of the API requests the page made so far whose path holds ``part``."""
    return set(console.driver.execute_script(
        "return performance.getEntriesByType('resource').map((e) => new URL(e.name).pathname)"
        ".filter((p) => p.includes(arguments[0]))", part))


def test_dropped_events_make_the_page_read_the_state_again(console_factory):
    # A stream that holds only 5 events: the burst of a 1,000-op plan that runs at once overflows it.
    console = console_factory(slow_script(duration_s=0), stream_capacity=5)
    console.open()
    console.wait_text("#connection", "live")
    plan_id = console.submit(thousand_ops())
    console.executor.run_until_complete(plan_id, timeout=30)

    console.wait_text("#messages", "missed")
    console.wait_text("#status", f"plan {plan_id}: succeeded")
    console.wait_for(lambda d: console.op("1").get_attribute("data-done") == "990" and d.execute_script(
        "return document.querySelectorAll('g.op:not(.state-succeeded)').length") == 0,
        message="the tree was not read again after the drop")


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
        taken = console.css(f'text.transition[data-from="{step}"][data-outcome="success"]')
        assert "taken" in taken.get_attribute("class")
    not_taken = console.css('text.transition[data-from="s0"][data-outcome="grasp_failed"]')
    assert "taken" not in not_taken.get_attribute("class")
    # Drawn as a graph: one edge per (step, next) pair, each outcome a label on it, terminals as nodes.
    transitions = console.executor.get_plan_tree(plan_id)["transitions"]
    pairs = {(step, next_) for step, edges in transitions.items() for next_ in edges.values()}
    edges = {(e.get_attribute("data-from"), e.get_attribute("data-to")) for e in console.all("path.gedge")}
    assert edges == pairs
    terminals = {next_ for _, next_ in pairs if next_ not in transitions}
    assert {t.get_attribute("data-terminal") for t in console.all("g.terminal-node")} == terminals
    s3_success = console.css('text.transition[data-from="s3"][data-outcome="success"]')
    assert s3_success.get_attribute("data-to") == "completed"
    # s1 -> s2 was the last transition taken: the running step's way in is marked.
    assert "last" in console.css('path.gedge[data-from="s1"][data-to="s2"]').get_attribute("class")
    assert "taken" not in console.css('path.gedge[data-from="s4"][data-to="s1"]').get_attribute("class")
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


def _qwen3_console(console_factory, ops):
    """A console whose sim simulates the Qwen3 example's skills; ``ops``: per-step sim entries."""
    scene = str(REPO / "examples/qwen3/scene.json")
    world = World.from_scene(SkillCatalog.named("grant"), Scene.from_file(scene))
    script = {"default": {"duration_s": 0.02}, "ops": ops}
    return console_factory(backend=bt_exec.SimBackend(script, world=world), scene=scene)


def test_a_finished_step_graph_marks_only_the_transitions_its_trace_took(console_factory):
    # s1 fails its grasp once (-> s4), s4 finds the cap placed (-> s1), then every step succeeds.
    # s4's "empty" and "placed" both lead to s1: only "placed" was taken.
    console = _qwen3_console(console_factory, {"s1": {"outcome": ["grasp_failed", "success"], "duration_s": 0.02},
                                               "s4": {"outcome": "placed", "duration_s": 0.02}})
    plan_id = console.submit(json.loads((REPO / "examples/qwen3/cap_to_hatch.json").read_text()))
    record = console.executor.run_until_complete(plan_id, timeout=20)
    taken = {(entry["step"], entry["outcome"]) for entry in record["trace"]}
    assert ("s4", "placed") in taken and ("s4", "empty") not in taken, record["trace"]
    console.open()
    console.wait_text("#status", f"plan {plan_id}: succeeded")
    console.wait_op_class("s4", "state-succeeded")
    labels = console.wait_for(lambda d: console.all("text.transition.taken"), message="no transition marked taken")
    console.wait_for(lambda d: len(console.all("text.transition.taken")) == len(taken),
                     message="the taken transitions never settled to the trace's")
    shown = {(label.get_attribute("data-from"), label.get_attribute("data-outcome"))
             for label in console.all("text.transition.taken")}
    assert labels and shown == taken
    # The path ended in "completed": that terminal is marked reached, the other terminals not.
    assert "reached" in console.css('g.terminal-node[data-terminal="completed"]').get_attribute("class")
    assert "reached" not in console.css('g.terminal-node[data-terminal="stop"]').get_attribute("class")
    assert "×2" not in console.css('text.transition[data-from="s1"][data-outcome="success"]').text
    assert not read_paths(console, "/result")  # the tree view carries the trace
    console.screenshot("web-console-qwen3-finished.png")


def test_a_live_step_graph_marks_the_transitions_as_the_run_takes_them(console_factory):
    console = _qwen3_console(console_factory, {"s1": {"outcome": ["grasp_failed", "success"], "duration_s": 0.05},
                                               "s4": {"outcome": "placed", "duration_s": 0.05},
                                               "s2": {"outcome": "success", "duration_s": 60}})
    console.open()
    console.wait_text("#connection", "live")
    plan_id = console.submit(json.loads((REPO / "examples/qwen3/cap_to_hatch.json").read_text()))
    console.wait_op_class("s2", "state-running")
    expected = {("s0", "success"), ("s1", "grasp_failed"), ("s4", "placed"), ("s1", "success")}
    console.wait_for(lambda d: {(label.get_attribute("data-from"), label.get_attribute("data-outcome"))
                                for label in console.all("text.transition.taken")} == expected,
                     message="the taken transitions are not the ones the run took")
    assert "taken" not in console.css('text.transition[data-from="s4"][data-outcome="empty"]').get_attribute("class")
    assert "last" in console.css('path.gedge[data-from="s1"][data-to="s2"]').get_attribute("class")
    console.executor.cancel_plan(plan_id)
    console.wait_text("#status", f"plan {plan_id}: cancelled")


def test_a_server_that_closes_says_so_and_the_page_stops_reconnecting(console_factory):
    console = console_factory()
    plan_id = console.submit(FOUR_SLOW_STEPS)
    console.open()
    console.wait_text("#connection", "live")
    console.wait_text("#status", f"plan {plan_id}: running")
    console.server.close("bt-exec run ended")  # as bt-exec run --web closes once its run ended

    console.wait_text("#connection", "bt-exec run ended")
    console.wait_text("#messages", "The server closed (bt-exec run ended)")
    # The page let go of its event stream (a dropped one is retried: CONNECTING), and offers no control.
    assert console.driver.execute_script("return document.querySelector('#connection').textContent") \
        == "■ bt-exec run ended"
    assert not console.css('[data-action="cancel-all"]').is_enabled()
    assert not console.css('[data-action="cancel-plan"]').is_enabled()
    assert not console.css('[data-action="submit"]').is_enabled()
    assert "reconnecting" not in console.css("#connection").text
    assert console.driver.execute_script(
        "return performance.getEntriesByType('resource').filter((e) => e.name.includes('/api/events?') "
        "|| e.name.endsWith('/api/events')).length") <= 1


def test_a_step_graph_fits_a_1600_px_window_terminals_in_sight(console_factory):
    console = _qwen3_console(console_factory, {})
    plan_id = console.submit(json.loads((REPO / "examples/qwen3/cap_to_hatch.json").read_text()))
    console.executor.run_until_complete(plan_id, timeout=20)
    console.driver.set_window_size(1600, 900)
    try:
        console.open()
        console.wait_text("#status", f"plan {plan_id}: succeeded")
        terminals = console.wait_for(lambda d: console.all("g.terminal-node"), message="no terminal drawn")
        assert len(terminals) == 3
        outside = console.driver.execute_script(
            "const view = document.querySelector('#tree-scroll').getBoundingClientRect();"
            "return [...document.querySelectorAll('g.terminal-node, g.op')].filter((node) => {"
            "  const box = node.getBoundingClientRect();"
            "  return box.left < view.left || box.right > view.right || box.top < view.top || box.bottom > view.bottom;"
            "}).map((node) => node.getAttribute('data-terminal') || node.getAttribute('data-op-id'));")
        assert outside == [], f"cut off at the view's edge: {outside}"
        console.screenshot("web-console-qwen3-1600.png")
    finally:
        console.driver.set_window_size(1400, 900)
