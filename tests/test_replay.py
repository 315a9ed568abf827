"""bt-exec replay: a journal's run played back as run printed it, refused when torn or mixed, served over HTTP."""
import json
import pathlib
import re
import tracemalloc
import urllib.request

import pytest
from qwen3_graphs import envelope, scene, vacuum_to_work
from rtdl_plans import do, par, seq

import bt_exec
from bt_exec.cli.dispatch import main
from bt_exec.compilers import Scene, SkillCatalog
from bt_exec.compilers.symbolic import World
from bt_exec.errors import ControlError
from bt_exec.events.replay import ReplayError, find_run, paced, read_events
from bt_exec.replayed_plans import ReplayedPlans
from bt_exec.web.server import WebServer
from bt_exec.web.replay_api import ReplayApi

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
RTDL = str(EXAMPLES / "rtdl" / "snapshot_battery.json")


def recorded(tmp_path, capsys, *extra):
    journal = tmp_path / "run.jsonl"
    main(["run", RTDL, "--events", str(journal), *extra])
    printed = capsys.readouterr().out
    return journal, printed


def test_a_replay_prints_what_run_printed_with_its_summary(tmp_path, capsys):
    journal, printed = recorded(tmp_path, capsys, "--stop-at", "4:on_enter")
    assert main(["replay", str(journal), "--speed", "0"]) == 0
    replayed = capsys.readouterr().out
    assert replayed == printed
    assert re.fullmatch(r"plan 1 cancelled after \d+\.\d\d s \(stop point on_enter at op 4\); ops: 1 succeeded, "
                        r"3 canceled, 1 pending", replayed.splitlines()[-1])  # the time is the recording machine's


def test_a_run_whose_op_failed_replays_as_run_printed_it(tmp_path, capsys):
    """plan_complete names the op that failed as the executor records it, {op_id, description, error}."""
    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"ops": {"3": {"outcome": "failure", "error": "the battery reader is off"}}}))
    journal, printed = recorded(tmp_path, capsys, "--sim-script", str(script))
    complete = json.loads(journal.read_text().splitlines()[-1])
    assert complete["event"] == "plan_complete" and complete["failed_op"]["op_id"] == "3"
    main(["replay", str(journal), "--speed", "0"])
    assert capsys.readouterr().out == printed


class RecordedClock:
    """A clock that moves only when the replay waits on it: each wait is noted, and passes at once."""

    def __init__(self):
        self.now = 100.0
        self.waits = []

    def __call__(self):
        return self.now

    def wait(self, seconds):
        self.waits.append(seconds)
        self.now += seconds
        return False

    def is_set(self):
        return False


def test_speed_scales_the_recorded_pace(tmp_path, capsys):
    journal = tmp_path / "slow.jsonl"
    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"default": {"duration_s": 0.4}}))
    main(["run", RTDL, "--events", str(journal), "--sim-script", str(script)])
    summary = capsys.readouterr().out.splitlines()[-1]
    assert summary.startswith("plan 1 succeeded after ")  # its time, as the machine took it
    times = [event["time"] for event in read_events(find_run(str(journal)))]
    for speed in (1, 4, 0.5):
        clock = RecordedClock()
        batches = list(paced(read_events(find_run(str(journal))), speed, clock, clock))
        assert sum(map(len, batches)) == len(times)
        assert sum(clock.waits) == pytest.approx((times[-1] - times[0]) / speed)
    clock = RecordedClock()
    assert sum(map(len, paced(read_events(find_run(str(journal))), 0, clock, clock))) == len(times)
    assert clock.waits == [], "speed 0 plays without waiting"
    main(["replay", str(journal), "--speed", "4"])
    assert capsys.readouterr().out.splitlines()[-1] == summary


def test_run_n_picks_a_run_and_the_last_is_the_default(tmp_path, capsys):
    journal, _ = recorded(tmp_path, capsys, "--stop-at", "4:on_enter")
    main(["run", RTDL, "--events", str(journal)])
    capsys.readouterr()
    main(["replay", str(journal), "--speed", "0", "--run", "1"])
    assert "plan 1 cancelled" in capsys.readouterr().out
    main(["replay", str(journal), "--speed", "0"])
    assert "plan 1 succeeded" in capsys.readouterr().out
    assert main(["replay", str(journal), "--run", "3"]) == 2
    assert "has 2 runs; there is no run 3" in capsys.readouterr().err


def test_a_torn_run_is_refused_and_the_whole_one_still_plays(tmp_path, capsys):
    journal, _ = recorded(tmp_path, capsys)
    whole = len(journal.read_text().splitlines())
    with open(journal, "a") as file:
        file.write('{"event": "node_st')
    assert main(["replay", str(journal)]) == 2
    assert f"line {whole + 1} of {journal} (run 1) is torn" in capsys.readouterr().err
    main(["run", RTDL, "--events", str(journal)])  # closes the torn line: it ends run 1
    capsys.readouterr()
    assert main(["replay", str(journal), "--run", "1"]) == 2
    assert "(run 1) is torn" in capsys.readouterr().err
    assert main(["replay", str(journal), "--run", "2", "--speed", "0"]) == 0


def test_events_of_two_runs_mixed_in_one_are_refused(tmp_path, capsys):
    journal, _ = recorded(tmp_path, capsys)
    lines = journal.read_text().splitlines(keepends=True)
    journal.write_text("".join(lines[:5] + lines[1:3] + lines[5:]))  # another writer's events in the middle
    assert main(["replay", str(journal)]) == 2
    assert "holds events of several runs (seq 1 after seq 4)" in capsys.readouterr().err


def write_big_journal(path, events):
    plan = {"root": "1", "ops": [{"op_id": "1", "kind": "sequence", "description": "many", "children": ["2"]},
                                 {"op_id": "2", "kind": "do", "description": "act", "children": [], "cap": "a.b",
                                  "args": {}}]}
    with open(path, "w") as file:
        file.write(json.dumps({"event": "journal_run", "journal_run_id": "x", "bt_exec_version": "0", "time": 1.0})
                   + "\n")
        file.write(json.dumps({"event": "plan_started", "plan_id": "1", "run_id": None, "description": "many",
                               "op_count": 2, "dialect": "rtdl", "time": 1.0, "plan": plan, "seq": 1}) + "\n")
        for seq in range(2, events):
            file.write(json.dumps({"event": "node_state", "plan_id": "1", "op_id": "2", "kind": "do",
                                   "description": "act " + "x" * 100, "state": "running" if seq % 2 else "succeeded",
                                   "time": 1.0 + seq * 1e-4, "seq": seq}) + "\n")
        file.write(json.dumps({"event": "plan_complete", "plan_id": "1", "run_id": None, "any_failed": False,
                               "cancelled": False, "outcome": "succeeded", "description": "many", "failed_op": None,
                               "time": 1.0 + events * 1e-4, "seq": events}) + "\n")


def test_a_journal_of_100k_events_plays_in_bounded_memory(tmp_path):
    """Finding the run keeps a line at most, and playing a batch at most (MAX_BATCH events). How fast it starts
    is not asserted here (a timed assertion fails on a loaded machine)."""
    path = tmp_path / "big.jsonl"
    write_big_journal(path, 100_000)
    assert path.stat().st_size > 15_000_000
    tracemalloc.start()
    try:
        run = find_run(str(path))
        playing = paced(read_events(run), 1.0)
        assert next(playing)[0]["event"] == "plan_started"
        playing.close()  # however many events were due in the first batch (more on a slow machine), let go
        count = sum(map(len, paced(read_events(run), 0)))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == 100_000
    assert peak < 2_000_000, f"peak {peak} bytes while replaying a {path.stat().st_size}-byte journal"


def test_the_web_serves_the_replayed_tree_and_streams_its_events(tmp_path, capsys):
    journal, _ = recorded(tmp_path, capsys)
    api = ReplayApi(find_run(str(journal)), speed=0)
    server = WebServer(api, port=0)
    server.start()
    try:
        assert not api.started
        with urllib.request.urlopen(server.url + "api/events", timeout=10) as stream:
            lines = []
            while not any('"plan_complete"' in line for line in lines):
                lines.append(stream.readline().decode())
        events = [json.loads(line[len("data: "):]) for line in lines if line.startswith("data: ")]
        assert [event["event"] for event in events][:2] == ["plan_started", "node_state"]
        assert "plan" not in events[0], "streams leave the plan's shape out, as live ones do"
        assert api.done.wait(5)
        with urllib.request.urlopen(server.url + "api/plans/1/tree", timeout=10) as answer:
            tree = json.loads(answer.read())
        assert tree["outcome"] == "succeeded" and tree["root"] == "1"
        assert {op["op_id"]: op["state"] for op in tree["ops"]} == {str(n): "succeeded" for n in range(1, 6)}
        request = urllib.request.Request(server.url + "api/plans/1/cancel", data=b"{}", method="POST",
                                         headers={"Content-Type": "application/json"})
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(request, timeout=10)
        assert refused.value.code == 409
        assert "a replay cannot be controlled" in json.loads(refused.value.read())["error"]["message"]
    finally:
        server.close()


def test_a_missing_journal_or_one_without_runs_is_a_clear_error(tmp_path, capsys):
    assert main(["replay", str(tmp_path / "none.jsonl")]) == 2
    assert "cannot read" in capsys.readouterr().err
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    with pytest.raises(ReplayError, match="no run header"):
        find_run(str(empty))


def post(url, body):
    request = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST",
                                     headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=30) as answer:
        return json.loads(answer.read())


def test_the_replay_clock_seeks_back_and_forward_and_a_live_server_has_none(tmp_path, capsys):
    journal, _ = recorded(tmp_path, capsys)
    events = journal.read_text().splitlines()[1:]
    api = ReplayApi(find_run(str(journal)), speed=0)
    server = WebServer(api, port=0)
    server.start()
    try:
        ended = post(server.url + "api/replay/seek", {"event_index": len(events)})
        assert ended["ended"]
        clock = json.loads(urllib.request.urlopen(server.url + "api/replay", timeout=10).read())
        assert clock["position"] == clock["count"] == len(events) and not clock["playing"]
        assert clock["revision"] > ended["revision"]  # a later state: a page keeps it over an earlier one
        assert clock["first_time"] == json.loads(events[0])["time"]
        assert clock["last_time"] == json.loads(events[-1])["time"]
        assert post(server.url + "api/replay/seek", {"event_index": 1})["position"] == 1
        tree = json.loads(urllib.request.urlopen(server.url + "api/plans/1/tree", timeout=10).read())
        assert {op["state"] for op in tree["ops"]} == {"pending"} and tree["running"]
        assert post(server.url + "api/replay/seek", {"event_index": 3})["position"] == 3
        tree = json.loads(urllib.request.urlopen(server.url + "api/plans/1/tree", timeout=10).read())
        assert [op["state"] for op in tree["ops"]][:2] == ["running", "running"]
        with pytest.raises(urllib.error.HTTPError) as refused:
            post(server.url + "api/replay/seek", {"event_index": -1})
        assert refused.value.code == 400
    finally:
        server.close()

    import bt_exec
    from bt_exec.control import ControlApi
    executor = bt_exec.Executor(backend=bt_exec.SimBackend())
    live = WebServer(ControlApi(executor), port=0)
    live.start()
    try:
        with pytest.raises(urllib.error.HTTPError) as missing:
            urllib.request.urlopen(live.url + "api/replay", timeout=10)
        assert missing.value.code == 404
    finally:
        live.close()
        executor.close()


def reads(target, op_ids: dict) -> list:
    """Every read operation's answer (or refusal) for every plan and op, as JSON would carry it; a plan's final
    record without what a journal does not record (its shape, whether it was control only, its input)."""
    answers = []

    def ask(name, *args, **options):
        try:
            answer = getattr(target, name)(*args, **options)
        except ControlError as exc:
            answer = [type(exc).__name__, exc.message]
        if name in ("get_plan_result", "wait_for_plan") and isinstance(answer, dict):
            answer = {key: value for key, value in answer.items() if key not in ("shape", "control_only", "input")}
        answers.append([name, args, options, answer])

    ask("get_all_plans")
    ask("get_plans_snapshot")
    ask("get_finished_plans")
    for plan_id in [*op_ids, "99"]:
        ask("get_plan_status", plan_id)
        ask("get_plan_status", plan_id, summary=True, with_args=False)
        ask("get_plan_tree", plan_id)
        ask("get_plan_result", plan_id, states=["failed"])
        ask("get_plan_feedback", plan_id, max_output_chars=100)
        ask("wait_for_plan", plan_id, 0)
        for op_id in [*op_ids.get(plan_id, ()), "99"]:
            ask("get_op", plan_id, op_id)
    return json.loads(json.dumps(answers))


def without_held(answers):
    """The live answers without the ops held at their entry while paused, which a journal does not record."""
    if isinstance(answers, dict):
        return {key: without_held(value) for key, value in answers.items() if key != "held"}
    if isinstance(answers, list):
        return [without_held(value) for value in answers]
    return answers


def submit_rtdl(ex) -> dict:
    """Two plans: a failing call, an output over the budget, args over what views show, a pause point that fires,
    a stop point armed and disarmed, and a stop point that cancels the second plan. Their op ids, by plan."""
    first = ex.submit(seq(do("a"), par(do("b"), seq(do("c", args={"text": "y" * 5000}), do("d", cap="sim.big"))),
                          do("e"), description="root"))["plan_id"]
    ex.stop_plan_at(first, "2", "on_complete", action="pause")
    ex.stop_plan_at(first, "8", "on_complete")
    ex.disarm_stop_point(first, "8", "on_complete")
    second = ex.submit(seq(do("x"), do("y"), description="second"))["plan_id"]
    ex.stop_plan_at(second, "11", "on_enter")
    return {first: [str(n) for n in range(1, 9)], second: ["9", "10", "11"]}


def submit_graph(ex) -> dict:
    """A step graph with a pause point before its last step. Its op ids."""
    plan_id = ex.submit(envelope(vacuum_to_work(), run_id="run-g"))["plan_id"]
    op_ids = [op["op_id"] for op in ex.get_plan_status(plan_id)["ops"]]
    ex.stop_plan_at(plan_id, op_ids[-1], "on_enter", action="pause")
    return {plan_id: op_ids}


def submit_btcpp(ex) -> dict:
    """A BehaviorTree.CPP tree whose ops run again (a repeat, a retry after a failure, a reactive check each tick),
    with a pause point on the retried call's first end. Its op ids."""
    plan_id = ex.submit('<root BTCPP_format="4"><BehaviorTree ID="Main"><Sequence>'
                        '<Repeat num_cycles="2"><Step/></Repeat>'
                        '<RetryUntilSuccessful num_attempts="3"><Flaky/></RetryUntilSuccessful>'
                        '<ReactiveSequence><Check/><Move/></ReactiveSequence>'
                        '</Sequence></BehaviorTree></root>')["plan_id"]
    ex.stop_plan_at(plan_id, "5", "on_complete", action="pause")
    return {plan_id: [str(n) for n in range(1, 9)]}


@pytest.mark.parametrize("dialect", ["rtdl", "qwen3", "btcpp"])
def test_a_replay_answers_every_read_as_the_executor_answered_it(dialect):
    """The replay rebuilds its plans out of a live run's parts and reads them with the executor's own read side:
    fed the events as the executor published them, it answers each read as the executor answered at that
    moment (refusals and their words included), but for the ops held at their entry while paused."""
    if dialect == "rtdl":
        script = {"default": {"outcome": "success", "duration_s": 1},
                  "ops": {"4": {"outcome": "failure", "duration_s": 2, "error": "the gripper slipped"}},
                  "caps": {"sim.big": {"outcome": "success", "duration_s": 1, "output": {"blob": "x" * 3000}}}}
        ex = bt_exec.Executor(bt_exec.SimBackend(script), max_result_bytes=2000)
    elif dialect == "btcpp":
        ex = bt_exec.Executor(bt_exec.SimBackend({"default": {"outcome": "success", "duration_s": 1}, "caps": {
            "Check": {"duration_s": 0}, "Flaky": {"outcome": ["failure", "success"], "duration_s": 1}}}))
    else:
        world = World.from_scene(SkillCatalog.named("grant"), Scene.from_dict(scene()))
        ex = bt_exec.Executor(bt_exec.SimBackend({"default": {"duration_s": 1}}, world=world), scene=scene())
    now = [0.0]
    ex.backend.clock = lambda: now[0]  # calls last a few ticks: each tick moves the sim's clock by half a second
    replayed = ReplayedPlans()
    ex.subscribe_batches(lambda events: replayed.apply(json.loads(json.dumps(events))))
    op_ids = {"rtdl": submit_rtdl, "qwen3": submit_graph, "btcpp": submit_btcpp}[dialect](ex)
    compared = []  # from the first tick on: the journal holds a plan from its start
    while ex.get_all_plans()["count"]:
        ex.tick_once()
        now[0] += 0.5
        live = reads(ex, op_ids)
        assert reads(replayed, op_ids) == without_held(live), f"tick {len(compared)}"
        compared.append(live)
        for plan in ex.get_all_plans()["plans"]:
            if plan["paused"]:  # a pause point fired: held for one tick
                ex.resume_plan(plan["plan_id"])
    ex.close()
    finished = [answer for name, _, _, answer in compared[-1] if name == "get_plan_result" and "ops" in answer]
    assert len(finished) == len(op_ids) and len(compared) > 3
    assert any(without_held(live) != live for live in compared), "a pause held an op at its entry"
    if dialect == "btcpp":  # the ops that ran again did so in the replay too
        runs = {args[1]: answer["op"].get("runs") for name, args, _, answer in compared[-1]
                if name == "get_op" and "op" in answer}
        assert (runs["3"], runs["5"]) == (2, 2) and runs["7"] > 1
