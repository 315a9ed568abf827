"""A replay is a door: a journal anyone wrote is refused by its line (exit 2), never an internal error; speeds are
ranged; seeks are coalesced, the latest winning; waits are capped as the live app caps them."""
import copy
import http.client
import json
import pathlib
import re
import threading

import pytest

from bt_exec.cli import dispatch
from bt_exec.cli.dispatch import main
from bt_exec.compilers.limits import DEFAULT_LIMITS
from bt_exec.errors import ControlError
from bt_exec.events import replay_checks
from bt_exec.events.finite_json import dumps
from bt_exec.events.replay import MAX_BATCH, ReplayError, find_run, paced, read_events
from bt_exec.replayed_plans import ReplayedPlans
from bt_exec.web.server import WebServer
from bt_exec.web.replay_api import ReplayApi

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / "examples"
RTDL = str(EXAMPLES / "rtdl" / "snapshot_battery.json")
QWEN3 = str(EXAMPLES / "qwen3" / "cap_to_hatch.json")
SCENE = str(EXAMPLES / "qwen3" / "scene.json")


@pytest.fixture(scope="module")
def journals(tmp_path_factory):
    """Real journals: an RTDL run a stop point cancelled, a paused and resumed one, and a step graph's run."""
    folder = tmp_path_factory.mktemp("journals")
    rtdl, qwen3 = folder / "rtdl.jsonl", folder / "qwen3.jsonl"
    assert main(["run", RTDL, "--events", str(rtdl), "--stop-at", "4:on_enter"]) == 1
    assert main(["run", QWEN3, "--scene", SCENE, "--events", str(qwen3)]) == 0
    return {name: [json.loads(line) for line in path.read_text().splitlines()]
            for name, path in (("rtdl", rtdl), ("qwen3", qwen3))}


def write(path, events):
    path.write_text("".join(json.dumps(event) + "\n" for event in events))
    return path


def replayed(path, capsys, *options):
    code = main(["replay", str(path), "--speed", "0", *options])
    captured = capsys.readouterr()
    return code, captured.err


def assert_refused_at(path, capsys, line, *words, options=()):
    code, err = replayed(path, capsys, *options)
    assert code == 2, err
    assert f"line {line} of {path}" in err, err
    for word in words:
        assert word in err, err
    assert "internal error" not in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1, err


def changed(events, index, change):
    events = copy.deepcopy(events)
    change(events[index])
    return events


def test_the_reported_hostile_journals_are_refused_by_their_line(journals, tmp_path, capsys):
    rtdl = journals["rtdl"]
    assert rtdl[1]["event"] == "plan_started"
    children_number = changed(rtdl, 1, lambda event: event["plan"]["ops"][0].update(children=5))
    assert_refused_at(write(tmp_path / "a.jsonl", children_number), capsys, 2, "'children'", "5")
    no_op_count = changed(rtdl, 1, lambda event: event.pop("op_count"))
    assert_refused_at(write(tmp_path / "b.jsonl", no_op_count), capsys, 2, "no 'op_count'")
    jump = changed(rtdl, 4, lambda event: event.update(time=event["time"] + 1e12))
    assert_refused_at(write(tmp_path / "c.jsonl", jump), capsys, 5, "'time'")
    assert main(["replay", str(tmp_path / "a.jsonl"), "--speed", "1e-300"]) == 2
    assert "speed 1e-300: expected 0 (as fast as it can) or 0.01 to 1000" in capsys.readouterr().err


HOSTILE_VALUES = [None, True, -1, 1e12, float("nan"), "", "x" * 70_000, [1], {"a": 1}]
MISSING = object()


def field_paths(event):
    """Paths to every field of an event a mutation may change: its own fields, and its plan shape's ops'."""
    for key in event:
        if key != "event":
            yield (key,)
    plan = event.get("plan")
    if isinstance(plan, dict):
        for key in plan:
            yield ("plan", key)
        for key in plan["ops"][1]:
            yield ("plan", "ops", 1, key)
        yield ("plan", "ops", 0, "children", 0)


def mutated(event, path, value):
    event = copy.deepcopy(event)
    parent = event
    for part in path[:-1]:
        parent = parent[part]
    if isinstance(parent, list) and path[-1] >= len(parent):
        return None
    if value is MISSING:
        if isinstance(parent, list):
            return None
        parent.pop(path[-1], None)
    else:
        parent[path[-1]] = value
    return event


@pytest.mark.parametrize("name", ["rtdl", "qwen3"])
def test_every_field_mutated_is_replayed_or_refused_by_its_line_never_a_crash(journals, tmp_path, capsys, name,
                                                                             monkeypatch):
    """Each field of each kind of event of a real journal, set to each hostile value (or removed): the replay
    either plays (and its views answer, in strict JSON) or refuses naming the line; never an internal error."""
    parser = dispatch.build_parser()
    monkeypatch.setattr(dispatch, "build_parser", lambda: parser)  # built once: building it is most of a run
    events = journals[name]
    path = tmp_path / "mutated.jsonl"
    refused = played = 0
    firsts = {}  # the first event of each kind (and state): the others hold the same fields
    for index, event in enumerate(events[1:], 1):
        state = event.get("state")
        firsts.setdefault((event["event"], state if isinstance(state, str) else None), index)
    for index in sorted(firsts.values()):
        for field in field_paths(events[index]):
            for value in HOSTILE_VALUES + [MISSING]:
                event = mutated(events[index], field, value)
                if event is None:
                    continue
                write(path, events[:index] + [event] + events[index + 1:])
                code, err = replayed(path, capsys)
                assert code in (0, 2), (field, value, err)
                assert "internal error" not in err and "Traceback" not in err, (field, value, err)
                if code == 2:
                    refused += 1
                    where = re.match(rf"bt-exec: line (\d+) of {re.escape(str(path))} \(run 1\)", err)
                    assert where and int(where[1]) >= index + 1, (field, value, err)  # there, or where it tells
                else:
                    played += 1
                    answer_every_view(path)
    assert refused and played


def answer_every_view(path):
    """Every read a replay's door answers, for every plan it rebuilt, encoded as the doors encode."""
    plans = ReplayedPlans()
    for batch in paced(read_events(find_run(str(path))), 0):
        plans.apply(batch)
    answers = [plans.get_all_plans(), plans.get_plans_snapshot(), plans.get_finished_plans(), *plans.unfinished()]
    for record in plans.get_finished_plans()["plans"] + plans.get_all_plans()["plans"]:
        plan_id = record["plan_id"]
        answers += [plans.get_plan_tree(plan_id), plans.get_plan_feedback(plan_id, max_output_chars=100)]
        answers.append(plans.get_plan_result(plan_id) if record in plans.get_finished_plans()["plans"]
                       else plans.get_plan_status(plan_id, summary=True))
        for op in plans.get_plan_tree(plan_id)["ops"]:
            answers.append(plans.get_op(plan_id, op["op_id"]))
    json.loads(dumps(answers), parse_constant=pytest.fail)


def shape(count):
    ops = [{"op_id": "1", "kind": "sequence", "description": "many", "children": [str(n) for n in range(2, count + 1)]}]
    ops += [{"op_id": str(n), "kind": "do", "description": "x", "children": [], "cap": "a.b", "args": {}}
            for n in range(2, count + 1)]
    return {"root": "1", "ops": ops}


def header():
    return {"event": "journal_run", "journal_run_id": "x", "bt_exec_version": "0", "time": 1.0}


def started(plan_id, plan, seq):
    return {"event": "plan_started", "plan_id": plan_id, "run_id": None, "description": "d",
            "op_count": len(plan["ops"]), "dialect": "rtdl", "time": 1.0, "plan": plan, "seq": seq}


def test_a_plan_over_max_ops_is_refused_as_it_is_read(tmp_path, capsys):
    too_many = started("1", shape(DEFAULT_LIMITS.max_ops + 1), 1)
    too_many["op_count"] = 1
    path = write(tmp_path / "ops.jsonl", [header(), too_many])
    assert_refused_at(path, capsys, 2, f"more than {DEFAULT_LIMITS.max_ops} ops", "max_ops")
    path = write(tmp_path / "fits.jsonl", [header(), started("1", shape(DEFAULT_LIMITS.max_ops), 1)])
    assert replayed(path, capsys)[0] == 0


def test_more_plans_in_flight_than_an_executor_admits_are_refused(tmp_path, capsys):
    events = [header()] + [started(str(n), shape(2), n) for n in range(1, replay_checks.MAX_PLANS_IN_FLIGHT + 2)]
    assert_refused_at(write(tmp_path / "plans.jsonl", events), capsys, replay_checks.MAX_PLANS_IN_FLIGHT + 2,
                      "plans in flight")


def test_the_bytes_plans_in_flight_hold_are_bounded(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(replay_checks, "MAX_KEPT_BYTES", 4096)
    events = [header(), started("1", shape(3), 1)]
    events += [{"event": "node_state", "plan_id": "1", "op_id": str(2 + n % 2), "kind": "do", "description": "x",
                "state": "running", "detail": "d" * 1000, "time": 1.0, "seq": n} for n in range(2, 10)]
    path = write(tmp_path / "kept.jsonl", events)
    assert replayed(path, capsys)[0] == 0, "an op keeps its latest state only: its lines do not add up"
    events.append({"event": "plan_started", **started("2", shape(3), 10), "description": "y" * 4000})
    assert_refused_at(write(path, events), capsys, len(events), "MiB of journal text")


def test_a_line_longer_than_a_replay_reads_is_refused_and_the_next_lines_keep_their_numbers(tmp_path, capsys,
                                                                                              monkeypatch):
    monkeypatch.setattr("bt_exec.events.replay.MAX_EVENT_LINE_BYTES", 1000)
    long_line = started("1", shape(2), 1)
    long_line["description"] = "x" * 5000
    path = write(tmp_path / "long.jsonl", [header(), long_line, header(), started("1", shape(2), 1)])
    assert_refused_at(path, capsys, 2, "longer than 1000 bytes", options=("--run", "1"))
    assert replayed(path, capsys)[0] == 0, "the next run is whole"
    run = find_run(str(path), 2)
    assert run.first_line == 4 and run.events == 1


def test_ids_that_must_exist(journals, tmp_path, capsys):
    rtdl = journals["rtdl"]
    node_state = next(index for index, event in enumerate(rtdl) if event["event"] == "node_state")
    unknown_op = changed(rtdl, node_state, lambda event: event.update(op_id="99"))
    assert_refused_at(write(tmp_path / "op.jsonl", unknown_op), capsys, node_state + 1, "has no op '99'")
    unknown_child = changed(rtdl, 1, lambda event: event["plan"]["ops"][0]["children"].append("99"))
    assert_refused_at(write(tmp_path / "child.jsonl", unknown_child), capsys, 2, "child '99'")
    twice = changed(rtdl, 1, lambda event: event["plan"]["ops"][1].update(op_id="1"))
    assert_refused_at(write(tmp_path / "twice.jsonl", twice), capsys, 2, "appears twice")
    bad_root = changed(rtdl, 1, lambda event: event["plan"].update(root="2"))
    assert_refused_at(write(tmp_path / "root.jsonl", bad_root), capsys, 2, "root '2'")
    qwen3 = journals["qwen3"]
    step = next(index for index, event in enumerate(qwen3) if event["event"] == "step_transition")
    unknown_step = changed(qwen3, step, lambda event: event.update(step="s99"))
    assert_refused_at(write(tmp_path / "step.jsonl", unknown_step), capsys, step + 1, "no step 's99'")


@pytest.mark.parametrize("kind", sorted(replay_checks.DOOR_EVENTS))
def test_events_only_a_door_sends_are_refused_in_a_journal(journals, tmp_path, capsys, kind):
    """Streamed on, a journal's replay_seek or server_closing would steer the console."""
    rtdl = journals["rtdl"]
    spoofed = rtdl[:3] + [{"event": kind, "message": "spoofed", "position": 0, "seq": rtdl[3]["seq"]}] + rtdl[4:]
    assert_refused_at(write(tmp_path / "door.jsonl", spoofed), capsys, 4, "only a door sends")


def test_a_python_caller_gets_the_speed_refused_too(journals, tmp_path):
    path = write(tmp_path / "ok.jsonl", journals["rtdl"])
    for speed in (1e-300, -1, float("nan"), float("inf"), 1001):
        with pytest.raises(ReplayError, match="expected 0"):
            next(paced(read_events(find_run(str(path))), speed))
        with pytest.raises(ReplayError, match="expected 0"):
            ReplayApi(find_run(str(path)), speed=speed)


# --- over HTTP ----------------------------------------------------------------------------------------


def request(server, method, path, body=None, raw=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    connection.request(method, path, body=data, headers={"Content-Type": "application/json"})
    response = connection.getresponse()
    answer = json.loads(response.read())
    connection.close()
    return response.status, answer


@pytest.fixture
def serve_replay():
    made = []

    def serve(path, **options):
        api = ReplayApi(find_run(str(path)), **options)
        server = WebServer(api, port=0)
        server.start()
        made.append(server)
        return api, server

    yield serve
    for server in made:
        server.close()


def test_a_speed_out_of_range_is_refused_over_http_and_the_replay_serves_on(journals, tmp_path, serve_replay):
    api, server = serve_replay(write(tmp_path / "ok.jsonl", journals["rtdl"]), speed=0)
    for body in (b'{"speed": 1e-300}', b'{"speed": NaN}', b'{"speed": Infinity}', b'{"speed": -1}',
                 b'{"speed": 1001}'):
        status, answer = request(server, "POST", "/api/replay/play", raw=body)
        assert status == 400 and answer["error"]["code"] == "bad_arguments", (body, answer)
    assert request(server, "POST", "/api/replay/play", {"speed": 0.01})[0] == 200
    status, clock = request(server, "GET", "/api/replay")
    assert status == 200 and clock["speed"] == 0.01 and clock["error"] is None
    assert request(server, "POST", "/api/replay/play", {"speed": 0})[0] == 200
    assert api.done.wait(30) and api.error is None


def big_journal(path, events):
    with open(path, "w") as file:
        file.write(json.dumps(header()) + "\n")
        file.write(json.dumps(started("1", shape(2), 1)) + "\n")
        for seq in range(2, events + 1):
            file.write(json.dumps({"event": "node_state", "plan_id": "1", "op_id": "2", "kind": "do",
                                   "description": "x", "state": "running", "time": 1.0 + seq, "seq": seq}) + "\n")
    return path


def test_a_flood_of_seeks_is_coalesced_the_latest_winning(tmp_path, serve_replay):
    api, server = serve_replay(big_journal(tmp_path / "big.jsonl", 5 * MAX_BATCH), speed=0.01)
    api.start()  # recorded 1 s apart, played 100 s apart: paused before the second, it stays where the seeks leave it
    assert request(server, "POST", "/api/replay/pause", {})[1]["playing"] is False
    on_its_way, go_on = threading.Event(), threading.Event()
    apply = api.plans.apply

    def held_apply(batch):  # the first seek holds after its first batch, until the others are in
        completed = apply(batch)
        on_its_way.set()
        assert go_on.wait(60)
        return completed

    api.plans.apply = held_apply
    answers = {}
    first = threading.Thread(target=lambda: answers.update(first=request(server, "POST", "/api/replay/seek",
                                                                         {"event_index": 5 * MAX_BATCH})))
    first.start()
    assert on_its_way.wait(60)
    second = threading.Thread(target=lambda: answers.update(second=request(server, "POST", "/api/replay/seek",
                                                                           {"event_index": 4 * MAX_BATCH})))
    second.start()
    while not api._seeks:  # the second is queued behind the first, which holds
        second.join(0.01)
    third_thread = threading.Thread(target=lambda: answers.update(third=request(server, "POST", "/api/replay/seek",
                                                                                {"event_index": 2 * MAX_BATCH})))
    third_thread.start()
    second.join(60)  # the queued seek is answered at once, while the first still holds
    assert not second.is_alive()
    status, answer = answers["second"]
    assert status == 200 and answer["superseded"] and answer["target"] == 4 * MAX_BATCH
    go_on.set()
    first.join(60)
    third_thread.join(60)
    status, answer = answers["first"]
    assert status == 200 and answer["superseded"] and answer["position"] < 5 * MAX_BATCH
    status, answer = answers["third"]
    assert status == 200 and not answer["superseded"] and answer["position"] == 2 * MAX_BATCH
    assert request(server, "GET", "/api/replay")[1]["position"] == 2 * MAX_BATCH


def test_waits_are_capped_as_the_live_app_caps_them(tmp_path, serve_replay):
    slow = [header(), started("1", shape(2), 1),
            {"event": "plan_complete", "plan_id": "1", "run_id": None, "any_failed": False, "cancelled": False,
             "outcome": "succeeded", "description": "d", "failed_op": None, "time": 1000.0, "seq": 2}]
    api, server = serve_replay(write(tmp_path / "slow.jsonl", slow), speed=1, max_waits=2)
    api.start()  # plan 1 starts at once; it completes 999 recorded seconds later
    while request(server, "GET", "/api/plans")[1]["count"] == 0:
        api.done.wait(0.01)
    answers = []

    def wait():  # taken once a slot is free: the probes below hold one for an instant
        while (answer := request(server, "GET", "/api/plans/1/wait?timeout_s=60"))[0] == 503:
            continue
        answers.append(answer)

    waits = [threading.Thread(target=wait) for _ in range(2)]
    for wait in waits:
        wait.start()
    while True:  # once both waits hold their slots, a third is refused at once
        status, refused = request(server, "GET", "/api/plans/1/wait?timeout_s=0")
        if status == 503:
            break
        assert status == 200 and refused["finished"] is False
    assert refused["error"]["code"] == "too_many_waits"
    status, plans = request(server, "GET", "/api/plans")
    assert status == 200 and plans["count"] == 1, "other requests are answered while the waits hold"
    with pytest.raises(ControlError, match="timeout_s must be a non-negative number"):
        api.plans.wait_for_plan("1", float("nan"))  # it never waits for ever
    request(server, "POST", "/api/replay/seek", {"event_index": 2})
    for wait in waits:
        wait.join(60)
    assert [(status, answer["outcome"]) for status, answer in answers] == [(200, "succeeded")] * 2
    status, refused = request(server, "GET", "/api/plans/1/wait?timeout_s=nan")
    assert status == 400 and "timeout_s must be a non-negative number" in refused["error"]["message"]
