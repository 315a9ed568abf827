"""The node's groot2_port: Groot2's monitor protocol served over the node's executor, beside its services."""
import os
import socket
import struct
import time

import pytest

from rosutil import do, plan, seq

zmq = pytest.importorskip("zmq", reason="Groot2 needs pyzmq (the groot2 extra; python3-zmq)")

from bt_exec.groot2.ports import free_port_pair  # noqa: E402


def ask(port: int, kind: str) -> list[bytes]:
    """One request of Groot2's (6-byte header: protocol 2, type, id) and its reply's parts."""
    context = zmq.Context()
    client = context.socket(zmq.REQ)
    client.setsockopt(zmq.LINGER, 0)
    client.setsockopt(zmq.RCVTIMEO, 10_000)
    client.connect(f"tcp://127.0.0.1:{port}")
    try:
        request_id = int.from_bytes(os.urandom(4), "little")
        client.send(struct.pack("<BBI", 2, ord(kind), request_id))
        reply = client.recv_multipart()
        if reply[0] != b"error":
            assert struct.unpack("<BBI", reply[0][:6]) == (2, ord(kind), request_id) and len(reply[0]) == 22
        return reply
    finally:
        client.close(0)
        context.term()


def test_the_node_serves_its_newest_plan_to_groot2(ros, start_node, sim_script):
    port = free_port_pair()
    node = start_node(sim_script=str(sim_script), groot2_port=port)
    assert ask(port, "T")[0] == b"error"  # no plan yet, said so
    answer = ros.call(node.name, "submit", graph_json=plan(seq(do("sim.slow"), do()), description="over ros"))
    assert answer.accepted, answer.message
    deadline = time.monotonic() + 15
    while (reply := ask(port, "S"))[0] == b"error" or dict(struct.iter_unpack("<HB", reply[1])).get(2) != 1:
        assert time.monotonic() < deadline, reply
        time.sleep(0.05)
    assert dict(struct.iter_unpack("<HB", reply[1])) == {1: 1, 2: 1, 3: 0}  # the slow call running, the last to come
    _header, xml = ask(port, "T")
    assert b'_uid="1"' in xml and b"<sim.slow" in xml
    code = node.stop()
    assert code == 0 and f"Groot2: connect to 127.0.0.1:{port}" in node.log()


def test_a_taken_groot2_port_stops_the_start(start_node):
    port = free_port_pair()
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", port))
        holder.listen()
        node = start_node(ready=False, groot2_port=port)
        assert node.process.wait(30) == 2
    assert "groot2_port: cannot serve Groot2" in node.log()
