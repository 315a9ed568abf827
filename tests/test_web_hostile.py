"""Hostile clients against the HTTP door, over real sockets to a real server: malformed framing, huge or stalled
bodies, deep nesting, stalled connections, text UTF-8 cannot carry, streams that go away or stop reading."""
import http.client
import json
import socket
import threading
import time

import pytest
from rtdl_plans import do, envelope, par, seq

from bt_exec.compilers.control_values import MAX_WAIT_MS

SLOW = {"default": {"outcome": "success", "duration_s": 2.0}}
TOKEN = "hostile-test-token"


@pytest.fixture
def app(serve_web):
    return lambda script=SLOW, api_options=None, token=None, **server_options: serve_web(
        script, token, api_options, **server_options)


def raw_exchange(server, data: bytes, timeout=10.0, host="127.0.0.1") -> bytes:
    """Send ``data`` as is on a fresh connection and read until the server closes it."""
    with socket.create_connection((host, server.port), timeout=timeout) as sock:
        sock.sendall(data)
        return read_until_closed(sock)


def read_until_closed(sock) -> bytes:
    received = b""
    while True:
        chunk = sock.recv(65536)
        if not chunk:
            return received
        received += chunk


def closed_by_server(sock) -> bool:
    """Whether the server closed ``sock`` without a word: an end of stream, or a reset (it closed before
    reading all the client sent)."""
    try:
        return read_until_closed(sock) == b""
    except ConnectionResetError:
        return True


def parse(response: bytes):
    """(status, headers, JSON body) of a raw HTTP/1.1 response that carries a Content-Length."""
    head, _, body = response.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {name.strip().lower(): value.strip() for name, _, value in (line.partition(":") for line in lines[1:])}
    return status, headers, json.loads(body[:int(headers["content-length"])])


def assert_guarded(headers):
    assert headers["content-type"] == "application/json"
    assert "default-src 'self'" in headers["content-security-policy"]
    assert headers["x-content-type-options"] == "nosniff"


def post_head(path, length_header, extra=""):
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"{length_header}{extra}\r\n").encode()


def test_a_negative_content_length_is_refused_and_runs_nothing(app):
    executor, server = app()
    plan_id = executor.submit(envelope(seq(do(), do())))["plan_id"]
    status, headers, answer = parse(raw_exchange(server, post_head("/api/cancel_all", "Content-Length: -5\r\n")
                                                 + b"{}"))
    assert (status, answer["error"]["code"]) == (400, "bad_request")
    assert_guarded(headers)
    assert not executor.get_plan_status(plan_id)["cancelled"]


@pytest.mark.parametrize("framing, code", [("", "bad_json"), ("Content-Length: 0\r\n", "bad_json"),
                                           ("Content-Length: twelve\r\n", "bad_request")])
def test_an_absent_empty_or_unreadable_body_is_refused_and_runs_nothing(app, framing, code):
    executor, server = app()
    plan_id = executor.submit(envelope(seq(do(), do())))["plan_id"]
    status, headers, answer = parse(raw_exchange(server, post_head("/api/cancel_all", framing)))
    assert (status, answer["error"]["code"]) == (400, code)
    assert_guarded(headers)
    assert not executor.get_plan_status(plan_id)["cancelled"]


def test_a_huge_content_length_is_refused_before_any_body_is_read(app):
    _, server = app(max_body_bytes=1000)
    # No body is sent: an answer other than 408 body_timeout is one given before reading any.
    status, headers, answer = parse(raw_exchange(server, post_head("/api/validate", f"Content-Length: {10 ** 12}\r\n")))
    assert (status, answer["error"]["code"]) == (413, "too_large") and headers["connection"] == "close"
    # Past what the HTTP layer takes for a length at all: refused there, in the same form.
    status, headers, answer = parse(raw_exchange(server, post_head("/api/validate", f"Content-Length: {10 ** 30}\r\n")))
    assert (status, answer["error"]["code"]) == (400, "bad_request")
    assert_guarded(headers)


def chunked(body: bytes, size=7) -> bytes:
    parts = [body[i:i + size] for i in range(0, len(body), size)]
    return b"".join(b"%x\r\n%s\r\n" % (len(part), part) for part in parts) + b"0\r\n\r\n"


def test_a_chunked_body_is_read_whole(app):
    executor, server = app()
    executor.submit(envelope(seq(do(), do())))
    body = json.dumps({"wait_ms": 5000}).encode()
    status, _, answer = parse(raw_exchange(server, post_head("/api/cancel_all", "Transfer-Encoding: chunked\r\n",
                                                             "Connection: close\r\n") + chunked(body)))
    assert status == 200 and answer["count"] == 1 and answer["finished"]


def test_a_chunked_body_past_the_limit_is_refused(app):
    _, server = app(max_body_bytes=1000)
    body = json.dumps({"graph": "x" * 5000}).encode()
    status, headers, answer = parse(raw_exchange(server, post_head("/api/validate", "Transfer-Encoding: chunked\r\n")
                                                 + chunked(body, 512)))
    assert (status, answer["error"]["code"]) == (413, "too_large")
    assert_guarded(headers)


@pytest.mark.parametrize("body", [b"[" * 200_000, b'{"graph": ' + b'{"a": ' * 50_000 + b"1" + b"}" * 50_001])
def test_deeply_nested_bodies_are_a_400_not_a_crash(app, body):
    _, server = app()
    status, headers, answer = parse(raw_exchange(server, post_head("/api/validate", f"Content-Length: {len(body)}\r\n")
                                                 + body))
    assert (status, answer["error"]["code"]) == (400, "bad_json") and "graph as a string" in answer["error"]["message"]
    assert_guarded(headers)
    assert parse(raw_exchange(server, b"GET /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"))[0] \
        == 200


@pytest.mark.parametrize("request_bytes", [
    b"GARBAGE\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: " + b"a" * 400_000 + b"\r\n\r\n",
    b"GET /" + b"a" * 400_000 + b" HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n",
    b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n",
])
def test_requests_the_http_layer_refuses_get_json_with_the_security_headers(app, request_bytes):
    _, server = app()
    status, headers, answer = parse(raw_exchange(server, request_bytes))
    assert (status, answer["error"]["code"]) == (400, "bad_request")
    assert_guarded(headers)


def test_a_body_that_stalls_is_answered_408_after_the_read_timeout(app):
    executor, server = app(read_timeout_s=1.0)
    plan_id = executor.submit(envelope(seq(do(), do())))["plan_id"]
    began = time.monotonic()
    status, headers, answer = parse(raw_exchange(server, post_head("/api/cancel_all", "Content-Length: 100\r\n")
                                                 + b'{"wait_ms": '))
    assert (status, answer["error"]["code"]) == (408, "body_timeout") and time.monotonic() - began > 0.9
    assert_guarded(headers)
    assert not executor.get_plan_status(plan_id)["cancelled"]


def test_bodies_received_at_once_are_bounded_in_bytes(app):
    _, server = app(max_body_bytes=1000, max_body_bytes_in_flight=1500, read_timeout_s=3.0)
    first = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    first.sendall(post_head("/api/validate", "Content-Length: 900\r\n") + b" " * 800)  # and stalls

    def second():  # a whole body: refused as too busy once the first's bytes are counted, else read (not JSON)
        return parse(raw_exchange(server, post_head("/api/validate", "Content-Length: 900\r\n") + b" " * 900))

    status, headers, answer = second()
    deadline = time.monotonic() + 10
    while answer["error"]["code"] != "too_busy" and time.monotonic() < deadline:
        status, headers, answer = second()
    assert (status, answer["error"]["code"]) == (503, "too_busy")
    assert_guarded(headers)
    assert parse(read_until_closed(first))[2]["error"]["code"] == "body_timeout"  # its bytes are given back
    first.close()
    body = json.dumps({"graph": {}}).encode()
    assert parse(raw_exchange(server, post_head("/api/validate", f"Content-Length: {len(body)}\r\n",
                                                "Connection: close\r\n") + body))[0] == 200


def get_plans(server) -> int:
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", "/api/plans")
    status = connection.getresponse().status
    connection.close()
    return status


def test_stalled_connections_give_way_to_requests_and_are_dropped_when_overdue(app):
    _, server = app(read_timeout_s=1.0, max_connections=6)
    stalled = []
    for _ in range(6):  # slowloris: a request head that never ends
        sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
        sock.sendall(b"GET /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Slow: ")
        stalled.append(sock)
    assert get_plans(server) == 200  # every place was taken by a connection serving nothing: one gave way
    for sock in stalled:  # each is dropped, for the newcomer or once its head is overdue (the socket's timeout
        assert closed_by_server(sock)  # would fail the test first)
        sock.close()


def test_idle_connections_and_gets_of_mcp_never_starve_the_api(app):
    _, server = app(max_connections=4)
    for _ in range(8):  # /mcp opens no event stream: answered at once, and the connection closed
        status, headers, answer = parse(raw_exchange(server, b"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                             b"Accept: text/event-stream\r\n\r\n"))
        assert (status, headers["allow"], answer["error"]["code"]) == (405, "POST", "method_not_allowed")
        assert_guarded(headers)
    kept_alive = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    kept_alive.request("GET", "/api/plans")
    assert kept_alive.getresponse().read()  # then idle, kept open
    silent = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(8)]  # never a byte
    assert [get_plans(server) for _ in range(3)] == [200] * 3
    assert closed_by_server(silent[0])  # the longest idle ones made room
    for sock in silent:
        sock.close()
    kept_alive.close()


def test_when_every_connection_serves_a_request_the_next_is_refused_until_one_ends(app):
    _, server = app(max_connections=2)
    streams = [socket.create_connection(("127.0.0.1", server.port), timeout=10) for _ in range(2)]
    for sock in streams:
        sock.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    status, headers, answer = parse(raw_exchange(server, b"GET /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"))
    assert (status, answer["error"]["code"]) == (503, "too_many_connections")
    assert_guarded(headers)
    streams[0].close()
    assert wait_for(lambda: server.api.events.stream_count == 1)
    assert wait_for(lambda: get_plans(server) == 200)
    streams[1].close()


def test_an_idle_kept_alive_connection_is_dropped_after_the_read_timeout(app):
    _, server = app(read_timeout_s=1.0)
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(b"GET /api/plans HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        received = read_until_closed(sock)  # closed by the server well before the socket's own timeout fails it
    assert received.startswith(b"HTTP/1.1 200")


def surrogate_plan(**more):
    # JSON text with lone surrogates, as a client may send it: valid JSON, not encodable as UTF-8 once decoded.
    return json.dumps({"graph": envelope(seq(do("grip \ud800"), do("lift")), description="bad \udfff text"),
                       **more}).encode()


def test_lone_surrogates_a_client_sends_never_break_an_answer_or_the_event_stream(app):
    executor, server = app(script={"default": {"outcome": "success", "duration_s": 0.05}})
    stream = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    stream.request("GET", "/api/events")
    events = stream.getresponse()
    assert events.status == 200
    for path, body in (("/api/validate", surrogate_plan()), ("/api/plans", surrogate_plan(run_id="lone-\ud800"))):
        status, _, answer = parse(raw_exchange(server, post_head(path, f"Content-Length: {len(body)}\r\n",
                                                                 "Connection: close\r\n") + body))
        assert status == 200, answer
    for _ in range(100):
        if executor.get_all_plans()["count"] == 0:
            break
        time.sleep(0.05)
    for path in ("/api/plans", "/api/finished", "/api/events/recent", "/api/plans/1/tree"):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", path)
        response = connection.getresponse()
        assert response.status in (200, 404), path
        json.loads(response.read().decode("ascii"))  # ASCII JSON, whatever the plan said
        connection.close()
    # The stream is still open and carries the next plan's events.
    follow_up = executor.submit(envelope(do("after")))["plan_id"]
    seen = []
    while not any(e.get("event") == "plan_complete" and e["plan_id"] == follow_up for e in seen):
        line = events.fp.readline()
        assert line, "the event stream was closed"
        if line.startswith(b"data: "):
            seen.append(json.loads(line[len(b"data: "):].decode("ascii")))
    stream.close()


def wait_for(condition, timeout=5.0):
    deadline = time.monotonic() + timeout
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    return condition()


def test_a_closed_event_stream_frees_its_slot_at_once(app):
    _, server = app(api_options={"max_streams": 2})
    first = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    second = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    for sock in (first, second):
        sock.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
        assert sock.recv(4096).startswith(b"HTTP/1.1 200")
    status, _, answer = parse(raw_exchange(server, b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                                                   b"Connection: close\r\n\r\n"))
    assert (status, answer["error"]["code"]) == (503, "too_many_streams")
    first.close()
    assert wait_for(lambda: server.api.events.stream_count == 1)
    second.close()


def test_an_event_stream_whose_reader_stops_reading_is_dropped(app):
    executor, server = app(script={"default": {"outcome": "success", "duration_s": 0.0}}, read_timeout_s=1.0)
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", server.port))
    sock.sendall(b"GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
    assert wait_for(lambda: server.api.events.stream_count == 1)
    big = "x" * 20_000
    for _ in range(4):  # megabytes of events the reader never takes
        executor.submit(envelope(par(*(do(big) for _ in range(100)))))
    assert wait_for(lambda: server.api.events.stream_count == 0, timeout=20)
    sock.close()


def test_reads_beyond_loopback_need_the_token(app):
    _, server = app(host="0.0.0.0", token=TOKEN)
    def get(path, headers=None):
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
        connection.request("GET", path, headers=headers or {})
        response = connection.getresponse()
        status = response.status
        connection.close()
        return status

    bearer = {"Authorization": f"Bearer {TOKEN}"}
    for path in ("/api/plans", "/api/finished", "/api/events/recent", "/api/plans/1/tree"):
        assert get(path) == 401, path
    assert get("/api/plans", bearer) == 200
    assert get("/api/info") == 200 and get("/") == 200  # what the page needs to ask for the token
    assert get("/api/events") == 401 and get("/api/events?token=nope") == 401
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=10)
    connection.request("GET", f"/api/events?token={TOKEN}")
    assert connection.getresponse().status == 200  # a browser's EventSource cannot send headers
    connection.close()


@pytest.mark.parametrize("wait_ms, named", [(1.0, "wait_ms"), (1e13, "wait_ms"), (float("inf"), None), (-1, "wait_ms"),
                                            (10 ** 30, "wait_ms"), (True, "wait_ms")])
def test_a_float_negative_or_absurd_wait_is_a_400_naming_the_field(app, wait_ms, named):
    executor, server = app()
    plan_id = executor.submit(envelope(seq(do(), do())))["plan_id"]
    body = json.dumps({"wait_ms": wait_ms}).encode()  # Infinity: Python's JSON extension, refused as not JSON
    status, headers, answer = parse(raw_exchange(server, post_head(f"/api/plans/{plan_id}/cancel",
                                                                   f"Content-Length: {len(body)}\r\n") + body))
    assert status == 400 and (named is None or named in answer["error"]["message"])
    assert not executor.get_plan_status(plan_id)["cancelled"]


@pytest.mark.parametrize("wait_ms", [MAX_WAIT_MS + 1, 2 ** 63 - 1])
def test_a_wait_past_the_cap_is_capped_and_said(app, wait_ms):
    executor, server = app()
    plan_id = executor.submit(envelope(seq(do(), do())))["plan_id"]
    body = json.dumps({"wait_ms": wait_ms}).encode()
    # An answered request keeps its connection open: the client says it closes, or it would wait for the server's
    # keep-alive limit, as long as its own read timeout.
    status, headers, answer = parse(raw_exchange(server, post_head(f"/api/plans/{plan_id}/cancel",
                                                                   f"Content-Length: {len(body)}\r\n",
                                                                   "Connection: close\r\n") + body))
    assert status == 200 and answer["finished"]
    assert answer["message"].endswith(f"(wait_ms capped at {MAX_WAIT_MS})")


def test_many_clients_at_once_all_get_answers(app):
    _, server = app(max_connections=64)
    statuses = []

    def client():
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=20)
        for _ in range(10):
            connection.request("GET", "/api/plans")
            response = connection.getresponse()
            response.read()
            statuses.append(response.status)
        connection.close()

    threads = [threading.Thread(target=client) for _ in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert statuses == [200] * 160
