"""No door sends NaN or Infinity: a backend's non-finite output, and a journal's, leave every door as the markers
"NaN", "Infinity" and "-Infinity", and every answer parses with a strict JSON parser."""
import http.client
import json
import types

from rtdl_plans import do, seq

from bt_exec.events.replay import find_run
from bt_exec.ros import convert
from bt_exec.ros.iiwa import convert as iiwa_convert
from bt_exec.web.server import WebServer
from bt_exec.web.replay_api import ReplayApi

NON_FINITE = {"reading": float("nan"), "high": float("inf"), "low": float("-inf"), "list": [1.5, float("nan")]}
MARKED = {"reading": "NaN", "high": "Infinity", "low": "-Infinity", "list": [1.5, "NaN"]}


def strict_loads(text):
    def refuse(word):
        raise AssertionError(f"bare {word} in an answer")
    return json.loads(text, parse_constant=refuse)


def get(server, path):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", path)
    response = connection.getresponse()
    body = response.read().decode("ascii")
    connection.close()
    assert response.status == 200, body
    return strict_loads(body)


def read_stream_until(server, word):
    """The events of ``/api/events`` up to the first one holding ``word``, each parsed strictly."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/api/events")
    response = connection.getresponse()
    events = []
    try:
        while not any(word in json.dumps(event) for event in events):
            line = response.fp.readline().decode("ascii")
            if line.startswith("data: "):
                events.append(strict_loads(line[len("data: "):]))
    finally:
        connection.close()
    return events


def test_a_backends_non_finite_output_leaves_the_http_doors_as_markers(serve_web):
    executor, server = serve_web({"default": {"outcome": "success", "output": NON_FINITE}})
    plan_id = executor.submit(seq(do("measure")))["plan_id"]
    assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
    result = get(server, f"/api/plans/{plan_id}/result")
    assert result["ops"][1]["result"]["output"] == MARKED
    feedback = get(server, f"/api/plans/{plan_id}/feedback")
    assert feedback["ops"][0]["output"] == MARKED
    assert get(server, f"/api/plans/{plan_id}/ops/2")["op"]["result"]["output"] == MARKED
    recent = get(server, "/api/events/recent")["events"]
    assert [event["result"]["output"] for event in recent if event.get("result")] == [MARKED]


def test_the_event_stream_carries_markers(serve_web):
    executor, server = serve_web({"default": {"outcome": "success", "output": NON_FINITE, "duration_s": 0.2}})
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/api/events")
    response = connection.getresponse()
    assert response.status == 200
    executor.submit(seq(do("measure")))
    events = []
    try:
        while not any(event.get("event") == "plan_complete" for event in events):
            line = response.fp.readline().decode("ascii")
            if line.startswith("data: "):
                events.append(strict_loads(line[len("data: "):]))
    finally:
        connection.close()
    [succeeded] = [event for event in events if event.get("state") == "succeeded" and event.get("op_id") == "2"]
    assert succeeded["result"]["output"] == MARKED


def test_a_journals_non_finite_numbers_leave_the_replay_as_markers(tmp_path):
    path = tmp_path / "nan.jsonl"
    shape = {"root": "1", "ops": [{"op_id": "1", "kind": "do", "description": "measure", "children": [],
                                   "cap": "probe.read", "args": {"gain": float("inf")}}]}
    events = [{"event": "journal_run", "journal_run_id": "x", "bt_exec_version": "0", "time": 1.0},
              {"event": "plan_started", "plan_id": "1", "run_id": None, "description": "d", "op_count": 1,
               "dialect": "rtdl", "time": 1.0, "plan": shape, "seq": 1},
              {"event": "node_state", "plan_id": "1", "op_id": "1", "kind": "do", "description": "measure",
               "state": "succeeded", "time": 1.1, "result": {"success": True, "output": NON_FINITE}, "seq": 2},
              {"event": "plan_complete", "plan_id": "1", "run_id": None, "any_failed": False, "cancelled": False,
               "outcome": "succeeded", "description": "d", "failed_op": None, "time": 1.2, "seq": 3}]
    path.write_text("".join(json.dumps(event) + "\n" for event in events))  # Python's json writes bare NaN
    api = ReplayApi(find_run(str(path)), speed=0)
    server = WebServer(api, port=0)
    server.start()
    try:
        streamed = read_stream_until(server, "plan_complete")
        assert [event["result"]["output"] for event in streamed if event.get("result")] == [MARKED]
        assert api.done.wait(10)
        assert get(server, "/api/plans/1/result")["ops"][0]["result"]["output"] == MARKED
        assert get(server, "/api/plans/1/ops/1")["op"]["args"] == {"gain": "Infinity"}
        assert get(server, "/api/plans/1/tree")["ops"][0]["args"] == {"gain": "Infinity"}
        recent = get(server, "/api/events/recent")["events"]
        assert [event["result"]["output"] for event in recent if event.get("result")] == [MARKED]
    finally:
        server.close()


def test_the_ros_answers_carry_markers():
    message = types.SimpleNamespace(data="")
    assert strict_loads(convert.event_to_msg({"event": "node_state", "result": NON_FINITE}, message).data)[
        "result"] == MARKED
    response = types.SimpleNamespace(success=False, status=0, answer_json="")
    convert.control_answer_to_msg(200, {"output": NON_FINITE}, response)
    assert strict_loads(response.answer_json) == {"output": MARKED}
    assert strict_loads(convert.to_json(NON_FINITE)) == MARKED
    assert strict_loads(iiwa_convert.to_json({"state": NON_FINITE})) == {"state": MARKED}


def test_run_feedback_prints_markers(tmp_path, capsys):
    """``bt-exec run --feedback`` prints the planner's feedback as one JSON line for a script or an agent."""
    from bt_exec.cli.dispatch import main

    script = tmp_path / "sim.json"
    script.write_text(json.dumps({"default": {"outcome": "success", "output": NON_FINITE}}))  # Python writes NaN
    plan = tmp_path / "plan.json"
    plan.write_text(json.dumps(seq(do("measure"))))
    assert main(["run", str(plan), "--sim-script", str(script), "--feedback"]) == 0
    feedback = strict_loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert feedback["ops"][0]["output"] == MARKED
