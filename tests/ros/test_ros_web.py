"""The node's web app (web_port, web_host, web_token): one executor behind the services and the HTTP API."""
import http.client
import json
import socket
import subprocess
import sys
import time

import rosutil
from rosutil import do, plan, seq

TOKEN = "a-test-token"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def call_http(port, method, path, body=None, headers=None, timeout=10.0):
    """(status, JSON answer), retried while the node is still coming up (its port is bound before it serves)."""
    deadline = time.monotonic() + 20
    while True:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body).encode(),
                               headers={"Content-Type": "application/json", **(headers or {})})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        except ConnectionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)
        finally:
            connection.close()


def wait_tree(port, plan_id, predicate, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        status, tree = call_http(port, "GET", f"/api/plans/{plan_id}/tree")
        if status == 200 and predicate(tree):
            return tree
        if time.monotonic() > deadline:
            raise AssertionError(f"plan {plan_id}: {status} {tree}")
        time.sleep(0.05)


def test_the_node_serves_its_executor_over_http(ros, start_node, sim_script):
    port = free_port()
    node = start_node(sim_script=str(sim_script), web_port=port)
    status, plans = call_http(port, "GET", "/api/plans")
    assert (status, plans) == (200, {"count": 0, "plans": []})

    # submitted over ROS, seen over HTTP
    answer = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"), do()), description="over ros"))
    assert answer.accepted, answer.message
    status, plans = call_http(port, "GET", "/api/plans")
    assert [(p["plan_id"], p["description"]) for p in plans["plans"]] == [(answer.plan_id, "over ros")]
    tree = wait_tree(port, answer.plan_id, lambda tree: tree["ops"][1]["state"] == "running")
    assert tree["running"] and [op["op_id"] for op in tree["ops"]] == ["1", "2", "3"]

    # bt-exec watch reads the same
    watched = subprocess.run([sys.executable, "-m", "bt_exec.cli", "watch", "--url", f"http://127.0.0.1:{port}/",
                              "--once"], capture_output=True, text=True, timeout=60, cwd=rosutil.REPO)
    assert watched.returncode == 0, watched.stderr
    assert "├─ ▶ 2 do running: call sim.slow — sim.slow()" in watched.stdout.splitlines()  # with the call it makes

    # submitted over HTTP, seen (and cancelled) over ROS
    status, submitted = call_http(port, "POST", "/api/plans", {"graph": plan(seq(do()), description="over http")})
    assert status == 200 and submitted["accepted"], submitted
    record = None
    deadline = time.monotonic() + 15
    while record is None or "outcome" not in record:
        assert time.monotonic() < deadline, record
        response = ros.call(node.name, "get_status", plan_id=submitted["plan_id"])
        record = json.loads(response.status_json) if response.found else None
        time.sleep(0.05)
    assert record["outcome"] == "succeeded" and record["description"] == "over http"
    cancelled = ros.call(node.name, "cancel", plan_id=answer.plan_id, wait_ms=5000)
    assert cancelled.success and cancelled.finished, cancelled.message
    assert call_http(port, "GET", "/api/finished")[1]["plans"][0]["outcome"] == "cancelled"

    # an open event stream does not hold the node up as it stops
    stream = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    stream.request("GET", "/api/events")
    assert stream.getresponse().status == 200
    code = node.stop()  # None: it had to be killed
    stream.close()
    log = node.log()
    assert code == 0, log
    assert f"web app: http://127.0.0.1:{port}/ (no token)" in log and "Traceback" not in log


def test_beyond_loopback_requests_need_the_token(ros, start_node, sim_script):
    port = free_port()
    start_node(sim_script=str(sim_script), web_port=port, web_host="0.0.0.0", web_token=TOKEN)
    body = {"graph": plan(seq(do()))}
    assert call_http(port, "GET", "/api/plans")[0] == 401  # reads too, beyond loopback
    assert call_http(port, "GET", "/api/plans", headers={"Authorization": f"Bearer {TOKEN}"})[0] == 200
    status, refused = call_http(port, "POST", "/api/plans", body)
    assert status == 401 and refused["error"]["code"] == "token_required"
    status, answer = call_http(port, "POST", "/api/plans", body, headers={"Authorization": f"Bearer {TOKEN}"})
    assert status == 200 and answer["accepted"], answer


def test_beyond_loopback_without_a_token_the_node_will_not_start(start_node):
    node = start_node(ready=False, web_port=free_port(), web_host="0.0.0.0")
    code = node.process.wait(30)
    log = node.log()
    assert code == 2, log
    assert "cannot start: the web app bound to 0.0.0.0 (beyond loopback) needs a token" in log
    assert "Traceback" not in log


def test_a_taken_port_stops_the_start(start_node):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        node = start_node(ready=False, web_port=port)
        code = node.process.wait(30)
    log = node.log()
    assert code == 2, log
    assert f"cannot start: cannot serve the web app on 127.0.0.1:{port}" in log and "Traceback" not in log
