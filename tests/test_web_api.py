"""The HTTP door (bt_exec.web): routes, the event stream, refusals and the security rules, over a real server."""
import http.client
import json
import re
import threading
import time

import pytest
from held_clock import HeldClock
from rtdl_plans import do, envelope, seq

from bt_exec.control import ROUTES, ControlApi, error_answer, without_plan_shape
from bt_exec.errors import Unreachable
from bt_exec.errors import BadArgument, Busy, ConfigError, NotFound
from bt_exec.web.client import HttpApi
from bt_exec.web.server import WebServer

SLOW = {"default": {"outcome": "success", "duration_s": 0.3}}
TOKEN = "s3cret-token"


def slow_plan(count=3):
    return envelope(seq(*(do(f"step {i}") for i in range(count))), description="slow")


def release(executor) -> None:
    executor.backend.clock.release()


@pytest.fixture
def app(serve_web):
    def start(script=SLOW, token=None, **server_options):
        executor, server = serve_web(script, token, **server_options)
        executor.backend.clock = HeldClock()  # before any plan: every call is timed by it
        return executor, server

    return start


def request(server, method, path, body=None, headers=None, raw=None):
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    sent = {"Content-Type": "application/json", **(headers or {})}
    data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
    connection.request(method, path, body=data, headers=sent)
    response = connection.getresponse()
    payload = response.read()
    connection.close()
    return response.status, (json.loads(payload) if response.getheader("Content-Type") == "application/json"
                             else payload)


def test_every_operation_answers_in_the_public_api_shape(app):
    executor, server = app()
    status, answer = request(server, "POST", "/api/plans", {"graph": slow_plan()})
    assert status == 200 and answer["accepted"] and answer["plan_id"] == "1"
    plan_id = answer["plan_id"]
    assert request(server, "GET", "/api/plans")[1] == executor.get_all_plans()
    status, plan_status = request(server, "GET", f"/api/plans/{plan_id}/status")
    assert status == 200 and [op["op_id"] for op in plan_status["ops"]] == ["1", "2", "3", "4"]
    status, tree = request(server, "GET", f"/api/plans/{plan_id}/tree")
    assert tree["root"] == "1" and tree["ops"][0]["children"] == ["2", "3", "4"] and tree["outcome"] is None
    status, armed = request(server, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "4", "when": "on_enter"})
    assert status == 200 and armed["armed"]
    assert request(server, "GET", f"/api/plans/{plan_id}/tree")[1]["ops"][3]["stop_point"] == "on_enter"
    release(executor)
    record = executor.run_until_complete(plan_id, timeout=10)
    assert record["outcome"] == "cancelled" and record["ops"][3]["started_at"] is None  # never ran
    assert request(server, "GET", f"/api/plans/{plan_id}/result")[1]["outcome"] == "cancelled"
    finished = request(server, "GET", "/api/finished?limit=5")[1]
    assert finished["plans"][0]["plan_id"] == plan_id and finished["plans"][0]["op_count"] == 4
    tree = request(server, "GET", f"/api/plans/{plan_id}/tree")[1]
    assert tree["outcome"] == "cancelled" and tree["ops"][3] == {**record["ops"][3], "stop_point": None}
    assert not tree["running"]


def test_validate_names_where_the_plan_is_wrong_and_runs_nothing(app):
    executor, server = app()
    bad = envelope(seq(do(), {"op": "do", "op_id": 0, "description": "no cap", "args": {}}))
    status, report = request(server, "POST", "/api/validate", {"graph": bad})
    assert status == 200 and not report["valid"]
    assert any(issue["path"].startswith("/rtdl/children/1") for issue in report["issues"])
    status, good = request(server, "POST", "/api/validate", {"graph": json.dumps(slow_plan()), "dialect": "rtdl"})
    assert good["valid"] and good["stats"]["ops"] == 4
    assert executor.get_all_plans()["count"] == 0 and executor.get_finished_plans()["count"] == 0


def test_a_refused_submission_is_an_answer_not_an_error(app):
    _, server = app()
    status, answer = request(server, "POST", "/api/plans", {"graph": {"rtdl": {"op": "bogus"}}})
    assert status == 200 and not answer["accepted"] and answer["issues"][0]["path"] == "/rtdl/op"


def test_run_id_makes_a_submission_idempotent(app):
    executor, server = app()
    first = request(server, "POST", "/api/plans", {"graph": slow_plan(), "run_id": "r-1"})[1]
    again = request(server, "POST", "/api/plans", {"graph": slow_plan(), "run_id": "r-1"})[1]
    assert first == again and executor.get_all_plans()["count"] == 1


@pytest.mark.parametrize("method, path, body, status, code", [
    ("GET", "/api/nowhere", None, 404, "not_found"),
    ("GET", "/api/plans/1/stop_at", None, 405, "method_not_allowed"),
    ("DELETE", "/api/plans", None, 405, "method_not_allowed"),
    ("POST", "/api/plans/7/cancel", {}, 404, "not_found"),
    ("GET", "/api/plans/7/status", None, 404, "not_found"),
    ("POST", "/api/plans/1/cancel", {"wait_ms": "soon"}, 400, "bad_arguments"),
    ("POST", "/api/plans/1/stop_at", {"op_id": "2", "when": "later"}, 400, "bad_arguments"),
    ("POST", "/api/plans", {}, 400, "bad_arguments"),
    ("POST", "/api/plans", {"graph": {}, "surprise": 1}, 400, "bad_arguments"),
    ("POST", "/api/cancel_all", [1, 2], 400, "bad_json"),
    ("GET", "/api/finished?limit=-1", None, 400, "bad_arguments"),
])
def test_bad_requests_get_a_clear_error_and_the_running_plan_is_untouched(app, method, path, body, status, code):
    executor, server = app()
    plan_id = executor.submit(slow_plan())["plan_id"]
    got_status, answer = request(server, method, path, body)
    assert (got_status, answer["error"]["code"]) == (status, code)
    assert answer["error"]["message"]
    release(executor)
    assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"


def test_a_body_that_is_not_json_or_too_large_is_refused(app):
    _, server = app(max_body_bytes=1000)
    assert request(server, "POST", "/api/validate", raw=b"{not json")[1]["error"]["code"] == "bad_json"
    status, answer = request(server, "POST", "/api/validate", raw=b" " * 5000)
    assert (status, answer["error"]["code"]) == (413, "too_large")


def test_posts_must_be_json_so_a_plain_form_cannot_post(app):
    executor, server = app()
    plan_id = executor.submit(slow_plan())["plan_id"]
    status, answer = request(server, "POST", "/api/cancel_all", raw=b"wait_ms=0",
                             headers={"Content-Type": "application/x-www-form-urlencoded"})
    assert (status, answer["error"]["code"]) == (415, "json_required")
    assert not executor.get_plan_status(plan_id)["cancelled"]


def test_a_post_from_another_origin_is_refused(app):
    executor, server = app()
    plan_id = executor.submit(slow_plan())["plan_id"]
    status, answer = request(server, "POST", "/api/cancel_all", {}, headers={"Origin": "http://evil.example"})
    assert (status, answer["error"]["code"]) == (403, "bad_origin")
    assert not executor.get_plan_status(plan_id)["cancelled"]
    same = request(server, "POST", "/api/cancel_all", {}, headers={"Origin": f"http://127.0.0.1:{server.port}"})
    assert same[0] == 200 and same[1]["count"] == 1


def test_on_loopback_a_request_for_another_host_is_refused(app):
    _, server = app()
    status, answer = request(server, "GET", "/api/plans", headers={"Host": "attacker.example:80"})
    assert (status, answer["error"]["code"]) == (403, "bad_host")
    assert request(server, "GET", "/api/plans", headers={"Host": f"localhost:{server.port}"})[0] == 200


def test_with_a_token_every_post_needs_it_and_reads_stay_open(app):
    executor, server = app(token=TOKEN)
    status, answer = request(server, "POST", "/api/plans", {"graph": slow_plan()})
    assert (status, answer["error"]["code"]) == (401, "token_required")
    wrong = request(server, "POST", "/api/plans", {"graph": slow_plan()}, headers={"Authorization": "Bearer nope"})
    assert wrong[0] == 401 and executor.get_all_plans()["count"] == 0
    status, answer = request(server, "POST", "/api/plans", {"graph": slow_plan()},
                             headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and answer["accepted"]
    assert request(server, "GET", "/api/plans")[1]["count"] == 1
    assert request(server, "GET", "/api/info")[1]["token_required"] is True


def test_binding_beyond_loopback_without_a_token_is_refused(make_executor):
    api = ControlApi(make_executor())
    with pytest.raises(ConfigError, match="needs a token"):
        WebServer(api, host="0.0.0.0", port=0)


def test_a_taken_port_is_a_config_error(app):
    _, server = app()
    with pytest.raises(ConfigError, match="cannot serve"):
        WebServer(server.api, port=server.port)


def test_the_page_and_its_files_come_from_the_server_with_a_strict_policy(app):
    _, server = app()
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    for path, mime in (("/", "text/html"), ("/app.js", "text/javascript"), ("/app.css", "text/css")):
        connection.request("GET", path)
        response = connection.getresponse()
        body = response.read()
        assert response.status == 200 and response.getheader("Content-Type").startswith(mime) and body
        assert "default-src 'self'" in response.getheader("Content-Security-Policy")
    page = request(server, "GET", "/")[1].decode()
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page)  # nothing loaded from elsewhere
    assert request(server, "GET", "/../setup.py")[0] == 404


def read_events(server, count, timeout=10.0):
    """The first ``count`` events of a fresh /api/events stream (a real SSE client, line by line)."""
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    connection.request("GET", "/api/events")
    response = connection.getresponse()
    assert response.status == 200 and response.getheader("Content-Type").startswith("text/event-stream")
    events = []
    deadline = time.monotonic() + timeout
    while len(events) < count and time.monotonic() < deadline:
        line = response.fp.readline().decode()
        if not line:  # the server ended the stream
            break
        if line.startswith("data: "):
            events.append(json.loads(line[len("data: "):]))
    connection.close()
    return events


def test_events_are_pushed_as_they_happen(app):
    executor, server = app()
    received = []
    reader = threading.Thread(target=lambda: received.extend(read_events(server, 4)))
    reader.start()
    deadline = time.monotonic() + 5
    # The stream is open before the plan starts.
    while not server.api.events.stream_count and time.monotonic() < deadline:
        time.sleep(0.01)
    release(executor)
    executor.submit(envelope(do()))
    reader.join(15)
    assert [e["event"] for e in received] == ["plan_started", "node_state", "node_state", "plan_complete"]
    assert received[1]["op_id"] == "1" and received[1]["state"] == "running"
    recent = request(server, "GET", "/api/events/recent")[1]["events"]
    assert [e["seq"] for e in recent] == [e["seq"] for e in received]


def test_a_listener_that_falls_behind_is_told_how_many_events_it_lost(make_executor):
    executor = make_executor()
    api = ControlApi(executor, stream_capacity=2)
    stream = api.listen()
    published = []
    executor.subscribe(published.append)
    executor.submit(envelope(seq(do(), do(), do())))
    executor.run_until_complete("1")
    # A tick delivers several events at once: the stream keeps what fits, in order, and counts the rest.
    assert [stream.get(0), stream.get(0)] == [without_plan_shape(published[0]), published[1]]
    assert [event["event"] for event in published[:2]] == ["plan_started", "node_state"]
    assert "plan" in published[0] and "plan" not in without_plan_shape(published[0]), "streams leave the shape out"
    lost = stream.get(0)
    assert lost == {"event": "dropped", "count": len(published) - 2}
    assert stream.get(0) is None
    stream.close()
    assert api.events.stream_count == 0


def test_event_streams_are_limited_in_number(make_executor):
    api = ControlApi(make_executor(), max_streams=2)
    first, second = api.listen(), api.listen()
    with pytest.raises(Busy) as refused:
        api.listen()
    assert error_answer(refused.value)[0] == 503 and refused.value.code == "too_many_streams"
    first.close()
    api.listen().close()
    second.close()


def test_closing_the_server_ends_open_event_streams(app):
    _, server = app()
    received = []
    reader = threading.Thread(target=lambda: received.extend(read_events(server, 1, timeout=30)))
    reader.start()
    deadline = time.monotonic() + 10
    while not server.api.events.stream_count and time.monotonic() < deadline:  # the stream is open
        time.sleep(0.01)
    server.close()
    reader.join(10)  # a generous deadline: the stream ends at once, and a stream left open fails the test
    assert server.api.events.stream_count == 0 and not reader.is_alive()


def test_the_http_client_drives_a_remote_app_like_a_local_one(app):
    executor, server = app(token=TOKEN)
    remote = HttpApi(server.url, token=TOKEN)
    answer = remote.call("submit_plan", {"graph": slow_plan()})
    assert answer["accepted"]
    assert remote.call("get_plan_status", {"plan_id": answer["plan_id"]})["ops"][0]["op_id"] == "1"
    assert remote.call("cancel_plan", {"plan_id": answer["plan_id"], "wait_ms": 5000})["finished"]
    with pytest.raises(NotFound) as refused:  # the app's 404, the type it was answered for
        remote.call("get_plan_status", {"plan_id": "42"})
    assert refused.value.code == "not_found" and "was ever submitted" in refused.value.message
    with pytest.raises(BadArgument) as unauthorised:  # a refusal of HTTP's own: the caller's to mend
        HttpApi(server.url).call("cancel_all", {})
    assert unauthorised.value.code == "token_required"


def test_the_http_client_says_when_nothing_answers():
    with pytest.raises(Unreachable) as gone:
        HttpApi("http://127.0.0.1:9/", timeout_s=2).call("get_all_plans")
    assert gone.value.code == "unreachable"
    with pytest.raises(ConfigError, match="not an http"):
        HttpApi("ftp://example")


def executor_state(executor, events, finished_id, running_id):
    """What the executor tells about its plans (a tree answers for a plan in flight or finished, unlike a status),
    and how many events it emitted."""
    return {"plans": executor.get_all_plans(),
            "trees": [executor.get_plan_tree(finished_id), executor.get_plan_tree(running_id)],
            "finished": executor.get_finished_plans(), "result": executor.get_plan_result(finished_id),
            "events": len(events.events)}


def test_no_get_route_changes_state(make_executor, events):
    # No tick thread: between two requests nothing but the request itself can change the executor.
    executor = make_executor(SLOW)
    finished_id = executor.submit(envelope(do()))["plan_id"]
    executor.run_until_complete(finished_id, timeout=10)
    running_id = executor.submit(slow_plan())["plan_id"]
    executor.tick_once()
    executor.stop_plan_at(running_id, "4", "on_enter")
    server = WebServer(ControlApi(executor), port=0)
    server.start()
    try:
        gets = [route for route in ROUTES if route.method == "GET"]
        assert gets
        for route in gets:
            answered = []
            for plan_id in ((finished_id, running_id) if "plan_id" in route.path_params else (None,)):
                before = executor_state(executor, events, finished_id, running_id)
                path = route.path.replace("{plan_id}", str(plan_id)).replace("{op_id}", "2")  # an op of both plans
                if route.name == "wait_for_plan":  # nothing ticks here: waiting for the running plan would time out
                    path += "?timeout_s=0"
                status, _ = request(server, "GET", path)
                answered.append(status)
                assert executor_state(executor, events, finished_id, running_id) == before, (route.name, plan_id)
            assert 200 in answered, route.name  # the route reached the executor
    finally:
        server.close()


def test_the_cell_view_of_a_backend_that_simulates_no_cell_says_so_without_a_refusal(app):
    _, server = app()
    status, answer = request(server, "GET", "/api/cell")
    assert status == 200 and answer["cell"] is False, answer
    assert "SimBackend, not a simulated cell" in answer["reason"]


def test_the_http_client_ignores_proxies_from_the_environment(app, monkeypatch):
    _, server = app()
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("no_proxy", "")
    assert HttpApi(server.url).call("get_all_plans")["count"] == 0


def test_integer_ids_are_taken_on_every_door_and_bad_ids_named(app):
    executor, server = app()
    plan_id = executor.submit(slow_plan())["plan_id"]
    status, armed = request(server, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": 4, "when": "on_enter"})
    assert status == 200 and armed["armed"] and executor.get_plan_tree(plan_id)["ops"][3]["stop_point"] == "on_enter"
    for op_id, said in ((True, "got true"), (-1, "minimum of 0"), (1.5, "not the float 1.5"), (4.0, "float")):
        status, answer = request(server, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": op_id})
        assert status == 400 and "op_id" in answer["error"]["message"] and said in answer["error"]["message"]
    assert HttpApi(server.url).call("cancel_plan", {"plan_id": int(plan_id), "wait_ms": 5000})["finished"]


def test_status_and_result_are_narrowed_by_query_and_cut_to_max_chars(app):
    executor, server = app({"default": {"outcome": "success", "duration_s": 5.0}})
    plan_id = executor.submit(slow_plan(200))["plan_id"]
    executor.tick_once()
    status, summary = request(server, "GET", f"/api/plans/{plan_id}/status?summary=true")
    assert status == 200 and summary["counts"] == {"running": 2, "pending": 199}
    assert [op["op_id"] for op in summary["ops"]] == ["1", "2"]
    status, chosen = request(server, "GET", f"/api/plans/{plan_id}/status?op_ids=3&op_ids=5&op_ids=999&states=pending")
    assert [op["op_id"] for op in chosen["ops"]] == ["3", "5"] and chosen["unknown_op_ids"] == ["999"]
    status, capped = request(server, "GET", f"/api/plans/{plan_id}/status?max_chars=3000")
    assert status == 200 and len(json.dumps(capped, separators=(",", ":"))) <= 3000
    assert capped["truncated"]["ops_total"] == 201 and capped["truncated"]["first_left_out"] == \
        str(capped["truncated"]["ops_shown"] + 1)
    remote = HttpApi(server.url)
    assert remote.call("get_plan_status", {"plan_id": plan_id, "summary": True, "op_ids": [1, 3]})["ops"] == \
        [summary["ops"][0]]
    for query, named in (("summary=maybe", "summary"), ("max_chars=10", "max_chars"), ("states=done", "states"),
                         ("op_ids=" + "&op_ids=".join(["1"] * 1001), "op_ids"), ("colour=red", "colour")):
        status, answer = request(server, "GET", f"/api/plans/{plan_id}/status?{query}")
        assert status == 400 and named in answer["error"]["message"], query
    executor.cancel_plan(plan_id, wait_ms=5000)
    status, result = request(server, "GET", f"/api/plans/{plan_id}/result?states=canceled")
    assert status == 200 and {op["state"] for op in result["ops"]} == {"canceled"} and "truncated" not in result
    status, result = request(server, "GET", f"/api/plans/{plan_id}/result?max_chars=4000")
    assert result["outcome"] == "cancelled" and len(json.dumps(result, separators=(",", ":"))) <= 4000
    assert 0 < result["truncated"]["ops_shown"] < result["truncated"]["ops_total"] == 201


def test_wait_for_plan_answers_the_record_or_not_finished_at_the_timeout(app):
    executor, server = app()
    plan_id = executor.submit(slow_plan(2))["plan_id"]
    status, not_yet = request(server, "GET", f"/api/plans/{plan_id}/wait?timeout_s=0.1")
    assert status == 200 and not_yet["finished"] is False and not_yet["plan_id"] == plan_id
    assert "still running after 0.1 s" in not_yet["message"]
    release(executor)
    record = HttpApi(server.url).call("wait_for_plan", {"plan_id": int(plan_id), "timeout_s": 10, "summary": True})
    assert record["outcome"] == "succeeded" and record["counts"] == {"succeeded": 3} and record["ops"] == []
    status, again = request(server, "GET", f"/api/plans/{plan_id}/wait?timeout_s=0")
    assert status == 200 and again["outcome"] == "succeeded" and len(again["ops"]) == 3
    status, never = request(server, "GET", "/api/plans/77/wait")
    assert status == 404 and "get_all_plans" in never["error"]["message"]
    status, refused = request(server, "GET", f"/api/plans/{plan_id}/wait?timeout_s=-1")
    assert status == 400 and "timeout_s" in refused["error"]["message"]


def test_wait_for_plan_holds_at_most_max_waits_threads(make_executor):
    executor = make_executor({"default": {"outcome": "success", "duration_s": 30.0}})
    executor.start()
    api = ControlApi(executor, max_waits=2)
    plan_id = executor.submit(slow_plan(1))["plan_id"]
    answers = []
    waiting = [threading.Thread(target=lambda: answers.append(api.call("wait_for_plan", {"plan_id": plan_id,
                                                                                         "timeout_s": 20})))
               for _ in range(2)]
    for thread in waiting:
        thread.start()
    busy = None
    for _ in range(100):  # until both waiters hold their slot
        try:
            api.call("wait_for_plan", {"plan_id": plan_id, "timeout_s": 0})
        except Busy as refused:
            busy = refused
            break
        time.sleep(0.05)
    executor.cancel_plan(plan_id, wait_ms=5000)  # the waiters get the record at once
    for thread in waiting:
        thread.join(10)
    assert busy is not None and error_answer(busy)[0] == 503 and busy.code == "too_many_waits"
    assert [answer["outcome"] for answer in answers] == ["cancelled", "cancelled"]
    assert api.call("wait_for_plan", {"plan_id": plan_id, "timeout_s": 0})["outcome"] == "cancelled"  # slots back


def test_pause_resume_step_and_pause_points_over_http(app):
    executor, server = app()
    events = []
    executor.subscribe(events.append)
    plan_id = request(server, "POST", "/api/plans", {"graph": slow_plan()})[1]["plan_id"]
    status, armed = request(server, "POST", f"/api/plans/{plan_id}/stop_at",
                            {"op_id": "3", "when": "on_enter", "action": "pause"})
    assert status == 200 and armed["armed"] and armed["message"].startswith("Pause point set")
    status, refused = request(server, "POST", f"/api/plans/{plan_id}/stop_at", {"op_id": "3", "action": "halt"})
    assert status == 400 and refused["error"]["code"] == "bad_arguments" and "action" in refused["error"]["message"]
    release(executor)
    deadline = time.monotonic() + 10
    while not request(server, "GET", f"/api/plans/{plan_id}/status")[1]["paused"]:
        assert time.monotonic() < deadline
        time.sleep(0.02)
    ops = request(server, "GET", f"/api/plans/{plan_id}/status")[1]["ops"]
    assert ops[2]["held"] is True and ops[2]["state"] == "pending" and ops[1]["state"] == "succeeded"
    assert request(server, "GET", "/api/plans")[1]["plans"][0]["paused"] is True
    status, stepped = request(server, "POST", f"/api/plans/{plan_id}/step", {})
    assert status == 200 and stepped["success"]
    while request(server, "GET", f"/api/plans/{plan_id}/status")[1]["ops"][2]["state"] == "pending":
        assert time.monotonic() < deadline
        time.sleep(0.02)
    status, paused = request(server, "POST", f"/api/plans/{plan_id}/pause", {})
    assert status == 200 and paused == {"success": True, "paused": False,
                                         "message": "plan '1' is already paused; resume_plan or step_plan goes on."}
    status, resumed = request(server, "POST", f"/api/plans/{plan_id}/resume", {})
    assert status == 200 and resumed["resumed"]
    assert executor.run_until_complete(plan_id, timeout=10)["outcome"] == "succeeded"
    status, refused = request(server, "POST", "/api/plans/77/pause", {})
    assert status == 404 and refused["error"]["message"].startswith("pause_plan: no plan '77'")
    sources = [(e["event"], e["source"]) for e in events if e["event"] in ("pause_point", "paused", "resumed")]
    assert sources == [("pause_point", "http"), ("paused", "http"), ("resumed", "http"), ("paused", "http"),
                       ("resumed", "http")]
